"""When RACE AddSent leaves a question or a sentence out, and how it says why: a sentence that
states the gold, a question about the author that no edit moves to another person or that keeps a
title, a question about the passage that "not" would turn into text about the passage; and the
reason counted when no sentence passes."""

from __future__ import annotations

import re
from collections import Counter

from advrace.core.checks import Subject, first_refusal
from advrace.core.text import fold_case_and_spaces
from advrace.core.checks.option_identity import option_key
from advrace.core.checks.question_kinds import asks_what_passage_states

from ..base import CannotPerturb
from .reframing import reframed_det, title_spans
from .statements import GLUED

AUTHOR_RE = re.compile(r"\b(?:writer|author)s?\b", re.IGNORECASE)
# A question that names the passage or its author is about the passage ("What is the passage
# mainly about?", "the best title for the passage", "The author wants to _"): negated, it becomes
# text about the passage that says a distractor is not the answer ("What is not the best title
# for the passage X"), so such a question never falls back to "not".
ABOUT_PASSAGE_RE = re.compile(r"\b(?:passage|article|text|paragraph|writer|author|title)s?\b", re.IGNORECASE)


def contains_gold(sentence: str, gold: str) -> bool:
    """Whether the sentence states the gold option's text; a one-character gold ('A', '3') would
    match nearly any sentence, so it is not checked."""
    key = option_key(gold)
    return len(key) >= 2 and key in fold_case_and_spaces(sentence)


def sentence_refusal(example, entry, sentences: set[str], checks: list, ctx) -> str | None:
    """Why a sentence is not inserted, or None: said already, states the gold, or the flag of the
    first of the audit's sentence `checks` that refuses it (a glued sentence, AdvRACE's form that
    `glued_fallback` asks for, is spared the grammar check; the audit still flags it)."""
    if fold_case_and_spaces(entry.sentence) in sentences:
        return "no new sentence"
    if contains_gold(entry.sentence, example.answer):
        return "gold answer in sentence"
    if entry.rule == GLUED:
        checks = [c for c in checks if c.name != "grammar"]
    refused = first_refusal(checks, Subject(example, entry.sentence, record=entry), ctx, {})
    return refused[0].flag if refused else None


def search_failure(refused: Counter, found: int, wanted: int) -> str:
    """Why the search for sentence `found` + 1 failed: the most frequent refusal of its candidates
    (the first met on a tie), and how many sentences were found before it when any were."""
    why = max(refused, key=refused.get) if refused else "edits leave the question unchanged"
    return f"only {found} of {wanted} sentences: {why}" if found else why


def author_not_moved(doc, reframe: list) -> bool:
    """Whether the question names the author or writer where no edit of `reframe` moves it to
    another one ('a writer', 'writers'): its sentence would still be about this passage's author."""
    moved = {e[0] for e in reframe}
    return any(tok.lower_ in ("writer", "author", "writers", "authors")
               and ((det := reframed_det(tok)) is None or det.idx not in moved) for tok in doc)


def titles_kept(doc, variants: list) -> list[bool]:
    """Per variant, whether a question about the author keeps a title it names unchanged:
    'Another writer mentioned the story The Magic of Thinking Big because _' is still about
    the very book the question asks of."""
    if not AUTHOR_RE.search(doc.text):
        return [False] * len(variants)
    spans = title_spans(doc)
    out = []
    for edits, _ in variants:
        changed = [(s, e) for s, e, _, record in edits
                   if record is not None and record.changes_meaning and record.kind != "reframe"]
        out.append(any(not any(s < te and ts < e for s, e in changed) for ts, te in spans))
    return out


def usable_variants(question: str, doc, variants: list, negation_fallback: bool, no_not_about_passage: bool = True
                    ) -> list:
    """The (edits, fallback) variants that may make a sentence, or CannotPerturb with why none: a
    "not" sentence made from a question about the passage ("What is not the best title for the
    passage X") is text about the passage, and a question about the author must not keep a title
    it names (`titles_kept`); `doc` is the question's parse."""
    about_passage = no_not_about_passage and (asks_what_passage_states(question)
                                              or bool(ABOUT_PASSAGE_RE.search(question)))
    usable = [v for v in variants if v[0] and not (v[1] and about_passage)]
    if not usable:
        if any(not fallback for _, fallback in variants):
            raise CannotPerturb("no edit")
        if not negation_fallback:
            raise CannotPerturb("no change of meaning")
        raise CannotPerturb("no change of meaning (question about the passage)" if about_passage
                            else "no negation point")
    titled = titles_kept(doc, usable)
    usable = [v for v, kept in zip(usable, titled) if not kept]
    if not usable:
        raise CannotPerturb("title kept in a question about the author")
    return usable
