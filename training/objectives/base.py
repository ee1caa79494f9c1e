"""The objective interface and its registry.

An objective says which data a run reads, how examples become features and batches, which model
class to build, and how the dev set is scored; the loop in training/loop.py is the same for all.
Its own settings are a frozen dataclass (`Settings`), given in the training config under a
section named after the objective and checked by advrace.core.checking like every other config:

    objective: span_extraction
    span_extraction: {doc_stride: 128, max_answer_tokens: 30}

A field's `metadata={"min": N}` is its smallest value (advrace.core.checking). Every dev metric is higher-is-better, so
"best checkpoint" means the same everywhere.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass
from typing import Any, ClassVar

from advrace.core.checking import build_dataclass, config_dict
from advrace.core.registry import Registry
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.models.runtime.feature_store import tokenizer_fingerprint

PLUGIN_GROUP = "advrace.objectives"


@dataclass(frozen=True)
class NoSettings:
    """The settings of an objective that has none of its own."""


class Objective:
    name: ClassVar[str]  # the config's `objective`, and the name of its settings section
    Settings: ClassVar[type] = NoSettings
    metric: ClassVar[str]  # the key of the dev score that picks the best checkpoint
    label: ClassVar[str]  # how messages name that score
    architecture: ClassVar[str]  # the class saved checkpoints are loaded with
    summary: ClassVar[str] = ""  # what it trains, for `advrace train --help`
    tasks: ClassVar[tuple[str, ...]] = (MULTIPLE_CHOICE,)  # the example tasks it reads
    recipes: ClassVar[tuple[str, ...] | None] = ("finetune",)  # recipe kinds it takes; None: all
    # the frozen dataclass `features` makes, whose objects advrace.models.runtime.feature_store keeps on
    # disk; None: features are kept in memory (what a plugin's objective gets unless it names one)
    feature_class: ClassVar[type | None] = None

    def __init__(self, cfg):
        self.cfg = cfg  # the TrainConfig: shared settings such as max_length
        self.settings = cfg.objective_settings()

    @classmethod
    def settings_from_dict(cls, values: Any, where: str):
        """The objective's settings from its config section, types and ranges checked."""
        return build_dataclass(cls.Settings, {} if values is None else values, where)

    def model_class(self):
        raise NotImplementedError

    def features(self, tokenizer, examples: list, seed: int, dev: bool = False) -> list:
        """Features of `examples`, made question by question (see advrace.models.runtime.feature_store)."""
        raise NotImplementedError

    def encoding_key(self, seed: int, dev: bool) -> dict:
        """What `features` depends on besides the examples and the tokenizer."""
        features = type(self).features
        return {"objective": self.name, "features": f"{features.__module__}.{features.__qualname__}",
                "settings": config_dict(self.settings), "max_length": self.cfg.max_length,
                "seed": seed, "dev": dev}

    def encoded(self, store, tokenizer, parts: list, seed: int, dev: bool = False,
                what: str = "features"):
        """`features` of the concatenated `parts` (lists of examples), kept in `store`."""
        encode = functools.partial(self.features, tokenizer, seed=seed, dev=dev)
        if self.feature_class is None:
            return encode([ex for part in parts for ex in part])
        key = {**self.encoding_key(seed, dev), "tokenizer": tokenizer_fingerprint(tokenizer)}
        return store.encode(encode, self.feature_class, parts, key, what)

    def collate(self, features: list, pad_token_id: int) -> dict:
        raise NotImplementedError

    def evaluate(self, model, loader, accelerator, features: list, examples: list) -> dict:
        raise NotImplementedError


def dev_rows(loader, accelerator, score_batch):
    """Each dev row once, as a tuple of Python values, whichever process scored it:
    `score_batch(batch)` gives a tuple of per-row tensors, the row's index first. Accelerate may
    repeat rows to give the processes even shares, and the gather does not always drop the
    repeats, so each index is yielded at its first appearance only."""
    import torch  # deferred: start-up time (torch)

    seen = set()
    for batch in loader:
        with torch.no_grad():
            columns = accelerator.gather_for_metrics(score_batch(batch))
        for row in zip(*(column.tolist() for column in columns)):
            if row[0] not in seen:
                seen.add(row[0])
                yield row


def dev_token_scores(loader, accelerator, score_batch) -> dict:
    """Teacher-forced next-token accuracy and loss per token on dev targets, for the generator
    objectives: `score_batch(batch)` gives per-row question index, hits, target counts and summed
    loss (see `dev_rows`)."""
    right = total = targets = 0
    loss_sum = 0.0
    for _, h, c, l in dev_rows(loader, accelerator, score_batch):
        right, total, loss_sum, targets = right + h, total + c, loss_sum + l, targets + 1
    return {"dev_token_accuracy": right / max(total, 1), "dev_loss": loss_sum / max(total, 1),
            "dev_targets": targets}


def setting_keys(settings_class: type) -> tuple[str, ...]:
    """The keys of a settings section, as a config spells them."""
    return tuple(f.metadata.get("key", f.name) for f in dataclasses.fields(settings_class))


REGISTRY: Registry[type[Objective]] = Registry("training objective", PLUGIN_GROUP)


def register_objective(cls: type[Objective]) -> type[Objective]:
    """Class decorator: an objective module registers its objective when imported (third-party
    ones are imported through the `advrace.objectives` entry-point group)."""
    name = getattr(cls, "name", None)
    if not isinstance(name, str) or not name.isidentifier():
        raise TypeError(f"{cls.__name__}.name must be an identifier (it names a config section), got {name!r}")
    if not (isinstance(cls.Settings, type) and dataclasses.is_dataclass(cls.Settings)):
        raise TypeError(f"{cls.__name__}.Settings must be a dataclass")
    return REGISTRY.register(cls)


def objective_names() -> tuple[str, ...]:
    """Every objective, third-party ones included."""
    return tuple(sorted(REGISTRY.names()))


def objective_class(name: str, where: str = "objective") -> type[Objective]:
    """The objective registered as `name`; entry points are read only for a name not built in."""
    return REGISTRY.lookup(name, where)


def get_objective(cfg) -> Objective:
    """The objective of a TrainConfig, ready to make its features and model."""
    return objective_class(cfg.objective)(cfg)
