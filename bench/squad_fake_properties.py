"""Check: the fake answers of a built SQuAD release hold the properties every fake must have.

Reads a release that `advrace build` wrote with `addonesent`, `addsentmod` (or `addsent`) splits
and holds each attacked question's fake answer to `advrace.attacks.squad.fake_problems.fake_problems`
(differs from every gold and contains none, new to the context, of the gold's group or, under the
date, number and asked_kind rules, of a gold of that rule's type), the property test of
tests/test_validity_corpus.py run on real data. Prints each split's count, its problems, and each
fake rule's share of its attacked questions (stats.json); exits 1 when any fake breaks one.

    advrace build --data xquad-en.json --attacks addonesent,addsentmod --seed 2017 --sample 300 --out REL
    python bench/squad_fake_properties.py REL
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.attacks.squad.fake_problems import fake_problems  # noqa: E402
from advrace.core.provenance import summary_of  # noqa: E402
from advrace.release import read_split  # noqa: E402
from advrace.resources import get_resources  # noqa: E402

SPLITS = ("addonesent", "addsentmod", "addsent")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("release", help="a release folder with SQuAD sentence splits")
    results.add_argument(parser)
    args = parser.parse_args(argv)
    folder = Path(args.release)
    manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    stats = json.loads((folder / "stats.json").read_text(encoding="utf-8"))["splits"]
    resources = get_resources()
    originals = {ex.source_id: ex for ex in read_split(folder, "original")}
    figures, failed = {"questions": len(originals)}, 0
    for split in (s for s in SPLITS if s in manifest["splits"]):
        attack = manifest["splits"][split]["attack"]
        checked, problems = 0, []
        for ex in read_split(folder, split):
            summary = summary_of(ex.provenance, attack)
            for record in summary.sentences if summary else ():
                checked += 1
                problems += [f"{ex.source_id} {record.fake_rule} {record.answer!r}: {p}"
                             for p in fake_problems(originals[ex.source_id], record, resources)]
        shares = stats[split]["attack_stats"]["fake_answer_rule_shares"]
        print(f"{split}: {checked} fakes checked, {len(problems)} break a property")
        print("  shares of the attacked questions: " + ", ".join(f"{r} {s}" for r, s in
                                                                 sorted(shares.items(), key=lambda rs: -rs[1])))
        for line in problems:
            print("  " + line)
        failed += len(problems)
        figures[f"{split} fakes checked / breaking a property"] = f"{checked} / {len(problems)}"
        figures[f"{split} rule shares"] = ", ".join(f"{r} {s}" for r, s in
                                                    sorted(shares.items(), key=lambda rs: -rs[1]))
    if args.record:
        results.record("squad_fake_properties", figures)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
