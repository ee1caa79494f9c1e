"""RACE as released: a folder tree of `*.txt` files, one JSON passage each (RACE/test/high/1.txt)."""

from __future__ import annotations

import os
import re

from advrace.core.errors import DataError
from advrace.core.tasks import MULTIPLE_CHOICE

from .base import (BadRecord, Collector, Format, Hasher, LoadResult, Probe, check_args, decode, parse_json,
                   read_bytes)
from .records import add_passage
from .registry import register_format

NAME = "race-dir"


def _natural_key(rel: str) -> tuple:
    parts = [tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", c)))
             for c in rel.split("/")]
    return (parts, rel)


def _race_files(path: str) -> list[str]:
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.endswith(".txt") and not name.startswith("."):
                rel = os.path.relpath(os.path.join(root, name), path)
                found.append(rel.replace(os.sep, "/"))
    return sorted(found, key=_natural_key)


def load_race_dir(path, *, lenient: bool = False, limit: int | None = None,
                  n_options: int = 4) -> LoadResult:
    """Every `*.txt` RACE passage below `path`, in natural order of relative path."""
    check_args(limit, n_options)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DataError(path, None, "no such folder")
    if not os.path.isdir(path):
        raise DataError(path, None, "is not a folder; race-dir reads every *.txt passage below a "
                                    "folder such as RACE/test")
    rels = _race_files(path)
    if not rels:
        raise DataError(path, None, "no *.txt files below this folder (RACE passages look like "
                                    "RACE/test/high/1.txt)")
    out, hasher, files = Collector(lenient, limit), Hasher(), []
    for rel in rels:
        if out.full:
            break
        file = os.path.join(path, rel)
        try:
            raw = read_bytes(file)
        except DataError as e:
            out.bad(file, None, e.problem)
            continue
        files.append(rel)
        hasher.add(rel, raw)
        try:
            obj = parse_json(decode(raw))
        except BadRecord as e:
            out.bad(file, None, e.problem)
            continue
        add_passage(out, file, None, lambda pid, k: f"{pid} question {k}", obj, rel, n_options)
    return out.result(path, NAME, files, hasher.hexdigest())


@register_format
class RaceDir(Format):
    name = NAME
    tasks = (MULTIPLE_CHOICE,)
    description = "a RACE folder"

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test") -> LoadResult:
        return load_race_dir(path, lenient=lenient, limit=limit, n_options=n_options)

    def detect(self, probe: Probe) -> bool:
        return probe.isdir

    def sniff(self, probe: Probe) -> bool:
        return probe.isdir
