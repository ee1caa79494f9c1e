"""Training recipes: YAML files in configs/train/, checked strictly before any model is loaded.

A typo in a key or a value of the wrong type fails at once with a ConfigError naming the key,
rather than hours later (or never, if the key was silently ignored). TrainConfig holds the
settings every objective shares; an objective's own settings are the section named after it
(`span_extraction: {doc_stride: 128}`), checked against the objective's `Settings` dataclass
(training/objectives/).
"""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advrace.core.checking import build_dataclass, check_keys, check_value, config_dict
from advrace.core.config import DataSpec, SplitSpec, parse_settings, read_yaml, resolve_release_paths
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.paths import (DATA, MODEL, PATH, WHERE_PATHS_ARE_READ, config_folder, data_kind, is_missing,
                                missing_paths, named_path, resolve, resolve_settings)
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.formats import format_names
from advrace.models.runtime.loading import MINILM

from .objectives import objective_class, objective_names, setting_keys

RECIPE_KINDS = ("finetune", "adversarial", "option_only")
MODES = ("targeted", "mixed")
PRECISIONS = ("no", "bf16", "fp16")
DEFAULT_OBJECTIVE = MULTIPLE_CHOICE

# Keys that change only how a run is stopped, saved or watched; everything else changes the
# weights, so `--resume` refuses a checkpoint whose run differed in any of them.
RUN_ONLY_KEYS = ("name", "description", "max_steps", "save_every_steps", "keep_checkpoints",
                 "log_every_steps", "tensorboard", "output_dir", "feature_cache", "encode_workers")


@dataclass(frozen=True)
class DataConfig:
    """A data set: a file or folder (`path`, read by advrace.formats), or one split of a release."""

    path: str = ""
    format: str | None = None
    limit: int | None = field(default=None, metadata={"min": 0})
    lenient: bool = False
    release: str | None = None
    # the release split (default `original`); for a `path`, the data set's part (advrace.formats'
    # `part`; default `train` for train:, `validation` for dev:)
    split: str | None = None

    def describe(self) -> str:
        if self.release:
            return f"{self.release} (split {self.split or 'original'})"
        return self.path


@dataclass(frozen=True)
class RecipeConfig:
    """What the model is trained on; see training/recipes.py."""

    # which recipe; configs spell it `task`, a word advrace otherwise keeps for the kind of example
    kind: str = field(default="finetune", metadata={"key": "task"})
    mode: str | None = None
    attacks: tuple[SplitSpec, ...] = ()
    fraction: float = field(default=0.25, metadata={"above": 0, "max": 1})
    seed: int | None = None  # attack and slice seed; the training seed when unset
    # attack worker processes; the data do not depend on it
    workers: int | None = field(default=None, metadata={"min": 1})
    resources: dict = field(default_factory=dict)


@dataclass(frozen=True)
class TrainConfig:
    name: str = "advrace-train"
    description: str = ""
    objective: str = DEFAULT_OBJECTIVE
    model: str = MINILM
    model_config: dict | None = None
    model_overrides: dict = field(default_factory=dict)
    tokenizer: str | None = None
    train: DataConfig = field(default_factory=DataConfig)
    dev: DataConfig | None = None
    recipe: RecipeConfig = field(default_factory=RecipeConfig)
    lr: float = field(default=1.5e-5, metadata={"above": 0})
    weight_decay: float = field(default=0.1, metadata={"min": 0})
    warmup_ratio: float = field(default=0.06, metadata={"min": 0, "max": 1})
    epochs: int = field(default=4, metadata={"min": 1})
    max_steps: int | None = field(default=None, metadata={"min": 1})
    batch_size: int = field(default=8, metadata={"min": 1})
    eval_batch_size: int | None = field(default=None, metadata={"min": 1})
    gradient_accumulation_steps: int = field(default=1, metadata={"min": 1})
    max_length: int = field(default=512, metadata={"min": 8})
    max_grad_norm: float | None = field(default=1.0, metadata={"above": 0})
    mixed_precision: str = "no"
    seed: int = 42
    save_every_steps: int | None = field(default=500, metadata={"min": 1})
    keep_checkpoints: int | None = field(default=2, metadata={"min": 1})
    log_every_steps: int = field(default=1, metadata={"min": 1})
    tensorboard: bool = True
    output_dir: str | None = None
    # where encoded features are kept (advrace.models.runtime.feature_store): true for $ADVRACE_CACHE or
    # ~/.cache/advrace, a folder, or false to encode into memory as before (small data only)
    feature_cache: bool | str = True
    encode_workers: int | None = field(default=None, metadata={"min": 1})  # None: every core
    source_file: str | None = None
    settings: Any = None  # the objective's Settings, from its section; None: the defaults

    @property
    def data_seed(self) -> int:
        """The seed of the data a recipe makes: attack slices, inserted answers, drawn distractors."""
        return self.seed if self.recipe.seed is None else self.recipe.seed

    def objective_settings(self):
        """The objective's settings: its section's, or its defaults where the config has none."""
        return self.settings if self.settings is not None else objective_class(self.objective).Settings()

    def to_dict(self) -> dict:
        """The config as a YAML file gives it, the objective's section after `objective`."""
        section = config_dict(self.objective_settings())
        d = {}
        for key, value in config_dict(self).items():
            if key not in ("source_file", "settings"):
                d[key] = value
            if key == "objective" and section:
                d[self.objective] = section
        return d

    def plan(self) -> dict:
        """The settings that decide the trained weights (see RUN_ONLY_KEYS)."""
        d = self.to_dict()
        for key in RUN_ONLY_KEYS:
            d.pop(key)
        d["recipe"].pop("workers")
        return json.loads(json.dumps(d, sort_keys=True, default=str))


