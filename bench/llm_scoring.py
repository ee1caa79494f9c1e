"""Benchmark: a decoder LM on a release, advrace against lm-evaluation-harness, in one run.

Both score the same questions with the same model object (loaded once), in fp32 on the same
threads: advrace through `CausalLMScorer.predict_mc` (each article encoded once and shared by its
questions, each question's rest once and shared by its options), lm-evaluation-harness (`pip install -e .[lm-eval]`) through the task
folder that `advrace export --format lm-eval` writes, which runs every (context, option) pair.
It prints each one's questions per second, and last:

    advrace N.N q/s, lm-eval M.M q/s: R.Rx; P% same predictions (acc) and Q% (acc_norm)

The goals: 8x or more, 100% same predictions, idle and beside a busy process (`--busy`: a
CPU-burning process runs beside both for the timed part, as on a user's busy machine).
`--per-question` also times advrace with each question's prompt encoded on its own (the path
before articles were shared) and prints that speed-up and how far the scores moved.

That compares advrace with its own export (the per-question protocol). `--race-articles N`
(default 20) then runs bench/lm_eval_race.py: lm-eval's *own* `race` task (one document per
article, the last question scored) against `advrace evaluate --protocol lm-eval-race` on N RACE
articles, with the same `--busy`, and prints that comparison too (0: skip it).

    python bench/llm_scoring.py RELEASE --model smollm2 [--split original] [--limit 40] [--busy]

A release of 40 RACE dev-middle questions to bench on (any RACE data works):
    advrace build --data RACE/dev/middle --attacks charswap --limit 40 --out /tmp/llmbench
"""

from __future__ import annotations

import argparse
import re
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import lm_eval_race as race_bench  # noqa: E402  (bench/lm_eval_race.py)
import results  # noqa: E402  (bench/results.py)
from advrace.core.numbers import argmax  # noqa: E402
from advrace.models.decoders.llm_scoring import CausalLMScorer, load_causal_scorer  # noqa: E402
from advrace.models.protocol.acc_norm import per_character  # noqa: E402
from advrace.release import check_release, read_split  # noqa: E402



def lm_eval_task(folder: Path, split: str) -> str:
    """The name of the exported task that holds `split`."""
    for path in sorted(folder.rglob("*.yaml")):
        name = re.search(r"^task:\s*(\S+)", path.read_text(encoding="utf-8"), re.M)
        if name and name.group(1).endswith(f"_{split}"):
            return name.group(1)
    raise SystemExit(f"no task for split {split} in {folder}")


