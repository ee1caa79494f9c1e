"""One Accelerate training loop for one CPU, one GPU, or `accelerate launch` on many.

Everything that decides the weights is a function of the config: the data order of an epoch
comes from (seed, epoch), dropout from the RNG states saved in each checkpoint, and the
learning-rate schedule always spans `epochs` (`max_steps` only stops a run early). So a run
stopped at any checkpoint and continued with `resume=True` ends with the same weights and the
same log.jsonl as a run that was never stopped, and a capped run is a prefix of the full one.

`prepare` makes everything a run needs (accelerator, data, model, optimiser, loaders, the state
to start from) into one frozen PreparedRun; the loop changes only its Progress.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import math
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import yaml

from advrace import __version__
from advrace.core.atomic import write_text_atomically
from advrace.core.checking import config_dict
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample, examples_sha256
from advrace.core.text import plural
from advrace.models.runtime.feature_store import FeatureStore, default_cache_dir
from advrace.models.runtime.loading import from_pretrained, model_source, transformers_quiet
from advrace.models.runtime.precision import fp32_load_kwargs, warn_if_emulated
from advrace.release import FORMAT_VERSION

from . import checkpoints
from .checkpoints import TrainerState
from .config import TrainConfig, as_config, check_paths, unread_plan_keys
from .data import eval_loader, load_examples, train_loader
from .objectives import get_objective
from .recipes import build_train_set, check_attacks, eval_view

LOG_FILE = "log.jsonl"


def train(config, output_dir: str | Path | None = None, resume: bool = False,
          progress: bool = True) -> dict:
    """Train the config's objective (a TrainConfig, mapping or YAML path) as it says.

    Writes OUTPUT/best (best dev score over epoch ends), OUTPUT/final, OUTPUT/log.jsonl,
    OUTPUT/metrics.json and OUTPUT/checkpoints/step-N; returns their paths and the final metrics.
    `resume=True` continues from the latest checkpoint (or starts afresh when there is none).
    """
    cfg = as_config(config)
    check_paths(cfg)
    out = Path(output_dir or cfg.output_dir or Path("runs") / cfg.name)
    if cfg.recipe.kind == "adversarial":
        check_attacks(cfg.recipe)
    started = time.time()
    try:
        return _Training(prepare(cfg, out, resume, progress), started)()
    finally:
        _reset_accelerate()


def _reset_accelerate() -> None:
    """Let the next train() in this process choose its own precision and accumulation."""
    from accelerate.state import AcceleratorState, GradientState

    AcceleratorState._reset_state()
    GradientState._reset_state()


def no_decay_names(model: torch.nn.Module) -> set[str]:
    """Biases and normalisation weights, which AdamW should not decay."""
    names = set()
    for mod_name, module in model.named_modules():
        is_norm = isinstance(module, torch.nn.LayerNorm) or type(module).__name__.endswith("Norm")
        for p_name, _ in module.named_parameters(recurse=False):
            full = f"{mod_name}.{p_name}" if mod_name else p_name
            if is_norm or p_name == "bias":
                names.add(full)
    return names


def warmup_then_decay(optimizer, warmup: int, total: int, processes: int = 1):
    """Linear warm-up to the configured lr, then linear decay, over `total` optimiser steps.

    Step n (counting from 1) runs at n / w of the peak for n <= w = max(warmup, 1), so the peak
    comes at the last warm-up step, then falls by 1 / (total - w + 1) of it a step, to 0 after
    the last. transformers' get_linear_schedule_with_warmup runs its first step at lr 0, a step
    wasted. Accelerate steps a prepared scheduler once per process for each optimiser step,
    hence `processes`.
    """
    peak = max(warmup, 1)

    def factor(count: int) -> float:
        done = count // processes
        if done < peak:
            return (done + 1) / peak
        return max(0.0, (total - done) / max(1, total - peak + 1))

    return torch.optim.lr_scheduler.LambdaLR(optimizer, factor)


def _flat(d: dict, prefix: str = "") -> dict:
    flat = {}
    for k, v in d.items():
        key = f"{prefix}{k}"
        if isinstance(v, dict):
            flat.update(_flat(v, key + "."))
        elif isinstance(v, (int, float, str, bool)):
            flat[key] = v
        else:
            flat[key] = json.dumps(v, default=str)
    return flat


@dataclass(frozen=True)
class TrainingData:
    """The recipe's training set and the dev set, encoded."""

    train_features: Any  # a list, or a FeatureTable of the feature cache
    train_questions: int  # questions of the training set, the recipe's copies included
    dev_features: Any
    dev_examples: list  # as the recipe's model sees them (see recipes.eval_view)
    report: dict  # how the recipe made the training set: OUTPUT/data/train_set.json
    encoded_now: int  # feature tables this run encoded (0: all read from the cache)


