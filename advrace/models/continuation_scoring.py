"""Log-likelihoods of continuations under a causal LM, with each context encoded once.

A question's context (passage and question, ~350 tokens) is shared by its four options (~10
tokens each). Scoring every (context, option) pair, as lm-evaluation-harness does, runs the
context four times; here it runs once, its keys and values are cached, and the options of the
question follow as one packed row over that cache. A 4D attention mask lets each option's tokens
see the context and the earlier tokens of their own option only, and position ids restart for
each option, so every option is computed exactly as if it followed the context alone. Any
Transformers causal LM that takes a 4D mask and position ids works; `unshared_logprobs` computes
the pairs one row each, as the reference the tests compare with.

Tokens follow lm-evaluation-harness (`encode_request`): trailing whitespace of the context moves
to the continuations, the context is encoded alone, and a continuation is what encoding context +
continuation adds after the context's tokens. The context's last token is fed with each option
(so the prefix pass needs no logits at all) and predicts the option's first token.

Greedy generation (`greedy_generate`) uses the same cache: each row's generated tokens follow
its own context, so rows of different lengths need no left padding.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.models.kv_cache import returned_cache, with_cache


@dataclass(frozen=True)
class Request:
    """One question: the context's tokens and one token sequence per continuation."""

    context: tuple[int, ...]
    continuations: tuple[tuple[int, ...], ...]

    @property
    def tokens(self) -> int:
        return len(self.context) + sum(len(c) for c in self.continuations)


def encode_request(tokenizer, context: str, continuations: list[str], *, max_length: int,
                   prefix: tuple[int, ...] = ()) -> Request:
    """A question's tokens as lm-evaluation-harness makes them; `prefix` (a BOS token) goes
    first. A context too long for `max_length` with its longest continuation loses its first
    tokens (lm-evaluation-harness cuts each pair the same way)."""
    spaces = len(context) - len(context.rstrip())
    moved, context = (context[-spaces:], context[:-spaces]) if spaces else ("", context)
    ctx = list(prefix) + tokenizer(context, add_special_tokens=False)["input_ids"]
    wholes = tokenizer([context + moved + c for c in continuations], add_special_tokens=False)["input_ids"]
    conts = tuple(tuple(w[len(ctx) - len(prefix):]) for w in wholes)
    if any(not c for c in conts):
        raise ValueError(f"an empty continuation after {context[-40:]!r}: every option needs a token")
    room = max_length + 1 - max(len(c) for c in conts)
    if room < 1:
        raise ValueError(f"a continuation of {max(len(c) for c in conts)} tokens does not fit in "
                         f"{max_length} tokens")
    return Request(tuple(ctx[-room:]), conts)


def _target_logprobs(logits, targets):
    """log p(target) at each position, in fp32, without a full log-softmax copy."""
    import torch

    logits = logits.detach().float()
    return logits.gather(-1, targets.unsqueeze(-1)).squeeze(-1) - torch.logsumexp(logits, dim=-1)


def _encode_prefixes(model, prefixes: list[tuple[int, ...]], pad_id: int, device):
    """Run the prefixes, right-padded, and return (cache, width); a row's pad slots are masked
    out later. Right padding keeps every real token's attention free of masked-out rows."""
    import torch

    width = max(len(p) for p in prefixes)
    if width == 0:
        return None, 0
    ids = torch.full((len(prefixes), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(prefixes), width), dtype=torch.long)
    for r, p in enumerate(prefixes):
        ids[r, :len(p)] = torch.tensor(p, dtype=torch.long)
        mask[r, :len(p)] = 1
    out = model(input_ids=ids.to(device), attention_mask=mask.to(device), use_cache=True, logits_to_keep=1)
    return returned_cache(out), width


