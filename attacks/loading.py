"""Loading the checkpoint of a model-based attack, with errors that say what to do."""

from __future__ import annotations

from pathlib import Path

from advrace.errors import ConfigError


def load_model(cls, name: str, bf16: bool | None, what: str, train_hint: str):
    """(model in eval mode on the best device, tokenizer, device, use_bf16).

    Weights are read in fp32 (autocast picks the compute precision) and any weights the
    checkpoint lacks are drawn from a fixed seed, so two builds give the same release.
    """
    import torch
    from transformers import AutoTokenizer

    from advrace.evaluation import ModelLoadError, _fp32_kwargs, use_bf16

    path = Path(name).expanduser()
    source = str(path) if path.is_dir() else name
    if not path.is_dir() and (path.exists() or name.startswith((".", "/", "~"))):
        raise ConfigError(f"{what}: no checkpoint folder {name}; make one with {train_hint}")
    try:
        tokenizer = AutoTokenizer.from_pretrained(source)
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = cls.from_pretrained(source, **_fp32_kwargs())
    except (OSError, ValueError, KeyError) as exc:
        reason = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        raise ModelLoadError(f"{what}: cannot load {name} ({reason}); give a folder written by "
                             f"{train_hint}") from exc
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    try:
        from accelerate import PartialState

        device = PartialState().device
    except ImportError:
        pass
    model.to(device).eval()
    return model, tokenizer, device, use_bf16(bf16, device)
