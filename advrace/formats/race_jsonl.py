"""RACE as JSON lines, optionally gzipped: one question per line in the hub's shape
(`example_id, article, question, options, answer`), or one RACE passage per line."""

from __future__ import annotations

import os
from typing import Iterator

from advrace.core.tasks import MULTIPLE_CHOICE

from .base import (BadRecord, Collector, Format, LoadResult, Probe, check_args, decode, file_digest, gunzip,
                   need_file, parse_json, read_bytes)
from .records import add_passage, need_obj, race_row
from .registry import register_format

NAME = "race-jsonl"


def _lines(raw: bytes) -> Iterator[tuple[int, bytes]]:
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            yield n, line


def load_race_jsonl(path, *, lenient: bool = False, limit: int | None = None,
                    n_options: int = 4) -> LoadResult:
    """One RACE question (hub shape) or one RACE passage per line; gzip is detected by content."""
    check_args(limit, n_options)
    path = os.fspath(path)
    need_file(path)
    raw = read_bytes(path)
    text = gunzip(path, raw)
    out = Collector(lenient, limit)
    seen: dict[str, int] = {}
    for n, line in _lines(text):
        if out.full:
            break
        record = f"line {n}"
        try:
            row = need_obj(parse_json(decode(line, n), in_line=True), "a row")
        except BadRecord as e:
            out.bad(path, record, e.problem)
            continue
        if "questions" in row:
            if isinstance(row.get("id"), str):
                record = f"line {n} (id={row['id']})"
            add_passage(out, path, record, lambda pid, k, r=record: f"{r} question {k}",
                        row, f"line{n}", n_options)
        elif "question" in row:
            eid = row.get("example_id")
            k = None
            if isinstance(eid, str):
                record = f"line {n} (example_id={eid})"
                k = seen.get(eid, 0)
                seen[eid] = k + 1
            out.add(path, record, lambda row=row, k=k: race_row(row, k, n_options))
        else:
            out.bad(path, record, "row has neither 'question' (one question per line, as on the "
                                  "hub) nor 'questions' (one passage per line, as in RACE files)")
    return out.result(path, NAME, [os.path.basename(path)], file_digest(path, raw))


@register_format
class RaceJsonl(Format):
    name = NAME
    tasks = (MULTIPLE_CHOICE,)
    description = "RACE JSON lines"

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test") -> LoadResult:
        return load_race_jsonl(path, lenient=lenient, limit=limit, n_options=n_options)

    def detect(self, probe: Probe) -> bool:
        return probe.suffix(".jsonl", ".jsonl.gz")

    def sniff(self, probe: Probe) -> bool:
        if probe.peek is None:
            return False
        row = probe.peek[0]
        return isinstance(row, dict) and ("question" in row or "questions" in row)
