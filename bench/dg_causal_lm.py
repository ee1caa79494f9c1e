"""Benchmark: distractor generation with a causal-LM generator: tree-attention decoding against
the decoder it replaced, and torch's threads fitted to the machine's load against torch's fixed
count, on an idle machine and beside one busy process.

Prints seconds per question of the attack's candidates (`distractor_generation`, backend
`causal_lm`, the attack's defaults: beam 20, up to 24 tokens, `batch_size` questions decoded
together) with advrace.models.decoders.tree_beam_decoder.CausalDecoder (each prompt's keys and values cached
once and shared by all beams under a tree mask), twice: as the attack runs it, with torch's
threads fitted to the load before each batch (advrace.models.runtime.precision.cpu_threads: one per core
no other process keeps busy), and at torch's fixed count (one per core, or --threads), as before
that policy. It does so on the machine as it is ("idle") and then beside one busy process (a
child that burns one core for the duration: "busy"). Idle, it also times, on the same model and
questions, the decoder CausalDecoder replaced, kept as the fallback `ReorderingDecoder`, which
copies the prompt's cache to every beam, reorders it at every step and decodes one question at a
time; and, to show what decoding questions together adds and that it changes nothing, the new
decoder one question a batch. The runs alternate, batch by batch, so that load from other
processes falls on all. All must give identical candidate lists (and hypotheses: tokens equal,
scores within 1e-5, or 1e-4 between thread counts); the figures to read are the ratios.

With --build it then times, as fresh processes (start-up included), `advrace build --attacks
distractor_generation` on the same questions, idle and busy, with the threads fitted and with
OMP_NUM_THREADS fixing torch's count (the median of --repeat interleaved runs; wall and CPU time:
beside one busy process on 2 cores, a build on one thread that has a core to itself takes as long
as its CPU time, which other jobs on the machine do not change), and checks the releases are
byte-identical. With --baseline PYTHON (another checkout's interpreter, main's say) its `advrace
build` runs instead of the fixed one (a build holds one count whatever the load, so the two run
alike), alternating with this tree's, from a scratch folder: the ratio, whether the DG records
are byte-identical, and each build's seconds a question projected to RACE test's 4,934 questions. --build-only skips the decoding comparisons (their old decoder is slow at 100
questions); --busy is --loads busy.

    python bench/dg_causal_lm.py --data RACE/train.jsonl.gz --level high [--limit 12]
        [--model runs/dg-sample/final] [--build] [--repeat N] [--threads N] [--loads idle,busy]
    python bench/dg_causal_lm.py --data RACE/dev/middle --limit 100 --build-only
        --baseline ../main/.venv/bin/python [--busy]
"""

from __future__ import annotations

import argparse
import contextlib
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
# the environment as given, before advrace's import chooses torch's wait policy for this process
# (precision.choose_omp_wait): each timed build chooses its own, the baseline as its code does
GIVEN_ENV = dict(os.environ)

import results  # noqa: E402  (bench/results.py)
import advrace.attacks.distractor_generation as dg  # noqa: E402
from advrace.models.decoders import beam_search as bs  # noqa: E402
from advrace.models.runtime import precision  # noqa: E402

DEFAULT_MODEL = ROOT / "runs" / "dg-sample" / "final"


def use_decoder(which: str) -> None:
    """The attack's decoder: `old` (one question at a time, as before) or `new`."""
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder, ReorderingDecoder

    dg.CausalDecoder = ReorderingDecoder if which == "old" else CausalDecoder


def questions(path: str, level: str | None, limit: int) -> list:
    from advrace.core.config import DataSpec
    from advrace.formats import load
    from advrace.formats.base import race_level

    # RACE files list a level's passages together: a few hundred questions hold the first of each
    examples = load(DataSpec(path=path).resolved_path(), limit=None if not level else 50 * limit).examples
    return [ex for ex in examples if not level or race_level(ex.id) == level][:limit]


