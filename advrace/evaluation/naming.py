"""What a report calls each model: a name that says which model it is, unique in the report.

A folder's basename says little: `advrace train` saves every run to `<run>/final` (and
`<run>/best`), so two runs evaluated together were "final" and "final-2". A checkpoint is named
by the run that trained it (training_info.json's `config.name`), else by its last two folder
names as a manifest names it (`dg-sample/final`); a Hub name (owner/name) and a built-in reader
name stay as given, a scorer object is named by its `name`. Labels may hold a slash; the
report's file names are made file-safe separately (report.file_stems).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

from advrace.models.encoders.readers import is_builtin_reader
from advrace.models.runtime.checkpoint_info import training_info
from advrace.models.runtime.loading import checkpoint_name, model_name

# TrainConfig's default `name` (advrace/training/config.py, a floor this package may not import;
# tests/test_report_statistics.py checks the two agree): a run that kept it was not named, and
# naming every such run "advrace-train" would tell them apart no better than "final".
DEFAULT_RUN_NAME = "advrace-train"
_UNSAFE = re.compile(r"[|`\x00-\x1f\x7f]+")  # what would break a Markdown table row or code span


def run_name(model) -> str | None:
    """The name `advrace train` recorded for the run that saved this checkpoint folder; None
    when there is no training_info.json, or the run kept the default name."""
    config = training_info(model).get("config")
    name = config.get("name") if isinstance(config, dict) else None
    if not isinstance(name, str) or not name.strip() or name.strip() == DEFAULT_RUN_NAME:
        return None
    return name.strip()


def _is_folder(model) -> bool:
    return isinstance(model, (str, os.PathLike)) and Path(str(model)).expanduser().is_dir()


def report_label(model) -> str:
    """The report's name for one `--model`: a checkpoint folder by its run's name (else its last
    two folder names), a Hub or built-in name as given, a scorer object by its `name`."""
    if not isinstance(model, (str, os.PathLike)):
        label = model_name(model)
    elif is_builtin_reader(str(model)) or not _is_folder(model):
        label = str(model)
    else:
        label = run_name(model) or checkpoint_name(str(model))
    return _UNSAFE.sub("_", label).strip() or "model"


def numbered(labels: list[str]) -> list[str]:
    """The labels, with -2, -3, ... added to repeats, in order."""
    out, seen = [], set()
    for label in labels:
        candidate, k = label, 1
        while candidate in seen:
            k += 1
            candidate = f"{label}-{k}"
        seen.add(candidate)
        out.append(candidate)
    return out


def report_labels(models, predictions=()) -> list[str]:
    """Unique labels for the models, then the predictions files (each by its file's stem).

    Two checkpoints of one run (its `best` and its `final`) share the run's name, so they are
    named `<run>/<folder>`; what still repeats gets -2, -3, ... in order."""
    models = list(models)
    labels = [report_label(m) for m in models]
    repeated = {label for label in labels if labels.count(label) > 1}
    for k, model in enumerate(models):
        if labels[k] in repeated and _is_folder(model) and not is_builtin_reader(str(model)) \
                and run_name(model) is not None:
            labels[k] = f"{labels[k]}/{Path(str(model)).expanduser().resolve().name}"
    labels += [_UNSAFE.sub("_", Path(p).stem).strip() or "predictions" for p in predictions]
    return numbered(labels)
