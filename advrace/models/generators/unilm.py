"""A UniLM-style sequence-to-sequence generator on a BERT-family encoder (Dong et al., 2019).

One transformer reads `[CLS] source [SEP] target [SEP]`. UniLM's seq-to-seq self-attention mask
lets source tokens see the whole source and nothing else, and each target token see the source
and the target tokens up to itself. The masked-LM head (trained from scratch when the encoder
ships without one, as the offline MiniLM does) reads the hidden state of the previous token, so
generation is left to right and the keys and values of the source and of earlier target tokens
can be cached: `Seq2SeqDecoder` encodes a source once and extends a beam by one token per step.

The model is a `BertForMaskedLM` with its own forward pass, so `save_pretrained` /
`from_pretrained` and the tied output embeddings work as for any BERT checkpoint.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from transformers import BertForMaskedLM
from transformers.utils import ModelOutput


def seq2seq_mask(source_lengths: torch.Tensor, lengths: torch.Tensor, width: int) -> torch.Tensor:
    """Boolean [batch, width, width]: may query position q attend to key position k?

    Positions below `source_lengths[b]` are the source, those up to `lengths[b]` the target,
    the rest padding (which attends to nothing and is attended by nothing).
    """
    pos = torch.arange(width, device=source_lengths.device)
    q, k = pos.view(1, -1, 1), pos.view(1, 1, -1)
    src = source_lengths.view(-1, 1, 1)
    valid = lengths.view(-1, 1, 1)
    key_is_source = k < src
    query_in_target = (q >= src) & (q < valid)
    return ((q < valid) & key_is_source) | (query_in_target & (k >= src) & (k <= q))


class UniLMSeq2Seq(BertForMaskedLM):
    """BERT with UniLM's seq-to-seq mask; `forward` returns `.loss` (next-token cross-entropy
    over the target) and `.logits`."""

    def _layers(self):
        return self.bert.encoder.layer

    def embed(self, input_ids, token_type_ids, position_ids) -> torch.Tensor:
        return self.bert.embeddings(input_ids=input_ids, token_type_ids=token_type_ids,
                                    position_ids=position_ids)

    def _heads(self, x: torch.Tensor, attn) -> torch.Tensor:
        b, n, _ = x.shape
        return x.view(b, n, attn.num_attention_heads, attn.attention_head_size).transpose(1, 2)

    def project(self, layer, hidden):
        attn = layer.attention.self
        return (self._heads(attn.query(hidden), attn), self._heads(attn.key(hidden), attn),
                self._heads(attn.value(hidden), attn))

    def finish_layer(self, layer, hidden, context) -> torch.Tensor:
        """Everything in a BERT layer after the attention weights: output projection, residual,
        LayerNorm, feed-forward."""
        b, _, n, _ = context.shape
        context = context.transpose(1, 2).reshape(b, n, -1)
        attended = layer.attention.output(context, hidden)
        return layer.output(layer.intermediate(attended), attended)

    def run_layers(self, hidden: torch.Tensor, mask: torch.Tensor, keep_kv: bool = False):
        """All layers over full sequences with a boolean [batch, q, k] mask; with `keep_kv`, also
        each layer's keys and values."""
        kv = []
        dropout = self.config.attention_probs_dropout_prob if self.training else 0.0
        # A query row with no allowed key (padding) would give NaN; let it attend to itself.
        eye = torch.eye(mask.shape[-1], dtype=torch.bool, device=mask.device)
        mask = (mask | (~mask.any(-1, keepdim=True) & eye)).unsqueeze(1)
        for layer in self._layers():
            q, k, v = self.project(layer, hidden)
            if keep_kv:
                kv.append((k, v))
            context = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=dropout)
            hidden = self.finish_layer(layer, hidden, context)
        return hidden, kv

    def hidden_states(self, input_ids, source_lengths, lengths, token_type_ids=None) -> torch.Tensor:
        width = input_ids.shape[1]
        pos = torch.arange(width, device=input_ids.device).unsqueeze(0).expand_as(input_ids)
        if token_type_ids is None:
            token_type_ids = (pos >= source_lengths.view(-1, 1)).long()
        hidden = self.embed(input_ids, token_type_ids, pos)
        hidden, _ = self.run_layers(hidden, seq2seq_mask(source_lengths, lengths, width))
        return hidden

    def forward(self, input_ids, source_lengths, lengths, token_type_ids=None, labels=None, **_):
        """Without labels, logits for every position. With labels, the vocabulary projection runs
        only where a label is (the target: a few tokens after a long source), and `logits` holds
        those rows, in order, `positions` saying where they are."""
        hidden = self.hidden_states(input_ids, source_lengths, lengths, token_type_ids)
        if labels is None:
            return Seq2SeqOutput(None, self.cls(hidden))
        positions = labels != -100
        logits = self.cls(hidden[positions])
        loss = F.cross_entropy(logits.float(), labels[positions])
        return Seq2SeqOutput(loss, logits, positions)


