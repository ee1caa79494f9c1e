"""What a split's adversarial sentences are made of, for `stats.json`: counts by declarative
rule, answer type, fake-answer rule and replacement kind."""

from __future__ import annotations

from collections import Counter

from advrace.core.numbers import significant
from advrace.core.provenance import summary_of


def sentence_stats(examples, attack: str) -> dict:
    """Counts of the split's sentences by declarative rule, answer type, fake-answer rule and
    replacement kind; `fake_answer_rule_shares`: each fake-answer rule's share of the attacked
    questions (one sentence each), so that a reader sees how much of a split the rules past the
    typed pool (the catch-all, the closed-book answers) made."""
    rules, types, kinds, fakes, fake_rules = Counter(), Counter(), Counter(), Counter(), Counter()
    attacked = 0
    for ex in examples:
        summary = summary_of(ex.provenance, attack)
        attacked += bool(summary and summary.sentences)
        for s in summary.sentences if summary else ():
            rules[s.rule] += 1
            types[s.answer_type] += 1
            fake_rules[s.fake_rule] += 1
            kinds.update(x.kind for x in s.replacements)
            fakes[s.answer] += 1
    return {"rules": dict(sorted(rules.items())), "answer_types": dict(sorted(types.items())),
            "fake_answer_rules": dict(sorted(fake_rules.items())),
            "fake_answer_rule_shares": {rule: significant(n / attacked) for rule, n in sorted(fake_rules.items())},
            "replacements_by_kind": dict(sorted(kinds.items())),
            "fake_answers": {"distinct": len(fakes), "most_used": max(fakes.values(), default=0)}}
