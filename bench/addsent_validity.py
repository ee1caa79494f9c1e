"""Benchmark: how often AddSent's inserted sentences only paraphrase the question.

A sentence whose every replacement is a synonym, spelling variant or inflection of the word it
replaced (and that has no antonym, number change or negation) restates the question, so the
passage then answers it with a distractor. This runs AddSent twice on the same questions and
seed, with the synonym filter off ("before": the GloVe neighbours chosen as before the filter)
and on ("after"), and prints for each the share of perturbed questions with such a sentence,
the share with the gold option in a sentence, and the most frequent paraphrase pairs. Each
replacement is judged again here as the audit judges it (`audit.paraphrase_pairs`, by
`Resources.same_meaning`), not read from the provenance.

    python bench/addsent_validity.py RACE/dev [--format race-dir]
        [--limit N] [--seed 0] [--examples 12 --examples-out FILE]

Reads real data: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from advrace.attacks.addsent import META_WORDS, AddSent, contains_gold  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.release.audit import paraphrase_pairs  # noqa: E402
from advrace.resources import get_resources  # noqa: E402

# the framing words kept before the fix; "before" runs with them, as the attack then did
PRE_FIX_KEEP_WORDS = ("passage", "article", "text", "paragraph", "writer", "author", "title", "lot",
                      "kind", "sort")


def run(examples, resources, seed: int, filtered: bool):
    keep = META_WORDS if filtered else PRE_FIX_KEEP_WORDS
    attack = AddSent({"keep_words": list(keep)}, seed=seed, resources=resources)
    attack._same_meaning_filter = filtered
    start = time.perf_counter()
    attack.prepare(examples)
    outcomes = attack.apply_batch(examples)
    seconds = time.perf_counter() - start
    perturbed = paraphrased = gold = fallback = 0
    pairs: Counter = Counter()
    glove: Counter = Counter()
    for ex, out in zip(examples, outcomes):
        if not out.perturbed:
            continue
        perturbed += 1
        sentences = out.example.provenance[-1]["sentences"]
        hits = [p for s in sentences if (p := paraphrase_pairs(s.get("replacements", []), resources))]
        paraphrased += bool(hits)
        pairs.update(f"{w.lower()}->{n.lower()} ({why})" for hit in hits for w, n, why in hit)
        glove.update(f"{r['word'].lower()}->{r['new'].lower()}" for s in sentences
                     for r in s["replacements"] if r["kind"] == "glove")
        gold += any(contains_gold(s["sentence"], ex.answer) for s in sentences)
        fallback += any(s.get("fallback_not") for s in sentences)
    return {"perturbed": perturbed, "paraphrased": paraphrased, "gold": gold, "fallback": fallback,
            "pairs": pairs, "glove": glove, "seconds": seconds, "outcomes": outcomes}


def write_examples(path: str, examples, outcomes, n: int) -> None:
    lines = []
    done = [(e, o) for e, o in zip(examples, outcomes) if o.perturbed]
    for ex, out in done[::max(1, len(done) // n)][:n]:
        lines.append(f"== {ex.id}\nQ: {ex.question}\nGOLD: {ex.answer}")
        for s in out.example.provenance[-1]["sentences"]:
            lines.append(f"  + {s['sentence']}\n    distractor: {s['distractor']['text']!r}"
                         f"  negation fallback: {s['fallback_not']}")
            for r in s["replacements"]:
                lines.append(f"    {r}")
        lines.append("")
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--format", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--examples", type=int, default=0, help="write this many 'after' examples")
    ap.add_argument("--examples-out", default="/tmp/addsent_examples_race.txt")
    args = ap.parse_args()
    examples = load(args.path, args.format, limit=args.limit).examples
    resources = get_resources()
    results = {}
    for label, filtered in (("before", False), ("after", True)):
        r = results[label] = run(examples, resources, args.seed, filtered)
        n = max(r["perturbed"], 1)
        print(f"{label:6}  questions {len(examples)}  perturbed {r['perturbed']}  "
              f"paraphrase-only {r['paraphrased']} ({100 * r['paraphrased'] / n:.2f}%)  "
              f"gold in sentence {r['gold']}  negation fallback {r['fallback']} "
              f"({100 * r['fallback'] / n:.1f}%)  {r['seconds']:.1f} s")
        for pair, count in r["pairs"].most_common(15):
            print(f"        {count:4}  {pair}")
    print("most frequent GloVe replacements after, to read for paraphrases WordNet misses:")
    print("   ", ", ".join(f"{p} {c}" for p, c in results["after"]["glove"].most_common(40)))
    if args.examples:
        write_examples(args.examples_out, examples, results["after"]["outcomes"], args.examples)
        print(f"wrote {args.examples} examples to {args.examples_out}")


if __name__ == "__main__":
    main()
