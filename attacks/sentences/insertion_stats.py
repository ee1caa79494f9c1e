"""What stats.json says of a RACE AddSent split's inserted sentences, read back from each example's
provenance: how many questions were attacked, with fewer sentences, by "not", the negated
questions skipped and attacked, the sentences by rule, the replacements by kind, their length."""

from __future__ import annotations

from advrace.core.numbers import significant
from advrace.core.provenance import summary_of
from advrace.core.text import count_words
from advrace.core.checks.question_kinds import negated_question

from .statements import GLUED, clean_question


def sentence_stats(examples: list, attack: str, insertions: int, skip_negated: bool) -> dict:
    """Counts over a finished split of `attack` (the name its records give it)."""
    perturbed, fallback_questions, fallback_sentences, negated, words = 0, 0, 0, 0, []
    negated_attacked, fewer = 0, 0
    by_kind: dict[str, int] = {}
    by_rule: dict[str, int] = {}
    for example in examples:
        record = summary_of(example.provenance, attack)
        if record is None or not record.sentences:
            # left unperturbed; a negated question is always skipped ("negated question")
            negated += skip_negated and bool(negated_question(clean_question(example.question)))
            continue
        perturbed += 1
        fewer += len(record.sentences) < insertions
        negated_attacked += bool(negated_question(clean_question(example.question)))
        fallbacks = [s for s in record.sentences if s.negation_fallback]
        fallback_sentences += len(fallbacks)
        fallback_questions += bool(fallbacks)
        for s in record.sentences:
            words.append(count_words(s.sentence))
            by_rule[s.rule or "blank"] = by_rule.get(s.rule or "blank", 0) + 1
            for rep in s.replacements:
                by_kind[rep.kind] = by_kind.get(rep.kind, 0) + 1
    return {
        "questions": len(examples),
        "perturbed": perturbed,
        # attacked with fewer sentences than `insertions` (down to min_insertions): no more passed
        "fewer_sentences": fewer,
        "negation_fallback_share": significant(fallback_sentences / len(words)) if words else 0.0,
        "negation_fallback_questions": significant(fallback_questions / perturbed) if perturbed else 0.0,
        "negated_questions_skipped": negated,
        # each said of another person or thing (rule other_referent)
        "negated_questions_attacked": negated_attacked,
        # how each sentence was stated: "blank", a declarative rule, "other_referent", or
        # "glued" (the question with the distractor after it: not English, glued_fallback)
        "sentences_by_rule": dict(sorted(by_rule.items())),
        "glued_share": significant(by_rule.get(GLUED, 0) / len(words)) if words else 0.0,
        "replacements_by_kind": dict(sorted(by_kind.items())),
        "avg_inserted_words": significant(sum(words) / len(words)) if words else 0.0,
    }
