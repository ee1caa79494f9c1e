"""Benchmark: rule-based splits (CharSwap and AddSent) over a RACE folder or file.

Prints questions per second for the release builder (each passage analysed once, passages in
parallel workers) and for a baseline measured in the same run, in the same process, that runs
the full spaCy pipeline on the passage again for every question, with one worker, as a
straightforward implementation would. The figure to read is the ratio.

    python bench/build_rule_based.py PATH [--limit N] [--workers N] [--baseline-questions 150]

PATH: RACE/test (the full test set, 4,934 questions), or any input `advrace build` reads.
"""

from __future__ import annotations

import argparse
import dataclasses
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.core.config import release_config_from_dict  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.resources import Resources, get_resources  # noqa: E402
from advrace.resources.spacy_pipeline import entity_tuples  # noqa: E402
from advrace.release.runner import Runner, default_workers, make_attacks, run_splits  # noqa: E402


def peak_rss_mb() -> tuple[float, float]:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    return own, children


class NaiveResources(Resources):
    """No parse caches, no batches, and the full pipeline for sentence boundaries."""

    def sentence_starts(self, text):
        return tuple(s.start_char for s in self.nlp(text).sents)

    def parse(self, text):
        return self.nlp(text)

    def prepare_sentences(self, texts):
        pass

    def prepare_parses(self, texts):
        pass

    def entities(self, text, one_sentence=True):
        return entity_tuples(self.nlp(text))

    def prepare_entities(self, texts, one_sentence=True):
        pass


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path")
    ap.add_argument("--format")
    ap.add_argument("--limit", type=int, help="first N questions only")
    ap.add_argument("--workers", type=int, default=None, help="default: one per core")
    ap.add_argument("--attacks", default="charswap,addsent")
    ap.add_argument("--baseline-questions", type=int, default=150,
                    help="questions timed for the baseline (it is slow; its rate is per question)")
    ap.add_argument("--seed", type=int, default=2021)
    results.add_argument(ap)
    args = ap.parse_args()

    cfg = release_config_from_dict({"seed": args.seed, "splits": args.attacks.split(","),
                                    "workers": args.workers})
    loaded = load(args.path, args.format, limit=args.limit)
    examples = loaded.examples
    n_passages = len({ex.passage for ex in examples})
    workers = args.workers or default_workers()
    print(f"{len(examples)} questions, {n_passages} passages, attacks {args.attacks}, "
          f"{workers} workers, {os.cpu_count()} cores")

    t0 = time.perf_counter()
    resources = get_resources(cfg.resources)
    task = examples[0].task if examples else None  # "addsent" names RACE's and Jia and Liang's attacks
    for attack in make_attacks(cfg, resources, task):
        resources.preload(attack.uses)
    load_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    _, built = run_splits(cfg, examples, resources, workers=workers, progress=True)
    fast_s = time.perf_counter() - t0
    fast_qps = len(examples) / fast_s
    own, children = peak_rss_mb()

    base = examples[: args.baseline_questions]
    naive = NaiveResources(resources.config)
    naive.__dict__.update({k: resources.__dict__[k] for k in ("nlp", "glove", "wordnet", "stopwords")
                           if k in resources.__dict__})  # same loaded models: time the work, not loading
    runner = Runner(cfg.splits, make_attacks(dataclasses.replace(cfg), naive, task))
    for ex in examples[-20:]:  # warm the word-level caches, which both sides have
        runner.run_group([ex])
    t0 = time.perf_counter()
    for ex in base:
        runner.run_group([ex])
    base_s = time.perf_counter() - t0
    base_qps = len(base) / base_s

    perturbed = {split: sum(r.perturbed) for split, r in built.items()}
    print(f"resources loaded in {load_s:.1f} s (not counted below)")
    print(f"builder : {len(examples)} questions in {fast_s:.1f} s = {fast_qps:.1f} questions/s "
          f"(perturbed: {perturbed})")
    print(f"baseline: {len(base)} questions in {base_s:.1f} s = {base_qps:.2f} questions/s "
          f"(full parse of the passage for every question, 1 worker)")
    print(f"speed-up: {fast_qps / base_qps:.1f}x over the baseline")
    print(f"peak memory: {own:.0f} MB main process, {children:.0f} MB largest worker")
    if args.record:
        results.record("build_rule_based", {
            "questions": len(examples), "passages": n_passages, "attacks": args.attacks, "workers": workers,
            "build s": f"{fast_s:.1f}", "speed-up over the baseline": f"{fast_qps / base_qps:.1f}x",
            "peak MB main / largest worker": f"{own:.0f} / {children:.0f}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
