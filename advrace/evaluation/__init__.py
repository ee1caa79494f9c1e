"""Score models and prediction files on a frozen release, and write a report (`advrace evaluate`).

A model is a local Transformers checkpoint folder, a Hub name (online only), or any object with
`predict_mc(examples) -> list[list[float]]` (per-option scores). Checkpoints are scored fast:
batches of similar length padded only to their own longest input, `torch.inference_mode()`, bf16
autocast where the hardware computes in bf16, and one shard of the examples per Accelerate
process. A predictions file is a JSON object keyed by release record id (`<split>/<source_id>`):
an option index for RACE, an answer text for SQuAD.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import textwrap
from pathlib import Path

from advrace.core.errors import AdvraceError, ConfigError
from advrace.models.mc_encoding import collate_mc, encode_mc, length_sorted_batches
from advrace.metrics import load_metric, squad_em_f1
from advrace.models.loading import precision_info, use_bf16
from advrace.release import check_release, read_split
from advrace.models.sharding import map_sharded

MC = "multiple_choice"
LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"


class ModelLoadError(AdvraceError):
    """A model that could not be loaded: a bad folder, or a Hub name while offline."""

    exit_code = 3


class PredictionsError(AdvraceError):
    """A predictions file that is unreadable or does not cover the release."""

    exit_code = 2


# --------------------------------------------------------------------------- checkpoints


def _attention_backends(device):
    """On CUDA, attention without cuDNN's kernel: it builds a plan for every new sequence length
    (about 0.1 s each on an H100), which batches padded to their own length would pay again and
    again. Flash and memory-efficient attention have no such cost."""
    import contextlib

    if device.type != "cuda":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


class CheckpointScorer:
    """A Transformers multiple-choice model and its tokenizer, with `predict_mc` for scoring."""

    def __init__(self, model, tokenizer, *, name: str = "model", batch_size: int = 16,
                 max_length: int = 512, bf16: bool | None = None, accelerator=None):
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        if max_length < 8:
            raise ConfigError(f"max length must be at least 8 tokens, got {max_length}")
        self.name = name
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        limit = getattr(tokenizer, "model_max_length", None)
        # Tokenizers without a known limit report a huge sentinel value.
        self.max_length = min(max_length, limit) if isinstance(limit, int) and limit < 1_000_000 else max_length
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        model.eval()
        self.model = accelerator.prepare(model) if accelerator is not None else model
        self.device = accelerator.device if accelerator is not None else next(model.parameters()).device
        self.bf16 = use_bf16(bf16, self.device)

    @property
    def inference(self) -> dict:
        return precision_info(self.device, self.bf16)

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Per-option scores (logits) of each example, in input order."""
        import torch
        from tqdm.auto import tqdm

        if not examples:
            return []
        features = encode_mc(self.tokenizer, examples, self.max_length)
        scores: list[list[float] | None] = [None] * len(features)
        batches = length_sorted_batches(features, self.batch_size)
        outputs = []
        with torch.inference_mode(), _attention_backends(self.device), \
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                batch = collate_mc([features[i] for i in idx], self.pad_id)
                batch.pop("labels")
                batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
                # Kept on the device until the end, so the next batch is prepared while this one runs.
                outputs.append(self.model(**batch).logits.float())
        for idx, logits in zip(batches, outputs):
            for i, row in zip(idx, logits.cpu().tolist()):
                scores[i] = row[:len(features[i].input_ids)]
        return scores


def _looks_like_path(name: str) -> bool:
    """Hub ids are `name` or `owner/name`; anything else can only be meant as a folder."""
    return (name.startswith((".", "/", "~")) or name.count("/") > 1 or os.sep in name.replace("/", "")
            or not re.fullmatch(r"[\w.-]+(/[\w.-]+)?", name))


def _fp32_kwargs() -> dict:
    """Load weights in fp32 whatever they were saved in; autocast picks the compute precision."""
    import torch
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": torch.float32}


