"""Benchmark: multiple-choice scoring speed of `advrace evaluate` against a plain loop.

Prints questions per second for `advrace.evaluation` (length-sorted batches padded to their own
longest input, inference mode, bf16 autocast where the device has native bf16) and for a
baseline measured in the same run, on the same model and questions, that pads every input to
512 tokens, runs in fp32 and takes fixed-size batches in file order, as a straightforward
implementation would; and the share of questions on which both predict the same option. The
figures to read are the ratio (goal: 3x or more) and that share (goal: 99% or more).

    python bench/evaluate_throughput.py RELEASE_DIR --model CKPT [--limit N] [--batch-size 16]

Make a release to bench on first, for example:
    python -m advrace build --data RACE/dev/middle --attacks charswap --limit 200 --out /tmp/evalbench

With --bf16-vs-fp32 it times the same scorer on the same questions in fp32, then with bf16
autocast forced on, and prints the ratio: on a CPU without native bf16 (emulated bf16) this is
what `bf16: true` costs. RELEASE_DIR may then also be any data advrace reads, and --model
`minilm` the offline MiniLM (a fresh, seeded multiple-choice head: speed does not depend on it):
    python bench/evaluate_throughput.py advrace/sample_data/race --model minilm --limit 16 --bf16-vs-fp32
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.evaluation.scoring import select_splits  # noqa: E402
from advrace.models.encoders.mc_scoring import load_checkpoint  # noqa: E402
from advrace.models.encoders.mc_encoding import encode_mc, question_with_option  # noqa: E402
from advrace.release import check_release, read_split  # noqa: E402


def bench_examples(release: str, limit: int | None, splits=None) -> list:
    """Up to `limit` questions, taken evenly from the splits in release order."""
    names = select_splits(check_release(release), splits)
    per_split = math.ceil(limit / len(names)) if limit else None
    examples = []
    for split in names:
        examples += read_split(release, split)[:per_split]
    return examples[:limit] if limit else examples


def load_questions(source: str, limit: int | None, splits=None) -> list:
    """A release's questions (`bench_examples`), or the first `limit` of any data advrace reads."""
    if (Path(source) / "manifest.json").is_file():
        return bench_examples(source, limit, splits)
    from advrace.formats import load

    return load(source, limit=limit).examples


def bf16_vs_fp32(scorer, examples, args, argv: list[str] | None) -> int:
    """The scorer's time on `examples` in fp32, then with bf16 forced, in this run; their ratio."""
    import torch

    from advrace.models.encoders.mc_scoring import CheckpointScorer

    bf16 = CheckpointScorer(scorer.model, scorer.tokenizer, name=scorer.name, batch_size=args.batch_size,
                            max_length=scorer.max_length, bf16=True)
    info = bf16.inference
    kind = "emulated" if info.get("bf16_emulated") else "native"
    print(f"device {scorer.device} ({torch.get_num_threads()} threads), {len(examples)} questions, "
          f"batch size {args.batch_size}, max length {scorer.max_length}, torch {torch.__version__}; "
          f"bf16 here is {kind}")
    warm = examples[:2]
    scorer.predict_mc(warm)  # kernels warmed for both
    bf16.predict_mc(warm)
    timed = {}
    for name, s in (("fp32", scorer), ("bf16", bf16)):
        sync(s.device)
        t0 = time.perf_counter()
        scores = s.predict_mc(examples)
        sync(s.device)
        timed[name] = (time.perf_counter() - t0, scores)
        print(f"{name}: {len(examples) / timed[name][0]:8.3f} questions/s ({timed[name][0]:.2f} s)")
    (fp_s, fp), (bf_s, bf) = timed["fp32"], timed["bf16"]
    pick = lambda s: max(range(len(s)), key=lambda i: (s[i], -i))  # noqa: E731
    same = sum(pick(a) == pick(b) for a, b in zip(fp, bf))
    gap = max(abs(x - y) for a, b in zip(fp, bf) for x, y in zip(a, b))
    print(f"bf16 / fp32 time: {bf_s / fp_s:.2f}x (bf16 {kind}); identical predictions {same}/{len(examples)}, "
          f"largest score difference {gap:.3g}")
    if args.record:
        results.record("evaluate_throughput", {"questions": len(examples), "bf16": kind,
                                               "bf16 / fp32 time": f"{bf_s / fp_s:.2f}x",
                                               "identical predictions": f"{same}/{len(examples)}"}, argv)
    return 0


