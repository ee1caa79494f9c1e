"""Benchmark: whole-command wall time of small CharSwap builds, start-up included.

For each size (default 10 and 500 questions) it writes the first N questions of the input as an
AdvRACE release file and times, as fresh processes, `advrace build --attacks charswap` on it and
the released AdvRACE CharSwap script (`bench/original_charswap.py`) on the same file, taking the
median of the repeats; it also times no-op commands (`python -c pass`, `advrace --help`,
`advrace attacks`), the floor any command pays. Bytecode goes to a temporary cache for every
process, as an installed package has it. The figure to read is the ratio.

    python bench/startup.py [PATH] [--sizes 10,500] [--repeat 3] [--workers N]

PATH: any input `advrace build` reads (default: the bundled sample, 77 questions; a size above
the input's count is capped to it), e.g. RACE/dev/middle.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
from advrace.formats import load  # noqa: E402
from advrace.release.export import advrace_record  # noqa: E402

SAMPLE = ROOT / "advrace" / "sample_data" / "race"
ORIGINAL = ROOT / "bench" / "original_charswap.py"


def timed(cmd: list[str], env: dict) -> float:
    t0 = time.perf_counter()
    subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def median_times(cmds: dict[str, list[str]], env: dict, repeat: int) -> dict[str, float]:
    """The median of `repeat` interleaved runs of each command."""
    runs: dict[str, list[float]] = {name: [] for name in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            runs[name].append(timed(cmd, env))
    return {name: statistics.median(ts) for name, ts in runs.items()}


def write_advrace_json(examples: list, path: Path) -> None:
    data = {ex.source_id: advrace_record(ex) for ex in examples}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(SAMPLE))
    ap.add_argument("--format")
    ap.add_argument("--sizes", default="10,500", help="comma-separated question counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--workers", type=int, help="advrace build --workers (default: one per core)")
    results.add_argument(ap)
    args = ap.parse_args()

    sizes = [int(s) for s in args.sizes.split(",")]
    examples = load(args.path, args.format, limit=max(sizes)).examples
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="advrace-startup-") as tmp:
        tmp = Path(tmp)
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env["PYTHONPYCACHEPREFIX"] = str(tmp / "pycache")
        env["ADVRACE_CACHE"] = str(tmp / "cache")  # no word tags from earlier runs

        counts = list(dict.fromkeys(min(s, len(examples)) for s in sizes))
        builds = {}
        for n in counts:
            data = tmp / f"first{n}.json"
            write_advrace_json(examples[:n], data)
            build = [py, "-m", "advrace", "build", "--data", str(data), "--attacks", "charswap",
                     "--out", str(tmp / f"release{n}"), "--quiet"]
            if args.workers:
                build += ["--workers", str(args.workers)]
            builds[n] = {"advrace": build,
                         "original": [py, str(ORIGINAL), str(data), str(tmp / f"orig{n}.json")]}
        for cmd in builds[min(counts)].values():  # untimed: fills the bytecode and file caches
            timed(cmd, env)

        noop = median_times({"python -c pass": [py, "-c", "pass"],
                             "advrace --help": [py, "-m", "advrace", "--help"],
                             "advrace attacks": [py, "-m", "advrace", "attacks"]}, env, args.repeat)
        figures = {f"{name} s": f"{s:.2f}" for name, s in noop.items()}
        print(f"{os.cpu_count()} cores, median of {args.repeat} runs, seconds (start-up included)")
        for name, s in noop.items():
            print(f"  {name:<18} {s:6.2f}")
        for n in counts:
            t = median_times(builds[n], env, args.repeat)
            print(f"{n:>5} questions: advrace build {t['advrace']:6.2f}, original script "
                  f"{t['original']:6.2f}: {t['original'] / t['advrace']:.1f}x faster; "
                  f"{t['advrace'] / noop['advrace --help']:.1f}x `advrace --help`")
            figures[f"{n} questions, advrace / original s"] = (f"{t['advrace']:.2f} / {t['original']:.2f} "
                                                               f"({t['original'] / t['advrace']:.1f}x)")
    if args.record:
        results.record("startup", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
