"""`advrace ablate`: a grid of training runs, each evaluated on every split of one release.

The result is one matrix, runs × splits, in the layout of AdvRACE's Table 6 (fine-tuned on
original data, +AddSent, +CharSwap, mix), with the diagnosis split as a column (Table 7) and an
option-only run scored on the option-only splits (Table 8) when the grid asks for them.
"""

from __future__ import annotations

import argparse
import copy
import json
import textwrap
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from advrace.core.checking import build_dataclass, check_keys
from advrace.core.config import load_config as load_release_config
from advrace.core.config import read_yaml
from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.evaluation import score_release
from advrace.evaluation.report import write_report
from advrace.models.readers import BASELINES, is_baseline
from advrace.release import build_release, check_release, read_split

from .config import config_from_dict, set_values


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
    baselines: tuple[str, ...] = ()  # built-in readers scored beside the runs (advrace.baselines)


def load_grid(path: str | Path) -> Grid:
    return grid_from_dict(read_yaml(path, "configs/ablation/"), str(path))


def _listed(value):
    """One name stands for a list of one."""
    return [value] if isinstance(value, str) else value


def grid_from_dict(values: dict, where: str = "ablation config") -> Grid:
    v = check_keys(Grid, values, where)
    for key in ("release", "train_config", "runs"):
        if key not in v:
            raise ConfigError(f"{where}: missing '{key}'")
    release = v["release"]
    if isinstance(release, str):
        release = {"path": release}
    release = build_dataclass(ReleaseSource, release, f"{where}.release")
    if not release.path and not release.config:
        raise ConfigError(f"{where}: release needs 'path' (a built release) or 'config' (a recipe to build)")
    if isinstance(v["train_config"], str):
        v["train_config"] = read_yaml(v["train_config"], "configs/train/")
    runs = v["runs"]
    if isinstance(runs, list):
        runs = [{**r, "recipe": r.get("recipe") or {"task": "finetune"},
                 "evaluate_on": _listed(r.get("evaluate_on")) or None} if isinstance(r, dict) else r
                for r in runs]
    name = v.setdefault("name", "ablation")
    v.update(release=release, runs=runs, baselines=_listed(v.get("baselines")),
             output_dir=v.get("output_dir") or f"runs/{name}")
    grid = build_dataclass(Grid, v, where)
    names = [r.name for r in grid.runs]
    if not names:
        raise ConfigError(f"{where}: 'runs' is empty")
    for i, n in enumerate(names):
        if n in names[:i]:
            raise ConfigError(f"{where}: runs[{i}] needs a unique 'name'; {n!r} is taken")
    wrong = [b for b in grid.baselines if not is_baseline(b)]
    if wrong:
        raise ConfigError(f"{where}: unknown baseline(s) {', '.join(wrong)}; built-in readers: "
                          f"{', '.join(BASELINES)}")
    clash = set(grid.baselines) & set(names)
    if clash:
        raise ConfigError(f"{where}: run name(s) {', '.join(sorted(clash))} clash with baselines")

    for run in grid.runs:
        config_from_dict(run_config(grid, run), f"{where}: run {run.name!r}: config")
    return grid


def run_config(grid: Grid, run: Run) -> dict:
    """The training config of one run: the shared one, the grid's overrides, the run's own."""
    values = set_values(grid.train_config, {**grid.overrides, **run.overrides}, f"ablation run {run.name!r}: set")
    values["recipe"] = copy.deepcopy(run.recipe)
    values["name"] = run.name
    values.pop("output_dir", None)
    return values


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
        result = train(config_from_dict(run_config(grid, run), f"run {run.name!r}"), output_dir=run_dir,
                       resume=resume, progress=progress)
        model = result["best"] or result["final"]
        splits = list(run.evaluate_on) if run.evaluate_on else None
        scores[run.name] = score_release(release, model, splits=splits, batch_size=grid.batch_size,
                                         max_length=grid.max_length, bf16=grid.bf16, progress=progress,
                                         **checked)
        sources[run.name] = {"path": str(model), "recipe": run.recipe}
        runs[run.name] = {"model": str(model), "metrics": result["metrics"]}
    for name in grid.baselines:
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
