"""Beam search's step decoders for a causal LM (DG's `causal_lm` backend): `CausalDecoder` shares
each prompt's keys and values among its beams by tree attention; `ReorderingDecoder` is the plain
way, for models whose cache the packed-decoding core cannot share. Both plug into
advrace.models.decoders.beam_search; the prompts they decode are built by distractor_inputs.
"""

from __future__ import annotations

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.kv_cache import returned_cache, with_cache


class CausalDecoder:
    """Incremental decoding for advrace.models.decoders.beam_search by *tree attention*: one key-value
    cache row holds each prompt once, then every token any beam has generated, appended step by
    step; a step feeds all live beams' new tokens as one row of queries, each at position prompt
    length + depth, under a 4D mask that lets it see its question's prompt, its own ancestors
    (their cache slots, followed through `origin`) and itself. Nothing of the cache is copied per
    beam or reordered: it grows by the number of beams fed a step. A finished question is left
    out of the steps (`skips_finished`).

    The questions of a batch are decoded together, so a step reads the weights once for all of
    them, yet each sees only its own slots: its candidates do not depend on the others. A prompt
    that begins like an earlier one of the batch (a question on the same passage) has only the
    rest run, seeing the earlier prompt's slots of the shared tokens; any other prompt is run
    alone and unpadded. The mask's form and the cache come from advrace.models.decoders.packed_decoding;
    models whose cache cannot keep every key and value (sliding-window or recurrent layers), whose
    attention takes no custom 4D mask, or that fail the core's probe (ALiBi) fall back to
    `ReorderingDecoder`, one question at a time (`batched` is False).
    """

    skips_finished = True  # see advrace.models.decoders.beam_search

    def __init__(self, model):
        self.model = model
        self._core = PackedCore(model)
        # False: the model needs ReorderingDecoder, which decodes one question at a time
        self.batched = self._core.limit is None
        self._fallback = None if self.batched else ReorderingDecoder(model)

    def _new_cache(self):
        return self._core.new_cache()

    def _mask(self, visible):
        """A [queries, keys] boolean visibility as the model's 4D attention mask."""
        return self._core.mask(visible.unsqueeze(0))

    def start(self, source_ids, source_lengths):
        import torch  # deferred for start-up time

        if self._fallback is not None:
            return self._fallback.start(source_ids, source_lengths)
        device = source_ids.device
        cache, size = None, 0
        slots, logps = [], []  # per question: the cache slots of its prompt's tokens; its first scores
        with torch.inference_mode():
            for q, n in enumerate(int(n) for n in source_lengths.tolist()):
                ids = source_ids[q, :n]
                # the longest prefix this prompt shares with an earlier one (questions of one passage)
                share, donor = 0, None
                for d in range(q):
                    k = _common_prefix(source_ids[d, :len(slots[d])], ids)
                    if k > share:
                        share, donor = k, d
                share = min(share, n - 1)  # at least one token to predict from
                if not share:  # run alone and unpadded, then appended to the row
                    own = self._new_cache()
                    out = self.model(input_ids=ids.view(1, n), **with_cache(self.model, own), use_cache=True,
                                     logits_to_keep=1)
                    if cache is None:
                        cache = own
                    else:
                        for layer, more in zip(cache.layers, own.layers):
                            layer.keys = torch.cat([layer.keys, more.keys], dim=-2)
                            layer.values = torch.cat([layer.values, more.values], dim=-2)
                    slots.append(torch.arange(size, size + n, device=device))
                else:  # the rest of the prompt, seeing the shared prefix's slots and itself
                    new = n - share
                    visible = torch.zeros((new, size + new), dtype=torch.bool, device=device)
                    visible[:, slots[donor][:share]] = True
                    visible[:, size:] = torch.ones((new, new), dtype=torch.bool, device=device).tril()
                    out = self.model(input_ids=ids[share:].view(1, new), attention_mask=self._mask(visible),
                                     position_ids=torch.arange(share, n, device=device).view(1, new),
                                     **with_cache(self.model, cache), use_cache=True, logits_to_keep=1)
                    slots.append(torch.cat([slots[donor][:share], torch.arange(size, size + new, device=device)]))
                size += n - share
                logps.append(torch.log_softmax(out.logits[:, -1].float(), dim=-1))
        # which cache slots each live hypothesis sees: its question's prompt (then its ancestors)
        visible = torch.zeros((len(slots), size), dtype=torch.bool, device=device)
        for q, own_slots in enumerate(slots):
            visible[q, own_slots] = True
        logp = torch.cat(logps)
        lengths = torch.tensor([len(s) for s in slots], device=device)
        state = {"cache": cache, "beams": 1, "depth": 0, "visible": visible, "vocab": logp.shape[-1],
                 "lengths": lengths, "size": size}
        return state, logp

    def step(self, state, tokens, origin, active=None):
        import torch  # deferred for start-up time

        if self._fallback is not None:
            return self._fallback.step(state, tokens, origin)
        b, beams = tokens.shape
        device = tokens.device
        rows = (torch.arange(b, device=device).view(-1, 1) * state["beams"] + origin).view(-1)
        ancestors = state["visible"].index_select(0, rows)  # [b * beams, cache size]
        fed = torch.ones(b, dtype=torch.bool, device=device) if active is None else \
            torch.tensor(active, dtype=torch.bool, device=device)
        fed = fed.repeat_interleave(beams).nonzero().view(-1)  # the hypotheses fed this step
        n = len(fed)
        own = torch.zeros((b * beams, n), dtype=torch.bool, device=device)
        own[fed, torch.arange(n, device=device)] = True  # a fed token sees itself
        visible = torch.cat([ancestors, own], dim=1)
        logp = torch.zeros((b * beams, state["vocab"]), device=device)  # finished questions: never read
        cache = state["cache"]
        if n:
            mask = self._mask(visible.index_select(0, fed))
            positions = (state["lengths"].repeat_interleave(beams) + state["depth"]).index_select(0, fed)
            with torch.inference_mode():
                out = self.model(input_ids=tokens.reshape(-1).index_select(0, fed).view(1, n),
                                 attention_mask=mask, position_ids=positions.view(1, n),
                                 **with_cache(self.model, cache), use_cache=True)
            cache = returned_cache(out)
            scores = torch.log_softmax(out.logits[0].float(), dim=-1)
            logp = scores if n == b * beams else logp.index_copy(0, fed, scores)
        state = {**state, "cache": cache, "beams": beams, "depth": state["depth"] + 1, "visible": visible,
                 "size": state["size"] + n}
        return state, logp.view(b, beams, -1)


