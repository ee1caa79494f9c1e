"""Release recipes: YAML files in configs/release/, overridable from the command line."""

from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from advrace.core.checking import build_dataclass, config_dict
from advrace.core.errors import ConfigError
from advrace.core.paths import SAMPLE_PREFIX, config_folder, data_kind, resolve, resolve_settings

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
SAMPLE_ALIASES = {"race": "race", "squad": "squad/sample-v1.1.json"}


@dataclass(frozen=True)
class SplitSpec:
    """One adversarial split: which attack, its config, and its seed (the release seed if unset)."""

    attack: str
    name: str = ""
    config: dict = field(default_factory=dict)
    seed: int | None = None
    source: str = "original"  # the split this one attacks (YAML: `from`)

    @property
    def split(self) -> str:
        return self.name or self.attack


@dataclass(frozen=True)
class DataSpec:
    path: str = ""
    format: str | None = None
    lenient: bool = False
    limit: int | None = None  # the first N questions read
    sample: int | None = None  # a seeded sample of N (of those read), whole passages together
    # the data set's part a source of several (the hub) is read from; a config file's `split`
    part: str = field(default="test", metadata={"key": "split"})

    def resolved_path(self) -> str:
        """`@sample/race` and `@sample/squad` name the sample bundled with the package."""
        if self.path.startswith(SAMPLE_PREFIX):
            rel = self.path[len(SAMPLE_PREFIX):]
            return str(SAMPLE_DIR / SAMPLE_ALIASES.get(rel, rel))
        return self.path


@dataclass(frozen=True)
class ReleaseConfig:
    name: str = "advrace-release"
    description: str = ""
    data: DataSpec = field(default_factory=DataSpec)
    seed: int = 0
    splits: tuple[SplitSpec, ...] = ()
    resources: dict = field(default_factory=dict)
    workers: int | None = None  # None: one per core; results do not depend on it
    audit: bool = True  # audit every split after building (counts in stats.json and the card)
    drop_flagged: bool = False  # True: an example the audit flags stays as in its source split
    source_file: str | None = None
    # the data.path the recipe file itself names (resolved); None for a config made in code or a
    # recipe that names no data. A recipe's description is about that data: the card prints it
    # only when that data was read.
    recipe_data: str | None = None

    def to_dict(self) -> dict:
        d = config_dict(self)
        for key in NOT_SETTINGS:
            d.pop(key)
        d.pop("workers")
        return d

    @property
    def reads_recipe_data(self) -> bool:
        """Whether the data to read is the recipe's own (`data.path` as the file gives it), not data
        that `--data` or `--set data.path=...` put in its place; True for a config made in code."""
        if self.recipe_data is None:
            return True
        ours, read = (dataclasses.replace(self.data, path=p).resolved_path()
                      for p in (self.recipe_data, self.data.path))
        return ours == read or (bool(ours) and bool(read) and os.path.realpath(ours) == os.path.realpath(read))


NOT_SETTINGS = ("source_file", "recipe_data")  # what a file records about a config, not a setting of it


def _build(cls, values, where: str):
    """`cls` from a mapping, every value checked against its field's type (advrace.core.checking)."""
    return build_dataclass(cls, values, where, skip=NOT_SETTINGS)


def release_config_from_dict(values: dict, where: str = "config") -> ReleaseConfig:
    """A release config from its mapping (a YAML file's, or --set's); `where` names it in errors."""
    values = dict(values or {})
    data = _build(DataSpec, values.pop("data", {}) or {}, f"{where}: data")
    splits = []
    raw = values.pop("splits", []) or []
    if not isinstance(raw, list):
        raise ConfigError(f"{where}: splits must be a list of attacks (e.g. [addsent, charswap]), "
                          f"got {raw!r}")
    for i, s in enumerate(raw):
        if isinstance(s, str):
            s = {"attack": s}
        if not isinstance(s, dict):
            raise ConfigError(f"{where}: splits[{i}] must be an attack name or a mapping with "
                              f"'attack', got {s!r}")
        if "from" in s:
            s = {**{k: v for k, v in s.items() if k != "from"}, "source": s["from"]}
        if "attack" not in s:
            raise ConfigError(f"{where}: splits[{i}] has no 'attack'")
        splits.append(_build(SplitSpec, s, f"{where}: splits[{i}]"))
    check_split_names(splits, where)
    return _build(ReleaseConfig, {**values, "data": data, "splits": tuple(splits)}, where)


def check_split_names(splits, where: str) -> None:
    """Two splits of one name would be written to one file, the second overwriting the first."""
    names = [s.split for s in splits]
    if "original" in names:
        raise ConfigError(f"{where}: the split name 'original' is reserved for the source questions; "
                          "give the split another 'name'")
    dupes = sorted({n for n in names if names.count(n) > 1})
    if dupes:
        example = dupes[0]
        raise ConfigError(f"{where}: split name(s) used twice: {', '.join(dupes)}; every split needs "
                          f"its own name: in a config, give the second one `name: {example}_2`, or "
                          "drop the repeated attack from --attacks")


def check_limit(limit, where: str = "--limit") -> None:
    if limit is None:
        return
    if isinstance(limit, bool) or not isinstance(limit, int):
        raise ConfigError(f"{where} must be a whole number of questions, got {limit!r}")
    if limit == 0:
        raise ConfigError(f"{where} 0 leaves no questions to attack; give a positive number, or no "
                          "limit to use every question")
    if limit < 0:
        raise ConfigError(f"{where} must be a positive number of questions, got {limit}")


