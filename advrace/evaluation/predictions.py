"""Prediction files: a JSON object keyed by release record id (`<split>/<source_id>`), with an
option index (or letter) for RACE and an answer text for SQuAD, scored like a model."""

from __future__ import annotations

import json
from pathlib import Path

from advrace.core.errors import AdvraceError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.evaluation.scoring import mc_split_result, qa_split_result, select_splits
from advrace.release import check_release, read_split

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class PredictionsError(AdvraceError):
    """A predictions file that is unreadable or does not cover the release."""

    exit_code = 2


def read_predictions(path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise PredictionsError(f"{path}: no such predictions file")
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise PredictionsError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise PredictionsError(f"{path}: expected a JSON object mapping record ids "
                               f"(<split>/<source_id>) to predictions, got {type(data).__name__}")
    return data


def _mc_prediction(path, rid, value, n_options) -> int:
    if isinstance(value, str) and len(value.strip()) == 1 and value.strip().upper() in LETTERS:
        value = LETTERS.index(value.strip().upper())
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value < n_options:
        raise PredictionsError(f"{path}: prediction for {rid} must be an option index 0..{n_options - 1} "
                               f"(or a letter), got {value!r}")
    return value


def _few(ids: list[str], k: int = 5) -> str:
    return ", ".join(ids[:k]) + (", ..." if len(ids) > k else "")


def score_predictions(release_dir, predictions_file, *, splits=None, allow_missing: bool = False,
                      manifest: dict | None = None) -> dict:
    """Score a predictions file on each split: accuracy for RACE, EM and F1 for SQuAD.

    The file maps release record ids to an option index (RACE; a letter also works) or an answer
    text (SQuAD). Questions without a prediction are an error unless `allow_missing`, which
    counts them wrong. `manifest`: the release's, already checked (read and checked when None).
    Returns the same layout as `score_release` (SQuAD: exact_match and f1).
    """
    manifest = manifest or check_release(release_dir)
    names = select_splits(manifest, splits)
    data = read_predictions(predictions_file)
    path = str(predictions_file)
    split_examples = {split: read_split(release_dir, split) for split in manifest["splits"]}
    known = {ex.id for exs in split_examples.values() for ex in exs}
    unknown = [rid for rid in data if rid not in known]
    if unknown:
        example_id = next((ex.id for exs in split_examples.values() for ex in exs), "original/<source_id>")
        raise PredictionsError(f"{path}: {len(unknown)} of {len(data)} ids are not records of the release "
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
            preds = [_mc_prediction(path, ex.id, data[ex.id], len(ex.options)) if ex.id in data else None
                     for ex in examples]
            results[split] = mc_split_result(examples, preds)
        else:
            preds = []
            for ex in examples:
                value = data.get(ex.id)
                if value is not None and not isinstance(value, str):
                    raise PredictionsError(f"{path}: prediction for {ex.id} must be an answer text, got {value!r}")
                preds.append(value)
            results[split] = qa_split_result(examples, preds)
    return results
