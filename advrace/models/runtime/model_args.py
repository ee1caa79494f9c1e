"""How a decoder LM is loaded: `--model-args` (lm-evaluation-harness's `--model_args`, less
`pretrained=`, which is `--model`), parsed once into a frozen `ModelArgs`.

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
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, fields
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.models.runtime.precision import dtype_load_kwargs

DTYPES = ("auto", "float32", "bfloat16", "float16")
DEVICE_MAP_STRATEGIES = ("auto", "balanced", "balanced_low_0", "sequential")
DEVICE = re.compile(r"(cpu|cuda|mps|xpu|npu|hpu|mlu|musa)(:\d+)?|\d+")
BOOLEANS = {"true": True, "false": False}
HELP = ("dtype=auto|float32|bfloat16|float16, device_map=auto|cpu|cuda:0|..., attn_implementation=eager|sdpa|"
        "flash_attention_2|..., revision=BRANCH|TAG|COMMIT, trust_remote_code=true|false")


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


@dataclass(frozen=True)
class ModelArgs:
    """The load options of a causal LM; see the module doc. Every field is checked when the
    object is made; `bool(args)` says whether any was given."""

    dtype: str | None = None
    device_map: str | tuple | None = None
    attn_implementation: str | None = None
    revision: str | None = None
    trust_remote_code: bool = False

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
        if self.revision is not None and (not isinstance(self.revision, str) or not self.revision.strip()):
            raise _bad("revision", self.revision, "a branch, tag or commit of a Hub model")
        if not isinstance(self.trust_remote_code, bool):
            raise _bad("trust_remote_code", self.trust_remote_code, "true or false")

    # ------------------------------------------------------------------ making one

    @classmethod
    def parse(cls, text: str) -> ModelArgs:
        """`key=value,key=value` as lm-evaluation-harness's --model_args (blanks around either
        are dropped); ConfigError naming the key, the value and what is allowed."""
        values: dict = {}
        names = [f.name for f in fields(cls)]
        for item in (part.strip() for part in str(text).split(",")):
            if not item:
                continue
            key, eq, value = (s.strip() for s in item.partition("="))
            if key == "pretrained":
                raise ConfigError("model argument pretrained: give the model with --model, not in --model-args")
            if key not in names:
                raise ConfigError(f"model argument {item}: unknown key {key!r}; the keys are {', '.join(names)}")
            if not eq or not value:
                raise ConfigError(f"model argument {item}: no value; write {key}=VALUE ({HELP})")
            if key in values:
                raise ConfigError(f"model argument {key} given twice ({key}={values[key]} and {key}={value})")
            if key == "trust_remote_code":
                if value.lower() not in BOOLEANS:
                    raise _bad(key, value, "true or false")
                value = BOOLEANS[value.lower()]
            values[key] = value
        return cls(**values)

    @classmethod
    def coerce(cls, value) -> ModelArgs:
        """A ModelArgs from None (none given), a `key=value,...` string, a dict or a ModelArgs."""
        if value is None:
            return cls()
        if isinstance(value, cls):
            return value
        if isinstance(value, str):
            return cls.parse(value)
        if isinstance(value, Mapping):
            names = [f.name for f in fields(cls)]
            unknown = [k for k in value if k not in names]
            if unknown:
                raise ConfigError(f"model argument(s) {', '.join(map(str, unknown))}: unknown; the keys are "
                                  f"{', '.join(names)}")
            return cls(**value)
        raise ConfigError(f"model args: give a 'key=value,...' string, a dict or a ModelArgs, not {value!r}")

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
        """`AutoTokenizer.from_pretrained` keywords."""
        out: dict = {}
        if self.revision is not None:
            out["revision"] = self.revision
        if self.trust_remote_code:
            out["trust_remote_code"] = True
        return out

    def config_kwargs(self) -> dict:
        """`AutoConfig.from_pretrained` keywords (the same as the tokenizer's)."""
        return self.tokenizer_kwargs()

    def model_kwargs(self) -> dict:
        """`from_pretrained` keywords of the model: the dtype (float32 when unset), and every
        other option given."""
        out = {**dtype_load_kwargs(self.dtype or "float32"), **self.tokenizer_kwargs()}
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
        """What can be told before loading `name`: a revision needs a Hub name (a local folder and
        `builtin`, a name the package resolves itself, have none); a CUDA device needs CUDA; and
        `check_processes`."""
        self.check_processes()
        if self.revision is not None:
            if builtin is not None and name == builtin:
                raise ConfigError(f"model argument revision={self.revision}: {name} is read from an installed "
                                  "package, which has no revisions; leave revision out")
            if Path(name).expanduser().is_dir():
                raise ConfigError(f"model argument revision={self.revision}: {name} is a local folder, which has "
                                  "no revisions (revision names a branch, tag or commit of a Hub model); leave "
                                  "revision out, or check out that revision into the folder")
        devices = [d for _, d in self.device_map] if isinstance(self.device_map, tuple) else [self.device_map]
        if any(str(d).startswith("cuda") or str(d).isdigit() for d in devices if d is not None):
            import torch

            if not torch.cuda.is_available():
                raise ConfigError(f"model argument device_map={self.given()['device_map']}: names a CUDA device, "
                                  "and torch sees none here; use device_map=cpu or auto")
