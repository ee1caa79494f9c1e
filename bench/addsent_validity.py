"""Benchmark: how often AddSent's inserted sentences only paraphrase the question, and what the
negated-question skip and the "not" fallback do.

A sentence whose every replacement keeps the meaning of the word it replaced (a synonym,
spelling variant or inflection, or a near sense: hypernym, hyponym, near-synonym sibling; and
that has no antonym, number change or negation) restates the question, so the passage then
answers it with a distractor. This runs AddSent three times on the same questions and seed:

- "old": as it was before near senses were judged: its candidate filter knew only synonyms,
  spelling variants and inflections, a question with nothing to change was negated with "not"
  (`negation_fallback: true`, also for "What is the best title for the passage?"), "Which is
  TRUE" could become "Which is FALSE" (truth words were no framing words), and negated
  questions ("Which is NOT true?") were attacked like any other;
- "new": the attack's defaults (near senses judged, negated questions skipped, no "not" sentence);
- "new-not": the same with `negation_fallback: true` ("not" sentences, but none for a question
  about the passage).

For each it prints the share of questions with a near-meaning sentence, as the audit judges it
now (`paraphrase_pairs`, by `Resources.same_meaning`, not read from the provenance), the
questions with the gold option in a sentence, with a "not" sentence (and of them, questions
about the passage: what it states, its title, its author), negated questions left out, and why questions were left
unperturbed. `--readers` also scores the original questions and both versions with the built-in
readers (sliding-window, similarity), and the "not"-sentence questions alone.

    python bench/addsent_validity.py RACE/dev [--format race-dir]
        [--limit N] [--seed 0] [--readers] [--examples 12 --examples-out FILE]

Reads real data: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import functools
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.attacks.addsent import AddSent  # noqa: E402
from advrace.attacks.sentences.question_swaps import QuestionSwaps  # noqa: E402
from advrace.attacks.sentences.refusals import ABOUT_PASSAGE_RE, contains_gold  # noqa: E402
from advrace.core.checks.question_kinds import asks_what_passage_states, negated_question  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.core.checks.sentences import paraphrase_pairs  # noqa: E402
from advrace.resources import get_resources  # noqa: E402

# what `same_meaning` answered before near senses were judged
OLD_REASONS = frozenset({"spelling variant", "inflection", "synonym"})


class OldSwaps(QuestionSwaps):
    """AddSent's candidate filter as it was: synonyms, spelling variants and inflections only."""

    def same_meaning(self, tok, new):
        why = super().same_meaning(tok, new)
        return why if why in OLD_REASONS else None


class OldAddSent(AddSent):
    """AddSent as it was: the old filter, negated questions attacked, "not" about the passage."""

    _skip_negated = False
    _no_not_about_passage = False
    _sentence_checks = ((), None)  # the shared sentence checks did not refuse sentences then

    @functools.cached_property
    def swaps(self):
        return OldSwaps(self.config, self.resources, self._same_meaning_filter)


# the framing words kept before truth words were ("Which is TRUE" -> "Which is FALSE")
OLD_KEEP_WORDS = ["passage", "article", "text", "paragraph", "writer", "author", "title", "lot", "kind",
                  "sort", "word", "words", "phrase", "phrases", "sentence", "sentences", "statement",
                  "statements", "following"]
RUNS = (("old", OldAddSent, {"negation_fallback": True, "keep_words": OLD_KEEP_WORDS}), ("new", AddSent, {}),
        ("new-not", AddSent, {"negation_fallback": True}))


def run(examples, resources, seed: int, cls, config: dict):
    attack = cls(config, seed=seed, resources=resources)
    start = time.perf_counter()
    attack.prepare(examples)
    outcomes = attack.apply_batch(examples)
    seconds = time.perf_counter() - start
    perturbed = paraphrased = gold = fallback = fallback_meta = negated = 0
    pairs: Counter = Counter()
    glove: Counter = Counter()
    reasons: Counter = Counter()
    fallback_ids: set[str] = set()
    for ex, out in zip(examples, outcomes):
        negated += bool(negated_question(ex.question)) and not out.perturbed
        if not out.perturbed:
            reasons[out.reason] += 1
            continue
        perturbed += 1
        sentences = out.example.provenance[-1].sentences
        hits = [p for s in sentences if (p := paraphrase_pairs(s.replacements, resources))]
        paraphrased += bool(hits)
        pairs.update(f"{w.lower()}->{n.lower()} ({why})" for hit in hits for w, n, why in hit)
        glove.update(f"{r.old.lower()}->{r.new.lower()}" for s in sentences
                     for r in s.replacements if r.kind == "glove")
        gold += any(contains_gold(s.sentence, ex.answer) for s in sentences)
        if any(s.negation_fallback for s in sentences):
            fallback += 1
            fallback_meta += asks_what_passage_states(ex.question) or bool(ABOUT_PASSAGE_RE.search(ex.question))
            fallback_ids.add(ex.id)
    return {"perturbed": perturbed, "paraphrased": paraphrased, "gold": gold, "fallback": fallback,
            "fallback_meta": fallback_meta, "negated": negated, "reasons": reasons, "pairs": pairs,
            "glove": glove, "seconds": seconds, "outcomes": outcomes, "fallback_ids": fallback_ids}


