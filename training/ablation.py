"""`advrace ablate`: a grid of training runs, each evaluated on every split of one release.

The result is one matrix, runs × splits, in the layout of AdvRACE's Table 6 (fine-tuned on
original data, +AddSent, +CharSwap, mix), with the diagnosis split as a column (Table 7) and an
option-only run scored on the option-only splits (Table 8) when the grid asks for them.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advrace.core.checking import build_dataclass, check_keys
from advrace.core.config import load_config as load_release_config
from advrace.core.config import read_yaml
from advrace.core.errors import ConfigError
from advrace.core.paths import PATH, WHERE_PATHS_ARE_READ, config_folder, resolve
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.evaluation import score_release
from advrace.evaluation.report import write_report
from advrace.models.encoders.readers import READERS, is_builtin_reader
from advrace.release import build_release, check_release, read_split

from .config import check_paths, resolve_paths, resolve_setting, set_values, train_config_from_dict


@dataclass(frozen=True)
class ReleaseSource:
    """The release the runs are scored on: a built one (`path`) or a recipe to build (`config`)."""

    path: str | None = None
    config: str | None = None


@dataclass(frozen=True)
class Run:
    name: str
    recipe: dict
    overrides: dict[str, Any] = field(default_factory=dict, metadata={"key": "set"})
    evaluate_on: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Grid:
    name: str
    release: ReleaseSource
    train_config: dict
    runs: tuple[Run, ...]
    output_dir: str
    overrides: dict[str, Any] = field(default_factory=dict, metadata={"key": "set"})
    description: str = ""
    batch_size: int = 16
    max_length: int | None = None  # None: each run scored at the length it was trained with
    bf16: bool | None = None
    # built-in readers scored beside the runs (advrace.models.encoders.readers); configs call them baselines
    readers: tuple[str, ...] = field(default=(), metadata={"key": "baselines"})
    source_file: str | None = None


def load_grid(path: str | Path) -> Grid:
    """A grid file; its relative paths (release, train_config, output_dir, `set:` paths, the
    runs' attack configs) are read from its folder, those in the train_config file from that
    file's folder."""
    grid = grid_from_dict(read_yaml(path, "configs/ablation/"), str(path), folder=config_folder(path))
    return dataclasses.replace(grid, source_file=str(path))


def _listed(value):
    """One name stands for a list of one."""
    return [value] if isinstance(value, str) else value


def _settings(values: Any, folder: str | None) -> Any:
    """A `set:` mapping of a grid file, its path values resolved against the grid's folder."""
    if folder is None or not isinstance(values, dict):
        return values
    return {k: resolve_setting(k, val, folder) if isinstance(k, str) else val for k, val in values.items()}


def _train_config(value: Any, where: str, folder: str | None) -> Any:
    """The shared training config: a file (read, its paths from its own folder) or a mapping
    written in the grid (its paths from the grid's folder)."""
    if not isinstance(value, str):
        return resolve_paths(value, folder)
    path = resolve(value, folder, PATH)
    if not Path(path).is_file():
        raise ConfigError(f"{where}: train_config {path}: no such config file (see configs/train/ "
                          f"for examples){WHERE_PATHS_ARE_READ if folder is not None else ''}")
    return resolve_paths(read_yaml(path, "configs/train/"), config_folder(path))


def _run(values: dict, folder: str | None) -> dict:
    """A run's mapping with its defaults, and its attack configs' and `set:` paths resolved."""
    recipe = resolve_paths({"recipe": values.get("recipe") or {"task": "finetune"}}, folder)["recipe"]
    run = {**values, "recipe": recipe, "evaluate_on": _listed(values.get("evaluate_on")) or None}
    if "set" in values:
        run["set"] = _settings(values["set"], folder)
    return run


def grid_from_dict(values: dict, where: str = "ablation config", folder: str | None = None) -> Grid:
    """A grid from a mapping; `folder`: the folder of the file it was read from, against which
    its relative paths resolve (None: as given, relative to the current folder)."""
    v = check_keys(Grid, values, where, skip=("source_file",))
    for key in ("release", "train_config", "runs"):
        if key not in v:
            raise ConfigError(f"{where}: missing '{key}'")
    release = v["release"]
    if isinstance(release, str):
        release = {"path": release}
    if isinstance(release, dict):
        release = {k: resolve(val, folder, PATH) if k in ("path", "config") else val for k, val in release.items()}
    release = build_dataclass(ReleaseSource, release, f"{where}.release")
    if not release.path and not release.config:
        raise ConfigError(f"{where}: release needs 'path' (a built release) or 'config' (a recipe to build)")
    v["train_config"] = _train_config(v["train_config"], where, folder)
    runs = v["runs"]
    if isinstance(runs, list):
        runs = [_run(r, folder) if isinstance(r, dict) else r for r in runs]
    if "set" in v:
        v["set"] = _settings(v["set"], folder)
    name = v.setdefault("name", "ablation")
    v.update(release=release, runs=runs, baselines=_listed(v.get("baselines")),
             output_dir=resolve(v.get("output_dir"), folder, PATH) or f"runs/{name}")
    grid = build_dataclass(Grid, v, where, skip=("source_file",))
    names = [r.name for r in grid.runs]
    if not names:
        raise ConfigError(f"{where}: 'runs' is empty")
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(f"{where}: runs[{i}] needs a unique 'name'; {n!r} is taken")
    wrong = [b for b in grid.readers if not is_builtin_reader(b)]
    if wrong:
        raise ConfigError(f"{where}: unknown baseline(s) {', '.join(wrong)}; built-in readers: "
                          f"{', '.join(READERS)}")
    clash = set(grid.readers) & set(names)
    if clash:
        raise ConfigError(f"{where}: run name(s) {', '.join(sorted(clash))} clash with baselines")

    for run in grid.runs:
        train_config_from_dict(run_config(grid, run), f"{where}: run {run.name!r}: config")
    return grid


def run_config(grid: Grid, run: Run) -> dict:
    """The training config of one run: the shared one, the grid's overrides, the run's own."""
    values = set_values(grid.train_config, {**grid.overrides, **run.overrides}, f"ablation run {run.name!r}: set")
    values["recipe"] = copy.deepcopy(run.recipe)
    values["name"] = run.name
    values.pop("output_dir", None)
    return values


def check_grid_paths(grid: Grid) -> None:
    """The release (or its recipe) and every file the runs' training configs name exist, before
    any data is read or model loaded."""
    where = grid.source_file or "ablation config"
    if grid.release.path and not Path(grid.release.path).is_dir():
        raise ConfigError(f"{where}: release.path {grid.release.path}: no such release folder; build "
                          f"it with `advrace build`, or give release.config (a recipe to build){WHERE_PATHS_ARE_READ}")
    if grid.release.config and not Path(grid.release.config).is_file():
        raise ConfigError(f"{where}: release.config {grid.release.config}: no such config file (see "
                          f"configs/release/ for examples){WHERE_PATHS_ARE_READ}")
    for run in grid.runs:
        check_paths(dataclasses.replace(train_config_from_dict(run_config(grid, run), f"{where}: run {run.name!r}"),
                                        source_file=f"{where}: run {run.name!r}"))


def _release_dir(grid: Grid, out: Path, progress: bool) -> tuple[Path, dict]:
    """The release folder (built first when the grid gives a recipe) and its checked manifest, kept
    so that scoring each run does not hash the release again."""
    if grid.release.path:
        path = Path(grid.release.path)
    else:
        path = out / "release"
        build_release(load_release_config(grid.release.config), path, progress=progress)
    return path, check_release(path)


def ablate(grid: Grid, output_dir: str | Path | None = None, *, resume: bool = False,
           progress: bool = True) -> dict:
    """Train every run, score its best checkpoint on the release, and write one report."""
    from .loop import train  # deferred for start-up time: the loop imports torch

    check_grid_paths(grid)
    out = Path(output_dir or grid.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    release, manifest = _release_dir(grid, out, progress)
    if manifest["task"] != MULTIPLE_CHOICE:
        raise ConfigError(f"{release}: ablations train multiple-choice models; this release is {manifest['task']}")
    checked = {"manifest": manifest,
               "split_examples": {s: read_split(release, s) for s in manifest["splits"]}}
    scores, sources, runs = {}, {}, {}
    for run in grid.runs:
        unknown = [s for s in run.evaluate_on or () if s not in manifest["splits"]]
        if unknown:
            raise ConfigError(f"run {run.name!r}: evaluate_on names split(s) {', '.join(unknown)} "
                              f"that {release} lacks; it has {', '.join(manifest['splits'])}")
        run_dir = out / "runs" / run.name
        result = train(train_config_from_dict(run_config(grid, run), f"run {run.name!r}"), output_dir=run_dir,
                       resume=resume, progress=progress)
        model = result["best"] or result["final"]
        splits = list(run.evaluate_on) if run.evaluate_on else None
        scores[run.name] = score_release(release, model, splits=splits, batch_size=grid.batch_size,
                                         max_length=grid.max_length, bf16=grid.bf16, progress=progress,
                                         **checked)
        sources[run.name] = {"path": str(model), "recipe": run.recipe}
        runs[run.name] = {"model": str(model), "metrics": result["metrics"]}
    for name in grid.readers:
        scores[name] = score_release(release, name, batch_size=grid.batch_size, progress=progress, **checked)
        sources[name] = {"kind": "built-in", "path": name}
    summary = write_report(out / "report", manifest, scores, sources=sources)
    (out / "runs.json").write_text(json.dumps(runs, indent=2, sort_keys=True, default=str) + "\n",
                                   encoding="utf-8")
    return summary


EPILOG = textwrap.dedent("""\
    example:
      advrace ablate configs/ablation/advrace-table6.yaml --output-dir runs/table6

    The config names a release (a built one, or a release recipe to build first), a training
    config shared by every run, and the runs (each a recipe: finetune, adversarial targeted or
    mixed, option_only), and optionally `baselines: [sliding-window, similarity]`, built-in
    readers scored beside the runs. The report (OUTPUT/report/results.md, .json, .png) is a runs x splits
    matrix with relative drops; each run's model stays in OUTPUT/runs/NAME/.
    """)


def add_ablate_parser(subparsers):
    """Add `ablate`; returns its handler (args -> exit status)."""
    p = subparsers.add_parser("ablate", help="train a grid of runs and score each on every split",
                              description="Adversarial-training ablations in one command (AdvRACE "
                                          "Tables 6-8).",
                              formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("config", help="ablation grid (YAML), e.g. configs/ablation/sample-cpu.yaml")
    p.add_argument("--output-dir", help="where runs and the report go (default: the config's output_dir)")
    p.add_argument("--resume", action="store_true", help="continue interrupted runs from their checkpoints")
    p.add_argument("--quiet", action="store_true", help="no progress bars")

    def handler(args) -> int:
        grid = load_grid(args.config)
        out = Path(args.output_dir or grid.output_dir)
        ablate(grid, out, resume=args.resume, progress=not args.quiet)
        print((out / "report" / "results.md").read_text(encoding="utf-8").rstrip())
        print(f"\nwrote {out}/report and {out}/runs.json")
        return 0

    return handler
