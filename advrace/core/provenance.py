"""Provenance: what was done to an example and why, as typed records with one vocabulary.

Two kinds of record sit in an example's `provenance`, in the order they were made:
- edits, which the example's own edit methods append (`TextReplaced`, `SentencesInserted`,
  `OptionsReplaced`, `FieldsRemoved`): enough to replay the example from its source;
- `AttackSummary`, which an attack appends: what it chose and why (its adversarial sentences,
  new distractors, swaps, search), or why it left the example unchanged; `Authored`, a
  human-authored question's record; `Validated`, people's verdict on a changed question; and
  `PeopleEdited`, the people's rewrites of the machine's text, their verification and which one
  the release took.

The same idea has the same name everywhere: a replaced span is a `Replacement` (`old` ->
`new` at `start`..`end`) whether AddSent, the SQuAD question mutation or CharSwap made it;
reader scores are always one per reader. Records become JSON only at the file boundary
(`to_json`, `from_json`); `upgrade_v1` reads the layout of release format 1.
"""

from __future__ import annotations

import dataclasses
import functools
import types
import typing
from dataclasses import dataclass, field

from advrace.core.errors import AdvraceError
from advrace.core.numbers import significant_floats


class ProvenanceError(AdvraceError):
    """A provenance record that no record type of this advrace reads."""

    exit_code = 2


@dataclass(frozen=True)
class Replacement:
    """`old` at characters [start, end) of a text became `new`. `kind` says how `new` was found
    (glove, number, antonym, negation, glove_nearest; empty for a plain edit), `pos` is the
    replaced word's part of speech where the choice used it, `same_meaning` why a near word only
    restates the old one (None when it does not) and `changes_meaning` whether it changes the
    question's meaning (None where nobody asked)."""

    start: int
    end: int
    old: str
    new: str
    kind: str = ""
    pos: str | None = None
    same_meaning: str | None = None
    changes_meaning: bool | None = None


@dataclass(frozen=True)
class PlacedSentence:
    """A sentence inserted at position `at` of the text before the edit, found at `start` after it."""

    text: str
    at: int
    start: int


@dataclass(frozen=True)
class TextReplaced:
    """An edit: spans of the text field `field` replaced at once."""

    field: str
    replacements: tuple[Replacement, ...]


@dataclass(frozen=True)
class SentencesInserted:
    """An edit: sentences inserted into the text field `field`."""

    field: str
    sentences: tuple[PlacedSentence, ...]


@dataclass(frozen=True)
class OptionsReplaced:
    """An edit: a multiple-choice question's options (and so maybe its label) replaced."""

    old: tuple[str, ...]
    new: tuple[str, ...]
    old_label: int
    label: int


@dataclass(frozen=True)
class FieldsRemoved:
    """An edit: text fields emptied (the option-only probe)."""

    fields: tuple[str, ...]


@dataclass(frozen=True)
class AdversarialSentence:
    """A sentence an attack wrote to mislead: `question`, mutated by `replacements`, stated with
    `answer`, a wrong answer (RACE: the distractor at option `option`; SQuAD: a fake answer of
    type `answer_type`) or, for the diagnosis set, the right one. `rule` names the declarative
    rule that wrote it; `fake_rule` the answer rule that made a SQuAD fake answer ("typed": the
    data's phrases of the gold's refined type; else a fallback of attacks.answer_rules, such as
    "wh_who" or "catch_all"); `negation_fallback` says that "not" was inserted because nothing
    else changed the meaning."""

    sentence: str
    question: str = ""
    replacements: tuple[Replacement, ...] = ()
    answer: str = ""
    option: int | None = None
    answer_type: str = ""
    rule: str = ""
    negation_fallback: bool = False
    fake_rule: str = ""
    fake_cosine: float | None = None  # a closed-book fake's MiniLM cosine with the nearest gold
    # where a causal LM chose (attacks.fluency, attacks.closed_book): the fake's pointwise mutual
    # information with the question, and the sentence's mean token log-probability; left out of
    # the JSON when unset, so older releases read, and hash, as they were written
    fake_pmi: float | None = None
    fluency: float | None = None


