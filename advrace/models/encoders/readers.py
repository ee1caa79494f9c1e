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
  passage sentence; an option's score is its best cosine similarity. Each distinct sentence and
  query is encoded once per reader, however many questions and splits share it.

Both take `desc=` and `progress=` in `predict_mc`, as the checkpoint scorer does, and draw a
progress bar over their work when asked.
"""

from __future__ import annotations

import math
import re
from collections import Counter

from advrace.core.errors import ConfigError
from advrace.core.text import split_sentences
from advrace.models.encoders.mc_encoding import question_with_option
from advrace.models.runtime.batching import length_sorted_batches
from advrace.models.runtime.loading import MINILM, Wording, add_built_in_names, load_model, resolve_model
from advrace.models.runtime.precision import precision_info

TOKEN_RE = re.compile(r"[a-z0-9]+(?:'[a-z]+)?")
SLIDING_WINDOW = "sliding-window"
SIMILARITY = "similarity"
_ENCODER = "ENCODER"  # in READERS: any encoder's name or folder after the colon
READERS = (SLIDING_WINDOW, f"{SLIDING_WINDOW}:distance", SIMILARITY, f"{SIMILARITY}:{_ENCODER}")
_NAMES = tuple(r for r in READERS if not r.endswith(f":{_ENCODER}"))  # taken as they are
_PREFIXES = tuple(r.removesuffix(_ENCODER) for r in READERS if r.endswith(f":{_ENCODER}"))  # "similarity:"
add_built_in_names(_NAMES, "a built-in reader")
ENCODER_WORDING = Wording(missing=None, failed="{what}: cannot load the encoder {name!r} ({error}); give a "
                                               "local folder, or use the offline MiniLM (`similarity`)")


def tokens(text: str) -> list[str]:
    return TOKEN_RE.findall(text.lower())


def is_builtin_reader(name) -> bool:
    if not isinstance(name, str):
        return False
    return name in _NAMES or name.startswith(_PREFIXES)


def make_reader(name: str, **kwargs):
    if name == SLIDING_WINDOW:
        return SlidingWindow()
    if name == f"{SLIDING_WINDOW}:distance":
        return SlidingWindow(distance=True)
    if name == SIMILARITY or name.startswith(f"{SIMILARITY}:"):
        encoder = name.partition(":")[2] or MINILM
        return SimilarityReader(encoder, **{k: v for k, v in kwargs.items() if k == "batch_size"})
    raise ConfigError(f"unknown built-in model {name!r}; built-in models: {', '.join(READERS)}")


class SlidingWindow:
    """Richardson et al.'s sliding window (SW), optionally with the distance term (SW+D)."""

    def __init__(self, distance: bool = False):
        self.distance = distance
        self.name = f"{SLIDING_WINDOW}:distance" if distance else SLIDING_WINDOW

    @staticmethod
    def window_score(passage: list[str], target: set[str], counts: Counter) -> float:
        """The best window's sum, without summing every window (O(passage x window)).

        A window's sum is its target words' weights added left to right (the other words add
        0.0, which changes no float), and a window holding more of them sums higher; so only the
        windows that start at a target word (or the last window, for those near the end) are
        summed, and each gives exactly the float the plain scan of every window would.
        """
        size = len(target)
        if not passage or not size:
            return 0.0
        weight = {w: math.log(1 + 1 / counts[w]) for w in target if counts[w]}
        hits = [(i, weight[w]) for i, w in enumerate(passage) if w in weight]
        last = max(0, len(passage) - size)
        best, j, previous = 0.0, 0, None
        for i, _ in hits:
            start = min(i, last)
            if start == previous:
                continue
            previous = start
            while hits[j][0] < start:
                j += 1
            total, m = 0, j
            while m < len(hits) and hits[m][0] < start + size:
                total += hits[m][1]
                m += 1
            best = max(best, total)
        return best

    @staticmethod
    def distance_term(passage: list[str], question: set[str], option: set[str]) -> float:
        """Smallest distance between a question word and an option word, over the passage length."""
        if len(passage) < 2:
            return 1.0
        last_q = last_a = None
        best = None
        for i, w in enumerate(passage):
            if w in question:
                last_q = i
                if last_a is not None:
                    best = i - last_a if best is None else min(best, i - last_a)
            if w in option:
                last_a = i
                if last_q is not None:
                    best = i - last_q if best is None else min(best, i - last_q)
        return 1.0 if best is None else best / (len(passage) - 1)

    def scores(self, passage: str, question: str, options) -> list[float]:
        return self._scores(*self._tokens(passage), question, options)

    @staticmethod
    def _tokens(passage: str) -> tuple[list[str], Counter]:
        p = tokens(passage)
        return p, Counter(p)

    def _scores(self, p: list[str], counts: Counter, question: str, options) -> list[float]:
        q = set(tokens(question.replace("_", " ")))
        out = []
        for option in options:
            a = set(tokens(option))
            score = self.window_score(p, q | a, counts)
            if self.distance:
                score -= self.distance_term(p, q - a, a - q)
            out.append(score)
        return out

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Per-option scores; each distinct passage is tokenized once."""
        from tqdm.auto import tqdm

        passages: dict[str, tuple] = {}
        out = []
        for ex in tqdm(examples, desc=desc, unit="question", disable=not progress, leave=False):
            if ex.passage not in passages:
                passages[ex.passage] = self._tokens(ex.passage)
            out.append(self._scores(*passages[ex.passage], ex.question, ex.options))
        return out


def passage_sentences(passage: str) -> list[str]:
    """Sentences by punctuation and also by line breaks, since RACE passages put titles and list
    items on lines of their own; distractor extraction's insertion points ignore line breaks."""
    return split_sentences(passage, line_breaks=True)