def _packed_mask(prefix_lengths: list[int], width: int, segments: list[list[int]], length: int, device):
    """[rows, 1, length, width + length] bool: a token sees its row's real prefix slots and the
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
    return torch.cat([prefix, own], dim=-1).unsqueeze(1).to(device)


def shared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None) -> list[list[float]]:
    """Summed log-probability of each continuation of each request: one prefix pass for the
    batch, one packed pass for all continuations."""
    import torch

    device = device or next(model.parameters()).device
    prefixes = [r.context[:-1] for r in requests]
    cache, width = _encode_prefixes(model, prefixes, pad_id, device)
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

    def padded(values, fill):
        out = torch.full((len(values), length), fill, dtype=torch.long)
        for i, v in enumerate(values):
            out[i, :len(v)] = torch.tensor(v, dtype=torch.long)
        return out.to(device)

    mask = _packed_mask([len(p) for p in prefixes], width, segments, length, device)
    out = model(input_ids=padded(rows, pad_id), position_ids=padded(positions, 0), attention_mask=mask,
                **with_cache(model, cache), use_cache=cache is not None)
    logprobs = _target_logprobs(out.logits, padded(targets, 0)).cpu()
    results = []
    for i, r in enumerate(requests):
        sums, start = [], 0
        for cont in r.continuations:
            sums.append(float(logprobs[i, start:start + len(cont)].double().sum()))
            start += len(cont)
        results.append(sums)
    return results


def unshared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None) -> list[list[float]]:
    """The same sums, each (context, continuation) pair run as its own row: the reference."""
    import torch

    device = device or next(model.parameters()).device
    pairs = [(r.context, c) for r in requests for c in r.continuations]
    width = max(len(ctx) + len(c) - 1 for ctx, c in pairs)
    ids = torch.full((len(pairs), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(pairs), width), dtype=torch.long)
    for i, (ctx, c) in enumerate(pairs):
        row = ctx + c[:-1]
        ids[i, :len(row)] = torch.tensor(row, dtype=torch.long)
        mask[i, :len(row)] = 1
    logits = model(input_ids=ids.to(device), attention_mask=mask.to(device)).logits
    sums = []
    for i, (ctx, c) in enumerate(pairs):
        at = torch.arange(len(ctx) - 1, len(ctx) - 1 + len(c), device=logits.device)
        target = torch.tensor(c, dtype=torch.long, device=logits.device)
        sums.append(float(_target_logprobs(logits[i, at], target).double().sum()))
    it = iter(sums)
    return [[next(it) for _ in r.continuations] for r in requests]


def greedy_generate(model, contexts: list[tuple[int, ...]], *, max_new_tokens: int, stop, pad_id: int = 0,
                    device=None) -> list[tuple[int, ...]]:
    """The most probable next token, step by step, for each context, until `stop(tokens)` says a
    row is done or `max_new_tokens`; a row's tokens never depend on the other rows of its batch
    beyond float rounding."""
    import torch

    device = device or next(model.parameters()).device
    prefixes = [c[:-1] for c in contexts]
    lengths = [len(p) for p in prefixes]
    cache, width = _encode_prefixes(model, prefixes, pad_id, device)
    rows = len(contexts)
    slots = torch.arange(width).view(1, -1) < torch.tensor(lengths).view(-1, 1)
    generated: list[list[int]] = [[] for _ in contexts]
    done = [False] * rows
    tokens = torch.tensor([[c[-1]] for c in contexts], dtype=torch.long, device=device)
    for step in range(max_new_tokens):
        seen = torch.ones((rows, step + 1), dtype=torch.bool)
        mask = torch.cat([slots, seen], dim=-1).view(rows, 1, 1, -1).to(device)
        positions = torch.tensor([[n + step] for n in lengths], dtype=torch.long, device=device)
        out = model(input_ids=tokens, position_ids=positions, attention_mask=mask,
                    **with_cache(model, cache), use_cache=True)
        cache = returned_cache(out)
        best = out.logits[:, -1].float().argmax(-1).tolist()
        for r, t in enumerate(best):
            if not done[r]:
                generated[r].append(t)
                done[r] = bool(stop(generated[r]))
        if all(done):
            break
        tokens = torch.tensor([[t] for t in best], dtype=torch.long, device=device)
    return [tuple(g) for g in generated]
