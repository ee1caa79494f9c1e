"""What the two model-based attacks share (AdvRACE sections 3.1-3.2): a trained checkpoint,
batched data-parallel inference over a whole split, and the replacement of the three distractors.

A subclass (a recipe: distractor_extraction.py, distractor_generation.py) proposes ranked
candidate distractors for a batch of questions (`candidates`) and chooses three (`select`). In
between, this class runs the steps each in its own module of this package: the candidates, once
per build (`candidate_cache`); the shared validity checks, the answerability judge among them when
`judge:` is set (`checks`); re-ranking by readers (`reader_ranking`); the replacement and its
provenance (`replacement`); the split's statistics (`statistics`); and what the manifest records
of every model used (`model_records`).
"""

from __future__ import annotations

import functools
from abc import abstractmethod
from collections import Counter

from advrace.core.errors import ConfigError
from advrace.core.paths import models_named
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.models.judge import load_judge
from advrace.models.runtime.checkpoint_info import base_of, training_info
from advrace.models.runtime.precision import cpu_threads, inference_device
from advrace.models.runtime.sharding import map_sharded

from ..base import Outcome
from ..base_checkpoint import CheckpointAttack
from .candidate_cache import cached_candidates
from .checks import ChecksInUse, checks_in_use, vet_candidates
from .config import check_filters
from .model_records import demo_training_data, judge_record, paraphrase_encoder, reader_record
from .reader_ranking import make_readers, rank_by_readers
from .replacement import replace_with_chosen
from .statistics import option_statistics, reader_statistics


