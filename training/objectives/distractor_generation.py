"""AdvRACE's distractor generator: a UniLM seq2seq model (advrace.models.generators.unilm) on passage +
question + answer, with each of RACE's three distractors as a target. Sources are `max_length`
tokens, targets `max_target_length`."""

from __future__ import annotations

from dataclasses import dataclass, field

from advrace.models.generators.seq2seq_encoding import Seq2SeqFeature, collate_seq2seq, training_features

from .base import Objective, dev_token_scores, register_objective


@dataclass(frozen=True)
class GenerationSettings:
    max_target_length: int = field(default=32, metadata={"min": 2})  # distractor tokens, with [SEP]


@register_objective
class DistractorGeneration(Objective):
    name = "distractor_generation"
    Settings = GenerationSettings
    metric, label = "dev_token_accuracy", "dev token accuracy"
    architecture = "UniLMSeq2Seq"
    summary = "the UniLM-style distractor generator"
    feature_class = Seq2SeqFeature

    def model_class(self):
        from advrace.models.generators.unilm import UniLMSeq2Seq  # deferred for start-up time: it imports torch

        return UniLMSeq2Seq

    def features(self, tokenizer, examples, seed, dev=False):
        return training_features(tokenizer, examples, self.cfg.max_length, self.settings.max_target_length)

    def collate(self, features, pad_token_id):
        return collate_seq2seq(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        """Teacher-forced next-token accuracy and loss on the dev distractors."""
        import torch  # deferred for start-up time

        def score(batch):
            index = batch.pop("index")
            out = model(**batch)
            labels = batch["labels"]
            rows = out.positions.nonzero()[:, 0]  # the question of each scored target token
            gold = labels[out.positions]
            zeros = torch.zeros(labels.shape[0], device=labels.device)
            hits = zeros.index_add(0, rows, (out.logits.argmax(-1) == gold).float())
            counts = zeros.index_add(0, rows, torch.ones_like(gold, dtype=torch.float))
            nll = zeros.index_add(0, rows, torch.nn.functional.cross_entropy(
                out.logits.float(), gold, reduction="none"))
            return index, hits, counts, nll

        return dev_token_scores(loader, accelerator, score)
