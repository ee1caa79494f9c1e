"""Benchmark: the built-in readers (sliding-window, similarity) on every split of a release.

`advrace evaluate` scores a release one split at a time through the same reader object. For each
reader this prints questions per second over the whole release for advrace's implementation and
for a baseline measured in the same run on the same questions: the implementation before issue
15, kept here as it was (sliding window: every window summed; similarity: the sentences of each
split's distinct passages and every query encoded afresh, in batches sorted by characters), then
the ratio and the share of questions on which both predict the same option (goal: 100%).

    python bench/evaluate_readers.py RELEASE_DIR [--splits a,b] [--limit N] [--batch-size 32] [--threads N]

On a machine whose cores other programs also use, torch's threads wait on each other and the
similarity timings vary several-fold from run to run; `--threads 1` gives steady figures.

The figures in docs/results.md ("The built-in readers") are for a 5-split release of 300
RACE-high questions (high300.jsonl: the first 300 high-school questions of RACE train as JSONL;
rel-high.yaml: a recipe with the splits addsent, charswap, diagnosis, and distractor_extraction
with `config: {model: DE_CHECKPOINT}`):
    advrace build rel-high.yaml --data high300.jsonl --format race-jsonl --limit 300 --out /tmp/rel-high
    python bench/evaluate_readers.py /tmp/rel-high
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.core.numbers import argmax  # noqa: E402
from advrace.evaluation.scoring import select_splits  # noqa: E402
from advrace.models.encoders.mc_encoding import question_with_option  # noqa: E402
from advrace.models.encoders.readers import SimilarityReader, SlidingWindow, passage_sentences, tokens  # noqa: E402
from advrace.release import check_release, read_split  # noqa: E402


class BaselineSlidingWindow:
    """The sliding window as first written: every window of the passage summed."""

    def __init__(self, distance: bool = False):
        self.distance = distance

    @staticmethod
    def window_score(passage, target, counts) -> float:
        size = len(target)
        if not passage or not size:
            return 0.0
        weight = {w: math.log(1 + 1 / counts[w]) for w in target if counts[w]}
        best = 0.0
        for start in range(max(1, len(passage) - size + 1)):
            best = max(best, sum(weight.get(w, 0.0) for w in passage[start:start + size]))
        return best

    @staticmethod
    def distance_term(passage, question, option) -> float:
        q_pos = [i for i, w in enumerate(passage) if w in question]
        a_pos = [i for i, w in enumerate(passage) if w in option]
        if not q_pos or not a_pos or len(passage) < 2:
            return 1.0
        return min(abs(i - j) for i in q_pos for j in a_pos) / (len(passage) - 1)

    def scores(self, passage, question, options) -> list[float]:
        p = tokens(passage)
        counts = Counter(p)
        q = set(tokens(question.replace("_", " ")))
        out = []
        for option in options:
            a = set(tokens(option))
            score = self.window_score(p, q | a, counts)
            if self.distance:
                score -= self.distance_term(p, q - a, a - q)
            out.append(score)
        return out

    def predict_mc(self, examples) -> list[list[float]]:
        return [self.scores(ex.passage, ex.question, ex.options) for ex in examples]


class BaselineSimilarity:
    """The similarity reader as first written, on the same encoder: per call (per split), every
    distinct passage's sentences and every query encoded, sorted by characters."""

    def __init__(self, model, tokenizer, batch_size: int, max_length: int = 128):
        self.model, self.tokenizer = model, tokenizer
        self.batch_size, self.max_length = batch_size, max_length
        self.encoded = 0

    def encode(self, texts):
        import torch

        self.encoded += len(texts)
        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        out = [None] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                for row, i in enumerate(idx):
                    out[i] = pooled[row]
        return torch.stack(out) if out else torch.zeros((0, self.model.config.hidden_size))

    def predict_mc(self, examples) -> list[list[float]]:
        passages = list(dict.fromkeys(ex.passage for ex in examples))
        sentences = {p: passage_sentences(p) or [p] for p in passages}
        flat = [s for p in passages for s in sentences[p]]
        queries = [question_with_option(ex.question, o) for ex in examples for o in ex.options]
        vectors = self.encode(flat + queries)
        sent_vecs, query_vecs = vectors[:len(flat)], vectors[len(flat):]
        spans, k = {}, 0
        for p in passages:
            spans[p] = (k, k + len(sentences[p]))
            k += len(sentences[p])
        out, q = [], 0
        for ex in examples:
            lo, hi = spans[ex.passage]
            sims = query_vecs[q:q + len(ex.options)] @ sent_vecs[lo:hi].T
            out.append([float(x) for x in sims.max(dim=1).values])
            q += len(ex.options)
        return out



