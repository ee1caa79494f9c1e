"""What `advrace train` recorded about a saved model: training_info.json beside the weights.

Scoring a model at the length it was trained with, rather than at a fixed 512, keeps its
inputs as it saw them in training and, for a model trained at 256 tokens, halves the cost.
"""

from __future__ import annotations

import json
from pathlib import Path

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
