"""Device and precision: where a model runs, whether it computes in bf16, and the record of both.

Weights are always read in fp32 (`fp32_load_kwargs`); bf16, when used, is autocast, chosen by
`use_bf16`. bf16 and fp32 (or two torch versions) can rank candidates differently, so every
release and report that ran a model says which computed it (`precision_info`).
"""

from __future__ import annotations

import contextlib
import functools
from pathlib import Path

from advrace.models.sharding import process_state


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Without bf16 instructions CPUs emulate it, which is slower than fp32 and less exact."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def use_bf16(requested: bool | None, device) -> bool:
    """True: always; False: never; None: where the device computes in bf16 natively (which
    makes results depend on the hardware)."""
    import torch

    if device.type not in ("cpu", "cuda"):
        return False
    if requested is not None:
        return bool(requested)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return cpu_has_native_bf16()


def inference_device():
    """The device this process runs a model on (its GPU under `accelerate launch`, else the CPU)."""
    return process_state().device


def precision_info(device, bf16: bool) -> dict:
    """What computed a model's outputs: bf16 and fp32 (or two torch versions) can rank candidates
    differently, so a release or a report says which ran."""
    import torch

    return {"precision": "bf16" if bf16 else "fp32", "device_type": torch.device(device).type,
            "torch": torch.__version__}


def fp32_load_kwargs() -> dict:
    """`from_pretrained` keyword arguments that load weights in fp32 whatever they were saved in;
    autocast picks the compute precision."""
    import torch
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": torch.float32}


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
