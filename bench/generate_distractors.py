"""Benchmark: distractor generation at beam 50, cached decoding against full re-encoding.

Prints questions per second for the beam search of `distractor_generation` (each source encoded
once per question, its keys and values shared by all beams, each step feeding one token per
beam) and for a baseline measured in the same run, on the same model, questions and beam
search, that re-encodes source and target prefix of every beam at every step. Both must return
the same candidates; the figure to read is the ratio (goal: 5x or more).

    python bench/generate_distractors.py --data RACE/dev/middle [--model DG_CKPT] [--limit 4]

Without --model, the offline MiniLM encoder with a fresh masked-LM head stands in (speed does
not depend on what the weights have learned; with a fresh head, beams run to --max-tokens).
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.models.decoders.beam_search import beam_search  # noqa: E402
from advrace.core.config import DataSpec  # noqa: E402
from advrace.formats import load  # noqa: E402
from advrace.models.runtime.loading import resolve_model  # noqa: E402
from advrace.models.generators.seq2seq_encoding import encode_sources  # noqa: E402
from advrace.models.generators.unilm import FullDecoder, Seq2SeqDecoder, UniLMSeq2Seq  # noqa: E402


def load_model(name: str | None):
    import torch
    from transformers import AutoTokenizer

    path = name or resolve_model("minilm")
    torch.manual_seed(0)
    return UniLMSeq2Seq.from_pretrained(path).eval(), AutoTokenizer.from_pretrained(path)


def run(decoder_cls, model, tokenizer, sources, args) -> tuple[float, list]:
    import torch

    banned = (tokenizer.pad_token_id, tokenizer.cls_token_id, tokenizer.mask_token_id, tokenizer.unk_token_id)
    candidates = []
    start = time.perf_counter()
    for i in range(0, len(sources), args.batch_size):
        chunk = sources[i:i + args.batch_size]
        width = max(map(len, chunk))
        ids = torch.zeros((len(chunk), width), dtype=torch.long)
        for r, s in enumerate(chunk):
            ids[r, :len(s)] = torch.tensor(s)
        hyps = beam_search(decoder_cls(model), ids, torch.tensor([len(s) for s in chunk]),
                           beam_size=args.beam, max_length=args.max_tokens, eos_id=tokenizer.sep_token_id,
                           banned=banned)
        candidates += [[h.tokens for h in hs] for hs in hyps]
    return time.perf_counter() - start, candidates


def main() -> int:
    import torch

    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, help="RACE questions (any format advrace reads)")
    p.add_argument("--model", help="a distractor_generation checkpoint (default: MiniLM, fresh head)")
    p.add_argument("--limit", type=int, default=4, help="questions (the baseline is slow)")
    p.add_argument("--beam", type=int, default=50)
    p.add_argument("--max-tokens", type=int, default=12, help="longest distractor, in tokens")
    p.add_argument("--source-length", type=int, default=192)
    p.add_argument("--batch-size", type=int, default=2, help="questions per beam-search batch")
    p.add_argument("--threads", type=int, help="torch threads (default: torch's choice)")
    results.add_argument(p)
    args = p.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    examples = load(DataSpec(path=args.data).resolved_path(), limit=args.limit).examples
    model, tokenizer = load_model(args.model)
    sources = encode_sources(tokenizer, examples, args.source_length)
    print(f"{len(examples)} questions, beam {args.beam}, up to {args.max_tokens} tokens, "
          f"sources of {sum(map(len, sources)) / len(sources):.0f} tokens on average, "
          f"{torch.get_num_threads()} threads")
    cached_s, cached = run(Seq2SeqDecoder, model, tokenizer, sources, args)
    full_s, full = run(FullDecoder, model, tokenizer, sources, args)
    n = len(sources)
    print(f"cached decoding:     {n / cached_s:8.3f} questions/s ({cached_s:.1f} s)")
    print(f"full re-encoding:    {n / full_s:8.3f} questions/s ({full_s:.1f} s)")
    print(f"speed-up:            {full_s / cached_s:8.1f}x")
    same = sum(a == b for a, b in zip(cached, full))
    print(f"identical candidate lists: {same}/{n}")
    if args.record:
        results.record("generate_distractors", {
            "questions": n, "beam": args.beam, "max tokens": args.max_tokens,
            "questions/s, cached / full re-encoding": f"{n / cached_s:.3f} / {n / full_s:.3f}",
            "speed-up": f"{full_s / cached_s:.1f}x", "identical candidate lists": f"{same}/{n}"})
    return 0 if same == n else 1


if __name__ == "__main__":
    raise SystemExit(main())
