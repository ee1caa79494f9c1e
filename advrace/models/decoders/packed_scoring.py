"""Continuations scored over a shared prompt cache, and the probe that checks a model can.

A question's options follow its context as one packed row over the context's cached keys and
values (`packed_logprobs`): each option's tokens see the context's real slots and the earlier
tokens of that option only, with position ids that continue the context, so each option is
computed as if it followed the context alone; several questions sharing the start of their
contexts (an article) share that part in one row too, as a tree (`grouped_logprobs`).
`unshared_logprobs` runs every (context, option) pair as its own row under the model's own mask:
the reference. The probe (`probe_sharing`) scores two seeded random questions both ways;
packed_decoding.PackedCore shares a model's cache only if they agree; `probe_tree` checks the
tree the same way. The core is taken by what it does (prefill, mask, cache), so this module sits
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


def _packed_visibility(prefix_lengths: list[int], width: int, segments: list[list[int]], length: int,
                       parents: list[list[int]] | None = None):
    """[rows, length, width + length] bool: a token sees its row's real prefix slots, the earlier
    tokens of its own segment and every token of its parent segment (segment ids per token;
    `parents`: per token the segment it sees whole, -2 for none; -1 marks padding, which sees
    slot 0 only, so that no row of the softmax is empty)."""
    import torch

    rows = len(segments)
    seg = torch.full((rows, length), -1, dtype=torch.long)
    for r, s in enumerate(segments):
        seg[r, :len(s)] = torch.tensor(s, dtype=torch.long)
    position = torch.arange(length)
    own = (seg.unsqueeze(2) == seg.unsqueeze(1)) & (position.view(1, 1, -1) <= position.view(1, -1, 1))
    if parents is not None:
        par = torch.full((rows, length), -2, dtype=torch.long)
        for r, p in enumerate(parents):
            par[r, :len(p)] = torch.tensor(p, dtype=torch.long)
        own |= (seg.unsqueeze(1) == par.unsqueeze(2)) & (par >= 0).unsqueeze(2)
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


def shared_prefix(group: list[Request]) -> tuple[int, ...]:
    """The tokens a group of questions shares as one cached prefix: the longest common prefix of
    their contexts' tokens, as each was tokenised (never a re-tokenised piece: a BPE merge across
    the article/question boundary just ends it earlier), short of every context's last token (fed
    with the options). One question: its context less the last token."""
    contexts = [r.context for r in group]
    first, n = contexts[0], min(len(c) for c in contexts) - 1
    for c in contexts[1:]:
        n = next((i for i in range(n) if c[i] != first[i]), n)
    return first[:max(n, 0)]


def _tree_row(group: list[Request], prefix: tuple[int, ...]):
    """One packed row for a group over its cached `prefix`: per question its context's rest (less
    the last token: a segment seen whole by its options), then per option the context's last token
    and the option (a segment each), with the positions each token has in its own pair. Returns
    (tokens, targets, segments, parents, positions, option spans as (start, length))."""
    tokens, targets, segments, parents, positions, spans = [], [], [], [], [], []
    question = 0
    for r in group:
        rest = r.context[len(prefix):-1]
        tokens += rest
        targets += [0] * len(rest)
        segments += [question] * len(rest)
        parents += [-2] * len(rest)
        positions += range(len(prefix), len(r.context) - 1)
        for k, cont in enumerate(r.continuations):
            fed = (r.context[-1],) + cont[:-1]
            spans.append((len(tokens), len(cont)))
            tokens += fed
            targets += cont
            segments += [question + 1 + k] * len(fed)
            parents += [question] * len(fed)
            positions += range(len(r.context) - 1, len(r.context) - 1 + len(fed))
        question += 1 + len(r.continuations)
    return tokens, targets, segments, parents, positions, spans


def grouped_logprobs(core, groups: list[list[Request]], pad_id: int, device) -> list[list[list[float]]]:
    """Each continuation's summed log-probability, per question per group, through `core` (a
    packed_decoding.PackedCore: its prefill, mask, cache and model): one prefix pass for the
    groups' shared prefixes (`shared_prefix`), one packed pass over them, a row per group (a tree:
    each question's rest sees the prefix, each option its question's rest and the prefix). Exact
    only where the core shares (its probe passed, every pair fits) and, for groups of more than one
    question, where `probe_tree` passed."""
    prefixes = [shared_prefix(g) for g in groups]
    cache, width = core.prefill(prefixes, pad_id, device)
    built = [_tree_row(g, p) for g, p in zip(groups, prefixes)]
    length = max(len(b[0]) for b in built)
    visible = _packed_visibility([len(p) for p in prefixes], width, [b[2] for b in built], length,
                                 [b[3] for b in built])
    if cache is None:
        cache = core.new_cache()
    scored = _scored([b[5] for b in built], length) if core.keeps_logits else None
    kept = {} if scored is None else {"logits_to_keep": scored.to(device)}
    out = core.model(input_ids=_padded([b[0] for b in built], length, pad_id, device),
                     position_ids=_padded([b[4] for b in built], length, 0, device),
                     attention_mask=core.mask(visible.to(device)), **core.cache_kwargs(cache), use_cache=True, **kept)
    targets = _padded([b[1] for b in built], length, 0, device)
    if scored is None:
        logprobs = _target_logprobs(out.logits, targets).cpu()
    else:  # the output layer ran at the scored positions only, flattened row by row
        import torch  # deferred for start-up time

        logprobs = torch.zeros((len(built), length), dtype=torch.float32)
        logprobs[scored] = _target_logprobs(out.logits, targets[scored.to(device)]).cpu()
    results = []
    for i, (g, b) in enumerate(zip(groups, built)):
        spans = iter(b[5])
        results.append([[float(logprobs[i, start:start + n].double().sum()) for start, n in
                         (next(spans) for _ in r.continuations)] for r in g])
    return results


def _scored(spans: list[list[tuple[int, int]]], length: int):
    """[rows, length] bool: the positions whose log-probabilities are summed (each option's)."""
    import torch  # deferred for start-up time

    scored = torch.zeros((len(spans), length), dtype=torch.bool)
    for r, row in enumerate(spans):
        for start, n in row:
            scored[r, start:start + n] = True
    return scored


def packed_logprobs(core, requests: list[Request], pad_id: int, device) -> list[list[float]]:
    """Each continuation's summed log-probability, each question's context its own cached prefix
    (`grouped_logprobs` with groups of one)."""
    return [values for (values,) in grouped_logprobs(core, [[r] for r in requests], pad_id, device)]


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


def probe_groups(requests: list[Request], vocab: int) -> list[list[Request]]:
    """The tree probe from the probe's two questions: each gets siblings that share a part of its
    context and go on with rests of other lengths (and other options), so that a group's row holds
    questions of different lengths, and an option seeing a sibling's tokens or counting its
    positions from the row would show."""
    import random

    draw = random.Random(1)

    def ids(n):
        return tuple(draw.randrange(min(3, vocab - 1), vocab) for _ in range(n))

    groups = []
    for r in requests:
        stem = r.context[:max(1, len(r.context) - 4)]
        groups.append([r, Request(stem + ids(2), (ids(2), ids(3))), Request(stem + ids(1), (ids(1), ids(3)))])
    return groups


def _probe(core, score, requests: list[Request], device, what: str) -> dict:
    """`score(requests)` (log-likelihoods through `core`) against `unshared_logprobs`, as
    `probe_sharing` says."""
    import math

    import torch

    model = core.model
    dtype = next((p.dtype for p in model.parameters() if p.dtype.is_floating_point), torch.float32)
    name = str(dtype).removeprefix("torch.")
    tolerance = PROBE_TOLERANCE.get(name, PROBE_TOLERANCE["bfloat16"])
    training = model.training
    model.eval()
    try:
        with torch.inference_mode(), torch.autocast(device.type, enabled=False):
            reference = unshared_logprobs(model, requests, pad_id=0, device=device)
            try:
                shared = score(requests)
            except torch.cuda.OutOfMemoryError:
                raise
            except Exception as exc:  # noqa: BLE001 - a model that cannot take the packed inputs
                why = str(exc).splitlines()[0][:120] if str(exc) else ""
                return {"dtype": name, "tolerance": tolerance, "gap": math.inf, "passed": False,
                        "reason": f"{what} probe failed under {core.implementation} attention "
                                  f"({type(exc).__name__}: {why})"}
    finally:
        model.train(training)
    gaps = [abs(a - b) for rs, rr in zip(shared, reference) for a, b in zip(rs, rr)]
    gap = max(gaps) if all(math.isfinite(g) for g in gaps) else math.inf
    passed = gap <= tolerance
    return {"dtype": name, "tolerance": tolerance, "gap": gap, "passed": passed,
            "reason": None if passed else (f"{what} probe {gap:.0e} from unshared under {core.implementation} "
                                           f"attention in {name} (positions not from position_ids?)")}


def _probe_setting(core, device):
    """(the probe's requests, device, vocabulary size), or None when no probe fits the window."""
    model = core.model
    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    vocab = getattr(embeddings, "num_embeddings", None) or model.config.vocab_size
    requests = probe_requests(vocab, PROBE_LONGEST if core.limit is None else min(PROBE_LONGEST, core.limit))
    return None if requests is None else (requests, device or input_device(model), vocab)


def probe_sharing(core, device=None) -> dict | None:
    """Score the probe through `core` (a packed_decoding.PackedCore) and pair by pair, in fp32
    unless the weights are half precision (autocast off, eval mode for the probe): {dtype,
    tolerance, gap, passed, reason}. A probe that raises (an ALiBi model fed custom positions)
    has not passed. None: no probe fits in the core's window."""
    setting = _probe_setting(core, device)
    if setting is None:
        return None
    requests, device, _ = setting
    return _probe(core, lambda rs: packed_logprobs(core, rs, 0, device), requests, device, "packed")


def probe_tree(core, device=None) -> dict | None:
    """As `probe_sharing`, for groups of questions sharing a part of their contexts in one tree row
    (`grouped_logprobs` on `probe_groups`): questions of different lengths in a row, the prefix
    cached. None: no probe fits in the core's window."""
    setting = _probe_setting(core, device)
    if setting is None:
        return None
    requests, device, vocab = setting
    groups = probe_groups(requests, vocab)
    flat = [r for g in groups for r in g]

    def score(_):
        return [values for group in grouped_logprobs(core, groups, 0, device) for values in group]

    return _probe(core, score, flat, device, "shared-prefix")
