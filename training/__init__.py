"""Training with Accelerate: fine-tuning, adversarial training and option-only probes.

`train(config)` runs one training loop for every setting (CPU, one GPU, `accelerate launch`);
`load_config` reads a recipe from configs/train/. Imports are light: torch and transformers
load only when training starts.
"""

from .config import TrainConfig, config_from_dict, load_config


def train(config, output_dir=None, resume=False, progress=True) -> dict:
    from .loop import train as _train

    return _train(config, output_dir=output_dir, resume=resume, progress=progress)


train.__doc__ = "See training.loop.train."

__all__ = ["TrainConfig", "config_from_dict", "load_config", "train"]
