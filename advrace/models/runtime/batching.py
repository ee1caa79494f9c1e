"""Batches of similar length under a token budget: every scorer and the training data loader
batch the same way, so padding stays small and memory is bounded by the budget."""

from __future__ import annotations

from operator import attrgetter
from typing import Callable, Sequence


def length_sorted_batches(items: Sequence, batch_size: int, length: Callable = attrgetter("length"),
                          max_tokens: int | None = None) -> list[list[int]]:
    """Indices in batches of similar length (longest first, ties in input order), so padding stays
    small. `length`: of one item; features and windows carry theirs, token id lists take `len`.
    `max_tokens`: also at most this many padded tokens a batch (beyond its first item), so that
    memory is bounded by the budget, not by the longest items times `batch_size`."""
    order = sorted(range(len(items)), key=lambda i: (-length(items[i]), i))
    if max_tokens is None:
        return [order[i:i + batch_size] for i in range(0, len(order), batch_size)]
    batches, current, width = [], [], 0
    for i in order:
        n = length(items[i])
        if current and (len(current) == batch_size or max(width, n) * (len(current) + 1) > max_tokens):
            batches.append(current)
            current, width = [], 0
        current.append(i)
        width = max(width, n)
    if current:
        batches.append(current)
    return batches
