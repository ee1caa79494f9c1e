"""The span model a model-dependent adversary attacks (AddSent, AddAny, AddCommon): a checkpoint
made with `advrace train`, loaded once and queried as a black box; its F1 on an example read with
another context, and AddSent's choice of the candidate on which it does worst."""

from __future__ import annotations

from advrace.core.errors import ConfigError
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.metrics import squad_em_f1
from advrace.models.encoders.span_scoring import load_span_model

from ..base_checkpoint import CheckpointAttack


class SpanModelAttack(CheckpointAttack):
    """An attack that queries `config.model`, a span checkpoint, as a black box (`scorer`)."""

    tasks = (EXTRACTIVE_QA,)
    train_hint = "`advrace train configs/train/squad-cpu.yaml`"

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        if not self.config.model:
            raise ConfigError(f"attack {self.name!r} needs config.model: a span checkpoint made with "
                              "`advrace train` (objective span_extraction), queried as a black box")
        self._scorer = None

    @property
    def scorer(self):
        if self._scorer is None:
            self._scorer = load_span_model(self.config.model, batch_size=self.config.batch_size,
                                           max_length=self.config.max_length, bf16=self.config.bf16)
            self.loaded_on(self._scorer.device, self._scorer.bf16)
        return self._scorer

    def describe(self):
        return {**super().describe(), "model_dependent": True}

    def _f1(self, examples: list, contexts: list[str]) -> list[float]:
        return model_f1s(self.scorer, examples, contexts)


def model_f1s(scorer, examples: list, contexts: list[str]) -> list[float]:
    """A span model's F1 on each example read with `contexts[i]` as its context: what AddSent
    minimises (and `human-eval validate --adversary` too, over people's approved sentences)."""
    answers = scorer.answers([ex.question for ex in examples], contexts)
    return [squad_em_f1(a, [g.text for g in ex.answers])[1] for ex, a in zip(examples, answers)]


def worst(f1s) -> int:
    """AddSent's choice among candidates scored by `model_f1s`: the lowest F1, the first of
    equally bad ones."""
    return min(range(len(f1s)), key=lambda i: f1s[i])
