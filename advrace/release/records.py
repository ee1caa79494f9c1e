"""Release records: one JSON line per example, under its split's file, and SQuAD JSON."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path
from typing import Iterator

from advrace import __version__
from advrace.core.errors import AdvraceError, ConfigError
from advrace.core.examples import SpanExample, example_from_record
from advrace.core.provenance import from_json, upgrade_v1

NO_ATTACK = "none"  # the `attack` of a record that no attack made (the original split, say)
# The layout of a release's records. 2: provenance as typed records (advrace.core.provenance);
# 1: each attack's own dicts, read through `upgrade_v1`.
FORMAT_VERSION = 2
PROVENANCE_READERS = {1: upgrade_v1, 2: from_json}


class ReleaseFormatError(AdvraceError):
    """A release written in a format that this advrace cannot read."""

    exit_code = 2


def check_format(manifest: dict, path) -> int:
    """The manifest's release format version, if this advrace reads it; ReleaseFormatError if not."""
    version = manifest.get("format_version")
    if version not in PROVENANCE_READERS:
        known = ", ".join(map(str, PROVENANCE_READERS))
        raise ReleaseFormatError(
            f"{path}: release format version {version!r}, but advrace {__version__} reads versions {known}; "
            "upgrade advrace (pip install --upgrade advrace) to read this release")
    return version


def release_format(release_dir: str | Path) -> int:
    """The format version of a release folder (the current one for a folder with no manifest)."""
    path = Path(release_dir) / "manifest.json"
    if not path.is_file():
        return FORMAT_VERSION
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise ConfigError(f"{path}: invalid JSON ({exc})") from None
    return check_format(manifest, path)


def split_file(split: str) -> str:
    """A split's file inside a release (the Hub's naming for named splits)."""
    return f"data/{split}-00000-of-00001.jsonl"


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def in_split(example, split: str):
    """The example under its release-wide id `<split>/<source_id>`."""
    return dataclasses.replace(example, id=f"{split}/{example.source_id}")


def to_record(example, split: str, attack: str, perturbed: bool) -> dict:
    """A release record. Provenance is a JSON string so that every split has one schema, which
    `datasets` needs to load all splits of a release together."""
    rec = example.to_record()
    provenance = dumps(rec.pop("provenance"))
    return {"id": rec.pop("id"), "split": split, "attack": attack, "perturbed": perturbed,
            **rec, "provenance": provenance}


def from_record(record: dict, version: int = FORMAT_VERSION, where: str = "record"):
    """The example of a release record written in format `version`."""
    provenance = record.get("provenance") or []
    if isinstance(provenance, str):
        provenance = json.loads(provenance)
    read = PROVENANCE_READERS[version]
    example = example_from_record({**record, "provenance": []})
    return dataclasses.replace(example, provenance=tuple(
        read(r, f"{where}, provenance {n}") for n, r in enumerate(provenance)))


def read_split(release_dir: str | Path, split: str) -> list:
    """The examples of one split of a release, in file order, whatever format version wrote it."""
    return [ex for _, ex in split_records(release_dir, split)]


def split_records(release_dir: str | Path, split: str) -> Iterator[tuple[dict, object]]:
    """Each record of a split as written, with its example, in file order: one read for a caller
    that needs the record too (its `perturbed` flag, its fields to copy)."""
    path = Path(release_dir) / split_file(split)
    if not path.is_file():
        raise ConfigError(f"{release_dir}: no split {split!r} (expected {path})")
    version = release_format(release_dir)
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            if line.strip():
                record = json.loads(line)
                yield record, from_record(record, version, f"{path}, line {n}")


def perturbed_flags(release_dir: str | Path, split: str) -> dict[str, bool]:
    """Each record id of a split with its `perturbed` flag, in file order: whether the split's
    attack changed the question (False for the copies it keeps of the questions it could not
    change, and for every question of a split no attack made)."""
    path = Path(release_dir) / split_file(split)
    if not path.is_file():
        raise ConfigError(f"{release_dir}: no split {split!r} (expected {path})")
    flags = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.strip():
                record = json.loads(line)
                flags[record["id"]] = bool(record.get("perturbed"))
    return flags


def squad_json(examples: list[SpanExample]) -> dict:
    """SQuAD v1.1 JSON, grouping consecutive questions by title and context."""
    data: list[dict] = []
    for ex in examples:
        if not data or data[-1]["title"] != ex.title:
            data.append({"title": ex.title, "paragraphs": []})
        paragraphs = data[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != ex.context:
            paragraphs.append({"context": ex.context, "qas": []})
        paragraphs[-1]["qas"].append({
            "id": ex.id, "question": ex.question,
            "answers": [{"text": a.text, "answer_start": a.start} for a in ex.answers]})
    return {"version": "1.1", "data": data}
