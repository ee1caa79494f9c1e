"""A decoder LM (a causal-LM folder, `smollm2`, or a Hub name) as a scorer of releases.

Multiple choice, two methods:
- `loglikelihood`: each option's log-likelihood after the prompt lm-evaluation-harness's race task
  builds for a one-question article (advrace.models.protocol.llm_prompts), or after lm-eval's own
  per-article context (`contexts`, advrace.models.protocol.lm_eval_race); evaluation reports
  `acc` (the highest log-likelihood) and `acc_norm` (the highest per character of the option).
- `letter`: the options shown as A-D and the answer letter's log-probability, inside the chat
  template when the tokenizer has one (an instruct model).
SQuAD: the answer generated greedily up to the first line break.

Everything that decides the number (prompt, delimiters, shots, BOS, chat template, truncation,
maximum length, metrics, weights) is the scorer's `protocol()` record
(advrace.models.protocol.scoring_protocol); what its decoding shared, ran alone and cut is
`decoding()`.

Speed: each article is encoded once and shared by its questions, each question's context once
and shared by its options (advrace.models.decoders.packed_decoding, continuation_scoring); an
article's questions go in one batch, batches length-sorted under a token budget (memory does not
grow with the split), bf16 autocast where the hardware has it, and evaluation shards the
questions across `accelerate launch` processes.
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.models.protocol import llm_prompts
from advrace.models.decoders.continuation_scoring import PrefixSharing, encode_request, shared_logprobs
from advrace.models.decoders.greedy_decoding import greedy_generate
from advrace.models.protocol.llm_prompts import GENERATION, LETTER, LOGLIKELIHOOD
from advrace.models.runtime.loading import (ModelLoadError, Wording, checkpoint_name, input_device, load_model, model_source,
                                    placed_by_device_map)
from advrace.models.decoders.packed_decoding import PackedCore
from advrace.models.decoders.packed_scoring import unshared_logprobs
from advrace.models.protocol.scoring_protocol import BOS_POLICIES, ScoringProtocol, task_protocol, text_sha256
from advrace.models.runtime.converted_models import tensor_kinds
from advrace.models.runtime.batching import length_sorted_batches
from advrace.models.runtime.model_args import ModelArgs
from advrace.models.runtime.precision import attention_backends, cpu_threads, precision_info, use_bf16

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


TOKENIZER_INFINITY = 10 ** 29  # transformers' model_max_length when the tokenizer sets none
DEFAULT_MAX_LENGTH = 2048  # lm-evaluation-harness's, for a model that states no length
LENGTH_KEYS = ("n_positions", "max_position_embeddings", "n_ctx")


def model_max_length(model, tokenizer) -> tuple[int, str]:
    """(the longest input the model takes, where that was read), in lm-evaluation-harness's order:
    the config's `text_config` (a composite model's text part) else the config itself, its
    n_positions, max_position_embeddings or n_ctx; then the tokenizer's model_max_length; else
    2048."""
    config = getattr(model, "config", None)
    text = getattr(config, "text_config", None)
    part, where = (text, "config.text_config") if text is not None else (config, "config")
    for key in LENGTH_KEYS:
        value = getattr(part, key, None)
        if isinstance(value, int) and value > 0:
            return value, f"{where}.{key}"
    limit = getattr(tokenizer, "model_max_length", None)
    if isinstance(limit, int) and 0 < limit < TOKENIZER_INFINITY:
        return limit, "tokenizer.model_max_length"
    return DEFAULT_MAX_LENGTH, "lm-evaluation-harness's default"


def tokenizer_adds_bos(tokenizer) -> bool:
    """Whether the tokenizer puts BOS first by default (Llama 3, Mistral, Gemma do; GPT-2 and
    SmolLM2 do not): what lm-evaluation-harness 0.4.10 and later follow."""
    bos = getattr(tokenizer, "bos_token_id", None)
    if bos is None:
        return False
    return tokenizer("a")["input_ids"][:1] == [bos]


class CausalLMScorer:
    """`predict_mc` and `predict_qa` of a causal LM; see the module doc. `bos`: "tokenizer" (BOS
    first when the tokenizer adds one by default, as lm-evaluation-harness 0.4.10+ does),
    "always" or "never". `max_length`: the longest input; None takes the model's (see
    `model_max_length`). `contexts`: {example id: prompt text} replacing the per-question prompt
    (the lm-eval-race protocol). `share_articles`: the questions of one article share its cached
    tokens (`share_prefix`: each question's options share its prompt's)."""

    def __init__(self, model, tokenizer, *, name: str = "model", method: str = LOGLIKELIHOOD,
                 batch_size: int = 16, bf16: bool | None = None, accelerator=None, shots: int = 0,
                 shot_pool=(), shot_seed: int = 1234, chat_template: bool | None = None,
                 share_prefix: bool = True, share_articles: bool = True, max_tokens: int = TOKENS_PER_BATCH,
                 max_length: int | None = None,
                 bos: str = "tokenizer", contexts: dict | None = None,
                 few_shot_source: dict | None = None, model_info: dict | None = None):
        if method not in MC_METHODS:
            raise ConfigError(f"unknown scoring method {method!r}; choose one of {', '.join(MC_METHODS)}")
        if batch_size < 1:
            raise ConfigError(f"batch size must be at least 1, got {batch_size}")
        if bos not in BOS_POLICIES:
            raise ConfigError(f"unknown BOS policy {bos!r}; choose one of {', '.join(BOS_POLICIES)}")
        self.name, self.method, self.tokenizer = name, method, tokenizer
        self.batch_size, self.max_tokens = batch_size, max_tokens
        self.shots, self.shot_pool, self.shot_seed = shots, list(shot_pool), shot_seed
        self.share_prefix = share_prefix
        # {question id: prompt}: lm-eval's own race task, one document per article
        # (advrace.models.protocol.lm_eval_race); zero-shot log-likelihood only
        if contexts is not None and (method != LOGLIKELIHOOD or shots):
            raise ConfigError("lm-eval's race contexts are scored zero-shot by log-likelihood only")
        has_template = bool(getattr(tokenizer, "chat_template", None))
        if chat_template and not has_template:
            raise ConfigError(f"{name}: --chat-template asked for, but its tokenizer has no chat template")
        self.chat = has_template if chat_template is None else bool(chat_template)
        self.pad_id = next((t for t in (tokenizer.pad_token_id, tokenizer.eos_token_id) if t is not None), 0)
        limit, where = model_max_length(model, tokenizer)
        if max_length is not None:
            if max_length < 8:
                raise ConfigError(f"--max-length {max_length}: a decoder LM needs at least 8 tokens")
            if max_length > limit:
                raise ConfigError(f"{name}: --max-length {max_length} is longer than the model takes "
                                  f"({limit}, from its {where}); give at most {limit}")
            limit, where = max_length, "--max-length"
        self.max_length, self.max_length_from = limit, where
        self.bos = bos
        self.adds_bos = bos == "always" or (bos == "tokenizer" and tokenizer_adds_bos(tokenizer))
        if self.adds_bos and tokenizer.bos_token_id is None:
            raise ConfigError(f"{name}: BOS asked for, but its tokenizer has no BOS token")
        self.contexts = contexts
        self.few_shot_source, self.model_info = few_shot_source or {}, model_info or {}
        self.cut: dict[str, int] = {}  # example id -> the most context tokens one of its pairs lost
        self._cuts: list[tuple[int, int, str]] = []  # (tokens cut, of, example id) since the last warning
        self._told_unshared = False
        model.eval()
        if placed_by_device_map(model):  # dispatched by Accelerate (device_map): never moved
            self.device, self.model = input_device(model), model
        else:
            self.device = accelerator.device if accelerator is not None else next(model.parameters()).device
            self.model = model.to(self.device)
        self.bf16 = use_bf16(bf16, self.device)
        # probed on the device that scores, before anything is scored (packed_decoding.PackedCore)
        self.core = PackedCore(self.model, self.device)
        # whether an article's questions may share its cached tokens (probed once, here)
        self.articles = PrefixSharing(self.core, self.device) if share_prefix and share_articles else None

    @property
    def inference(self) -> dict:
        weights = next(self.model.parameters()).dtype
        return {**precision_info(self.device, self.bf16, weights), "shots": self.shots,
                "chat_template": self.chat if self.method == LETTER else False}

    def protocol(self, task: str = MULTIPLE_CHOICE, release: dict | None = None) -> ScoringProtocol:
        """The record of how this scorer scores a `task` release (see advrace.models.protocol.scoring_protocol)."""
        mc = task == MULTIPLE_CHOICE
        method = self.method if mc else GENERATION
        chat = self.chat and method == LETTER
        shared = task_protocol(mc, method, per_article=self.contexts is not None)
        return ScoringProtocol(
            **shared, max_length=self.max_length,
            max_length_from=self.max_length_from, bos=self.bos, adds_bos=self.adds_bos, chat_template=chat,
            chat_template_sha256=text_sha256(self.tokenizer.chat_template) if chat else None,
            shots=self.shots, few_shot_file=self.few_shot_source.get("file") if self.shots else None,
            few_shot_sha256=self.few_shot_source.get("sha256") if self.shots else None,
            few_shot_seed=self.shot_seed if self.shots else None,
            model={"name": self.name, **self.model_info}, release=dict(release or {}))

    def decoding(self) -> dict:
        """What this process's scoring shared, ran alone, and cut (see `merge_decoding`)."""
        return {**self.core.describe(), **self.core.unshared.record(), "questions_cut": len(self.cut),
                "cut_ids": sorted(self.cut), "article_sharing": self.articles.record() if self.articles else None}

    # ------------------------------------------------------------------ prompts

    def _chat(self, text: str) -> str:
        return self.tokenizer.apply_chat_template([{"role": "user", "content": text}], tokenize=False,
                                                  add_generation_prompt=True)

    def _prefix(self, text: str) -> tuple[int, ...]:
        """BOS before `text` when the policy adds one, unless the text already begins with it (a
        chat template that writes it): never two."""
        if not self.adds_bos:
            return ()
        bos = self.tokenizer.bos_token
        return () if bos and text.startswith(bos) else (self.tokenizer.bos_token_id,)

    def _note_cut(self, ex_id: str, cut: int, total: int) -> None:
        self.cut[ex_id] = max(cut, self.cut.get(ex_id, 0))
        self._cuts.append((cut, total, ex_id))

    def _warn_cuts(self, desc: str | None) -> None:
        """One warning per call of predict_*: how many prompts were cut, and the deepest cut."""
        if not self._cuts:
            return
        cut, total, worst = max(self._cuts)
        where = f" ({desc})" if desc else ""
        print(f"warning: {self.name}{where}: {len(self._cuts)} question(s) had prompt tokens cut from the left "
              f"to fit the maximum length {self.max_length} ({self.max_length_from}); the most: {cut} of "
              f"{total} ({worst}); results.json lists them under decoding.cut_ids", file=sys.stderr, flush=True)
        self._cuts = []

    def mc_request(self, ex):
        shots = [llm_prompts.solved_mc(s, self.method) for s in draw_shots(self.shot_pool, self.shots, ex,
                                                                           self.shot_seed)]
        if self.contexts is not None:
            context = llm_prompts.with_shots(self.contexts[ex.id], shots)
            continuations = [llm_prompts.option_continuation(o) for o in ex.options]
        elif self.method == LETTER:
            context = llm_prompts.with_shots(llm_prompts.letter_prompt(ex), shots)
            if self.chat:
                context = self._chat(context)
                continuations = [llm_prompts.LETTERS[i] for i in range(len(ex.options))]
            else:
                continuations = [llm_prompts.letter_continuation(i) for i in range(len(ex.options))]
        else:
            context = llm_prompts.with_shots(llm_prompts.race_prompt(ex), shots)
            continuations = [llm_prompts.option_continuation(o) for o in ex.options]
        request = encode_request(self.tokenizer, context, continuations, max_length=self.max_length,
                                 prefix=self._prefix(context))
        if any(request.cuts):
            self._note_cut(ex.id, max(request.cuts), len(request.context))
        return request

    def qa_context(self, ex) -> tuple[int, ...]:
        shots = [llm_prompts.solved_squad(s) for s in draw_shots(self.shot_pool, self.shots, ex, self.shot_seed)]
        text = llm_prompts.with_shots(llm_prompts.squad_prompt(ex), shots)
        ids = list(self._prefix(text)) + self.tokenizer(text, add_special_tokens=False)["input_ids"]
        room = self._qa_room()
        if len(ids) > room:
            self._note_cut(ex.id, len(ids) - room, len(ids))
            ids = ids[len(ids) - room:]
        return tuple(ids)

    def _qa_room(self) -> int:
        """How many prompt tokens a SQuAD question keeps: the maximum length less the answer's."""
        room = self.max_length - MAX_NEW_TOKENS
        if room < 1:
            raise ConfigError(f"{self.name}: the maximum length {self.max_length} ({self.max_length_from}) leaves "
                              f"no room for a SQuAD prompt: the answer may take {MAX_NEW_TOKENS} tokens; give "
                              f"--max-length {MAX_NEW_TOKENS + 1} or more")
        return room

    def _say_unshared(self) -> None:
        """Once per scorer: that some work could not share its prompt's cache, why, and the cost."""
        fb = self.core.unshared
        if self._told_unshared or not fb.alone:
            return
        self._told_unshared = True
        why = ", ".join(f"{n} for {reason}" for reason, n in sorted(fb.reasons.items()))
        print(f"note: {self.name}: {fb.alone} question(s) could not share their prompt's cache ({why}) and "
              "were run one (prompt, option) pair at a time, exact but slower; results.json records the "
              "count and cost under decoding", file=sys.stderr, flush=True)

    # ------------------------------------------------------------------ scoring

    def _run(self, items, encode, length, compute, desc, progress, unit):
        """`compute(batch of encoded items)` over batches sorted by `length(encoded item)` under the
        token budget, results in input order.
        Only token ids are held for the whole split; activations and caches are one batch's,
        bounded by the token budget whatever the split's size. On a CPU each batch runs with
        torch's threads fitted to the load then (advrace.models.runtime.precision.cpu_threads: a
        thread sharing its core with a busy process stalls the others at every operation)."""
        import torch
        from tqdm.auto import tqdm

        encoded = [encode(x) for x in items]
        results: list = [None] * len(items)
        batches = length_sorted_batches(encoded, self.batch_size, length, self.max_tokens)
        with torch.inference_mode(), attention_backends(self.device), \
                torch.autocast(self.device.type, dtype=torch.bfloat16, enabled=self.bf16), \
                tqdm(total=len(items), desc=desc, unit=unit, disable=not progress, leave=False) as bar:
            for idx in batches:
                with cpu_threads(self.device):
                    values = compute([encoded[i] for i in idx])
                for i, value in zip(idx, values):
                    results[i] = value
                bar.update(len(idx))
        return results

    def _article_groups(self, examples) -> list[list[int]]:
        """Indices of the questions whose prompts begin with the same article, in order of first
        appearance; with shots (drawn per question) every question is its own group. What a group
        shares is the common prefix of its prompts' tokens (packed_scoring.shared_prefix)."""
        groups: dict = {}
        for i, ex in enumerate(examples):
            groups.setdefault(ex.passage if not self.shots else ex.id, []).append(i)
        return list(groups.values())

    def predict_mc(self, examples, *, desc: str | None = None, progress: bool = False) -> list[list[float]]:
        """Per-option log-likelihoods (summed over the option's tokens), in input order. The
        questions of one article go in one batch, the article encoded once for all of them."""
        if not examples:
            return []
        requests = [self.mc_request(ex) for ex in examples]
        groups = self._article_groups(examples) if self.articles else [[i] for i in range(len(examples))]

        def compute(batch):
            flat = [i for g in batch for i in g]
            reqs = [requests[i] for i in flat]
            if self.share_prefix:
                local, at = [], 0
                for g in batch:
                    local.append(list(range(at, at + len(g))))
                    at += len(g)
                values = shared_logprobs(self.model, reqs, pad_id=self.pad_id, device=self.device, core=self.core,
                                         groups=local, sharing=self.articles)
            else:
                values = unshared_logprobs(self.model, reqs, pad_id=self.pad_id, device=self.device)
            it = iter(values)
            return [[next(it) for _ in g] for g in batch]

        per_group = self._run(groups, lambda g: g, lambda g: sum(requests[i].tokens for i in g), compute, desc,
                              progress, "article")
        scores: list = [None] * len(examples)
        for group, values in zip(groups, per_group):
            for i, value in zip(group, values):
                scores[i] = value
        self._warn_cuts(desc)
        self._say_unshared()
        return scores

    def predict_qa(self, examples, *, desc: str | None = None, progress: bool = False) -> list[str]:
        """The greedy answer to each question, cut at its first line break."""
        if not examples:
            return []
        self._qa_room()
        eos = self.tokenizer.eos_token_id

        def stop(tokens) -> bool:
            return tokens[-1] == eos or llm_prompts.SQUAD_STOP in self.tokenizer.decode(tokens, skip_special_tokens=True)

        def generate(batch):
            out = greedy_generate(self.model, batch, max_new_tokens=MAX_NEW_TOKENS,
                                  stop=stop, pad_id=self.pad_id, device=self.device, core=self.core)
            return [self.tokenizer.decode([t for t in g if t != eos], skip_special_tokens=True)
                    .split(llm_prompts.SQUAD_STOP)[0].strip() for g in out]

        answers = self._run(examples, self.qa_context, lambda ids: len(ids) + MAX_NEW_TOKENS, generate, desc,
                            progress, "question")
        self._warn_cuts(desc)
        self._say_unshared()
        return answers


