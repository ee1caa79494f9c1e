"""How close two texts are in meaning: the cosine of their mean-pooled sentence embeddings.

A distractor that is the answer in other words ("He was ill" beside "He was sick") shares few
words with it, so word overlap misses it; the distractor attacks (before choosing) and the
release audit (after) flag a pair whose cosine is above a threshold. The encoder is the built-in
similarity reader's (offline MiniLM by default), loaded once per process.
"""

from __future__ import annotations

from typing import Sequence

from advrace.models.encoders.readers import SimilarityReader
from advrace.models.runtime.loading import MINILM

_ENCODERS: dict[str, SimilarityReader] = {}


def encoder_for(encoder: str = MINILM) -> SimilarityReader:
    """The cached encoder: loading MiniLM takes seconds, and each attack and audit asks often."""
    if encoder not in _ENCODERS:
        _ENCODERS[encoder] = SimilarityReader(encoder)
    return _ENCODERS[encoder]


def paraphrase_cosines(pairs: Sequence[tuple[str, str]], encoder: str = MINILM) -> list[float]:
    """The cosine of each pair, in order; every distinct text is encoded once, in batches."""
    if not pairs:
        return []
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    index = {t: i for i, t in enumerate(texts)}
    vectors = encoder_for(encoder).encode(texts)
    left = vectors[[index[a] for a, _ in pairs]]
    right = vectors[[index[b] for _, b in pairs]]
    # Rounded so that a threshold decides the same way however the batches fell.
    return [round(float(x), 6) for x in (left * right).sum(dim=-1)]