def baseline_predict(model, tokenizer, examples, device, batch_size: int, max_length: int) -> list[int]:
    """Every option padded to `max_length`, fp32, fixed batches in file order."""
    import torch

    preds = []
    with torch.no_grad():
        for start in range(0, len(examples), batch_size):
            batch = examples[start:start + batch_size]
            n_opt = len(batch[0].options)
            firsts = [ex.passage for ex in batch for _ in ex.options]
            seconds = [question_with_option(ex.question, o) for ex in batch for o in ex.options]
            enc = tokenizer(firsts, seconds, truncation="longest_first", max_length=max_length,
                            padding="max_length", return_tensors="pt")
            inputs = {k: v.view(len(batch), n_opt, -1).to(device) for k, v in enc.items()}
            logits = model(**inputs).logits.float()
            preds += logits.argmax(-1).tolist()
    return preds


def sync(device) -> None:
    import torch

    if device.type == "cuda":
        torch.cuda.synchronize()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("release", help="a multiple-choice release folder")
    ap.add_argument("--model", required=True, help="checkpoint folder (AutoModelForMultipleChoice), or minilm")
    ap.add_argument("--limit", type=int, default=100, help="questions to score (default: 100)")
    ap.add_argument("--splits", help="comma-separated splits (default: all)")
    ap.add_argument("--batch-size", type=int, default=16)
    ap.add_argument("--max-length", type=int, default=512)
    ap.add_argument("--no-bf16", dest="bf16", action="store_const", const=False, default=None)
    ap.add_argument("--bf16-vs-fp32", action="store_true",
                    help="time fp32, then bf16 forced on, and print the ratio (no baseline)")
    results.add_argument(ap)
    args = ap.parse_args(argv)

    import torch
    from accelerate import Accelerator

    from advrace.models.runtime.loading import resolve_model

    examples = load_questions(args.release, args.limit, args.splits.split(",") if args.splits else None)
    if args.bf16_vs_fp32:
        scorer = load_checkpoint(resolve_model(args.model), batch_size=args.batch_size,
                                 max_length=args.max_length, bf16=False, accelerator=Accelerator())
        return bf16_vs_fp32(scorer, examples, args, argv)
    if len({len(ex.options) for ex in examples}) > 1:
        sys.exit("the baseline needs the same number of options for every question")
    accelerator = Accelerator()
    scorer = load_checkpoint(resolve_model(args.model), batch_size=args.batch_size, max_length=args.max_length,
                             bf16=args.bf16, accelerator=accelerator)
    model, tokenizer, device = scorer.model, scorer.tokenizer, scorer.device
    print(f"device {device} ({torch.cuda.get_device_name(device) if device.type == 'cuda' else 'cpu'}, "
          f"{torch.get_num_threads()} threads), bf16 autocast {'on' if scorer.bf16 else 'off'}, "
          f"{len(examples)} questions, batch size {args.batch_size}, torch {torch.__version__}")
    lengths = [f.length for f in encode_mc(tokenizer, examples, scorer.max_length)]
    print(f"tokens per option sequence: mean {sum(lengths) / len(lengths):.0f}, max {max(lengths)} "
          f"(the baseline pads all to {args.max_length})")

    warm = examples[:args.batch_size]
    scorer.predict_mc(warm)
    baseline_predict(model, tokenizer, warm, device, args.batch_size, args.max_length)

    sync(device)
    t0 = time.perf_counter()
    scores = scorer.predict_mc(examples)
    sync(device)
    fast_s = time.perf_counter() - t0
    fast = [max(range(len(s)), key=lambda i: (s[i], -i)) for s in scores]

    t0 = time.perf_counter()
    base = baseline_predict(model, tokenizer, examples, device, args.batch_size, args.max_length)
    sync(device)
    base_s = time.perf_counter() - t0

    same = sum(a == b for a, b in zip(fast, base)) / len(examples)
    acc = lambda preds: 100 * sum(p == ex.label for p, ex in zip(preds, examples)) / len(examples)  # noqa: E731
    print(f"advrace evaluate: {len(examples) / fast_s:8.2f} questions/s ({fast_s:.2f} s), accuracy {acc(fast):.2f}")
    print(f"baseline:         {len(examples) / base_s:8.2f} questions/s ({base_s:.2f} s), accuracy {acc(base):.2f}")
    margins = sorted(sorted(s)[-1] - sorted(s)[-2] for s in scores)
    print(f"speed-up: {base_s / fast_s:.2f}x; identical predictions: {100 * same:.1f}%")
    print(f"median gap between the two best options' scores: {margins[len(margins) // 2]:.2g} "
          "(tiny gaps, as from an untrained classifier head, flip under bf16 rounding)")
    if args.record:
        results.record("evaluate_throughput", {
            "questions": len(examples), "mean tokens": f"{sum(lengths) / len(lengths):.0f}",
            "bf16 autocast": "on" if scorer.bf16 else "off", "speed-up over the padded fp32 baseline":
            f"{base_s / fast_s:.2f}x", "identical predictions": f"{100 * same:.1f}%"}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