@dataclass(frozen=True)
class NewDistractors:
    """The distractors a distractor attack put in place of `original`. `kept_original` counts
    the original ones kept because too few new ones passed; `candidates` are the first raw
    candidates and `rejected` counts the refused ones by reason. With readers choosing
    (select_with), `reader_scores[i]` holds each reader's score of `new[i]` (empty when no
    reader scored it) and `gold_reader_scores` each reader's score of the gold, in
    select_with's order: always one per reader, however many there are."""

    original: tuple[str, ...]
    new: tuple[str, ...]
    kept_original: int = 0
    candidates: tuple[str, ...] = ()
    rejected: dict[str, int] = field(default_factory=dict)
    reader_scores: tuple[tuple[float, ...], ...] = ()
    gold_reader_scores: tuple[float, ...] = ()


@dataclass(frozen=True)
class Swaps:
    """CharSwap's counts: words swapped in the question and the passage, of `words` in all."""

    question: int
    passage: int
    words: int


@dataclass(frozen=True)
class WordSearch:
    """AddAny's search for its sentence: the model's expected F1 from the random start to the
    last accepted move (`trace`, ending in `expected_f1`), the top answer's F1, whether it reached
    0 (`success`), and the epochs and model queries it took."""

    expected_f1: float
    top_f1: float
    success: bool
    epochs: int
    queries: int
    trace: tuple[float, ...] = ()


@dataclass(frozen=True)
class AttackSummary:
    """What attack `attack` did to an example, or why it left it unchanged (`unchanged`).

    `sentences` are the adversarial sentences it inserted (`position`: start or end of the
    context when it always puts them there); `candidates` the number of candidate sentences it
    chose from and, where a model chose, `candidate_f1` the model's F1 with each and `model_f1`
    with the chosen one; `distractors`, `swaps` and `search` what the distractor attacks,
    CharSwap and AddAny did."""

    attack: str
    unchanged: str | None = None
    sentences: tuple[AdversarialSentence, ...] = ()
    position: str = ""
    candidates: int | None = None
    model_f1: float | None = None
    candidate_f1: tuple[float, ...] = ()
    distractors: NewDistractors | None = None
    swaps: Swaps | None = None
    search: WordSearch | None = None


@dataclass(frozen=True)
class Authored:
    """A question a person wrote in the authoring app against `model`: whether it fooled the
    model, the model's answer and F1 (span questions), the question it started from (`source`)
    and the edit history as the app recorded it."""

    author: str
    model: str
    fooled: bool
    source: str | None = None
    history: tuple = ()
    model_answer: str | None = None
    model_f1: float | None = None


@dataclass(frozen=True)
class Vote:
    """One annotator's judgement of a changed question: `valid` when they found one right answer,
    else the reason they gave."""

    annotator: str
    valid: bool
    reason: str | None = None


VALID, INVALID, UNVALIDATED = "valid", "invalid", "unvalidated"  # a `Validated` record's verdicts


@dataclass(frozen=True)
class Validated:
    """People's verdict on a changed question (`advrace human-eval validate`): `valid` or
    `invalid` by the majority of its `votes` (a tie is invalid), or `unvalidated` when a partial
    study had not judged it; `reason` says what was done to an invalid one (put back as the
    original) or why one stayed unvalidated."""

    verdict: str
    votes: tuple[Vote, ...] = ()
    reason: str | None = None


@dataclass(frozen=True)
class Verification:
    """One verifier's blind answer to a question that holds a person's rewrite: `valid` when they
    chose the gold (else `reason`, as a `Vote`'s), and whether they called the rewritten sentence
    grammatical (None where it was not asked)."""

    annotator: str
    valid: bool
    grammatical: bool | None = None
    reason: str | None = None


@dataclass(frozen=True)
class PeopleEdit:
    """A person's rewrite of the machine's text `machine` (made on the study item `item`): an
    edited sentence or, at `option`, a new distractor (`text`), or the sentence marked
    `beyond_repair`; its `verifications` and whether they `approved` it (a strict majority chose
    the gold and, for a sentence, called it grammatical); `model_f1`: the adversary's F1 with it,
    where one scored it."""

    editor: str
    machine: str
    item: str = ""
    text: str | None = None
    option: int | None = None
    beyond_repair: bool = False
    approved: bool = False
    verifications: tuple[Verification, ...] = ()
    model_f1: float | None = None


@dataclass(frozen=True)
class PeopleEdited:
    """People finished the machine's question (`advrace human-eval validate`): `edits` are every
    rewrite offered for it, `chosen` the index of the one the release holds in place of the
    machine's text `machine` (None: nothing approved), and `why` how it was chosen (a seeded draw
    among the approved, the one `adversary` did worst on, the only one approved) or what became of
    the question without one."""

    machine: str
    edits: tuple[PeopleEdit, ...] = ()
    chosen: int | None = None
    why: str = ""
    seed: int | None = None
    adversary: str | None = None