@dataclass
class Seq2SeqOutput(ModelOutput):
    """A ModelOutput, so Accelerate's mixed precision can rebuild it with fp32 logits."""

    loss: torch.Tensor | None = None
    logits: torch.Tensor | None = None
    positions: torch.Tensor | None = None


def next_token_labels(input_ids: torch.Tensor, source_lengths: torch.Tensor,
                      lengths: torch.Tensor) -> torch.Tensor:
    """Position i predicts token i+1 for i from the source's last token ([SEP]) to the one before
    the target's end; everything else is -100 (ignored)."""
    labels = torch.full_like(input_ids, -100)
    labels[:, :-1] = input_ids[:, 1:]
    pos = torch.arange(input_ids.shape[1], device=input_ids.device).view(1, -1)
    keep = (pos >= source_lengths.view(-1, 1) - 1) & (pos < lengths.view(-1, 1) - 1)
    return labels.masked_fill(~keep, -100)


class Seq2SeqDecoder:
    """Incremental decoding for beam search: the source is encoded once per question and its keys
    and values shared by all of the question's beams; each step feeds one token per beam, which
    attends to the source cache and to the beam's own cached target keys and values."""

    def __init__(self, model: UniLMSeq2Seq):
        self.model = model

    @torch.inference_mode()
    def start(self, source_ids: torch.Tensor, source_lengths: torch.Tensor):
        """Encode [batch, S] right-padded sources; return the state and the first-token
        log-probabilities [batch, vocab]."""
        m = self.model
        b, s = source_ids.shape
        pos = torch.arange(s, device=source_ids.device).unsqueeze(0).expand(b, -1)
        hidden = m.embed(source_ids, torch.zeros_like(source_ids), pos)
        mask = seq2seq_mask(source_lengths, source_lengths, s)
        hidden, kv = m.run_layers(hidden, mask, keep_kv=True)
        last = hidden[torch.arange(b), source_lengths - 1]
        state = {"source_kv": kv, "source_valid": pos < source_lengths.view(-1, 1),
                 "source_lengths": source_lengths, "target_kv": None, "steps": 0}
        return state, torch.log_softmax(m.cls(last).float(), dim=-1)

    @torch.inference_mode()
    def step(self, state: dict, tokens: torch.Tensor, origin: torch.Tensor):
        """Extend beams by `tokens` [batch, beams]; `origin` [batch, beams] names the beam each new
        one continues. Returns the new state and log-probabilities [batch, beams, vocab]."""
        m = self.model
        b, beams = tokens.shape
        t = state["steps"]
        pos = (state["source_lengths"].view(-1, 1) + t).expand(b, beams)
        hidden = m.embed(tokens.reshape(-1, 1), torch.ones_like(tokens).reshape(-1, 1),
                         pos.reshape(-1, 1))
        src_invalid = ~state["source_valid"].view(b, 1, 1, -1)
        new_kv = []
        for i, layer in enumerate(m._layers()):
            q, k, v = m.project(layer, hidden)  # [b*beams, H, 1, d]
            heads, d = q.shape[1], q.shape[-1]
            # [b, H, beams, d]: one query per beam, batched against the question's shared source
            q, k, v = (x.view(b, beams, heads, d).transpose(1, 2) for x in (q, k, v))
            k, v = k.unsqueeze(3), v.unsqueeze(3)  # [b, H, beams, 1, d]
            if state["target_kv"] is not None:
                pk, pv = state["target_kv"][i]  # [b, H, beams, t, d]
                idx = origin.view(b, 1, beams, 1, 1).expand(-1, heads, -1, *pk.shape[3:])
                k = torch.cat([pk.gather(2, idx), k], dim=3)
                v = torch.cat([pv.gather(2, idx), v], dim=3)
            new_kv.append((k, v))
            sk, sv = state["source_kv"][i]  # [b, H, S, d]
            scale = d ** -0.5
            src_scores = (q @ sk.transpose(-1, -2)) * scale  # [b, H, beams, S]
            # the scores' own lowest value: under bf16 autocast they cannot hold fp32's
            src_scores = src_scores.masked_fill(src_invalid, torch.finfo(src_scores.dtype).min)
            tgt_scores = (k @ q.unsqueeze(-1)).squeeze(-1) * scale  # [b, H, beams, t]
            weights = torch.softmax(torch.cat([src_scores, tgt_scores], dim=-1).float(), dim=-1)
            weights = weights.to(q.dtype)
            s_len = sk.shape[2]
            context = (weights[..., :s_len] @ sv
                       + (weights[..., s_len:].unsqueeze(-2) @ v).squeeze(-2))  # [b, H, beams, d]
            context = context.permute(0, 2, 1, 3).reshape(b * beams, heads, 1, d)
            hidden = m.finish_layer(layer, hidden, context)
        logits = m.cls(hidden).float().view(b, beams, -1)
        state = {**state, "target_kv": new_kv, "steps": t + 1}
        return state, torch.log_softmax(logits, dim=-1)