TRAIN_KEYS = frozenset(f.name for f in dataclasses.fields(TrainConfig)) - {"source_file", "settings"}


def unread_plan_keys(plan: dict) -> list[str]:
    """Top-level keys of a saved plan that are neither a TrainConfig setting nor an objective's
    section: the plan was written in another layout (such as the flat one from before objectives
    had sections), and comparing it with today's would misread it."""
    return sorted(key for key in plan if key not in TRAIN_KEYS and key not in objective_names())


# ---------------------------------------------------------------- value checks
# Types and numeric ranges (field metadata) are checked by advrace.core.checking.


def _one_of(where: str, value: str | None, choices: tuple[str, ...]) -> None:
    if value is not None and value not in choices:
        raise ConfigError(f"{where} must be one of {', '.join(choices)}, got {value!r}")


# ---------------------------------------------------------------- sections


def data_from_dict(values: Any, where: str) -> DataConfig:
    if isinstance(values, str):
        values = {"path": values}
    if isinstance(values, dict) and "path" in values and values["path"] is None:
        values = {k: v for k, v in values.items() if k != "path"}  # `path: null` unsets a base path
    spec = build_dataclass(DataConfig, values, where)
    if bool(spec.path) == bool(spec.release):
        raise ConfigError(f"{where}: give either 'path' (a data file or folder) or 'release' "
                          "(a release folder, with 'split'), not both or neither")
    _one_of(f"{where}.format", spec.format, format_names())
    if spec.release and spec.format:
        raise ConfigError(f"{where}: 'format' is for 'path'; a release has its own format")
    return spec


def recipe_from_dict(values: Any, where: str = "recipe") -> RecipeConfig:
    if isinstance(values, str):
        values = {"task": values}
    v = check_keys(RecipeConfig, values or {}, where)
    given = set(v)
    raw = v.pop("attacks", None)
    recipe = build_dataclass(RecipeConfig, v, where)
    _one_of(f"{where}.task", recipe.kind, RECIPE_KINDS)
    if recipe.kind != "adversarial":
        extra = sorted({"mode", "attacks", "fraction"} & given)
        if extra:
            raise ConfigError(f"{where}: {', '.join(extra)} only apply to task 'adversarial' "
                              f"(this recipe's task is {recipe.kind!r})")
        return recipe
    mode = recipe.mode or "targeted"
    _one_of(f"{where}.mode", mode, MODES)
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
    if recipe.fraction * len(attacks) > 1 + 1e-9:
        raise ConfigError(f"{where}: {len(attacks)} disjoint slices of {recipe.fraction:g} do not fit in "
                          "one training set; lower 'fraction'")
    return dataclasses.replace(recipe, mode=mode, attacks=attacks)