@dataclass(frozen=True)
class Schedule:
    """Optimiser steps of an epoch and of the run; the lr schedule spans every epoch (`total`),
    and `limit` (max_steps) only stops the run early."""

    batches: int  # of an epoch, on each process
    steps_per_epoch: int
    total: int
    limit: int


@dataclass(frozen=True)
class PreparedRun:
    """What a run was prepared with. None of it is replaced while the run trains (the model's
    weights and the optimiser's state change inside their objects); what does change is in
    `Progress`."""

    cfg: TrainConfig
    out: Path
    show_progress: bool  # train()'s `progress`: bars and messages, on the main process
    accelerator: Any
    objective: Any
    tokenizer: Any
    data: TrainingData
    schedule: Schedule
    # as accelerate prepared them
    model: Any
    optimizer: Any
    scheduler: Any
    train_dl: Any
    sampler: Any  # the training loader's BucketBatchSampler, told each epoch
    dev_dl: Any  # None without dev features
    checkpoint: Path | None  # the checkpoint the run resumed from
    start: TrainerState  # where training starts: the checkpoint's state, or a fresh one

    @property
    def loud(self) -> bool:
        """Whether this process shows bars and messages."""
        return self.show_progress and self.accelerator.is_main_process

    @property
    def tracking(self) -> bool:
        return bool(self.accelerator.log_with)

    @property
    def resumed_from(self) -> int | None:
        return self.start.step if self.checkpoint is not None else None


@dataclass
class Progress:
    """What changes as the run trains: the trainer state that checkpoints save, and what only
    this session of the run keeps."""

    state: TrainerState
    started: float  # time.time() when train() was called
    saved_at: int  # the step of the last checkpoint written or resumed from; -1: none
    first_step_seconds: float | None = None
    train_loss: float | None = None  # of the last train record
    last_eval: dict | None = None  # the last eval record


# ---------------------------------------------------------------- preparation


def prepare(cfg: TrainConfig, out: Path, resume: bool, show_progress: bool) -> PreparedRun:
    """Everything a run needs before its first step. The order matters for runs to repeat: the
    seed is set before the model is built, and a checkpoint is restored into what accelerate has
    prepared."""
    from accelerate.utils import set_seed

    acc = _accelerator(cfg, out)
    loud = show_progress and acc.is_main_process
    objective = get_objective(cfg)
    found, saved = _checkpoint_to_resume(cfg, out, resume, acc.num_processes, loud)
    if acc.is_main_process:
        out.mkdir(parents=True, exist_ok=True)
    acc.wait_for_everyone()
    set_seed(cfg.seed)
    model_path, load_kwargs = model_source(cfg.model) if cfg.model_config is None else ("", {})
    with transformers_quiet(not show_progress, logs=True):
        tokenizer = _tokenizer(cfg, model_path, load_kwargs)
        data = _data(cfg, acc, objective, tokenizer, out, loud)
        model = _model(cfg, objective, model_path, load_kwargs, quiet=not loud)
    optimizer = _optimizer(cfg, model)
    train_dl, sampler, dev_dl = _loaders(cfg, objective, tokenizer, data)
    schedule = _schedule(cfg, len(sampler), acc.num_processes)
    scheduler = warmup_then_decay(optimizer, math.ceil(cfg.warmup_ratio * schedule.total), schedule.total,
                                  acc.num_processes)
    model, optimizer, train_dl, scheduler, dev_dl = _accelerated(acc, model, optimizer, train_dl, scheduler,
                                                                 dev_dl)
    assert len(train_dl) == schedule.batches, (len(train_dl), schedule.batches)
    run = PreparedRun(cfg=cfg, out=out, show_progress=show_progress, accelerator=acc, objective=objective,
                      tokenizer=tokenizer, data=data, schedule=schedule, model=model, optimizer=optimizer,
                      scheduler=scheduler, train_dl=train_dl, sampler=sampler, dev_dl=dev_dl,
                      checkpoint=found, start=_start_state(cfg, acc, found, saved, loud))
    _truncate_log(run)
    _write_run_files(run)
    if run.tracking:
        acc.init_trackers("tensorboard", config=_flat(cfg.to_dict()))
    _say(loud, f"{plural(data.train_questions, 'training question')} ({data.report['added']:,} added by "
               f"the recipe), {plural(len(data.dev_examples), 'dev question')}; {plural(schedule.total, 'step')} "
               f"planned ({schedule.steps_per_epoch:,} per epoch), stopping at {schedule.limit:,}")
    return run