@contextlib.contextmanager
def fixed_threads(fixed: bool):
    """torch's count kept as it is (OMP_NUM_THREADS set, which advrace.models.runtime.precision.cpu_threads
    leaves alone), as before that policy; else fitted to the load."""
    old = os.environ.get("OMP_NUM_THREADS")
    import torch

    if fixed:
        os.environ["OMP_NUM_THREADS"] = str(torch.get_num_threads())
    else:
        os.environ.pop("OMP_NUM_THREADS", None)
    try:
        yield
    finally:
        if old is None:
            os.environ.pop("OMP_NUM_THREADS", None)
        else:
            os.environ["OMP_NUM_THREADS"] = old


@contextlib.contextmanager
def busy(on: bool):
    """One other process keeping a core busy (a child that never sleeps) for the duration."""
    if not on:
        yield
        return
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)  # running before anything is measured
        yield
    finally:
        burner.kill()
        burner.wait()


def timed_candidates(attack, examples: list, which: str, found: list) -> tuple[float, list]:
    """Seconds and candidate lists of `examples` with decoder `old`, `new` (the attack's batch
    size), `new1` (one question at a time) or `fixed` (`new` at torch's fixed thread count);
    each question's hypotheses go to `found`."""
    import dataclasses

    search, config = bs.beam_search, attack.config

    def recording(*args, **kwargs):
        hyps = search(*args, **kwargs)
        found.extend(hyps)
        return hyps

    use_decoder("old" if which == "old" else "new")
    bs.beam_search = recording
    if which == "new1":
        attack.config = dataclasses.replace(config, batch_size=1)
    try:
        with fixed_threads(which == "fixed"):
            t0 = time.perf_counter()
            cands = attack.candidates(examples)
            return time.perf_counter() - t0, cands
    finally:
        bs.beam_search, attack.config = search, config


def same_hypotheses(a: list, b: list, tol: float = 1e-5) -> bool:
    return len(a) == len(b) and all(x.tokens == y.tokens and abs(x.score - y.score) <= tol for x, y in zip(a, b))


def write_race_jsonl(examples: list, path: Path) -> None:
    import json

    rows = [{"example_id": ex.id.rsplit("-", 1)[0], "article": ex.passage, "question": ex.question,
             "options": list(ex.options), "answer": "ABCDEFGH"[int(ex.label)]} for ex in examples]
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")


def children_cpu() -> float:
    """CPU seconds of this process's finished children (the builds; the busy child is counted only
    once it is stopped, after the figures)."""
    import resource

    used = resource.getrusage(resource.RUSAGE_CHILDREN)
    return used.ru_utime + used.ru_stime


RACE_TEST = 4934  # RACE test's questions (middle and high), the projection's size


def build_command(python: str, data: Path, model: str, out: Path) -> list[str]:
    return [python, "-m", "advrace", "build", "--data", str(data), "--format", "race-jsonl",
            "--attacks", "distractor_generation", "--set", f"splits.distractor_generation.model={model}",
            "--workers", "1", "--quiet", "--out", str(out)]