def _objective_section(values: Any, where: str) -> tuple[dict, type, Any]:
    """Split a config mapping into the shared settings, the objective's class and its settings.

    The section named after the objective is checked against the objective's `Settings`; a
    setting of the chosen objective at the top level (the layout before sections) is read as if
    in the section, and a section or setting of another objective is refused, naming it.
    """
    values = {} if values is None else values
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    v = dict(values)
    name = check_value(v.get("objective", DEFAULT_OBJECTIVE), str, f"{where}.objective")
    if name in TRAIN_KEYS:
        raise ConfigError(f"{where}.objective: {name!r} is a training setting, not an objective")
    cls = objective_class(name, f"{where}.objective")
    section = v.pop(name, None)
    own = set(setting_keys(cls.Settings))
    flat = {key: v.pop(key) for key in list(v) if key not in TRAIN_KEYS and key in own}
    if flat and isinstance(section, Mapping):
        twice = sorted(set(flat) & set(section))
        if twice:
            raise ConfigError(f"{where}: {', '.join(twice)} given twice, at the top level and in "
                              f"section {name!r}; give it once, in the section")
        section = {**flat, **section}
    elif flat and section is None:
        section = flat
    for key in [k for k in v if k not in TRAIN_KEYS]:  # unknown here; another objective's?
        if key in objective_names():
            raise ConfigError(f"{where}: section {key!r} is for objective {key!r}, but this config's "
                              f"objective is {name!r}; remove the section, or set objective: {key}")
        owner = next((other for other in objective_names()
                      if key in setting_keys(objective_class(other).Settings)), None)
        if owner:
            raise ConfigError(f"{where}: {key!r} is a setting of objective {owner!r} (section "
                              f"{owner!r}), but this config's objective is {name!r}")
    return v, cls, cls.settings_from_dict(section, f"{where}.{name}")


def train_config_from_dict(values: Any, where: str = "config") -> TrainConfig:
    """A training config from its mapping (a YAML file's); `where` names it in errors."""
    v, objective, settings = _objective_section(values, where)
    v = check_keys(TrainConfig, v, where, skip=("source_file", "settings"))
    if "train" not in v:
        raise ConfigError(f"{where}: 'train' (the training data) is required")
    v["train"] = data_from_dict(v["train"], f"{where}.train")
    if v.get("dev") is not None:
        v["dev"] = data_from_dict(v["dev"], f"{where}.dev")
    v["recipe"] = recipe_from_dict(v.get("recipe", {}), f"{where}.recipe")
    cfg = build_dataclass(TrainConfig, v, where, skip=("source_file", "settings"))
    cfg = dataclasses.replace(cfg, settings=settings)
    if cfg.model_config is not None:
        if "model_type" not in cfg.model_config:
            raise ConfigError(f"{where}.model_config needs 'model_type' (e.g. bert)")
        if not cfg.tokenizer:
            raise ConfigError(f"{where}: a model built from 'model_config' needs a 'tokenizer' folder")
        if "model" in v:
            raise ConfigError(f"{where}: give either 'model' or 'model_config', not both")
    if objective.recipes is not None and cfg.recipe.kind not in objective.recipes:
        raise ConfigError(f"{where}: recipe task {cfg.recipe.kind!r} does not apply to objective "
                          f"{cfg.objective!r}; it takes task {' or '.join(map(repr, objective.recipes))}")
    _one_of(f"{where}.mixed_precision", cfg.mixed_precision, PRECISIONS)
    if not all(isinstance(k, str) for k in cfg.model_overrides):
        raise ConfigError(f"{where}.model_overrides: keys must be model config names")
    return cfg


# ---------------------------------------------------------------- files and overrides


def set_values(values: dict, settings: dict[str, Any], where: str = "--set") -> dict:
    """A copy of a config mapping with dotted keys (`train.limit`) set.

    A new `train.path` (or `dev.path`) without a `format` beside it is detected afresh: the
    config's format described the config's data.
    """
    values = json.loads(json.dumps(values or {}))
    for section in ("train", "dev"):
        node = values.get(section)
        if f"{section}.path" in settings and f"{section}.format" not in settings and isinstance(node, dict):
            node.pop("format", None)
    for key, value in settings.items():
        parts = key.split(".")
        node = values
        for part in parts[:-1]:
            if isinstance(node.get(part), str) and part in ("train", "dev"):
                node[part] = {"path": node[part]}
            if node.get(part) is None:
                node[part] = {}
            if not isinstance(node[part], dict):
                raise ConfigError(f"{where} {key}: {part!r} is not a mapping")
            node = node[part]
        node[parts[-1]] = value
    return values


def apply_overrides(values: dict, assignments: list[str]) -> dict:
    """`key.sub=value` pairs from the command line (value read as YAML) on top of a config."""
    return set_values(values, parse_settings(assignments, "train.limit=300"))


def _data_paths(section: Any, folder: str | None) -> Any:
    """A `train` or `dev` section (a path, or a mapping with `path` or `release`), resolved."""
    if isinstance(section, str):
        return resolve(section, folder, DATA)
    if not isinstance(section, Mapping):
        return section
    section = dict(section)
    if "path" in section:
        section["path"] = resolve(section["path"], folder, data_kind(section.get("format")))
    if "release" in section:
        section["release"] = resolve(section["release"], folder, PATH)
    return section


