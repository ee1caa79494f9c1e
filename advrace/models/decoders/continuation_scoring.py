"""Log-likelihoods of continuations under a causal LM, with each context encoded once.

A question's context (passage and question, ~350 tokens) is shared by its four options (~10
tokens each). Scoring every (context, option) pair, as lm-evaluation-harness does, runs the
context four times; here it runs once, its keys and values are cached, and the options of the
question follow as one packed row over that cache (advrace.models.decoders.packed_decoding: the mask in
the form the model's attention reads, position ids that restart for each option, and the
fallback to one row per pair where a cache cannot hold the whole prompt). Every option is so
computed exactly as if it followed the context alone; `unshared_logprobs` computes the pairs one
row each, as the reference the tests compare with.

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

from dataclasses import dataclass

from advrace.models.decoders.packed_decoding import PROBE_TOLERANCE, PackedCore
from advrace.models.runtime.kv_cache import returned_cache, with_cache
from advrace.models.runtime.loading import input_device


@dataclass(frozen=True)
class Request:
    """One question: the context's tokens and one token sequence per continuation; a pair
    longer than `max_length` + 1 tokens is cut from the left (`pair`)."""

    context: tuple[int, ...]
    continuations: tuple[tuple[int, ...], ...]
    max_length: int | None = None

    @property
    def tokens(self) -> int:
        return len(self.context) + sum(len(c) for c in self.continuations)

    def pair(self, k: int) -> tuple[tuple[int, ...], tuple[int, ...]]:
        """Continuation k's (context, continuation) as lm-evaluation-harness feeds it: the last
        `max_length` + 1 tokens of context + continuation, the last one never fed."""
        cont = self.continuations[k]
        if self.max_length is None:
            return self.context, cont
        room = self.max_length + 1 - len(cont)
        return self.context[max(0, len(self.context) - room):], cont

    @property
    def cuts(self) -> tuple[int, ...]:
        """How many context tokens each pair loses to the maximum length."""
        return tuple(len(self.context) - len(self.pair(k)[0]) for k in range(len(self.continuations)))

    @property
    def longest(self) -> int:
        """The most tokens any pair feeds the model (its last token is only predicted)."""
        return max(len(ctx) + len(c) - 1 for ctx, c in map(self.pair, range(len(self.continuations))))


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


def _target_logprobs(logits, targets):
    """log p(target) at each position, in fp32, without a full log-softmax copy."""
    import torch

    logits = logits.detach().float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def _packed_visibility(prefix_lengths: list[int], width: int, segments: list[list[int]], length: int):
    """[rows, length, width + length] bool: a token sees its row's real prefix slots and the
    earlier tokens of its own segment (segment ids per token; -1 marks padding, which sees slot 0
    only, so that no row of the softmax is empty)."""
    import torch

    rows = len(segments)
    seg = torch.full((rows, length), -1, dtype=torch.long)
    for r, s in enumerate(segments):
        seg[r, :len(s)] = torch.tensor(s, dtype=torch.long)
    position = torch.arange(length)
    own = (seg.unsqueeze(2) == seg.unsqueeze(1)) & (position.view(1, 1, -1) <= position.view(1, -1, 1))
    own &= (seg >= 0).unsqueeze(2)
    slots = torch.arange(width).view(1, 1, -1) < torch.tensor(prefix_lengths).view(-1, 1, 1)
    prefix = slots.expand(rows, length, width).clone()
    pad = seg < 0
    if width:
        prefix[pad] = False
        prefix[..., 0] |= pad
    else:
        own[pad] = torch.eye(length, dtype=torch.bool).unsqueeze(0).expand(rows, -1, -1)[pad]
    return torch.cat([prefix, own], dim=-1)


def _padded(values, length, fill, device):
    import torch

    out = torch.full((len(values), length), fill, dtype=torch.long)
    for i, v in enumerate(values):
        out[i, :len(v)] = torch.tensor(v, dtype=torch.long)
    return out.to(device)


def _shared(core: PackedCore, requests: list[Request], pad_id: int, device) -> list[list[float]]:
    """One prefix pass for the batch, one packed pass for all continuations."""
    prefixes = [r.context[:-1] for r in requests]
    cache, width = core.prefill(prefixes, pad_id, device)
    rows, targets, segments, positions = [], [], [], []
    for r in requests:
        tokens, tgt, seg, pos = [], [], [], []
        for k, cont in enumerate(r.continuations):
            fed = (r.context[-1],) + cont[:-1]
            tokens += fed
            tgt += cont
            seg += [k] * len(fed)
            pos += range(len(r.context) - 1, len(r.context) - 1 + len(fed))
        rows.append(tokens)
        targets.append(tgt)
        segments.append(seg)
        positions.append(pos)
    length = max(len(t) for t in rows)
    mask = core.mask(_packed_visibility([len(p) for p in prefixes], width, segments, length).to(device))
    if cache is None:
        cache = core.new_cache()
    out = core.model(input_ids=_padded(rows, length, pad_id, device),
                     position_ids=_padded(positions, length, 0, device), attention_mask=mask,
                     **core.cache_kwargs(cache), use_cache=True)
    logprobs = _target_logprobs(out.logits, _padded(targets, length, 0, device)).cpu()
    results = []
    for i, r in enumerate(requests):
        sums, start = [], 0
        for cont in r.continuations:
            sums.append(float(logprobs[i, start:start + len(cont)].double().sum()))
            start += len(cont)
        results.append(sums)
    return results


def _pairs_alone(model, pairs: list[tuple[tuple[int, ...], tuple[int, ...]]], pad_id: int, device) -> list[float]:
    """Each (context, continuation) pair's summed log-probability, one right-padded row each,
    under the model's own 2D mask and cache: what any model computes right."""
    import torch

    width = max(len(ctx) + len(c) - 1 for ctx, c in pairs)
    ids = torch.full((len(pairs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (ctx, c) in enumerate(pairs):
        row = ctx + c[:-1]
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=False).logits
    sums = []
    for i, (ctx, c) in enumerate(pairs):
        at = torch.arange(len(ctx) - 1, len(ctx) - 1 + len(c), device=logits.device)
        target = torch.tensor(c, dtype=torch.long, device=logits.device)
        sums.append(float(_target_logprobs(logits[i, at], target).double().sum()))
    return sums


def _unshared(model, requests: list[Request], pad_id: int, device) -> list[list[float]]:
    pairs = [r.pair(k) for r in requests for k in range(len(r.continuations))]
    it = iter(_pairs_alone(model, pairs, pad_id, device))
    return [[next(it) for _ in r.continuations] for r in requests]


PROBE_LONGEST = 14  # tokens the probe's longest pair feeds: past a few, within most windows


def probe_requests(vocab: int, longest: int = PROBE_LONGEST) -> list[Request] | None:
    """The probe: two prompts of different lengths (the shorter is padded in the prefill) and
    options of 1-3 tokens in different orders (an option's place in the packed row is not its
    place alone); the longest pair feeds `longest` tokens. None when `longest` cannot hold one."""
    import random

    first = longest - 2
    if first < 2:
        return None
    draw = random.Random(0)

    def ids(n):
        return tuple(draw.randrange(min(3, vocab - 1), vocab) for _ in range(n))

    return [Request(ids(first), (ids(3), ids(1), ids(2))), Request(ids(max(2, first - 5)), (ids(1), ids(2)))]


def probe_sharing(core: PackedCore, device=None) -> dict | None:
    """Score the probe through the core and pair by pair, in fp32 unless the weights are half
    precision (autocast off, eval mode for the probe): {dtype, tolerance, gap, passed, reason}.
    A probe that raises (an ALiBi model fed custom positions) has not passed. None: no probe fits
    in the core's window."""
    import math

    import torch

    model = core.model
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = getattr(embeddings, "num_embeddings", None) or model.config.vocab_size
    requests = probe_requests(vocab, PROBE_LONGEST if core.limit is None else min(PROBE_LONGEST, core.limit))
    if requests is None:
        return None
    device = device or input_device(model)
    dtype = next((p.dtype for p in model.parameters() if p.dtype.is_floating_point), torch.float32)
    name = str(dtype).removeprefix("torch.")
    tolerance = PROBE_TOLERANCE.get(name, PROBE_TOLERANCE["bfloat16"])
    training = model.training
    model.eval()
    try:
        with torch.inference_mode(), torch.autocast(device.type, enabled=False):
            reference = _unshared(model, requests, 0, device)
            try:
                shared = _shared(core, requests, 0, device)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - a model that cannot take the packed inputs
                why = str(exc).splitlines()[0][:120] if str(exc) else ""
                return {"dtype": name, "tolerance": tolerance, "gap": math.inf, "passed": False,
                        "reason": f"packed probe failed under {core.implementation} attention "
                                  f"({type(exc).__name__}: {why})"}
    finally:
        model.train(training)
    gaps = [abs(a - b) for rs, rr in zip(shared, reference) for a, b in zip(rs, rr)]
    gap = max(gaps) if all(math.isfinite(g) for g in gaps) else math.inf
    passed = gap <= tolerance
    return {"dtype": name, "tolerance": tolerance, "gap": gap, "passed": passed,
            "reason": None if passed else (f"packed probe {gap:.0e} from unshared under {core.implementation} "
                                           f"attention in {name} (positions not from position_ids?)")}


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
    for indices, compute in ((together, lambda rs: _shared(core, rs, pad_id, device)),
                             (alone, lambda rs: _unshared(model, rs, pad_id, device))):
        if indices:
            for i, value in zip(indices, compute([requests[i] for i in indices])):
                results[i] = value
    return results


def unshared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None) -> list[list[float]]:
    """The same sums, each (context, continuation) pair run as its own row: the reference."""
    device = device or next(model.parameters()).device
    return _unshared(model, requests, pad_id, device)


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
