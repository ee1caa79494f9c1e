"""Span-extraction inputs: `[CLS] question [SEP] context-window [SEP]` with a sliding window.

Training, distractor extraction and the SQuAD models encode the same way: a context longer than
`max_length` is cut into windows that overlap by `stride` tokens, each window remembers the
character offsets of its context tokens, and `advrace.models.encoders.span_decoding.merge_windows` joins the
windows' n-best lists again.
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Sequence

from advrace.core.distractors import insert_answer_span
from advrace.core.errors import ConfigError
from advrace.core.seeding import seeded_rng
from advrace.core.tasks import MULTIPLE_CHOICE


@dataclass(frozen=True)
class SpanWindow:
    """One window of one question. Positions point at tokens; 0 ([CLS]) when the gold span is
    not (wholly) inside this window, as in SQuAD v1.1 fine-tuning."""

    example: int
    input_ids: tuple[int, ...]
    token_type_ids: tuple[int, ...] | None
    offsets: tuple[tuple[int, int] | None, ...]  # character span of each context token, else None
    sequence_ids: tuple[int | None, ...]
    start_position: int = 0
    end_position: int = 0

    @property
    def length(self) -> int:
        return len(self.input_ids)


def encode_windows(tokenizer, questions: Sequence[str], contexts: Sequence[str],
                   answers: Sequence[tuple[int, int] | None] | None = None, *,
                   max_length: int = 384, stride: int = 128) -> list[SpanWindow]:
    """Windows of every (question, context), in input order; `answers` gives gold character
    spans (end exclusive) for training."""
    if not getattr(tokenizer, "is_fast", False):
        raise ConfigError("span extraction needs a fast tokenizer (one with offset mappings)")
    if stride >= max_length // 2:
        raise ConfigError(f"doc_stride {stride} must be below half of max_length {max_length}")
    if not questions:
        return []
    enc = tokenizer(list(questions), list(contexts), truncation="only_second", max_length=max_length,
                    stride=stride, return_overflowing_tokens=True, return_offsets_mapping=True,
                    padding=False)
    types = enc.get("token_type_ids")
    windows = []
    for w, example in enumerate(enc["overflow_to_sample_mapping"]):
        seq = tuple(enc.sequence_ids(w))
        offsets = tuple(tuple(o) if s == 1 else None for o, s in zip(enc["offset_mapping"][w], seq))
        start = end = 0
        gold = answers[example] if answers is not None else None
        if gold is not None:
            inside = [i for i, o in enumerate(offsets) if o is not None]
            if inside and offsets[inside[0]][0] <= gold[0] and offsets[inside[-1]][1] >= gold[1]:
                start = next(i for i in inside if offsets[i][1] > gold[0])
                end = next(i for i in reversed(inside) if offsets[i][0] < gold[1])
        windows.append(SpanWindow(example, tuple(enc["input_ids"][w]),
                                  tuple(types[w]) if types is not None else None, offsets, seq,
                                  start, end))
    return windows


def collate_windows(windows: list[SpanWindow], pad_token_id: int = 0, labels: bool = True) -> dict:
    import torch

    width = max(w.length for w in windows)
    input_ids = torch.full((len(windows), width), pad_token_id, dtype=torch.long)
    attention = torch.zeros((len(windows), width), dtype=torch.long)
    types = torch.zeros((len(windows), width), dtype=torch.long) if windows[0].token_type_ids else None
    for i, w in enumerate(windows):
        input_ids[i, :w.length] = torch.tensor(w.input_ids)
        attention[i, :w.length] = 1
        if types is not None:
            types[i, :w.length] = torch.tensor(w.token_type_ids)
    batch = {"input_ids": input_ids, "attention_mask": attention}
    if types is not None:
        batch["token_type_ids"] = types
    if labels:
        batch["start_positions"] = torch.tensor([w.start_position for w in windows])
        batch["end_positions"] = torch.tensor([w.end_position for w in windows])
    return batch


def answer_rng(seed: int, source_id: str) -> random.Random:
    """Where a question's answer is inserted depends only on the seed and the question."""
    return seeded_rng("advrace-span", seed, source_id)


def span_training_examples(examples: list, seed: int) -> tuple[list[str], list[str], list[tuple[int, int]]]:
    """Questions, contexts and gold spans: SQuAD questions as they are (first answer), RACE
    questions with their answer inserted at a seeded sentence boundary (AdvRACE section 3.1)."""
    questions, contexts, spans = [], [], []
    for ex in examples:
        if ex.task == MULTIPLE_CHOICE:
            new, start, end = insert_answer_span(ex, answer_rng(seed, ex.source_id))
            context = new.passage
        else:
            context = ex.context
            start, end = ex.answers[0].start, ex.answers[0].end
        questions.append(ex.question)
        contexts.append(context)
        spans.append((start, end))
    return questions, contexts, spans
