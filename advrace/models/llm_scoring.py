"""A decoder LM (a causal-LM folder, `smollm2`, or a Hub name) as a scorer of releases.

Multiple choice, two methods:
- `loglikelihood`: each option's log-likelihood after lm-evaluation-harness's RACE prompt
  (advrace.models.llm_prompts); evaluation reports `acc` (the highest log-likelihood) and
  `acc_norm` (the highest per character of the option), as lm-evaluation-harness does.
- `letter`: the options shown as A-D and the answer letter's log-probability, inside the chat
  template when the tokenizer has one (an instruct model).
SQuAD: the answer generated greedily up to the first line break.

Speed: each question's context is encoded once and shared by its options
(advrace.models.continuation_scoring), questions go in length-sorted batches under a token
budget (memory does not grow with the split), bf16 autocast where the hardware has it, and
evaluation shards the questions across `accelerate launch` processes.
"""

from __future__ import annotations

import os
import random

from advrace.core.errors import ConfigError
from advrace.models import llm_prompts
from advrace.models.continuation_scoring import encode_request, greedy_generate, shared_logprobs, unshared_logprobs
from advrace.models.llm_prompts import LETTER, LOGLIKELIHOOD
from advrace.models.loading import ModelLoadError, Wording, load_model
from advrace.models.mc_encoding import length_sorted_batches
from advrace.models.precision import attention_backends, precision_info, use_bf16

GENERATION = "generation"
MC_METHODS = (LOGLIKELIHOOD, LETTER)
TOKENS_PER_BATCH = 8192
MAX_NEW_TOKENS = 32
WORDING = Wording(
    missing="{name}: no such model folder (give a folder written by save_pretrained, `smollm2`, or "
            "a Hugging Face Hub name such as HuggingFaceTB/SmolLM2-135M)",
    missing_error=ModelLoadError,
    failed="{name}: cannot load a causal language model and its tokenizer from this folder "
           "({reason}); it should hold what save_pretrained writes: config.json, the weights and "
           "the tokenizer files",
    failed_online="{name}: not a local folder, and it could not be loaded from the Hugging Face Hub "
                  "({reason}). Offline, download it elsewhere and pass its local folder instead")


def draw_shots(pool: list, k: int, question, seed: int) -> list:
    """k solved examples for `question`, drawn from `pool` by (seed, the question's source id):
    the same shots on any machine, in any shard, in any order of questions."""
    if k <= 0:
        return []
    if len(pool) < k:
        raise ConfigError(f"{k} few-shot examples asked for, but the few-shot file has only {len(pool)} "
                          "usable ones (those not in the release)")
    return random.Random(f"{seed}:{question.source_id}").sample(pool, k)


