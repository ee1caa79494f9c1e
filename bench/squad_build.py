"""Benchmark: the SQuAD build, AddOneSent and AddSentMod with their answer model (SmolLM2), over
all of XQuAD-en's 1,190 questions, and its projection to SQuAD v1.1 dev's 10,570.

Each side is `advrace build` run as the user runs it, in a fresh process, timed wall to wall
(start-up and model loads included): the build as it is now, and a baseline in the same run on
the same first `--baseline-limit` questions (default 300: four chunks of passages, so that both
workers have work), alternated (baseline, build, baseline, build for `--repeats 2`) so that a
change of load hits both; then the build alone on all the questions (`--limit`, default all). The baseline is another checkout's `advrace` (`--baseline-cli`, e.g.
main's before the batching), or, where none is given, this checkout with the scoring batches of
one (`answer_batch_size: 1`: the closed-book answers and the PMI one question at a time).
It prints each side's seconds and questions per second, the ratio, and the projection:

    build 1190 q in S s = Q q/s; on 300: build S s, baseline S s, R.Rx; SQuAD dev's 10,570: M.M min

The projection, from the build of all the questions, scales the time after the fixed part (start-up and the model's load, measured as
the build of `--fixed-limit` questions) linearly with the questions: the work per question is
the same on SQuAD dev (its passages have about 5 questions each, as XQuAD's), but the fixed part
is paid once. `--busy`: a CPU-burning process runs beside every timed build. `--rules-alone`:
also the build of all the questions with `answer_model: ""` (Jia and Liang's rules alone, each
sentence drawn at random: no closed-book answers, PMI or fluency), projected the same way; the
difference is what the answer model's steps cost.

    python bench/squad_build.py XQUAD_EN_JSON [--limit N] [--baseline-limit N] [--baseline-cli PATH]
                                [--busy] [--rules-alone] [--record]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)

SQUAD_DEV = 10_570
ATTACKS = "addonesent,addsentmod"
RULES_ALONE = ["--set", 'splits.addonesent.answer_model=""', "--set", 'splits.addsentmod.answer_model=""']
ONE_AT_A_TIME = ["--set", "splits.addonesent.answer_batch_size=1", "--set", "splits.addsentmod.answer_batch_size=1"]


def advrace_cli() -> list[str]:
    here = Path(sys.executable).with_name("advrace")
    return [str(here)] if here.exists() else [sys.executable, "-m", "advrace"]


def timed_build(cli: list[str], data: str, limit: int | None, out: Path, extra=()) -> float:
    """Wall seconds of one `advrace build` in a fresh process."""
    cmd = [*cli, "build", "--data", data, "--attacks", ATTACKS, "--seed", "2017", "--out", str(out), "--quiet",
           *(["--limit", str(limit)] if limit else []), *extra]
    t0 = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - t0


def same_release(a: Path, b: Path) -> bool:
    """Whether two releases hold the same records (the manifests differ in their dates)."""
    names = sorted(str(p.relative_to(a)) for p in a.rglob("*.jsonl"))
    return bool(names) and names == sorted(str(p.relative_to(b)) for p in b.rglob("*.jsonl")) and \
        all((a / n).read_bytes() == (b / n).read_bytes() for n in names)


def projection(seconds: float, fixed: float, questions: int) -> float:
    """Minutes for SQuAD dev: the fixed part once, the rest per question."""
    return (fixed + (seconds - fixed) * SQUAD_DEV / questions) / 60


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("data", help="XQuAD-en (xquad.en.json), or any SQuAD v1.1 file")
    p.add_argument("--limit", type=int, default=None, help="the file's first N questions (default: all)")
    p.add_argument("--baseline-limit", type=int, default=300,
                   help="the first N questions, built by both sides for the ratio (default 300)")
    p.add_argument("--baseline-cli", default=None,
                   help="another checkout's advrace (its .venv/bin/advrace); default: this one, batches of one")
    p.add_argument("--fixed-limit", type=int, default=5, help="questions of the build that measures the fixed part")
    p.add_argument("--repeats", type=int, default=1, help="alternated runs of each side (the fastest kept)")
    p.add_argument("--busy", action="store_true", help="run a CPU-burning process beside every timed build")
    p.add_argument("--rules-alone", action="store_true",
                   help='also time all the questions with answer_model: "" (the rules alone, no model)')
    results.add_argument(p)
    args = p.parse_args(argv)
    from advrace.formats import load

    questions = len(load(args.data, limit=args.limit).examples)
    compared = min(args.baseline_limit, questions)
    cli = advrace_cli()
    base_cli, base_extra = ((args.baseline_cli.split(), ()) if args.baseline_cli else (cli, ONE_AT_A_TIME))
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    work = Path(tempfile.mkdtemp(prefix="squad-build-"))
    try:
        fixed = timed_build(cli, args.data, args.fixed_limit, work / "fixed")
        base, fast = [], []
        for _ in range(args.repeats):
            base.append(timed_build(base_cli, args.data, compared, work / "base", base_extra))
            fast.append(timed_build(cli, args.data, compared, work / "fast"))
        same = same_release(work / "base", work / "fast")
        full = timed_build(cli, args.data, args.limit, work / "full")
        rules = rules_fixed = None
        if args.rules_alone:
            rules_fixed = timed_build(cli, args.data, args.fixed_limit, work / "rules-fixed", RULES_ALONE)
            rules = timed_build(cli, args.data, args.limit, work / "rules", RULES_ALONE)
    finally:
        if burner is not None:
            burner.terminate()
            burner.wait()
        shutil.rmtree(work, ignore_errors=True)
    b, f = min(base), min(fast)
    load_avg = os.getloadavg()[0]
    minutes = projection(full, fixed, questions)
    print(f"build    {questions} q in {full:.1f} s = {questions / full:.2f} q/s")
    print(f"on the first {compared}: build {f:.1f} s, baseline {b:.1f} s "
          f"({'another checkout' if args.baseline_cli else 'batches of one'}): {b / f:.2f}x; "
          f"releases {'the same' if same else 'DIFFER'}")
    print(f"fixed part {fixed:.1f} s; SQuAD dev's {SQUAD_DEV:,}: {minutes:.1f} min"
          f"{', beside a busy process' if args.busy else ''}; load {load_avg:.1f}")
    figures = {
        "questions": questions, "busy": "yes" if args.busy else "no", "build s": f"{full:.1f}",
        "q/s": f"{questions / full:.2f}", "compared on": compared, "build s (compared)": f"{f:.1f}",
        "baseline s": f"{b:.1f}", "speed-up": f"{b / f:.2f}x", "same release": "yes" if same else "no",
        "fixed s": f"{fixed:.1f}", "SQuAD dev min (projected)": f"{minutes:.1f}"}
    if rules is not None:
        rules_minutes = projection(rules, rules_fixed, questions)
        print(f"rules alone (answer_model \"\"): {questions} q in {rules:.1f} s, fixed part {rules_fixed:.1f} s; "
              f"SQuAD dev's {SQUAD_DEV:,}: {rules_minutes:.1f} min; the answer model's steps: "
              f"{full - rules:.1f} s, {100 * (full - rules) / full:.0f}% of the build")
        figures.update({"rules alone s": f"{rules:.1f}", "rules alone SQuAD dev min (projected)": f"{rules_minutes:.1f}",
                        "answer model's share": f"{100 * (full - rules) / full:.0f}%"})
    if args.record:
        results.record("squad_build", figures, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