def merge_decoding(record: dict, accelerator=None) -> dict:
    """A scorer's `decoding()` summed over the processes of an `accelerate launch` (each scored its
    shard), so that the report counts every question; one process: the record as it is."""
    if accelerator is None or getattr(accelerator, "num_processes", 1) == 1:
        return record
    from accelerate.utils import gather_object

    parts = gather_object([record])
    merged = dict(parts[0])
    for key in ("shared", "run_alone", "tokens_run_alone", "tokens_if_shared", "questions_cut"):
        merged[key] = sum(p[key] for p in parts)
    reasons: dict = {}
    for p in parts:
        for reason, n in p["reasons"].items():
            reasons[reason] = reasons.get(reason, 0) + n
    merged["reasons"] = dict(sorted(reasons.items()))
    merged["cut_ids"] = sorted(i for p in parts for i in p["cut_ids"])
    if merged.get("article_sharing"):
        sharing = merged["article_sharing"] = dict(merged["article_sharing"])
        for key in ("questions", "groups", "prefix_tokens_saved"):
            sharing[key] = sum(p["article_sharing"][key] for p in parts)
        split: dict = {}
        for p in parts:
            for reason, n in p["article_sharing"]["questions_not_grouped"].items():
                split[reason] = split.get(reason, 0) + n
        sharing["questions_not_grouped"] = dict(sorted(split.items()))
    shared = merged["tokens_if_shared"]
    merged["cost_ratio"] = round(merged["tokens_run_alone"] / shared, 3) if shared else None
    return merged


