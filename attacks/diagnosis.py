"""Diagnosis (AdvRACE appendix D.2): insert the question stated with its correct answer.

The mirror image of AddSent: the same declarative sentence, but built from the original question
and the gold option, so the passage now states the answer outright. A model that reads the
passage should score higher on this split; one that does not gain is ignoring the passage.
"""

from __future__ import annotations

from advrace.core.provenance import AdversarialSentence, AttackSummary
from advrace.core.tasks import MULTIPLE_CHOICE

from .sentences.statements import declarative
from .base import Attack, CannotPerturb, register


@register
class Diagnosis(Attack):
    name = "diagnosis"
    probe = True
    tasks = (MULTIPLE_CHOICE,)
    uses = ("spacy_model",)

    def prepare(self, examples: list) -> None:
        self.resources.prepare_sentences([ex.passage for ex in examples])

    def perturb(self, example, rng):
        res = self.resources
        if not example.answer.strip():
            raise CannotPerturb("empty answer")
        sentence = declarative(example.question, example.answer, res)
        if not sentence:
            raise CannotPerturb("empty sentence")
        starts = list(res.sentence_starts(example.passage)) + [len(example.passage)]
        at = rng.choice(starts)
        return example.insert_sentence(sentence, at).with_provenance(
            AttackSummary(self.name, sentences=(AdversarialSentence(sentence, answer=example.answer),)))

    def summarize(self, examples: list) -> dict:
        return {}