def _say(loud: bool, message: str) -> None:
    if loud:
        from tqdm.auto import tqdm

        tqdm.write(message, file=sys.stderr)


def _accelerator(cfg: TrainConfig, out: Path):
    from accelerate import Accelerator

    tracker = None
    if cfg.tensorboard and (importlib.util.find_spec("tensorboard") or importlib.util.find_spec("tensorboardX")):
        tracker = "tensorboard"
    try:
        accelerator = Accelerator(gradient_accumulation_steps=cfg.gradient_accumulation_steps,
                                  mixed_precision=cfg.mixed_precision, log_with=tracker,
                                  project_dir=str(out) if tracker else None)
    except ValueError as exc:
        raise ConfigError(f"mixed_precision {cfg.mixed_precision!r}: {exc}") from None
    warn_if_emulated(accelerator.device, cfg.mixed_precision == "bf16", "set mixed_precision: no to train in fp32")
    return accelerator


def _checkpoint_to_resume(cfg: TrainConfig, out: Path, resume: bool, processes: int,
                          loud: bool) -> tuple[Path | None, TrainerState | None]:
    """The checkpoint to resume from and its trainer state (read once, here), or (None, None);
    refused unless it was written in today's layout, with the same settings and by as many
    processes (`processes`), before anything is loaded or prepared."""
    found = checkpoints.latest(out)
    if found is None:
        if resume:
            _say(loud, f"no checkpoint in {out}; starting from scratch")
        return None, None
    if not resume:
        raise ConfigError(f"{out} already holds checkpoints of a run; pass --resume to "
                          "continue it, or choose another --output-dir")
    state = checkpoints.read_state(found)
    saved = state.plan
    unread = unread_plan_keys(saved)
    if unread:
        raise ConfigError(f"{found} records its run's settings in a layout this version of advrace "
                          f"does not read ({', '.join(unread)} at the top of the plan in "
                          f"{checkpoints.STATE_FILE}); retrain in another --output-dir, or upgrade "
                          "the checkpoint by hand: move the objective's own settings into a section "
                          "named after it (e.g. plan.span_extraction.doc_stride) and delete the rest")
    plan = cfg.plan()
    if saved != plan:
        keys = sorted(k for k in set(plan) | set(saved) if plan.get(k) != saved.get(k))
        raise ConfigError(f"{found} was written by a run with different settings "
                          f"({', '.join(keys)}); resume with the same config, or choose "
                          "another --output-dir")
    if state.processes != processes:
        raise ConfigError(f"{found} was written by {state.processes} process(es); resume "
                          f"with the same number (now {processes}), since each "
                          "process's place in the data is saved")
    return found, state


def _tokenizer(cfg: TrainConfig, model_path: str, load_kwargs: dict):
    from transformers import AutoTokenizer

    name = cfg.tokenizer or model_path
    try:
        return AutoTokenizer.from_pretrained(name, **({} if cfg.tokenizer else load_kwargs))
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the tokenizer {name!r} ({exc}); give a local folder, or "
                          "use `model: minilm` offline") from None