class CausalLMScorer:
    """`predict_mc` and `predict_qa` of a causal LM; see the module doc."""

    def __init__(self, model, tokenizer, *, name: str = "model", method: str = LOGLIKELIHOOD,
                 batch_size: int = 16, bf16: bool | None = None, accelerator=None, shots: int = 0,
                 shot_pool=(), shot_seed: int = 1234, chat_template: bool | None = None,
                 share_prefix: bool = True, max_tokens: int = TOKENS_PER_BATCH,
                 contexts: dict[str, str] | None = None):
        if method not in MC_METHODS:
            raise ConfigError(f"unknown scoring method {method!r}; choose one of {', '.join(MC_METHODS)}")
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        self.name, self.method, self.tokenizer = name, method, tokenizer
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.shots, self.shot_pool, self.shot_seed = shots, list(shot_pool), shot_seed
        self.share_prefix = share_prefix
        # {question id: prompt}: lm-eval's own race task, one document per article
        # (advrace.models.lm_eval_race); zero-shot log-likelihood only
        if contexts is not None and (method != LOGLIKELIHOOD or shots):
            raise ConfigError("lm-eval's race contexts are scored zero-shot by log-likelihood only")
        self.contexts = contexts
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template and not has_template:
            raise ConfigError(f"{name}: --chat-template asked for, but its tokenizer has no chat template")
        self.chat = has_template if chat_template is None else bool(chat_template)
        self.pad_id = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
        model_type = getattr(getattr(model, "config", None), "model_type", "") or ""
        # lm-evaluation-harness adds BOS for the Gemma family only, which needs it
        self.prefix = (tokenizer.bos_token_id,) if model_type.startswith("gemma") and tokenizer.bos_token_id is not None else ()
        limit = getattr(getattr(model, "config", None), "max_position_embeddings", None)
        self.max_length = limit if isinstance(limit, int) and limit > 0 else 2048
        model.eval()
        self.device = accelerator.device if accelerator is not None else next(model.parameters()).device
        self.model = model.to(self.device)
        self.bf16 = use_bf16(bf16, self.device)

    @property
    def inference(self) -> dict:
        return {**precision_info(self.device, self.bf16), "shots": self.shots,
                "chat_template": self.chat if self.method == LETTER else False}

    # ------------------------------------------------------------------ prompts

    def _chat(self, text: str) -> str:
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def mc_request(self, ex):
        if self.contexts is not None:
            return encode_request(self.tokenizer, self.contexts[ex.id],
                                  [llm_prompts.option_continuation(o) for o in ex.options],
                                  max_length=self.max_length, prefix=self.prefix)
        shots = [llm_prompts.solved_mc(s, self.method) for s in draw_shots(self.shot_pool, self.shots, ex,
                                                                           self.shot_seed)]
        if self.method == LETTER:
            context = llm_prompts.with_shots(llm_prompts.letter_prompt(ex), shots)
            if self.chat:
                context = self._chat(context)
                continuations = [llm_prompts.LETTERS[i] for i in range(len(ex.options))]
            else:
                continuations = [llm_prompts.letter_continuation(i) for i in range(len(ex.options))]
        else:
            context = llm_prompts.with_shots(llm_prompts.race_prompt(ex), shots)
            continuations = [llm_prompts.option_continuation(o) for o in ex.options]
        return encode_request(self.tokenizer, context, continuations, max_length=self.max_length,
                              prefix=self.prefix)

    def qa_context(self, ex) -> tuple[int, ...]:
        shots = [llm_prompts.solved_squad(s) for s in draw_shots(self.shot_pool, self.shots, ex, self.shot_seed)]
        text = llm_prompts.with_shots(llm_prompts.squad_prompt(ex), shots)
        ids = list(self.prefix) + self.tokenizer(text, add_special_tokens=False)["input_ids"]
        return tuple(ids[-(self.max_length - MAX_NEW_TOKENS):])

    # ------------------------------------------------------------------ scoring

    def _run(self, items, encode, length, compute, desc, progress, unit):
        """`compute(batch of encoded items)` over batches sorted by `length(encoded item)` under the
        token budget, results in input order.
        Only token ids are held for the whole split; activations and caches are one batch's,
        bounded by the token budget whatever the split's size."""
        import torch
        from tqdm.auto import tqdm

        encoded = [encode(x) for x in items]
        results: list = [None] * len(items)
        batches = length_sorted_batches(encoded, self.batch_size, length, self.max_tokens)
        with torch.inference_mode(), attention_backends(self.device), \
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16), \
                tqdm(total=len(items), desc=desc, unit=unit, disable=not progress, leave=False) as bar:
            for idx in batches:
                for i, value in zip(idx, compute([encoded[i] for i in idx])):
                    results[i] = value
                bar.update(len(idx))
        return results

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Per-option log-likelihoods (summed over the option's tokens), in input order."""
        if not examples:
            return []
        logprobs = shared_logprobs if self.share_prefix else unshared_logprobs
        return self._run(examples, self.mc_request, lambda r: r.tokens,
                         lambda batch: logprobs(self.model, batch, pad_id=self.pad_id, device=self.device),
                         desc, progress, "question")

    def predict_qa(self, examples, *, desc: str | None = None, progress: bool = False) -> list[str]:
        """The greedy answer to each question, cut at its first line break."""
        if not examples:
            return []
        eos = self.tokenizer.eos_token_id

        def stop(tokens) -> bool:
            return tokens[-1] == eos or llm_prompts.SQUAD_STOP in self.tokenizer.decode(tokens, skip_special_tokens=True)

        def generate(batch):
            out = greedy_generate(self.model, batch, max_new_tokens=MAX_NEW_TOKENS,
                                  stop=stop, pad_id=self.pad_id, device=self.device)
            return [self.tokenizer.decode([t for t in g if t != eos], skip_special_tokens=True)
                    .split(llm_prompts.SQUAD_STOP)[0].strip() for g in out]

        return self._run(examples, self.qa_context, lambda ids: len(ids) + MAX_NEW_TOKENS, generate, desc,
                         progress, "question")


def load_causal_scorer(model: str | os.PathLike, *, place: bool = False, **kwargs) -> CausalLMScorer:
    """A CausalLMScorer for a causal-LM folder, `smollm2` or a Hub name; `kwargs` go to the scorer."""
    from transformers import AutoModelForCausalLM

    name = str(model)
    loaded = load_model(AutoModelForCausalLM, name, kwargs.get("bf16"), name, "save_pretrained",
                        place=place, wording=WORDING, quiet=True)
    kwargs.setdefault("name", name)
    return CausalLMScorer(loaded.model, loaded.tokenizer, **kwargs)