def run(reader, split_examples: dict) -> tuple[float, dict, dict]:
    """Total seconds, seconds per split and scores per split, one `predict_mc` call per split
    through one reader object, as `advrace evaluate` calls it."""
    per_split, scores = {}, {}
    for split, examples in split_examples.items():
        t0 = time.perf_counter()
        scores[split] = reader.predict_mc(examples)
        per_split[split] = time.perf_counter() - t0
    return sum(per_split.values()), per_split, scores


def compare(name: str, new, baseline, split_examples: dict) -> str:
    """Prints the timings of both; returns the figures in a line."""
    n = sum(len(v) for v in split_examples.values())
    base_s, base_splits, base_scores = run(baseline, split_examples)
    new_s, new_splits, new_scores = run(new, split_examples)
    same = sum(argmax(a) == argmax(b) for split in split_examples
               for a, b in zip(new_scores[split], base_scores[split]))
    gap = max((abs(x - y) for split in split_examples for a, b in zip(new_scores[split], base_scores[split])
               for x, y in zip(a, b)), default=0.0)
    print(f"{name}:")
    print("  seconds per split, baseline / new: " + ", ".join(
        f"{s} {base_splits[s]:.2f}/{new_splits[s]:.2f}" for s in split_examples))
    print(f"  baseline: {n / base_s:8.1f} questions/s ({base_s:.2f} s)")
    print(f"  advrace:  {n / new_s:8.1f} questions/s ({new_s:.2f} s)")
    print(f"  speed-up: {base_s / new_s:.2f}x; identical predictions: {100 * same / n:.1f}%; "
          f"largest score difference: {gap:.2g}")
    return (f"{n / new_s:.1f} against {n / base_s:.1f} questions/s ({base_s / new_s:.2f}x), "
            f"identical predictions {100 * same / n:.1f}%")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release", help="a multiple-choice release folder")
    ap.add_argument("--splits", help="comma-separated splits (default: all)")
    ap.add_argument("--limit", type=int, help="questions per split (default: all)")
    ap.add_argument("--batch-size", type=int, default=32,
                    help="similarity encoder batch size (default: 32, what `advrace evaluate` uses)")
    ap.add_argument("--threads", type=int, help="torch threads (default: torch's, one per core)")
    results.add_argument(ap)
    args = ap.parse_args(argv)

    import torch

    if args.threads:
        torch.set_num_threads(args.threads)

    names = select_splits(check_release(args.release), args.splits.split(",") if args.splits else None)
    split_examples = {s: read_split(args.release, s)[:args.limit] for s in names}
    n = sum(len(v) for v in split_examples.values())
    print(f"{n} questions in {len(names)} splits ({', '.join(names)}); torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads")

    figures = {"questions": n, "splits": len(names), "torch threads": torch.get_num_threads()}
    figures["sliding-window"] = compare("sliding-window", SlidingWindow(), BaselineSlidingWindow(), split_examples)
    figures["sliding-window:distance"] = compare("sliding-window:distance", SlidingWindow(distance=True),
                                                 BaselineSlidingWindow(distance=True), split_examples)

    reader = SimilarityReader(batch_size=args.batch_size)
    baseline = BaselineSimilarity(reader.model, reader.tokenizer, args.batch_size, reader.max_length)
    warm = [ex for examples in split_examples.values() for ex in examples[:2]]
    baseline.predict_mc(warm)
    reader.predict_mc(warm)
    reader._cache.clear()
    baseline.encoded = 0
    encoded = []
    encode = reader.encode

    def counting(texts, **kw):
        encoded.append(len(texts))
        return encode(texts, **kw)

    reader.encode = counting
    figures["similarity"] = compare("similarity", reader, baseline, split_examples)
    print(f"  texts encoded: baseline {baseline.encoded}, advrace {sum(encoded)}")
    if args.record:
        figures["similarity texts encoded, baseline / advrace"] = f"{baseline.encoded} / {sum(encoded)}"
        results.record("evaluate_readers", figures, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
