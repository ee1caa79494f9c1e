"""Immutable example types whose edit methods keep labels and answer offsets right.

Attacks never do offset arithmetic: they ask an example for a new example with a sentence
inserted, some character spans replaced, or new options, and the example moves every gold
answer offset (or refuses the edit if it would cut through a gold answer). Each edit appends a
record to `provenance`, so a release says exactly what changed and where.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass, field
from typing import Iterable, Sequence

from advrace.core.errors import EditError
from advrace.core.provenance import (FieldsRemoved, OptionsReplaced, PlacedSentence, ProvenanceError, Record,
                                     Replacement, SentencesInserted, TextReplaced, from_json, rounded, to_json)
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE

Span = tuple[int, int, str]  # (start, end, replacement) in the text before the edit


def _check_spans(text: str, edits: Sequence[Span]) -> list[Span]:
    ordered = sorted((int(s), int(e), str(r)) for s, e, r in edits)
    prev_end = -1
    for start, end, _ in ordered:
        if not 0 <= start <= end <= len(text):
            raise EditError(f"edit span ({start}, {end}) lies outside a text of {len(text)} characters")
        if start < prev_end or (start == prev_end and start == end):
            raise EditError(f"edit spans overlap at character {start}")
        prev_end = end
    return ordered


def _apply(text: str, edits: Sequence[Span]) -> str:
    pieces, last = [], 0
    for start, end, new in edits:
        pieces.append(text[last:start])
        pieces.append(new)
        last = end
    pieces.append(text[last:])
    return "".join(pieces)


def _move_span(start: int, end: int, edits: Sequence[Span]) -> int:
    """New start of the untouched span [start, end) after `edits`; EditError if an edit cuts it."""
    shift = 0
    for e_start, e_end, new in edits:
        touches = e_start < end and e_end > start if e_start != e_end else start < e_start < end
        if touches:
            raise EditError(f"edit ({e_start}, {e_end}) overlaps the gold answer at ({start}, {end})")
        if e_end <= start:
            shift += len(new) - (e_end - e_start)
    return start + shift


def _insertion(text: str, at: int, sentence: str) -> Span:
    """The edit that inserts `sentence` at `at` with one space on each side where needed."""
    sentence = sentence.strip()
    if not sentence:
        raise EditError("cannot insert an empty sentence")
    if not 0 <= at <= len(text):
        raise EditError(f"insert position {at} lies outside a text of {len(text)} characters")
    prefix = " " if at > 0 and not text[at - 1].isspace() else ""
    suffix = " " if at < len(text) and not text[at].isspace() else ""
    return (at, at, prefix + sentence + suffix)


def _replace_record(field_name: str, text: str, edits: Sequence[Span]) -> TextReplaced:
    return TextReplaced(field_name, tuple(Replacement(s, e, text[s:e], r) for s, e, r in edits))


class _Editable:
    """Shared edit plumbing; subclasses say which fields are text and how answers move."""

    TEXT_FIELDS: tuple[str, ...] = ()

    def _evolve(self, record: Record | None = None, **changes):
        if record is not None:
            changes["provenance"] = self.provenance + (record,)
        return dataclasses.replace(self, **changes)

    @property
    def passage_field(self) -> str:
        """The field that holds the text the question is about: `passage` (multiple choice) or
        `context` (SQuAD)."""
        return self.TEXT_FIELDS[0]

    @property
    def passage_text(self) -> str:
        """The passage or context: what questions of one passage share."""
        return getattr(self, self.passage_field)

    def _text_field(self, name: str) -> str:
        if name not in self.TEXT_FIELDS:
            raise EditError(f"{type(self).__name__} has no editable text field {name!r}; "
                            f"choose one of {', '.join(self.TEXT_FIELDS)}")
        return getattr(self, name)

    def _edited(self, name: str, edits: Sequence[Span], record: Record):
        raise NotImplementedError

    def replace_spans(self, name: str, edits: Iterable[Span]):
        """Replace character spans `(start, end, new_text)` of a text field, all at once."""
        text = self._text_field(name)
        ordered = _check_spans(text, list(edits))
        if not ordered:
            return self
        return self._edited(name, ordered, _replace_record(name, text, ordered))

    def insert_sentence(self, sentence: str, at: int, name: str | None = None):
        """Insert a sentence at character `at` (a sentence boundary) of the passage or context."""
        return self.insert_sentences([(sentence, at)], name)

    def insert_sentences(self, inserts: Sequence[tuple[str, int]], name: str | None = None):
        """Insert several sentences at once, each `(sentence, at)` with `at` a position in the text
        before any of them; sentences at the same position keep their order."""
        name = name or self.passage_field
        text = self._text_field(name)
        by_pos: dict[int, list[tuple[int, str]]] = {}
        for i, (sentence, at) in enumerate(inserts):
            if not sentence.strip():
                raise EditError("cannot insert an empty sentence")
            by_pos.setdefault(int(at), []).append((i, sentence.strip()))
        edits, placed, shift = [], [], 0
        for at in sorted(by_pos):
            edit = _insertion(text, at, " ".join(sent for _, sent in by_pos[at]))
            offset = at + shift + (len(edit[2]) - len(edit[2].lstrip(" ")))
            for i, sentence in by_pos[at]:
                placed.append((i, PlacedSentence(sentence, at, offset)))
                offset += len(sentence) + 1
            edits.append(edit)
            shift += len(edit[2])
        record = SentencesInserted(name, tuple(p for _, p in sorted(placed, key=lambda x: x[0])))
        return self._edited(name, edits, record)

    def with_provenance(self, record: Record):
        """Append a provenance record (an attack's summary of what it did). Its floats (scores,
        traces) are kept to 4 significant digits (`advrace.core.provenance.rounded`)."""
        return self._evolve(rounded(record))


def _provenance(record: dict) -> tuple[Record, ...]:
    """A record's provenance: a list of `to_json` dicts, or, in a release row, that list as one
    JSON string (what a release writes, so that every split has one schema, and what
    `datasets.load_dataset("json", data_dir=RELEASE)` gives back)."""
    provenance = record.get("provenance") or ()
    if isinstance(provenance, str):
        try:
            provenance = json.loads(provenance)
        except json.JSONDecodeError as exc:
            raise ProvenanceError(f"record {record.get('id')!r}: provenance is not valid JSON ({exc})") from None
    return tuple(from_json(r) for r in provenance)


@dataclass(frozen=True)
class MCExample(_Editable):
    """A multiple-choice question over a passage (RACE)."""

    id: str
    passage: str
    question: str
    options: tuple[str, ...]
    label: int
    source_id: str = ""
    provenance: tuple[Record, ...] = field(default=())

    TEXT_FIELDS = ("passage", "question")
    task = MULTIPLE_CHOICE

    def __post_init__(self):
        object.__setattr__(self, "options", tuple(self.options))
        object.__setattr__(self, "provenance", tuple(self.provenance))
        if not self.source_id:
            object.__setattr__(self, "source_id", self.id)
        if isinstance(self.label, bool) or not isinstance(self.label, int):
            raise ValueError(f"label must be an int, got {self.label!r}")
        if not 0 <= self.label < len(self.options):
            raise ValueError(f"label {self.label} is out of range for {len(self.options)} options")

    @property
    def answer(self) -> str:
        return self.options[self.label]

    @property
    def distractors(self) -> tuple[str, ...]:
        return tuple(o for i, o in enumerate(self.options) if i != self.label)

    def _edited(self, name, edits, record):
        return self._evolve(record, **{name: _apply(getattr(self, name), edits)})

    def replace_options(self, options: Sequence[str], label: int | None = None) -> "MCExample":
        """New options; the label stays on the same index unless a new one is given."""
        options = tuple(options)
        label = self.label if label is None else label
        record = OptionsReplaced(self.options, options, self.label, label)
        return self._evolve(record, options=options, label=label)

    def without_context(self) -> "MCExample":
        """Only the options left: the passage and question are emptied (the PQ-remove probe)."""
        record = FieldsRemoved(("passage", "question"))
        return self._evolve(record, passage="", question="")

    def to_record(self) -> dict:
        return {"id": self.id, "source_id": self.source_id, "passage": self.passage,
                "question": self.question, "options": list(self.options), "label": self.label,
                "provenance": [to_json(r) for r in self.provenance]}

    @classmethod
    def from_record(cls, record: dict) -> "MCExample":
        return cls(id=record["id"], passage=record["passage"], question=record["question"],
                   options=tuple(record["options"]), label=int(record["label"]),
                   source_id=record.get("source_id", ""),
                   provenance=_provenance(record))


@dataclass(frozen=True)
class Answer:
    text: str
    start: int

    @property
    def end(self) -> int:
        return self.start + len(self.text)


@dataclass(frozen=True)
class SpanExample(_Editable):
    """An extractive question over a context (SQuAD v1.1); every answer is found at its offset."""

    id: str
    title: str
    context: str
    question: str
    answers: tuple[Answer, ...]
    source_id: str = ""
    provenance: tuple[Record, ...] = field(default=())

    TEXT_FIELDS = ("context", "question")
    task = EXTRACTIVE_QA

    def __post_init__(self):
        answers = tuple(a if isinstance(a, Answer) else Answer(str(a[0]), int(a[1]))
                        for a in self.answers)
        object.__setattr__(self, "answers", answers)
        object.__setattr__(self, "provenance", tuple(self.provenance))
        if not self.source_id:
            object.__setattr__(self, "source_id", self.id)
        if not answers:
            raise ValueError("an extractive example needs at least one answer")
        for a in answers:
            if a.start < 0 or self.context[a.start:a.end] != a.text:
                raise ValueError(f"answer {a.text!r} is not found at character {a.start} of the context")

    def answer_spans(self) -> list[tuple[int, int]]:
        return [(a.start, a.end) for a in self.answers]

    def _edited(self, name, edits, record):
        if name != "context":
            return self._evolve(record, **{name: _apply(getattr(self, name), edits)})
        answers = tuple(Answer(a.text, _move_span(a.start, a.end, edits)) for a in self.answers)
        return self._evolve(record, context=_apply(self.context, edits), answers=answers)

    def to_record(self) -> dict:
        return {"id": self.id, "source_id": self.source_id, "title": self.title,
                "context": self.context, "question": self.question,
                "answers": {"text": [a.text for a in self.answers],
                            "answer_start": [a.start for a in self.answers]},
                "provenance": [to_json(r) for r in self.provenance]}

    @classmethod
    def from_record(cls, record: dict) -> "SpanExample":
        ans = record["answers"]
        return cls(id=record["id"], title=record.get("title", ""), context=record["context"],
                   question=record["question"],
                   answers=tuple(Answer(t, s) for t, s in zip(ans["text"], ans["answer_start"])),
                   source_id=record.get("source_id", ""),
                   provenance=_provenance(record))


Example = MCExample | SpanExample


def example_from_record(record: dict) -> Example:
    return SpanExample.from_record(record) if "context" in record else MCExample.from_record(record)


def examples_sha256(examples: Iterable) -> str:
    """sha256 of the examples' records, in order: what they are, not where they were read from."""
    h = hashlib.sha256()
    for ex in examples:
        h.update(json.dumps(ex.to_record(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
        h.update(b"\n")
    return h.hexdigest()
