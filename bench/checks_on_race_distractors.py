"""Benchmark: how often the distractor checks would refuse what RACE's own writers wrote.

Each original distractor of each question is put to the shared option checks
(advrace.core.checks.options) as if an attack had proposed it, beside the question's other
options: a check that refuses many of them demands more than RACE does, and would refuse good
distractors too. Per check: how many distractors it refuses, of all and of those it applies to
(`stated_in_passage`: questions that ask what the passage states). The paraphrase encoder's
cosine is left out (`bench/generate_distractors.py` measures it).

    python bench/checks_on_race_distractors.py RACE/dev/middle [--checks stated_in_passage,form] [--show 20]

`--show N` prints up to N refused distractors per check, with the question.
"""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
from advrace.core.checks import OPTION, REGISTRY, Subject, TextContext  # noqa: E402
from advrace.resources import get_resources  # noqa: E402
from advrace.core.checks.question_kinds import asks_what_passage_states  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.resources import load_stopwords  # noqa: E402

DEFAULT_CHECKS = ("stated_in_passage", "form")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("data", help="RACE data (any format advrace reads)")
    ap.add_argument("--checks", default=",".join(DEFAULT_CHECKS))
    ap.add_argument("--show", type=int, default=0)
    results.add_argument(ap)
    args = ap.parse_args(argv)
    checks = [REGISTRY[name] for name in args.checks.split(",") if name]
    if any(c.scope != OPTION for c in checks):
        ap.error("only option checks judge a distractor")
    resources = get_resources()
    ctx = TextContext(stopwords=frozenset(load_stopwords()), known_word_fn=resources.known_word)
    examples = load(args.data).examples
    total, stating = 0, 0
    refused: Counter = Counter()
    refused_stating: Counter = Counter()
    shown: dict[str, list[str]] = defaultdict(list)
    for ex in examples:
        asks = asks_what_passage_states(ex.question)
        for k, d in enumerate(ex.options):
            if k == ex.label:
                continue
            total += 1
            stating += asks
            others = tuple(o for j, o in enumerate(ex.options) if j not in (k, ex.label))
            subject = Subject(ex, d, others)
            for check in checks:
                why = check.refuse(subject, ctx, {})
                if why:
                    refused[check.name] += 1
                    refused_stating[check.name] += asks
                    if len(shown[check.name]) < args.show:
                        shown[check.name].append(f"{ex.id}: {ex.question!r}\n    {d!r}: {why}")
    print(f"{len(examples)} questions, {total} original distractors, {stating} of questions that ask "
          f"what the passage states")
    for check in checks:
        n, s = refused[check.name], refused_stating[check.name]
        print(f"  {check.name:20s} refuses {n} ({100 * n / max(total, 1):.2f}% of all; "
              f"{s} of the stating questions' {stating}, {100 * s / max(stating, 1):.2f}%)")
        for line in shown[check.name]:
            print("   ", line)
    if args.record:
        figures = {"questions": len(examples), "original distractors": total, "of stating questions": stating}
        for check in checks:
            n, s = refused[check.name], refused_stating[check.name]
            figures[check.name] = f"{n} ({100 * n / max(total, 1):.2f}%; stating questions {s}, " \
                                  f"{100 * s / max(stating, 1):.2f}%)"
        results.record("checks_on_race_distractors", figures, argv=sys.argv[1:] if argv is None else argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
