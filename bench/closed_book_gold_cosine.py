"""Measure: how near in the paraphrase encoder a closed-book answer is to its gold, against how
near two different answers of one type are; the figures that set closed_book.MAX_GOLD_COSINE.

For every question of a SQuAD file: SmolLM2's closed-book answer (attacks.closed_book, as the
SQuAD adversaries ask it), kept where `usable`, and its MiniLM cosine with the nearest gold
(advrace.models.encoders.paraphrase, the audit's encoder); and, as the scale of "another answer of
the same kind", each gold's cosine with the gold of a random other question whose answer has the
same type (seeded). Pairs where both state numbers are left out of the counts: the encoder puts
1973 near 1974, and numbers are compared by value instead. Prints how many pairs of each kind
reach each cosine, and the nearest closed-book pairs for reading.

    python bench/closed_book_gold_cosine.py xquad-en.json [--show 60]
"""

from __future__ import annotations

import argparse
import json
import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.attacks.squad.answer_rules import number_values  # noqa: E402
from advrace.attacks.squad.closed_book import MAX_GOLD_COSINE, closed_book, usable  # noqa: E402
from advrace.attacks.squad.fake_answers import answer_type, wh_noun  # noqa: E402
from advrace.metrics import normalize_answer  # noqa: E402
from advrace.models.encoders.paraphrase import paraphrase_cosines  # noqa: E402
from advrace.resources import get_resources  # noqa: E402

BOUNDS = (0.6, 0.65, 0.7, 0.75, 0.8, 0.85, 0.9)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("squad_json")
    parser.add_argument("--show", type=int, default=60, help="closed-book pairs to print, nearest first")
    parser.add_argument("--seed", type=int, default=2017)
    results.add_argument(parser)
    args = parser.parse_args(argv)
    data = json.loads(Path(args.squad_json).read_text(encoding="utf-8"))
    rows = [(p["context"], qa["question"], [a["text"] for a in qa["answers"]], qa["answers"][0]["answer_start"])
            for article in data["data"] for p in article["paragraphs"] for qa in p["qas"]]
    res = get_resources()
    raw = closed_book("smollm2").answers([q for _, q, _, _ in rows])
    fakes, kinds = [], []
    for context, q, golds, start in rows:
        noun = wh_noun(q, res)[1]
        fakes.append(usable(raw[q.strip()], q, res.stopwords, (noun, f"{noun}s") if noun else ()))
        kinds.append(answer_type(context, start, start + len(golds[0]), res))

    def numeric(a, b):
        return bool(number_values(a)) and bool(number_values(b))

    def new(a, golds):  # equal or sharing a word: the rules refuse it before any cosine
        words = set(normalize_answer(a).split())
        return not any(words & set(normalize_answer(g).split()) for g in golds)

    pairs = [(f, g) for f, (_, _, golds, _) in zip(fakes, rows) if f and new(f, golds) for g in golds
             if not numeric(f, g)]
    cosines = dict(zip(pairs, paraphrase_cosines(pairs)))
    nearest = {}
    for f, g in pairs:
        if cosines[f, g] > nearest.get(f, ("", -1.0))[1]:
            nearest[f] = (g, cosines[f, g])
    rng = random.Random(args.seed)
    other = []
    for i, (_, _, golds, _) in enumerate(rows):
        peers = [j for j, k in enumerate(kinds) if k == kinds[i] and normalize_answer(rows[j][2][0]) !=
                 normalize_answer(golds[0])]
        if peers:
            g = rows[rng.choice(peers)][2][0]
            if not numeric(golds[0], g):
                other.append((golds[0], g))
    other_cos = paraphrase_cosines(other)
    figures = {"questions": len(rows), "closed-book answers usable": sum(bool(f) for f in fakes),
               "pairs, closed-book / other golds (no numbers, no shared word)": f"{len(nearest)} / {len(other)}"}
    for bound in BOUNDS:
        figures[f"at or above {bound}"] = (f"{sum(c >= bound for _, c in nearest.values())} / "
                                           f"{sum(c >= bound for c in other_cos)}")
    for name, value in figures.items():
        print(f"{name}: {value}")
    print(f"closed-book answers nearest their gold (MAX_GOLD_COSINE {MAX_GOLD_COSINE}):")
    for f, (g, c) in sorted(nearest.items(), key=lambda fc: -fc[1][1])[:args.show]:
        print(f"  {c:.3f}  {f!r} for {g!r}")
    if args.record:
        results.record("closed_book_gold_cosine", figures)
    return 0


if __name__ == "__main__":
    sys.exit(main())
