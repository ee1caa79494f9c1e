"""Benchmark: how long the span authoring page waits for the model after an edit.

For each SQuAD question of the input it times the page's analysis of the draft (the span
model's forward pass over the paragraph's windows, n-best decoding, and the backward pass that
gives word importance) against evaluation's reading of the same question (`SpanScorer.n_best`:
the forward pass and decoding alone, in fp32 too), interleaved, one question at a time as the
page sends them. The figure to read is the ratio: what importance costs on top of an answer.

    python bench/authoring_latency.py MODEL [PATH] [--limit 50]

MODEL: a span checkpoint (`advrace train configs/train/squad-cpu.yaml`). PATH: SQuAD-format
data (default: the bundled sample), e.g. dev-v1.1.json.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
from advrace.formats import load  # noqa: E402
from advrace.human_eval.span_authoring import N_BEST, SpanAuthoringModel  # noqa: E402

SAMPLE = ROOT / "advrace" / "sample_data" / "squad" / "sample-v1.1.json"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("model")
    ap.add_argument("path", nargs="?", default=str(SAMPLE))
    ap.add_argument("--limit", type=int, default=50, help="questions timed (default 50)")
    results.add_argument(ap)
    args = ap.parse_args()
    examples = load(args.path, limit=args.limit).examples
    page = SpanAuthoringModel(args.model)
    scorer = page.scorer
    page.analyse(examples[0].context, examples[0].question)  # warm-up: first-call allocations
    analyse, evaluate = [], []
    for ex in examples:
        t0 = time.perf_counter()
        page.analyse(ex.context, ex.question)
        t1 = time.perf_counter()
        scorer.n_best([ex.question], [ex.context], N_BEST)
        t2 = time.perf_counter()
        analyse.append(t1 - t0)
        evaluate.append(t2 - t1)
    a, e = statistics.median(analyse), statistics.median(evaluate)
    print(f"{len(examples)} questions from {args.path}, model {args.model} ({scorer.max_length}-token windows)")
    print(f"page analysis (answer + importance): median {1000 * a:.0f} ms, max {1000 * max(analyse):.0f} ms")
    print(f"evaluation read (answer only):       median {1000 * e:.0f} ms, max {1000 * max(evaluate):.0f} ms")
    print(f"ratio: the page takes {a / e:.2f}x evaluation's time per question")
    if args.record:
        results.record("authoring_latency", {"questions": len(examples), "window tokens": scorer.max_length,
                                             "page median ms": f"{1000 * a:.0f}",
                                             "evaluation median ms": f"{1000 * e:.0f}", "ratio": f"{a / e:.2f}x"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
