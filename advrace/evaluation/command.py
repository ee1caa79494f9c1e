"""The `advrace evaluate` subcommand: score every model and predictions file on every split of a
release, and write the report (results.json, results.md, results.png, predictions/)."""

from __future__ import annotations

import argparse
import os
import re
import textwrap
from pathlib import Path

from advrace.core.atomic import check_replaceable
from advrace.core.cli_types import comma_list
from advrace.core.errors import ConfigError
from advrace.core.text import plural
from advrace.evaluation.predictions import PredictionsError, score_predictions
from advrace.evaluation.report import write_report
from advrace.evaluation.scoring import make_accelerator, make_scorer, score_splits, select_splits
from advrace.models.loading import model_name
from advrace.models.readers import is_baseline
from advrace.release import check_release, read_split


def unique_names(names: list[str]) -> list[str]:
    """File-safe names, with -2, -3, ... added to repeats."""
    out, seen = [], set()
    for name in names:
        base = re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "model"
        candidate, k = base, 1
        while candidate in seen:
            k += 1
            candidate = f"{base}-{k}"
        seen.add(candidate)
        out.append(candidate)
    return out


def evaluate_command(release, models=(), predictions=(), out=None, *, splits=None, batch_size: int = 16,
                     max_length: int | None = None, bf16: bool | None = None, allow_missing: bool = False,
                     progress: bool = True, accelerator=None) -> dict:
    """Score every model and predictions file on every split; write the report to `out`.

    `max_length`: None scores each checkpoint at the length `advrace train` recorded for it
    (512 when none is recorded); the length used goes into the report's sources.

    Returns the report summary (what results.json holds). With several processes every process
    scores its shard and only the main process writes.
    """
    models, predictions = list(models or ()), list(predictions or ())
    if not models and not predictions:
        raise ConfigError("nothing to evaluate: give at least one --model or --predictions file")
    if out is None:
        raise ConfigError("give --out REPORT_DIR")
    check_replaceable(Path(out), "results.json", "report")
    manifest = check_release(release)
    names = select_splits(manifest, splits)
    task = manifest["task"]
    for p in predictions:
        if not Path(p).is_file():
            raise PredictionsError(f"{p}: no such predictions file")
    labels = unique_names([model_name(m) for m in models] + [Path(p).stem for p in predictions])
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if accelerator is None and (launched or not all(hasattr(m, "predict_mc") or hasattr(m, "predict_qa")
                                                    or is_baseline(m) for m in models)):
        accelerator = make_accelerator()
    main = accelerator is None or accelerator.is_main_process
    # Scoring a predictions file needs every split (an id may name any); models only those scored.
    read = {split: read_split(release, split) for split in (manifest["splits"] if predictions else names)}
    split_examples = {split: read[split] for split in names}
    scores, sources = {}, {}
    for label, model in zip(labels, models):
        scorer = make_scorer(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                             accelerator=accelerator, task=task)
        if progress and main:
            print(f"scoring {label} on {plural(len(names), 'split')}", flush=True)
        scores[label] = score_splits(split_examples, scorer, accelerator, progress and main, task=task)
        is_object = hasattr(model, "predict_mc") or hasattr(model, "predict_qa")
        sources[label] = {"kind": "scorer" if is_object else "built-in" if is_baseline(model) else "model",
                          "path": str(model) if isinstance(model, (str, os.PathLike)) else model_name(model)}
        inference = getattr(scorer, "inference", None)
        if isinstance(inference, dict):  # the readers that run a network say how it computed
            sources[label].update(bf16=inference.get("precision") == "bf16", inference=inference)
        if sources[label]["kind"] == "model":  # loaded by make_scorer: freed before the next one loads
            sources[label]["max_length"] = scorer.max_length
            del scorer
            if accelerator is not None:
                accelerator.free_memory()
    for label, pred in zip(labels[len(models):], predictions):
        scores[label] = score_predictions(release, pred, splits=names, allow_missing=allow_missing,
                                          manifest=manifest, split_examples=read)
        sources[label] = {"kind": "predictions", "path": str(pred)}
    if not main:
        return {}
    return write_report(out, manifest, scores, sources=sources)


