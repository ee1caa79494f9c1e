"""The AdvRACE release's own file: one JSON dict `race_id -> {context, question, options, label}`,
so the published adversarial sets can be read and compared with ours."""

from __future__ import annotations

import os
from typing import Any

from advrace.core.errors import DataError
from advrace.core.examples import MCExample
from advrace.core.tasks import MULTIPLE_CHOICE

from .base import (BadRecord, Collector, Format, LoadResult, Probe, check_args, file_digest, need_file,
                   read_json_file)
from .records import mc_example, need_obj, text_of
from .registry import register_format

NAME = "advrace-json"


class _Pairs(dict):
    """A JSON object that remembers its keys in order, duplicates included."""

    pairs: list


def _pairs_hook(pairs: list) -> _Pairs:
    obj = _Pairs(pairs)
    obj.pairs = pairs
    return obj


def load_advrace_json(path, *, lenient: bool = False, limit: int | None = None,
                      n_options: int = 4) -> LoadResult:
    """The AdvRACE release dict `race_id -> {context, question, options, label}`, in key order."""
    check_args(limit, n_options)
    path = os.fspath(path)
    need_file(path)
    raw, data = read_json_file(path, object_pairs_hook=_pairs_hook)
    if not isinstance(data, dict):
        raise DataError(path, None, "expected a JSON object mapping race_id to "
                                    f"{{context, question, options, label}}, got {type(data).__name__}")
    out = Collector(lenient, limit)
    for race_id, rec in data.pairs:
        if out.full:
            break
        out.add(path, f"race_id {race_id}", lambda rid=race_id, rec=rec: _advrace_mc(rid, rec, n_options))
    return out.result(path, NAME, [os.path.basename(path)], file_digest(path, raw))


def _advrace_mc(race_id: str, rec: Any, n_options: int) -> MCExample:
    rec = need_obj(rec, "a record")
    for name in ("context", "question", "options", "label"):
        if name not in rec:
            raise BadRecord(f"missing field {name!r}")
    if not race_id.strip():
        raise BadRecord("empty race_id")
    context = text_of(rec, "context")
    return mc_example(race_id, context, rec["question"], rec["options"], rec["label"], n_options,
                      allow_int=True, label_name="label")


def _first_record(data: Any) -> dict | None:
    if isinstance(data, dict) and data:
        first = next(iter(data.values()))
        if isinstance(first, dict):
            return first
    return None


@register_format
class AdvraceJson(Format):
    name = NAME
    tasks = (MULTIPLE_CHOICE,)
    description = "an AdvRACE release file"
    priority = -1  # any dict of records fits, so formats with named top-level keys go first

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test") -> LoadResult:
        return load_advrace_json(path, lenient=lenient, limit=limit, n_options=n_options)

    def detect(self, probe: Probe) -> bool:
        if not probe.suffix(".json"):
            return False
        first = _first_record(probe.parsed)
        return first is not None and ("context" in first or "options" in first)

    def sniff(self, probe: Probe) -> bool:
        if probe.peek is None or not probe.peek[1]:
            return False
        first = _first_record(probe.peek[0])
        return first is not None and "context" in first and "options" in first
