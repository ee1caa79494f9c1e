"""Score models and prediction files on a frozen release, and write a report (`advrace evaluate`).

- scoring: `score_release` and the per-split results (accuracy for RACE, EM and F1 for SQuAD);
- predictions: reading and scoring prediction files (`score_predictions`);
- command: the `evaluate` subcommand (`evaluate_command`, `add_evaluate_parser`);
- report: results.json, results.md, results.png and predictions/ (`write_report`).

A model is a local Transformers checkpoint folder, a Hub name (online only), a built-in reader,
or any object with `predict_mc(examples) -> list[list[float]]` (per-option scores). A predictions
file is a JSON object keyed by release record id (`<split>/<source_id>`), or JSON lines of
`{"id": ..., "prediction": ...}` as the report's predictions/ holds: an option index or letter
for RACE, an answer text for SQuAD.
"""

from advrace.evaluation.command import add_evaluate_parser, evaluate_command, unique_names
from advrace.evaluation.predictions import PredictionsError, read_predictions, score_predictions
from advrace.evaluation.scoring import mc_split_result, qa_split_result, score_release, select_splits
# Floor-4 names, kept importable from here for callers that took them from this package.
from advrace.models.encoders.mc_scoring import CheckpointScorer, load_checkpoint
from advrace.models.runtime.loading import ModelLoadError, model_name

__all__ = ["CheckpointScorer", "ModelLoadError", "PredictionsError", "add_evaluate_parser",
           "evaluate_command", "load_checkpoint", "mc_split_result", "model_name", "qa_split_result",
           "read_predictions", "score_predictions", "score_release", "select_splits", "unique_names"]
