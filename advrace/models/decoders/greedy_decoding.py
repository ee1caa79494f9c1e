"""Greedy generation over packed_decoding's cache: each row's generated tokens follow its own
context, so rows of different lengths need no left padding.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.kv_cache import returned_cache, with_cache


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
    decoded alone (counted in `core.unshared`)."""
    import torch

    core = core or PackedCore(model)
    device = device or next(model.parameters()).device
    results: list = [None] * len(contexts)
    together = []
    for i, c in enumerate(contexts):
        if core.fits(len(c) + max_new_tokens - 1):
            together.append(i)
            core.unshared.shared += 1
        else:
            core.unshared.add(core.why_limited, len(c) + max_new_tokens - 1, len(c) + max_new_tokens - 1)
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
