"""Readers that turn RACE and SQuAD inputs into validated, immutable examples.

Each format is one module that registers a `Format` (base.py); `load` and `detect_format` ask
the registry (registry.py), so a new format is one new module here, or one class in another
package listed in the `advrace.formats` entry-point group.
"""

from __future__ import annotations

import os

from advrace.core.errors import ConfigError, DataError
from advrace.core.registry import import_submodules

from .base import Format, LoadResult, Probe
from .registry import (PLUGIN_GROUP, REGISTRY, detection_order, format_names, get_format, register_format,
                       unregister_format)

# Importing a format module registers it; this order is the order --format lists them in.
from .race_dir import load_race_dir  # isort: skip
from .race_jsonl import load_race_jsonl  # isort: skip
from .advrace_json import load_advrace_json  # isort: skip
from .squad import load_squad  # isort: skip
from .hub import load_hub  # isort: skip

import_submodules(__name__, __path__)  # any other format module of this folder, listed after these


def detect_format(path: str) -> str:
    """Guess the format from the path (and, for .json, the top-level shape): the first format,
    in detection order, whose `detect` recognises it."""
    path = os.fspath(path)
    probe = Probe(path)
    for fmt in detection_order():
        if fmt.detect(probe):
            return fmt.name
    if not probe.exists:
        raise DataError(path, None, "no such file or folder (a hub dataset is named like "
                                    "'ehovy/race')")
    raise ConfigError(f"cannot tell the format of {path!r}; pass --format "
                      f"(one of {', '.join(format_names())})")


def _mismatch(path: str, fmt: str, exc: str | None) -> DataError | None:
    """A clearer error when the data is fine but in another format than the one asked for."""
    probe = Probe(path)
    found = next((f for f in detection_order() if f.local and f.sniff(probe)), None)
    if found is None or found.name == fmt:
        return None
    return DataError(path, None, f"looks like {found.description}, not {fmt}"
                                 f"{f' ({exc})' if exc else ''}; pass --format {found.name}, or set "
                                 f"format: {found.name} in the config")


def load(path: str, format: str | None = None, *, lenient: bool = False, limit: int | None = None,
         n_options: int = 4, part: str = "test") -> LoadResult:
    """Load `path` in `format` (detected when None); `part` (the data set's train, dev or test
    split) applies to the hub only.

    When the data does not read as the format asked for but looks like another one, the error
    names that one, so a config's format left over from other data is easy to fix.
    """
    path = os.fspath(path)
    options = dict(lenient=lenient, limit=limit, n_options=n_options, part=part)
    if format is None:
        return get_format(detect_format(path)).load(path, **options)
    fmt = get_format(format)
    try:
        result = fmt.load(path, **options)
    except DataError as exc:
        if fmt.local:
            better = _mismatch(path, fmt.name, exc.problem if exc.record is None else None)
            if better is not None:
                raise better from None
        raise
    if fmt.local and not result.examples and result.skipped:
        better = _mismatch(path, fmt.name, None)
        if better is not None:
            raise better
    return result


__all__ = ["PLUGIN_GROUP", "REGISTRY", "Format", "LoadResult", "Probe", "detect_format",
           "format_names", "get_format", "load", "load_advrace_json", "load_hub", "load_race_dir",
           "load_race_jsonl", "load_squad", "register_format", "unregister_format"]
