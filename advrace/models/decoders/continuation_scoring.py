"""Log-likelihoods of continuations under a causal LM, with each context encoded once.

A question's context (passage and question, ~350 tokens) is shared by its four options (~10
tokens each). Scoring every (context, option) pair, as lm-evaluation-harness does, runs the
context four times; here it runs once, its keys and values are cached, and the options of the
question follow as one packed row over that cache (packed_scoring.packed_logprobs, through
packed_decoding's core: the mask in the form the model's attention reads, position ids that
restart for each option, and the fallback to one row per pair where a cache cannot hold the whole
prompt). Every option is so computed exactly as if it followed the context alone;
packed_scoring.unshared_logprobs computes the pairs one row each, the reference the tests compare
with. The questions of one article (`shared_logprobs`' groups) go further: the common prefix of
their contexts' tokens is cached once and each question's rest and options follow it in one tree
row (packed_scoring.grouped_logprobs), where the model passed the tree probe (`PrefixSharing`).

Tokens follow lm-evaluation-harness (`encode_request`): trailing whitespace of the context moves
to the continuations, the context is encoded alone, and a continuation is what encoding context +
continuation adds after the context's tokens. The context's last token is fed with each option
(so the prefix pass needs no logits at all) and predicts the option's first token. A pair longer
than the maximum length loses the first tokens of its context, each pair on its own, as
lm-evaluation-harness cuts it (`Request.pair`); such a question is scored pair by pair.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.decoders.packed_scoring import (Request, grouped_logprobs, probe_tree, shared_prefix,
                                                     unshared_logprobs)


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


class PrefixSharing:
    """Whether `core`'s model may score a group of questions over one cached shared prefix (their
    article), checked by `probe_tree` when built (only where the core shares at all), and what
    it shared: questions in groups, the groups, the prefix tokens not run again, and the questions
    of groups split for a reason (run each over its own context, counted)."""

    def __init__(self, core: PackedCore, device=None):
        self.core = core
        self.probe: dict | None = None
        self.reason: str | None = None if core.limit != 0 else core.why_limited
        if self.reason is None:
            found = probe_tree(core, device)
            if found is None:
                self.reason = "no shared-prefix probe fits the cache limit"
            else:
                self.probe = {"gap_below_tolerance": found["passed"]}
                self.reason = found["reason"]
        self.questions = self.groups = self.tokens_saved = 0
        self.split: dict = {}  # reason -> questions

    @property
    def enabled(self) -> bool:
        return self.reason is None

    def count(self, group: list[Request]) -> None:
        self.groups += 1
        self.questions += len(group)
        self.tokens_saved += (len(group) - 1) * len(shared_prefix(group))

    def refuse(self, reason: str, n: int) -> None:
        self.split[reason] = self.split.get(reason, 0) + n

    def record(self) -> dict:
        return {"probe": self.probe, "disabled_by": self.reason, "questions": self.questions,
                "groups": self.groups, "prefix_tokens_saved": self.tokens_saved,
                "questions_not_grouped": dict(sorted(self.split.items()))}


def _grouped(core: PackedCore, requests: list[Request], groups, sharing: PrefixSharing | None):
    """(groups of request indices to score over one prefix each, indices to run pair by pair),
    each question's lot counted."""
    together, alone = [], []
    for group in groups if groups is not None else [[i] for i in range(len(requests))]:
        kept = []
        for i in group:
            r = requests[i]
            reason = why_alone(core, r)
            if reason is None:
                kept.append(i)
                core.unshared.shared += 1
            else:
                alone.append(i)
                run = sum(len(ctx) + len(c) - 1 for ctx, c in map(r.pair, range(len(r.continuations))))
                core.unshared.add(reason, run, r.tokens - 1)
        if len(kept) > 1 and (sharing is None or not sharing.enabled):
            if sharing is not None:
                sharing.refuse(sharing.reason, len(kept))
            together += [[i] for i in kept]
        elif kept:
            together.append(kept)
            if sharing is not None and len(kept) > 1:
                sharing.count([requests[i] for i in kept])
    return together, alone


def shared_logprobs(model, requests: list[Request], *, pad_id: int = 0, device=None,
                    core: PackedCore | None = None, groups: list[list[int]] | None = None,
                    sharing: PrefixSharing | None = None) -> list[list[float]]:
    """Summed log-probability of each continuation of each request: the context encoded once,
    the options packed over it; a question that cannot share (`why_alone`) runs pair by pair,
    counted in `core.unshared`. `groups` (lists of request indices, e.g. one article's questions):
    each group's common context prefix is encoded once for all of them (where `sharing`, the
    model's `PrefixSharing`, is enabled; without it groups are split)."""
    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    results: list = [None] * len(requests)
    together, alone = _grouped(core, requests, groups, sharing)
    if together:
        values = grouped_logprobs(core, [[requests[i] for i in g] for g in together], pad_id, device)
        for group, group_values in zip(together, values):
            for i, value in zip(group, group_values):
                results[i] = value
    if alone:
        for i, value in zip(alone, unshared_logprobs(model, [requests[i] for i in alone], pad_id=pad_id,
                                                      device=device)):
            results[i] = value
    return results
