"""Checks of a sentence that AddSent (RACE) or Jia & Liang's adversaries (SQuAD) insert: it must
state a wrong answer to a *different* question, so that the gold stays the one right answer and
the sentence does not hint at it. Each subject's `record` is the sentence's provenance record
(an `AdversarialSentence`: the mutated `question`, its `replacements`, its `answer`)."""

from __future__ import annotations

import re

from advrace.core.provenance import Replacement
from advrace.core.text import words
from advrace.core.checks.question_kinds import negated_question
from advrace.core.checks.word_forms import suffix_stem

from . import SENTENCE, Check, register

# by the attacks' own names: a release's alias ("addsent") is resolved by its reader (the audit)
RACE_ADDSENT = ("mc_addsent",)
SQUAD_SENTENCE_ATTACKS = ("addonesent", "addsentmod", "squad_addsent")  # Jia and Liang's
SENTENCE_ATTACKS = RACE_ADDSENT + SQUAD_SENTENCE_ATTACKS
MEANING_KINDS = frozenset({"antonym", "number", "negation"})
SENSE_POS = frozenset({"NOUN", "VERB", "ADJ", "ADV"})  # WordNet's; a record's pos narrows the senses
# A statement about what the passage lets one learn: in the passage it is about itself.
META_RE = re.compile(
    r"\b(?:we|you|one)\s+(?:can|cannot|can['\u2019]t|could|couldn['\u2019]t|may|might)\s+(?:not\s+)?"
    r"(?:learn|infer|know|conclude|tell|see|find|understand)\s+(?:from\s+(?:the|this)\s+\w+|that)\b"
    r"|\b(?:passage|text|article|story|writer|author)\s+(?:does\s+not|doesn['\u2019]t)\s+"
    r"(?:tell|show|say|mention|state|suggest|imply)", re.IGNORECASE)


def paraphrase_pairs(replacements, ctx) -> list[tuple[str, str, str]] | None:
    """(old, new, reason) for each replacement when every one keeps the word's meaning, else None:
    such a sentence restates the question. A name (PROPN) changes on purpose (London -> Melbourne)
    and WordNet judges it as any word: a synonym name is no name change."""
    pairs_in = [(rep.old, rep.new) for rep in replacements]
    if not replacements or any(rep.kind in MEANING_KINDS for rep in replacements) \
            or not all(old and new for old, new in pairs_in):
        return None
    pairs = []
    for rep, (old, new) in zip(replacements, pairs_in):
        reason = ctx.same_meaning(old, new, rep.pos if rep.pos in SENSE_POS else None)
        if reason is None:
            return None
        pairs.append((old, new, reason))
    return pairs


# RACE AddSent's rule for an option said of someone the passage never names (attacks.sentences.other_referent)
OTHER_REFERENT = "other_referent"


class SentenceCheck(Check):
    scope = SENTENCE
    attacks = SENTENCE_ATTACKS


@register
class NearMeaning(SentenceCheck):
    """Every replaced word went to one of nearly the same meaning (purpose -> objective, poem ->
    verse): the sentence answers the question itself with a wrong option."""

    name, flag = "near_meaning", "sentence only paraphrases the question"

    def refuse(self, subject, ctx, settings):
        rec = subject.record
        if rec.negation_fallback or not rec.replacements:
            return None
        pairs = paraphrase_pairs(rec.replacements, ctx)
        return ", ".join(f"{old}->{new} ({why})" for old, new, why in pairs) if pairs else None


@register
class RestatesNegatedQuestion(SentenceCheck):
    """"The following can be realized today EXCEPT _" restated with a wrong option says that
    option is the exception: an answer to a question whose right answer is one that does *not*
    fit."""

    name, flag = "negated_restated", "sentence restates a negated question"
    attacks = RACE_ADDSENT

    def refuse(self, subject, ctx, settings):
        if subject.record is not None and subject.record.rule == OTHER_REFERENT:
            return None  # an option said of another person or text restates no question
        found = negated_question(subject.example.question)
        return f"the question asks {found!r}" if found else None


@register
class NegationHint(SentenceCheck):
    """A sentence made by inserting "not" into the question says that a distractor is *not* the
    answer to it: it rules an option out instead of luring the reader."""

    name, flag = "negation_hint", "a 'not' sentence rules out an option"
    attacks = RACE_ADDSENT

    def refuse(self, subject, ctx, settings):
        return "negated the question" if subject.record.negation_fallback else None


