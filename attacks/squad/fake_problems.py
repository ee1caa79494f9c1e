"""The properties every fake answer must have, as a list of what breaks them: the tests hold the
validity corpus to it, and `bench/squad_fake_properties.py` a real build."""

from __future__ import annotations

import functools

from advrace.core.checks import REGISTRY as CHECKS, Subject, TextContext
from advrace.metrics import normalize_answer

from .fake_answers import answer_type, wh_noun

FAKE_TYPE = CHECKS["fake_type"]  # the audit's own check


def fake_problems(example, record, resources) -> list[str]:
    """What breaks a property every fake answer must have, for the sentence `record` (an
    AdversarialSentence) made for `example` (the question before the attack); empty when none.
    The fake differs from every gold and contains none; it occurs nowhere in the context; it is
    of the gold's group, or for the `date` and `number` rules the gold is a time or a number (by its
    type in context or by what the question asks): both the audit's `fake_type` check; for
    `asked_kind`, which that check trusts, the gold is a WordNet kind of the asked noun.
    The tests hold the validity corpus to it, and a real build is checked with it by hand
    (docs/results.md)."""
    fake, out = record.answer, []
    norm = normalize_answer(fake)
    for gold in (a.text for a in example.answers):
        g = normalize_answer(gold)
        if norm == g:
            out.append(f"the gold {gold!r} itself")
        elif g and f" {g} " in f" {norm} ":
            out.append(f"contains the gold {gold!r}")
    if not norm or f" {norm} " in f" {normalize_answer(example.context)} ":
        out.append("in the context")
    if record.fake_rule == "asked_kind":
        if not _of_asked_kind(example, resources):
            out.append("rule asked_kind for a gold of no kind of the asked noun")
    else:  # the audit's own check, which holds the date and number rules to a gold of their type
        typed = functools.partial(answer_type, resources=resources)
        ctx = TextContext(same_meaning_fn=resources.same_meaning, answer_type_fn=typed)
        why = FAKE_TYPE.refuse(Subject(example, record.sentence, record=record), ctx, {})
        if why:
            out.append(why)
    return out


def _of_asked_kind(example, resources) -> bool:
    """Whether a sense of the gold's head noun is a WordNet kind of the noun the question asks for."""
    noun = wh_noun(example.question, resources)[1]
    first = example.answers[0]
    span = resources.parse(example.context).char_span(first.start, first.end, alignment_mode="expand")
    if noun is None or span is None:
        return False
    head = resources.wordnet.morphy(span.root.text.lower(), "n") or span.root.text.lower()
    asked = set(resources.wordnet.synsets(noun, "n"))
    return any(asked & set(s.closure(lambda x: x.hypernyms() + x.instance_hypernyms()))
               for s in resources.wordnet.synsets(head, "n"))