def run_lm_eval(scorer, release: str, split: str, limit: int, batch_size: int) -> tuple[dict, float]:
    """{record id: per-option log-likelihoods} from lm-evaluation-harness, and its seconds."""
    try:
        from lm_eval import simple_evaluate
        from lm_eval.models.huggingface import HFLM
        from lm_eval.tasks import TaskManager
    except ImportError:
        raise SystemExit("lm-evaluation-harness is not installed: pip install -e .[lm-eval]") from None
    from advrace.release.lm_eval_export import export_lm_eval

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "tasks"
        export_lm_eval(release, folder)
        task = lm_eval_task(folder, split)
        lm = HFLM(pretrained=scorer.model, tokenizer=scorer.tokenizer, batch_size=batch_size, device="cpu")
        start = time.perf_counter()
        out = simple_evaluate(model=lm, tasks=[task], task_manager=TaskManager(include_path=str(folder)),
                              limit=limit, log_samples=True, num_fewshot=0, bootstrap_iters=0)
        seconds = time.perf_counter() - start
    lls = {s["doc"]["id"]: [float(r[0][0]) for r in s["resps"]] for s in out["samples"][task]}
    return lls, seconds


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("release")
    p.add_argument("--model", default="smollm2", help="a causal-LM folder, smollm2 or a Hub name")
    p.add_argument("--split", default="original")
    p.add_argument("--limit", type=int, default=40, help="questions, the split's first (default: 40)")
    p.add_argument("--batch-size", type=int, default=8, help="questions per batch for both (default: 8; "
                                                             "lm-eval gets 4x as many rows, one per option)")
    p.add_argument("--busy", action="store_true", help="run a CPU-burning process beside the timed part")
    p.add_argument("--per-question", action="store_true",
                   help="also time advrace with each question's prompt encoded on its own (articles not "
                        "shared), and print how far its scores are from the shared ones")
    p.add_argument("--race-articles", type=int, default=20,
                   help="then compare with lm-eval's own race task on this many RACE articles "
                        "(bench/lm_eval_race.py; 0: skip)")
    results.add_argument(p)
    args = p.parse_args(argv)
    check_release(args.release)
    examples = read_split(args.release, args.split)[:args.limit]
    scorer = load_causal_scorer(args.model, bf16=False, batch_size=args.batch_size)
    # the same model, each question's prompt its own (the path before articles were shared)
    per_question = CausalLMScorer(scorer.model, scorer.tokenizer, bf16=False, batch_size=args.batch_size,
                                  share_articles=False) if args.per_question else None
    scorer.predict_mc(examples[:2])  # warm-up: first-call allocations are not the method's cost
    burner = race_bench.busy_process() if args.busy else None
    try:
        start = time.perf_counter()
        ours = scorer.predict_mc(examples, progress=True, desc="advrace")
        advrace_s = time.perf_counter() - start
        if per_question is not None:
            start = time.perf_counter()
            alone = per_question.predict_mc(examples, progress=True, desc="advrace, per question")
            per_question_s = time.perf_counter() - start
        theirs, lm_eval_s = run_lm_eval(scorer, args.release, args.split, len(examples), args.batch_size * 4)
    finally:
        if burner is not None:
            burner.terminate()
            burner.wait()
    same = same_norm = 0
    gap = 0.0
    for ex, scores in zip(examples, ours):
        ref = theirs[ex.id]
        same += argmax(scores) == argmax(ref)
        same_norm += argmax(per_character(scores, ex.options)) == argmax(per_character(ref, ex.options))
        gap = max(gap, max(abs(a - b) for a, b in zip(scores, ref)))
    n = len(examples)
    ours_qps, theirs_qps = n / advrace_s, n / lm_eval_s
    print(f"{n} questions of {args.release} ({args.split}), model {args.model}, fp32"
          f"{', beside a busy process' if args.busy else ''}")
    print(f"advrace: {advrace_s:.1f} s; lm-eval: {lm_eval_s:.1f} s; largest log-likelihood gap {gap:.2e}")
    print(f"article sharing: {scorer.decoding()['article_sharing']}")
    if per_question is not None:
        moved = max(abs(a - b) for x, y in zip(ours, alone) for a, b in zip(x, y))
        flips = sum(argmax(x) != argmax(y) for x, y in zip(ours, alone))
        print(f"each question's prompt alone: {per_question_s:.1f} s, articles shared {per_question_s / advrace_s:.2f}x "
              f"faster; largest log-likelihood change {moved:.2e}, {flips} prediction(s) changed")
    print(f"advrace {ours_qps:.2f} q/s, lm-eval {theirs_qps:.2f} q/s: {ours_qps / theirs_qps:.1f}x; "
          f"{100 * same / n:.0f}% same predictions (acc) and {100 * same_norm / n:.0f}% (acc_norm)")
    if args.record:
        results.record("llm_scoring", {
            "questions": n, "model": args.model, "busy": "yes" if args.busy else "no",
            "questions/s, advrace / lm-eval": f"{ours_qps:.2f} / {theirs_qps:.2f}",
            "speed-up": f"{ours_qps / theirs_qps:.1f}x", "same predictions, acc / acc_norm":
            f"{100 * same / n:.0f}% / {100 * same_norm / n:.0f}%", "largest log-likelihood gap": f"{gap:.2e}"}, argv)
    if args.race_articles:
        print("\nlm-eval's own race task against advrace evaluate --protocol lm-eval-race:")
        return race_bench.main(["--articles", str(args.race_articles), "--model", args.model,
                                *(["--busy"] if args.busy else []), *(["--record"] if args.record else [])])
    return 0


if __name__ == "__main__":
    sys.exit(main())
