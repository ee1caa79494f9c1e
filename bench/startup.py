"""Benchmark: whole-command wall time of small rule-based builds, start-up included.

For each size (default 10 and 500 questions) it writes the first N questions of the input as an
AdvRACE release file and times, as fresh processes, `advrace build --attacks charswap,addsent`
on it and the released AdvRACE scripts for the same attacks on the same file, taking the median
of the repeats; it also times no-op commands (`python -c pass`, `advrace --help`, `advrace
attacks`), the floor any command pays. Bytecode goes to a temporary cache for every process, as
an installed package has it, and advrace's cache folder is a fresh temporary one, filled by an
untimed build of the smallest size (the word-tag lexicon and WordNet's parsed index, as after a
user's first build). The figure to read is the ratio.

The baseline ("the original scripts") is, per attack asked, the released AdvRACE script run as
its own process: CharSwap is `bench/original_charswap.py` (Attacks/charSwap/charAttack.py);
AddSent is `bench/original_addsent.py`, both of the release's steps (the nearest GloVe words of
the questions' words by a KD-tree, `find_squad_nearby_words.py`, then `AddSent.py`). Both are
kept as released apart from substitutions that let them run offline, each of which makes them
faster, so the ratio is an underestimate; their docstrings list them. The baseline's time is the
sum of its scripts, and each script's share is printed.

    python bench/startup.py [PATH] [--sizes 10,500] [--repeat 3] [--attacks charswap,addsent] [--workers N]

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
ORIGINALS = {"charswap": ROOT / "bench" / "original_charswap.py",
             "addsent": ROOT / "bench" / "original_addsent.py"}


def timed(cmds: list[list[str]], env: dict) -> list[float]:
    """Seconds of each command, run one after the other."""
    out = []
    for cmd in cmds:
        t0 = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        out.append(time.perf_counter() - t0)
    return out


def median_times(cmds: dict[str, list[list[str]]], env: dict, repeat: int) -> dict[str, float]:
    """The median of `repeat` interleaved runs of each command list (its commands' total)."""
    return {name: statistics.median(sum(t) for t in ts) for name, ts in median_runs(cmds, env, repeat).items()}


def median_runs(cmds: dict[str, list[list[str]]], env: dict, repeat: int) -> dict[str, list[list[float]]]:
    runs: dict[str, list[list[float]]] = {name: [] for name in cmds}
    for _ in range(repeat):
        for name, cmd in cmds.items():
            runs[name].append(timed(cmd, env))
    return runs


def write_advrace_json(examples: list, path: Path) -> None:
    data = {ex.source_id: advrace_record(ex) for ex in examples}
    path.write_text(json.dumps(data, ensure_ascii=False), encoding="utf-8")


def commands(n: int, data: Path, tmp: Path, attacks: list[str], workers: int | None) -> dict[str, list[list[str]]]:
    """The advrace build and the original scripts, one after the other, for the same file."""
    py = sys.executable
    build = [py, "-m", "advrace", "build", "--data", str(data), "--attacks", ",".join(attacks),
             "--out", str(tmp / f"release{n}"), "--quiet"]
    if workers:
        build += ["--workers", str(workers)]
    original = []
    for attack in attacks:
        cmd = [py, str(ORIGINALS[attack]), str(data), str(tmp / f"orig-{attack}{n}.json")]
        if attack == "addsent":  # WordNet as advrace's first build copied it (Debian's files)
            cmd.append(str(tmp / "cache" / "nltk_data"))
        original.append(cmd)
    return {"advrace": [build], "original": original}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(SAMPLE))
    ap.add_argument("--format")
    ap.add_argument("--sizes", default="10,500", help="comma-separated question counts")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--attacks", default="charswap,addsent", help=f"any of {', '.join(ORIGINALS)}")
    ap.add_argument("--workers", type=int, help="advrace build --workers (default: one per core)")
    results.add_argument(ap)
    args = ap.parse_args()

    attacks = args.attacks.split(",")
    if set(attacks) - set(ORIGINALS):
        ap.error(f"--attacks: only {', '.join(ORIGINALS)} have an original script to time")
    sizes = [int(s) for s in args.sizes.split(",")]
    examples = load(args.path, args.format, limit=max(sizes)).examples
    py = sys.executable
    with tempfile.TemporaryDirectory(prefix="advrace-startup-") as tmp:
        tmp = Path(tmp)
        env = results.subprocess_env(tmp)
        env["ADVRACE_CACHE"] = str(tmp / "cache")  # nothing from earlier runs

        counts = list(dict.fromkeys(min(s, len(examples)) for s in sizes))
        builds = {}
        for n in counts:
            data = tmp / f"first{n}.json"
            write_advrace_json(examples[:n], data)
            builds[n] = commands(n, data, tmp, attacks, args.workers)
        for cmds in builds[min(counts)].values():  # untimed, advrace first: fills the caches
            timed(cmds, env)

        noop = median_times({"python -c pass": [[py, "-c", "pass"]],
                             "advrace --help": [[py, "-m", "advrace", "--help"]],
                             "advrace attacks": [[py, "-m", "advrace", "attacks"]]}, env, args.repeat)
        figures = {f"{name} s": f"{s:.2f}" for name, s in noop.items()}
        print(f"{os.cpu_count()} cores, attacks {','.join(attacks)}, median of {args.repeat} runs, "
              "seconds (start-up included)")
        for name, s in noop.items():
            print(f"  {name:<18} {s:6.2f}")
        for n in counts:
            figures.update(report(n, median_runs(builds[n], env, args.repeat), attacks, noop["advrace --help"]))
    if args.record:
        results.record("startup", figures)
    return 0


def report(n: int, runs: dict[str, list[list[float]]], attacks: list[str], help_s: float) -> dict[str, str]:
    """Prints one size's line; returns its figures for the results page."""
    mine = statistics.median(sum(t) for t in runs["advrace"])
    theirs = statistics.median(sum(t) for t in runs["original"])
    parts = ", ".join(f"{a} {statistics.median(t[i] for t in runs['original']):.2f}" for i, a in enumerate(attacks))
    print(f"{n:>5} questions: advrace build {mine:6.2f}, original scripts {theirs:6.2f} ({parts}): "
          f"{theirs / mine:.1f}x faster; {mine / help_s:.1f}x `advrace --help`")
    return {f"{n} questions, advrace / original s": f"{mine:.2f} / {theirs:.2f} ({theirs / mine:.1f}x)",
            f"{n} questions, original s by script": parts}


if __name__ == "__main__":
    sys.exit(main())
