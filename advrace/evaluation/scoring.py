"""Scoring models on a frozen release: accuracy for RACE, EM and F1 for SQuAD.

A model is a local Transformers checkpoint folder, a Hub name (online only), a built-in reader,
or any object with `predict_mc(examples) -> list[list[float]]` (per-option scores; for SQuAD,
`predict_qa(examples) -> list[str]`). Checkpoints are scored by advrace.models.encoders.mc_scoring and
advrace.models.encoders.span_scoring, one shard of the examples per Accelerate process.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from advrace.core.errors import AdvraceError, ConfigError
from advrace.core.numbers import argmax
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.metrics import load_metric, squad_em_f1
from advrace.models.protocol.acc_norm import per_character
from advrace.models.protocol.llm_prompts import LOGLIKELIHOOD
from advrace.models.encoders.readers import is_builtin_reader
from advrace.models.kinds import MODEL_KINDS, kinds_for
from advrace.models.runtime.checkpoint_info import checkpoint_sha256, trained_from
from advrace.models.runtime.loading import (KIND_TEXT, MINILM, SMOLLM2, checkpoint_kind, checkpoint_name, model_name,
                                            resolve_model, smollm2_gguf)
from advrace.models.runtime.model_args import ModelArgs
from advrace.models.runtime.sharding import map_sharded
from advrace.release import check_release, perturbed_flags, read_split
from advrace.release.records import sha256_file


def select_splits(manifest: dict, splits=None) -> list[str]:
    """The requested splits in release order (all when none are named)."""
    available = list(manifest["splits"])
    if not splits:
        return available
    unknown = [s for s in splits if s not in manifest["splits"]]
    if unknown:
        raise ConfigError(f"no split(s) {', '.join(unknown)} in the release; available: {', '.join(available)}")
    return [s for s in available if s in set(splits)]


def _takes_progress(method) -> bool:
    """Whether `method` accepts `desc=` and `progress=` (the scorers and built-in readers do; a
    user's `predict_mc(examples)` need not)."""
    try:
        params = inspect.signature(method).parameters.values()
    except (TypeError, ValueError):
        return False
    if any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params):
        return True
    named = {p.name for p in params if p.kind in (inspect.Parameter.KEYWORD_ONLY,
                                                  inspect.Parameter.POSITIONAL_OR_KEYWORD)}
    return {"desc", "progress"} <= named


def _predict_sharded(predict, examples, accelerator, *, desc, progress) -> list:
    """`predict` (a scorer's bound predict_mc or predict_qa) on each process's shard; every process
    gets all results back, in input order. Progress keywords go only to a method that takes them,
    and the count is checked because a user's method may drop or add results."""
    keywords = {"desc": desc, "progress": progress} if _takes_progress(predict) else {}
    results = map_sharded(lambda shard: predict(shard, **keywords), examples, accelerator)
    if len(results) != len(examples):
        method = getattr(predict, "__name__", "predict")
        what = "score lists" if method == "predict_mc" else "answers"
        raise AdvraceError(f"{model_name(getattr(predict, '__self__', predict))}: {method} returned "
                           f"{len(results)} {what} for {len(examples)} examples")
    return results



def _accuracy(examples, predictions) -> float:
    refs = [ex.label for ex in examples]
    preds = [-1 if p is None else p for p in predictions]
    return load_metric("mc_accuracy").compute(predictions=preds, references=refs)["accuracy"] if refs else 0.0


def mc_split_result(examples, predictions: list[int | None], scores=None, normalised: list[int] | None = None) -> dict:
    """Accuracy (percent, from the mc_accuracy module), n, and one record per example.

    `normalised`: the predictions by log-likelihood per character of the option, for a causal
    LM scored by log-likelihood (lm-evaluation-harness's acc_norm): reported as accuracy_norm.
    """
    records = []
    for k, (ex, pred) in enumerate(zip(examples, predictions)):
        rec = {"id": ex.id, "source_id": ex.source_id, "prediction": pred, "label": ex.label,
               "correct": pred == ex.label}
        if normalised is not None:
            rec.update(prediction_norm=normalised[k], correct_norm=normalised[k] == ex.label)
        if scores is not None:
            rec["scores"] = [float(s) for s in scores[k]]
        records.append(rec)
    result = {"n": len(examples), "accuracy": _accuracy(examples, predictions), "records": records}
    if normalised is not None:
        result["accuracy_norm"] = _accuracy(examples, normalised)
    return result


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


