"""A multiple-choice checkpoint as a scorer: per-option scores through `predict_mc`, for
evaluation, the ablation grid and adversarial authoring.

Scoring is fast: batches of similar length padded only to their own longest input,
`torch.inference_mode()`, and bf16 autocast where the hardware computes in bf16.
"""

from __future__ import annotations

import functools
import os

from advrace.core.errors import ConfigError
from advrace.models.runtime.checkpoint_info import scoring_max_length
from advrace.models.runtime.feature_store import (STORE_FROM, FeatureStore, default_cache_dir, feature_lengths,
                                          take_features, tokenizer_fingerprint)
from advrace.models.decoders.llm_scoring import load_causal_scorer
from advrace.models.encoders.mc_encoding import MCFeature, collate_mc, encode_mc, encoding_key
from advrace.models.encoders.readers import is_builtin_reader, make_reader
from advrace.models.runtime.batching import length_sorted_batches
from advrace.models.runtime.loading import ModelLoadError, Wording, checkpoint_kind, load_model, model_name
from advrace.models.runtime.precision import attention_backends, precision_info, use_bf16

WORDING = Wording(
    missing="{name}: no such model folder (give a folder written by save_pretrained, or a Hugging "
            "Face Hub name such as bert-base-uncased)",
    missing_error=ModelLoadError,
    failed="{name}: cannot load a multiple-choice model and its tokenizer from this folder "
           "({reason}); it should hold what save_pretrained writes: config.json, the weights and "
           "the tokenizer files",
    failed_online="{name}: not a local folder, and it could not be loaded from the Hugging Face Hub "
                  "({reason}). Offline, download it elsewhere and pass its local folder instead")


class CheckpointScorer:
    """A Transformers multiple-choice model and its tokenizer, with `predict_mc` for scoring."""

    def __init__(self, model, tokenizer, *, name: str = "model", batch_size: int = 16,
                 max_length: int = 512, bf16: bool | None = None, accelerator=None):
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        if max_length < 8:
            raise ConfigError(f"max length must be at least 8 tokens, got {max_length}")
        self.name = name
        self.tokenizer = tokenizer
        self.batch_size = batch_size
        limit = getattr(tokenizer, "model_max_length", None)
        # Tokenizers without a known limit report a huge sentinel value.
        self.max_length = min(max_length, limit) if isinstance(limit, int) and limit < 1_000_000 else max_length
        self.pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
        model.eval()
        self.model = accelerator.prepare(model) if accelerator is not None else model
        self.device = accelerator.device if accelerator is not None else next(model.parameters()).device
        self.bf16 = use_bf16(bf16, self.device)
        self.store_from = STORE_FROM

    @property
    def inference(self) -> dict:
        return precision_info(self.device, self.bf16)

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Per-option scores (logits) of each example, in input order."""
        import torch
        from tqdm.auto import tqdm

        if not examples:
            return []
        features = self._features(examples, progress)
        scores: list[list[float] | None] = [None] * len(features)
        batches = length_sorted_batches(feature_lengths(features), self.batch_size, length=int)
        outputs = []
        with torch.inference_mode(), attention_backends(self.device), \
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16):
            for idx in tqdm(batches, desc=desc, unit="batch", disable=not progress, leave=False):
                batch = collate_mc(take_features(features, idx), self.pad_id)
                batch.pop("labels")
                batch = {k: v.to(self.device, non_blocking=True) for k, v in batch.items()}
                # Kept on the device until the end, so the next batch is prepared while this one runs.
                outputs.append(self.model(**batch).logits.float())
        for idx, logits in zip(batches, outputs):
            for i, row in zip(idx, logits.cpu().tolist()):
                scores[i] = row[:len(examples[i].options)]
        return scores

    def _features(self, examples, progress: bool):
        if len(examples) < self.store_from:
            return encode_mc(self.tokenizer, examples, self.max_length)
        store = FeatureStore(default_cache_dir(), progress=progress)
        key = {**encoding_key(self.max_length), "tokenizer": tokenizer_fingerprint(self.tokenizer)}
        encode = functools.partial(encode_mc, self.tokenizer, max_length=self.max_length)
        return store.encode(encode, MCFeature, [examples], key, "the questions")


def load_checkpoint(model: str | os.PathLike, *, max_length: int | None = None, place: bool = False,
                    **kwargs) -> CheckpointScorer:
    """A CheckpointScorer for a local folder or a Hub name; ModelLoadError when it cannot load.

    `max_length`: None scores at the length `advrace train` recorded for the checkpoint (512
    when none is recorded). `place`: move the model to this process's device on loading (a
    caller without an accelerator that still wants the GPU); otherwise it stays on the CPU
    until the scorer places it (on the accelerator's device, when one is given). `kwargs` go to
    CheckpointScorer (batch_size, bf16, accelerator, name).
    Weights the checkpoint lacks (a fresh classifier head) are initialised from a fixed seed, so
    scoring the same checkpoint twice gives the same numbers.
    """
    from transformers import AutoModelForMultipleChoice

    name = str(model)
    # A folder saved with another head (a span model, a causal LM) is refused; a bare encoder gets
    # a seeded multiple-choice head, and the load report says so.
    loaded = load_model(AutoModelForMultipleChoice, name, kwargs.get("bf16"), name,
                        "save_pretrained with a multiple-choice head (`advrace train`, objective multiple_choice)",
                        place=place, wording=WORDING)
    kwargs.setdefault("name", model_name(name))
    return CheckpointScorer(loaded.model, loaded.tokenizer, max_length=scoring_max_length(name, max_length),
                            **kwargs)


def make_mc_scorer(model: str | os.PathLike, *, batch_size: int, max_length: int | None, bf16: bool | None,
                   accelerator=None, place: bool = False, reader_batch_size: int | None = None,
                   llm: dict | None = None, kind: str | None = None):
    """A built-in reader, a causal LM or a loaded checkpoint, by name: the one place evaluation, the
    attacks' `select_with` and authoring turn a model name into `predict_mc`.

    A causal language model (a causal-LM folder, `smollm2`, or a Hub name whose config names a
    causal-LM architecture; told by its config, never by its name) gets the LLM scorer
    (`advrace.models.decoders.llm_scoring.load_causal_scorer`), with the keywords `llm` (method, shots,
    ...: its defaults score by log-likelihood, zero-shot); anything else not a built-in reader is
    loaded as a multiple-choice checkpoint.

    `batch_size`, `max_length`, `bf16`, `accelerator`, `place`: the checkpoint's (see
    `load_checkpoint`; a causal LM's `max_length` None is its own context length).
    `reader_batch_size`: the built-in reader's, None for its own default;
    apart from the checkpoint's because the batch changes a reader's padding, hence its floats,
    and each caller keeps the batches it has always used. `kind`: the model's
    (`advrace.models.runtime.loading.checkpoint_kind`), when the caller has already read it.
    """
    if is_builtin_reader(model):
        return make_reader(model, **({} if reader_batch_size is None else {"batch_size": reader_batch_size}))
    if (kind or checkpoint_kind(str(model))[0]) == "causal_lm":
        return load_causal_scorer(model, batch_size=batch_size, bf16=bf16, accelerator=accelerator, place=place,
                                  max_length=max_length, **(llm or {}))
    return load_checkpoint(model, batch_size=batch_size, max_length=max_length, bf16=bf16,
                           accelerator=accelerator, place=place)
