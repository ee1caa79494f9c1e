"""Benchmark: calibrate the answerability judge's margin on RACE's own distractors, and measure
its recall on the validity corpus's second right answers.

The judge (advrace.models.judge) refuses a candidate when score(candidate) >= score(gold) - margin.
RACE's writers' distractors are wrong by construction, so the share of them the judge would refuse
at a margin is its false-refusal rate there; the calibrated margin is the largest (most refusing)
one at which it refuses at most `--target` (2%) of them. At that margin, the judge is put to the
`second_right_answer` items of tests/validity (each invalid item's new distractor is a right answer
too; each valid twin's is not): recall is the share of invalid items it refuses, the false
refusals the share of valid twins.

    python bench/judge_calibration.py RACE/dev/middle [--judge smollm2] [--limit 300] [--seed 0] [--record]

`--limit`: a seeded subsample of the questions (SmolLM2 on 2 CPU cores scores about two questions
a second); 0 for all. Several judges separated by commas are measured one after the other.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

import results  # noqa: E402  (bench/results.py)
from advrace.core.examples import MCExample  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.models.judge import TOLERANCE, AnswerabilityJudge, load_judge  # noqa: E402

MARGINS = (-1.0, -0.5, -0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2)


def gaps(judge: AnswerabilityJudge, examples: list) -> list[float]:
    """score(distractor) - score(gold) for every original distractor: refused at margin m iff >= -m."""
    rows = judge.option_scores(examples, progress=True)
    return [row[k] - row[ex.label] for ex, row in zip(examples, rows) for k in range(len(ex.options))
            if k != ex.label]


def refusal_rate(values: list[float], margin: float) -> float:
    return sum(v >= -margin - TOLERANCE for v in values) / max(len(values), 1)  # the judge's own rule


def calibrate(values: list[float], target: float) -> float:
    """The largest margin (3 decimals) at which at most `target` of `values` are refused."""
    allowed = math.floor(target * len(values))
    ranked = sorted(values, reverse=True)
    if allowed >= len(ranked):
        return math.inf
    # refuse at most the `allowed` largest: -margin must exceed ranked[allowed]
    margin = math.floor(-ranked[allowed] * 1000) / 1000
    while refusal_rate(values, margin) > target:
        margin -= 0.001
    return round(margin, 3)


def corpus_items() -> list[tuple[MCExample, str, bool]]:
    """(source question, new distractor, valid) of each second_right_answer item."""
    from validity.corpus import load as load_corpus  # tests/validity, the labelled corpus

    out = []
    for item in load_corpus(("second_right_answer",)):
        src, ex = item.source, item.attacked
        old = set(src.options)
        for k, option in enumerate(ex.options):
            if k != ex.label and option not in old:
                out.append((src, option, item.valid))
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="RACE dev-middle (any format advrace reads)")
    ap.add_argument("--judge", default="smollm2", help="model(s), separated by commas (default: smollm2)")
    ap.add_argument("--limit", type=int, default=300, help="seeded subsample of questions; 0: all")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--target", type=float, default=0.02, help="largest share of RACE's distractors refused")
    results.add_argument(ap)
    args = ap.parse_args(argv)
    examples = load(args.data).examples
    total = len(examples)
    if args.limit and args.limit < total:
        examples = random.Random(args.seed).sample(examples, args.limit)
    items = corpus_items()
    figures: dict = {"questions": f"{len(examples)} of {total} (seed {args.seed})", "target": f"{args.target:.0%}"}
    for name in args.judge.split(","):
        start = time.perf_counter()
        judge = load_judge(name, 0.0)
        values = gaps(judge, examples)
        print(f"{name}: {len(examples)} questions of {total} (seed {args.seed}), {len(values)} original "
              f"distractors, {judge.describe()['score']}, {time.perf_counter() - start:.0f} s")
        print(f"  rates the gold above {sum(v < 0 for v in values) / len(values):.1%} of the distractors")
        for margin in MARGINS:
            print(f"  margin {margin:+.2f}: refuses {refusal_rate(values, margin):6.2%} of RACE's distractors")
        margin = calibrate(values, args.target)
        judge.margin = margin
        print(f"  calibrated margin {margin:+.3f}: refuses {refusal_rate(values, margin):.2%} (target {args.target:.0%})")
        verdicts = judge.judge([(src, [d]) for src, d, _ in items])
        invalid = [v[0].refused for (_, _, ok), v in zip(items, verdicts) if not ok]
        valid = [v[0].refused for (_, _, ok), v in zip(items, verdicts) if ok]
        # at margin 0 (refuse whatever it rates at least as likely as the gold): the best it could do
        judge.margin = 0.0
        zero = [judge.refuses(v[0].candidate, v[0].gold) for v in verdicts]
        inv0 = [z for (_, _, ok), z in zip(items, zero) if not ok]
        val0 = [z for (_, _, ok), z in zip(items, zero) if ok]
        print(f"  second_right_answer corpus at {margin:+.3f}: refuses {sum(invalid)} of {len(invalid)} invalid "
              f"(recall {sum(invalid) / len(invalid):.0%}), {sum(valid)} of {len(valid)} valid twins")
        print(f"  at margin 0 (no calibration): refuses {sum(inv0)} of {len(inv0)} invalid, {sum(val0)} of "
              f"{len(val0)} valid, and {refusal_rate(values, 0.0):.1%} of RACE's distractors")
        figures[name] = (f"margin {margin:+.3f} refuses {refusal_rate(values, margin):.2%} of "
                         f"{len(values)} RACE distractors; corpus recall {sum(invalid)}/{len(invalid)}, "
                         f"valid twins refused {sum(valid)}/{len(valid)}; at margin 0: RACE "
                         f"{refusal_rate(values, 0.0):.1%}, recall {sum(inv0)}/{len(inv0)}, "
                         f"valid refused {sum(val0)}/{len(val0)}")
    if args.record:
        results.record("judge_calibration", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
