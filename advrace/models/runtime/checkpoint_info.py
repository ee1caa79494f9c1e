"""What `advrace train` recorded about a saved model: training_info.json beside the weights.

Scoring a model at the length it was trained with, rather than at a fixed 512, keeps its
inputs as it saw them in training and, for a model trained at 256 tokens, halves the cost.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path

from advrace.models.runtime.loading import checkpoint_name

TRAINING_INFO = "training_info.json"
DEFAULT_MAX_LENGTH = 512


def training_info(model) -> dict:
    """The recorded training info of a checkpoint folder; {} for a Hub name, or a folder that
    `advrace train` did not write (or whose file does not parse)."""
    path = Path(str(model)).expanduser() / TRAINING_INFO
    try:
        info = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return info if isinstance(info, dict) else {}


def checkpoint_objective(model) -> str | None:
    """The training objective recorded by `advrace train`, when the folder has one."""
    return training_info(model).get("objective")


def trained_max_length(model) -> int | None:
    config = training_info(model).get("config")
    length = config.get("max_length") if isinstance(config, dict) else None
    return length if isinstance(length, int) and not isinstance(length, bool) and length > 0 else None


def scoring_max_length(model, max_length: int | None = None) -> int:
    """`max_length` when given, else the length the checkpoint was trained with, else 512."""
    if max_length is not None:
        return max_length
    return trained_max_length(model) or DEFAULT_MAX_LENGTH


def checkpoint_sha256(path: str | Path) -> str | None:
    """One digest of every file of a checkpoint folder (names and contents); None for a Hub name.

    Memoised per process on the folder's resolved path and each file's name, size and mtime:
    every split built from one checkpoint (and each attack is built twice per split, to check
    the config and to run) would otherwise read its hundreds of MB again."""
    root = Path(path)
    if not root.is_dir():
        return None
    files = sorted(q for q in root.rglob("*") if q.is_file())
    listing = []
    for p in files:
        st = p.stat()
        listing.append((p.relative_to(root).as_posix(), st.st_size, st.st_mtime_ns))
    return _folder_sha256(str(root.resolve()), tuple(listing))


@functools.cache
def _folder_sha256(root: str, listing: tuple) -> str:
    h = hashlib.sha256()
    for name, _, _ in listing:
        h.update(name.encode() + b"\0")
        with open(Path(root, name), "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                h.update(chunk)
        h.update(b"\0")
    return h.hexdigest()


def trained_from(model) -> str | None:
    """The model a checkpoint folder was fine-tuned from, as `advrace train` recorded it and as a
    manifest names a checkpoint (`smollm2`, a Hub name, `runs/final`); None when not recorded.
    A generator or judge and a scored model that share it share their pretraining: the split's
    difficulty for that model is confounded (the evaluation report says so)."""
    return base_of(training_info(model))


def base_of(info: dict) -> str | None:
    """`trained_from` of a training record already read (`training_info`)."""
    config = info.get("config")
    base = config.get("model") if isinstance(config, dict) else None
    return checkpoint_name(base) if isinstance(base, str) and base else None
