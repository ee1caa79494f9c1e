"""The base class of every attack that queries a model checkpoint: the distractor attacks (DE, DG)
and the SQuAD adversaries that ask a model (AddSent, AddAny, ...). Beside `base.py` because it is
a base class like `Attack`, but a separate module: it reads checkpoint records (sha256, precision),
which the model-free attacks do not need. Nothing here imports torch; the loaders do, when asked."""

from __future__ import annotations

import functools

from advrace.models.runtime.checkpoint_info import checkpoint_sha256
from advrace.models.runtime.loading import checkpoint_name
from advrace.models.runtime.precision import inference_device, precision_info, use_bf16

from .base import Attack, CannotPerturb, Outcome


class CheckpointAttack(Attack):
    """An attack that queries a model checkpoint (`config.model`): it works on whole batches, so
    one example is a batch of one, and the manifest records the checkpoint's sha256 and how the
    model computed (precision, device type, torch version)."""

    batched = True
    _ran_on: tuple | None = None  # (device, bf16) of the loaded model, set by the loader

    @functools.cached_property
    def checkpoint_sha256(self) -> str | None:
        return checkpoint_sha256(self.config.model)

    def loaded_on(self, device, bf16: bool) -> None:
        self._ran_on = (device, bool(bf16))

    def inference(self) -> dict:
        """How the model ran, or, before it is loaded, how the loader will run it."""
        if self._ran_on is None:
            device = inference_device()
            return precision_info(device, use_bf16(self.config.bf16, device))
        return precision_info(*self._ran_on)

    def describe(self) -> dict:
        """The checkpoint by name and sha256, never by its local path (advrace.models.runtime.loading)."""
        info = super().describe()
        info["config"] = {**info["config"], "model": checkpoint_name(self.config.model)}
        return {**info, "checkpoint_sha256": self.checkpoint_sha256,
                "inference": self.inference()}

    def apply(self, example) -> Outcome:
        return self.apply_batch([example])[0]

    def perturb(self, example, rng):
        """The example as a batch of one (its own seeded generator, not `rng`), under the
        interface's contract: a question the batch leaves unchanged raises CannotPerturb."""
        out = self.apply(example)
        if not out.perturbed:
            raise CannotPerturb(out.reason)
        return out.example
