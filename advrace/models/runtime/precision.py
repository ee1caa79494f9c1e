"""Device and precision: where a model runs, whether it computes in bf16, and the record of both.

Weights are read in fp32 (`fp32_load_kwargs`) unless a causal LM's model args ask for another
dtype (advrace.models.runtime.model_args); bf16, when used on fp32 weights, is autocast, chosen by
`use_bf16`. bf16 and fp32 (or two torch versions) can rank candidates differently, so every
release and report that ran a model says which computed it (`precision_info`).

A CPU without bf16 instructions still runs bf16 autocast, emulated: several times slower than
fp32 (bench/evaluate_throughput.py --bf16-vs-fp32 measures it). "auto" never picks it there;
asking for it warns once per process (`warn_if_emulated`, the one place that says so) and the
record says `bf16_emulated`.
"""

from __future__ import annotations

import contextlib
import functools
import sys
from pathlib import Path

from advrace.models.runtime.sharding import process_state


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Without bf16 instructions CPUs emulate it, which is slower than fp32 and less exact."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def bf16_emulated(device, bf16: bool) -> bool:
    """Whether `bf16` compute on `device` is emulated: bf16 on a CPU without bf16 instructions."""
    import torch

    return bool(bf16) and torch.device(device).type == "cpu" and not cpu_has_native_bf16()


# The advice of the warning, by who asked: a model's `bf16` setting (attacks, evaluation) by default.
BF16_SETTING = "set bf16: false (or leave it unset/null: auto picks fp32 on this CPU)"
_warned_emulated = False


def warn_if_emulated(device, bf16: bool, advice: str = BF16_SETTING) -> None:
    """Say once per process, on stderr, that the bf16 asked for is emulated on this CPU. Every
    path that turns bf16 on by request (`use_bf16`, training's mixed_precision) comes here."""
    global _warned_emulated
    if _warned_emulated or not bf16_emulated(device, bf16):
        return
    _warned_emulated = True
    print("warning: bf16 was asked for, but this CPU has no native bf16 (no avx512_bf16 or amx_bf16): "
          "torch emulates it, typically several times slower than fp32 and less exact; "
          f"{advice}", file=sys.stderr, flush=True)


def use_bf16(requested: bool | None, device) -> bool:
    """True: always; False: never; None: where the device computes in bf16 natively (which
    makes results depend on the hardware). True on a CPU that would emulate bf16 warns once."""
    import torch

    if device.type not in ("cpu", "cuda"):
        return False
    if requested is not None:
        warn_if_emulated(device, bool(requested))
        return bool(requested)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return cpu_has_native_bf16()


def inference_device():
    """The device this process runs a model on (its GPU under `accelerate launch`, else the CPU)."""
    return process_state().device


def precision_info(device, bf16: bool, weights=None) -> dict:
    """What computed a model's outputs: bf16 and fp32 (or two torch versions) can rank candidates
    differently, so a release or a report says which ran; `bf16_emulated: true` where bf16 ran
    without native support (the key is absent otherwise, so fp32 records are as they were).

    `weights`: the torch dtype of the weights. Weights loaded in bf16 or fp16 (a causal LM's
    `dtype` model argument) compute in that dtype without autocast: the precision says so, and
    `weights` names their dtype (absent for fp32 weights, so those records are as they were)."""
    import torch

    half = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    precision = "bf16" if bf16 else half.get(weights, "fp32")
    info = {"precision": precision, "device_type": torch.device(device).type, "torch": torch.__version__}
    if weights is not None and weights != torch.float32:
        info["weights"] = str(weights).removeprefix("torch.")
    if bf16_emulated(device, precision == "bf16"):
        info["bf16_emulated"] = True
    return info


def fp32_load_kwargs() -> dict:
    """`from_pretrained` keyword arguments that load weights in fp32 whatever they were saved in;
    autocast picks the compute precision."""
    return dtype_load_kwargs("float32")


def dtype_load_kwargs(dtype: str) -> dict:
    """`from_pretrained` keyword arguments that load weights in `dtype` ("auto": the checkpoint's
    own; else a torch dtype's name, "bfloat16"), under the keyword the installed Transformers
    takes (`dtype` since 4.56, `torch_dtype` before)."""
    import torch
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": dtype if dtype == "auto" else getattr(torch, dtype)}


def attention_backends(device):
    """On CUDA, attention without cuDNN's kernel: it builds a plan for every new sequence length
    (about 0.1 s each on an H100), which batches padded to their own length would pay again and
    again. Flash and memory-efficient attention have no such cost."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])