class ReorderingDecoder:
    """The plain way, for models `CausalDecoder` cannot share a prompt among beams with: the
    prompt's cached keys and values are copied to every beam and reordered at every step. A
    question's prompt is run alone and unpadded, one question after another."""

    def __init__(self, model):
        self.model = model

    def start(self, source_ids, source_lengths):
        import torch  # deferred for start-up time
        from transformers import DynamicCache

        if source_ids.shape[0] != 1:
            raise ValueError("ReorderingDecoder decodes one question at a time")
        n = int(source_lengths[0])
        with torch.inference_mode():
            cache = DynamicCache(config=self.model.config)
            out = self.model(input_ids=source_ids[:, :n], **with_cache(self.model, cache),
                             use_cache=True, logits_to_keep=1)
        state = {"cache": returned_cache(out), "beams": 1, "length": n}
        return state, torch.log_softmax(out.logits[:, -1].float(), dim=-1)

    def step(self, state, tokens, origin):
        import torch  # deferred for start-up time

        b, beams = tokens.shape
        rows = (torch.arange(b, device=tokens.device).view(-1, 1) * state["beams"] + origin).view(-1)
        cache = state["cache"]
        cache.reorder_cache(rows)
        positions = torch.full((b * beams, 1), state["length"], dtype=torch.long, device=tokens.device)
        with torch.inference_mode():
            out = self.model(input_ids=tokens.reshape(-1, 1), position_ids=positions,
                             **with_cache(self.model, cache), use_cache=True)
        state = {"cache": returned_cache(out), "beams": beams, "length": state["length"] + 1}
        return state, torch.log_softmax(out.logits[:, -1].float(), dim=-1).view(b, beams, -1)


def _common_prefix(a, b) -> int:
    """How many leading tokens two 1D id tensors share."""
    m = min(len(a), len(b))
    differ = (a[:m] != b[:m]).nonzero()
    return int(differ[0]) if len(differ) else m
