"""Benchmark: an MC AddSent build with a fluency model over forked workers, the workers sharing
the model their parent loaded (`Attack.preload`, each forked copy probed) against each worker
loading its own (advrace.release.runner.SHARE_MODELS off, as before). The two alternate,
`--repeat` times, each a fresh process (`advrace build`); the splits and stats.json must be
byte-identical; the figure is the ratio of the medians, measured in the same run.

    python bench/fork_shared_model.py [RACE_FOLDER] [--passages 17] [--workers 2] [--model smollm2]
                                      [--repeat 1] [--busy] [--record]

RACE_FOLDER: a folder of RACE passage files (default: the bundled sample's). The first `--passages`
are built; a build forks only with more than one chunk of passages (runner.CHUNK_PASSAGES, 16).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)

SAMPLE = ROOT / "advrace" / "sample_data" / "race"
BUILD = ("import sys; import advrace.release.runner as r; r.SHARE_MODELS = sys.argv[1] == 'shared'; "
         "from advrace.cli import main; sys.exit(main(sys.argv[2:]))")


def passages(folder: Path, n: int, tmp: Path) -> tuple[Path, int]:
    """A RACE folder of the first `n` passage files of `folder` (searched recursively), and its questions."""
    import json

    files = sorted(folder.rglob("*.txt"))[:n]
    out = tmp / "race" / "dev" / "middle"
    out.mkdir(parents=True)
    for f in files:
        shutil.copy(f, out / f.name)
    return tmp / "race" / "dev", sum(len(json.loads(f.read_text(encoding="utf-8"))["questions"]) for f in files)


def build(kind: str, data: Path, out: Path, args, env: dict) -> float:
    cmd = [sys.executable, "-c", BUILD, kind, "build", "--data", str(data), "--attacks", "addsent",
           "--set", f"splits.addsent.fluency_model={args.model}", "--workers", str(args.workers),
           "--out", str(out), "--quiet"]
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, text=True)
    return time.perf_counter() - t0


def release_bytes(out: Path) -> dict:
    return {p.name: p.read_bytes() for p in sorted([*(out / "data").iterdir(), out / "stats.json"])}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(SAMPLE))
    ap.add_argument("--passages", type=int, default=17)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--model", default="smollm2")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--busy", action="store_true", help="run a CPU-burning process beside everything timed")
    results.add_argument(ap)
    args = ap.parse_args()

    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    times: dict[str, list[float]] = {"own": [], "shared": []}
    try:
        with tempfile.TemporaryDirectory(prefix="advrace-fork-shared-") as tmp:
            tmp = Path(tmp)
            data, questions = passages(Path(args.path), args.passages, tmp)
            env = results.subprocess_env(tmp)
            print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}"
                  f"{', beside a busy process' if args.busy else ''}; {args.passages} passages, {questions} questions")
            build("shared", data, tmp / "warm-up", args, env)  # untimed: bytecode, the converted copy
            for i in range(args.repeat):
                for kind in ("own", "shared") if i % 2 == 0 else ("shared", "own"):
                    times[kind].append(build(kind, data, tmp / f"{kind}{i}", args, env))
                    print(f"  {kind}: {times[kind][-1]:.1f} s (load {os.getloadavg()[0]:.1f})")
            same = all(release_bytes(tmp / f"own{i}") == release_bytes(tmp / f"shared{i}")
                       == release_bytes(tmp / "warm-up") for i in range(args.repeat))
    finally:
        if burner:
            burner.kill()
    own, shared = statistics.median(times["own"]), statistics.median(times["shared"])
    print(f"MC AddSent, fluency_model={args.model}, {questions} questions, --workers {args.workers}, median of "
          f"{args.repeat}: each worker loading its own {own:.1f} s, sharing the parent's {shared:.1f} s = "
          f"{own / shared:.2f}x; splits identical: {same}")
    if args.record:
        results.record("fork_shared_model", {
            "busy": "yes" if args.busy else "no", "questions": questions, "workers": args.workers,
            "own loads s": f"{own:.1f}", "shared s": f"{shared:.1f}", "speed-up": f"{own / shared:.2f}x",
            "splits identical": "yes" if same else "NO"})
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
