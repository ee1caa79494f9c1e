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

from advrace.config import read_yaml
from advrace.errors import ConfigError

RUN_KEYS = {"name", "recipe", "set", "evaluate_on"}
GRID_KEYS = {"name", "description", "release", "train_config", "set", "runs", "output_dir",
             "batch_size", "max_length", "bf16", "baselines"}


@dataclass(frozen=True)
class Run:
    name: str
    recipe: dict
    overrides: dict = field(default_factory=dict)
    evaluate_on: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Grid:
    name: str
    release: dict
    train_config: dict
    runs: tuple[Run, ...]
    output_dir: str
    overrides: dict = field(default_factory=dict)
    batch_size: int = 16
    max_length: int = 512
    bf16: bool | None = None
    baselines: tuple[str, ...] = ()  # built-in readers scored beside the runs (advrace.baselines)


def _deep_set(values: dict, dotted: str, value) -> None:
    *parents, last = dotted.split(".")
    node = values
    for key in parents:
        child = node.get(key)
        if not isinstance(child, dict):
            child = node[key] = {} if child is None else {"path": child}
        node = child
    node[last] = value


def _check_keys(values: dict, known: set, where: str) -> None:
    if not isinstance(values, dict):
        raise ConfigError(f"{where}: expected a mapping")
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")


def load_grid(path: str | Path) -> Grid:
    return grid_from_dict(read_yaml(path, "configs/ablation/"), str(path))


def grid_from_dict(values: dict, where: str = "ablation config") -> Grid:
    _check_keys(values, GRID_KEYS, where)
    for key in ("release", "train_config", "runs"):
        if key not in values:
            raise ConfigError(f"{where}: missing '{key}'")
    release = values["release"]
    if isinstance(release, str):
        release = {"path": release}
    _check_keys(release, {"path", "config"}, f"{where}: release")
    if not release.get("path") and not release.get("config"):
        raise ConfigError(f"{where}: release needs 'path' (a built release) or 'config' (a recipe to build)")
    base = values["train_config"]
    if isinstance(base, str):
        base = read_yaml(base, "configs/train/")
    runs, names = [], set()
    for i, r in enumerate(values["runs"] or []):
        _check_keys(r, RUN_KEYS, f"{where}: runs[{i}]")
        if "name" not in r or r["name"] in names:
            raise ConfigError(f"{where}: runs[{i}] needs a unique 'name'")
        names.add(r["name"])
        on = r.get("evaluate_on")
        runs.append(Run(str(r["name"]), dict(r.get("recipe") or {"task": "finetune"}), dict(r.get("set") or {}),
                        tuple(on) if on else None))
    if not runs:
        raise ConfigError(f"{where}: 'runs' is empty")
    from advrace.baselines import BASELINES, is_baseline

    baselines = values.get("baselines") or []
    if isinstance(baselines, str):
        baselines = [baselines]
    wrong = [b for b in baselines if not is_baseline(b)]
    if wrong:
        raise ConfigError(f"{where}: unknown baseline(s) {', '.join(map(str, wrong))}; built-in readers: "
                          f"{', '.join(BASELINES)}")
    clash = set(baselines) & names
    if clash:
        raise ConfigError(f"{where}: run name(s) {', '.join(sorted(clash))} clash with baselines")
    name = values.get("name", "ablation")
    return Grid(name=name, release=release, train_config=dict(base), runs=tuple(runs),
                output_dir=values.get("output_dir") or f"runs/{name}", overrides=dict(values.get("set") or {}),
                batch_size=int(values.get("batch_size", 16)), max_length=int(values.get("max_length", 512)),
                bf16=values.get("bf16"), baselines=tuple(baselines))


def run_config(grid: Grid, run: Run) -> dict:
    """The training config of one run: the shared one, the grid's overrides, the run's own."""
    values = copy.deepcopy(grid.train_config)
    for key, value in {**grid.overrides, **run.overrides}.items():
        _deep_set(values, key, value)
    values["recipe"] = copy.deepcopy(run.recipe)
    values["name"] = run.name
    values.pop("output_dir", None)
    return values


def _release_dir(grid: Grid, out: Path, progress: bool) -> Path:
    from advrace.config import load_config
    from advrace.release import build_release, check_release

    if grid.release.get("path"):
        path = Path(grid.release["path"])
    else:
        path = out / "release"
        build_release(load_config(grid.release["config"]), path, progress=progress)
    check_release(path)
    return path


def ablate(grid: Grid, output_dir: str | Path | None = None, *, resume: bool = False,
           progress: bool = True) -> dict:
    """Train every run, score its best checkpoint on the release, and write one report."""
    from advrace.evaluation import score_release
    from advrace.release import load_manifest
    from advrace.report import write_report

    from .config import config_from_dict
    from .loop import train

    out = Path(output_dir or grid.output_dir)
    out.mkdir(parents=True, exist_ok=True)
    release = _release_dir(grid, out, progress)
    manifest = load_manifest(release)
    if manifest["task"] != "multiple_choice":
        raise ConfigError(f"{release}: ablations train multiple-choice models; this release is {manifest['task']}")
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
                                         max_length=grid.max_length, bf16=grid.bf16, progress=progress)
        sources[run.name] = {"path": str(model), "recipe": run.recipe}
        runs[run.name] = {"model": str(model), "metrics": result["metrics"]}
    for name in grid.baselines:
        scores[name] = score_release(release, name, batch_size=grid.batch_size, progress=progress)
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
    p.add_argument("config", help="ablation grid (YAML), e.g. configs/ablation/sample.yaml")
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
