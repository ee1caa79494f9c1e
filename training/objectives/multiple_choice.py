"""A multiple-choice reader (AdvRACE section 4.2): passage + question + each option, a
classification head over the first token; fine-tuned, adversarially trained or option-only."""

from __future__ import annotations

from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.models.encoders.mc_encoding import MCFeature, collate_mc, encode_mc, encoding_key

from .base import Objective, dev_rows, register_objective


@register_objective
class MultipleChoice(Objective):
    name = MULTIPLE_CHOICE  # named after the task it trains
    metric, label = "dev_accuracy", "dev accuracy"
    architecture = "AutoModelForMultipleChoice"
    summary = "a RACE reader: fine-tuning, adversarial, option-only"
    recipes = None  # every recipe: fine-tuning, adversarial training, the option-only probe
    feature_class = MCFeature

    def model_class(self):
        from transformers import AutoModelForMultipleChoice  # deferred for start-up time

        return AutoModelForMultipleChoice

    def features(self, tokenizer, examples, seed, dev=False):
        return encode_mc(tokenizer, examples, max_length=self.cfg.max_length)

    def encoding_key(self, seed, dev):
        if type(self).features is MultipleChoice.features:
            return encoding_key(self.cfg.max_length)  # evaluation's too: they share cached features
        return super().encoding_key(seed, dev)  # a subclass that encodes otherwise

    def collate(self, features, pad_token_id):
        return collate_mc(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        def predict(batch):
            index = batch.pop("index")
            return index, model(**batch).logits.argmax(dim=-1), batch["labels"]

        rows = list(dev_rows(loader, accelerator, predict))
        right = sum(p == y for _, p, y in rows)
        return {"dev_accuracy": right / len(rows), "dev_questions": len(rows)}
