"""Resumable checkpoints and saved models inside a run's output folder.

OUTPUT/checkpoints/step-N holds accelerate's state (weights, optimizer, scheduler, every
process's RNG states) and trainer_state.json (where in the data the run was, the best dev score
so far, how many log lines belong to the run up to here). A checkpoint is written under a
temporary name and renamed when complete, so a run killed while saving leaves only whole ones.
"""

from __future__ import annotations

import json
import re
import shutil
from dataclasses import asdict, dataclass, field
from pathlib import Path

from advrace.models.runtime.checkpoint_info import TRAINING_INFO

STATE_FILE = "trainer_state.json"
_STEP_DIR = re.compile(r"^step-(\d+)$")


@dataclass
class TrainerState:
    step: int = 0  # optimizer steps done
    epoch: int = 0  # the epoch in progress
    batch: int = 0  # batches of that epoch already seen by this process
    best: dict | None = None  # {"step", "epoch", "dev_accuracy"} of OUTPUT/best
    log_lines: int = 0
    pending_losses: list = field(default_factory=list)  # step losses not yet in a log record
    lr: float | None = None  # of the last step
    processes: int = 1
    plan: dict = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2, sort_keys=True) + "\n"


def checkpoints(output_dir: Path) -> list[tuple[int, Path]]:
    """Complete checkpoints, oldest first."""
    root = Path(output_dir) / "checkpoints"
    found = []
    if root.is_dir():
        for p in root.iterdir():
            m = _STEP_DIR.match(p.name)
            if m and (p / STATE_FILE).is_file():
                found.append((int(m.group(1)), p))
    return sorted(found)


def latest(output_dir: Path) -> Path | None:
    found = checkpoints(output_dir)
    return found[-1][1] if found else None


def read_state(path: Path) -> TrainerState:
    return TrainerState(**json.loads((Path(path) / STATE_FILE).read_text(encoding="utf-8")))


def save(accelerator, output_dir: Path, state: TrainerState, keep: int | None) -> Path:
    """Every process calls this; accelerate writes each process's RNG state itself."""
    root = Path(output_dir) / "checkpoints"
    final = root / f"step-{state.step}"
    tmp = root / f".step-{state.step}.tmp"
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        root.mkdir(parents=True, exist_ok=True)
    accelerator.wait_for_everyone()
    accelerator.save_state(str(tmp))
    accelerator.wait_for_everyone()
    if accelerator.is_main_process:
        (tmp / STATE_FILE).write_text(state.to_json(), encoding="utf-8")
        shutil.rmtree(final, ignore_errors=True)
        tmp.rename(final)
        if keep:
            for _, old in checkpoints(output_dir)[:-keep]:
                shutil.rmtree(old, ignore_errors=True)
    accelerator.wait_for_everyone()
    return final


def restore(accelerator, path: Path) -> None:
    """Load the weights, optimiser, scheduler and RNG states saved in `path` into what
    `accelerator` has prepared; its trainer state is `read_state(path)`."""
    accelerator.load_state(str(path))


def save_tokenizer(tokenizer, folder: Path) -> None:
    """`save_pretrained` without the truncation and padding that the last call left on a fast
    tokenizer: that state depends on which encoding ran last (none, when the feature cache was
    warm), and would make the same training give checkpoints of different sha256. Every call sets
    its own truncation and padding, so clearing them changes no encoding."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        backend.no_truncation()
        backend.no_padding()
    tokenizer.save_pretrained(folder)


def save_model(accelerator, model, tokenizer, path: Path, info: dict) -> None:
    """A from_pretrained-loadable model and tokenizer, replacing `path` only once complete."""
    path = Path(path)
    tmp = path.with_name(f".{path.name}.tmp")
    state_dict = accelerator.get_state_dict(model)
    if accelerator.is_main_process:
        shutil.rmtree(tmp, ignore_errors=True)
        accelerator.unwrap_model(model).save_pretrained(tmp, state_dict=state_dict,
                                                        save_function=accelerator.save)
        save_tokenizer(tokenizer, tmp)
        (tmp / TRAINING_INFO).write_text(json.dumps(info, indent=2, sort_keys=True) + "\n",
                                                encoding="utf-8")
        shutil.rmtree(path, ignore_errors=True)
        tmp.rename(path)
    accelerator.wait_for_everyone()
