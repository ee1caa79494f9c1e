"""Inputs of a causal-LM distractor generator: one prompt (passage cut to `max_passage_tokens`,
question, correct answer), then one distractor and the end token.

Training (objective `causal_lm`) and generation (attack `distractor_generation`, backend
`causal_lm`) must build the prompt the same way, token for token, so both come here. Batches are
padded on the left, so every row's distractor ends at the last position and the model need only
compute logits for the last few positions (`logits_to_keep`), not for the whole prompt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.runtime.kv_cache import returned_cache, with_cache

PROMPT = ("Read the passage and write one wrong answer to the question: a short option that "
          "sounds plausible but is not correct.\n\nPassage: {passage}\n\nQuestion: {question}\n"
          "Correct answer: {answer}\nWrong answer:")
IGNORE = -100  # the label of a position that is not scored


@dataclass(frozen=True)
class CausalFeature:
    example: int
    prompt: tuple[int, ...]
    target: tuple[int, ...]  # the distractor's tokens and the end token

    @property
    def length(self) -> int:
        return len(self.prompt) + len(self.target)


def end_id(tokenizer) -> int:
    """The token that ends a distractor: EOS, or [SEP] for a BERT-style tokenizer."""
    end = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    if end is None:
        raise ValueError("a causal-LM distractor generator needs a tokenizer with an end token (EOS)")
    return end


def prompt_texts(tokenizer, examples: list, max_passage_tokens: int, template: str = PROMPT) -> list[str]:
    passages = tokenizer([ex.passage for ex in examples], add_special_tokens=False)["input_ids"]
    return [template.format(passage=tokenizer.decode(p[:max_passage_tokens], skip_special_tokens=True),
                            question=ex.question, answer=ex.answer)
            for ex, p in zip(examples, passages)]


def prompt_ids(tokenizer, examples: list, max_passage_tokens: int, template: str = PROMPT) -> list[list[int]]:
    """Token ids of each example's prompt, without special tokens (a BERT-style tokenizer would
    otherwise end the prompt with [SEP], the end token)."""
    texts = prompt_texts(tokenizer, examples, max_passage_tokens, template)
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def training_features(tokenizer, examples: list, max_passage_tokens: int, max_distractor_tokens: int,
                      per_question: int = 3, seed: int = 0) -> list[CausalFeature]:
    """One feature per (question, original distractor); with `per_question` below the number of
    distractors, that many drawn per question from (seed, question id), so that a CPU budget can
    buy more passages rather than more distractors of the same passage."""
    end = end_id(tokenizer)
    prompts = prompt_ids(tokenizer, examples, max_passage_tokens)
    features = []
    for i, (ex, prompt) in enumerate(zip(examples, prompts)):
        chosen = [d for d in ex.distractors if d.strip()]
        if len(chosen) > per_question:
            chosen = random.Random(f"{seed}:{ex.source_id}").sample(chosen, per_question)
        if not prompt or not chosen:
            continue
        # a leading space: the distractor follows "Wrong answer:" as it would in running text
        targets = tokenizer([" " + d.strip() for d in chosen], add_special_tokens=False)["input_ids"]
        for ids in targets:
            ids = ids[:max(1, max_distractor_tokens - 1)]
            if ids:
                features.append(CausalFeature(i, tuple(prompt), tuple(ids) + (end,)))
    return features


def collate_causal(features: list[CausalFeature], pad_token_id: int = 0) -> dict:
    """Left-padded prompt + target rows; `labels` covers only the last `logits_to_keep` positions,
    IGNORE except on the target tokens, so the loss is on the distractor alone."""
    import torch  # deferred for start-up time

    width = max(f.length for f in features)
    keep = max(len(f.target) for f in features) + 1  # the position before a target predicts its first token
    ids = torch.full((len(features), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    labels = torch.full((len(features), keep), IGNORE, dtype=torch.long)
    for i, f in enumerate(features):
        ids[i, width - f.length:] = torch.tensor(f.prompt + f.target)
        mask[i, width - f.length:] = 1
        labels[i, keep - len(f.target):] = torch.tensor(f.target)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels,
            "logits_to_keep": keep}


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
