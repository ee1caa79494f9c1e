"""Examples in, batches out: loading data sets and batching them the same way on every process.

Training batches group questions of similar length (RACE passages run from 100 to 500+ tokens,
so random batches would be mostly padding) and their order depends only on the seed and the
epoch. That makes the data order a pure function, so `--resume` can skip exactly the batches an
interrupted run had seen, on any number of processes.
"""

from __future__ import annotations

import functools
import math

import torch

from advrace.core.errors import ConfigError
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.formats import load
from advrace.models.encoders.mc_encoding import MCFeature, collate_mc, encode_mc
from advrace.models.runtime.batching import length_sorted_batches
from advrace.models.runtime.feature_store import feature_lengths, take_features
from advrace.release import read_split

from .config import DataConfig, resolve_data_path

BUCKET_BATCHES = 50  # batches per shuffled pool that is then sorted by length
TASK_WORDS = {MULTIPLE_CHOICE: "multiple-choice (RACE)", EXTRACTIVE_QA: "extractive (SQuAD)"}


def load_examples(spec: DataConfig, default_part: str = "train",
                  tasks: tuple[str, ...] = (MULTIPLE_CHOICE,)) -> list:
    """Examples of a data set or of one release split, at most `limit`, of one of `tasks`."""
    if spec.release:
        examples = read_split(spec.release, spec.split or "original")
        if spec.limit is not None:
            examples = examples[:spec.limit]
    else:
        examples = load(resolve_data_path(spec), spec.format, lenient=spec.lenient, limit=spec.limit,
                        part=spec.split or default_part).examples
    wrong = [ex for ex in examples if ex.task not in tasks]
    if wrong:
        want = " or ".join(TASK_WORDS.get(t, t) for t in tasks)
        raise ConfigError(f"{spec.describe()}: this objective reads {want} questions, "
                          f"got {wrong[0].task} examples ({wrong[0].id})")
    if not examples:
        raise ConfigError(f"{spec.describe()}: no questions to train or evaluate on")
    return examples


def encode(tokenizer, examples: list, max_length: int) -> list[MCFeature]:
    return encode_mc(tokenizer, examples, max_length=max_length)


class FeatureDataset(torch.utils.data.Dataset):
    """Features in memory or in a FeatureTable (advrace.models.runtime.feature_store), which the loader
    reads a batch at a time."""

    def __init__(self, features, with_index: bool = False):
        self.features = features
        self.with_index = with_index

    def __len__(self) -> int:
        return len(self.features)

    def __getitem__(self, i: int):
        return (i, self.features[i]) if self.with_index else self.features[i]

    def __getitems__(self, indices: list[int]) -> list:
        features = take_features(self.features, indices)
        return list(zip(indices, features)) if self.with_index else features


def collate(items: list, collate_fn=collate_mc, pad_token_id: int = 0) -> dict:
    """`collate_fn`'s batch, plus each item's position in the data set when the items carry one."""
    if items and isinstance(items[0], tuple):
        batch = collate_fn([f for _, f in items], pad_token_id)
        batch["index"] = torch.tensor([i for i, _ in items], dtype=torch.long)
        return batch
    return collate_fn(items, pad_token_id)


class BucketBatchSampler:
    """Batches of similar-length questions in an order fixed by (seed, epoch).

    Each epoch shuffles the questions, sorts pools of BUCKET_BATCHES batches by length with
    `length_sorted_batches`, and shuffles the batches; the one short batch goes last, where
    accelerate's sharding expects it.
    """

    drop_last = False

    def __init__(self, features, batch_size: int, seed: int):
        self.lengths = feature_lengths(features)
        self.batch_size = batch_size
        self.seed = seed
        self.epoch = 0

    def select_epoch(self, epoch: int) -> None:
        # Not `set_epoch`: accelerate's loaders call that with their own count of iterations,
        # which starts again at 0 in a resumed run.
        self.epoch = epoch

    def __len__(self) -> int:
        return math.ceil(len(self.lengths) / self.batch_size)

    def batches(self, epoch: int) -> list[list[int]]:
        g = torch.Generator().manual_seed(self.seed * 100_003 + epoch)
        order = torch.randperm(len(self.lengths), generator=g).tolist()
        pool = BUCKET_BATCHES * self.batch_size
        full, short = [], []
        for start in range(0, len(order), pool):
            chunk = order[start:start + pool]
            for b in length_sorted_batches([self.lengths[i] for i in chunk], self.batch_size, length=int):
                (full if len(b) == self.batch_size else short).append([chunk[i] for i in b])
        shuffled = [full[i] for i in torch.randperm(len(full), generator=g).tolist()]
        return shuffled + short

    def __iter__(self):
        return iter(self.batches(self.epoch))


def _loader_generator() -> torch.Generator:
    # A DataLoader without its own generator draws a seed from the global torch RNG each time
    # it is iterated, which would shift dropout masks after a resume.
    return torch.Generator().manual_seed(0)


def train_loader(features, batch_size: int, seed: int, pad_token_id: int,
                 num_workers: int = 0, collate_fn=collate_mc) -> tuple[torch.utils.data.DataLoader, BucketBatchSampler]:
    sampler = BucketBatchSampler(features, batch_size, seed)
    loader = torch.utils.data.DataLoader(
        FeatureDataset(features), batch_sampler=sampler, num_workers=num_workers,
        collate_fn=functools.partial(collate, collate_fn=collate_fn, pad_token_id=pad_token_id),
        generator=_loader_generator())
    return loader, sampler


def eval_loader(features, batch_size: int, pad_token_id: int,
                num_workers: int = 0, collate_fn=collate_mc) -> torch.utils.data.DataLoader:
    """Questions in length order (little padding), each carrying its index so that predictions
    gathered from several processes can be matched to questions."""
    order = [i for b in length_sorted_batches(feature_lengths(features), batch_size, length=int) for i in b]
    dataset = torch.utils.data.Subset(FeatureDataset(features, with_index=True), order)
    return torch.utils.data.DataLoader(
        dataset, batch_size=batch_size, shuffle=False, num_workers=num_workers,
        collate_fn=functools.partial(collate, collate_fn=collate_fn, pad_token_id=pad_token_id),
        generator=_loader_generator())