def mark_perturbed(results: dict, release_dir, flags: dict | None = None) -> dict:
    """`results` (`{split: result}`) with each record's `perturbed` flag from the release (True
    where the split's attack changed the question, False for a copy it kept unchanged), which the
    report needs for the attacked share and the score on the attacked questions. `flags`:
    `{split: {record id: flag}}` already read (`perturbed_flags`); a split it lacks is read here."""
    flags = dict(flags or {})
    for split, result in results.items():
        if split not in flags:
            flags[split] = perturbed_flags(release_dir, split)
        for rec in result.get("records") or ():
            rec["perturbed"] = flags[split].get(rec["id"])
    return results


def _score_mc(split_examples: dict, scorer, accelerator, progress) -> dict:
    results = {}
    for split, examples in split_examples.items():
        scores = _predict_sharded(scorer.predict_mc, examples, accelerator, desc=split, progress=progress)
        for ex, s in zip(examples, scores):
            if len(s) != len(ex.options):
                raise AdvraceError(f"{model_name(scorer)}: {len(s)} scores for {ex.id}, which has "
                                   f"{len(ex.options)} options")
        normalised = None
        if getattr(scorer, "method", None) == LOGLIKELIHOOD and getattr(scorer, "contexts", None) is None:
            normalised = [argmax(per_character(s, ex.options)) for ex, s in zip(examples, scores)]
        results[split] = mc_split_result(examples, [argmax(s) for s in scores], scores, normalised)
    return results


def _score_qa(split_examples: dict, scorer, accelerator, progress) -> dict:
    """EM and F1 of a span model's best answer on each split of a SQuAD release."""
    results = {}
    for split, examples in split_examples.items():
        answers = _predict_sharded(scorer.predict_qa, examples, accelerator, desc=split, progress=progress)
        results[split] = qa_split_result(examples, answers)
    return results


def score_splits(split_examples: dict, scorer, accelerator=None, progress: bool = False, *,
                 task: str = MULTIPLE_CHOICE) -> dict:
    """`{split: result}` of a scorer (from `make_scorer`) on `{split: examples}`: accuracy and
    per-option scores for multiple choice, EM and F1 for extractive QA."""
    score = _score_mc if task == MULTIPLE_CHOICE else _score_qa
    return score(split_examples, scorer, accelerator, progress)


def _require_mc(release_dir, manifest) -> None:
    if manifest["task"] != MULTIPLE_CHOICE:
        raise ConfigError(f"{release_dir}: this function scores multiple-choice releases; this one "
                          f"is {manifest['task']}: use evaluate_command (or `advrace evaluate`), which "
                          "scores span models with EM and F1")


TASK_TEXT = {MULTIPLE_CHOICE: "the multiple-choice (RACE)", EXTRACTIVE_QA: "the extractive-QA (SQuAD)"}
FITTING = {MULTIPLE_CHOICE: "a multiple-choice checkpoint (`advrace train`, objective multiple_choice), "
                            "a causal language model (a folder, `smollm2` or a Hub name) or a built-in reader",
           EXTRACTIVE_QA: "a span-extraction checkpoint (`advrace train`, objective span_extraction) or a "
                          "causal language model (a folder, `smollm2` or a Hub name)"}


def _described(kind: str) -> str:
    entry = MODEL_KINDS.get(kind)
    return entry.description if entry else KIND_TEXT.get(kind, f"a model with a {kind.removeprefix('For')} head")


