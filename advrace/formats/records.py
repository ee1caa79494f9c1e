"""Checks of one record that several formats share: a RACE question, a RACE passage, a hub-shaped
RACE row, a SQuAD answer set. Each raises BadRecord with the words the user will read, so the
same mistake reads the same whichever format it came in."""

from __future__ import annotations

import string
from typing import Any, Callable, Iterable

from advrace.core.examples import Answer, MCExample, SpanExample

from .base import BadRecord, Collector

RACE_FIELDS = ("article", "questions", "options", "answers")
RACE_ROW_FIELDS = ("example_id", "article", "question", "options", "answer")


def field_of(obj: dict, name: str, kind: type | tuple[type, ...] = str) -> Any:
    if name not in obj:
        raise BadRecord(f"missing field {name!r}")
    value = obj[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise BadRecord(f"field {name!r} must be a {want}, got {type(value).__name__}")
    return value


def text_of(obj: dict, name: str) -> str:
    value = field_of(obj, name, str)
    if not value.strip():
        raise BadRecord(f"empty {name}" if value == "" else f"empty {name} (whitespace only)")
    return value


def need_obj(obj: Any, what: str) -> dict:
    if not isinstance(obj, dict):
        raise BadRecord(f"expected a JSON object for {what}, got {type(obj).__name__}")
    return obj


def _question(question: Any) -> str:
    if not isinstance(question, str):
        raise BadRecord(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise BadRecord("empty question" if question == "" else "empty question (whitespace only)")
    return question


def _options(value: Any, n_options: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise BadRecord(f"options must be a list, got {type(value).__name__}")
    if len(value) != n_options:
        raise BadRecord(f"wrong number of options: expected {n_options} options, got {len(value)}")
    for i, opt in enumerate(value):
        if not isinstance(opt, str):
            raise BadRecord(f"option {i} must be a string, got {type(opt).__name__}")
    return tuple(value)


def _label(value: Any, n_options: int, *, allow_int: bool, name: str = "answer") -> int:
    letters = string.ascii_uppercase[:n_options]
    span = f"{letters[0]}-{letters[-1]}"
    if isinstance(value, str):
        if len(value) == 1 and value in string.ascii_uppercase:
            if value not in letters:
                raise BadRecord(f"{name} {value!r} is out of range for {n_options} options "
                                f"(expected a letter {span})")
            return letters.index(value)
        raise BadRecord(f"{name} {value!r} is not a letter {span}")
    if allow_int and isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < n_options:
            raise BadRecord(f"{name} {value} is out of range for {n_options} options "
                            f"(expected 0-{n_options - 1} or a letter {span})")
        return value
    want = f"an index 0-{n_options - 1} or a letter {span}" if allow_int else f"a letter {span}"
    raise BadRecord(f"{name} must be {want}, got {type(value).__name__} {value!r}")


def mc_example(ex_id: str, passage: str, question: Any, options: Any, answer: Any, n_options: int,
               *, allow_int: bool = False, label_name: str = "answer") -> MCExample:
    question = _question(question)
    opts = _options(options, n_options)
    label = _label(answer, n_options, allow_int=allow_int, name=label_name)
    return MCExample(id=ex_id, passage=passage, question=question, options=opts, label=label,
                     source_id=ex_id)


# ---------------------------------------------------------------- RACE


def _race_passage(obj: Any, fallback_id: str) -> tuple[str, str, list, list, list]:
    """Check a RACE passage object's shape; returns (passage_id, article, qs, opts, answers)."""
    obj = need_obj(obj, "a RACE passage")
    passage_id = fallback_id
    if "id" in obj:
        passage_id = field_of(obj, "id", str)
        if not passage_id.strip():
            raise BadRecord("empty id")
    for name in RACE_FIELDS:
        if name not in obj:
            raise BadRecord(f"missing field {name!r}")
    article = text_of(obj, "article")
    questions = field_of(obj, "questions", list)
    options = field_of(obj, "options", list)
    answers = field_of(obj, "answers", list)
    if not len(questions) == len(options) == len(answers):
        raise BadRecord(f"lengths disagree: {len(questions)} questions, {len(options)} option lists, "
                        f"{len(answers)} answers")
    return passage_id, article, questions, options, answers


def add_passage(out: Collector, file: str, record: str | None, qname: Callable[[str, int], str],
                obj: Any, fallback_id: str, n_options: int) -> None:
    """One RACE passage object: a shape problem is one bad record, each question one record."""
    try:
        pid, article, questions, options, answers = _race_passage(obj, fallback_id)
    except BadRecord as e:
        out.bad(file, record, e.problem)
        return
    for k, (q, opts, ans) in enumerate(zip(questions, options, answers)):
        if out.full:
            return
        ex_id = f"{pid}-{k}"
        out.add(file, qname(pid, k), lambda q=q, opts=opts, ans=ans, ex_id=ex_id:
                mc_example(ex_id, article, q, opts, ans, n_options))


def race_row(row: dict, k: int | None, n_options: int) -> MCExample:
    """A hub-shaped RACE row; `k` is its position among rows of the same passage."""
    for name in RACE_ROW_FIELDS:
        if name not in row:
            raise BadRecord(f"missing field {name!r}")
    eid = field_of(row, "example_id", str)
    if not eid.strip():
        raise BadRecord("empty example_id")
    article = text_of(row, "article")
    return mc_example(f"{eid}-{k}", article, row["question"], row["options"], row["answer"], n_options)


# ---------------------------------------------------------------- SQuAD


def answer_set(pairs: Iterable[tuple[Any, Any]]) -> tuple[Answer, ...]:
    """(text, start) pairs, checked and deduplicated in order."""
    seen, kept = set(), []
    for i, (text, start) in enumerate(pairs):
        if not isinstance(text, str):
            raise BadRecord(f"answer {i} text must be a string, got {type(text).__name__}")
        if isinstance(start, bool) or not isinstance(start, int):
            raise BadRecord(f"answer {i} answer_start must be an integer, got {type(start).__name__}")
        if (text, start) not in seen:
            seen.add((text, start))
            kept.append(Answer(text, start))
    if not kept:
        raise BadRecord("no answers (unanswerable questions, as in SQuAD v2, are not supported)")
    return tuple(kept)


def span_example(qid: str, title: str, context: str, question: Any,
                 answers: tuple[Answer, ...]) -> SpanExample:
    question = _question(question)
    for a in answers:
        if not 0 <= a.start <= len(context) or context[a.start:a.end] != a.text:
            found = context[a.start:a.end] if 0 <= a.start <= len(context) else ""
            raise BadRecord(f"answer {a.text!r} is not found in the context at answer_start {a.start} "
                            f"(the context has {found!r} there)")
    return SpanExample(id=qid, title=title, context=context, question=question, answers=answers,
                       source_id=qid)
