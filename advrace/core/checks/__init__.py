"""One list of validity checks, shared by the attacks and the audit (in the manner of TextAttack's
constraints): each check is one object that says why an item would no longer have its gold answer
as the one right answer, or None.

An attack asks a check about a *candidate* while building (a new distractor, a question it is
about to change) and refuses what the check refuses; `advrace audit` asks the same object about
the built item, with the thresholds read from the split's own config, so old releases are judged
by today's checks. A new check is one module of this package (or of a plugin) that calls
`register`, plus its test.

What a check needs beyond the text (stopwords, the paraphrase encoder's cosine, WordNet) comes in
through `CheckContext`, so that this floor imports no lexicon or model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Mapping, Protocol, Sequence

from advrace.core.errors import ConfigError
from advrace.core.provenance import AdversarialSentence
from advrace.core.registry import Registry, import_submodules

OPTION = "option"  # a new distractor beside the question's other options
QUESTION = "question"  # a question whose options or text an attack would change
SENTENCE = "sentence"  # a sentence an attack inserts, with its provenance record (an `AdversarialSentence`)
SCOPES = (OPTION, QUESTION, SENTENCE)


class CheckContext(Protocol):
    """What checks may use: the stopword list, a batched cosine of text pairs (the paraphrase
    encoder), WordNet's judgement of a word replacement, the SQuAD adversaries' type of the
    answer at text[start:end] (person, year, number, ...), whether a lowercase word is an
    English word form (WordNet or a stopword: "oride" is a piece of "fluoride", "old" a word),
    and the dependency parse of a short text (spaCy's Doc; None where the caller has no parser,
    and then the grammar check judges nothing). A check that asks a model the caller loads (the
    answerability judge of advrace.models.judge, which registers itself here) finds it as `judge`
    (and shows a progress bar while it scores where the context's `progress` is set)."""

    stopwords: frozenset
    judge: object

    def cosines(self, pairs: Sequence[tuple[str, str]]) -> list[float]: ...

    def same_meaning(self, word: str, new: str, pos: str | None = None) -> str | None: ...

    def answer_type(self, text: str, start: int, end: int) -> str: ...

    def known_word(self, word: str) -> bool: ...

    def parse(self, text: str): ...


@dataclass(frozen=True)
class Subject:
    """What one check judges. `example` is the question as it was before the attack (its
    passage, question, answer and original options); `text` is the new option or the inserted
    sentence (empty for a question-scope check); `others` the options the new one sits beside;
    `record` the provenance record of an inserted sentence, for a sentence-scope check."""

    example: object
    text: str = ""
    others: tuple[str, ...] = ()
    record: AdversarialSentence | None = None


class Refusal(str):
    """A check's reason (the count key in stats.json and the provenance) with a longer account of
    it for the audit's `--details` where the reason alone says too little (the judge's scores)."""

    detail: str

    def __new__(cls, reason: str, detail: str = ""):
        refusal = super().__new__(cls, reason)
        refusal.detail = detail
        return refusal


class Check:
    """One validity rule. `name` is its stable key (configs and docs name it), `flag` the label
    the audit reports, `scope` what it judges, `attacks` the attacks whose items it applies to.
    `refuse` returns a short reason (a count key for stats.json) or None; a batched check (the
    encoder's) overrides `refuse_many` instead."""

    name: str = ""
    flag: str = ""
    scope: str = OPTION
    attacks: tuple[str, ...] = ()

    @property
    def batched(self) -> bool:
        """Whether the check judges many subjects at once (the encoder's): run after the others."""
        return type(self).refuse_many is not Check.refuse_many

    def enabled(self, settings: Mapping) -> bool:
        """Whether the split's config (or the attack's) turns this check on."""
        return True

    def refuse(self, subject: Subject, ctx: CheckContext, settings: Mapping) -> str | None:
        raise NotImplementedError

    def refuse_many(self, subjects: Sequence[Subject], ctx: CheckContext,
                    settings: Mapping) -> list[str | None]:
        return [self.refuse(s, ctx, settings) for s in subjects]

    def prepare(self, examples: Sequence, ctx: CheckContext, settings: Mapping, *, where: str,
                state=None) -> None:
        """See every question of a split (`examples`, across `state`'s processes) before judging
        any subject of it: a check whose threshold is calibrated on the split itself (the judge's
        margin) sets it here; `where` names the caller in an error. Nothing for most checks."""

    def not_checked_note(self, settings: Mapping, built: Mapping, ctx: CheckContext) -> str:
        """What this check adds to each kind of invalid item the audit's `not checked:` line names
        for a split ('' for most): whose opinion refused what, where a model judged (`settings` are
        the audit's, `built` the config the split was built with)."""
        return ""

    def __repr__(self) -> str:
        return f"<check {self.name}>"


REGISTRY: Registry[Check] = Registry("check")  # one object per check, in registration order


def register(check: Check | type) -> Check | type:
    """Add a check (an instance, or a class with no arguments); usable as a class decorator."""
    instance = check() if isinstance(check, type) else check
    if not instance.name or instance.scope not in SCOPES:
        raise ValueError(f"check {instance!r}: needs a name and a scope among {', '.join(SCOPES)}")
    REGISTRY.add(instance.name, instance)
    return check


def checks_for(attack: str, scope: str) -> list[Check]:
    """The registered checks of one scope that apply to an attack's items, in registration order
    (cheap word checks before the batched encoder)."""
    return [c for c in REGISTRY.values() if c.scope == scope and attack in c.attacks]


def first_refusal(checks: Sequence[Check], subject: Subject, ctx: CheckContext,
                  settings: Mapping) -> tuple[Check, str] | None:
    """The first of the (unbatched) checks that refuses the subject, and why."""
    for check in checks:
        if check.enabled(settings):
            why = check.refuse(subject, ctx, settings)
            if why:
                return check, why
    return None


@dataclass
class TextContext:
    """A CheckContext from plain parts: what the attacks and the audit build from their
    resources and encoder."""

    stopwords: frozenset = frozenset()
    cosine_fn: Callable | None = None
    same_meaning_fn: Callable | None = None
    answer_type_fn: Callable | None = None
    known_word_fn: Callable | None = None  # without a lexicon every word counts as known
    parse_fn: Callable | None = None  # without a parser the grammar check judges nothing
    judge: object = None  # the answerability judge (advrace.models.judge) the `judge` check asks
    progress: bool = False

    def cosines(self, pairs):
        if self.cosine_fn is None:
            raise ConfigError("this check needs the paraphrase encoder, and none was given")
        return list(self.cosine_fn(list(pairs)))

    def same_meaning(self, word, new, pos=None):
        return self.same_meaning_fn(word, new, pos) if self.same_meaning_fn else None

    def answer_type(self, text, start, end):
        return self.answer_type_fn(text, start, end) if self.answer_type_fn else "other"

    def known_word(self, word):
        return self.known_word_fn(word) if self.known_word_fn else True

    def parse(self, text):
        return self.parse_fn(text) if self.parse_fn else None


import_submodules(__name__, __path__)
