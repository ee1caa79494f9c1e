"""Benchmark: distractor generation with a causal-LM generator, tree-attention decoding against
the decoder it replaced.

Prints seconds per question of the attack's candidates (`distractor_generation`, backend
`causal_lm`, the attack's defaults: beam 10, up to 24 tokens, `batch_size` questions decoded
together) with advrace.models.decoders.causal_encoding.CausalDecoder (each prompt's keys and values cached
once and shared by all beams under a tree mask) and with a baseline measured in the same run, on
the same model and questions: the decoder it replaced, kept as the fallback `ReorderingDecoder`, which
copies the prompt's cache to every beam, reorders it at every step and decodes one question at a
time; and, to show what decoding questions together adds and that it changes nothing, the new
decoder one question a batch. They alternate, batch by batch, so that load from other
processes falls on all. All must give identical candidate lists (and hypotheses: tokens equal,
scores within 1e-5); the figure to read is the ratio.

With --build it then times, as fresh processes (start-up included), `advrace build --attacks
distractor_generation` on the same questions with each decoder, taking the median of --repeat
interleaved runs, and checks the two releases are byte-identical.

    python bench/dg_causal_lm.py --data RACE/train.jsonl.gz --level high [--limit 12]
        [--model runs/dg-sample/final] [--build] [--threads N]
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
import advrace.attacks.distractor_generation as dg  # noqa: E402
from advrace.models.decoders import beam_search as bs  # noqa: E402

DEFAULT_MODEL = ROOT / "runs" / "dg-sample" / "final"


def use_decoder(which: str) -> None:
    """The attack's decoder: `old` (one question at a time, as before) or `new`."""
    from advrace.models.decoders.causal_encoding import CausalDecoder, ReorderingDecoder

    dg.CausalDecoder = ReorderingDecoder if which == "old" else CausalDecoder


def questions(path: str, level: str | None, limit: int) -> list:
    from advrace.core.config import DataSpec
    from advrace.formats import load
    from advrace.formats.base import race_level

    # RACE files list a level's passages together: a few hundred questions hold the first of each
    examples = load(DataSpec(path=path).resolved_path(), limit=None if not level else 50 * limit).examples
    return [ex for ex in examples if not level or race_level(ex.id) == level][:limit]


def timed_candidates(attack, examples: list, which: str, found: list) -> tuple[float, list]:
    """Seconds and candidate lists of `examples` with decoder `old`, `new` (the attack's batch
    size) or `new1` (one question at a time); each question's hypotheses go to `found`."""
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


def time_builds(examples: list, model: str, repeat: int, threads: int | None) -> dict:
    """Whole `advrace build` commands with each decoder: median seconds, releases compared (the figures)."""
    tmp = Path(tempfile.mkdtemp(prefix="dg-bench-"))
    data = tmp / "questions.jsonl"
    write_race_jsonl(examples, data)
    runs: dict[str, list[float]] = {"new": [], "old": []}
    for _ in range(repeat):
        for which in runs:
            cmd = [sys.executable, __file__, "--advrace", which, "build", "--data", str(data),
                   "--format", "race-jsonl", "--attacks", "distractor_generation", "--set",
                   f"splits.distractor_generation.model={model}", "--workers", "1", "--quiet",
                   "--out", str(tmp / which)]
            env = None
            if threads:
                import os

                env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
            t0 = time.perf_counter()
            subprocess.run(cmd, cwd=ROOT, check=True, stdout=subprocess.DEVNULL, env=env)
            runs[which].append(time.perf_counter() - t0)
    n = len(examples)
    new, old = statistics.median(runs["new"]), statistics.median(runs["old"])
    print(f"advrace build, DG split only, {n} questions, start-up included (median of {repeat}):")
    print(f"  new decoder: {new:7.1f} s   {new / n:6.2f} s/question")
    print(f"  old decoder: {old:7.1f} s   {old / n:6.2f} s/question")
    print(f"  speed-up:    {old / new:7.2f}x")
    split = Path("data") / "distractor_generation-00000-of-00001.jsonl"
    same = (tmp / "new" / split).read_bytes() == (tmp / "old" / split).read_bytes()
    print(f"  releases' DG records identical: {same}")
    return {"build s/question, new / old": f"{new / n:.2f} / {old / n:.2f}", "build speed-up": f"{old / new:.2f}x",
            "releases identical": same}


def main() -> int:
    import torch

    if len(sys.argv) > 2 and sys.argv[1] == "--advrace":  # a build with one decoder (time_builds)
        use_decoder(sys.argv[2])
        from advrace.cli import main as cli

        sys.argv = ["advrace", *sys.argv[3:]]
        return cli()
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="RACE questions (any format advrace reads)")
    p.add_argument("--level", choices=("high", "middle"), help="only RACE questions of this level")
    p.add_argument("--model", default=str(DEFAULT_MODEL), help="a causal_lm DG checkpoint (default: %(default)s)")
    p.add_argument("--limit", type=int, default=12, help="questions (the baseline is slow)")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    p.add_argument("--build", action="store_true", help="also time whole `advrace build` commands")
    p.add_argument("--repeat", type=int, default=1, help="runs of each build command (median)")
    results.add_argument(p)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    examples = questions(args.data, args.level, args.limit)
    attack = dg.DistractorGeneration({"model": args.model})
    attack._load()
    cfg = attack.config
    print(f"{len(examples)} questions, beam {cfg.beam_size}, up to {cfg.max_target_tokens} tokens, "
          f"{cfg.batch_size} questions a batch (new decoder), {torch.get_num_threads()} threads")
    timed_candidates(attack, examples[:1], "new", [])  # warm-up, not counted
    runs = {"new": "new decoder (tree attention)", "new1": "  the same, one question a batch",
            "old": "old decoder (reorder_cache)"}
    times = dict.fromkeys(runs, 0.0)
    cands: dict[str, list] = {k: [] for k in runs}
    hyps: dict[str, list] = {k: [] for k in runs}
    for i in range(0, len(examples), cfg.batch_size):
        for which in runs:
            s, c = timed_candidates(attack, examples[i:i + cfg.batch_size], which, hyps[which])
            times[which] += s
            cands[which] += c
    n = len(examples)
    for which, label in runs.items():
        print(f"{label:34} {times[which] / n:7.2f} s/question ({times[which]:.1f} s)")
    print(f"{'speed-up':34} {times['old'] / times['new']:7.2f}x")
    status = 0
    figures = {"questions": n, "beam": cfg.beam_size, "s/question, new / old":
               f"{times['new'] / n:.2f} / {times['old'] / n:.2f}", "speed-up": f"{times['old'] / times['new']:.2f}x"}
    for which in ("new", "new1"):
        same = sum(a == b for a, b in zip(cands[which], cands["old"]))
        same_h = sum(same_hypotheses(a, b) for a, b in zip(hyps[which], hyps["old"]))
        worst = max((abs(x.score - y.score) for a, b in zip(hyps[which], hyps["old"]) for x, y in zip(a, b)),
                    default=0.0)
        print(f"{which} vs old: identical candidate lists {same}/{n}, identical hypotheses {same_h}/{n} "
              f"(largest score difference {worst:.1e})")
        status |= int(not same == same_h == n)
        figures[f"{which} vs old, identical candidate lists"] = f"{same}/{n}"
    if args.build:
        built = time_builds(examples, args.model, args.repeat, args.threads)
        status |= int(not built["releases identical"])
        figures.update(built)
    if args.record:
        results.record("dg_causal_lm", figures)
    return status


if __name__ == "__main__":
    raise SystemExit(main())