def check_fits(model, task: str, release, model_args: ModelArgs | None = None) -> str | None:
    """The kind of `model` (a name of advrace.models.kinds.MODEL_KINDS) when it can score a
    release of `task`; ConfigError (exit 2) naming what it is and what would fit when it cannot,
    so that no model is scored with a randomly initialised head. None: a scorer object, or a
    model whose config cannot be read here (loading says why).
    `model_args`: a Hub config is read at their revision, with their trust_remote_code."""
    if hasattr(model, "predict_mc") or hasattr(model, "predict_qa"):
        return None
    if is_builtin_reader(model):
        kind, arch = "reader", None
    else:
        kind, arch = checkpoint_kind(str(model), (model_args or ModelArgs()).config_kwargs())
    if kind is None or kind in kinds_for(task):
        return kind
    random_head = " (scoring it would put a randomly initialised head on it)" if kind not in ("unilm", "reader") else ""
    raise ConfigError(f"{model}: {arch or 'this model'} is {_described(kind)}, which cannot score {TASK_TEXT[task]} "
                      f"release {release}{random_head}; give {FITTING[task]}")


MODEL_ARGS_APPLY = ("model args (--model-args) set how a causal language model is loaded; they do not "
                    "apply to")


def check_model_args(model, kind: str | None, model_args: ModelArgs | None) -> None:
    """Refuse model args for a model they do not apply to (its kind does not honour them), so
    that no option silently goes unused: a scorer object, a built-in reader, a checkpoint that is
    not a causal LM (or whose config cannot be read to tell). `kind`: check_fits' answer. Then
    the checks that need no loading (ModelArgs.check_model)."""
    if not model_args:
        return
    if hasattr(model, "predict_mc") or hasattr(model, "predict_qa"):
        raise ConfigError(f"{MODEL_ARGS_APPLY} a scorer object ({model_name(model)}); leave them out")
    entry = MODEL_KINDS.get(kind) if kind else None
    if entry is None or "model_args" not in entry.honours:
        what = "a model whose config cannot be read here" if kind is None else _described(kind)
        raise ConfigError(f"{model}: {MODEL_ARGS_APPLY} {what}; score it in a run without --model-args")
    model_args.check_model(str(model), builtin=SMOLLM2)


def make_scorer(model, *, batch_size, max_length, bf16, accelerator, task=MULTIPLE_CHOICE, llm=None,
                kind: str | None = None, model_args: ModelArgs | None = None):
    """An object with `predict_mc` (multiple choice) or `predict_qa` (extractive QA) for `model`:
    the object itself, or its kind's scorer (advrace.models.kinds; a causal LM gets the keywords
    `llm` of CausalLMScorer: method, shots, ...). `kind`: the model's, when `check_fits` has
    already read it. `model_args`: how a causal LM is loaded (advrace.models.runtime.model_args);
    ConfigError for any other model."""
    if hasattr(model, "predict_mc" if task == MULTIPLE_CHOICE else "predict_qa"):
        check_model_args(model, None, model_args)
        return model
    if kind is None:
        kind = "reader" if is_builtin_reader(model) else \
            checkpoint_kind(str(model), (model_args or ModelArgs()).config_kwargs())[0]
    check_model_args(model, kind, model_args)
    if task != MULTIPLE_CHOICE and kind == "reader":
        raise ConfigError(f"{model}: the built-in readers answer multiple-choice questions only")
    # a config that cannot be read: the task's own checkpoint kind, whose loader says what is wrong
    entry = MODEL_KINDS.get(kind) or MODEL_KINDS["multiple_choice" if task == MULTIPLE_CHOICE else "span_extraction"]
    return entry.load(model, batch_size=batch_size, max_length=max_length, bf16=bf16, accelerator=accelerator,
                      model_args=model_args, llm=llm)


def make_accelerator():
    """This process's Accelerator (one process, or its rank under `accelerate launch`)."""
    from accelerate import Accelerator

    return Accelerator()


