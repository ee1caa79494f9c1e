"""AdvRACE's option statistics of a distractor split (stats.json): lengths, diversity (Jaccard),
closeness to the answer, what was kept and what was refused."""

from __future__ import annotations

from statistics import mean

from advrace.core.distractors import jaccard_distance, token_overlap
from advrace.core.numbers import significant
from advrace.core.provenance import summary_of
from advrace.core.text import count_words


def _avg(xs) -> float:
    return significant(mean(xs)) if xs else 0.0


def replaced_records(name: str, examples: list) -> list:
    """(example, its NewDistractors record) for each example the attack gave new distractors."""
    summaries = [(ex, summary_of(ex.provenance, name)) for ex in examples]
    return [(ex, s.distractors) for ex, s in summaries if s and s.distractors]


def reader_statistics(name: str, examples: list, readers: int, reader_name: str) -> dict:
    """The readers' mean score of the gold and of the new distractors, one per reader."""
    scored = [(r.gold_reader_scores, s) for _, r in replaced_records(name, examples)
              for s in r.reader_scores if s and r.gold_reader_scores]
    per_reader = lambda xs: [_avg([x[k] for x in xs]) for k in range(readers)]  # noqa: E731
    return {"select_with": reader_name,
            "avg_gold_reader_score": per_reader([g for g, _ in scored]),
            "avg_new_distractor_reader_score": per_reader([s for _, s in scored])}


def option_statistics(name: str, examples: list, rejected_total: dict) -> dict:
    """Of the split's examples (the attack `name`'s): how many got new distractors, their
    length, pairwise Jaccard distance and overlap with the answer, the originals kept, and every
    candidate refused before choosing, by the first filter that refused it."""
    replaced = replaced_records(name, examples)
    untouched = len(examples) - len(replaced)
    untouched_options = sum(len(ex.options) - 1 for ex in examples) - sum(len(ex.options) - 1 for ex, _ in replaced)
    new = [d for _, r in replaced for d in r.new]
    pairwise = [jaccard_distance(a, b) for _, r in replaced for i, a in enumerate(r.new) for b in r.new[i + 1:]]
    overlap = [token_overlap(d, ex.answer) for ex, r in replaced for d in r.new]
    return {
        "questions_replaced": len(replaced),
        "avg_new_distractor_words": _avg([count_words(d) for d in new]),
        "avg_answer_words": _avg([count_words(ex.answer) for ex in examples]),
        "avg_pairwise_jaccard_distance": _avg(pairwise),
        "avg_answer_overlap": _avg(overlap),
        "questions_keeping_original_distractors":
            sum(1 for _, r in replaced if r.kept_original) + untouched,
        "original_distractors_kept": sum(r.kept_original for _, r in replaced) + untouched_options,
        "rejected": dict(sorted(rejected_total.items())),
    }

