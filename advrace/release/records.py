"""Release records: one JSON line per example, under its split's file, and SQuAD JSON."""

from __future__ import annotations

import dataclasses
import hashlib
import json
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.examples import SpanExample, example_from_record

NO_ATTACK = "none"  # the `attack` of a record that no attack made (the original split, say)


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


def from_record(record: dict):
    if isinstance(record.get("provenance"), str):
        record = {**record, "provenance": json.loads(record["provenance"])}
    return example_from_record(record)


def read_split(release_dir: str | Path, split: str) -> list:
    """The examples of one split of a release, in file order."""
    path = Path(release_dir) / split_file(split)
    if not path.is_file():
        raise ConfigError(f"{release_dir}: no split {split!r} (expected {path})")
    with open(path, encoding="utf-8") as f:
        return [from_record(json.loads(line)) for line in f if line.strip()]


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
