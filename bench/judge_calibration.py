"""Benchmark: calibrate the answerability judge's margin on RACE's own distractors, measure its
recall on the validity corpus's second right answers, and say whether the model can judge at all.

The judge (advrace.models.judge) refuses a candidate when score(candidate) >= score(gold) - margin.
RACE's writers' distractors are wrong by construction, so the share of them the judge would refuse
at a margin is its false-refusal rate there; the calibrated margin is the largest one at which it
refuses at most `--target` (2%) of them (`AnswerabilityJudge.calibrate`, as the attacks and the audit
calibrate on a release's own questions). At that margin, the judge is put to the
`second_right_answer` items of tests/validity (each invalid item's new distractor is a right answer
too; each valid twin's is not): recall is the share of invalid items it refuses, the false
refusals the share of valid twins. A model whose calibrated margin is below 0 (it cannot refuse
even the gold restated) or whose recall is 0 is too weak to judge: advrace refuses it.

    python bench/judge_calibration.py RACE/dev/middle [--judge smollm2] [--limit 300] [--seed 0] [--record]

`--limit`: a seeded subsample of the questions (SmolLM2 on 2 CPU cores scores about two questions
a second); 0 for all. Several judges separated by commas are measured one after the other; the
models advrace refuses by name (`advrace.models.judge.TOO_WEAK`) are measured too.
"""

from __future__ import annotations

import argparse
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
from advrace.models.judge import make_judge  # noqa: E402

MARGINS = (-1.0, -0.5, -0.3, -0.2, -0.1, -0.05, 0.0, 0.05, 0.1, 0.2)


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
        judge = make_judge(name)
        pairs = [p for row in judge.distractor_scores(examples, progress=True) for p in row]
        print(f"{name}: {len(examples)} questions of {total} (seed {args.seed}), {len(pairs)} original "
              f"distractors, {judge.describe()['score']}, {time.perf_counter() - start:.0f} s")
        rate = lambda margin: sum(judge.refuses(d, g, margin) for d, g in pairs) / len(pairs)  # noqa: E731
        zero = rate(0.0)
        print(f"  rates the gold above {1 - zero:.1%} of the distractors")
        for margin in MARGINS:
            print(f"  margin {margin:+.2f}: refuses {zero if margin == 0 else rate(margin):6.2%} of RACE's distractors")
        found = judge.calibrate(pairs, args.target)
        margin = found.margin
        print(f"  calibrated margin {margin:+.4g}: refuses {found.refusal_rate:.2%} (target {args.target:.0%})")
        verdicts = judge.judge([(src, [d]) for src, d, _ in items])
        invalid = [v[0].refused for (_, _, ok), v in zip(items, verdicts) if not ok]
        valid = [v[0].refused for (_, _, ok), v in zip(items, verdicts) if ok]
        # at margin 0 (refuse whatever it rates at least as likely as the gold): the best it could do
        zeros = [judge.refuses(v[0].candidate, v[0].gold, 0.0) for v in verdicts]
        inv0 = [z for (_, _, ok), z in zip(items, zeros) if not ok]
        val0 = [z for (_, _, ok), z in zip(items, zeros) if ok]
        weak = ("too weak: its margin cannot refuse the gold restated" if found.too_weak else
                "too weak: it refuses none of the second right answers" if not any(invalid) else "can judge")
        print(f"  second_right_answer corpus at {margin:+.4g}: refuses {sum(invalid)} of {len(invalid)} invalid "
              f"(recall {sum(invalid) / len(invalid):.0%}), {sum(valid)} of {len(valid)} valid twins: {weak}")
        print(f"  at margin 0 (no calibration): refuses {sum(inv0)} of {len(inv0)} invalid, {sum(val0)} of "
              f"{len(val0)} valid, and {zero:.1%} of RACE's distractors")
        figures[name] = (f"margin {margin:+.4g} refuses {found.refusal_rate:.2%} of "
                         f"{len(pairs)} RACE distractors; corpus recall {sum(invalid)}/{len(invalid)}, "
                         f"valid twins refused {sum(valid)}/{len(valid)}; {weak}; at margin 0: RACE "
                         f"{zero:.1%}, recall {sum(inv0)}/{len(inv0)}, valid refused {sum(val0)}/{len(val0)}")
    if args.record:
        results.record("judge_calibration", figures, argv)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