def load_checkpoint(model: str | os.PathLike, **kwargs) -> CheckpointScorer:
    """A CheckpointScorer for a local folder or a Hub name; ModelLoadError when it cannot load.

    Weights the checkpoint lacks (a fresh classifier head) are initialised from a fixed seed, so
    scoring the same checkpoint twice gives the same numbers.
    """
    import torch
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    name = str(model)
    path = Path(name).expanduser()
    local = path.is_dir()
    if not local and (path.exists() or _looks_like_path(name)):
        raise ModelLoadError(f"{name}: no such model folder (give a folder written by save_pretrained, "
                             "or a Hugging Face Hub name such as bert-base-uncased)")
    source = str(path) if local else name
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            net = AutoModelForMultipleChoice.from_pretrained(source, **_fp32_kwargs())
    except (OSError, ValueError, KeyError, ImportError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        if local:
            raise ModelLoadError(
                f"{name}: cannot load a multiple-choice model and its tokenizer from this folder "
                f"({reason}); it should hold what save_pretrained writes: config.json, the weights "
                "and the tokenizer files") from exc
        raise ModelLoadError(
            f"{name}: not a local folder, and it could not be loaded from the Hugging Face Hub "
            f"({reason}). Offline, download it elsewhere and pass its local folder instead") from exc
    kwargs.setdefault("name", model_name(name))
    return CheckpointScorer(net, tokenizer, **kwargs)


def model_name(model) -> str:
    """A short name for reports: a folder's basename, a Hub name's last part, or a scorer's `name`."""
    if isinstance(model, (str, os.PathLike)):
        return Path(str(model).rstrip("/\\")).name or str(model)
    return str(getattr(model, "name", None) or type(model).__name__)


# --------------------------------------------------------------------------- scoring


def select_splits(manifest: dict, splits=None) -> list[str]:
    """The requested splits in release order (all when none are named)."""
    available = list(manifest["splits"])
    if not splits:
        return available
    unknown = [s for s in splits if s not in manifest["splits"]]
    if unknown:
        raise ConfigError(f"no split(s) {', '.join(unknown)} in the release; available: {', '.join(available)}")
    return [s for s in available if s in set(splits)]


def _predict_sharded(scorer, examples, accelerator, *, desc, progress) -> list[list[float]]:
    """Each process scores its shard; every process gets all scores back, in input order."""
    def predict(shard):
        if isinstance(scorer, CheckpointScorer):
            return scorer.predict_mc(shard, desc=desc, progress=progress)
        return scorer.predict_mc(shard)

    scores = map_sharded(predict, examples, accelerator)
    if len(scores) != len(examples):
        raise AdvraceError(f"{model_name(scorer)}: predict_mc returned {len(scores)} score lists "
                           f"for {len(examples)} examples")
    return scores


def _argmax(values) -> int:
    return max(range(len(values)), key=lambda i: (values[i], -i))


def mc_split_result(examples, predictions: list[int | None], scores=None) -> dict:
    """Accuracy (percent, from the mc_accuracy module), n, and one record per example."""
    records = []
    for k, (ex, pred) in enumerate(zip(examples, predictions)):
        rec = {"id": ex.id, "source_id": ex.source_id, "prediction": pred, "label": ex.label,
               "correct": pred == ex.label}
        if scores is not None:
            rec["scores"] = [float(s) for s in scores[k]]
        records.append(rec)
    refs = [ex.label for ex in examples]
    preds = [-1 if p is None else p for p in predictions]
    accuracy = load_metric("mc_accuracy").compute(predictions=preds, references=refs)["accuracy"] if refs else 0.0
    return {"n": len(examples), "accuracy": accuracy, "records": records}


def qa_split_result(examples, predictions: list[str | None]) -> dict:
    """EM and F1 (percent, from the squad_v11 module), n, and one record per example.

    Unanswered questions count as wrong: they are left out of the module's mean and the means
    are scaled back to all questions.
    """
    records, preds, refs = [], [], []
    for ex, pred in zip(examples, predictions):
        golds = [a.text for a in ex.answers]
        em, f1 = squad_em_f1(pred, golds) if pred is not None else (0.0, 0.0)
        records.append({"id": ex.id, "source_id": ex.source_id, "prediction": pred,
                        "answers": golds, "exact_match": em, "f1": f1})
        if pred is not None:
            preds.append(pred)
            refs.append(golds)
    em = f1 = 0.0
    if refs:
        scores = load_metric("squad_v11").compute(predictions=preds, references=refs)
        em, f1 = (scores["exact_match"] * len(refs) / len(examples), scores["f1"] * len(refs) / len(examples))
    return {"n": len(examples), "exact_match": em, "f1": f1, "records": records}


def _score_model(split_examples: dict, scorer, accelerator, progress) -> dict:
    results = {}
    for split, examples in split_examples.items():
        scores = _predict_sharded(scorer, examples, accelerator, desc=split, progress=progress)
        for ex, s in zip(examples, scores):
            if len(s) != len(ex.options):
                raise AdvraceError(f"{model_name(scorer)}: {len(s)} scores for {ex.id}, which has "
                                   f"{len(ex.options)} options")
        results[split] = mc_split_result(examples, [_argmax(s) for s in scores], scores)
    return results


def _require_mc(release_dir, manifest) -> None:
    if manifest["task"] != MC:
        raise ConfigError(f"{release_dir}: this function scores multiple-choice releases; this one "
                          f"is {manifest['task']}: use evaluate_command (or `advrace evaluate`), which "
                          "scores span models with EM and F1")


def _make_scorer(model, *, batch_size, max_length, bf16, accelerator, task=MC):
    from advrace.models.readers import is_baseline, make_baseline

    if hasattr(model, "predict_mc" if task == MC else "predict_qa"):
        return model
    if is_baseline(model):
        if task != MC:
            raise ConfigError(f"{model}: the built-in readers answer multiple-choice questions only")
        return make_baseline(model, batch_size=max(batch_size, 32))
    if task != MC:
        from advrace.models.span_scoring import load_span_model

        return load_span_model(str(model), batch_size=batch_size, max_length=max_length, bf16=bf16)
    return load_checkpoint(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                           accelerator=accelerator)


def _score_span_model(split_examples: dict, scorer, accelerator, progress) -> dict:
    """EM and F1 of a span model's best answer on each split of a SQuAD release."""
    results = {}
    for split, examples in split_examples.items():
        answers = map_sharded(lambda shard: scorer.predict_qa(shard, progress=progress, desc=split),
                              examples, accelerator)
        results[split] = qa_split_result(examples, answers)
    return results


def _accelerator():
    from accelerate import Accelerator

    return Accelerator()


def score_release(release_dir, model, *, splits=None, batch_size: int = 16, max_length: int = 512,
                  bf16: bool | None = None, accelerator=None, progress: bool = True) -> dict:
    """Score a model on each split of a multiple-choice release.

    `model`: a checkpoint folder, a Hub name, or an object with `predict_mc`. `bf16`: None uses
    bf16 autocast where the device computes in bf16 natively, True always, False never.
    Returns `{split: {"accuracy": percent, "n": int, "records": [{id, source_id, prediction,
    label, correct, scores}]}}` on every process.
    """
    manifest = check_release(release_dir)
    _require_mc(release_dir, manifest)
    names = select_splits(manifest, splits)
    if accelerator is None and not hasattr(model, "predict_mc"):
        accelerator = _accelerator()
    scorer = _make_scorer(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                          accelerator=accelerator)
    show = progress and (accelerator is None or accelerator.is_main_process)
    return _score_model({s: read_split(release_dir, s) for s in names}, scorer, accelerator, show)


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
                      _manifest: dict | None = None) -> dict:
    """Score a predictions file on each split: accuracy for RACE, EM and F1 for SQuAD.

    The file maps release record ids to an option index (RACE; a letter also works) or an answer
    text (SQuAD). Questions without a prediction are an error unless `allow_missing`, which
    counts them wrong. Returns the same layout as `score_release` (SQuAD: exact_match and f1).
    """
    manifest = _manifest or check_release(release_dir)
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
        if manifest["task"] == MC:
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