Record = (TextReplaced | SentencesInserted | OptionsReplaced | FieldsRemoved | AttackSummary | Authored
          | Validated | PeopleEdited)
RECORD_TYPES: dict[str, type] = {
    "replace": TextReplaced, "insert": SentencesInserted, "replace_options": OptionsReplaced,
    "remove": FieldsRemoved, "attack": AttackSummary, "authored": Authored, "validated": Validated,
    "people_edited": PeopleEdited,
}
TYPE_NAMES = {cls: name for name, cls in RECORD_TYPES.items()}
TYPE_KEY = "type"


# --------------------------------------------------------------------------- JSON, at the file boundary


@functools.cache
def _shape(cls: type) -> tuple[dict, tuple[dataclasses.Field, ...], tuple[str, ...], dict]:
    """A record type's field types, fields, required field names (in field order) and defaults
    by name (`dataclasses.MISSING` for a required field), worked out once per type: reading a
    release builds every record through here. The defaults are for comparing only; never hand
    one out, a default_factory's value is shared."""
    fields = dataclasses.fields(cls)
    defaults = {f.name: _default(f) for f in fields}
    required = tuple(name for name, default in defaults.items() if default is dataclasses.MISSING)
    return typing.get_type_hints(cls), fields, required, defaults


def _plain(value):
    if dataclasses.is_dataclass(value):
        _, fields, _, defaults = _shape(type(value))
        return {f.name: _plain(getattr(value, f.name)) for f in fields
                if getattr(value, f.name) != defaults[f.name]}
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _default(f: dataclasses.Field):
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


def to_json(record: Record) -> dict:
    """The record as JSON: `type` names the record type; fields left at their default are left out."""
    if type(record) not in TYPE_NAMES:
        raise ProvenanceError(f"{record!r} is not a provenance record; attacks append the types of "
                              "advrace.core.provenance")
    return {TYPE_KEY: TYPE_NAMES[type(record)], **_plain(record)}


def _typed(value, hint, where: str):
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None:
            return None
        inner = [a for a in typing.get_args(hint) if a is not type(None)]
        return _typed(value, inner[0], where)
    if origin is tuple:
        args = typing.get_args(hint)
        item = args[0] if args else typing.Any
        if not isinstance(value, (list, tuple)):
            raise ProvenanceError(f"{where}: expected a list, got {value!r}")
        return tuple(_typed(v, item, where) for v in value)
    if hint is tuple:
        return tuple(value)
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, where)
    return value


def _build(cls: type, data, where: str):
    if not isinstance(data, dict):
        raise ProvenanceError(f"{where}: expected an object for {cls.__name__}, got {data!r}")
    hints, _, required, defaults = _shape(cls)
    unknown = sorted(set(data) - defaults.keys())
    if unknown:
        raise ProvenanceError(f"{where}: {cls.__name__} has no field {', '.join(map(repr, unknown))}; "
                              "was the release written by a newer advrace? Upgrade advrace to read it")
    missing = [name for name in required if name not in data]
    if missing:
        raise ProvenanceError(f"{where}: {cls.__name__} lacks {', '.join(map(repr, missing))}")
    return cls(**{k: _typed(v, hints[k], f"{where}.{k}") for k, v in data.items()})


def from_json(data: dict, where: str = "provenance") -> Record:
    """The record that `to_json` wrote; `where` names it in a ProvenanceError."""
    if not isinstance(data, dict) or data.get(TYPE_KEY) not in RECORD_TYPES:
        kind = data.get(TYPE_KEY) if isinstance(data, dict) else None
        raise ProvenanceError(f"{where}: unknown provenance record type {kind!r} (known: "
                              f"{', '.join(RECORD_TYPES)}); upgrade advrace to read it")
    return _build(RECORD_TYPES[data[TYPE_KEY]], {k: v for k, v in data.items() if k != TYPE_KEY}, where)


def rounded(record: Record) -> Record:
    """The record with every float to 4 significant digits (`advrace.core.numbers`), as a
    release keeps it, so that a library's change of summation order does not change its bytes."""
    return from_json(significant_floats(to_json(record)))


# --------------------------------------------------------------------------- release format 1