def _model(cfg: TrainConfig, objective, model_path: str, load_kwargs: dict, quiet: bool):
    from accelerate.utils import set_seed
    from transformers import AutoConfig

    try:
        if cfg.model_config is not None:
            values = dict(cfg.model_config)
            config = AutoConfig.for_model(values.pop("model_type"), **values)
        else:
            config = AutoConfig.from_pretrained(model_path, **load_kwargs)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"cannot load the model config of {model_path!r} ({exc}); give a local "
                          "folder, or use `model: minilm` offline") from None
    for key, value in cfg.model_overrides.items():
        if not hasattr(config, key):
            raise ConfigError(f"model_overrides: {type(config).__name__} has no setting {key!r}")
        setattr(config, key, value)
    set_seed(cfg.seed)
    cls = objective.model_class()
    if cfg.model_config is not None:
        return cls.from_config(config) if hasattr(cls, "from_config") else cls._from_config(config)
    # fp32 master weights, whatever the checkpoint was saved in; autocast picks the compute precision
    return from_pretrained(cls, model_path, config=config, quiet=quiet, **load_kwargs, **fp32_load_kwargs())


def _cache_dir(cfg: TrainConfig) -> Path | None:
    if cfg.feature_cache is False:
        return None
    return default_cache_dir() if cfg.feature_cache is True else Path(cfg.feature_cache)


def _data(cfg: TrainConfig, acc, objective, tokenizer, out: Path, loud: bool) -> TrainingData:
    cache_dir = _cache_dir(cfg)
    train_raw = load_examples(cfg.train, "train", objective.tasks)
    dev_raw = eval_view(cfg.recipe, load_examples(cfg.dev, "validation", objective.tasks)) if cfg.dev else []
    train_examples, report = _train_examples(cfg, acc, out, cache_dir, train_raw, loud)
    store = FeatureStore(cache_dir, workers=cfg.encode_workers, progress=loud)
    train_features, dev_features = _features(cfg, acc, objective, tokenizer, store, train_examples,
                                             len(train_raw), dev_raw)
    if not train_features:
        raise ConfigError(f"{cfg.train.describe()}: nothing to train on for objective {objective.name!r}")
    return TrainingData(train_features=train_features, train_questions=len(train_examples),
                        dev_features=dev_features, dev_examples=dev_raw, report=report,
                        encoded_now=len(store.built))


def _train_examples(cfg: TrainConfig, acc, out: Path, cache_dir: Path | None, examples: list,
                    loud: bool) -> tuple[list, dict]:
    """The recipe's training set; adversarial copies are made once (by the main process) and
    kept in OUTPUT/data, and in the feature cache, so that other processes, resumed runs and
    later runs of the same recipe on the same data read them instead."""
    seed = cfg.data_seed
    if cfg.recipe.kind != "adversarial":
        return build_train_set(cfg.recipe, examples, seed)
    recipe = config_dict(cfg.recipe)
    recipe.pop("workers")
    h = hashlib.sha256(json.dumps({"recipe": recipe, "seed": seed, "advrace": __version__,
                                   "format": FORMAT_VERSION, "examples": examples_sha256(examples)},
                                  sort_keys=True, default=str).encode())
    name = f"adversarial-{h.hexdigest()[:16]}.json"
    record = out / "data" / name
    shared = cache_dir / "adversarial" / name if cache_dir else None
    with acc.main_process_first():
        for found in (record, shared):
            if found is not None and found.is_file():
                saved = json.loads(found.read_text(encoding="utf-8"))
                if found is shared and acc.is_main_process:
                    write_text_atomically(record, found.read_text(encoding="utf-8"))
                added = [MCExample.from_record(r) for r in saved["added"]]
                return list(examples) + added, saved["report"]
        if not acc.is_main_process:
            raise RuntimeError(f"{record} was not written by the main process")
        _say(loud, f"attacking the training set ({cfg.recipe.mode}: "
                   f"{', '.join(s.split for s in cfg.recipe.attacks)})")
        train, report = build_train_set(cfg.recipe, examples, seed, progress=loud)
        text = json.dumps({"report": report, "added": [e.to_record() for e in train[len(examples):]]},
                          ensure_ascii=False)
        for path in (record, shared):
            if path is not None:
                write_text_atomically(path, text)
        return train, report


