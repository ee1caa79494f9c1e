"""Continuations scored over a shared prompt cache, and the probe that checks a model can.

A question's options follow its context as one packed row over the context's cached keys and
values (`packed_logprobs`): each option's tokens see the context's real slots and the earlier
tokens of that option only, with position ids that continue the context, so each option is
computed as if it followed the context alone. `unshared_logprobs` runs every (context, option)
pair as its own row under the model's own mask: the reference. The probe (`probe_sharing`)
scores two seeded random questions both ways; packed_decoding.PackedCore shares a model's cache only
if they agree. The core is taken by what it does (prefill, mask, cache), so this module sits
below packed_decoding, which imports the probe.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.models.runtime.loading import input_device

# The most a probe's shared and unshared log-likelihoods may differ by, per weight dtype. In fp32
# (fp32 weights, autocast off for the probe) a right core agreed to 2e-5 (SmolLM2-135M) and a
# wrong one was 0.03-9 apart. Half-precision weights are probed as they are (an fp32 copy of a
# large model would cost its memory twice over), where rounding alone moves the probe's sums
# (options of up to 3 tokens) by up to 3 ulps of a logit near 32: 3 x 0.125 in bf16, 3 x 0.016 in
# fp16 (SmolLM2-135M: 0.14 and 0.018 measured); the tolerance is that, rounded up. A half-precision
# probe so catches crashes, a mask in the wrong form (~9 apart) and gross position errors, not
# an error below its rounding (MPT's ALiBi on a tiny model: 0.04): load in fp32 to check a new
# family exactly.
PROBE_TOLERANCE = {"float32": 1e-4, "float64": 1e-4, "bfloat16": 0.5, "float16": 0.1}


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


def packed_logprobs(core, requests: list[Request], pad_id: int, device) -> list[list[float]]:
    """Each continuation's summed log-probability through `core` (a packed_decoding.PackedCore:
    its prefill, mask, cache and model): one prefix pass for the batch, one packed pass for all
    continuations. Exact only where the core shares (its probe passed, every pair fits)."""
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


def unshared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None) -> list[list[float]]:
    """Each continuation's summed log-probability with each (context, continuation) pair run as
    its own row (cut as `Request.pair` cuts it): the reference the packed sums must match."""
    device = device or next(model.parameters()).device
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


def probe_sharing(core, device=None) -> dict | None:
    """Score the probe through `core` (a packed_decoding.PackedCore) and pair by pair, in fp32
    unless the weights are half precision (autocast off, eval mode for the probe): {dtype,
    tolerance, gap, passed, reason}. A probe that raises (an ALiBi model fed custom positions)
    has not passed. None: no probe fits in the core's window."""
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
            reference = unshared_logprobs(model, requests, pad_id=0, device=device)
            try:
                shared = packed_logprobs(core, requests, 0, device)
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
