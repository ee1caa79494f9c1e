"""The kinds of model `advrace evaluate` scores, one registry entry each: what release tasks a
kind fits, which of the evaluation's settings it honours, and how it loads into a scorer (an
object with `predict_mc` or `predict_qa`). A checkpoint's kind is read from its config
(advrace.models.runtime.loading.checkpoint_kind); a built-in reader's is `reader`. Evaluation
then only computes results: it asks the registry whether a model fits and for its scorer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from advrace.core.registry import Registry
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.models.decoders.llm_scoring import load_causal_scorer
from advrace.models.encoders.mc_scoring import make_mc_scorer
from advrace.models.encoders.span_scoring import load_span_model

# the settings a kind may honour: every kind gets `task` and those of these it names
SETTINGS = ("batch_size", "max_length", "bf16", "accelerator", "model_args", "llm")


@dataclass(frozen=True)
class ModelKind:
    name: str
    description: str  # how a message names a model of this kind
    tasks: tuple[str, ...]  # the release tasks it scores
    honours: tuple[str, ...]  # of SETTINGS
    loader: Callable  # (model, **honoured settings) -> scorer

    def load(self, model, **settings):
        """The scorer of `model`, given the settings this kind honours (the others are dropped:
        `check_model_args` has refused any that would have changed a number)."""
        given = {k: v for k, v in settings.items() if k in self.honours}
        given.update(given.pop("llm", None) or {})
        return self.loader(model, **given)


MODEL_KINDS: Registry[ModelKind] = Registry("model kind")


def _mc(model, *, batch_size=16, **settings):
    return make_mc_scorer(model, batch_size=batch_size, reader_batch_size=max(batch_size, 32), **settings)


for kind in (
    ModelKind("multiple_choice", "a multiple-choice model", (MULTIPLE_CHOICE,),
              ("batch_size", "max_length", "bf16", "accelerator"), _mc),
    ModelKind("reader", "a built-in reader", (MULTIPLE_CHOICE,), ("batch_size", "max_length", "bf16", "accelerator"),
              _mc),
    ModelKind("span_extraction", "a span-extraction (SQuAD) model", (EXTRACTIVE_QA,),
              ("batch_size", "max_length", "bf16"), lambda model, **s: load_span_model(str(model), **s)),
    ModelKind("causal_lm", "a causal language model", (MULTIPLE_CHOICE, EXTRACTIVE_QA), SETTINGS,
              load_causal_scorer),
):
    MODEL_KINDS.add(kind.name, kind)


def kinds_for(task: str) -> tuple[str, ...]:
    """The kinds that score a release of `task`."""
    return tuple(name for name, kind in MODEL_KINDS.items() if task in kind.tasks)
