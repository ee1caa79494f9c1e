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

Greedy generation (`greedy_generate`) uses the same cache: each row's generated tokens follow
its own context, so rows of different lengths need no left padding.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.decoders.packed_scoring import Request, packed_logprobs, unshared_logprobs
from advrace.models.runtime.kv_cache import returned_cache, with_cache


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
    counted in `core.fallback`."""
    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    results: list = [None] * len(requests)
    together, alone = [], []
    for i, r in enumerate(requests):
        reason = why_alone(core, r)
        if reason is None:
            together.append(i)
            core.fallback.shared += 1
        else:
            alone.append(i)
            run = sum(len(ctx) + len(c) - 1 for ctx, c in map(r.pair, range(len(r.continuations))))
            core.fallback.add(reason, run, r.tokens - 1)
    for indices, compute in ((together, lambda rs: packed_logprobs(core, rs, pad_id, device)),
                             (alone, lambda rs: unshared_logprobs(model, rs, pad_id=pad_id, device=device))):
        if indices:
            for i, value in zip(indices, compute([requests[i] for i in indices])):
                results[i] = value
    return results


def _greedy_alone(model, context: tuple[int, ...], max_new_tokens: int, stop, device) -> list[int]:
    """One row decoded under the model's own mask and cache (a sliding layer keeps its window)."""
    import torch

    generated: list[int] = []
    ids = torch.tensor([context], dtype=torch.long, device=device)
    cache = None
    for _ in range(max_new_tokens):
        out = model(input_ids=ids, **with_cache(model, cache), use_cache=True)
        cache = returned_cache(out)
        token = int(out.logits[0, -1].float().argmax())
        generated.append(token)
        if stop(generated):
            break
        ids = torch.tensor([[token]], dtype=torch.long, device=device)
    return generated


def greedy_generate(model, contexts: list[tuple[int, ...]], *, max_new_tokens: int, stop, pad_id: int = 0,
                    device=None, core: PackedCore | None = None) -> list[tuple[int, ...]]:
    """The most probable next token, step by step, for each context, until `stop(tokens)` says a
    row is done or `max_new_tokens`; a row's tokens never depend on the other rows of its batch
    beyond float rounding. A context whose generation would outgrow the shared cache's limit is
    decoded alone (counted in `core.fallback`)."""
    import torch

    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    results: list = [None] * len(contexts)
    together = []
    for i, c in enumerate(contexts):
        if core.fits(len(c) + max_new_tokens - 1):
            together.append(i)
            core.fallback.shared += 1
        else:
            core.fallback.add(core.why_limited, len(c) + max_new_tokens - 1, len(c) + max_new_tokens - 1)
            results[i] = tuple(_greedy_alone(model, c, max_new_tokens, stop, device))
    if not together:
        return results
    batch = [contexts[i] for i in together]
    prefixes = [c[:-1] for c in batch]
    lengths = [len(p) for p in prefixes]
    cache, width = core.prefill(prefixes, pad_id, device)
    if cache is None:
        cache = core.new_cache()
    rows = len(batch)
    slots = torch.arange(width).view(1, -1) < torch.tensor(lengths).view(-1, 1)
    generated: list[list[int]] = [[] for _ in batch]
    done = [False] * rows
    tokens = torch.tensor([[c[-1]] for c in batch], dtype=torch.long, device=device)
    for step in range(max_new_tokens):
        seen = torch.ones((rows, step + 1), dtype=torch.bool)
        mask = core.mask(torch.cat([slots, seen], dim=-1).view(rows, 1, -1).to(device))
        positions = torch.tensor([[n + step] for n in lengths], dtype=torch.long, device=device)
        out = model(input_ids=tokens, position_ids=positions, attention_mask=mask,
                    **core.cache_kwargs(cache), use_cache=True)
        cache = returned_cache(out)
        best = out.logits[:, -1].float().argmax(-1).tolist()
        for r, t in enumerate(best):
            if not done[r]:
                generated[r].append(t)
                done[r] = bool(stop(generated[r]))
        if all(done):
            break
        tokens = torch.tensor([[t] for t in best], dtype=torch.long, device=device)
    for i, g in zip(together, generated):
        results[i] = tuple(g)
    return results