def time_builds(examples: list, model: str, repeat: int, threads: int, loads: list[str],
                baseline: str | None = None) -> dict:
    """Whole `advrace build` commands, threads fitted and, in turn, either fixed at `threads` or
    `baseline`'s interpreter's, under each load, from a scratch folder: median seconds, releases
    compared (the figures)."""
    tmp = Path(tempfile.mkdtemp(prefix="dg-bench-"))
    data = tmp / "questions.jsonl"
    write_race_jsonl(examples, data)
    n, figures = len(examples), {}
    split = Path("data") / "distractor_generation-00000-of-00001.jsonl"
    env = {k: v for k, v in GIVEN_ENV.items() if k != "OMP_NUM_THREADS"}
    # A build holds torch's count from start to end (precision.held_threads), so "fitted" and
    # "fixed" run alike since then; with a baseline, the baseline's build takes fixed's turn.
    builds = {"fitted": (sys.executable, env)}
    if baseline:
        builds["baseline"] = (baseline, env)
    else:
        builds["fixed"] = (sys.executable, {**env, "OMP_NUM_THREADS": str(threads)})
    print(f"advrace build, DG split only, {n} questions, start-up included (median of {repeat}):")
    for load in loads:
        runs: dict[str, list[float]] = {k: [] for k in builds}
        cpu: dict[str, list[float]] = {k: [] for k in builds}
        with busy(load == "busy"):
            for _ in range(repeat):
                for which, (python, run_env) in builds.items():
                    t0, c0 = time.perf_counter(), children_cpu()
                    subprocess.run(build_command(python, data, model, tmp / f"{load}-{which}"), cwd=tmp,
                                   check=True, stdout=subprocess.DEVNULL, env=run_env)
                    runs[which].append(time.perf_counter() - t0)
                    cpu[which].append(children_cpu() - c0)
        print(f"  {load} (load average {os.getloadavg()[0]:.2f} after):")
        wall = {k: statistics.median(v) for k, v in runs.items()}
        for which in builds:
            used = statistics.median(cpu[which])
            print(f"    {which:9} {wall[which]:7.1f} s  {wall[which] / n:5.2f} s/question  CPU {used / n:5.2f} "
                  f"s/question  RACE test ({RACE_TEST}) projected {wall[which] / n * RACE_TEST / 3600:5.2f} h")
            figures[f"build s/question {load}, {which}"] = f"{wall[which] / n:.2f}"
            figures[f"build CPU s/question {load}, {which}"] = f"{used / n:.2f}"
        if "fixed" in wall:
            print(f"    fixed / fitted {wall['fixed'] / wall['fitted']:5.2f}x")
        if baseline:
            print(f"    baseline / this tree {wall['baseline'] / wall['fitted']:5.2f}x")
            figures[f"build speed-up {load}, baseline / this tree"] = f"{wall['baseline'] / wall['fitted']:.2f}x"
    releases = {which: {(tmp / f"{load}-{which}" / split).read_bytes() for load in loads} for which in builds}
    same = len(set().union(*releases.values())) == 1
    print(f"  releases' DG records identical (every build, every load): {same}")
    figures["releases identical"] = same
    return figures