def read_yaml(path: str | Path, examples: str) -> dict:
    """A YAML mapping from a config file, or a ConfigError that says where examples live."""
    p = Path(path)
    if not p.is_file():
        raise ConfigError(f"{path}: no such config file (see {examples} for examples)")
    try:
        values = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: invalid YAML: {exc}") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return values


def resolve_release_paths(values: dict, folder: str | None) -> dict:
    """A release config mapping read from a file in `folder`, its relative paths (data.path,
    resources' `*_path` and `*_dir`, each split's `model`, `select_with`, ...) made relative to that
    folder (advrace.core.paths); values of the wrong shape are left for the checker to refuse."""
    values = dict(values)
    data = values.get("data")
    if isinstance(data, dict) and "path" in data:
        values["data"] = {**data, "path": resolve(data["path"], folder, data_kind(data.get("format")))}
    if "resources" in values:
        values["resources"] = resolve_settings(values["resources"], folder)
    splits = values.get("splits")
    if isinstance(splits, list):
        values["splits"] = [{**s, "config": resolve_settings(s["config"], folder)}
                            if isinstance(s, dict) and "config" in s else s for s in splits]
    return values


def load_config(path: str | None) -> ReleaseConfig:
    """A release config file; its relative paths are relative to its own folder (a command-line
    value, applied afterwards by `with_overrides` and `with_settings`, to the shell's)."""
    if path is None:
        return ReleaseConfig()
    values = resolve_release_paths(read_yaml(path, "configs/release/"), config_folder(path))
    cfg = release_config_from_dict(values, str(path))
    return dataclasses.replace(cfg, source_file=str(path), recipe_data=cfg.data.path or None)


def parse_settings(items, example: str) -> dict[str, Any]:
    """`KEY=VALUE` command-line settings, each value read as YAML (`0.5`, `true`, `[a, b]`)."""
    settings: dict[str, Any] = {}
    for item in items or ():
        key, sep, raw = item.partition("=")
        if not sep or not key.strip():
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE, e.g. {example}")
        try:
            settings[key.strip()] = yaml.safe_load(raw) if raw.strip() else None
        except yaml.YAMLError as exc:
            raise ConfigError(f"--set {item!r}: invalid value: {exc}") from None
    return settings


SET_EXAMPLE = "splits.distractor_extraction.model=runs/de/final"


def with_settings(cfg: ReleaseConfig, items) -> ReleaseConfig:
    """`--set` on a release config: `splits.NAME.KEY=VALUE` sets a key of split NAME's attack
    config, `data.KEY`, `resources.KEY` and top-level keys (`seed`, `audit`, ...) set themselves.
    Every value is checked as a config file's would be; a path is taken as given (relative to the
    shell's folder), unlike a config file's."""
    settings = parse_settings(items, SET_EXAMPLE)
    if not settings:
        return cfg
    values = config_dict(cfg)
    for key in NOT_SETTINGS:
        values.pop(key)
    values["splits"] = list(values["splits"])
    splits = {(s["name"] or s["attack"]): s for s in values["splits"]}
    top = {f.name for f in dataclasses.fields(ReleaseConfig)} - {"splits", "data", "resources", *NOT_SETTINGS}
    for key, value in settings.items():
        parts = key.split(".")
        if parts[0] == "splits" and len(parts) == 3:
            if parts[1] not in splits:
                raise ConfigError(f"--set {key}: no split named {parts[1]!r}; the splits are "
                                  f"{', '.join(splits) or 'none'} (add one with --attacks)")
            splits[parts[1]]["config"] = {**splits[parts[1]]["config"], parts[2]: value}
        elif parts[0] in ("data", "resources") and len(parts) == 2:
            values[parts[0]][parts[1]] = value
        elif len(parts) == 1 and parts[0] in top:
            values[parts[0]] = value
        else:
            raise ConfigError(f"--set {key}: not a setting of a release config; use splits.SPLIT.KEY "
                              f"(e.g. {SET_EXAMPLE}), data.KEY, resources.KEY or one of "
                              f"{', '.join(sorted(top))}")
    return dataclasses.replace(release_config_from_dict(values, "--set"), source_file=cfg.source_file,
                               recipe_data=cfg.recipe_data)


def with_overrides(cfg: ReleaseConfig, *, data=None, format=None, attacks=None, seed=None, limit=None,
                   sample=None, lenient=None, workers=None, drop_flagged=None) -> ReleaseConfig:
    """Apply command-line flags on top of a config; `attacks` replaces the config's splits.

    `--data` without `--format` detects the format of the new data instead of keeping the
    config's, which described other data.
    """
    d = cfg.data
    if format is None and data is None:
        format = d.format
    d = dataclasses.replace(
        d,
        path=data if data is not None else d.path,
        format=format,
        limit=limit if limit is not None else d.limit,
        sample=sample if sample is not None else d.sample,
        lenient=lenient if lenient else d.lenient,
    )
    check_limit(d.limit, "--limit" if limit is not None else "data.limit")
    check_limit(d.sample, "--sample" if sample is not None else "data.sample")
    splits = cfg.splits
    if attacks is not None:
        by_name = {s.split: s for s in cfg.splits}
        splits = tuple(by_name.get(a) or SplitSpec(attack=a) for a in attacks)
        check_split_names(splits, "--attacks")
    return dataclasses.replace(
        cfg, data=d, splits=splits,
        seed=seed if seed is not None else cfg.seed,
        workers=workers if workers is not None else cfg.workers,
        drop_flagged=drop_flagged if drop_flagged else cfg.drop_flagged,
    )
