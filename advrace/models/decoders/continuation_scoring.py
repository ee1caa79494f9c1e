"""Log-likelihoods of continuations under a causal LM, with each context encoded once.

A question's context (passage and question, ~350 tokens) is shared by its four options (~10
tokens each). Scoring every (context, option) pair, as lm-evaluation-harness does, runs the
context four times; here it runs once, its keys and values are cached, and the options of the
question follow as one packed row over that cache (packed_scoring.packed_logprobs, through
packed_decoding's core: the mask in the form the model's attention reads, position ids that
restart for each option, and the fallback to one row per pair where a cache cannot hold the whole
prompt). Every option is so computed exactly as if it followed the context alone;
packed_scoring.unshared_logprobs computes the pairs one row each, the reference the tests compare
with.

Tokens follow lm-evaluation-harness (`encode_request`): trailing whitespace of the context moves
to the continuations, the context is encoded alone, and a continuation is what encoding context +
continuation adds after the context's tokens. The context's last token is fed with each option
(so the prefix pass needs no logits at all) and predicts the option's first token. A pair longer
than the maximum length loses the first tokens of its context, each pair on its own, as
lm-evaluation-harness cuts it (`Request.pair`); such a question is scored pair by pair.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.decoders.packed_scoring import Request, packed_logprobs, unshared_logprobs


def encode_request(tokenizer, context: str, continuations: list[str], *, max_length: int,
                   prefix: tuple[int, ...] = ()) -> Request:
    """A question's tokens as lm-evaluation-harness makes them; `prefix` (a BOS token) goes
    first. A pair too long for `max_length` is cut later, each on its own (`Request.pair`)."""
    spaces = len(context) - len(context.rstrip())
    moved, context = (context[-spaces:], context[:-spaces]) if spaces else ("", context)
    ctx = list(prefix) + tokenizer(context, add_special_tokens=False)["input_ids"]
    wholes = tokenizer([context + moved + c for c in continuations], add_special_tokens=False)["input_ids"]
    conts = tuple(tuple(w[len(ctx) - len(prefix):]) for w in wholes)
    if any(not c for c in conts):
        raise ValueError(f"an empty continuation after {context[-40:]!r}: every option needs a token")
    if max(len(c) for c in conts) > max_length:
        raise ValueError(f"a continuation of {max(len(c) for c in conts)} tokens does not fit in "
                         f"{max_length} tokens")
    if not ctx:
        raise ValueError("an empty context: give a prompt or a BOS token to predict the first token from")
    return Request(tuple(ctx), conts, max_length)


def why_alone(core: PackedCore, request: Request) -> str | None:
    """Why a question cannot share its context's cache (None: it can)."""
    if any(request.cuts):
        return "context cut to the maximum length"
    if not core.fits(request.longest):
        return core.why_limited
    return None


def shared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None,
                    core: PackedCore | None = None) -> list[list[float]]:
    """Summed log-probability of each continuation of each request: the context encoded once,
    the options packed over it; a question that cannot share (`why_alone`) runs pair by pair,
    counted in `core.unshared`."""
    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    results: list = [None] * len(requests)
    together, alone = [], []
    for i, r in enumerate(requests):
        reason = why_alone(core, r)
        if reason is None:
            together.append(i)
            core.unshared.shared += 1
        else:
            alone.append(i)
            run = sum(len(ctx) + len(c) - 1 for ctx, c in map(r.pair, range(len(r.continuations))))
            core.unshared.add(reason, run, r.tokens - 1)
    for indices, compute in ((together, lambda rs: packed_logprobs(core, rs, pad_id, device)),
                             (alone, lambda rs: unshared_logprobs(model, rs, pad_id=pad_id, device=device))):
        if indices:
            for i, value in zip(indices, compute([requests[i] for i in indices])):
                results[i] = value
    return results