class FullDecoder:
    """The same interface without any cache: every step re-encodes source and target prefix of
    every beam. The baseline of bench/generate_distractors.py, and a check on the cache."""

    def __init__(self, model: UniLMSeq2Seq):
        self.model = model

    @torch.inference_mode()
    def _logprobs(self, source_ids, source_lengths, targets: torch.Tensor) -> torch.Tensor:
        """Next-token log-probabilities after each sequence source + targets[n] ([n, t])."""
        n, t = targets.shape
        s = source_ids.shape[1]
        width = s + t
        ids = torch.zeros((n, width), dtype=torch.long, device=source_ids.device)
        lens = source_lengths + t
        rows = torch.arange(n, device=ids.device)
        ids[:, :s] = source_ids
        pos_t = source_lengths.view(-1, 1) + torch.arange(t, device=ids.device).view(1, -1)
        ids[rows.view(-1, 1), pos_t] = targets
        hidden = self.model.hidden_states(ids, source_lengths, lens)
        return torch.log_softmax(self.model.cls(hidden[rows, lens - 1]).float(), dim=-1)

    def start(self, source_ids, source_lengths):
        b = source_ids.shape[0]
        empty = torch.zeros((b, 0), dtype=torch.long, device=source_ids.device)
        state = {"source_ids": source_ids, "source_lengths": source_lengths, "targets": empty}
        return state, self._logprobs(source_ids, source_lengths, empty)

    def step(self, state, tokens, origin):
        b, beams = tokens.shape
        prev = state["targets"]
        if prev.dim() == 2:  # first step: one beam per question
            prev = prev.view(b, 1, -1)
        prev = prev.gather(1, origin.view(b, beams, 1).expand(-1, -1, prev.shape[-1]))
        targets = torch.cat([prev, tokens.unsqueeze(-1)], dim=-1)
        src = state["source_ids"].repeat_interleave(beams, dim=0)
        lens = state["source_lengths"].repeat_interleave(beams)
        logprobs = self._logprobs(src, lens, targets.view(b * beams, -1))
        return {**state, "targets": targets}, logprobs.view(b, beams, -1)
