"""Readers that need no training, usable wherever a checkpoint is: `sliding-window` and
`similarity[:ENCODER]`.

Both score every option of a question (higher is better) through `predict_mc`, deterministically,
so `advrace evaluate`, the ablation grid and the report take them like any model. They are the
text-matching readers that AddSent and distractor extraction are built to fool, and they tell in
a minute on a laptop whether a release is harder than its source.

- `sliding-window` (Richardson et al., 2013, MCTest; the RACE paper's baseline, 32.2% on RACE
  test): for each option, the best window over the passage of the words of question + option,
  each word weighted by its inverse count in the passage, log(1 + 1/C(w)).
  `sliding-window:distance` subtracts the distance-based term of the same paper: the smallest
  distance in the passage between a question word and an option word, divided by the passage
  length (1 when either is absent).
- `similarity[:ENCODER]`: mean-pooled sentence embeddings (the offline MiniLM by default, any
  local encoder folder by path) of the question with the option (filling a blank) against each
  passage sentence; an option's score is its best cosine similarity. Each passage sentence is
  encoded once however many questions share the passage.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from advrace.core.errors import ConfigError
from advrace.core.text import split_sentences
from advrace.models.loading import MINILM, Wording, load_model, resolve_model
from advrace.models.mc_encoding import question_with_option
from advrace.models.precision import precision_info

TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
SLIDING_WINDOW = "sliding-window"
SIMILARITY = "similarity"
BASELINES = (SLIDING_WINDOW, f"{SLIDING_WINDOW}:distance", SIMILARITY, f"{SIMILARITY}:ENCODER")
ENCODER_WORDING = Wording(missing=None, failed="{what}: cannot load the encoder {name!r} ({error}); give a "
                                               "local folder, or use the offline MiniLM (`similarity`)")


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def is_baseline(name) -> bool:
    if not isinstance(name, str):
        return False
    return name in (SLIDING_WINDOW, f"{SLIDING_WINDOW}:distance", SIMILARITY) or name.startswith(f"{SIMILARITY}:")


def make_baseline(name: str, **kwargs):
    if name == SLIDING_WINDOW:
        return SlidingWindow()
    if name == f"{SLIDING_WINDOW}:distance":
        return SlidingWindow(distance=True)
    if name == SIMILARITY or name.startswith(f"{SIMILARITY}:"):
        encoder = name.partition(":")[2] or MINILM
        return SimilarityReader(encoder, **{k: v for k, v in kwargs.items() if k == "batch_size"})
    raise ConfigError(f"unknown built-in model {name!r}; built-in models: {', '.join(BASELINES)}")


class SlidingWindow:
    """Richardson et al.'s sliding window (SW), optionally with the distance term (SW+D)."""

    def __init__(self, distance: bool = False):
        self.distance = distance
        self.name = f"{SLIDING_WINDOW}:distance" if distance else SLIDING_WINDOW

    @staticmethod
    def window_score(passage: list[str], target: set[str], counts: Counter) -> float:
        size = len(target)
        if not passage or not size:
            return 0.0
        weight = {w: math.log(1 + 1 / counts[w]) for w in target if counts[w]}
        best = 0.0
        for start in range(max(1, len(passage) - size + 1)):
            best = max(best, sum(weight.get(w, 0.0) for w in passage[start:start + size]))
        return best

    @staticmethod
    def distance_term(passage: list[str], question: set[str], option: set[str]) -> float:
        """Smallest distance between a question word and an option word, over the passage length."""
        q_pos = [i for i, w in enumerate(passage) if w in question]
        a_pos = [i for i, w in enumerate(passage) if w in option]
        if not q_pos or not a_pos or len(passage) < 2:
            return 1.0
        return min(abs(i - j) for i in q_pos for j in a_pos) / (len(passage) - 1)

    def scores(self, passage: str, question: str, options) -> list[float]:
        p = tokens(passage)
        counts = Counter(p)
        q = set(tokens(question.replace("_", " ")))
        out = []
        for option in options:
            a = set(tokens(option))
            score = self.window_score(p, q | a, counts)
            if self.distance:
                score -= self.distance_term(p, q - a, a - q)
            out.append(score)
        return out

    def predict_mc(self, examples, **_) -> list[list[float]]:
        return [self.scores(ex.passage, ex.question, ex.options) for ex in examples]


def passage_sentences(passage: str) -> list[str]:
    """Sentences by punctuation and also by line breaks, since RACE passages put titles and list
    items on lines of their own; distractor extraction's insertion points ignore line breaks."""
    return split_sentences(passage, line_breaks=True)


class SimilarityReader:
    """Best cosine similarity between question-with-option and a passage sentence."""

    def __init__(self, encoder: str = MINILM, batch_size: int = 64, max_length: int = 128):
        from transformers import AutoModel

        # On the CPU, where it stays; quiet: a progress bar per load would clutter every report.
        self.model, self.tokenizer, _, _ = load_model(AutoModel, encoder, False, "similarity reader",
                                                      source=resolve_model(encoder), place=False,
                                                      wording=ENCODER_WORDING, quiet=True)
        self.name = SIMILARITY if encoder == MINILM else f"{SIMILARITY}:{encoder}"
        self.batch_size = batch_size
        self.max_length = max_length

    @property
    def inference(self) -> dict:
        """Always fp32 on the CPU: the encoder is small, and the same everywhere."""
        return precision_info(self.model.device, False)

    def encode(self, texts: list[str]):
        """Unit-length mean-pooled embeddings, in length-sorted batches (results in input order)."""
        import torch

        order = sorted(range(len(texts)), key=lambda i: (-len(texts[i]), i))
        out = [None] * len(texts)
        with torch.inference_mode():
            for start in range(0, len(order), self.batch_size):
                idx = order[start:start + self.batch_size]
                enc = self.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                     max_length=self.max_length, return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                for row, i in enumerate(idx):
                    out[i] = pooled[row]
        return torch.stack(out) if out else torch.zeros((0, self.model.config.hidden_size))

    def predict_mc(self, examples, **_) -> list[list[float]]:
        """Sentences of each distinct passage and every question-with-option, each encoded once."""
        passages = list(dict.fromkeys(ex.passage for ex in examples))
        sentences = {p: passage_sentences(p) or [p] for p in passages}
        flat = [s for p in passages for s in sentences[p]]
        queries = [question_with_option(ex.question, o) for ex in examples for o in ex.options]
        vectors = self.encode(flat + queries)
        sent_vecs, query_vecs = vectors[:len(flat)], vectors[len(flat):]
        spans, k = {}, 0
        for p in passages:
            spans[p] = (k, k + len(sentences[p]))
            k += len(sentences[p])
        out, q = [], 0
        for ex in examples:
            lo, hi = spans[ex.passage]
            sims = query_vecs[q:q + len(ex.options)] @ sent_vecs[lo:hi].T
            out.append([float(x) for x in sims.max(dim=1).values])
            q += len(ex.options)
        return out
