"""Training with Accelerate: multiple-choice readers (fine-tuning, adversarial training,
option-only probes), span extractors and distractor generators, and objectives of other packages
(training/objectives/: one module each, found through a registry).

`train(config)` runs one training loop for every setting (CPU, one GPU, `accelerate launch`);
`load_config` reads a recipe from configs/train/. Importing the package stays light: torch and
transformers are loaded only when training starts.
"""

from .config import TrainConfig, load_config, train_config_from_dict


def train(config, output_dir=None, resume=False, progress=True) -> dict:
    """Train as `config` (TrainConfig, mapping or YAML path) says; see training.loop.train."""
    from .loop import train as run  # deferred for start-up time: the loop imports torch

    return run(config, output_dir=output_dir, resume=resume, progress=progress)


__all__ = ["TrainConfig", "load_config", "train", "train_config_from_dict"]