def load_causal_scorer(model: str | os.PathLike, *, place: bool = False, model_args=None,
                       **kwargs) -> CausalLMScorer:
    """A CausalLMScorer for a causal-LM folder, `smollm2` or a Hub name; `kwargs` go to the scorer.

    `model_args`: how to load it (a ModelArgs, a `key=value,...` string or a dict; see
    advrace.models.runtime.model_args). With a device_map the model stays where it was placed (no
    accelerator moves it); with weights loaded in half precision, bf16 autocast stays off unless
    `bf16=True` asks for it (the weights' dtype is the compute precision)."""
    import torch
    from transformers import AutoModelForCausalLM

    name = str(model)
    model_args = ModelArgs.coerce(model_args)
    loaded = load_model(AutoModelForCausalLM, name, kwargs.get("bf16"), name, "save_pretrained",
                        place=place, wording=WORDING, quiet=True, model_args=model_args)
    if model_args.places:
        kwargs["accelerator"] = None
    if kwargs.get("bf16") is None and next(loaded.model.parameters()).dtype != torch.float32:
        kwargs["bf16"] = False
    kwargs.setdefault("name", name)
    dtype = str(next(loaded.model.parameters()).dtype).removeprefix("torch.")
    kwargs.setdefault("model_info", {"path": checkpoint_name(name), "weights": weights_description(name, dtype),
                                     "model_args": model_args.given()})
    return CausalLMScorer(loaded.model, loaded.tokenizer, **kwargs)


def weights_description(name: str, dtype: str = "float32") -> str:
    """What weights a name loads, for the scoring protocol: a GGUF's quantisation (read from its
    tensors) and that it was dequantised; else the saved files' kind."""
    source, extra = model_source(name)
    gguf_file = extra.get("gguf_file")
    if gguf_file:
        try:
            kinds = Counter(dict(tensor_kinds(Path(source) / gguf_file)))
            tensors = ", ".join(f"{kind} x{n}" for kind, n in kinds.most_common())
        except Exception as exc:  # noqa: BLE001 - the description only; loading said the rest
            tensors = f"tensor types unread: {type(exc).__name__}"
        return f"{gguf_file}: GGUF ({tensors}), dequantised to {dtype} by transformers on load"
    folder = Path(source)
    if folder.is_dir():
        kinds = sorted({p.suffix.lstrip(".") for p in folder.iterdir() if p.suffix in (".safetensors", ".bin")})
        return f"{' and '.join(kinds) or 'unknown'} weights from a local folder, read in {dtype}"
    return f"Hub weights, read in {dtype}"
