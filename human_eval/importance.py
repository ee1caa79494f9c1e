"""Word importance for the authoring pages (Wallace et al., TACL 2019, eq. 1): the gradient of
the model's chosen score with respect to the input embeddings, times the embeddings, summed over
the hidden dimensions and over each word's sub-tokens, normalised by the largest magnitude.

Both authoring models (multiple choice and span) compute it here, so the two pages mean the same
thing by a highlight.
"""

from __future__ import annotations

import math
import re


def gradient_x_embedding(model, batch: dict, target):
    """Run `model` on `batch`; `target(output)` picks the scalar to explain (None: nothing to
    explain). Returns (output, per-token scores [rows, tokens] or None)."""
    embeddings = model.get_input_embeddings()
    captured = {}

    def keep(_module, _inputs, output):
        output.retain_grad()
        captured["emb"] = output

    handle = embeddings.register_forward_hook(keep)
    try:
        model.zero_grad(set_to_none=True)
        output = model(**batch)
        score = target(output)
        if score is not None:
            score.backward()
    finally:
        handle.remove()
    emb = captured["emb"]
    if emb.grad is None:
        return output, None
    return output, (emb.grad * emb).sum(-1).detach().float()


def word_scores(text, seq_text, offsets, seq_ids, scores, which, upto=None) -> list[list]:
    """[start, end, score] per word of `text`, from the scores of the tokens of sequence `which`
    (whose characters are `seq_text`): sub-token scores summed, scaled to [-1, 1]. Words from
    `upto` on score 0 (they are not in the sequence as written)."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    placed, cursor = [], 0
    for s, e in words:
        at = seq_text.find(text[s:e], cursor) if upto is None or s < upto else -1
        placed.append((at, at + e - s) if at >= 0 else None)
        if at >= 0:
            cursor = at + e - s
    total = [0.0] * len(words)
    for offset, sid, score in zip(offsets, seq_ids, scores):
        if sid != which or offset is None or offset[1] <= offset[0]:
            continue
        s, e = offset
        for k, span in enumerate(placed):
            if span is not None and span[0] < e and s < span[1]:
                total[k] += score
                break
    top = max((abs(t) for t in total), default=0.0) or 1.0
    return [[s, e, round(t / top, 4)] for (s, e), t in zip(words, total)]


def softmax(xs) -> list[float]:
    m = max(xs)
    ex = [math.exp(x - m) for x in xs]
    return [v / sum(ex) for v in ex]