def main() -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="RACE questions (any format advrace reads)")
    p.add_argument("--level", choices=("high", "middle"), help="only RACE questions of this level")
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="a causal_lm DG checkpoint (default: %(default)s)")
    p.add_argument("--limit", type=int, default=12, help="questions (the baselines are slow)")
    p.add_argument("--threads", type=int, help="torch's thread count (default: torch's, one per core); "
                   "the policy fits below it")
    p.add_argument("--loads", default="idle,busy", help="idle (the machine as it is), busy (beside one "
                   "process burning a core), or both (default: %(default)s)")
    p.add_argument("--build", action="store_true", help="also time whole `advrace build` commands")
    p.add_argument("--repeat", type=int, default=1, help="runs of each build command (median)")
    p.add_argument("--build-only", action="store_true", help="only the whole builds (implies --build)")
    p.add_argument("--baseline", help="another checkout's Python (main's .venv/bin/python): its build "
                   "is timed beside this tree's and its DG records compared")
    p.add_argument("--busy", action="store_true", help="only beside one busy process (--loads busy)")
    results.add_argument(p)
    args = p.parse_args()
    loads = ["busy"] if args.busy else [x.strip() for x in args.loads.split(",") if x.strip()]
    if not loads or set(loads) - {"idle", "busy"}:
        p.error("--loads takes idle, busy or idle,busy")
    if args.threads:
        torch.set_num_threads(args.threads)
    threads = torch.get_num_threads()
    examples = questions(args.data, args.level, args.limit)
    if args.build_only:
        built = time_builds(examples, args.model, args.repeat, threads, loads, args.baseline)
        if args.record:
            results.record("dg_causal_lm", {"questions": len(examples), "cores": precision.usable_cores(), **built})
        return int(not built["releases identical"])
    attack = dg.DistractorGeneration({"model": args.model})
    attack._load()
    cfg = attack.config
    print(f"{len(examples)} questions, beam {cfg.beam_size}, up to {cfg.max_target_tokens} tokens, "
          f"{cfg.batch_size} questions a batch (new decoder), {precision.usable_cores()} cores, "
          f"torch's count {threads} threads")
    timed_candidates(attack, examples[:1], "new", [])  # warm-up, not counted
    labels = {"new": "new decoder, threads fitted", "fixed": f"  the same, fixed at {threads} threads",
              "new1": "  the same, one question a batch", "old": "old decoder (reorder_cache)"}
    chosen: list[int] = []
    fit = precision.fitted_threads

    def recording_fit(*a, **k):
        chosen.append(fit(*a, **k))
        return chosen[-1]

    precision.fitted_threads = recording_fit
    n, status = len(examples), 0
    figures = {"questions": n, "beam": cfg.beam_size, "cores": precision.usable_cores()}
    for load in loads:
        runs = ("new", "fixed", "new1", "old") if load == "idle" else ("new", "fixed")
        times = dict.fromkeys(runs, 0.0)
        cands: dict[str, list] = {k: [] for k in runs}
        hyps: dict[str, list] = {k: [] for k in runs}
        chosen.clear()
        with busy(load == "busy"):
            elsewhere = precision.busy_elsewhere()
            for i in range(0, n, cfg.batch_size):
                for which in runs:
                    s, c = timed_candidates(attack, examples[i:i + cfg.batch_size], which, hyps[which])
                    times[which] += s
                    cands[which] += c
        print(f"{load}: {elsewhere:.2f} cores busy elsewhere at the start, load average {os.getloadavg()[0]:.2f}, "
              f"threads fitted {sorted(set(chosen))}")
        for which in runs:
            print(f"  {labels[which]:34} {times[which] / n:7.2f} s/question ({times[which]:.1f} s)")
        print(f"  {'fixed / fitted':34} {times['fixed'] / times['new']:7.2f}x")
        figures[f"s/question {load}, fitted / fixed threads"] = f"{times['new'] / n:.2f} / {times['fixed'] / n:.2f}"
        figures[f"{load} threads fitted"] = ",".join(map(str, sorted(set(chosen))))
        if "old" in runs:
            print(f"  {'old / new decoder':34} {times['old'] / times['new']:7.2f}x")
            figures["decoder speed-up (idle)"] = f"{times['old'] / times['new']:.2f}x"
        base = "old" if "old" in runs else "new"
        for which in (w for w in runs if w != base):
            same = sum(a == b for a, b in zip(cands[which], cands[base]))
            # another thread count sums in another order: scores move a little more (1e-5 measured)
            tol = 1e-4 if "fixed" in (which, base) or load == "busy" else 1e-5
            same_h = sum(same_hypotheses(a, b, tol) for a, b in zip(hyps[which], hyps[base]))
            worst = max((abs(x.score - y.score) for a, b in zip(hyps[which], hyps[base]) for x, y in zip(a, b)),
                        default=0.0)
            print(f"  {which} vs {base}: identical candidate lists {same}/{n}, identical hypotheses {same_h}/{n} "
                  f"(largest score difference {worst:.1e})")
            status |= int(not same == same_h == n)
            figures[f"{load} {which} vs {base}, identical candidate lists"] = f"{same}/{n}"
    precision.fitted_threads = fit
    if args.build:
        built = time_builds(examples, args.model, args.repeat, threads, loads, args.baseline)
        status |= int(not built["releases identical"])
        figures.update(built)
    if args.record:
        results.record("dg_causal_lm", figures)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
