"""Greedy decoding of a causal LM, the one decoder of the project: the SQuAD answers a decoder LM
is scored on (llm_scoring.predict_qa) and the closed-book fakes of the SQuAD attacks
(attacks.squad.closed_book) both come from `greedy_generate`.

The rows of a batch decode together over packed_decoding's cache: each row's context is run
once into the cache, right-padded, and its generated tokens then follow it step by step under
the core's 4D mask, at positions that continue the row's own context. A row so sees only itself:
its tokens never depend on the other rows of its batch beyond float rounding, and rows of
different lengths need no left padding. A `SharedPrefix` (a few-shot prompt every row starts
with) runs once; each batch views its keys and values (the batch's first forward copies them
into its rows), so that a row costs its own tokens only. A row that stops leaves the batch (its
token, position, key slots and cache row are dropped: `PackedCore.select_rows`), so that the
later steps cost the rows still decoding; a cache the core cannot drop rows from keeps them,
decoded on and unread (counted in `core.rows_kept`).

A row whose prefix, context and answer would outgrow what the core may share (a sliding window
shorter than them, an attention that takes no 4D mask, a failed probe) is decoded alone under
the model's own mask and cache, and counted in `core.unshared`. Either way a row stops after
the first token at which `stop(its tokens so far)` is true, that token kept, or after
`max_new_tokens`.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.kv_cache import returned_cache, with_cache


class SharedPrefix:
    """Tokens every row of one model starts with (a few-shot prompt), run once, on first use:
    each batch gets a copy of their keys and values (`cache_for`)."""

    def __init__(self, tokens):
        self.tokens = tuple(tokens)
        self._cache = None

    def cache_for(self, core: PackedCore, rows: int, pad_id: int, device):
        """A new cache that holds the prefix's keys and values once for each of `rows` rows."""
        if self._cache is None:
            self._cache, _ = core.prefill([self.tokens], pad_id, device)
        return core.repeated(self._cache, rows)


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


def _greedy_packed(model, core: PackedCore, contexts: list[tuple[int, ...]], prefix: SharedPrefix | None,
                   max_new_tokens: int, stop, pad_id: int, device) -> list[tuple[int, ...]]:
    """The rows decoded together over the core's cache, after the prefix's keys and values: the
    contexts are prefilled, their first tokens read from the prefill's logits at each row's last
    token, and each step then feeds the rows' latest tokens (the last one taken is never fed).
    A row leaves the batch once it stops (`_Rows.drop`), so that a step costs the live rows only."""
    import torch

    past = len(prefix.tokens) if prefix is not None else 0
    cache = prefix.cache_for(core, len(contexts), pad_id, device) if past else None
    cache, width, logits = core.prefill_last(contexts, pad_id, device, cache=cache, past=past)
    rows = _Rows(core, cache, contexts, width, past)
    generated: list[list[int]] = [[] for _ in contexts]
    for step in range(max_new_tokens):
        tokens = logits.float().argmax(-1).tolist()
        going = []
        for b, (r, t) in enumerate(zip(rows.index, tokens)):
            if r in rows.done:
                continue  # a finished row its cache could not drop: decoded on, its tokens unread
            generated[r].append(t)
            if stop(generated[r]):
                rows.done.add(r)
            else:
                going.append(b)
        if not going or step == max_new_tokens - 1:
            break
        tokens = rows.drop(going, tokens)
        live = len(rows.index)
        seen = torch.ones((live, step + 1), dtype=torch.bool)
        mask = core.mask(torch.cat([rows.slots, seen], dim=-1).view(live, 1, -1).to(device))
        out = model(input_ids=torch.tensor(tokens, dtype=torch.long, device=device).view(-1, 1),
                    position_ids=(rows.positions + step).view(-1, 1).to(device), attention_mask=mask,
                    **core.cache_kwargs(rows.cache), use_cache=True)
        rows.cache = returned_cache(out)
        logits = out.logits[:, -1]
    return [tuple(g) for g in generated]


class _Rows:
    """The rows of a packed greedy batch still decoding: each one's original index, key slots
    (the prefix's, then its own context's, right-padded), next position and cache row."""

    def __init__(self, core: PackedCore, cache, contexts, width: int, past: int):
        import torch

        self.core, self.cache = core, cache
        self.done: set[int] = set()
        self.kept = 0  # finished rows still in the batch
        self.index = list(range(len(contexts)))
        self.slots = torch.arange(width).view(1, -1) < torch.tensor([len(c) for c in contexts]).view(-1, 1)
        if past:
            self.slots = torch.cat([torch.ones((len(contexts), past), dtype=torch.bool), self.slots], dim=-1)
        self.positions = torch.tensor([past + len(c) for c in contexts], dtype=torch.long)

    def drop(self, going: list[int], tokens: list[int]) -> list[int]:
        """Keep the batch rows `going` (the others stopped) and return their next tokens; where the
        cache cannot drop rows, every row stays (counted in `core.rows_kept`) and all tokens go on."""
        if len(going) == len(self.index):
            return tokens
        if not self.core.select_rows(self.cache, going):
            newly = len(self.index) - len(going) - self.kept
            self.core.rows_kept += newly
            self.kept += newly
            return tokens
        self.index = [self.index[b] for b in going]
        self.slots, self.positions = self.slots[going], self.positions[going]
        return [tokens[b] for b in going]


def greedy_generate(model, contexts: list[tuple[int, ...]], *, max_new_tokens: int, stop, pad_id: int = 0,
                    device=None, core: PackedCore | None = None,
                    prefix: SharedPrefix | None = None) -> list[tuple[int, ...]]:
    """The most probable next token, step by step, after each context (after `prefix`'s tokens,
    where given), until `stop(tokens)` says a row is done or `max_new_tokens`; a row's tokens never
    depend on the other rows of its batch beyond float rounding. A row whose prefix, context and
    answer would outgrow the shared cache's limit is decoded alone (counted in `core.unshared`:
    it ran its prefix too, where sharing would have run its own tokens only)."""
    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    head = prefix.tokens if prefix is not None else ()
    results: list = [None] * len(contexts)
    together = []
    for i, c in enumerate(contexts):
        own = len(c) + max_new_tokens - 1  # what the row feeds: its last answer token is never fed
        if core.fits(len(head) + own):
            together.append(i)
            core.unshared.shared += 1
        else:
            core.unshared.add(core.why_limited, len(head) + own, own)
            results[i] = tuple(_greedy_alone(model, head + tuple(c), max_new_tokens, stop, device))
    if together:
        batch = [contexts[i] for i in together]
        for i, tokens in zip(together, _greedy_packed(model, core, batch, prefix if head else None,
                                                      max_new_tokens, stop, pad_id, device)):
            results[i] = tokens
    return results
