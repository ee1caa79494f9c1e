"""The option-only probe (AdvRACE appendix D.2, "PQ-remove"): drop the passage and question.

A model trained and tested on options alone shows how much of a split's score needs no reading;
built from `original` or from any distractor split (`from: distractor_generation`).
"""

from __future__ import annotations

from advrace.core.provenance import AttackSummary
from advrace.core.tasks import MULTIPLE_CHOICE

from .base import Attack, register


@register
class OptionOnly(Attack):
    name = "option_only"
    probe = True
    tasks = (MULTIPLE_CHOICE,)

    def perturb(self, example, rng):
        return example.without_context().with_provenance(AttackSummary(self.name))