@register
class MetaText(SentenceCheck):
    """'We cannot infer from the passage that ...' inside the passage talks about the passage."""

    name, flag = "meta_text", "sentence talks about the passage"
    attacks = RACE_ADDSENT

    def refuse(self, subject, ctx, settings):
        found = META_RE.search(subject.text)
        return f"says {found.group()!r}" if found else None


def _stem(word: str) -> str:
    """'patents', 'patented', 'patent' -> 'patent'; 'cities' and 'city' alike; "Helen's" -> 'helen'."""
    return suffix_stem(re.sub(r"['\u2019]s?$", "", word)).rstrip("eiy")


def _count(word: str, text: str) -> int:
    return len(re.findall(rf"(?<!\w){re.escape(word.lower())}(?!\w)", text.lower()))


@register
class ChangeVanished(SentenceCheck):
    """Each replacement's change must survive into the statement: "Savery patented his steam
    pump in 1997." is what is left of "In what century did Savery patent ...?" once the answer
    took the wh-phrase's place, a wrong answer about the very fact asked. SQuAD's adversaries
    call `lost` while building; the audit asks `refuse`."""

    name, flag = "change_vanished", "the question's change vanished from the sentence"

    def lost(self, sentence: str, record, ctx) -> list[Replacement]:
        """The replacements whose new word is not in the sentence (an irregular form
        such as "saw" for "see" counts), or whose old word is back more often than the mutated
        question and the inserted answer hold it."""
        said = words(sentence)
        stems = {_stem(w.lower()) for w in said}
        mutated, filler = record.question, record.answer
        out = []
        for rep in record.replacements:
            if rep.kind == "negation":
                continue
            missing = [w for w in words(rep.new) if _stem(w.lower()) not in stems]
            gone = any(not any(ctx.same_meaning(w, s, "VERB") == "inflection" for s in said) for w in missing)
            old = rep.old
            back = bool(old) and bool(mutated) and _count(old, sentence) > _count(old, mutated) + _count(old, filler)
            if gone or back:
                out.append(rep)
        return out

    def refuse(self, subject, ctx, settings):
        if subject.record.negation_fallback:
            return None
        lost = self.lost(subject.text, subject.record, ctx)
        return "; ".join(f"{r.old!r} -> {r.new!r} is lost" for r in lost) or None


# Answer types (advrace.attacks.squad.fake_answers) by what a reader tells apart at once: a name, a
# time, a number, or a common word. Names are not told apart further: on a short sentence the
# tagger takes a town for an organisation as often as not. "other" says nothing.
TYPE_GROUPS = {"person": "name", "country": "name", "location": "name", "facility": "name",
               "organisation": "name", "proper_noun": "name", "nationality": "name", "product": "name",
               "event": "name", "work_of_art": "name", "law": "name", "language": "name",
               "abbreviation": "name", "date": "time", "month": "time", "year": "time", "weekday": "time",
               "time": "time", "number": "number", "quantity": "number", "percent": "number",
               "money": "number", "ordinal": "number", "noun": "word", "plural_noun": "word",
               "adjective": "word", "verb": "word", "verb_past": "word", "verb_ing": "word", "adverb": "word"}
# What the question asks for, where the gold's own type says little ("How many stages?" for "about 21")
WH_GROUPS = ((re.compile(r"\bhow\s+(?:many|much|old|tall|high|far|big|large|heavy|fast)\b|\bwhat\s+"
                         r"(?:percentage|number|age)\b", re.IGNORECASE), "number"),
             (re.compile(r"\bwhen\b|\b(?:what|which|in\s+what)\s+"
                         r"(?:years?|dates?|days?|months?|century|centuries|decades?)\b", re.IGNORECASE), "time"),
             (re.compile(r"\b(?:who(?:m|se)?|where)\b", re.IGNORECASE), "name"))


_WH = re.compile(r"\b(what|which|who|whom|whose|when|where|why|how)\b", re.I)
_BEFORE_ASKING = frozenset({"in", "at", "on", "of", "for", "by", "to", "from", "with", "during", "and", "or", "but",
                            "about", "under", "after", "before", "since", "into", "than", "as"})