def _v1_replacement(rep: dict) -> Replacement:
    """AddSent's {word, new, position} or the SQuAD mutation's and CharSwap's {start, end, old, new}."""
    old = rep.get("old", rep.get("word", ""))
    start = rep.get("start", rep.get("position", 0))
    return Replacement(start=start, end=rep.get("end", start + len(old)), old=old, new=rep["new"],
                       kind=rep.get("kind", ""), pos=rep.get("pos"), same_meaning=rep.get("same_meaning"),
                       changes_meaning=rep.get("changes_meaning"))


def _v1_sentence(entry: dict) -> AdversarialSentence:
    distractor = entry.get("distractor") or {}
    return AdversarialSentence(
        sentence=entry["sentence"], question=entry.get("mutated_question") or entry.get("question", ""),
        replacements=tuple(_v1_replacement(r) for r in entry.get("replacements", ())),
        answer=entry.get("fake_answer") or distractor.get("text") or entry.get("answer", ""),
        option=distractor.get("index"), answer_type=entry.get("answer_type", ""), rule=entry.get("rule", ""),
        negation_fallback=bool(entry.get("fallback_not", False)))


def _per_reader(score) -> tuple[float, ...]:
    """Format 1 wrote one reader's score as a number and an ensemble's as a list."""
    if score is None:
        return ()
    return tuple(score) if isinstance(score, list) else (score,)


def _v1_summary(rec: dict) -> AttackSummary:
    attack = rec["attack"]
    if "unchanged" in rec:
        return AttackSummary(attack, unchanged=rec["unchanged"])
    sentences = tuple(_v1_sentence(e) for e in rec.get("sentences", ()) if isinstance(e, dict))
    if "sentence" in rec and "queries" not in rec:
        sentences = (_v1_sentence(rec),)
    distractors = None
    if "new_distractors" in rec:
        distractors = NewDistractors(
            original=tuple(rec.get("original_distractors", ())), new=tuple(rec["new_distractors"]),
            kept_original=rec.get("kept_original", 0), candidates=tuple(rec.get("candidates", ())),
            rejected=dict(rec.get("rejected", {})),
            reader_scores=tuple(_per_reader(s) for s in rec.get("reader_scores", ())),
            gold_reader_scores=_per_reader(rec.get("gold_reader_score")))
    swaps = Swaps(rec["question_swaps"], rec["passage_swaps"], rec["words"]) if "question_swaps" in rec else None
    search = None
    if "queries" in rec:
        search = WordSearch(expected_f1=rec["expected_f1"], top_f1=rec["top_f1"], success=rec["success"],
                            epochs=rec["epochs"], queries=rec["queries"], trace=tuple(rec.get("trace", ())))
        sentences = (AdversarialSentence(rec["sentence"]),)
    return AttackSummary(
        attack, sentences=sentences, position=rec.get("position", ""),
        candidates=rec["candidates"] if isinstance(rec.get("candidates"), int) else None,
        model_f1=rec.get("model_f1"), candidate_f1=tuple(rec.get("candidate_f1", ())),
        distractors=distractors, swaps=swaps, search=search)


def upgrade_v1(rec: dict, where: str = "provenance") -> Record:
    """A provenance record of release format 1 (free-form dicts, each attack its own names) as the
    typed record it stands for: the one place that reads the old layout."""
    if not isinstance(rec, dict):
        raise ProvenanceError(f"{where}: expected a provenance object, got {rec!r}")
    op = rec.get("op")
    if op == "replace":
        return TextReplaced(rec["field"], tuple(_v1_replacement(e) for e in rec.get("edits", ())))
    if op == "insert":
        return SentencesInserted(rec["field"], tuple(PlacedSentence(s["text"], s["at"], s["start"])
                                                     for s in rec.get("sentences", ())))
    if op == "replace_options":
        return OptionsReplaced(tuple(rec["old"]), tuple(rec["new"]), rec["old_label"], rec["label"])
    if op == "remove":
        return FieldsRemoved(tuple(rec.get("fields", ())))
    if op == "authored":
        return Authored(author=rec["author"], model=rec["model"], fooled=rec["fooled"], source=rec.get("source"),
                        history=tuple(rec.get("history") or ()), model_answer=rec.get("model_answer"),
                        model_f1=rec.get("model_f1"))
    if "attack" in rec:
        return _v1_summary(rec)
    raise ProvenanceError(f"{where}: a format-1 provenance record of no known kind: {rec!r}")


# --------------------------------------------------------------------------- reading records


def summary_of(provenance, attack: str) -> AttackSummary | None:
    """The last summary that `attack` appended to a provenance, if any."""
    return next((r for r in reversed(provenance) if isinstance(r, AttackSummary) and r.attack == attack), None)
