"""The `advrace evaluate` subcommand: score every model and predictions file on every split of a
release, and write the report (results.json, results.md, results.png, predictions/)."""

from __future__ import annotations

import argparse
import json
import os
import textwrap
from pathlib import Path

from advrace.core.atomic import check_replaceable
from advrace.core.cli_types import comma_list
from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.evaluation.naming import report_labels
from advrace.evaluation.predictions import PredictionsError, score_predictions
from advrace.evaluation.report import file_stems, write_report
from advrace.evaluation.scoring import check_fits, make_accelerator, make_scorer, score_splits, select_splits
from advrace.formats import load as load_data
from advrace.models.llm_prompts import LETTER
from advrace.models.llm_scoring import GENERATION, LOGLIKELIHOOD, MC_METHODS
from advrace.models.loading import model_name
from advrace.models.readers import is_builtin_reader
from advrace.release import check_release, read_split


def unique_names(names: list[str]) -> list[str]:
    """File-safe names, with -2, -3, ... added to repeats (as the report names predictions/ files;
    the report's labels come from `report_labels`)."""
    return file_stems(list(names))


RELEASE_RECORD_KEYS = frozenset({"id", "split", "attack", "perturbed", "provenance"})  # what a release row has


def _release_part(path: Path) -> str | None:
    """What part of an advrace release `path` is (a release folder or its data/ folder, or a
    split file, where it sits or copied elsewhere, told by its first record), or None."""
    if path.is_dir():
        return "an advrace release folder" if any((d / "manifest.json").is_file() for d in (path, path.parent)) else None
    if not path.is_file():
        return None
    if any((d / "manifest.json").is_file() for d in (path.parent, path.parent.parent)):
        return "a split file of an advrace release"
    try:
        with open(path, encoding="utf-8") as f:
            first = next((line for line in f if line.strip()), "")
        record = json.loads(first)
    except (OSError, UnicodeDecodeError, ValueError):
        return None
    return "a split file of an advrace release" if isinstance(record, dict) and RELEASE_RECORD_KEYS <= set(record) else None


def few_shot_pool(path, k: int, split_examples: dict, task: str) -> list:
    """The examples of the user's few-shot file, less any question or passage of the release, so
    that no question is shown its own answer; ConfigError when fewer than `k` remain."""
    if not k:
        return []
    wanted = "RACE train or dev" if task == MULTIPLE_CHOICE else "SQuAD train"
    if path is None:
        raise ConfigError(f"--few-shot {k} needs --few-shot-file FILE: solved questions to show, never "
                          f"drawn from the release itself ({wanted} data, in any input format advrace reads)")
    part = _release_part(Path(path))
    if part is not None:
        # Refused rather than read: its questions are attacked ones, and those of the release
        # scored would be the questions themselves.
        raise ConfigError(f"--few-shot-file {path}: this is {part}; the solved questions shown before each "
                          f"one come from source data, never from a release: give {wanted} data in any "
                          "input format advrace reads (a RACE folder such as RACE/train, RACE JSON lines, "
                          "SQuAD JSON, a hub dataset)")
    examples = load_data(str(path)).examples
    kind = "MCExample" if task == MULTIPLE_CHOICE else "SpanExample"
    if examples and type(examples[0]).__name__ != kind:
        raise ConfigError(f"--few-shot-file {path}: holds {type(examples[0]).__name__}s; this release needs {kind}s")
    released = [ex for exs in split_examples.values() for ex in exs]
    seen_ids, seen_texts = {ex.source_id for ex in released}, {ex.passage_text for ex in released}
    pool = [ex for ex in examples if ex.source_id not in seen_ids and ex.passage_text not in seen_texts]
    if len(pool) < k:
        raise ConfigError(f"--few-shot-file {path}: {len(pool)} of its {len(examples)} questions are not in the "
                          f"release, fewer than --few-shot {k}")
    return pool


