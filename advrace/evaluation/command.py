"""The `advrace evaluate` subcommand: score every model and predictions file on every split of a
release, and write the report (results.json, results.md, results.png, predictions/)."""

from __future__ import annotations

import argparse
import json
import os
import sys
import textwrap
from collections import Counter
from pathlib import Path

from advrace.core.atomic import check_replaceable
from advrace.core.cli_types import comma_list
from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.evaluation.naming import report_labels
from advrace.evaluation.predictions import PredictionsError, score_predictions
from advrace.evaluation.report import ORIGINAL, file_stems, write_report
from advrace.evaluation.scoring import (check_fits, check_model_args, make_accelerator, make_scorer, mark_perturbed,
                                        score_splits, scored_identity, select_splits)
from advrace.formats import load as load_data
from advrace.formats.base import race_level
from advrace.models.protocol import lm_eval_race
from advrace.models.protocol.llm_prompts import LETTER
from advrace.models.decoders.llm_scoring import GENERATION, LOGLIKELIHOOD, MC_METHODS, merge_decoding
from advrace.models.protocol.scoring_protocol import (BOS_POLICIES, LM_EVAL_RACE, LM_EVAL_RACE_TASK, PER_QUESTION,
                                                       PROTOCOL_TEXT, PROTOCOLS)
from advrace.models.encoders.readers import is_builtin_reader
from advrace.models.runtime.loading import model_name
from advrace.models.runtime.model_args import HELP as MODEL_ARGS_HELP
from advrace.models.runtime.model_args import ModelArgs
from advrace.release import check_release, perturbed_flags, read_split
from advrace.release.records import sha256_file


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


def few_shot_pool(path, k: int, split_examples: dict, task: str) -> tuple[list, dict]:
    """The examples of the user's few-shot file, less any question or passage of the release, so
    that no question is shown its own answer, and the file's record (what the scoring protocol
    names: the path as given and the sha256 of its inputs); ConfigError when fewer than `k` remain."""
    if not k:
        return [], {}
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
    loaded = load_data(str(path))
    examples = loaded.examples
    kind = "MCExample" if task == MULTIPLE_CHOICE else "SpanExample"
    if examples and type(examples[0]).__name__ != kind:
        raise ConfigError(f"--few-shot-file {path}: holds {type(examples[0]).__name__}s; this release needs {kind}s")
    released = [ex for exs in split_examples.values() for ex in exs]
    seen_ids, seen_texts = {ex.source_id for ex in released}, {ex.passage_text for ex in released}
    pool = [ex for ex in examples if ex.source_id not in seen_ids and ex.passage_text not in seen_texts]
    if len(pool) < k:
        raise ConfigError(f"--few-shot-file {path}: {len(pool)} of its {len(examples)} questions are not in the "
                          f"release, fewer than --few-shot {k}")
    return pool, {"file": str(path), "sha256": loaded.fingerprint()}


def lm_eval_race_split(release, task: str, split_examples: dict, models, kinds, predictions, method: str,
                       few_shot: int) -> dict:
    """The questions lm-evaluation-harness's own race task scores: the last question of each
    article of the release's `original` split (advrace.models.protocol.lm_eval_race), for decoder LMs
    scored zero-shot by log-likelihood; anything else is refused (ConfigError, exit 2)."""
    if task != MULTIPLE_CHOICE:
        raise ConfigError(f"--protocol {LM_EVAL_RACE} is lm-evaluation-harness's RACE task: it scores a "
                          f"multiple-choice release, not {release} ({task})")
    if ORIGINAL not in split_examples or len(split_examples) > 1:
        raise ConfigError(f"--protocol {LM_EVAL_RACE} scores the `{ORIGINAL}` split only (lm-eval's race task "
                          "has no adversarial splits; each attacked question is scored on its own by the default "
                          f"protocol): leave out --splits or give --splits {ORIGINAL}")
    if predictions or any(kind != "causal_lm" for kind in kinds):
        others = [str(m) for m, k in zip(models, kinds) if k != "causal_lm"] + [str(p) for p in predictions]
        raise ConfigError(f"--protocol {LM_EVAL_RACE} scores decoder language models only; not {', '.join(others)}")
    if method != LOGLIKELIHOOD or few_shot:
        raise ConfigError(f"--protocol {LM_EVAL_RACE} is zero-shot log-likelihood, as lm-eval's race task: "
                          "drop --method letter and --few-shot")
    return {ORIGINAL: [doc.example for doc in lm_eval_race.documents(split_examples[ORIGINAL])]}