def resolve_paths(values: Any, folder: str | None) -> Any:
    """A training config mapping read from a file in `folder` (or a part of one), its relative
    paths made relative to that folder (advrace.core.paths): the data and release paths, `model`
    and `tokenizer` when folders (not Hub or built-in names), `output_dir`, a `feature_cache`
    folder, and the recipe's resources and attack configs. `--set` values are applied after, as
    given: relative to the shell's folder. Values of the wrong shape are left to the checker."""
    if folder is None or not isinstance(values, Mapping):
        return values
    v = dict(values)
    for section in ("train", "dev"):
        if section in v:
            v[section] = _data_paths(v[section], folder)
    for key in ("model", "tokenizer"):
        if key in v:
            v[key] = resolve(v[key], folder, MODEL)
    for key in ("output_dir", "feature_cache"):
        if isinstance(v.get(key), str):
            v[key] = resolve(v[key], folder, PATH)
    recipe = v.get("recipe")
    if isinstance(recipe, Mapping):
        recipe = dict(recipe)
        if "resources" in recipe:
            recipe["resources"] = resolve_settings(recipe["resources"], folder)
        attacks = recipe.get("attacks")
        if isinstance(attacks, (list, Mapping)):
            splits = resolve_release_paths({"splits": list(attacks) if isinstance(attacks, list) else [attacks]},
                                           folder)["splits"]
            recipe["attacks"] = splits if isinstance(attacks, list) else splits[0]
        v["recipe"] = recipe
    return v


def resolve_setting(key: str, value: Any, folder: str | None) -> Any:
    """One dotted setting (`train.path`, `model`, ...) as written in a config file in `folder`
    (an ablation grid's `set:`), resolved as `resolve_paths` would resolve it in place."""
    node = resolve_paths(set_values({}, {key: value}), folder)
    for part in key.split("."):
        node = node[part]
    return node


def check_paths(cfg: TrainConfig) -> None:
    """Every file, folder and local model the config names exists, before any data is read or
    model loaded (Hub names and built-ins are not checked here)."""
    where = cfg.source_file or "config"
    found = []
    for section in ("train", "dev"):
        spec = getattr(cfg, section)
        if spec is not None:
            found.append((f"{section}.path", named_path(spec.path, data_kind(spec.format)), PATH,
                          "give your copy of the data"))
            found.append((f"{section}.release", named_path(spec.release, PATH), PATH,
                          "build it with `advrace build`"))
    if cfg.model_config is None:
        found.append(("model", named_path(cfg.model, MODEL), MODEL,
                      "give a checkpoint folder, a Hub name, or `minilm`"))
    found.append(("tokenizer", named_path(cfg.tokenizer, MODEL), MODEL, "give a tokenizer folder or a Hub name"))
    found += [(f"recipe.resources.{key}", path, kind, "") for key, path, kind in missing_paths(cfg.recipe.resources)
              if key != "cache_dir"]
    found += [(f"recipe.attacks {spec.split!r}: {key}", path, kind, "")
              for spec in cfg.recipe.attacks for key, path, kind in missing_paths(spec.config)]
    for key, path, kind, hint in found:
        if is_missing(path, kind):
            raise ConfigError(f"{where}: {key} {path}: no such {'folder' if kind == MODEL else 'file or folder'}"
                              f"{'; ' + hint if hint else ''}{WHERE_PATHS_ARE_READ}")


def load_config(path: str | Path, overrides: list[str] | None = None) -> TrainConfig:
    """A training config file, its relative paths read from its folder, then `--set` overrides
    (`overrides`), whose paths are relative to the shell's folder."""
    values = resolve_paths(read_yaml(path, "configs/train/"), config_folder(path))
    cfg = train_config_from_dict(apply_overrides(values, overrides or []), str(path))
    return dataclasses.replace(cfg, source_file=str(path))


def as_config(config) -> TrainConfig:
    """A TrainConfig from a TrainConfig, a mapping, or a YAML path."""
    if isinstance(config, TrainConfig):
        return config
    if isinstance(config, dict):
        return train_config_from_dict(config)
    if isinstance(config, (str, Path)):
        return load_config(config)
    raise ConfigError(f"expected a training config (path, mapping or TrainConfig), got "
                      f"{type(config).__name__}")


def resolve_data_path(spec: DataConfig) -> str:
    return DataSpec(path=spec.path).resolved_path()