_WEIGHTS: dict[str, tuple] = {}


def _encoder_weights(encoder: str = MINILM) -> tuple:
    """(model, tokenizer) of an encoder, loaded once per process: the paraphrase filter and the
    `similarity` readers share them, while each reader keeps its own batch size and cache, since
    a text embedded in other company (other padding) can differ in the last float bits."""
    if encoder not in _WEIGHTS:
        from transformers import AutoModel

        # On the CPU, where it stays; quiet: a progress bar per load would clutter every report.
        model, tokenizer, _, _ = load_model(AutoModel, encoder, False, "similarity reader",
                                            source=resolve_model(encoder), place=False,
                                            wording=ENCODER_WORDING, quiet=True)
        _WEIGHTS[encoder] = model, tokenizer
    return _WEIGHTS[encoder]


class SimilarityReader:
    """Best cosine similarity between question-with-option and a passage sentence.

    Embeddings are kept by text for the reader's life (up to `cache_size` texts, about 1.5 kB
    each for MiniLM): the splits of a release share most passage sentences and queries, while
    within a split an attacked passage is seldom shared, so caching across `predict_mc` calls
    encodes about a third of the texts that encoding each split afresh would.
    """

    def __init__(self, encoder: str = MINILM, batch_size: int = 64, max_length: int = 128,
                 cache_size: int = 200_000):
        self.model, self.tokenizer = _encoder_weights(encoder)
        self.name = SIMILARITY if encoder == MINILM else f"{SIMILARITY}:{encoder}"
        self.batch_size = batch_size
        self.max_length = max_length
        self.cache_size = cache_size
        self._cache: dict = {}

    @property
    def inference(self) -> dict:
        """Always fp32 on the CPU: the encoder is small, and the same everywhere."""
        return precision_info(self.model.device, False)

    def encode(self, texts: list[str], *, desc: str | None = None, progress: bool = False):
        """Unit-length mean-pooled embeddings, in batches sorted by token count (sorted by
        characters, padding added a third or more to the tokens run), results in input order.
        Each text is tokenised once; a batch pads the ids already made."""
        import torch
        from tqdm.auto import tqdm

        if not texts:
            return torch.zeros((0, self.model.config.hidden_size))
        tokenized = self.tokenizer(list(texts), truncation=True, max_length=self.max_length)
        batches = length_sorted_batches(tokenized["input_ids"], self.batch_size, length=len)
        out = [None] * len(texts)
        with torch.inference_mode():
            for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                enc = self.tokenizer.pad({k: [v[i] for i in idx] for k, v in tokenized.items()},
                                         return_tensors="pt")
                hidden = self.model(**enc).last_hidden_state
                mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
                pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1)
                pooled = torch.nn.functional.normalize(pooled, dim=-1)
                for row, i in enumerate(idx):
                    out[i] = pooled[row]
        return torch.stack(out)

    def embed(self, texts: list[str], *, desc: str | None = None, progress: bool = False):
        """`encode` of distinct texts, each encoded once per reader (rows in input order)."""
        import torch

        missing = [t for t in dict.fromkeys(texts) if t not in self._cache]
        if missing:
            self._cache.update(zip(missing, self.encode(missing, desc=desc, progress=progress)))
        if not texts:
            return torch.zeros((0, self.model.config.hidden_size))
        vectors = torch.stack([self._cache[t] for t in texts])
        for old in list(self._cache)[:max(0, len(self._cache) - self.cache_size)]:
            del self._cache[old]
        return vectors

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Every distinct passage sentence and question-with-option, embedded once."""
        passages = list(dict.fromkeys(ex.passage for ex in examples))
        sentences = {p: passage_sentences(p) or [p] for p in passages}
        queries = [[question_with_option(ex.question, o) for o in ex.options] for ex in examples]
        texts = list(dict.fromkeys([s for p in passages for s in sentences[p]]
                                   + [q for qs in queries for q in qs]))
        row = {t: i for i, t in enumerate(texts)}
        vectors = self.embed(texts, desc=desc, progress=progress)
        sent_vecs = {p: vectors[[row[s] for s in sentences[p]]] for p in passages}
        out = []
        for ex, qs in zip(examples, queries):
            sims = vectors[[row[q] for q in qs]] @ sent_vecs[ex.passage].T
            out.append([float(x) for x in sims.max(dim=1).values])
        return out