def score_release(release_dir, model, *, splits=None, batch_size: int = 16, max_length: int | None = None,
                  bf16: bool | None = None, accelerator=None, progress: bool = True,
                  manifest: dict | None = None, split_examples: dict | None = None) -> dict:
    """Score a model on each split of a multiple-choice release.

    `model`: a checkpoint folder, a Hub name, or an object with `predict_mc`. `max_length`: None
    takes the length the checkpoint was trained with when `advrace train` recorded it, else 512.
    `bf16`: None uses bf16 autocast where the device computes in bf16 natively, True always,
    False never.
    `manifest` (the release's, already checked) and `split_examples` (`{split: examples}` already
    read from it) let a caller scoring several models check and read the release once; when
    None, the release is checked and the splits read here (so is a split the dict lacks).
    Returns `{split: {"accuracy": percent, "n": int, "records": [{id, source_id, prediction,
    label, correct, scores, perturbed}]}}` on every process (`perturbed`: the release record's flag).
    """
    manifest = manifest or check_release(release_dir)
    _require_mc(release_dir, manifest)
    names = select_splits(manifest, splits)
    if accelerator is None and not hasattr(model, "predict_mc"):
        accelerator = make_accelerator()
    scorer = make_scorer(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                         accelerator=accelerator)
    show = progress and (accelerator is None or accelerator.is_main_process)
    given = split_examples or {}
    examples = {s: given[s] if s in given else read_split(release_dir, s) for s in names}
    return mark_perturbed(score_splits(examples, scorer, accelerator, show), release_dir)


def hub_commit(name: str, revision: str | None = None, file: str = "config.json") -> str | None:
    """The commit of a Hub model that loading read, from the Hugging Face cache (its snapshot
    folder is named by it), as lm-evaluation-harness records `model_sha`; None when not cached."""
    try:
        from huggingface_hub import try_to_load_from_cache  # deferred for start-up time

        found = try_to_load_from_cache(name, file, revision=revision)
    except Exception:  # noqa: BLE001 - a name the cache cannot hold (not a repo id): no commit known
        return None
    return Path(found).parent.name if isinstance(found, str) else None


def scored_identity(model, model_args: ModelArgs | None = None) -> dict:
    """What was scored, so that two reports of the same name can be told apart (`advrace compare`):
    a folder by its name and the sha256 of all its files (a retrained `runs/x/final` differs), with
    the model `advrace train` fine-tuned it from; `smollm2` by the sha256 of its GGUF file; a Hub
    name by the commit its cache holds; a built-in reader by its name (and its encoder's digest);
    a scorer object by its name alone (nothing to hash)."""
    if hasattr(model, "predict_mc") or hasattr(model, "predict_qa"):
        return {"name": model_name(model)}
    name = str(model)
    if is_builtin_reader(name):
        encoder = name.partition(":")[2] or (MINILM if name.startswith("similarity") else None)
        folder = resolve_model(encoder) if encoder else None
        return {"name": name, **({"encoder": checkpoint_name(encoder), "encoder_sha256": checkpoint_sha256(folder)}
                                 if folder and Path(folder).is_dir() else {})}
    if name == SMOLLM2:
        gguf = smollm2_gguf()
        return {"name": name, "file": gguf.name, "sha256": sha256_file(gguf)}
    args = model_args or ModelArgs()
    # an adapter or another tokenizer changes the scores as much as the weights do
    parts = {key: _part_identity(getattr(args, key), file) for key, file in
             (("peft", "adapter_config.json"), ("tokenizer", "tokenizer_config.json")) if getattr(args, key)}
    if Path(name).expanduser().is_dir():
        base = trained_from(name)
        return {"name": checkpoint_name(name), "sha256": checkpoint_sha256(Path(name).expanduser()),
                **({"trained_from": base} if base else {}), **parts}
    revision = args.revision
    return {"name": name, "commit": hub_commit(name, revision), **({"revision": revision} if revision else {}),
            **parts}


def _part_identity(name: str, file: str) -> dict:
    """A tokenizer's or adapter's folder by its files' sha256, a Hub name by its cached commit."""
    if Path(name).expanduser().is_dir():
        return {"name": checkpoint_name(name), "sha256": checkpoint_sha256(Path(name).expanduser())}
    return {"name": name, "commit": hub_commit(name, None, file)}
