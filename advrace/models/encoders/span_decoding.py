"""N-best answer spans from a QA model's start/end logits.

transformers 5 has no question-answering pipeline, so distractor extraction and the SQuAD
models share this decoder: one call per tokenizer window, then `merge_windows` across the
overlapping windows of a long context.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Sequence

import numpy as np


@dataclass(frozen=True)
class Span:
    """A candidate answer: character offsets into the context (end exclusive) and its score."""

    start: int
    end: int
    score: float
    text: str


def _as_array(values) -> np.ndarray:
    """Logits as a 1-d float array, whether they come as a list, numpy array or torch tensor."""
    if hasattr(values, "detach"):
        values = values.detach().float().cpu().numpy()
    return np.asarray(values, dtype=np.float64).reshape(-1)


def _ranked(spans: dict[tuple[int, int], Span], n_best: int) -> list[Span]:
    return sorted(spans.values(), key=lambda s: (-s.score, s.start, s.end))[:n_best]


def best_spans(start_logits, end_logits, offsets: Sequence, sequence_ids: Sequence,
               context: str, *, n_best: int = 20, max_answer_tokens: int = 30, top_k: int = 20,
               context_id: int = 1) -> list[Span]:
    """The `n_best` highest-scoring spans of one window, best first.

    Only context tokens may start or end a span, so a span never reaches into the question or a
    special token; `top_k` is taken among those tokens, so a window whose top logits sit on the
    question still yields context spans. Token pairs mapping to the same characters count once.
    """
    starts, ends = _as_array(start_logits), _as_array(end_logits)
    n = min(len(starts), len(ends), len(offsets), len(sequence_ids))
    allowed = np.array([i for i in range(n)
                        if sequence_ids[i] == context_id and offsets[i] is not None], dtype=int)
    if allowed.size == 0 or n_best <= 0:
        return []
    # stable sort on -logit: equal logits keep token order, so the choice is deterministic
    top_starts = allowed[np.argsort(-starts[allowed], kind="stable")[:top_k]]
    top_ends = allowed[np.argsort(-ends[allowed], kind="stable")[:top_k]]
    found: dict[tuple[int, int], Span] = {}
    for s in top_starts:
        for e in top_ends:
            if e < s or e - s + 1 > max_answer_tokens:
                continue
            char_start, char_end = int(offsets[s][0]), int(offsets[e][1])
            if char_end <= char_start:
                continue
            score = float(starts[s] + ends[e])
            key = (char_start, char_end)
            if key not in found or score > found[key].score:
                found[key] = Span(char_start, char_end, score, context[char_start:char_end])
    return _ranked(found, n_best)


def merge_windows(per_window: list[list[Span]], n_best: int = 20) -> list[Span]:
    """One n-best list for a context decoded in overlapping windows.

    A span seen by several windows keeps its best score; spans with the same text at different
    places collapse to the best one, since a distractor or prediction is judged by its text.
    """
    by_offsets: dict[tuple[int, int], Span] = {}
    for spans in per_window:
        for span in spans:
            key = (span.start, span.end)
            if key not in by_offsets or span.score > by_offsets[key].score:
                by_offsets[key] = span
    merged, seen_texts = [], set()
    for span in _ranked(by_offsets, len(by_offsets)):
        if span.text in seen_texts:
            continue
        seen_texts.add(span.text)
        merged.append(span)
        if len(merged) == n_best:
            break
    return merged
