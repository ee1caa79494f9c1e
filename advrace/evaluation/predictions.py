"""Prediction files: a JSON object keyed by release record id (`<split>/<source_id>`), or JSON
lines of `{"id": ..., "prediction": ...}` (what `advrace evaluate` writes to predictions/, so a
report's predictions can be scored again); an option index (or letter) for RACE and an answer
text for SQuAD, scored like a model."""

from __future__ import annotations

import json
from pathlib import Path

from advrace.core.errors import AdvraceError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import LETTERS
from advrace.evaluation.scoring import mark_perturbed, mc_split_result, qa_split_result, select_splits
from advrace.release import check_release, read_split

FORMATS_HELP = ('a JSON object {"<split>/<source_id>": prediction, ...}, or JSON lines '
                '{"id": "<split>/<source_id>", "prediction": ...} as advrace evaluate writes to predictions/')


class PredictionsError(AdvraceError):
    """A predictions file that is unreadable or does not cover the release."""

    exit_code = 2


class Predictions(dict):
    """Record id -> prediction, without the ids given a null prediction; `given`: every id in
    the file; `lines`: the line of each id in a JSON-lines file, for errors."""

    def __init__(self, data: dict, given: list[str], lines: dict[str, int] | None = None):
        super().__init__(data)
        self.given = given
        self.lines = lines or {}

    def at(self, rid: str) -> str:
        return f" (line {self.lines[rid]})" if rid in self.lines else ""


def _is_line_record(value) -> bool:
    """A line the tool writes: its `id` is a record id, never a key of the keyed format."""
    return isinstance(value, dict) and "prediction" in value and isinstance(value.get("id"), str)


def _read_lines(path: Path, text: str) -> Predictions:
    data, lines = {}, {}
    for n, line in enumerate(text.splitlines(), start=1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError as exc:
            raise PredictionsError(f"{path}, line {n}: not valid JSON ({exc.msg}, column {exc.colno}); "
                                   f"expected {FORMATS_HELP}") from None
        if not isinstance(row, dict):
            raise PredictionsError(f"{path}, line {n}: expected a JSON object with \"id\" and \"prediction\", "
                                   f"got {type(row).__name__}")
        for key in ("id", "prediction"):
            if key not in row:
                raise PredictionsError(f"{path}, line {n}: no \"{key}\" field; each line needs \"id\" "
                                       "(a release record id <split>/<source_id>) and \"prediction\"")
        rid = row["id"]
        if not isinstance(rid, str):
            raise PredictionsError(f"{path}, line {n}: \"id\" must be a release record id "
                                   f"<split>/<source_id>, got {rid!r}")
        if rid in lines:
            raise PredictionsError(f"{path}, line {n}: id {rid} was already given on line {lines[rid]}")
        lines[rid] = n
        if row["prediction"] is not None:  # the tool writes null for a question left unanswered
            data[rid] = row["prediction"]
    return Predictions(data, list(lines), lines)


def read_predictions(path) -> Predictions:
    """Record id -> prediction from either format; a record with a null prediction has none."""
    path = Path(path)
    if not path.is_file():
        raise PredictionsError(f"{path}: no such predictions file")
    try:
        text = path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise PredictionsError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if exc.msg == "Extra data" or path.suffix == ".jsonl":
            return _read_lines(path, text)
        raise PredictionsError(f"{path}: not valid JSON ({exc}); expected {FORMATS_HELP}") from None
    if _is_line_record(data):
        return _read_lines(path, text)
    if not isinstance(data, dict):
        raise PredictionsError(f"{path}: expected {FORMATS_HELP}; got a JSON {type(data).__name__}")
    return Predictions({rid: v for rid, v in data.items() if v is not None}, list(data))


def _mc_prediction(path, at: str, rid, value, n_options) -> int:
    """An option index from an index or a letter; an error quotes the value as given."""
    index = value
    if isinstance(value, str) and len(value.strip()) == 1 and value.strip().upper() in LETTERS:
        index = LETTERS.index(value.strip().upper())
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n_options:
        raise PredictionsError(f"{path}: prediction {value!r} for {rid}{at} is not an option of this "
                               f"{n_options}-option question: give a letter A-{LETTERS[n_options - 1]} "
                               f"or an option index 0-{n_options - 1}")
    return index


def _few(ids: list[str], k: int = 5) -> str:
    return ", ".join(ids[:k]) + (", ..." if len(ids) > k else "")


def score_predictions(release_dir, predictions_file, *, splits=None, allow_missing: bool = False,
                      manifest: dict | None = None, split_examples: dict | None = None,
                      perturbed: dict | None = None) -> dict:
    """Score a predictions file on each split: accuracy for RACE, EM and F1 for SQuAD.

    The file (either format of `read_predictions`) gives each release record id an option index
    (RACE; a letter also works) or an answer text (SQuAD). Questions without a prediction are an
    error unless `allow_missing`, which counts them wrong. `manifest`: the release's, already
    checked (read and checked when None). `split_examples`: `{split: examples}` already read from
    the release, so a caller scoring several files reads each split once; a split it lacks is
    read here (every split is needed: an id may name any split of the release). `perturbed`:
    `{split: {record id: flag}}` already read (advrace.release.perturbed_flags), else read here.
    Returns the same layout as `score_release` (SQuAD: exact_match and f1), each record with its
    `perturbed` flag.
    """
    manifest = manifest or check_release(release_dir)
    names = select_splits(manifest, splits)
    data = read_predictions(predictions_file)
    path = str(predictions_file)
    given = split_examples or {}
    split_examples = {s: given[s] if s in given else read_split(release_dir, s) for s in manifest["splits"]}
    known = {ex.id for exs in split_examples.values() for ex in exs}
    unknown = [rid for rid in data.given if rid not in known]
    if unknown:
        example_id = next((ex.id for exs in split_examples.values() for ex in exs), "original/<source_id>")
        raise PredictionsError(f"{path}: {len(unknown)} of {len(data.given)} ids are not records of the release "
                               f"({_few(unknown)}); ids are release record ids <split>/<source_id>, "
                               f"e.g. {example_id}")
    missing = [ex.id for split in names for ex in split_examples[split] if ex.id not in data]
    if missing and not allow_missing:
        total = sum(len(split_examples[s]) for s in names)
        raise PredictionsError(f"{path}: {len(missing)} of {total} questions have no prediction "
                               f"({_few(missing)}); pass --allow-missing to count them wrong")
    results = {}
    for split in names:
        examples = split_examples[split]
        if manifest["task"] == MULTIPLE_CHOICE:
            preds = [_mc_prediction(path, data.at(ex.id), ex.id, data[ex.id], len(ex.options))
                     if ex.id in data else None for ex in examples]
            results[split] = mc_split_result(examples, preds)
        else:
            preds = []
            for ex in examples:
                value = data.get(ex.id)
                if value is not None and not isinstance(value, str):
                    raise PredictionsError(f"{path}: prediction for {ex.id}{data.at(ex.id)} must be an "
                                           f"answer text, got {value!r}")
                preds.append(value)
            results[split] = qa_split_result(examples, preds)
    return mark_perturbed(results, release_dir, perturbed)