def _features(cfg: TrainConfig, acc, objective, tokenizer, store: FeatureStore, train: list, original: int,
              dev: list) -> tuple:
    """Training and dev features, encoded once into the feature cache by the main process
    (the others wait, then map the same files); the original questions and the copies a
    recipe adds are cached apart, so another recipe re-encodes only its copies."""
    parts = [train[:original], train[original:]] if cfg.recipe.kind == "adversarial" else [train]
    with acc.main_process_first():
        train_features = objective.encoded(store, tokenizer, parts, cfg.data_seed, what="the training set")
        dev_features = (objective.encoded(store, tokenizer, [dev], cfg.data_seed, dev=True, what="the dev set")
                        if dev else [])
    return train_features, dev_features


def _optimizer(cfg: TrainConfig, model):
    skip = no_decay_names(model)
    params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
    groups = [{"params": [p for n, p in params if n not in skip], "weight_decay": cfg.weight_decay},
              {"params": [p for n, p in params if n in skip], "weight_decay": 0.0}]
    return torch.optim.AdamW(groups, lr=cfg.lr)


def _loaders(cfg: TrainConfig, objective, tokenizer, data: TrainingData) -> tuple:
    """The training loader and its sampler, and the dev loader (None without dev features)."""
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    train_dl, sampler = train_loader(data.train_features, cfg.batch_size, cfg.seed, pad,
                                     collate_fn=objective.collate)
    dev_dl = (eval_loader(data.dev_features, cfg.eval_batch_size or cfg.batch_size, pad,
                          collate_fn=objective.collate) if data.dev_features else None)
    return train_dl, sampler, dev_dl


def _schedule(cfg: TrainConfig, batches: int, processes: int) -> Schedule:
    """`batches` of an epoch shared by `processes`, `gradient_accumulation_steps` to a step."""
    mine = math.ceil(batches / processes)
    steps = math.ceil(mine / cfg.gradient_accumulation_steps)
    total = cfg.epochs * steps
    return Schedule(batches=mine, steps_per_epoch=steps, total=total, limit=min(total, cfg.max_steps or total))


def _accelerated(acc, model, optimizer, train_dl, scheduler, dev_dl) -> tuple:
    """The same objects as accelerate prepares them, for its devices, precision and processes."""
    parts = acc.prepare(model, optimizer, train_dl, scheduler, *([dev_dl] if dev_dl is not None else []))
    return (*parts[:4], parts[4] if dev_dl is not None else None)


def _start_state(cfg: TrainConfig, acc, found: Path | None, state: TrainerState | None,
                 loud: bool) -> TrainerState:
    """A fresh trainer state, or the checkpoint's (`state`, as _checkpoint_to_resume read and
    checked it), restored with the weights, optimiser, scheduler and RNG states it saved."""
    if found is None:
        return TrainerState(processes=acc.num_processes, plan=cfg.plan())
    checkpoints.restore(acc, found)
    _say(loud, f"resuming from {found} (step {state.step}, epoch {state.epoch + 1}, batch {state.batch})")
    return state


def _truncate_log(run: PreparedRun) -> None:
    """Drop what a stopped run logged after the checkpoint it resumes from."""
    if run.accelerator.is_main_process:
        path = run.out / LOG_FILE
        lines = path.read_text(encoding="utf-8").splitlines(True) if path.is_file() else []
        path.write_text("".join(lines[:run.start.log_lines]), encoding="utf-8")


