"""SQuAD v1.1 JSON: articles of paragraphs of questions, answers given as text and offset."""

from __future__ import annotations

import os

from advrace.core.errors import DataError
from advrace.core.examples import SpanExample
from advrace.core.tasks import EXTRACTIVE_QA

from .base import (BadRecord, Collector, Format, LoadResult, Probe, check_args, file_digest, need_file,
                   read_json_file)
from .records import answer_set, field_of, need_obj, span_example, text_of
from .registry import register_format

NAME = "squad"


def _squad_qa(qa: dict, title: str, context: str) -> SpanExample:
    qid = field_of(qa, "id", str)
    if "question" not in qa:
        raise BadRecord("missing field 'question'")
    ans = field_of(qa, "answers", list)
    pairs = []
    for i, a in enumerate(ans):
        if not isinstance(a, dict):
            raise BadRecord(f"answer {i} must be an object with text and answer_start")
        for name in ("text", "answer_start"):
            if name not in a:
                raise BadRecord(f"answer {i} is missing field {name!r}")
        pairs.append((a["text"], a["answer_start"]))
    return span_example(qid, title, context, qa["question"], answer_set(pairs))


def load_squad(path, *, lenient: bool = False, limit: int | None = None,
               n_options: int | None = None) -> LoadResult:
    """SQuAD v1.1 JSON: one SpanExample per qa, answers deduplicated by (text, start).

    SQuAD has no options: `n_options` is only checked, so that `load` refuses a bad value for
    every format alike."""
    check_args(limit, n_options)
    path = os.fspath(path)
    need_file(path)
    raw, data = read_json_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(path, None, "expected a SQuAD v1.1 object with a 'data' list of articles")
    out = Collector(lenient, limit)
    for i, article in enumerate(data["data"]):
        if out.full:
            break
        try:
            article = need_obj(article, "an article")
            title = article.get("title", "")
            if not isinstance(title, str):
                raise BadRecord(f"field 'title' must be a str, got {type(title).__name__}")
            paragraphs = field_of(article, "paragraphs", list)
        except BadRecord as e:
            out.bad(path, f"article {i}", e.problem)
            continue
        for j, par in enumerate(paragraphs):
            if out.full:
                break
            where = f"article {i} ({title}) paragraph {j}"
            try:
                par = need_obj(par, "a paragraph")
                if "context" not in par:
                    raise BadRecord("missing field 'context'")
                context = text_of(par, "context")
                qas = field_of(par, "qas", list)
            except BadRecord as e:
                out.bad(path, where, e.problem)
                continue
            for k, qa in enumerate(qas):
                if out.full:
                    break
                record = f"{where} qa {k}"
                if isinstance(qa, dict) and isinstance(qa.get("id"), str):
                    record = f"qa {qa['id']}"
                out.add(path, record, lambda qa=qa, title=title, context=context:
                        _squad_qa(need_obj(qa, "a qa"), title, context))
    return out.result(path, NAME, [os.path.basename(path)], file_digest(path, raw))


@register_format
class Squad(Format):
    name = NAME
    tasks = (EXTRACTIVE_QA,)
    description = "SQuAD v1.1 JSON"
    priority = 1  # named top-level keys: asked before the looser RACE and AdvRACE shapes

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test") -> LoadResult:
        return load_squad(path, lenient=lenient, limit=limit, n_options=n_options)

    def detect(self, probe: Probe) -> bool:
        if not probe.suffix(".json"):
            return False
        data = probe.parsed
        return isinstance(data, dict) and "data" in data and "version" in data

    def sniff(self, probe: Probe) -> bool:
        if probe.peek is None or not probe.peek[1]:
            return False
        data = probe.peek[0]
        return isinstance(data, dict) and isinstance(data.get("data"), list)
