"""A split's statistics for `stats.json`: AdvRACE's lengths and how much the attack changed."""

from __future__ import annotations

from collections import Counter

from advrace.core.examples import MCExample
from advrace.core.numbers import significant
from advrace.core.text import count_words, word_edits


def _mean(values: list[float]) -> float:
    return significant(sum(values) / len(values)) if values else 0.0


def split_stats(examples: list, originals: dict, perturbed: list[bool], reasons: Counter) -> dict:
    """AdvRACE Table 5 lengths, plus how much the attack changed relative to the original."""
    mc = bool(examples) and isinstance(examples[0], MCExample)
    body = examples[0].passage_field if examples else "context"
    stats = {
        "count": len(examples),
        "perturbed": sum(perturbed),
        "unperturbed": len(examples) - sum(perturbed),
        "unperturbed_reasons": dict(sorted(reasons.items())),
        f"avg_{body}_words": _mean([count_words(e.passage_text) for e in examples]),
        "avg_question_words": _mean([count_words(e.question) for e in examples]),
    }
    if mc:
        stats["avg_option_words"] = _mean([count_words(o) for e in examples for o in e.options])
    else:
        stats["avg_answer_words"] = _mean([count_words(a.text) for e in examples for a in e.answers])
    changed = {"question": 0, body: 0}
    removed = {"question": 0, body: 0}
    total = {"question": 0, body: 0}
    options_changed = 0
    for ex in examples:
        orig = originals[ex.source_id]
        for name in changed:
            before, after = getattr(orig, name), getattr(ex, name)
            total[name] += count_words(before)
            if before != after:
                n_changed, n_removed = word_edits(before, after)
                changed[name] += n_changed
                removed[name] += n_removed
        if mc and ex.options != orig.options:
            options_changed += 1
    all_total = sum(total.values())
    stats["words_changed"] = significant(sum(changed.values()) / all_total) if all_total else 0.0
    stats["words_changed_by_field"] = {k: significant(changed[k] / total[k]) if total[k] else 0.0
                                       for k in changed}
    stats["words_removed"] = significant(sum(removed.values()) / all_total) if all_total else 0.0
    stats["words_removed_by_field"] = {k: significant(removed[k] / total[k]) if total[k] else 0.0
                                       for k in removed}
    if mc:
        stats["examples_with_options_changed"] = options_changed
    return stats
