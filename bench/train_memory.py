"""Benchmark: peak resident memory and time to the first step of `advrace train` on a data set.

Four runs of the same config, each in its own process, stopped after one optimiser step:

1. eager: features encoded into Python objects in memory (`feature_cache: false`), as every run
   did before the feature cache, on the first SLICE questions: the baseline, on data it can hold;
2. the feature cache (Arrow, memory-mapped) on the same slice, from an empty cache;
3. the feature cache on all of PATH, from an empty cache;
4. the same again: the cache is warm, nothing is encoded.

Peak memory is each process's own high-water mark (ru_maxrss): the training process, and the
largest of the `map` workers that encode. Figures are printed against the eager baseline of the
same run, since these machines are noisy.

    python bench/train_memory.py CONFIG PATH [--format race-jsonl] [--slice 2000] [--set KEY=VALUE ...]

CONFIG: a training config (configs/train/cpu-smoke.yaml, de-cpu.yaml, dg-cpu.yaml, adv-mix.yaml
with --set model=minilm ...). PATH: its training data, e.g. RACE train (76,303 questions). The
dev set is left out: the runs measure reading and encoding the training set.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import results  # bench/results.py

ROOT = Path(__file__).resolve().parents[1]

DRIVER = """
import json, resource, sys
from advrace.training import train
from advrace.training.config import load_config

config, overrides, out = json.loads(sys.argv[1])
metrics = train(load_config(config, overrides), output_dir=out, progress=False)["metrics"]
mb = lambda who: resource.getrusage(who).ru_maxrss / 1024
print(json.dumps({"questions": metrics["train_questions"], "features": metrics["train_features"],
                  "added": metrics["added_questions"], "first_step": metrics["first_step_seconds"],
                  "built": metrics["feature_tables_built"], "main_mb": mb(resource.RUSAGE_SELF),
                  "workers_mb": mb(resource.RUSAGE_CHILDREN)}))
"""


def run(config: str, overrides: list[str], out: Path) -> dict:
    done = subprocess.run([sys.executable, "-c", DRIVER, json.dumps([config, overrides, str(out)])],
                          cwd=ROOT, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"run failed ({' '.join(overrides)}):\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("config", help="a training config")
    ap.add_argument("path", help="the training data")
    ap.add_argument("--format", default=None, help="its format (default: detected)")
    ap.add_argument("--slice", type=int, default=2000,
                    help="questions the eager baseline encodes (default 2000)")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="config overrides, as for `advrace train` (repeatable)")
    ap.add_argument("--skip-full", action="store_true", help="only the slice: runs 1 and 2")
    results.add_argument(ap)
    args = ap.parse_args()

    config = str(Path(args.config).resolve())  # the runs start in the repository, not here
    data = [f"train.path={Path(args.path).resolve()}"] + ([f"train.format={args.format}"] if args.format else [])
    common = data + ["dev=null", "max_steps=1", "save_every_steps=null", "tensorboard=false"] + args.set
    with tempfile.TemporaryDirectory(prefix="train-memory-") as tmp:
        tmp = Path(tmp)
        runs = [("eager, slice", ["feature_cache=false", f"train.limit={args.slice}"]),
                ("cache, slice, cold", [f"feature_cache={tmp / 'cache-slice'}", f"train.limit={args.slice}"])]
        if not args.skip_full:
            runs += [("cache, all, cold", [f"feature_cache={tmp / 'cache'}", "train.limit=null"]),
                     ("cache, all, warm", [f"feature_cache={tmp / 'cache'}", "train.limit=null"])]
        measured = []
        for i, (name, extra) in enumerate(runs):
            print(f"{name} ...", file=sys.stderr, flush=True)
            measured.append((name, run(config, common + extra, tmp / f"run-{i}")))

    base = measured[0][1]
    print(f"{args.config} on {args.path} ({' '.join(args.set) or 'as configured'})")
    print(f"{'run':20} {'questions':>9} {'features':>9} {'main MB':>8} {'workers MB':>10} "
          f"{'first step s':>12} {'main memory':>12} {'first step':>10}")
    for name, r in measured:
        print(f"{name:20} {r['questions']:9,} {r['features']:9,} {r['main_mb']:8.0f} {r['workers_mb']:10.0f} "
              f"{r['first_step']:12.1f} {r['main_mb'] / base['main_mb']:11.2f}x "
              f"{r['first_step'] / base['first_step']:9.2f}x")
    print("(the last two columns: against the eager run on the slice)")
    if args.record:
        results.record("train_memory", {
            name: f"{r['features']:,} features, peak {r['main_mb']:,.0f} MB main / {r['workers_mb']:,.0f} MB worker, "
                  f"first step {r['first_step']:.1f} s" for name, r in measured})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