def not_lm_evals_data(manifest: dict, scored) -> str | None:
    """Why the articles `scored` (the last question of each) are not the data of lm-eval's race
    task, RACE-high's test set (EleutherAI/race, config high), or None when nothing says so: RACE-
    middle articles or ones of unknown level (read from RACE ids, `high1.txt-0`), or a release made
    from another part of RACE than its test set."""
    levels = Counter(race_level(ex.source_id) or "unknown" for ex in scored)
    part = (manifest.get("source") or {}).get("split")
    other = [plural(n, "article") + (" of unknown level (not RACE ids)" if level == "unknown" else f" of RACE-{level}")
             for level, n in sorted(levels.items()) if level != "high"]
    problems = [f"its {ORIGINAL} split holds {' and '.join(other)} (of {plural(sum(levels.values()), 'article')} "
                "scored)"] if other else []
    if part and part != "test":
        problems.append(f"it was made from RACE's {part} set")
    if not problems:
        return None
    return (f"lm-evaluation-harness's race task has RACE-high's test set only ({LM_EVAL_RACE_TASK['dataset']}), "
            f"and this release is not that: {'; '.join(problems)}. Its number follows lm-eval's protocol on other "
            "data, and is not comparable to lm-eval's race score")


LM_EVAL_MODEL_TYPES = ("hf", "hf-auto", "huggingface")  # lm-eval's --model: the class that loads `pretrained`


def take_lm_eval_settings(settings: dict, models: list, bos: str | None, max_length: int | None):
    """(models, bos, max_length) with lm-evaluation-harness's `pretrained`, `add_bos_token` and
    `max_length` from the model args (`settings`, from ModelArgs.parse) in place of --model,
    --bos and --max-length; ConfigError where both are given and disagree."""
    if "model" in settings:
        pretrained = settings["model"]
        if models and models != [pretrained]:
            if len(models) == 1 and models[0] in LM_EVAL_MODEL_TYPES:
                raise ConfigError(f"--model {models[0]} with --model-args pretrained={pretrained}: lm-evaluation-"
                                  f"harness's --model names its model class ({models[0]}); advrace's --model is the "
                                  f"model itself: leave out --model {models[0]}")
            raise ConfigError(f"--model-args pretrained={pretrained} and --model {' --model '.join(map(str, models))}: "
                              "give the model once, with --model or with pretrained= (without --model)")
        models = [pretrained]
    if "bos" in settings:
        if bos not in (None, settings["bos"]):
            raise ConfigError(f"--bos {bos} and --model-args add_bos_token "
                              f"({'true' if settings['bos'] == 'always' else 'false'}, that is --bos {settings['bos']}) "
                              "disagree: give one of them")
        bos = settings["bos"]
    if "max_length" in settings:
        if max_length not in (None, settings["max_length"]):
            raise ConfigError(f"--max-length {max_length} and --model-args max_length={settings['max_length']} "
                              "disagree: give one of them")
        max_length = settings["max_length"]
    return models, bos or "tokenizer", max_length


