"""How a decoder LM is loaded: `--model-args` (lm-evaluation-harness's `--model_args`), parsed once
into a frozen `ModelArgs`.

    advrace evaluate RELEASE --model M --model-args "dtype=bfloat16,device_map=auto" --out REPORT
    load_causal_scorer(M, model_args="dtype=bfloat16,device_map=auto")  # or ModelArgs(...), or a dict

Keys (each optional; an unknown key or a bad value is a ConfigError, exit status 2, before any
model loads):

- `dtype`: auto, float32, bfloat16 or float16: the dtype the weights are loaded in (auto: the
  checkpoint's own). Unset: float32, as every model the package reads. Weights loaded in bf16
  compute in bf16 everywhere; `--no-bf16` and bf16 autocast are about the compute precision of
  fp32 weights, and stay off for half-precision weights unless asked for.
- `device_map`: auto (or Accelerate's balanced, balanced_low_0, sequential), or one device
  (cpu, cuda:0, 0, ...). auto is Accelerate's big-model inference: the model may be split
  over the GPUs and offloaded to the CPU or to disk; it is then left where it was placed, and
  inputs go to the device of its input embeddings. From Python, a dict {module name: device}
  (devices may include "disk") places modules by hand. One process only: not under
  `accelerate launch` with several processes.
- `attn_implementation`: eager, sdpa, flash_attention_2, flex_attention, ...: any attention
  registered in the installed Transformers (the error lists them).
- `revision`: the branch, tag or commit of a Hub model (not of a local folder or `smollm2`).
- `trust_remote_code`: true or false (the default): run the Python code a Hub repository ships.
- `tokenizer`: the folder or Hub name of the tokenizer, when it is not the model's own.
- `gguf_file`: the GGUF file of the model folder (or Hub repository) to read, weights and
  tokenizer, as Transformers reads GGUF: dequantised to `dtype`.
- `peft`: the folder or Hub name of a PEFT adapter (LoRA, ...) put on the model once loaded (needs
  the `peft` package).

lm-evaluation-harness's HFLM keys that are not about loading are taken where the command has
their setting (`settings`; see `ModelArgs.parse`): `pretrained` is `--model`, `add_bos_token` is
`--bos` (true: always, false: never), `max_length` is `--max-length`; `parallelize=true` is
`device_map=auto`. Its other keys are refused, each with the reason and what to use instead
(LM_EVAL_REFUSED); lm-eval's default dtype is auto, advrace's float32.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.paths import looks_like_model_name
from advrace.models.runtime.precision import dtype_load_kwargs

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
DEVICE = re.compile(r"(cpu|cuda|mps|xpu|npu|hpu|mlu|musa)(:\d+)?|\d+")
BOOLEANS = {"true": True, "false": False}
HELP = ("dtype=auto|float32|bfloat16|float16, device_map=auto|cpu|cuda:0|..., attn_implementation=eager|sdpa|"
        "flash_attention_2|..., revision=BRANCH|TAG|COMMIT, trust_remote_code=true|false, tokenizer=FOLDER|NAME, "
        "gguf_file=FILE, peft=ADAPTER")
PEFT_HINT = "install it with `pip install peft` (it also comes with advrace[lm-eval])"

# lm-evaluation-harness's HFLM keys that are evaluation settings here: key -> (setting, its flag)
LM_EVAL_SETTINGS = {"pretrained": ("model", "--model"), "add_bos_token": ("bos", "--bos"),
                    "max_length": ("max_length", "--max-length")}
_BOS = {True: "always", False: "never"}  # add_bos_token -> --bos
_INSTEAD_OF_AUTO = "device_map=auto lets Accelerate size each device's share and offload what does not fit"
# The rest of HFLM's keys (and the from_pretrained keywords lm-eval users pass through it), each
# refused with why and what to do instead, so that no pasted key is silently dropped.
LM_EVAL_REFUSED = {
    "load_in_4bit": "bitsandbytes quantisation needs the bitsandbytes package and a CUDA GPU, neither part of "
                    "advrace's install, and 4-bit weights give other numbers than the model's own; load "
                    "dtype=bfloat16 (half the memory) or device_map=auto (offloaded) instead",
    "load_in_8bit": "bitsandbytes quantisation needs the bitsandbytes package and a CUDA GPU, neither part of "
                    "advrace's install, and 8-bit weights give other numbers than the model's own; load "
                    "dtype=bfloat16 (half the memory) or device_map=auto (offloaded) instead",
    "bnb_4bit_compute_dtype": "a setting of bitsandbytes quantisation (load_in_4bit), which advrace does not do",
    "bnb_4bit_quant_type": "a setting of bitsandbytes quantisation (load_in_4bit), which advrace does not do",
    "bnb_4bit_use_double_quant": "a setting of bitsandbytes quantisation (load_in_4bit), which advrace does not do",
    "quantization_config": "quantising on load is not done here; a checkpoint saved quantised carries its own "
                           "quantization_config, which Transformers reads without this key",
    "autogptq": "AutoGPTQ models are not loaded here; a GPTQ checkpoint saved with its quantization_config "
                "loads through Transformers as it is",
    "gptqmodel": "GPTQModel models are not loaded here; a GPTQ checkpoint saved with its quantization_config "
                 "loads through Transformers as it is",
    "delta": "advrace adds no delta weights: add them to the base model, save_pretrained the sum and give "
             "that folder",
    "backend": "advrace tells a causal language model by its config's architecture; seq2seq models are not "
               "scored: leave backend out",
    "subfolder": "not supported: give the subfolder itself as the model (a local folder)",
    "device": "give device_map=DEVICE (cpu, cuda:0, ...) to load the whole model on one device; without it "
              "each process uses its own (its GPU under accelerate launch)",
    "batch_size": "give --batch-size",
    "max_batch_size": "advrace does not search for a batch size: give --batch-size",
    "truncation": "advrace always cuts a prompt too long for the model from the left, each (prompt, option) "
                  "pair on its own, as lm-eval's log-likelihood does; every cut is warned and counted",
    "logits_cache": "a speed option of lm-eval's with no counterpart here (advrace scores a prompt shared by "
                    "several options once by itself)",
    "softmax_dtype": "no separate softmax precision here: the weights' dtype (dtype=) and bf16 autocast "
                     "(--no-bf16 turns it off) set the compute precision",
    "mixed_precision_dtype": "the compute precision here is bf16 autocast where the hardware has native bf16 "
                             "(--no-bf16 turns it off) over the weights' dtype (dtype=)",
    "use_fast_tokenizer": "the tokenizer is always AutoTokenizer's default (the fast one)",
    "prefix_token_id": "not an option here: --bos chooses whether a BOS token goes before each prompt",
    "max_memory_per_gpu": "not supported: " + _INSTEAD_OF_AUTO,
    "max_cpu_memory": "not supported: " + _INSTEAD_OF_AUTO,
    "offload_folder": "not supported: " + _INSTEAD_OF_AUTO,
    "gpus": "device_map=auto uses every GPU torch sees: choose them with CUDA_VISIBLE_DEVICES",
    "tp_plan": "tensor parallelism is not supported: device_map=auto splits a large model over the GPUs",
    "think_end_token": "options of reasoning models' generation, not supported here",
    "enable_thinking": "options of reasoning models' generation, not supported here",
    "chat_template_args": "not supported: --chat-template and --no-chat-template choose whether letter choice "
                          "is wrapped in the tokenizer's chat template",
}


def attention_implementations() -> list[str]:
    """The attention implementations the installed Transformers registers (eager first)."""
    from transformers.modeling_utils import ALL_ATTENTION_FUNCTIONS  # deferred: start-up time

    return ["eager", *(k for k in ALL_ATTENTION_FUNCTIONS.valid_keys() if k != "eager")]


def _bad(key: str, value, allowed: str) -> ConfigError:
    return ConfigError(f"model argument {key}={value}: not allowed; {key} takes {allowed}")


def _device_map(value):
    """A device map as `from_pretrained` takes it: a strategy or one device (a string), or, from
    Python, {module name: device} kept as a tuple of pairs so that ModelArgs stays frozen."""
    allowed = (f"{', '.join(DEVICE_MAP_STRATEGIES)}, or one device (cpu, cuda, cuda:0, 0, mps, ...); "
               "from Python also a dict {module name: device}")
    if isinstance(value, Mapping):
        value = tuple(value.items())
    if isinstance(value, tuple):
        for module, device in value:
            device = str(device)
            if not isinstance(module, str) or not (DEVICE.fullmatch(device) or device == "disk"):
                raise _bad("device_map", dict(value), "a dict of module names to devices (cpu, cuda:0, 0, disk, ...)")
        return tuple((module, device if isinstance(device, int) else str(device)) for module, device in value)
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    if isinstance(value, str) and (value in DEVICE_MAP_STRATEGIES or DEVICE.fullmatch(value)):
        return value
    raise _bad("device_map", value, allowed)


def _lm_eval_setting(key: str, value: str, settings: dict | None) -> None:
    """Put an lm-eval key that is an evaluation setting here into `settings` (None: the caller
    has no such setting, and the key is refused naming the one to use)."""
    setting, flag = LM_EVAL_SETTINGS[key]
    if settings is None:
        python = {"pretrained": "the model's name", "add_bos_token": "bos='always' or 'never'",
                  "max_length": "max_length=N"}[key]
        raise ConfigError(f"model argument {key}={value}: not a load option but a setting of the evaluation: "
                          f"give {flag} on the command line, {python} from Python")
    if key == "add_bos_token":
        if value.lower() not in BOOLEANS:
            raise _bad(key, value, "true or false (--bos always or never)")
        value = _BOS[BOOLEANS[value.lower()]]
    elif key == "max_length":
        if not value.isdigit() or int(value) < 1:
            raise _bad(key, value, "a positive number of tokens (--max-length)")
        value = int(value)
    settings[setting] = value


def _installed(module: str) -> bool:
    try:
        return importlib.util.find_spec(module) is not None
    except (ImportError, ValueError):  # a module set to None in sys.modules: not importable
        return False


def _text(key: str, value, what: str):
    if value is not None and (not isinstance(value, str) or not value.strip()):
        raise _bad(key, value, what)


@dataclass(frozen=True)
class ModelArgs:
    """The load options of a causal LM; see the module doc. Every field is checked when the
    object is made; `bool(args)` says whether any was given."""

    dtype: str | None = None
    device_map: str | tuple | None = None
    attn_implementation: str | None = None
    revision: str | None = None
    trust_remote_code: bool = False
    tokenizer: str | None = None
    gguf_file: str | None = None
    peft: str | None = None

    def __post_init__(self):
        if self.dtype is not None:
            dtype = str(self.dtype).removeprefix("torch.")  # torch.bfloat16 from Python
            if dtype not in DTYPES:
                raise _bad("dtype", self.dtype, ", ".join(DTYPES))
            object.__setattr__(self, "dtype", dtype)
        if self.device_map is not None:
            object.__setattr__(self, "device_map", _device_map(self.device_map))
        if self.attn_implementation is not None:
            known = attention_implementations()
            if self.attn_implementation not in known:
                raise _bad("attn_implementation", self.attn_implementation,
                           "one of the installed Transformers' attention implementations: " + ", ".join(known))
        _text("revision", self.revision, "a branch, tag or commit of a Hub model")
        if not isinstance(self.trust_remote_code, bool):
            raise _bad("trust_remote_code", self.trust_remote_code, "true or false")
        _text("tokenizer", self.tokenizer, "a tokenizer's folder or Hub name")
        _text("peft", self.peft, "a PEFT adapter's folder or Hub name")
        _text("gguf_file", self.gguf_file, "the name of a .gguf file in the model's folder or Hub repository")
        if self.gguf_file is not None and not self.gguf_file.endswith(".gguf"):
            raise _bad("gguf_file", self.gguf_file, "the name of a .gguf file in the model's folder or Hub repository")

    # ------------------------------------------------------------------ making one

    @classmethod
    def parse(cls, text: str, settings: dict | None = None) -> ModelArgs:
        """`key=value,key=value` as lm-evaluation-harness's --model_args (blanks around either
        are dropped); ConfigError naming the key, the value and what is allowed.

        `settings`: a dict that receives lm-eval's keys which are evaluation settings here
        (LM_EVAL_SETTINGS: `model`, `bos`, `max_length`, already translated); None refuses them.
        `parallelize=true` is `device_map=auto` (unless a device_map is given, as in lm-eval)."""
        pairs: dict = {}
        for item in (part.strip() for part in str(text).split(",")):
            if not item:
                continue
            key, eq, value = (s.strip() for s in item.partition("="))
            cls._check_key(key, item)
            if not eq or not value:
                raise ConfigError(f"model argument {item}: no value; write {key}=VALUE ({HELP})")
            if key in pairs:
                raise ConfigError(f"model argument {key} given twice ({key}={pairs[key]} and {key}={value})")
            pairs[key] = value
        return cls._from_pairs(pairs, settings)

    @classmethod
    def coerce(cls, value, settings: dict | None = None) -> ModelArgs:
        """A ModelArgs from None (none given), a `key=value,...` string, a dict or a ModelArgs.
        `settings`: see `parse`; a dict takes the same keys as a string."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls.parse(value, settings)
        if isinstance(value, Mapping):
            for key in value:
                cls._check_key(str(key), f"{key}={value[key]}")
            return cls._from_pairs(dict(value), settings)
        raise ConfigError(f"model args: give a 'key=value,...' string, a dict or a ModelArgs, not {value!r}")

    @classmethod
    def _check_key(cls, key: str, item: str) -> None:
        if key in LM_EVAL_REFUSED:
            raise ConfigError(f"model argument {item}: lm-evaluation-harness's {key} is not supported here: "
                              f"{LM_EVAL_REFUSED[key]}")
        names = [f.name for f in fields(cls)]
        if key not in names and key not in LM_EVAL_SETTINGS and key != "parallelize":
            raise ConfigError(f"model argument {item}: unknown key {key!r}; the keys are {', '.join(names)} "
                              f"(and lm-evaluation-harness's {', '.join([*LM_EVAL_SETTINGS, 'parallelize'])})")

    @classmethod
    def _from_pairs(cls, pairs: dict, settings: dict | None) -> ModelArgs:
        values = {}
        for key, value in pairs.items():
            if key in LM_EVAL_SETTINGS:
                _lm_eval_setting(key, str(value), settings)
            elif key in ("trust_remote_code", "parallelize") and isinstance(value, str):
                if value.lower() not in BOOLEANS:
                    raise _bad(key, value, "true or false")
                values[key] = BOOLEANS[value.lower()]
            else:
                values[key] = value
        parallelize = values.pop("parallelize", False)
        if not isinstance(parallelize, bool):
            raise _bad("parallelize", parallelize, "true or false")
        if parallelize:  # lm-eval: device_map="auto" unless one is given
            values.setdefault("device_map", "auto")
        return cls(**values)

    # ------------------------------------------------------------------ reading one

    def given(self) -> dict:
        """The options given (those that differ from the defaults), as JSON: what a report records."""
        out = {}
        for f in fields(self):
            value = getattr(self, f.name)
            if value != f.default:
                out[f.name] = dict(value) if isinstance(value, tuple) else value
        return out

    def __bool__(self) -> bool:
        return bool(self.given())

    def __str__(self) -> str:
        """The `--model-args` spelling (a Python dict device map as JSON)."""
        return ",".join(f"{k}={json.dumps(v) if isinstance(v, (dict, bool)) else v}" for k, v in self.given().items())

    @property
    def places(self) -> bool:
        """Whether `from_pretrained` places the model (device_map given): it is then never moved."""
        return self.device_map is not None

    def tokenizer_kwargs(self) -> dict:
        """`AutoTokenizer.from_pretrained` keywords. The model's revision and GGUF file are the
        tokenizer's only when it is the model's own (no `tokenizer` given), as in lm-eval."""
        out: dict = {}
        if self.tokenizer is None:
            out.update(self._source_kwargs())
        if self.trust_remote_code:
            out["trust_remote_code"] = True
        return out

    def config_kwargs(self) -> dict:
        """`AutoConfig.from_pretrained` keywords."""
        return {**self._source_kwargs(), **({"trust_remote_code": True} if self.trust_remote_code else {})}

    def _source_kwargs(self) -> dict:
        """Which files of the model's folder or repository are read: its revision, its GGUF file."""
        out: dict = {}
        if self.revision is not None:
            out["revision"] = self.revision
        if self.gguf_file is not None:
            out["gguf_file"] = self.gguf_file
        return out

    def model_kwargs(self) -> dict:
        """`from_pretrained` keywords of the model: the dtype (float32 when unset), and every
        other option given (the adapter and tokenizer are not `from_pretrained`'s)."""
        out = {**dtype_load_kwargs(self.dtype or "float32"), **self.config_kwargs()}
        if self.device_map is not None:
            device_map = self.device_map
            out["device_map"] = dict(device_map) if isinstance(device_map, tuple) else \
                int(device_map) if device_map.isdigit() else device_map
        if self.attn_implementation is not None:
            out["attn_implementation"] = self.attn_implementation
        return out

    # ------------------------------------------------------------------ checks before loading

    def check_processes(self) -> None:
        """device_map places one copy of the model over this machine's devices; under
        `accelerate launch` every process would place its own over the same devices."""
        processes = int(os.environ.get("WORLD_SIZE", "1") or 1)
        if self.places and processes > 1:
            raise ConfigError(f"model argument device_map={self.given()['device_map']}: not with several "
                              f"processes ({processes} under accelerate launch or torchrun), each of which would "
                              "place its own copy of the model over the same devices. Run one process with "
                              "device_map (big-model inference), or leave device_map out to give each process "
                              "its own GPU")

    def check_model(self, name: str, *, builtin: str | None = None) -> None:
        """What can be told before loading `name`: a revision or a GGUF file needs a folder or Hub
        name of the user's (`builtin`, a name the package resolves itself, has its own files; a
        local folder has no revisions, and must hold the GGUF file); a local tokenizer or adapter
        must exist; an adapter needs the peft package; a CUDA device needs CUDA; and
        `check_processes`."""
        self.check_processes()
        folder = Path(name).expanduser()
        for key in ("revision", "gguf_file"):
            value = getattr(self, key)
            if value is not None and builtin is not None and name == builtin:
                raise ConfigError(f"model argument {key}={value}: {name} is read from an installed package, "
                                  f"which has {'no revisions' if key == 'revision' else 'its own GGUF file'}; "
                                  f"leave {key} out")
        if self.revision is not None and folder.is_dir():
            raise ConfigError(f"model argument revision={self.revision}: {name} is a local folder, which has "
                              "no revisions (revision names a branch, tag or commit of a Hub model); leave "
                              "revision out, or check out that revision into the folder")
        if self.gguf_file is not None and folder.is_dir() and not (folder / self.gguf_file).is_file():
            present = sorted(p.name for p in folder.glob("*.gguf"))
            raise ConfigError(f"model argument gguf_file={self.gguf_file}: no such file in {name}; "
                              + (f"its GGUF files: {', '.join(present)}" if present else "it holds no .gguf file"))
        for key in ("tokenizer", "peft"):
            value = getattr(self, key)
            if value is not None and not Path(value).expanduser().exists() and not looks_like_model_name(value):
                raise ConfigError(f"model argument {key}={value}: no such folder (nor a Hub name)")
        if self.peft is not None and not _installed("peft"):
            raise ConfigError(f"model argument peft={self.peft}: loading a PEFT adapter needs the peft package; "
                              f"{PEFT_HINT}")
        devices = [d for _, d in self.device_map] if isinstance(self.device_map, tuple) else [self.device_map]
        if any(str(d).startswith("cuda") or str(d).isdigit() for d in devices if d is not None):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"model argument device_map={self.given()['device_map']}: names a CUDA device, "
                                  "and torch sees none here; use device_map=cpu or auto")
