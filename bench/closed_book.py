"""Benchmark: the closed-book fakes of the SQuAD adversaries (attacks/squad/closed_book.py), the shots'
keys and values computed once and shared, against Transformers' `generate` on each whole prompt
(left-padded batches of the same size), in one run, with the same model object on the same
threads. It prints each one's questions per second, their ratio, and how many answers agree:

    cached N.N q/s, generate M.M q/s: R.Rx; A of Q answers the same

The goal: faster, with the same answers (greedy; a near-tie may flip in the last float bits),
idle and beside a busy process (`--busy`: a CPU-burning process runs beside both timed parts).

    python bench/closed_book.py SQUAD.json [--limit 256] [--model smollm2] [--busy] [--record]

Any SQuAD v1.1 file works; @sample/squad is the bundled one (41 questions).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.attacks.squad.closed_book import PROMPT, ClosedBook  # noqa: E402
from advrace.formats import load  # noqa: E402


def whole_prompts(book: ClosedBook, questions: list[str]) -> dict[str, str]:
    """The baseline: `generate` on every whole prompt, batch by batch, cut at the first line break."""
    import torch

    model, tok, device, _ = book._load()
    tok.padding_side = "left"
    pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
    out = {}
    for i in range(0, len(questions), book.batch_size):
        batch = questions[i:i + book.batch_size]
        enc = tok([PROMPT.format(question=q) for q in batch], return_tensors="pt", padding=True).to(device)
        with torch.no_grad():
            ids = model.generate(**enc, max_new_tokens=book.max_new_tokens, do_sample=False, num_beams=1,
                                 pad_token_id=pad)
        for q, row in zip(batch, ids[:, enc["input_ids"].shape[1]:]):
            text = tok.decode(row, skip_special_tokens=True)
            out[q] = text[:text.index("\n") + 1] if "\n" in text else text
    return out


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("data", help="a SQuAD v1.1 file, or @sample/squad")
    p.add_argument("--limit", type=int, default=256, help="distinct questions, the file's first (default: 256)")
    p.add_argument("--model", default="smollm2", help="a causal-LM folder, smollm2 or a Hub name")
    p.add_argument("--batch-size", type=int, default=32)
    p.add_argument("--busy", action="store_true", help="run a CPU-burning process beside the timed parts")
    results.add_argument(p)
    args = p.parse_args(argv)
    questions = list(dict.fromkeys(ex.question.strip() for ex in load(args.data).examples))[:args.limit]
    book = ClosedBook(args.model, batch_size=args.batch_size)
    book.answers(questions[:2])  # warm-up: the load and first-call allocations are neither's cost
    whole_prompts(book, questions[:2])
    book._answers.clear()
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        start = time.perf_counter()
        cached = book.answers(questions)
        cached_s = time.perf_counter() - start
        start = time.perf_counter()
        base = whole_prompts(book, questions)
        base_s = time.perf_counter() - start
    finally:
        if burner is not None:
            burner.terminate()
            burner.wait()
    n = len(questions)
    same = sum(cached[q].strip() == base[q].strip() for q in questions)
    ours, theirs = n / cached_s, n / base_s
    print(f"{n} questions of {args.data}, model {args.model}, fp32, batches of {args.batch_size}"
          f"{', beside a busy process' if args.busy else ''}")
    print(f"cached {ours:.2f} q/s, generate {theirs:.2f} q/s: {ours / theirs:.1f}x; {same} of {n} answers the same")
    if args.record:
        results.record("closed_book", {
            "questions": n, "model": args.model, "busy": "yes" if args.busy else "no",
            "questions/s, cached shots / generate": f"{ours:.2f} / {theirs:.2f}", "speed-up": f"{ours / theirs:.1f}x",
            "same answers": f"{same} of {n}"}, argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