EVALUATE_EPILOG = textwrap.dedent("""\
    examples:
      advrace evaluate releases/race-test --model runs/bert-base --model runs/roberta --out reports/race
      advrace evaluate releases/race-test --predictions preds/gpt.json --splits original,charswap --out reports/gpt
      accelerate launch -m advrace evaluate releases/race-test --model runs/bert-large --out reports/large

    --model: a built-in reader that needs no training (sliding-window, sliding-window:distance,
    similarity, similarity:ENCODER_FOLDER), or a folder written by save_pretrained (AutoModelForMultipleChoice and its tokenizer
    for RACE releases, AutoModelForQuestionAnswering for SQuAD ones: `advrace train` with
    objective span_extraction), or a Hugging Face Hub name when online. SQuAD models read long
    contexts in windows of --max-length tokens that overlap by a quarter of them.

    --predictions: a JSON object keyed by release record id (<split>/<source_id>), or JSON lines
    {"id": "<split>/<source_id>", "prediction": ...}, such as the predictions/<model>.jsonl of an
    earlier report; a prediction is an option index 0-3 or letter A-D for RACE, an answer text
    for SQuAD.

    The report folder gets results.json (per model and split: score, n and drop, all in percent;
    averages over the adversarial splits and over models; per model, the precision, device type
    and torch version it was scored with), results.md (the same as a table), results.png (a bar
    chart) and predictions/<model>.jsonl. Drop: the relative drop from `original`,
    100 * (original - split) / original, positive when the split is harder.
    Probe splits (diagnosis, option_only) are reported but not averaged.
    Exit status: 0 on success, 1 if the release fails verification, 2 on bad input,
    3 if a model cannot be loaded.
    """)


def add_evaluate_parser(subparsers):
    """Add the `evaluate` subcommand; returns its handler (`args -> exit status`)."""
    p = subparsers.add_parser(
        "evaluate", help="score models or prediction files on a release and write a report",
        description="Score models or prediction files on every split of a release (accuracy for "
                    "RACE, EM and F1 for SQuAD), and write a report with relative drops from the "
                    "original split.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EVALUATE_EPILOG)
    p.add_argument("release", help="release folder (checked against its manifest first)")
    p.add_argument("--model", action="append", default=[], metavar="CKPT",
                   help="checkpoint folder or Hub name; repeat for several models")
    p.add_argument("--predictions", action="append", default=[], metavar="FILE",
                   help="predictions file: a JSON object keyed by record id, or JSON lines of "
                        "{\"id\", \"prediction\"} as in a report's predictions/; repeat for several files")
    p.add_argument("--out", required=True, metavar="REPORT_DIR", help="report folder to write")
    p.add_argument("--splits", type=comma_list, help="comma-separated splits to score (default: all)")
    p.add_argument("--batch-size", type=int, default=16, help="questions per batch (default: 16)")
    p.add_argument("--max-length", type=int, default=None,
                   help="tokens per option sequence (per window for SQuAD models); longer passages "
                        "are truncated (default: the length the checkpoint was trained with, when "
                        "`advrace train` recorded it, else 512)")
    p.add_argument("--no-bf16", dest="bf16", action="store_const", const=False, default=None,
                   help="score in fp32 (default: bf16 autocast where the GPU or CPU has native bf16)")
    p.add_argument("--allow-missing", action="store_true",
                   help="count questions missing from a predictions file as wrong instead of failing")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    def handler(args) -> int:
        summary = evaluate_command(args.release, args.model, args.predictions, args.out,
                                   splits=args.splits, batch_size=args.batch_size,
                                   max_length=args.max_length, bf16=args.bf16,
                                   allow_missing=args.allow_missing, progress=not args.quiet)
        if summary:
            print((Path(args.out) / "results.md").read_text(encoding="utf-8").rstrip())
            print(f"\nwrote {args.out}: results.json, results.md, results.png, "
                  f"predictions/ ({len(summary['models'])} model(s))")
        return 0

    p.set_defaults(handler=handler)
    return handler
