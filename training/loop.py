"""One Accelerate training loop for one CPU, one GPU, or `accelerate launch` on many.

Everything that decides the weights is a function of the config: the data order of an epoch
comes from (seed, epoch), dropout from the RNG states saved in each checkpoint, and the
learning-rate schedule always spans `epochs` (`max_steps` only stops a run early). So a run
stopped at any checkpoint and continued with `resume=True` ends with the same weights and the
same log.jsonl as a run that was never stopped, and a capped run is a prefix of the full one.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import sys
import time
from pathlib import Path

import torch
import yaml

from advrace import __version__
from advrace.core.atomic import write_text_atomically
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample, examples_sha256
from advrace.core.text import plural
from advrace.models.feature_store import FeatureStore, default_cache_dir
from advrace.models.loading import from_pretrained, model_source, transformers_quiet
from advrace.models.precision import fp32_load_kwargs, warn_if_emulated

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
    try:
        return _Run(cfg, out, resume, progress).run()
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


class _Run:
    def __init__(self, cfg: TrainConfig, out: Path, resume: bool, progress: bool):
        self.cfg = cfg
        self.out = out
        self.resume = resume
        self.progress = progress

    # ---------------------------------------------------------------- set-up

    def say(self, message: str) -> None:
        if self.progress and self.accelerator.is_main_process:
            from tqdm.auto import tqdm

            tqdm.write(message, file=sys.stderr)

    def _accelerator(self):
        from accelerate import Accelerator

        tracker = None
        if self.cfg.tensorboard and (importlib.util.find_spec("tensorboard")
                                     or importlib.util.find_spec("tensorboardX")):
            tracker = "tensorboard"
        try:
            accelerator = Accelerator(gradient_accumulation_steps=self.cfg.gradient_accumulation_steps,
                                      mixed_precision=self.cfg.mixed_precision, log_with=tracker,
                                      project_dir=str(self.out) if tracker else None)
        except ValueError as exc:
            raise ConfigError(f"mixed_precision {self.cfg.mixed_precision!r}: {exc}") from None
        warn_if_emulated(accelerator.device, self.cfg.mixed_precision == "bf16",
                         "set mixed_precision: no to train in fp32")
        return accelerator

    def _checkpoint_to_resume(self) -> Path | None:
        found = checkpoints.latest(self.out)
        if found is None:
            if self.resume:
                self.say(f"no checkpoint in {self.out}; starting from scratch")
            return None
        if not self.resume:
            raise ConfigError(f"{self.out} already holds checkpoints of a run; pass --resume to "
                              "continue it, or choose another --output-dir")
        saved = checkpoints.read_state(found).plan
        unread = unread_plan_keys(saved)
        if unread:
            raise ConfigError(f"{found} records its run's settings in a layout this version of advrace "
                              f"does not read ({', '.join(unread)} at the top of the plan in "
                              f"{checkpoints.STATE_FILE}); retrain in another --output-dir, or upgrade "
                              "the checkpoint by hand: move the objective's own settings into a section "
                              "named after it (e.g. plan.span_extraction.doc_stride) and delete the rest")
        plan = self.cfg.plan()
        if saved != plan:
            keys = sorted(k for k in set(plan) | set(saved) if plan.get(k) != saved.get(k))
            raise ConfigError(f"{found} was written by a run with different settings "
                              f"({', '.join(keys)}); resume with the same config, or choose "
                              "another --output-dir")
        return found

    def _tokenizer(self, model_path: str):
        from transformers import AutoTokenizer

        name = self.cfg.tokenizer or model_path
        try:
            return AutoTokenizer.from_pretrained(name, **({} if self.cfg.tokenizer else self.load_kwargs))
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load the tokenizer {name!r} ({exc}); give a local folder, or "
                              "use `model: minilm` offline") from None

    def _model(self, model_path: str):
        from transformers import AutoConfig

        cfg = self.cfg
        try:
            if cfg.model_config is not None:
                values = dict(cfg.model_config)
                config = AutoConfig.for_model(values.pop("model_type"), **values)
            else:
                config = AutoConfig.from_pretrained(model_path, **self.load_kwargs)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"cannot load the model config of {model_path!r} ({exc}); give a local "
                              "folder, or use `model: minilm` offline") from None
        for key, value in cfg.model_overrides.items():
            if not hasattr(config, key):
                raise ConfigError(f"model_overrides: {type(config).__name__} has no setting {key!r}")
            setattr(config, key, value)
        from accelerate.utils import set_seed

        set_seed(cfg.seed)
        cls = self.objective.model_class()
        if cfg.model_config is not None:
            return cls.from_config(config) if hasattr(cls, "from_config") else cls._from_config(config)
        # fp32 master weights, whatever the checkpoint was saved in; autocast picks the compute precision
        return from_pretrained(cls, model_path, config=config,
                               quiet=not (self.progress and self.accelerator.is_main_process),
                               **self.load_kwargs, **fp32_load_kwargs())

    def _train_examples(self, examples: list) -> tuple[list, dict]:
        """The recipe's training set; adversarial copies are made once (by the main process) and
        kept in OUTPUT/data, and in the feature cache, so that other processes, resumed runs and
        later runs of the same recipe on the same data read them instead."""
        cfg, acc = self.cfg, self.accelerator
        seed = cfg.data_seed
        if cfg.recipe.kind != "adversarial":
            return build_train_set(cfg.recipe, examples, seed)
        recipe = cfg.recipe.to_dict()
        recipe.pop("workers")
        h = hashlib.sha256(json.dumps({"recipe": recipe, "seed": seed, "advrace": __version__,
                                       "examples": examples_sha256(examples)},
                                      sort_keys=True, default=str).encode())
        name = f"adversarial-{h.hexdigest()[:16]}.json"
        record = self.out / "data" / name
        shared = self.cache_dir / "adversarial" / name if self.cache_dir else None
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
            self.say(f"attacking the training set ({cfg.recipe.mode}: "
                     f"{', '.join(s.split for s in cfg.recipe.attacks)})")
            train, report = build_train_set(cfg.recipe, examples, seed, progress=self.progress)
            text = json.dumps({"report": report, "added": [e.to_record() for e in train[len(examples):]]},
                              ensure_ascii=False)
            for path in (record, shared):
                if path is not None:
                    write_text_atomically(path, text)
            return train, report

    def _features(self, train: list, original: int, dev: list) -> tuple:
        """Training and dev features, encoded once into the feature cache by the main process
        (the others wait, then map the same files); the original questions and the copies a
        recipe adds are cached apart, so another recipe re-encodes only its copies."""
        cfg, acc, objective = self.cfg, self.accelerator, self.objective
        store = FeatureStore(self.cache_dir, workers=cfg.encode_workers,
                             progress=self.progress and acc.is_main_process)
        parts = [train[:original], train[original:]] if cfg.recipe.kind == "adversarial" else [train]
        with acc.main_process_first():
            train_features = objective.encoded(store, self.tokenizer, parts, cfg.data_seed,
                                               what="the training set")
            dev_features = (objective.encoded(store, self.tokenizer, [dev], cfg.data_seed, dev=True,
                                              what="the dev set") if dev else [])
        self.encoded_now = len(store.built)
        return train_features, dev_features

    def _optimizer(self, model):
        skip = no_decay_names(model)
        params = [(n, p) for n, p in model.named_parameters() if p.requires_grad]
        groups = [{"params": [p for n, p in params if n not in skip], "weight_decay": self.cfg.weight_decay},
                  {"params": [p for n, p in params if n in skip], "weight_decay": 0.0}]
        return torch.optim.AdamW(groups, lr=self.cfg.lr)

    # ---------------------------------------------------------------- logging

    def log(self, record: dict) -> None:
        if self.accelerator.is_main_process:
            with open(self.out / LOG_FILE, "a", encoding="utf-8") as f:
                f.write(json.dumps(record) + "\n")
            if self.tracking:
                values = {k: v for k, v in record.items()
                          if isinstance(v, (int, float)) and not isinstance(v, bool) and k != "step"}
                prefix = "train/" if record["event"] == "train" else "dev/"
                self.accelerator.log({prefix + k: v for k, v in values.items()}, step=record["step"])
        self.state.log_lines += 1

    def _reset_log(self) -> None:
        if self.accelerator.is_main_process:
            path = self.out / LOG_FILE
            lines = path.read_text(encoding="utf-8").splitlines(True) if path.is_file() else []
            path.write_text("".join(lines[:self.state.log_lines]), encoding="utf-8")

    # ---------------------------------------------------------------- evaluation

    def evaluate(self) -> dict:
        self.model.eval()
        result = self.objective.evaluate(self.model, self.dev_dl, self.accelerator, self.dev_features,
                                         self.dev_examples)
        self.model.train()
        return result

    def save_checkpoint(self) -> None:
        checkpoints.save(self.accelerator, self.out, self.state, self.cfg.keep_checkpoints)
        self.saved_at = self.state.step

    def save_model(self, name: str, **info) -> None:
        with transformers_quiet(logs=True):
            checkpoints.save_model(self.accelerator, self.model, self.tokenizer, self.out / name,
                                   {"config": self.cfg.to_dict(), "step": self.state.step,
                                    "objective": self.objective.name,
                                    "architecture": self.objective.architecture, **info})

    # ---------------------------------------------------------------- the run

    def run(self) -> dict:
        self.started = started = time.time()
        self.first_step_seconds = None
        self._setup()
        self._train()
        result = self._finish()
        result["metrics"]["seconds"] = round(time.time() - started, 2)
        if self.accelerator.is_main_process:
            (self.out / "metrics.json").write_text(json.dumps(result["metrics"], indent=2) + "\n",
                                                   encoding="utf-8")
        return result

    def _setup(self) -> None:
        from accelerate.utils import set_seed

        cfg = self.cfg
        self.accelerator = acc = self._accelerator()
        self.objective = objective = get_objective(cfg)
        self.metric = objective.metric
        self.tracking = bool(acc.log_with)
        found = self._checkpoint_to_resume()
        if acc.is_main_process:
            self.out.mkdir(parents=True, exist_ok=True)
        acc.wait_for_everyone()
        set_seed(cfg.seed)
        if cfg.feature_cache is False:
            self.cache_dir = None
        else:
            self.cache_dir = default_cache_dir() if cfg.feature_cache is True else Path(cfg.feature_cache)
        model_path, self.load_kwargs = model_source(cfg.model) if cfg.model_config is None else ("", {})
        with transformers_quiet(not self.progress, logs=True):
            self.tokenizer = self._tokenizer(model_path)
            train_raw = load_examples(cfg.train, "train", objective.tasks)
            dev_raw = (eval_view(cfg.recipe, load_examples(cfg.dev, "validation", objective.tasks))
                       if cfg.dev else [])
            train_examples, self.data_report = self._train_examples(train_raw)
            train_features, dev_features = self._features(train_examples, len(train_raw), dev_raw)
            self.dev_features, self.dev_examples = dev_features, dev_raw
            if not train_features:
                raise ConfigError(f"{cfg.train.describe()}: nothing to train on for objective "
                                  f"{objective.name!r}")
            model = self._model(model_path)
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.train_questions, self.dev_questions = len(train_examples), len(dev_raw)
        self.train_features = len(train_features)

        optimizer = self._optimizer(model)
        train_dl, self.sampler = train_loader(train_features, cfg.batch_size, cfg.seed, pad,
                                              collate_fn=objective.collate)
        batches = math.ceil(len(self.sampler) / acc.num_processes)
        self.steps_per_epoch = math.ceil(batches / cfg.gradient_accumulation_steps)
        self.total = cfg.epochs * self.steps_per_epoch
        self.limit = min(self.total, cfg.max_steps or self.total)
        scheduler = warmup_then_decay(optimizer, math.ceil(cfg.warmup_ratio * self.total), self.total,
                                      acc.num_processes)
        parts = [model, optimizer, train_dl, scheduler]
        if dev_features:
            parts.append(eval_loader(dev_features, cfg.eval_batch_size or cfg.batch_size, pad,
                                     collate_fn=objective.collate))
        parts = acc.prepare(*parts)
        self.model, self.optimizer, self.train_dl, self.scheduler = parts[:4]
        self.dev_dl = parts[4] if dev_features else None
        assert len(self.train_dl) == batches, (len(self.train_dl), batches)

        if found is not None:
            state = checkpoints.read_state(found)
            if state.processes != acc.num_processes:
                raise ConfigError(f"{found} was written by {state.processes} process(es); resume "
                                  f"with the same number (now {acc.num_processes}), since each "
                                  "process's place in the data is saved")
            self.state = checkpoints.restore(acc, found)
            self.say(f"resuming from {found} (step {self.state.step}, epoch {self.state.epoch + 1}, "
                     f"batch {self.state.batch})")
        else:
            self.state = TrainerState(processes=acc.num_processes, plan=cfg.plan())
        self.resumed_from = self.state.step if found is not None else None
        self.saved_at = self.state.step if found is not None else -1
        self._reset_log()
        if acc.is_main_process:
            (self.out / "config.yaml").write_text(yaml.safe_dump(cfg.to_dict(), sort_keys=False),
                                                  encoding="utf-8")
            (self.out / "data").mkdir(exist_ok=True)
            (self.out / "data" / "train_set.json").write_text(
                json.dumps({**self.data_report, "train_questions": self.train_questions,
                            "dev_questions": self.dev_questions}, indent=2) + "\n", encoding="utf-8")
        if self.tracking:
            acc.init_trackers("tensorboard", config=_flat(cfg.to_dict()))
        self.say(f"{plural(self.train_questions, 'training question')} ({self.data_report['added']:,} added "
                 f"by the recipe), {plural(self.dev_questions, 'dev question')}; "
                 f"{plural(self.total, 'step')} planned ({self.steps_per_epoch:,} per epoch), stopping at {self.limit:,}")

    def _log_loss(self, epoch: int) -> None:
        """One train record for the steps since the last; their losses are kept in the state
        until then, so an interval cut by a checkpoint ends the same after a resume."""
        state = self.state
        loss = sum(state.pending_losses) / len(state.pending_losses)
        state.pending_losses = []
        self.train_loss = loss
        self.log({"event": "train", "step": state.step,
                  "epoch": round(epoch + state.batch / len(self.train_dl), 4),
                  "loss": loss, "lr": state.lr})

    def _end_epoch(self, epoch: int) -> None:
        state = self.state
        if self.dev_dl is not None:
            result = self.evaluate()
            better = state.best is None or result[self.metric] > state.best[self.metric]
            self.last_eval = {"event": "eval", "step": state.step, "epoch": epoch + 1, **result,
                              "best": better}
            self.log(self.last_eval)
            self.say(f"epoch {epoch + 1}: {self.objective.label} {result[self.metric]:.4f} on "
                     f"{plural(self.dev_questions, 'question')}" + (" (best so far)" if better else ""))
            if better:
                state.best = {"step": state.step, "epoch": epoch + 1, self.metric: result[self.metric]}
                self.save_model("best", best=state.best)
        state.epoch, state.batch = epoch + 1, 0
        self.save_checkpoint()

    def _train(self) -> None:
        from tqdm.auto import tqdm

        cfg, acc, state = self.cfg, self.accelerator, self.state
        model, optimizer, scheduler, n_batches = self.model, self.optimizer, self.scheduler, len(self.train_dl)
        self.bar = tqdm(total=self.limit, initial=state.step, desc=cfg.name, unit="step",
                        dynamic_ncols=True, disable=not (self.progress and acc.is_main_process))
        self.last_eval = self.train_loss = None
        step_loss = torch.zeros((), device=acc.device)
        micro = 0
        model.train()
        while state.epoch < cfg.epochs and state.step < self.limit:
            epoch = state.epoch
            self.sampler.select_epoch(epoch)
            loader = acc.skip_first_batches(self.train_dl, state.batch) if state.batch else self.train_dl
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
                if self.first_step_seconds is None:
                    self.first_step_seconds = round(time.time() - self.started, 2)
                state.pending_losses.append(acc.reduce(step_loss / micro, "mean").item())
                step_loss.zero_()
                micro = 0
                self.bar.update(1)
                end_of_epoch = state.batch == n_batches
                if state.step % cfg.log_every_steps == 0 or end_of_epoch:
                    self._log_loss(epoch)
                    self.bar.set_postfix(loss=f"{self.train_loss:.4f}", lr=f"{state.lr:.2e}")
                if end_of_epoch:
                    continue  # handled below, once the loader has finished
                if state.step >= self.limit:
                    break
                if cfg.save_every_steps and state.step % cfg.save_every_steps == 0:
                    self.save_checkpoint()
            if state.batch < n_batches:
                break
            self._end_epoch(epoch)
        self.bar.close()

    def _finish(self) -> dict:
        """Checkpoint where the run stopped, then evaluate and save the final model; what is
        logged after that checkpoint is dropped again if the run is resumed from it."""
        acc, state = self.accelerator, self.state
        if self.saved_at != state.step:
            self.save_checkpoint()
        n_batches = len(self.train_dl)
        if state.pending_losses:
            self._log_loss(state.epoch)
        final = {"event": "final", "step": state.step,
                 "epoch": round(state.epoch + state.batch / n_batches, 4)}
        best_path = None
        if self.dev_dl is not None:
            if self.last_eval is not None and self.last_eval["step"] == state.step:
                result = {k: v for k, v in self.last_eval.items()
                          if k not in ("event", "step", "epoch", "best")}
            else:
                result = self.evaluate()
            final.update(result)
            if state.best is None:
                # no epoch finished: the final model is the only one evaluated
                self.save_model("best", best={"step": state.step, **result})
            best = state.best or {"step": state.step, self.metric: result[self.metric]}
            final.update({f"best_{self.metric}": best[self.metric], "best_step": best["step"]})
            best_path = str(self.out / "best")
        self.log(final)
        self.save_model("final")
        if self.tracking:
            acc.end_training()
        metrics = {**{k: v for k, v in final.items() if k != "event"},
                   "objective": self.objective.name, "metric": self.metric,
                   "train_loss": self.train_loss, "train_questions": self.train_questions,
                   "train_features": self.train_features,
                   "added_questions": self.data_report["added"], "planned_steps": self.total,
                   "steps_per_epoch": self.steps_per_epoch, "resumed_from": self.resumed_from,
                   "processes": acc.num_processes, "first_step_seconds": self.first_step_seconds,
                   "feature_tables_built": self.encoded_now}
        return {"output_dir": str(self.out), "best": best_path, "final": str(self.out / "final"),
                "log": str(self.out / LOG_FILE), "metrics": metrics, "data": self.data_report}