def asking_wh(question: str) -> int | None:
    """Where the wh-word that asks begins: the first, unless a noun's relative pronoun with
    another wh-word after it ("those persons who conscientiously oppose what?")."""
    found = list(_WH.finditer(question))
    for i, m in enumerate(found):
        before = re.search(r"([A-Za-z]+)\s+$", question[:m.start()])  # the word right before, no comma between
        relative = i + 1 < len(found) and before and before.group(1).lower() not in _BEFORE_ASKING
        if not relative:
            return m.start()
    return found[-1].start() if found else None


def wanted_group(example, answer_type) -> str | None:
    """The group (name, time, number, word) of the gold answer of a SQuAD example: its type read
    in its context, else (where that says little) what the question's wh-word asks for."""
    gold = example.answers[0]
    want = TYPE_GROUPS.get(answer_type(example.context, gold.start, gold.start + len(gold.text)))
    if want in (None, "word"):
        want = asked_group(example.question) or want
    return want


def asked_group(question: str) -> str | None:
    """The group the question's asking wh-word names (how many: number; when: time; who, where:
    name), not a "when" of a clause after it ("What is it called when ..."), or None."""
    first = asking_wh(question)
    asked = question[first:] if first is not None else ""
    return next((group for pattern, group in WH_GROUPS if pattern.match(asked)), None)


# fake rules (attacks.answer_rules) whose fake has the gold's type by construction: the gold's own
# words with its numbers moved, or a kind WordNet files under the noun the question asks for
# ("Which virus": herpes)
TYPED_BY_CONSTRUCTION = frozenset({"date", "number", "asked_kind"})
# and the group the gold must be of for the first two to have fired rightly: "the Salt March" is no
# time, so "the Salt September" is no fake of its type, whatever rule made it
RULE_GROUPS = {"date": "time", "number": "number"}
# and whose fake is what a language model read the question to ask: held to what the wh-word asks,
# not to the gold's surface type ("the 1920s" for "When ...?", gold "before World War I";
# "sickle cell anemia" for a condition, gold "HIV/AIDS"); a number or time only where the question
# or the gold has one
TYPED_BY_QUESTION = frozenset({"closed_book"})


def _capitalised(text: str) -> bool:
    return any(c.isupper() for c in text)


@register
class FakeAnswerType(SentenceCheck):
    """Jia & Liang's fake answer must be of the gold's type: a tractor as the person who built a
    telescope, or "Cheerios" as a number of stages, makes a sentence a reader drops at once. The
    gold's type is read from its context (or, where that says little, from the question's
    wh-word), the fake's from the inserted sentence, both by the attacks' own typing."""

    name, flag = "fake_type", "fake answer of another type than the gold"

    def refuse(self, subject, ctx, settings):
        rec, ex = subject.record, subject.example
        fake = rec.answer
        answers = getattr(ex, "answers", ())
        if rec.fake_rule in RULE_GROUPS and answers:
            want = RULE_GROUPS[rec.fake_rule]
            if want not in {wanted_group(ex, ctx.answer_type), asked_group(ex.question)}:
                return f"rule {rec.fake_rule} gave {fake!r}, but the gold {answers[0].text!r} is no {want}"
            return None
        if rec.fake_rule in TYPED_BY_CONSTRUCTION:
            return None
        at = subject.text.lower().find(fake.lower()) if fake else -1
        if at < 0 or not answers:
            return None
        gold = answers[0]
        got = TYPE_GROUPS.get(ctx.answer_type(subject.text, at, at + len(fake)))
        if rec.fake_rule in TYPED_BY_QUESTION:
            want = asked_group(ex.question)
            if want is None and got in ("number", "time"):  # "3" for "What are the three subsectors?"
                want = wanted_group(ex, ctx.answer_type)
        else:
            want = wanted_group(ex, ctx.answer_type)
        if want and got and got != want:
            return f"{fake!r} is a {got}, the gold {gold.text!r} a {want}"
        if rec.fake_rule in TYPED_BY_QUESTION and want == "name" and not _capitalised(fake) and _capitalised(gold.text):
            # the model's answer, which the recogniser may still label a place or a person
            # ("3rd-and-10 fumbled the corner", read on XQuAD-en, typed a country): a name has a capital
            return f"{fake!r} is no name (no capital letter), the gold {gold.text!r} a name"
        return None
