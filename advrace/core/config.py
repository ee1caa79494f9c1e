"""Release recipes: YAML files in configs/release/, overridable from the command line."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path

import yaml

from advrace.core.checking import build_dataclass
from advrace.core.errors import ConfigError

SAMPLE_DIR = Path(__file__).resolve().parents[1] / "sample_data"
SAMPLE_PREFIX = "@sample/"
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
    limit: int | None = None
    split: str = "test"

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

    def to_dict(self) -> dict:
        d = dataclasses.asdict(self)
        d.pop("source_file")
        d.pop("workers")
        return d


def _build(cls, values, where: str):
    """`cls` from a mapping, every value checked against its field's type (advrace.checking)."""
    return build_dataclass(cls, values, where, skip=("source_file",))


def config_from_dict(values: dict, where: str = "config") -> ReleaseConfig:
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


def load_config(path: str | None) -> ReleaseConfig:
    if path is None:
        return ReleaseConfig()
    p = Path(path)
    cfg = config_from_dict(read_yaml(p, "configs/release/"), str(path))
    data = cfg.data
    if data.path and not data.path.startswith(SAMPLE_PREFIX) and not Path(data.path).is_absolute() \
            and not (Path.cwd() / data.path).exists() and (p.parent / data.path).exists():
        data = dataclasses.replace(data, path=str(p.parent / data.path))
    return dataclasses.replace(cfg, data=data, source_file=str(path))


def with_overrides(cfg: ReleaseConfig, *, data=None, format=None, attacks=None, seed=None, limit=None,
                   lenient=None, workers=None, drop_flagged=None) -> ReleaseConfig:
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
        lenient=lenient if lenient else d.lenient,
    )
    check_limit(d.limit, "--limit" if limit is not None else "data.limit")
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