class DistractorAttack(CheckpointAttack):
    tasks = (MULTIPLE_CHOICE,)
    uses = ("stopwords", "wordnet")  # content words (grounding, answer checks); near meanings of a short answer
    objectives: tuple[str, ...]  # the `advrace train` objectives whose checkpoints this attack reads
    train_hint: str

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        if not self.config.model:
            raise ConfigError(f"attack {self.name!r} needs config.model: a checkpoint folder made "
                              f"with {self.train_hint}")
        if self.config.batch_size < 1:
            raise ConfigError(f"attack {self.name!r}: batch_size must be at least 1")
        # read once: subclasses take their defaults from it too
        self._training_info = training_info(self.config.model)
        found = self._training_info.get("objective")
        if found is not None and found not in self.objectives:
            raise ConfigError(f"attack {self.name!r}: {self.config.model} was trained with objective "
                              f"{found!r}, not {' or '.join(map(repr, self.objectives))}; train one with "
                              f"{self.train_hint}")
        check_filters(self.config, f"attack {self.name!r}")
        self._rejected_total: Counter = Counter()

    @abstractmethod
    def candidates(self, examples: list, progress: bool = False) -> list[list[str]]:
        """Ranked candidate distractors per example, best first (one process's shard)."""

    @abstractmethod
    def select(self, candidates: list[str], example) -> list[str]:
        """Up to three of the candidates, tried in the order given (the model's rank, or the
        reader's when `select_with` is set), under the subclass's rule against near-copies."""

    # ---------------------------------------------------------------- the steps, in order

    def apply_batch(self, examples: list, state=None, progress: bool = False) -> list[Outcome]:
        for ex in examples:
            if ex.task not in self.tasks:
                raise ConfigError(f"attack {self.name!r} does not apply to {ex.task} examples")
        # the generator's, the encoder's and the readers' threads fitted to the machine's load
        # (a subclass may fit its own batches again: advrace.models.runtime.precision.cpu_threads)
        with cpu_threads(inference_device()):
            checks = self._checks.showing_progress(progress)
            for check in (*checks.questions, *checks.single, *checks.batched):  # the judge's margin, say
                check.prepare(examples, checks.ctx, checks.settings, where=f"attack {self.name!r}", state=state)
            vetted = map_sharded(lambda shard: self.vet(shard, progress), examples, state)
        for v in vetted:
            self._rejected_total.update(v["rejected"])
        return [self._replace(ex, v) for ex, v in zip(examples, vetted)]

    def vet(self, examples: list, progress: bool = False) -> list[dict]:
        """One shard's candidates through the shared checks (`checks.vet_candidates`, the judge
        among them) and, with a reader, re-ranked by it: per example also its `scores` of the
        passed ones it scored and of the gold (`gold_score`)."""
        ranked = cached_candidates(self, examples, progress)
        vetted = vet_candidates(examples, ranked, self._checks.showing_progress(progress),
                                self.config.match_answer_format)
        if self.config.select_with is not None:
            rank_by_readers(self._readers(), examples, vetted, self.config.select_with_pool, progress,
                            f"{self.name} reader")
        return vetted

    def _replace(self, example, vetted: dict) -> Outcome:
        return replace_with_chosen(example, vetted, self.select, name=self.name,
                                   match_answer_format=self.config.match_answer_format,
                                   rng=self.rng_for(example) if self.config.shuffle else None,
                                   reader_scored=self.config.select_with is not None)

    # ---------------------------------------------------------------- the models it asks

    @functools.cached_property
    def _checks(self) -> ChecksInUse:
        """The shared checks this config turns on, the judge (`judge:`) among them: the audit asks
        the same objects."""
        return checks_in_use(self.name, self.config, self.resources, judge=self.answer_judge)

    def _readers(self) -> list:
        if getattr(self, "_select_readers", None) is None:
            self._select_readers = make_readers(self.config)
        return self._select_readers

    @functools.cached_property
    def answer_judge(self):
        """The judge (None without `judge:`), loaded once, in fp32 whatever the attack's own
        precision: its verdicts compare two scores, and bf16's rounding (2^-8 of a score) would
        move them from machine to machine."""
        cfg = self.config
        if cfg.judge is None:
            return None
        return load_judge(cfg.judge, cfg.judge_margin, batch_size=cfg.batch_size, bf16=False,
                          where=f"attack {self.name!r}", refusal_rate=cfg.judge_refusal_rate)

    @functools.cached_property
    def reader_info(self) -> dict | None:
        return reader_record(self.config.select_with)

    @property
    def judge_info(self) -> dict | None:
        return judge_record(self.config, self.__dict__.get("answer_judge"))

    # ---------------------------------------------------------------- what the release records

    def describe(self) -> dict:
        """With a reader or a judge, the split depends on it: its name and hash, never its local path."""
        info = super().describe()
        judge = self.judge_info  # hashes the judge's folder: once
        if judge is not None:
            info["config"] = {**info["config"], "judge": judge["name"]}
            info.update(model_dependent=True, judge=judge)
        else:  # without a judge, the manifest is what it was before the key existed
            info["config"] = {k: v for k, v in info["config"].items()
                              if k not in ("judge", "judge_margin", "judge_refusal_rate")}
        if self.config.max_answer_cosine is not None:
            info["paraphrase_encoder"] = paraphrase_encoder()
        if self.reader_info is not None:
            info["config"] = {**info["config"], "select_with": self.reader_info["name"]}
            info.update(model_dependent=True, select_with=self.reader_info)
        sample = demo_training_data(self._training_info)
        if sample:
            info["trained_on_sample"] = sample
        base = base_of(self._training_info)
        if base:  # a scored model of the same base is confounded on this split (the report says so)
            info["trained_from"] = base
        return info

    def summarize(self, examples: list) -> dict:
        """AdvRACE's option statistics: lengths, diversity (Jaccard) and closeness to the answer."""
        extra = {}
        if self.config.select_with is not None:
            extra = reader_statistics(self.name, examples, len(models_named(self.config.select_with)),
                                      self.reader_info["name"])
        return {"checkpoint_sha256": self.checkpoint_sha256,
                **option_statistics(self.name, examples, self._rejected_total), **extra}
