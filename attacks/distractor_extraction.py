"""Distractor extraction (DE, AdvRACE section 3.1): distractors taken from the passage itself.

A span extractor trained on RACE with the answer inserted into the passage (`advrace train
configs/train/de-cpu.yaml`) reads the passage *without* the answer; its best spans are places a
reader matching words against the question would also look, which makes them distractors that
fool such readers. The top `n_best` spans over all windows (spans crossing the question or
padding excluded) are filtered: not across a line break, then DistractorAttack's validity
filters (not the answer in other words, not a sentence the passage states where the question asks
what it states, not a span that begins or ends inside a passage word, nothing a one-word span
beside sentence options gives away), then little overlap with each other. Runs of spaces inside a span become one space.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.core.distractors import select_distractors
from advrace.models.encoders.span_scoring import load_span_model

from .base import register
from .distractors import DistractorAttack, DistractorAttackConfig


@dataclass(frozen=True)
class DistractorExtractionConfig(DistractorAttackConfig):
    n_best: int = 20
    max_answer_tokens: int = 30  # the longest span considered
    max_overlap_each_other: float = 0.5
    max_length: int = 384  # tokens per window
    doc_stride: int = 128  # overlap of consecutive windows


@register
class DistractorExtraction(DistractorAttack):
    name = "distractor_extraction"
    Config = DistractorExtractionConfig
    objectives = ("span_extraction",)
    train_hint = "`advrace train configs/train/de-cpu.yaml`"

    def _scorer(self):
        if getattr(self, "_span_scorer", None) is None:
            cfg = self.config
            self._span_scorer = load_span_model(cfg.model, what=f"attack {self.name!r}", hint=self.train_hint,
                                                batch_size=cfg.batch_size, max_length=cfg.max_length,
                                                doc_stride=cfg.doc_stride,
                                                max_answer_tokens=cfg.max_answer_tokens, bf16=cfg.bf16)
            self.loaded_on(self._span_scorer.device, self._span_scorer.bf16)
        return self._span_scorer

    def candidates(self, examples, progress=False):
        if not examples:
            return []
        spans = self._scorer().n_best([ex.question for ex in examples], [ex.passage for ex in examples],
                                      self.config.n_best, progress=progress, desc=self.name)
        # A span across a line break joins two paragraphs (or a title and its text): no option.
        return [list(dict.fromkeys(" ".join(s.text.split()) for s in ranked if "\n" not in s.text))
                for ranked in spans]

    def select(self, candidates, example):
        """The first three, in the order given, that overlap little with each other (the paper)."""
        cfg = self.config
        return select_distractors(candidates, example.answer, max_overlap_answer=cfg.max_overlap_answer,
                                  max_overlap_each_other=cfg.max_overlap_each_other)
