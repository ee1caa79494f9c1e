"""The fluency of candidate sentences under the SQuAD attacks' causal LM (SmolLM2 by default, the
model the closed-book rule loads): the mean token log-probability (models.decoders.fluency).

The attacks keep the most fluent of a question's candidates, and record its score in the
sentence's provenance; the audit reads a split's scores to flag a sentence far below the rest.
Scores are computed in sorted groups of fixed size and cached per sentence, so that a sentence's
score does not depend on which others were asked with it beyond float rounding. Within a group,
`pack` sentences share one row of the packed core (each after its own start token, seeing only
itself), not one row each padded to the batch's longest: measured on 480 sentences of XQuAD's
questions, 17% less time, every score the same at the 4 digits recorded.
"""

from __future__ import annotations

import dataclasses
from typing import Sequence

from advrace.core.numbers import significant

from advrace.models.decoders.fluency import mean_logprobs
from advrace.models.decoders.loaded_lm import loaded_lm
from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.loading import SMOLLM2
from advrace.models.runtime.precision import cpu_threads


class Fluency:
    """Mean token log-probabilities of sentences under one causal LM, cached per sentence."""

    def __init__(self, model: str = SMOLLM2, bf16: bool | None = False, batch_size: int = 32, pack: int = 8):
        self.model_name, self.bf16, self.batch_size, self.pack = model, bf16, batch_size, max(1, pack)
        self._scores: dict[str, float] = {}
        # a test may set (model, tokenizer, device, bf16) itself; otherwise loaded_lm's copy is
        # fetched on each call, so a forked build worker that dropped an inherited copy loads its own
        self._loaded = None
        self._core = None  # the packed scoring's core, probed once

    def scores(self, sentences: Sequence[str]) -> list[float]:
        """One score per sentence, in the order given."""
        todo = sorted(set(sentences) - set(self._scores))
        if todo:
            import torch  # deferred: start-up time

            model, tok, device, bf16 = self._loaded or loaded_lm(self.model_name, self.bf16)
            if self._core is None or self._core.model is not model:
                self._core = PackedCore(model, device)
            with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                for i in range(0, len(todo), self.batch_size):
                    batch = todo[i:i + self.batch_size]
                    with cpu_threads(device):
                        rows = [batch[j:j + self.pack] for j in range(0, len(batch), self.pack)]
                        values = mean_logprobs(model, tok, rows, device=device, core=self._core)
                    self._scores.update(zip(batch, (v for row in values for v in row)))
        return [self._scores[s] for s in sentences]

    def forget(self) -> None:
        """Drop the cached scores: an attack scores each prepared chunk afresh, so that a score
        never depends on which chunks a worker process saw before (the batches' float rounding)."""
        self._scores.clear()

    def most_fluent(self, sentences: Sequence[str]) -> int:
        """The index of the most fluent sentence (the first on a tie)."""
        values = self.scores(sentences)
        return max(range(len(values)), key=lambda i: (values[i], -i))


_SHARED: dict[tuple, Fluency] = {}


def fluency(model: str = SMOLLM2, bf16: bool | None = False) -> Fluency:
    """One scorer per process and model: AddOneSent, AddSentMod and the audit share its cache."""
    if (model, bf16) not in _SHARED:
        _SHARED[model, bf16] = Fluency(model, bf16)
    return _SHARED[model, bf16]


def fluent_choice(found: dict, scorer) -> dict:
    """key -> (the most fluent candidate with its score, the number of candidates, the rejections)
    for `found`: key -> (candidates, rejections). Every candidate of every key in one call to the
    scorer; the scores compared as recorded (4 significant digits, so that the batches' float
    rounding does not decide), the first of equally fluent ones kept."""
    scores = iter(scorer.scores([c.sentence for cands, _ in found.values() for c in cands]))
    chosen = {}
    for key, (cands, rejected) in found.items():
        values = [significant(next(scores)) for _ in cands]
        if not cands:
            chosen[key] = (None, 0, rejected)
            continue
        best = max(range(len(cands)), key=lambda i: (values[i], -i))
        chosen[key] = (dataclasses.replace(cands[best], fluency=values[best]), len(cands), rejected)
    return chosen
