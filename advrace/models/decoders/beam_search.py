"""Batched beam search over any decoder with `start(source_ids, source_lengths)` and
`step(state, tokens, origin)` (advrace.models.generators.unilm.Seq2SeqDecoder caches keys and values;
FullDecoder re-encodes everything and is the baseline). A decoder with `skips_finished = True`
gets `step(..., active=[bool per question])` and need not compute the finished questions.

Each question keeps `beam_size` live hypotheses; one that ends with the end token is finished
and scored by its summed log-probability divided by length ** length_penalty. A question stops
once it has `beam_size` finished hypotheses (or at `max_length`, when its live ones count as
finished), and the search stops when every question has.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch


@dataclass(frozen=True)
class Hypothesis:
    tokens: tuple[int, ...]  # without the end token
    logprob: float
    score: float  # logprob / length ** length_penalty
    finished: bool


def _length_normalised(logprob: float, length: int, length_penalty: float) -> float:
    return logprob / (max(length, 1) ** length_penalty)


def beam_search(decoder, source_ids: torch.Tensor, source_lengths: torch.Tensor, *, beam_size: int,
                max_length: int, eos_id: int, length_penalty: float = 1.0, min_length: int = 1,
                banned: tuple[int, ...] = ()) -> list[list[Hypothesis]]:
    """Per question, up to `beam_size` hypotheses, best first."""
    if beam_size < 1 or max_length < 1:
        raise ValueError("beam_size and max_length must be at least 1")
    state, logp = decoder.start(source_ids, source_lengths)
    b, vocab = logp.shape
    device = logp.device
    ban = torch.zeros(vocab, dtype=torch.bool, device=device)
    for t in banned:
        if t is not None and 0 <= t < vocab:
            ban[t] = True
    logp = logp.unsqueeze(1)  # [b, 1, vocab]
    alive_scores = torch.zeros((b, 1), device=device)
    alive_tokens: list[list[tuple[int, ...]]] = [[()] for _ in range(b)]
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    done = [False] * b

    for length in range(1, max_length + 1):
        logp = logp.masked_fill(ban, float("-inf"))
        if length <= min_length:
            logp[..., eos_id] = float("-inf")
        beams = logp.shape[1]
        total = (alive_scores.unsqueeze(-1) + logp).view(b, -1)
        top_scores, top_index = total.topk(min(2 * beam_size, total.shape[1]), dim=-1)
        top_scores, top_index = top_scores.tolist(), top_index.tolist()
        next_tokens = [[0] * beam_size for _ in range(b)]
        origin = [[0] * beam_size for _ in range(b)]
        scores = [[float("-inf")] * beam_size for _ in range(b)]
        new_alive: list[list[tuple[int, ...]]] = []
        for q in range(b):
            kept: list[tuple[int, ...]] = []
            for s, flat in zip(top_scores[q], top_index[q]):
                if len(kept) == beam_size or s == float("-inf"):
                    break
                beam, token = divmod(flat, vocab)
                if beam >= beams:
                    continue
                prefix = alive_tokens[q][beam]
                if token == eos_id:
                    if not done[q] and len(finished[q]) < beam_size:
                        finished[q].append(Hypothesis(prefix, s, _length_normalised(s, length, length_penalty), True))
                    continue
                j = len(kept)
                next_tokens[q][j], origin[q][j], scores[q][j] = token, beam, s
                kept.append(prefix + (token,))
            while len(kept) < beam_size:  # fewer live candidates than beams: pad with dead ones
                kept.append(kept[-1] if kept else ())
            new_alive.append(kept)
            if len(finished[q]) >= beam_size:
                done[q] = True
        alive_tokens = new_alive
        alive_scores = torch.tensor(scores, device=device)
        if all(done) or length == max_length:
            break
        step_args = (state, torch.tensor(next_tokens, device=device), torch.tensor(origin, device=device))
        # a decoder that can leave a finished question out is told which still search; what it
        # returns for the others is never read
        state, logp = (decoder.step(*step_args, active=[not d for d in done])
                       if getattr(decoder, "skips_finished", False) else decoder.step(*step_args))

    results = []
    for q in range(b):
        hyps = list(finished[q])
        if not done[q]:  # ran out of length: live hypotheses count too
            for tokens, s in zip(alive_tokens[q], alive_scores[q].tolist()):
                if s != float("-inf") and tokens:
                    hyps.append(Hypothesis(tokens, s, _length_normalised(s, len(tokens), length_penalty), False))
        unique: dict[tuple[int, ...], Hypothesis] = {}
        for h in hyps:
            if h.tokens not in unique or h.score > unique[h.tokens].score:
                unique[h.tokens] = h
        results.append(sorted(unique.values(), key=lambda h: (-h.score, h.tokens))[:beam_size])
    return results


@torch.inference_mode()
def greedy_search(model, source: list[int], *, max_length: int, eos_id: int, min_length: int = 1,
                  banned: tuple[int, ...] = ()) -> tuple[int, ...]:
    """The most probable next token at each step, re-running the whole model: a reference for
    beam search at beam size 1."""
    target: list[int] = []
    s = len(source)
    for length in range(1, max_length + 1):
        ids = torch.tensor([source + target])
        out = model(input_ids=ids, source_lengths=torch.tensor([s]), lengths=torch.tensor([ids.shape[1]]))
        logits = out.logits[0, -1].float()
        for t in banned:
            logits[t] = float("-inf")
        if length <= min_length:
            logits[eos_id] = float("-inf")
        token = int(logits.argmax())
        if token == eos_id:
            break
        target.append(token)
    return tuple(target)