def evaluate_command(release, models=(), predictions=(), out=None, *, splits=None, batch_size: int = 16,
                     max_length: int | None = None, bf16: bool | None = None, allow_missing: bool = False,
                     progress: bool = True, accelerator=None, method: str = LOGLIKELIHOOD, few_shot: int = 0,
                     few_shot_file=None, few_shot_seed: int = 1234, chat_template: bool | None = None,
                     bos: str | None = None, model_args=None, protocol: str = PER_QUESTION) -> dict:
    """Score every model and predictions file on every split; write the report to `out`.

    `max_length`: None scores each checkpoint at the length `advrace train` recorded for it
    (512 when none is recorded); the length used goes into the report's sources.

    Causal LMs: `method` (loglikelihood or letter) for multiple choice, greedy generation for
    SQuAD; `few_shot` solved questions from `few_shot_file` before each one, drawn by
    `few_shot_seed`; `chat_template` for letter choice: None applies the tokenizer's when it has one;
    `bos`: "tokenizer" (None: the default; BOS first when the tokenizer adds one by default, as
    lm-evaluation-harness 0.4.10+ does), "always" or "never". Each causal LM's source in the report
    holds its scoring protocol (advrace.models.protocol.scoring_protocol) and what its decoding
    shared, ran alone and cut.
    `model_args`: how every model is loaded (a ModelArgs, a `key=value,...` string or a dict; see
    advrace.models.runtime.model_args): they apply to causal LMs only, and any other model is refused
    (ConfigError, exit 2) before any model loads, as is a bad key or value. Each model's source in
    the report records them. lm-evaluation-harness's `pretrained`, `add_bos_token` and `max_length`
    there stand for `models`, `bos` and `max_length` (`take_lm_eval_settings`).

    Every model is checked against the release's task before any is scored: a checkpoint whose
    head does not fit (a span model on RACE) is refused with ConfigError (exit 2).

    Returns the report summary (what results.json holds). With several processes every process
    scores its shard and only the main process writes.
    """
    models, predictions, model_args, bos, max_length = _request(models, predictions, model_args, bos, max_length, out)
    manifest = check_release(release)
    names, kinds = _check_against_release(release, manifest, models, predictions, model_args, splits, method, protocol)
    task, labels = manifest["task"], report_labels(models, predictions)
    accelerator = _accelerator_for(models, accelerator)
    main = accelerator is None or accelerator.is_main_process
    # Scoring a predictions file needs every split (an id may name any); models only those scored.
    read = {split: read_split(release, split) for split in (manifest["splits"] if predictions else names)}
    split_examples = {split: read[split] for split in names}
    flags = {split: perturbed_flags(release, split) for split in names}  # what the attack changed, per record
    if protocol == LM_EVAL_RACE:
        split_examples = _lm_eval_race_examples(release, manifest, split_examples, models, kinds, predictions,
                                                method, few_shot, warn=main)
    llm = _llm_settings(read, task, method, few_shot, few_shot_file, few_shot_seed, chat_template, bos,
                        protocol) if "causal_lm" in kinds else {}
    release_record = {"name": manifest.get("name"), "manifest_sha256": sha256_file(Path(release) / "manifest.json")}
    options = dict(batch_size=batch_size, max_length=max_length, bf16=bf16, accelerator=accelerator, task=task,
                   model_args=model_args)  # make_scorer's
    scores, sources = _score_models(release, split_examples, flags, zip(labels, models, kinds), options, llm,
                                    release_record, progress=progress and main, main=main)
    for label, pred in zip(labels[len(models):], predictions):
        scores[label] = score_predictions(release, pred, splits=names, allow_missing=allow_missing,
                                          manifest=manifest, split_examples=read, perturbed=flags)
        sources[label] = _predictions_source(pred)
    if not main:
        return {}
    return write_report(out, {**manifest, "manifest_sha256": release_record["manifest_sha256"]}, scores,
                        sources=sources)


def _request(models, predictions, model_args, bos: str | None, max_length: int | None, out):
    """(models, predictions, model_args, bos, max_length) as lists and a ModelArgs, lm-evaluation-
    harness's settings among the model args taken as advrace's (`take_lm_eval_settings`); refused
    before the release is read: nothing to score, model args without a model to load, no report
    folder or one that is not a report's."""
    settings: dict = {}
    model_args = ModelArgs.coerce(model_args, settings)
    models, bos, max_length = take_lm_eval_settings(settings, list(models or ()), bos, max_length)
    predictions = list(predictions or ())
    if not models and not predictions:
        raise ConfigError("nothing to evaluate: give at least one --model or --predictions file")
    if model_args and not models:
        raise ConfigError(f"--model-args {model_args}: no --model to load with them (a predictions file is "
                          "scored as it is)")
    if out is None:
        raise ConfigError("give --out REPORT_DIR")
    check_replaceable(Path(out), "results.json", "report")
    return models, predictions, model_args, bos, max_length


