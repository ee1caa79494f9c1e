"""Paths in config files: the one place that decides whether a setting's value names a local file
or folder, and reads a relative one from the folder of the config file that names it.

A relative path in a config file (release, training, ablation) is relative to that file's folder,
so a config works from any working directory; a value given on the command line (`--data`,
`--set KEY=VALUE`, `--output-dir`, `--out`) is relative to the shell's folder, as it is left
as given. Absolute paths, `~/...`, `@sample/NAME` and names are never changed.

Three kinds of setting:

- PATH: always a local file or folder (`output_dir`, `release`, resources' `*_path`, `*_dir`);
- DATA: a local file or folder, or a hub dataset `owner/name[:config]` (`ehovy/race`);
- MODEL: a local folder, or a model by name: a Hub id (`bert-base-uncased`, `owner/name`) or a
  built-in (`minilm`, `smollm2`, the readers `sliding-window`, `similarity[:ENCODER]`).

A DATA or MODEL value that could be a name (`owner/name`, `bert-base-uncased`) is a path only
when it exists next to the config file, or (a MODEL) when its `owner` is a folder there
(`runs/dg` beside `runs/`); anything else (`./x`, `../runs/de/final`, `a/b/c`, `data.jsonl`)
is a path. Write `./NAME` to mean a folder that does not exist yet.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

SAMPLE_PREFIX = "@sample/"
# Said after a missing path, so that the reader knows which folder it was looked for in.
WHERE_PATHS_ARE_READ = (" (a relative path in a config file is read from that file's folder; one given on "
                        "the command line, from the current folder)")

PATH = "path"
DATA = "data"
MODEL = "model"

# Settings of an attack's config (or a release's `resources`) that name files, folders or models:
# the models by these keys, files and folders by their endings. A third-party attack names its
# path settings so too.
MODEL_KEYS = frozenset({"model", "select_with", "tokenizer", "judge"})
PATH_ENDINGS = ("_path", "_dir", "_file")

# A Hub model id: `name` or `owner/name` (what advrace.models.runtime.loading reads from the Hub).
_MODEL_ID = re.compile(r"[\w.-]+(/[\w.-]+)?")
# A hub dataset: `owner/name`, optionally `:config` (what advrace.formats.hub reads).
_DATASET_ID = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(:[A-Za-z0-9_.-]+)?")
_DATA_SUFFIXES = (".json", ".jsonl", ".gz", ".txt", ".csv", ".tsv", ".parquet")
# A built-in's name before its argument: `similarity:ENCODER`, `sliding-window:distance`.
_BUILT_IN = re.compile(r"[A-Za-z][\w-]+")


def looks_like_model_name(name: str, folder: str | None = None) -> bool:
    """A Hub model id or a built-in name (`bert-base-uncased`, `owner/name`, `minilm`): what the
    checkpoint loader may look up by name when no such local folder exists. An `owner/name`
    whose owner is a folder here (seen from `folder`; None: the shell's) is a path, as `runs/dg`
    is beside `runs/` before that run is trained: a folder to report missing, not a Hub id."""
    if name.startswith((".", "/", "~")) or not _MODEL_ID.fullmatch(name):
        return False
    owner, slash, _ = name.partition("/")
    return not (slash and os.path.isdir(_join(folder, owner)))


def looks_like_dataset_name(name: str) -> bool:
    """A hub dataset `owner/name[:config]` (`ehovy/race`, `rajpurkar/squad`), not a data file."""
    if name.startswith((".", "/", "~")) or name.lower().endswith(_DATA_SUFFIXES):
        return False
    return bool(_DATASET_ID.fullmatch(name))


def data_kind(format: str | None) -> str:
    """DATA when the data's format is detected or is the hub's; PATH for a local format."""
    return DATA if format in (None, "hub") else PATH


def setting_kind(key) -> str | None:
    """The kind of an attack-config or resources setting by its key; None: not a path."""
    if not isinstance(key, str):
        return None
    if key in MODEL_KEYS:
        return MODEL
    if key.endswith(PATH_ENDINGS):
        return PATH
    return None


def config_folder(path: str | os.PathLike) -> str:
    """The folder of a config file, as the relative paths in it are read from ("" for the
    shell's folder)."""
    return os.path.dirname(os.fspath(path))


def _join(folder: str | None, path: str) -> str:
    return path if folder is None else os.path.normpath(os.path.join(folder, path))


def _exists(path: str) -> bool:
    return os.path.exists(os.path.expanduser(path))


def _located(value: str, kind: str, folder: str | None) -> tuple[str, str] | None:
    """(prefix, path) when `value` names a local file or folder, seen from `folder` (None: the
    shell's); None when it names something else. The prefix is a built-in's `NAME:` before the
    folder it takes (`similarity:ENCODER`), else ""."""
    if not value or value.startswith(SAMPLE_PREFIX):
        return None
    if kind == MODEL:
        head, colon, arg = value.partition(":")
        if colon and _BUILT_IN.fullmatch(head):
            found = _located(arg, MODEL, folder)
            return None if found is None else (head + colon + found[0], found[1])
        if looks_like_model_name(value, folder) and not _exists(_join(folder, value)):
            return None
    elif kind == DATA and looks_like_dataset_name(value) and not _exists(_join(folder, value)):
        return None
    return "", value


def models_named(value: str) -> list[str]:
    """The models a comma-separated MODEL value names (`select_with: similarity,sliding-window`:
    an ensemble of readers)."""
    return [part.strip() for part in value.split(",")]


def resolve(value: Any, folder: str | os.PathLike | None, kind: str = PATH) -> Any:
    """`value` as a config file in `folder` means it: a relative path joined to the folder (and
    normalised: `configs/release/../../runs/x` is `runs/x`), anything else unchanged. `folder`
    None leaves every value as given (a value from the command line or from code)."""
    if folder is None or not isinstance(value, str):
        return value
    if kind == MODEL and "," in value:
        return ",".join(resolve(part, folder, kind) for part in models_named(value))
    folder = os.fspath(folder)
    found = _located(value, kind, folder)
    if found is None:
        return value
    prefix, path = found
    if path.startswith("~") or os.path.isabs(path):
        return value
    return prefix + _join(folder, path)


def named_path(value: Any, kind: str = PATH) -> str | None:
    """The local file or folder that a setting's (resolved) value names, `~` expanded; None for a
    name (a Hub id, a built-in, `@sample/NAME`) or an empty value."""
    if not isinstance(value, str):
        return None
    found = _located(value, kind, None)
    return None if found is None else os.path.expanduser(found[1])


def portable(value: Any, kind: str, name) -> Any:
    """`value` with the path it names replaced by `name(path)` (a checkpoint's short name, say);
    names and built-ins unchanged."""
    if not isinstance(value, str):
        return value
    if kind == MODEL and "," in value:
        return ",".join(portable(part, kind, name) for part in models_named(value))
    found = _located(value, kind, None)
    return value if found is None else found[0] + name(found[1])


def resolve_settings(values: Any, folder: str | os.PathLike | None) -> Any:
    """An attack config (or `resources`) mapping with its path settings (`setting_kind`) resolved
    against `folder`; anything but a mapping unchanged, for the config checker to refuse."""
    if folder is None or not isinstance(values, Mapping):
        return values
    return {k: resolve(v, folder, setting_kind(k)) if setting_kind(k) else v for k, v in values.items()}


def is_missing(path: str | None, kind: str) -> bool:
    """A named local path that is not there (a model must be a folder); None names nothing."""
    return path is not None and not (os.path.isdir(path) if kind == MODEL else os.path.exists(path))


def missing_paths(values: Any) -> list[tuple[str, str, str]]:
    """(key, path, kind) for each path setting of a mapping whose file or folder does not exist
    (a model must be a folder)."""
    if not isinstance(values, Mapping):
        return []
    out = []
    for key, value in values.items():
        kind = setting_kind(key)
        parts = models_named(value) if kind == MODEL and isinstance(value, str) else [value]
        for part in parts:
            path = named_path(part, kind) if kind else None
            if is_missing(path, kind):
                out.append((key, path, kind))
    return out