# --------------------------------------------------------------------------- command


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
                     max_length: int = 512, bf16: bool | None = None, allow_missing: bool = False,
                     progress: bool = True, accelerator=None) -> dict:
    """Score every model and predictions file on every split; write the report to `out`.

    Returns the report summary (what results.json holds). With several processes every process
    scores its shard and only the main process writes.
    """
    from advrace.core.atomic import check_replaceable
    from advrace.models.readers import is_baseline
    from advrace.evaluation.report import write_report

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
        accelerator = _accelerator()
    main = accelerator is None or accelerator.is_main_process
    split_examples = {split: read_split(release, split) for split in names} if models else {}
    scores, sources = {}, {}
    for label, model in zip(labels, models):
        scorer = _make_scorer(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                              accelerator=accelerator, task=task)
        if progress and main:
            print(f"scoring {label} on {len(names)} split(s)", flush=True)
        score = _score_model if task == MC else _score_span_model
        scores[label] = score(split_examples, scorer, accelerator, progress and main)
        is_object = hasattr(model, "predict_mc") or hasattr(model, "predict_qa")
        sources[label] = {"kind": "scorer" if is_object else "built-in" if is_baseline(model) else "model",
                          "path": str(model) if isinstance(model, (str, os.PathLike)) else model_name(model)}
        inference = getattr(scorer, "inference", None)
        if isinstance(inference, dict):  # the readers that run a network say how it computed
            sources[label].update(bf16=inference.get("precision") == "bf16", inference=inference)
        if isinstance(scorer, CheckpointScorer):
            del scorer
            if accelerator is not None:
                accelerator.free_memory()
    for label, pred in zip(labels[len(models):], predictions):
        scores[label] = score_predictions(release, pred, splits=names, allow_missing=allow_missing,
                                          _manifest=manifest)
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
    contexts in windows of --max-length tokens that overlap by a quarter of them. --predictions: a JSON object keyed by release record
    id (<split>/<source_id>): an option index (or letter) for RACE, an answer text for SQuAD.

    The report folder gets results.json (per model and split: score, n, relative drop from
    `original` in percent; averages over the adversarial splits and over models; per model, the
    precision, device type and torch version it was scored with), results.md (the same as a
    table), results.png (a bar chart) and predictions/<model>.jsonl.
    Probe splits (diagnosis, option_only) are reported but not averaged.
    Exit status: 0 on success, 1 if the release fails verification, 2 on bad input,
    3 if a model cannot be loaded.
    """)


def add_evaluate_parser(subparsers):
    """Add the `evaluate` subcommand; returns its handler (`args -> exit status`)."""
    from advrace.cli import comma_list

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
                   help="predictions JSON keyed by record id; repeat for several files")
    p.add_argument("--out", required=True, metavar="REPORT_DIR", help="report folder to write")
    p.add_argument("--splits", type=comma_list, help="comma-separated splits to score (default: all)")
    p.add_argument("--batch-size", type=int, default=16, help="questions per batch (default: 16)")
    p.add_argument("--max-length", type=int, default=512,
                   help="tokens per option sequence; longer passages are truncated (default: 512)")
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