def _check_against_release(release, manifest: dict, models: list, predictions: list, model_args: ModelArgs,
                           splits, method: str, protocol: str) -> tuple[list[str], list]:
    """The splits to score and each model's kind, every model checked against the release's task
    (and its model args against its kind) before any loads, so a misfit costs no scoring time."""
    if protocol not in PROTOCOLS:
        raise ConfigError(f"unknown protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    names = select_splits(manifest, splits or ([ORIGINAL] if protocol == LM_EVAL_RACE else None))
    task = manifest["task"]
    if task != MULTIPLE_CHOICE and method == LETTER:
        raise ConfigError(f"--method letter: letter choice scores multiple-choice (RACE) releases; {release} is "
                          f"{task} (SQuAD), which a causal LM answers by greedy generation: leave out --method")
    kinds = [check_fits(m, task, release, model_args) for m in models]
    for m, kind in zip(models, kinds):
        check_model_args(m, kind, model_args)
    for p in predictions:
        if not Path(p).is_file():
            raise PredictionsError(f"{p}: no such predictions file")
    return names, kinds


def _accelerator_for(models: list, accelerator):
    """The caller's accelerator, else one made where a model runs a network or the command runs under
    `accelerate launch` (several processes); None where every model is a scorer object or a
    built-in reader in one process."""
    launched = int(os.environ.get("WORLD_SIZE", "1")) > 1
    if accelerator is None and (launched or not all(hasattr(m, "predict_mc") or hasattr(m, "predict_qa")
                                                    or is_builtin_reader(m) for m in models)):
        accelerator = make_accelerator()
    return accelerator


def _lm_eval_race_examples(release, manifest: dict, split_examples: dict, models, kinds, predictions, method: str,
                           few_shot: int, *, warn: bool) -> dict:
    """`lm_eval_race_split`'s questions, with a warning on stderr (`warn`: the main process) where
    the release is not lm-eval's own race data."""
    split_examples = lm_eval_race_split(release, manifest["task"], split_examples, models, kinds, predictions,
                                        method, few_shot)
    warning = not_lm_evals_data(manifest, split_examples[ORIGINAL])
    if warning and warn:
        print(f"warning: --protocol {LM_EVAL_RACE}: {warning}", file=sys.stderr, flush=True)
    return split_examples


def _llm_settings(read: dict, task: str, method: str, few_shot: int, few_shot_file, few_shot_seed: int,
                  chat_template: bool | None, bos: str, protocol: str) -> dict:
    """How every causal LM scores (make_scorer's `llm`): method, shots and where they come from,
    chat template, BOS, and under lm-eval's race protocol each article's earlier questions."""
    pool, shot_source = few_shot_pool(few_shot_file, few_shot, read, task)
    llm = {"method": method, "shots": few_shot, "shot_pool": pool, "shot_seed": few_shot_seed,
           "chat_template": chat_template, "bos": bos, "few_shot_source": shot_source}
    if protocol == LM_EVAL_RACE:
        llm["contexts"] = lm_eval_race.contexts(read[ORIGINAL])
    return llm


def _score_models(release, split_examples: dict, flags: dict, labelled, options: dict, llm: dict,
                  release_record: dict, *, progress: bool, main: bool) -> tuple[dict, dict]:
    """Each (label, model, kind) of `labelled` scored on every split, one model loaded at a time:
    scores and sources (how each was scored) by label."""
    scores, sources = {}, {}
    accelerator, task = options["accelerator"], options["task"]
    for label, model, kind in labelled:
        scorer = make_scorer(model, **options, llm=llm if kind == "causal_lm" else None, kind=kind)
        if progress:
            print(f"scoring {label} on {plural(len(split_examples), 'split')}", flush=True)
        scores[label] = mark_perturbed(score_splits(split_examples, scorer, accelerator, progress, task=task),
                                       release, flags)
        sources[label] = _model_source(model, kind, scorer, options, release_record, main=main)
        if sources[label]["kind"] == "model":  # loaded by make_scorer: freed before the next one loads
            del scorer
            if accelerator is not None:
                accelerator.free_memory()
    return scores, sources


def _model_source(model, kind, scorer, options: dict, release_record: dict, *, main: bool) -> dict:
    """How a model was scored, as the report records it: what it is and its identity; for a network,
    its precision; for a causal LM, its method, scoring protocol, decoding and model args; for a
    loaded checkpoint, the length it was scored at."""
    is_object = hasattr(model, "predict_mc") or hasattr(model, "predict_qa")
    model_args, task = options["model_args"], options["task"]
    source = {"kind": "scorer" if is_object else "built-in" if is_builtin_reader(model) else "model",
              "path": str(model) if isinstance(model, (str, os.PathLike)) else model_name(model),
              "identity": scored_identity(model, model_args) if main else {}}
    inference = getattr(scorer, "inference", None)
    if isinstance(inference, dict):  # the readers that run a network say how it computed
        source.update(bf16=inference.get("precision") == "bf16", inference=inference)
    if kind == "causal_lm":
        source["method"] = scorer.method if task == MULTIPLE_CHOICE else GENERATION
        source["protocol"] = scorer.protocol(task, release_record).to_dict()
        source["decoding"] = merge_decoding(scorer.decoding(), options["accelerator"])
        if model_args:
            source["model_args"] = model_args.given()
    if source["kind"] == "model":
        source["max_length"] = scorer.max_length
    return source


def _predictions_source(path) -> dict:
    """A predictions file as the report records it: its path, and its name and sha256 (what
    `advrace compare` checks)."""
    return {"kind": "predictions", "path": str(path),
            "identity": {"name": Path(path).name, "sha256": sha256_file(Path(path))}}


EVALUATE_EPILOG = textwrap.dedent("""\
    examples:
      advrace evaluate releases/race-test --model runs/bert-base --model runs/roberta --out reports/race
      advrace evaluate releases/race-test --predictions preds/gpt.json --splits original,charswap --out reports/gpt
      accelerate launch -m advrace evaluate releases/race-test --model runs/bert-large --out reports/large
      advrace evaluate releases/race-test --model smollm2 --method letter --out reports/smollm2-letter
      advrace evaluate releases/race-test --model meta-llama/Llama-3.1-70B --model-args dtype=bfloat16,device_map=auto --out reports/llama70b

    --model: a built-in reader that needs no training (sliding-window, sliding-window:distance,
    similarity, similarity:ENCODER_FOLDER), or a folder written by save_pretrained (AutoModelForMultipleChoice and its tokenizer
    for RACE releases, AutoModelForQuestionAnswering for SQuAD ones: `advrace train` with
    objective span_extraction), or a Hugging Face Hub name when online. SQuAD models read long
    contexts in windows of --max-length tokens that overlap by a quarter of them. A causal
    language model (a folder, smollm2, a Hub name; told by its config's architecture) scores
    either: --method (see below) for RACE, greedy generation up to a line break for SQuAD. A model
    whose head does not fit the release (a span model on RACE, an encoder without a head) is
    refused with exit status 2 before anything is scored, and
    so is a near miss of a built-in name ("smolm2: ... did you mean smollm2?"). Offline, a Hub
    name is read from the Hugging Face cache alone (set HF_HUB_OFFLINE=1 to skip the check of
    the Hub's address), and fails at once when it is not there.

    Decoder LMs and lm-evaluation-harness: by default (--protocol advrace-per-question) every
    question of every split is scored on its own, with the prompt lm-eval's race task builds for
    an article with one question ("Article: <passage>\\n\\n<question>", each option after a space),
    BOS as the tokenizer adds it by default (as lm-eval 0.4.10+; --bos), a prompt too long for the
    model cut from the left per (prompt, option) pair as lm-eval cuts it, each cut warned and
    counted. That is not lm-eval's race number: its task has one document per article, puts the
    earlier questions with their answers in the context and scores only the last question.
    --protocol lm-eval-race scores exactly that, on the release's original split, as lm-eval's race
    task version 3.0 (its blank-filling fix, lm-eval issue 835), recorded in the protocol; lm-eval's
    task has RACE-high's test set only, and a release of other RACE data is warned about. Every decoder
    LM's entry in results.json holds its protocol record (prompt, delimiters, shots, BOS, chat
    template, truncation, maximum length, metrics, weights, release) and what its decoding shared
    or ran alone; results.md says so under "How each model was scored". A model whose attention
    takes no custom mask (flash, flex) or that fails the shared cache's probe (ALiBi: MPT, BLOOM)
    is scored pair by pair, exact and counted.

    --model-args KEY=VALUE,...: how causal language models are loaded, as lm-evaluation-harness's
    --model_args. dtype=auto|float32|bfloat16|float16: the dtype the weights are loaded in (default
    float32, where lm-eval's default is auto: the checkpoint's own; results.md says so). This is not
    --no-bf16: bf16 autocast computes in bf16 over weights kept in fp32, and is on by default
    where the hardware has native bf16; dtype=bfloat16 stores the weights themselves in bf16 (half
    the memory) and computes in bf16 everywhere, with autocast off. device_map=auto (or balanced,
    balanced_low_0, sequential): Accelerate's big-model inference, the model split over the GPUs
    and offloaded to the CPU or disk as memory requires, and left where it was placed (one
    process: refused under accelerate launch with several); device_map=cpu, cuda:0, ...: the
    whole model on that device. attn_implementation=eager|sdpa|flash_attention_2|flex_attention|...
    (those the installed Transformers registers). revision=BRANCH|TAG|COMMIT of a Hub model.
    trust_remote_code=true runs the Python code a Hub repository ships (off unless given).
    tokenizer=FOLDER|NAME: another tokenizer than the model's own. gguf_file=FILE: read the model
    (weights and tokenizer) from that GGUF file of its folder or Hub repository, dequantised to
    dtype. peft=ADAPTER: put a PEFT adapter (LoRA, ...) on the model (needs `pip install peft`).
    lm-eval's keys that are settings here: pretrained=MODEL is --model (when --model is not given),
    add_bos_token=true|false is --bos always|never, max_length=N is --max-length N, and
    parallelize=true is device_map=auto; its others (load_in_4bit, delta, device, ...) are refused
    with the reason and what to use instead. An
    unknown key or a bad value exits with status 2 before any model loads; so do model args with
    a --model that is not a causal language model (a multiple-choice or span checkpoint, a
    built-in reader), since they would change nothing there. Predictions files are scored as they
    are. results.json records them per model (source.model_args), results.md on the line saying
    how the model was scored.

    --predictions: a JSON object keyed by release record id (<split>/<source_id>), or JSON lines
    {"id": "<split>/<source_id>", "prediction": ...}, such as the predictions/<model>.jsonl of an
    earlier report; a prediction is an option index 0-3 or letter A-D for RACE, an answer text
    for SQuAD.

    The report folder gets results.json (per model and split: score, n and drop, all in percent;
    averages over the adversarial splits and over models; per model, the precision, device type
    and torch version it was scored with), results.md (the same as tables), results.png (a bar
    chart with 95% error bars, a hatched bar for each split's attacked questions and, for
    multiple choice, a dashed chance line) and
    predictions/<model>.jsonl (the name made file-safe: owner/name -> owner_name). Drop: the
    relative drop from `original`, 100 * (original - split) / original, positive when the split
    is harder. Probe splits (diagnosis, option_only) are reported but not averaged.

    results.json per model and split also holds <metric>_ci, the 95% confidence interval
    [low, high] in percent (Wilson score interval for accuracy, accuracy_norm and exact_match;
    percentile bootstrap, 1000 resamples, seed 0, for f1), and for every split but `original`
    paired_n (the questions its attack changed, paired with `original` by source_id) and
    <metric>_p (two-sided p-value against `original` on them: exact McNemar test; paired
    bootstrap for f1; 4 significant digits). An attack keeps the questions it cannot change as
    copies, so every split but `original` also gives attacked_n and attacked_share (the questions
    its attack changed, and their percent of the split), <metric>_attacked and
    <metric>_attacked_ci (the score on them alone), <metric>_attacked_original (the same
    questions on `original`) and <metric>_attacked_drop; the headline drop stays over all
    questions, as AdvRACE reports it. Null where no question was attacked. Top level: statistics (the methods in words), chance (percent, null
    for SQuAD), metrics (accuracy_norm added when a log-likelihood model gives it), caveats (what
    the release records that changes how a number reads, per split and model: people's validation,
    a demonstration model, a generator, judge or reader sharing its base with a scored model, a
    model below chance; results.md's "Caveats"). Per model: predictions (its predictions file) and
    source (how it was scored; method when known; identity: what was scored, a folder's sha256,
    smollm2's GGUF sha256, a Hub model's cached commit, a predictions file's sha256, which
    `advrace compare` checks).
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
                   help="checkpoint folder or Hub name; repeat for several models (or, for one causal LM, "
                        "--model-args pretrained=CKPT as in lm-evaluation-harness)")
    p.add_argument("--predictions", action="append", default=[], metavar="FILE",
                   help="predictions file: a JSON object keyed by record id, or JSON lines of "
                        "{\"id\", \"prediction\"} as in a report's predictions/; repeat for several files")
    p.add_argument("--out", required=True, metavar="REPORT_DIR", help="report folder to write")
    p.add_argument("--splits", type=comma_list, help="comma-separated splits to score (default: all)")
    p.add_argument("--batch-size", type=int, default=16, help="questions per batch (default: 16)")
    p.add_argument("--max-length", type=int, default=None,
                   help="tokens per option sequence (per window for SQuAD models); longer passages "
                        "are truncated (default: the length the checkpoint was trained with, when "
                        "`advrace train` recorded it, else 512). Decoder LMs: the longest prompt + option, "
                        "at most the model's own (default: its config's, text_config first, as lm-eval)")
    p.add_argument("--no-bf16", dest="bf16", action="store_const", const=False, default=None,
                   help="score in fp32 (default: bf16 autocast where the GPU or CPU has native bf16); "
                        "autocast only: weights stay fp32 unless --model-args dtype= loads them otherwise")
    _add_causal_lm_arguments(p)
    p.add_argument("--allow-missing", action="store_true",
                   help="count questions missing from a predictions file as wrong instead of failing")
    p.add_argument("--quiet", action="store_true", help="no progress output")
    p.set_defaults(handler=_evaluate)
    return _evaluate


def _add_causal_lm_arguments(p) -> None:
    """The options that only causal language models read."""
    llm = p.add_argument_group("causal language models (a causal-LM folder, smollm2, or a Hub name)")
    llm.add_argument("--method", choices=MC_METHODS, default=LOGLIKELIHOOD,
                     help="multiple choice: loglikelihood scores each option as a continuation of the "
                          "prompt lm-evaluation-harness's race task builds for a one-question article, and "
                          "reports acc and acc_norm (not lm-eval's race number: see --protocol); letter shows "
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
    llm.add_argument("--model-args", metavar="KEY=VALUE,...",
                     help=f"how to load the model, as lm-evaluation-harness's --model_args: {MODEL_ARGS_HELP}. "
                          "dtype sets the weights' dtype (bf16 weights compute in bf16, without autocast), unlike "
                          "--no-bf16, which turns off bf16 autocast over fp32 weights; device_map=auto splits a "
                          "large model over the GPUs and offloads the rest (one process only). Causal LMs only: "
                          "refused for other models. Recorded in the report (see below)")
    chat = llm.add_mutually_exclusive_group()
    chat.add_argument("--chat-template", dest="chat_template", action="store_const", const=True, default=None,
                      help="letter choice inside the tokenizer's chat template (default: when it has one)")
    chat.add_argument("--no-chat-template", dest="chat_template", action="store_const", const=False,
                      help="letter choice as plain text, even for an instruct model")
    llm.add_argument("--protocol", choices=PROTOCOLS, default=PER_QUESTION,
                     help=f"{PER_QUESTION} (the default): {PROTOCOL_TEXT[PER_QUESTION]}; adversarial splits need "
                          f"it, since each question is attacked on its own. {LM_EVAL_RACE}: "
                          f"{PROTOCOL_TEXT[LM_EVAL_RACE]}, to reproduce lm-eval's race number (acc; task "
                          f"version {LM_EVAL_RACE_TASK['version']}) on the release's original split (warned unless "
                          "it is RACE-high test, lm-eval's data); zero-shot log-likelihood, decoder LMs only")
    llm.add_argument("--bos", choices=BOS_POLICIES, default=None,
                     help="a BOS token before each prompt: tokenizer (when the tokenizer adds one by default, "
                          "as lm-evaluation-harness 0.4.10 and later do: Llama 3, Mistral, Gemma yes; GPT-2, "
                          "SmolLM2 no), always, or never (lm-eval's add_bos_token=False). Never two: a chat "
                          "template that writes BOS gets none more (default: tokenizer; --model-args "
                          "add_bos_token=true|false is always|never)")


def _evaluate(args) -> int:
    """`advrace evaluate`: the report written, then results.md printed (by the main process: the
    others get no summary)."""
    summary = evaluate_command(args.release, args.model, args.predictions, args.out,
                               splits=args.splits, batch_size=args.batch_size,
                               max_length=args.max_length, bf16=args.bf16,
                               allow_missing=args.allow_missing, progress=not args.quiet,
                               method=args.method, few_shot=args.few_shot, few_shot_file=args.few_shot_file,
                               few_shot_seed=args.few_shot_seed, chat_template=args.chat_template,
                               bos=args.bos, model_args=args.model_args, protocol=args.protocol)
    if summary:
        print((Path(args.out) / "results.md").read_text(encoding="utf-8").rstrip())
        print(f"\nwrote {args.out}: results.json, results.md, results.png, "
              f"predictions/ ({len(summary['models'])} model(s))")
    return 0
