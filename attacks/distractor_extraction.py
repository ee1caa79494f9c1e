"""Distractor extraction (DE, AdvRACE section 3.1): distractors taken from the passage itself.

A span extractor trained on RACE with the answer inserted into the passage (`advrace train
configs/train/de-cpu.yaml`) reads the passage *without* the answer; its best spans are places a
reader matching words against the question would also look, which makes them distractors that
fool such readers. The top `n_best` spans over all windows (spans crossing the question or
padding excluded) are filtered: not the answer, not containing it, little overlap with it and
with each other.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.distractors import select_distractors

from .base import register
from .model_based import DistractorAttack, DistractorAttackConfig


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
    objective = "span_extraction"
    train_hint = "`advrace train configs/train/de-cpu.yaml`"

    def _load(self):
        if getattr(self, "_model", None) is None:
            from transformers import AutoModelForQuestionAnswering

            from .loading import load_model

            self._model, self._tokenizer, self._device, self._bf16 = load_model(
                AutoModelForQuestionAnswering, self.config.model, self.config.bf16,
                f"attack {self.name!r}", self.train_hint)
        return self._model, self._tokenizer

    def candidates(self, examples, progress=False):
        import torch
        from tqdm.auto import tqdm

        from advrace.evaluation import _attention_backends
        from advrace.mc_encoding import length_sorted_batches
        from advrace.span_decoding import best_spans, merge_windows
        from advrace.span_encoding import collate_windows, encode_windows

        if not examples:
            return []
        model, tokenizer = self._load()
        cfg = self.config
        windows = encode_windows(tokenizer, [ex.question for ex in examples],
                                 [ex.passage for ex in examples], max_length=cfg.max_length,
                                 stride=cfg.doc_stride)
        per_example: list[list] = [[] for _ in examples]
        pad = tokenizer.pad_token_id or 0
        batches = length_sorted_batches(windows, cfg.batch_size)
        with torch.inference_mode(), _attention_backends(self._device), \
                torch.autocast(self._device.type, dtype=torch.bfloat16, enabled=self._bf16):
            for idx in tqdm(batches, desc=self.name, unit="batch", disable=not progress, leave=False):
                batch = collate_windows([windows[i] for i in idx], pad, labels=False)
                out = model(**{k: v.to(self._device) for k, v in batch.items()})
                starts, ends = out.start_logits.float().cpu(), out.end_logits.float().cpu()
                for row, i in enumerate(idx):
                    w = windows[i]
                    per_example[w.example].append(best_spans(
                        starts[row], ends[row], w.offsets, w.sequence_ids,
                        examples[w.example].passage, n_best=cfg.n_best,
                        max_answer_tokens=cfg.max_answer_tokens, top_k=cfg.n_best))
        return [[s.text for s in merge_windows(spans, cfg.n_best)] for spans in per_example]

    def select(self, candidates, example):
        cfg = self.config
        return select_distractors(candidates, example.answer, max_overlap_answer=cfg.max_overlap_answer,
                                  max_overlap_each_other=cfg.max_overlap_each_other)