def accuracy(reader, examples) -> list[bool]:
    scores = reader.predict_mc(examples)
    return [max(range(len(s)), key=s.__getitem__) == ex.label for s, ex in zip(scores, examples)]


def score_readers(examples, runs) -> None:
    from advrace.models.encoders.readers import make_reader

    print("reader accuracy (%), all questions (unperturbed ones count as in the original):")
    fb = [i for i, ex in enumerate(examples) if ex.id in runs["old"]["fallback_ids"]]
    for name in ("sliding-window", "similarity"):
        reader = make_reader(name)
        orig = accuracy(reader, examples)
        line = f"    {name:15} original {100 * sum(orig) / len(orig):5.2f}"
        by_label = {}
        for label, r in runs.items():
            acc = by_label[label] = accuracy(reader, [o.example for o in r["outcomes"]])
            share = 100 * sum(acc) / len(acc)
            line += f"  {label} {share:5.2f} (drop {100 * (sum(orig) - sum(acc)) / len(acc):5.2f} points)"
        print(line)
        if fb:
            o = sum(orig[i] for i in fb)
            w = sum(by_label["old"][i] for i in fb)
            print(f"    {'':15} the {len(fb)} questions the old attack negated with 'not': original "
                  f"{100 * o / len(fb):.1f}, with the 'not' sentences {100 * w / len(fb):.1f}")


def write_examples(path: str, examples, outcomes, n: int) -> None:
    lines = []
    done = [(e, o) for e, o in zip(examples, outcomes) if o.perturbed]
    for ex, out in done[::max(1, len(done) // n)][:n]:
        lines.append(f"== {ex.id}\nQ: {ex.question}\nOPTIONS: {list(ex.options)}\nGOLD: {ex.answer}")
        for s in out.example.provenance[-1].sentences:
            lines.append(f"  + {s.sentence}\n    distractor: {s.answer!r}"
                         f"  negation fallback: {s.negation_fallback}")
            for r in s.replacements:
                lines.append(f"    {r}")
        lines.append("")
    Path(path).write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("path")
    ap.add_argument("--format", default=None)
    ap.add_argument("--limit", type=int, default=None)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--readers", action="store_true", help="score with the built-in readers too")
    ap.add_argument("--examples", type=int, default=0, help="write this many 'new' examples")
    ap.add_argument("--examples-out", default="/tmp/addsent_examples_race.txt")
    results.add_argument(ap)
    args = ap.parse_args()
    examples = load(args.path, args.format, limit=args.limit).examples
    resources = get_resources()
    runs = {}
    for label, cls, config in RUNS:
        r = runs[label] = run(examples, resources, args.seed, cls, config)
        n = len(examples)
        print(f"{label:9}  questions {n}  perturbed {r['perturbed']}  near-meaning sentence "
              f"{r['paraphrased']} ({100 * r['paraphrased'] / n:.2f}% of questions)  gold in sentence "
              f"{r['gold']}  'not' fallback {r['fallback']} ({100 * r['fallback'] / n:.1f}%; "
              f"{r['fallback_meta']} about the passage)  negated questions left out "
              f"{r['negated']}  {r['seconds']:.1f} s")
        print("           unperturbed:", ", ".join(f"{why} {c}" for why, c in r["reasons"].most_common()) or "none")
        for pair, count in r["pairs"].most_common(15):
            print(f"        {count:4}  {pair}")
    print("most frequent GloVe replacements, new, to read for near meanings WordNet misses:")
    print("   ", ", ".join(f"{p} {c}" for p, c in runs["new"]["glove"].most_common(40)))
    if args.readers:
        score_readers(examples, runs)
    if args.examples:
        write_examples(args.examples_out, examples, runs["new"]["outcomes"], args.examples)
        print(f"wrote {args.examples} examples to {args.examples_out}")
    if args.record:
        n = len(examples)
        results.record("addsent_validity", {"questions": n, **{
            f"{label}: near-meaning / 'not' sentences / negated left out":
                f"{100 * r['paraphrased'] / n:.2f}% / {r['fallback']} / {r['negated']}" for label, r in runs.items()}})


if __name__ == "__main__":
    main()
