"""The last step of a distractor attack: three of a question's vetted candidates become its new
distractors (an original kept for each one it could not fill), the options optionally shuffled,
and the provenance records old and new distractors and the rejections by reason."""

from __future__ import annotations

from typing import Callable

from advrace.core.distractors import match_format, replace_distractors
from advrace.core.provenance import AttackSummary, NewDistractors

from ..base import Outcome
from .checks import distinct


def why_unchanged(vetted: dict) -> str:
    """Why a question got no new distractor: no candidate, every one refused, or none chosen."""
    rejected = vetted["rejected"]
    if not vetted["candidates"]:
        return "no candidate"
    if not vetted["passed"] and rejected:
        top = max(rejected, key=lambda k: (rejected[k], k))
        return f"every candidate rejected, most often as {top!r}"
    return "no acceptable candidate"


def replace_with_chosen(example, vetted: dict, select: Callable, *, name: str, match_answer_format: bool,
                        rng=None, reader_scored: bool = False) -> Outcome:
    """The example with the distractors `select` chose of the passed candidates (their near-copies
    dropped first); `rng` shuffles the options (the label follows the answer), None keeps them."""
    if vetted["refused"]:  # "both A and B" would name the new distractors; a NOT question
        return Outcome(example, False, vetted["refused"])
    chosen = select(distinct(vetted["passed"]), example)
    scores = tuple(vetted.get("scores", {}).get(c, ()) for c in chosen)
    if match_answer_format:
        chosen = [match_format(c, example.answer, example.passage) for c in chosen]
    if not chosen:
        return Outcome(example, False, why_unchanged(vetted))
    order = None
    if rng is not None:
        order = list(range(len(example.options)))
        rng.shuffle(order)
    new, kept = replace_distractors(example, chosen, order)
    record = NewDistractors(original=example.distractors, new=tuple(chosen), kept_original=kept,
                            candidates=tuple(vetted["candidates"][:20]), rejected=vetted["rejected"],
                            reader_scores=scores if reader_scored else (),
                            gold_reader_scores=vetted.get("gold_score", ()))
    return Outcome(new.with_provenance(AttackSummary(name, distractors=record)), True)
