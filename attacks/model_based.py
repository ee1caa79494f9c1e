"""What the two model-based attacks share: a trained checkpoint, batched data-parallel inference
over a whole split, and the replacement of the three distractors (AdvRACE sections 3.1-3.2).

A subclass proposes ranked candidate distractors for a batch of questions (`candidates`); this
class chooses three per question, keeps an original distractor for each one it could not fill
(counted), optionally shuffles the options with the question's own seeded generator (the label
follows the answer), and records old and new distractors in the provenance.
"""

from __future__ import annotations

import functools
import hashlib
import json
from abc import abstractmethod
from dataclasses import dataclass
from pathlib import Path
from statistics import mean

from advrace.core.distractors import jaccard_distance, match_format, replace_distractors, token_overlap
from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import count_words
from advrace.models.loading import checkpoint_name
from advrace.models.precision import inference_device, precision_info, use_bf16
from advrace.models.sharding import map_sharded

from .base import Attack, Outcome


@dataclass(frozen=True)
class DistractorAttackConfig:
    model: str = ""  # the checkpoint folder (or a Hub name, online)
    shuffle: bool = False  # True: options in a seeded random order; False: the answer keeps its slot
    max_overlap_answer: float = 0.5  # the largest share of a candidate's words found in the answer
    batch_size: int = 16
    # False: fp32, the same candidates on any machine; True: bf16 autocast (faster on GPUs);
    # None: bf16 where the device computes it natively, so the split depends on the hardware
    bf16: bool | None = False
    match_answer_format: bool = True  # capitalise and end new distractors like the answer


def checkpoint_sha256(path: str | Path) -> str | None:
    """One digest of every file of a checkpoint folder (names and contents); None for a Hub name."""
    root = Path(path)
    if not root.is_dir():
        return None
    h = hashlib.sha256()
    for p in sorted(q for q in root.rglob("*") if q.is_file()):
        h.update(p.relative_to(root).as_posix().encode() + b"\0")
        with open(p, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def training_info(path: str | Path) -> dict:
    """What `advrace train` recorded about a checkpoint folder ({} when it recorded nothing)."""
    info = Path(path) / "training_info.json"
    if not info.is_file():
        return {}
    try:
        return json.loads(info.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, OSError):
        return {}


def checkpoint_objective(path: str | Path) -> str | None:
    """The training objective recorded by `advrace train`, when the folder has one."""
    return training_info(path).get("objective")


class CheckpointAttack(Attack):
    """An attack that queries a model checkpoint (`config.model`): it works on whole batches, so
    one example is a batch of one, and the manifest records the checkpoint's sha256 and how the
    model computed (precision, device type, torch version)."""

    batched = True
    _ran_on: tuple | None = None  # (device, bf16) of the loaded model, set by the loader

    @functools.cached_property
    def checkpoint_sha256(self) -> str | None:
        return checkpoint_sha256(self.config.model)

    def loaded_on(self, device, bf16: bool) -> None:
        self._ran_on = (device, bool(bf16))

    def inference(self) -> dict:
        """How the model ran, or, before it is loaded, how the loader will run it."""
        if self._ran_on is None:
            device = inference_device()
            return precision_info(device, use_bf16(self.config.bf16, device))
        return precision_info(*self._ran_on)

    def describe(self) -> dict:
        """The checkpoint by name and sha256, never by its local path (advrace.models.loading)."""
        info = super().describe()
        info["config"] = {**info["config"], "model": checkpoint_name(self.config.model)}
        return {**info, "checkpoint_sha256": self.checkpoint_sha256,
                "inference": self.inference()}

    def apply(self, example) -> Outcome:
        return self.apply_batch([example])[0]

    def perturb(self, example, rng):
        return self.apply(example).example


class DistractorAttack(CheckpointAttack):
    tasks = (MULTIPLE_CHOICE,)
    objective: str  # the `advrace train` objective that makes this attack's checkpoints
    train_hint: str

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        if not self.config.model:
            raise ConfigError(f"attack {self.name!r} needs config.model: a checkpoint folder made "
                              f"with {self.train_hint}")
        if self.config.batch_size < 1:
            raise ConfigError(f"attack {self.name!r}: batch_size must be at least 1")
        found = checkpoint_objective(self.config.model)
        if found is not None and found != self.objective:
            raise ConfigError(f"attack {self.name!r}: {self.config.model} was trained with objective "
                              f"{found!r}, not {self.objective!r}; train one with {self.train_hint}")

    @abstractmethod
    def candidates(self, examples: list, progress: bool = False) -> list[list[str]]:
        """Ranked candidate distractors per example, best first (one process's shard)."""

    @abstractmethod
    def select(self, candidates: list[str], example) -> list[str]:
        """Up to three of the candidates."""

    def apply_batch(self, examples: list, state=None, progress: bool = False) -> list[Outcome]:
        for ex in examples:
            if ex.task not in self.tasks:
                raise ConfigError(f"attack {self.name!r} does not apply to {ex.task} examples")
        ranked = map_sharded(lambda shard: self.candidates(shard, progress), examples, state)
        return [self._replace(ex, cands) for ex, cands in zip(examples, ranked)]

    def _replace(self, example, candidates: list[str]) -> Outcome:
        chosen = self.select(candidates, example)
        if self.config.match_answer_format:
            chosen = [match_format(c, example.answer) for c in chosen]
        if not chosen:
            return Outcome(example, False, "no acceptable candidate")
        order = None
        if self.config.shuffle:
            order = list(range(len(example.options)))
            self.rng_for(example).shuffle(order)
        new, kept = replace_distractors(example, chosen, order)
        return Outcome(new.with_provenance(
            attack=self.name, original_distractors=list(example.distractors),
            new_distractors=chosen, kept_original=kept, candidates=candidates[:20]), True)

    def summarize(self, examples: list) -> dict:
        """AdvRACE's option statistics: lengths, diversity (Jaccard) and closeness to the answer."""
        replaced = [(ex, r) for ex in examples for r in ex.provenance
                    if r.get("attack") == self.name and "new_distractors" in r]
        new = [d for _, r in replaced for d in r["new_distractors"]]
        pairwise = [jaccard_distance(a, b) for _, r in replaced
                    for i, a in enumerate(r["new_distractors"]) for b in r["new_distractors"][i + 1:]]
        overlap = [token_overlap(d, ex.answer) for ex, r in replaced for d in r["new_distractors"]]
        untouched = [ex for ex in examples if not any(r.get("attack") == self.name and "new_distractors" in r
                                                      for r in ex.provenance)]
        avg = lambda xs, nd=4: round(mean(xs), nd) if xs else 0.0  # noqa: E731
        return {
            "checkpoint_sha256": self.checkpoint_sha256,
            "questions_replaced": len(replaced),
            "avg_new_distractor_words": avg([count_words(d) for d in new], 2),
            "avg_answer_words": avg([count_words(ex.answer) for ex in examples], 2),
            "avg_pairwise_jaccard_distance": avg(pairwise),
            "avg_answer_overlap": avg(overlap),
            "questions_keeping_original_distractors":
                sum(1 for _, r in replaced if r["kept_original"]) + len(untouched),
            "original_distractors_kept": sum(r["kept_original"] for _, r in replaced)
                + sum(len(ex.options) - 1 for ex in untouched),
        }