def _write_run_files(run: PreparedRun) -> None:
    """OUTPUT/config.yaml and OUTPUT/data/train_set.json."""
    if run.accelerator.is_main_process:
        (run.out / "config.yaml").write_text(yaml.safe_dump(run.cfg.to_dict(), sort_keys=False),
                                             encoding="utf-8")
        (run.out / "data").mkdir(exist_ok=True)
        (run.out / "data" / "train_set.json").write_text(
            json.dumps({**run.data.report, "train_questions": run.data.train_questions,
                        "dev_questions": len(run.data.dev_examples)}, indent=2) + "\n", encoding="utf-8")


# ---------------------------------------------------------------- the loop


class _Training:
    """The loop over a prepared run: `run` stays as prepared, `progress` is what moves."""

    def __init__(self, run: PreparedRun, started: float):
        self.run = run
        self.progress = Progress(state=copy.deepcopy(run.start), started=started,
                                 saved_at=-1 if run.resumed_from is None else run.resumed_from)

    def __call__(self) -> dict:
        """Train to the step limit, then finish: the run's paths and metrics (also OUTPUT/metrics.json)."""
        self._train()
        result = self._finish()
        result["metrics"]["seconds"] = round(time.time() - self.progress.started, 2)
        if self.run.accelerator.is_main_process:
            (self.run.out / "metrics.json").write_text(json.dumps(result["metrics"], indent=2) + "\n",
                                                       encoding="utf-8")
        return result

    def say(self, message: str) -> None:
        _say(self.run.loud, message)

    def log(self, record: dict) -> None:
        run = self.run
        if run.accelerator.is_main_process:
            with open(run.out / LOG_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            if run.tracking:
                values = {k: v for k, v in record.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
                prefix = "train/" if record["event"] == "train" else "dev/"
                run.accelerator.log({prefix + k: v for k, v in values.items()}, step=record["step"])
        self.progress.state.log_lines += 1

    def evaluate(self) -> dict:
        run = self.run
        run.model.eval()
        result = run.objective.evaluate(run.model, run.dev_dl, run.accelerator, run.data.dev_features,
                                        run.data.dev_examples)
        run.model.train()
        return result

    def save_checkpoint(self) -> None:
        state = self.progress.state
        checkpoints.save(self.run.accelerator, self.run.out, state, self.run.cfg.keep_checkpoints)
        self.progress.saved_at = state.step

    def save_model(self, name: str, **info) -> None:
        run = self.run
        with transformers_quiet(logs=True):
            checkpoints.save_model(run.accelerator, run.model, run.tokenizer, run.out / name,
                                   {"config": run.cfg.to_dict(), "step": self.progress.state.step,
                                    "objective": run.objective.name,
                                    "architecture": run.objective.architecture, **info})

    def _log_loss(self, epoch: int) -> None:
        """One train record for the steps since the last; their losses are kept in the state
        until then, so an interval cut by a checkpoint ends the same after a resume."""
        state = self.progress.state
        loss = sum(state.pending_losses) / len(state.pending_losses)
        state.pending_losses = []
        self.progress.train_loss = loss
        self.log({"event": "train", "step": state.step,
                  "epoch": round(epoch + state.batch / len(self.run.train_dl), 4),
                  "loss": loss, "lr": state.lr})

    def _end_epoch(self, epoch: int) -> None:
        run, state = self.run, self.progress.state
        if run.dev_dl is not None:
            metric = run.objective.metric
            result = self.evaluate()
            better = state.best is None or result[metric] > state.best[metric]
            self.progress.last_eval = {"event": "eval", "step": state.step, "epoch": epoch + 1, **result,
                                       "best": better}
            self.log(self.progress.last_eval)
            self.say(f"epoch {epoch + 1}: {run.objective.label} {result[metric]:.4f} on "
                     f"{plural(len(run.data.dev_examples), 'question')}" + (" (best so far)" if better else ""))
            if better:
                state.best = {"step": state.step, "epoch": epoch + 1, metric: result[metric]}
                self.save_model("best", best=state.best)
        state.epoch, state.batch = epoch + 1, 0
        self.save_checkpoint()

    def _train(self) -> None:
        from tqdm.auto import tqdm

        run, progress, state = self.run, self.progress, self.progress.state
        cfg, acc, model, optimizer, scheduler = run.cfg, run.accelerator, run.model, run.optimizer, run.scheduler
        n_batches, limit = len(run.train_dl), run.schedule.limit
        bar = tqdm(total=limit, initial=state.step, desc=cfg.name, unit="step", dynamic_ncols=True,
                   disable=not run.loud)
        step_loss = torch.zeros((), device=acc.device)
        micro = 0
        model.train()
        while state.epoch < cfg.epochs and state.step < limit:
            epoch = state.epoch
            run.sampler.select_epoch(epoch)
            loader = acc.skip_first_batches(run.train_dl, state.batch) if state.batch else run.train_dl
            for batch in loader:
                with acc.accumulate(model):
                    loss = model(**batch).loss
                    acc.backward(loss)
                    state.lr = optimizer.param_groups[0]["lr"]
                    if acc.sync_gradients and cfg.max_grad_norm:
                        acc.clip_grad_norm_(model.parameters(), cfg.max_grad_norm)
                    optimizer.step()
                    scheduler.step()
                    optimizer.zero_grad()
                step_loss += loss.detach().float()
                micro += 1
                state.batch += 1
                if not acc.sync_gradients:
                    continue
                state.step += 1
                if progress.first_step_seconds is None:
                    progress.first_step_seconds = round(time.time() - progress.started, 2)
                state.pending_losses.append(acc.reduce(step_loss / micro, "mean").item())
                step_loss.zero_()
                micro = 0
                bar.update(1)
                end_of_epoch = state.batch == n_batches
                if state.step % cfg.log_every_steps == 0 or end_of_epoch:
                    self._log_loss(epoch)
                    bar.set_postfix(loss=f"{progress.train_loss:.4f}", lr=f"{state.lr:.2e}")
                if end_of_epoch:
                    continue  # handled below, once the loader has finished
                if state.step >= limit:
                    break
                if cfg.save_every_steps and state.step % cfg.save_every_steps == 0:
                    self.save_checkpoint()
            if state.batch < n_batches:
                break
            self._end_epoch(epoch)
        bar.close()

    def _finish(self) -> dict:
        """Checkpoint where the run stopped, then evaluate and save the final model; what is
        logged after that checkpoint is dropped again if the run is resumed from it."""
        run, progress, state = self.run, self.progress, self.progress.state
        metric = run.objective.metric
        if progress.saved_at != state.step:
            self.save_checkpoint()
        if state.pending_losses:
            self._log_loss(state.epoch)
        final = {"event": "final", "step": state.step,
                 "epoch": round(state.epoch + state.batch / len(run.train_dl), 4)}
        best_path = None
        if run.dev_dl is not None:
            if progress.last_eval is not None and progress.last_eval["step"] == state.step:
                result = {k: v for k, v in progress.last_eval.items() if k not in ("event", "step", "epoch", "best")}
            else:
                result = self.evaluate()
            final.update(result)
            if state.best is None:
                # no epoch finished: the final model is the only one evaluated
                self.save_model("best", best={"step": state.step, **result})
            best = state.best or {"step": state.step, metric: result[metric]}
            final.update({f"best_{metric}": best[metric], "best_step": best["step"]})
            best_path = str(run.out / "best")
        self.log(final)
        self.save_model("final")
        if run.tracking:
            run.accelerator.end_training()
        data, schedule = run.data, run.schedule
        metrics = {**{k: v for k, v in final.items() if k != "event"},
                   "objective": run.objective.name, "metric": metric,
                   "train_loss": progress.train_loss, "train_questions": data.train_questions,
                   "train_features": len(data.train_features), "added_questions": data.report["added"],
                   "planned_steps": schedule.total, "steps_per_epoch": schedule.steps_per_epoch,
                   "resumed_from": run.resumed_from, "processes": run.accelerator.num_processes,
                   "first_step_seconds": progress.first_step_seconds, "feature_tables_built": data.encoded_now}
        return {"output_dir": str(run.out), "best": best_path, "final": str(run.out / "final"),
                "log": str(run.out / LOG_FILE), "metrics": metrics, "data": data.report}
