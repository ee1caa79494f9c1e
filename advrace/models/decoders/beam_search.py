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


def _banned(tokens: tuple[int, ...], vocab: int, device) -> torch.Tensor:
    """A [vocab] mask of the tokens no hypothesis may take (ids outside the vocabulary ignored)."""
    ban = torch.zeros(vocab, dtype=torch.bool, device=device)
    for t in tokens:
        if t is not None and 0 <= t < vocab:
            ban[t] = True
    return ban


def _advance(top, alive: list[tuple[int, ...]], finished: list[Hypothesis], done: bool, *, beams: int,
             vocab: int, beam_size: int, eos_id: int, length: int, length_penalty: float):
    """One question's next live hypotheses from its `top` (score, flat index over beams x vocab)
    candidates, best first: one that takes the end token joins `finished` instead (while the
    question takes more), and dead ones pad the beams when too few live ones are left. Returns
    (their tokens, the new token, the beam each came from, its score), one of each per beam."""
    kept: list[tuple[int, ...]] = []
    tokens, origin, scores = [0] * beam_size, [0] * beam_size, [float("-inf")] * beam_size
    for s, flat in top:
        if len(kept) == beam_size or s == float("-inf"):
            break
        beam, token = divmod(flat, vocab)
        if beam >= beams:
            continue
        prefix = alive[beam]
        if token == eos_id:
            if not done and len(finished) < beam_size:
                finished.append(Hypothesis(prefix, s, _length_normalised(s, length, length_penalty), True))
            continue
        j = len(kept)
        tokens[j], origin[j], scores[j] = token, beam, s
        kept.append(prefix + (token,))
    while len(kept) < beam_size:  # fewer live candidates than beams: pad with dead ones
        kept.append(kept[-1] if kept else ())
    return kept, tokens, origin, scores


def _step(decoder, state, next_tokens, origin, done: list[bool], device):
    """The decoder fed each live hypothesis's new token. A decoder that can leave a finished
    question out is told which still search; what it returns for the others is never read."""
    step_args = (state, torch.tensor(next_tokens, device=device), torch.tensor(origin, device=device))
    if getattr(decoder, "skips_finished", False):
        return decoder.step(*step_args, active=[not d for d in done])
    return decoder.step(*step_args)


def _best(finished: list[Hypothesis], alive: list[tuple[int, ...]], alive_scores: list[float], done: bool,
          beam_size: int, length_penalty: float) -> list[Hypothesis]:
    """A question's `beam_size` best distinct hypotheses; one that ran out of length counts its
    live hypotheses too."""
    hyps = list(finished)
    if not done:
        for tokens, s in zip(alive, alive_scores):
            if s != float("-inf") and tokens:
                hyps.append(Hypothesis(tokens, s, _length_normalised(s, len(tokens), length_penalty), False))
    unique: dict[tuple[int, ...], Hypothesis] = {}
    for h in hyps:
        if h.tokens not in unique or h.score > unique[h.tokens].score:
            unique[h.tokens] = h
    return sorted(unique.values(), key=lambda h: (-h.score, h.tokens))[:beam_size]


def beam_search(decoder, source_ids: torch.Tensor, source_lengths: torch.Tensor, *, beam_size: int,
                max_length: int, eos_id: int, length_penalty: float = 1.0, min_length: int = 1,
                banned: tuple[int, ...] = ()) -> list[list[Hypothesis]]:
    """Per question, up to `beam_size` hypotheses, best first."""
    if beam_size < 1 or max_length < 1:
        raise ValueError("beam_size and max_length must be at least 1")
    state, logp = decoder.start(source_ids, source_lengths)
    b, vocab = logp.shape
    device = logp.device
    ban = _banned(banned, vocab, device)
    logp = logp.unsqueeze(1)  # [b, 1, vocab]
    alive_scores = torch.zeros((b, 1), device=device)
    alive_tokens: list[list[tuple[int, ...]]] = [[()] for _ in range(b)]
    finished: list[list[Hypothesis]] = [[] for _ in range(b)]
    done = [False] * b
    for length in range(1, max_length + 1):
        logp = logp.masked_fill(ban, float("-inf"))
        if length <= min_length:
            logp[..., eos_id] = float("-inf")
        total = (alive_scores.unsqueeze(-1) + logp).view(b, -1)
        top_scores, top_index = total.topk(min(2 * beam_size, total.shape[1]), dim=-1)
        top_scores, top_index = top_scores.tolist(), top_index.tolist()
        advanced = [_advance(zip(top_scores[q], top_index[q]), alive_tokens[q], finished[q], done[q],
                             beams=logp.shape[1], vocab=vocab, beam_size=beam_size, eos_id=eos_id, length=length,
                             length_penalty=length_penalty) for q in range(b)]
        done = [d or len(f) >= beam_size for d, f in zip(done, finished)]
        alive_tokens = [a[0] for a in advanced]
        alive_scores = torch.tensor([a[3] for a in advanced], device=device)
        if all(done) or length == max_length:
            break
        state, logp = _step(decoder, state, [a[1] for a in advanced], [a[2] for a in advanced], done, device)
    return [_best(finished[q], alive_tokens[q], alive_scores[q].tolist(), done[q], beam_size, length_penalty)
            for q in range(b)]


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
