"""Loading the checkpoint of a model-based attack or scorer, with errors that say what to do."""

from __future__ import annotations

from pathlib import Path

from advrace.core.errors import ConfigError


HEADS = ("ForMultipleChoice", "ForQuestionAnswering", "ForSequenceClassification",
         "ForTokenClassification", "ForMaskedLM", "ForCausalLM", "LMHeadModel", "UniLMSeq2Seq")


def _wanted_head(cls) -> tuple[str, ...]:
    name = cls.__name__
    if name == "UniLMSeq2Seq":
        return ("UniLMSeq2Seq",)
    if "CausalLM" in name:
        return ("ForCausalLM", "LMHeadModel")
    return tuple(h for h in HEADS if name.endswith(h))


def check_head(cls, path: Path, what: str, train_hint: str) -> None:
    """Refuse a checkpoint trained with another head (a reader where a span model is wanted, say):
    loading it would silently put a random head on top. A bare encoder is fine."""
    import json

    config = path / "config.json"
    if not config.is_file():
        return
    try:
        archs = json.loads(config.read_text(encoding="utf-8")).get("architectures") or []
    except (OSError, json.JSONDecodeError):
        return
    wanted = _wanted_head(cls)
    heads = [a for a in archs if any(a.endswith(h) for h in HEADS)]
    if wanted and heads and not any(a.endswith(w) for a in heads for w in wanted):
        raise ConfigError(f"{what}: {path} holds a {heads[0]} model, not the {' or '.join(wanted)} "
                          f"model needed here; give a folder written by {train_hint}")


def _cpu_has_native_bf16() -> bool:
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
    return _cpu_has_native_bf16()


def inference_device():
    """The device this process runs a model on (its GPU under `accelerate launch`, else the CPU)."""
    from advrace.models.sharding import process_state

    return process_state().device


def precision_info(device, bf16: bool) -> dict:
    """What computed a model's outputs: bf16 and fp32 (or two torch versions) can rank candidates
    differently, so a release or a report says which ran."""
    import torch

    return {"precision": "bf16" if bf16 else "fp32", "device_type": torch.device(device).type,
            "torch": torch.__version__}


def load_model(cls, name: str, bf16: bool | None, what: str, train_hint: str):
    """(model in eval mode on the best device, tokenizer, device, use_bf16).

    Weights are read in fp32 (autocast picks the compute precision) and any weights the
    checkpoint lacks are drawn from a fixed seed, so two builds give the same release.
    """
    import torch
    from transformers import AutoTokenizer

    from advrace.evaluation import ModelLoadError, _fp32_kwargs

    path = Path(name).expanduser()
    source = str(path) if path.is_dir() else name
    if not path.is_dir() and (path.exists() or name.startswith((".", "/", "~"))):
        raise ConfigError(f"{what}: no checkpoint folder {name}; make one with {train_hint}")
    if path.is_dir():
        check_head(cls, path, what, train_hint)
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = cls.from_pretrained(source, **_fp32_kwargs())
    except (OSError, ValueError, KeyError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"{what}: cannot load {name} ({reason}); give a folder written by "
                             f"{train_hint}") from exc
    device = inference_device()
    model.to(device).eval()
    return model, tokenizer, device, use_bf16(bf16, device)