def evaluate_command(release, models=(), predictions=(), out=None, *, splits=None, batch_size: int = 16,
                     max_length: int | None = None, bf16: bool | None = None, allow_missing: bool = False,
                     progress: bool = True, accelerator=None, method: str = LOGLIKELIHOOD, few_shot: int = 0,
                     few_shot_file=None, few_shot_seed: int = 1234, chat_template: bool | None = None) -> dict:
    """Score every model and predictions file on every split; write the report to `out`.

    `max_length`: None scores each checkpoint at the length `advrace train` recorded for it
    (512 when none is recorded); the length used goes into the report's sources.

    Causal LMs: `method` (loglikelihood or letter) for multiple choice, greedy generation for
    SQuAD; `few_shot` solved questions from `few_shot_file` before each one, drawn by
    `few_shot_seed`; `chat_template` for letter choice: None applies the tokenizer's when it has one.

    Every model is checked against the release's task before any is scored: a checkpoint whose
    head does not fit (a span model on RACE) is refused with ConfigError (exit 2).

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
    if task != MULTIPLE_CHOICE and method == LETTER:
        raise ConfigError(f"--method letter: letter choice scores multiple-choice (RACE) releases; {release} is "
                          f"{task} (SQuAD), which a causal LM answers by greedy generation: leave out --method")
    kinds = [check_fits(m, task, release) for m in models]
    for p in predictions:
        if not Path(p).is_file():
            raise PredictionsError(f"{p}: no such predictions file")
    labels = report_labels(models, predictions)
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if accelerator is None and (launched or not all(hasattr(m, "predict_mc") or hasattr(m, "predict_qa")
                                                    or is_builtin_reader(m) for m in models)):
        accelerator = make_accelerator()
    main = accelerator is None or accelerator.is_main_process
    # Scoring a predictions file needs every split (an id may name any); models only those scored.
    read = {split: read_split(release, split) for split in (manifest["splits"] if predictions else names)}
    split_examples = {split: read[split] for split in names}
    llm = {}
    if "causal_lm" in kinds:
        pool = few_shot_pool(few_shot_file, few_shot, read, task)
        llm = {"method": method, "shots": few_shot, "shot_pool": pool, "shot_seed": few_shot_seed,
               "chat_template": chat_template}
    scores, sources = {}, {}
    for label, model, kind in zip(labels, models, kinds):
        scorer = make_scorer(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                             accelerator=accelerator, task=task, llm=llm if kind == "causal_lm" else None,
                             kind=kind)
        if progress and main:
            print(f"scoring {label} on {plural(len(names), 'split')}", flush=True)
        scores[label] = score_splits(split_examples, scorer, accelerator, progress and main, task=task)
        is_object = hasattr(model, "predict_mc") or hasattr(model, "predict_qa")
        sources[label] = {"kind": "scorer" if is_object else "built-in" if is_builtin_reader(model) else "model",
                          "path": str(model) if isinstance(model, (str, os.PathLike)) else model_name(model)}
        inference = getattr(scorer, "inference", None)
        if isinstance(inference, dict):  # the readers that run a network say how it computed
            sources[label].update(bf16=inference.get("precision") == "bf16", inference=inference)
        if kind == "causal_lm":
            sources[label]["method"] = scorer.method if task == MULTIPLE_CHOICE else GENERATION
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
      advrace evaluate releases/race-test --model smollm2 --method letter --out reports/smollm2-letter

    --model: a built-in reader that needs no training (sliding-window, sliding-window:distance,
    similarity, similarity:ENCODER_FOLDER), or a folder written by save_pretrained (AutoModelForMultipleChoice and its tokenizer
    for RACE releases, AutoModelForQuestionAnswering for SQuAD ones: `advrace train` with
    objective span_extraction), or a Hugging Face Hub name when online. SQuAD models read long
    contexts in windows of --max-length tokens that overlap by a quarter of them. A causal
    language model (a folder, smollm2, a Hub name; told by its config's architecture) scores
    either: --method (see below) for RACE, greedy generation up to a line break for SQuAD, with
    lm-evaluation-harness's prompts. A model whose head does not fit the release (a span model on
    RACE, an encoder without a head) is refused with exit status 2 before anything is scored, and
    so is a near miss of a built-in name ("smolm2: ... did you mean smollm2?"). Offline, a Hub
    name is read from the Hugging Face cache alone (set HF_HUB_OFFLINE=1 to skip the check of
    the Hub's address), and fails at once when it is not there.

    --predictions: a JSON object keyed by release record id (<split>/<source_id>), or JSON lines
    {"id": "<split>/<source_id>", "prediction": ...}, such as the predictions/<model>.jsonl of an
    earlier report; a prediction is an option index 0-3 or letter A-D for RACE, an answer text
    for SQuAD.

    The report folder gets results.json (per model and split: score, n and drop, all in percent;
    averages over the adversarial splits and over models; per model, the precision, device type
    and torch version it was scored with), results.md (the same as tables), results.png (a bar
    chart with 95% error bars and, for multiple choice, a dashed chance line) and
    predictions/<model>.jsonl (the name made file-safe: owner/name -> owner_name). Drop: the
    relative drop from `original`, 100 * (original - split) / original, positive when the split
    is harder. Probe splits (diagnosis, option_only) are reported but not averaged.

    results.json per model and split also holds <metric>_ci, the 95% confidence interval
    [low, high] in percent (Wilson score interval for accuracy, accuracy_norm and exact_match;
    percentile bootstrap, 1000 resamples, seed 0, for f1), and for every split but `original`
    paired_n (the questions it shares with `original`, by source_id) and <metric>_p (two-sided
    p-value against `original` on them: exact McNemar test; paired bootstrap for f1; 4
    significant digits). Top level: statistics (the methods in words), chance (percent, null
    for SQuAD), metrics (accuracy_norm added when a log-likelihood model gives it). Per model:
    predictions (its predictions file) and source (how it was scored; method when known).
    A model is named by its `advrace train` run name, else its last two folder names
    (dg-sample/final); Hub and built-in names as given; repeats get -2, -3.
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
    llm = p.add_argument_group("causal language models (a causal-LM folder, smollm2, or a Hub name)")
    llm.add_argument("--method", choices=MC_METHODS, default=LOGLIKELIHOOD,
                     help="multiple choice: loglikelihood scores each option as a continuation of "
                          "lm-evaluation-harness's RACE prompt and reports acc and acc_norm; letter shows "
                          "the options as A-D and scores the answer letter (default: loglikelihood). "
                          "SQuAD releases are answered by greedy generation (letter is refused there)")
    llm.add_argument("--few-shot", type=int, default=0, metavar="K",
                     help="show K solved questions before each one (default: 0)")
    llm.add_argument("--few-shot-file", metavar="FILE",
                     help="where the solved questions come from: a data file in any input format "
                          "(e.g. RACE train), never a release or its split files (refused); questions and "
                          "passages of the release are left out")
    llm.add_argument("--few-shot-seed", type=int, default=1234,
                     help="seed of the draw; each question's shots depend on it and its id only (default: 1234)")
    chat = llm.add_mutually_exclusive_group()
    chat.add_argument("--chat-template", dest="chat_template", action="store_const", const=True, default=None,
                      help="letter choice inside the tokenizer's chat template (default: when it has one)")
    chat.add_argument("--no-chat-template", dest="chat_template", action="store_const", const=False,
                      help="letter choice as plain text, even for an instruct model")
    p.add_argument("--allow-missing", action="store_true",
                   help="count questions missing from a predictions file as wrong instead of failing")
    p.add_argument("--quiet", action="store_true", help="no progress output")

    def handler(args) -> int:
        summary = evaluate_command(args.release, args.model, args.predictions, args.out,
                                   splits=args.splits, batch_size=args.batch_size,
                                   max_length=args.max_length, bf16=args.bf16,
                                   allow_missing=args.allow_missing, progress=not args.quiet,
                                   method=args.method, few_shot=args.few_shot, few_shot_file=args.few_shot_file,
                                   few_shot_seed=args.few_shot_seed, chat_template=args.chat_template)
        if summary:
            print((Path(args.out) / "results.md").read_text(encoding="utf-8").rstrip())
            print(f"\nwrote {args.out}: results.json, results.md, results.png, "
                  f"predictions/ ({len(summary['models'])} model(s))")
        return 0

    p.set_defaults(handler=handler)
    return handler
