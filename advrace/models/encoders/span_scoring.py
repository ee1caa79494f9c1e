"""A span-extraction checkpoint as a reader: n-best answer spans for (question, context) pairs.

Distractor extraction takes a passage's best spans as distractors; SQuAD evaluation and the
model-dependent SQuAD adversaries take the best span as the answer, or the n-best list as a
distribution over answers. All of them read a context the same way: sliding windows, batches of
similar length, `best_spans` per window and `merge_windows` across them.
"""

from __future__ import annotations

import functools
import math
from typing import Sequence

from advrace.models.runtime.checkpoint_info import scoring_max_length
from advrace.models.runtime.feature_store import (STORE_FROM, FeatureStore, default_cache_dir, feature_lengths,
                                          take_features, tokenizer_fingerprint)
from advrace.models.encoders.span_decoding import Span, best_spans, merge_windows
from advrace.models.encoders.span_encoding import SpanWindow, collate_windows, encode_windows
from advrace.models.runtime.batching import length_sorted_batches
from advrace.models.runtime.loading import load_model, model_name
from advrace.models.runtime.precision import attention_backends, precision_info, use_bf16

SPAN_TRAIN_HINT = "`advrace train` with objective span_extraction"


class SpanScorer:
    """An `AutoModelForQuestionAnswering` and its (fast) tokenizer."""

    def __init__(self, model, tokenizer, *, name: str = "model", batch_size: int = 32,
                 max_length: int = 384, doc_stride: int = 128, max_answer_tokens: int = 30,
                 bf16: bool | None = None, device=None):
        import torch

        self.name = name
        self.model = model.eval()
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        self.max_length = max_length
        self.doc_stride = doc_stride
        self.max_answer_tokens = max_answer_tokens
        self.device = torch.device(device) if device is not None else next(model.parameters()).device
        self.bf16 = use_bf16(bf16, self.device)
        self.store_from = STORE_FROM

    @property
    def inference(self) -> dict:
        return precision_info(self.device, self.bf16)

    def n_best(self, questions: Sequence[str], contexts: Sequence[str], n_best: int = 20,
               progress: bool = False, desc: str | None = None, windows=None) -> list[list[Span]]:
        """The `n_best` spans of each context, best first (scores: start + end logit).
        `windows`: the pairs' windows when they are already encoded (`cached_windows`)."""
        import torch
        from tqdm.auto import tqdm

        if not questions:
            return []
        windows = self.windows(questions, contexts) if windows is None else windows
        per_context: list[list] = [[] for _ in questions]
        pad = self.tokenizer.pad_token_id or 0
        batches = length_sorted_batches(feature_lengths(windows), self.batch_size, length=int)
        with torch.inference_mode(), attention_backends(self.device), \
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                taken = take_features(windows, idx)
                batch = collate_windows(taken, pad, labels=False)
                out = self.model(**{k: v.to(self.device) for k, v in batch.items()})
                starts, ends = out.start_logits.float().cpu(), out.end_logits.float().cpu()
                for row, w in enumerate(taken):
                    per_context[w.example].append(
                        self.window_spans(starts[row], ends[row], w, contexts[w.example], n_best))
        return [merge_windows(spans, n_best) for spans in per_context]

    def windows(self, questions: Sequence[str], contexts: Sequence[str]) -> list[SpanWindow]:
        """The model's inputs: each context in windows of `max_length` overlapping by `doc_stride`."""
        return encode_windows(self.tokenizer, questions, contexts, max_length=self.max_length,
                              stride=self.doc_stride)

    def window_spans(self, start_logits, end_logits, window: SpanWindow, context: str,
                     n_best: int) -> list[Span]:
        """One window's n-best spans, decoded as every reader of this model decodes them."""
        return best_spans(start_logits, end_logits, window.offsets, window.sequence_ids, context,
                          n_best=n_best, max_answer_tokens=self.max_answer_tokens, top_k=max(n_best, 20))

    def answers(self, questions, contexts, **kw) -> list[str]:
        """The best span's text per question ("" when a context has no span)."""
        return [spans[0].text if spans else "" for spans in self.n_best(questions, contexts, 1, **kw)]

    def cached_windows(self, examples, progress: bool = False):
        """The windows of a large split, in the feature cache (memory-mapped Arrow) rather than
        in memory; None below `store_from` questions."""
        if len(examples) < self.store_from:
            return None
        key = {"encoder": "encode_windows", "max_length": self.max_length, "stride": self.doc_stride,
               "tokenizer": tokenizer_fingerprint(self.tokenizer)}
        encode = functools.partial(question_windows, self.tokenizer, max_length=self.max_length,
                                   stride=self.doc_stride)
        return FeatureStore(default_cache_dir(), progress=progress).encode(
            encode, SpanWindow, [examples], key, "the questions")

    def predict_qa(self, examples, *, progress: bool = False, desc: str | None = None) -> list[str]:
        """The answer text for each SQuAD-style example (the counterpart of `predict_mc`)."""
        return self.answers([ex.question for ex in examples], [ex.context for ex in examples],
                            progress=progress, desc=desc, windows=self.cached_windows(examples, progress))


def question_windows(tokenizer, examples, *, max_length: int, stride: int) -> list[SpanWindow]:
    """`SpanScorer.windows` of SQuAD-style examples, for the feature cache."""
    return encode_windows(tokenizer, [ex.question for ex in examples], [ex.context for ex in examples],
                          max_length=max_length, stride=stride)


def answer_distribution(spans: list[Span]) -> list[tuple[str, float]]:
    """The n-best list as probabilities (a softmax over span scores), for expected-F1 objectives."""
    if not spans:
        return []
    top = max(s.score for s in spans)
    weights = [math.exp(s.score - top) for s in spans]
    total = sum(weights)
    return [(s.text, w / total) for s, w in zip(spans, weights)]


def load_span_model(name: str, *, what: str = "span model", hint: str = SPAN_TRAIN_HINT,
                    max_length: int | None = None, **kwargs) -> SpanScorer:
    """A SpanScorer for a checkpoint folder (or a Hub name online), on this process's device.

    `what` and `hint` word the loading errors (who loads it; how to make a span checkpoint).
    `max_length`: the window length; None takes the one `advrace train` recorded for the
    checkpoint (512 when none is recorded). `kwargs` go to SpanScorer (batch_size, doc_stride
    (default: a quarter of the window), max_answer_tokens, bf16, name).
    """
    from transformers import AutoModelForQuestionAnswering

    model, tokenizer, device, _ = load_model(AutoModelForQuestionAnswering, name, kwargs.get("bf16"),
                                             what, hint)
    max_length = scoring_max_length(name, max_length)
    kwargs.setdefault("name", model_name(name))
    kwargs.setdefault("doc_stride", max_length // 4)
    return SpanScorer(model, tokenizer, device=device, max_length=max_length, **kwargs)
