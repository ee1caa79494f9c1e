"""How fluent a sentence reads to a causal LM: the mean log-probability of its tokens, each
predicted from the tokens before it and the first from the start-of-text token.

Jia and Liang's crowd workers mended the generated sentences that were not English. Where the
rules give several candidates for one question, the attacks keep the one the model reads most
fluently, and the audit flags a sentence far below its own split's scores. The mean per token,
not the sum, so that a longer sentence is not taken for a worse one. The candidates of one
question share the start token's cache (continuation_scoring), so a group costs its own tokens.
"""

from __future__ import annotations

from typing import Sequence

from advrace.models.decoders.continuation_scoring import encode_request, shared_logprobs
from advrace.models.decoders.packed_decoding import PackedCore

MAX_SENTENCE_TOKENS = 256  # longer sentences are cut by encode_request's error, never silently


def start_token(tokenizer) -> int:
    """The token a text starts after: BOS, else EOS (GPT-2 and SmolLM2 mark both with one token),
    else a BERT-style tokenizer's CLS (the tests' tiny models)."""
    for token in (tokenizer.bos_token_id, tokenizer.eos_token_id, getattr(tokenizer, "cls_token_id", None)):
        if token is not None:
            return int(token)
    raise ValueError("the tokenizer has no BOS, EOS or CLS token to start a sentence from")


def mean_logprobs(model, tokenizer, groups: Sequence[Sequence[str]], *, device=None,
                  core: PackedCore | None = None) -> list[list[float]]:
    """Each sentence's mean token log-probability, group by group (a group: one question's
    candidates). Call under `torch.no_grad()`; an empty group gives an empty list."""
    start = (start_token(tokenizer),)
    pad = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else start[0]
    requests, kept = [], []
    for i, group in enumerate(groups):
        if group:
            requests.append(encode_request(tokenizer, "", list(group), max_length=MAX_SENTENCE_TOKENS, prefix=start))
            kept.append(i)
    out: list[list[float]] = [[] for _ in groups]
    if requests:
        sums = shared_logprobs(model, requests, pad_id=pad, device=device, core=core)
        for i, request, values in zip(kept, requests, sums):
            out[i] = [float(v) / len(c) for v, c in zip(values, request.continuations)]
    return out
