"""A span extractor: AdvRACE's distractor extraction model (RACE questions with their answer
inserted into the passage as the gold span), or a SQuAD reader. Long passages are cut into
windows of `max_length` tokens overlapping by `doc_stride`."""

from __future__ import annotations

from dataclasses import dataclass, field

from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.metrics import squad_em_f1
from advrace.models.encoders.span_decoding import best_spans, merge_windows
from advrace.models.encoders.span_encoding import SpanWindow, collate_windows, encode_windows, span_training_examples

from .base import Objective, register_objective


@dataclass(frozen=True)
class SpanSettings:
    doc_stride: int = field(default=128, metadata={"min": 1})  # overlap of the windows of a passage
    max_answer_tokens: int = field(default=30, metadata={"min": 1})  # the longest span scored on dev


@register_objective
class SpanExtraction(Objective):
    name = "span_extraction"
    Settings = SpanSettings
    metric, label = "dev_f1", "dev F1"
    architecture = "AutoModelForQuestionAnswering"
    summary = "the distractor extractor, or a SQuAD reader"
    tasks = (MULTIPLE_CHOICE, EXTRACTIVE_QA)
    feature_class = SpanWindow

    def model_class(self):
        from transformers import AutoModelForQuestionAnswering  # deferred for start-up time

        return AutoModelForQuestionAnswering

    def features(self, tokenizer, examples, seed, dev=False):
        questions, contexts, spans = span_training_examples(examples, seed)
        return encode_windows(tokenizer, questions, contexts, spans, max_length=self.cfg.max_length,
                              stride=self.settings.doc_stride)

    def collate(self, features, pad_token_id):
        return collate_windows(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        """EM and F1 of the best span of each question (over its windows) against the gold span."""
        import torch  # deferred for start-up time
        from accelerate.utils import gather_object

        _, contexts, spans = span_training_examples(examples, self.cfg.data_seed)
        golds = [c[s:e] for c, (s, e) in zip(contexts, spans)]
        local = []
        with torch.no_grad():
            for batch in loader:
                index = batch.pop("index").tolist()
                batch.pop("start_positions")
                batch.pop("end_positions")
                out = model(**batch)
                for row, w in enumerate(index):
                    f = features[w]
                    spans = best_spans(out.start_logits[row], out.end_logits[row], f.offsets,
                                       f.sequence_ids, contexts[f.example], n_best=1,
                                       max_answer_tokens=self.settings.max_answer_tokens)
                    local.append((w, spans))
        per_example: dict[int, dict[int, list]] = {}
        for w, spans in gather_object(local) if accelerator.num_processes > 1 else local:
            per_example.setdefault(features[w].example, {})[w] = spans
        em = f1 = 0.0
        for ex, windows in per_example.items():
            best = merge_windows(list(windows.values()), n_best=1)
            e, f = squad_em_f1(best[0].text if best else "", [golds[ex]])
            em, f1 = em + e, f1 + f
        n = len(per_example)
        return {"dev_f1": f1 / n, "dev_exact_match": em / n, "dev_questions": n}
