"""Builds the golden releases: what tests/golden/regenerate.py writes and tests/test_golden.py checks.

One code path for both, so that a golden file differs from a fresh build only when advrace's
output changed. The inputs are the first questions of the bundled sample; the model-based
attacks query tiny random models, made from a config under a fixed torch seed at every run
rather than stored here.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
from dataclasses import dataclass
from pathlib import Path

from advrace.attacks import attack_classes, canonical_name, get_attack
from advrace.core.config import release_config_from_dict
from advrace.release import build_release, split_file

GOLDEN = Path(__file__).resolve().parent
ENVIRONMENT = GOLDEN / "environment.json"
LIMIT = 8
SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def release_configs(models: dict[str, str], workers: int = 1) -> dict[str, dict]:
    """Task -> release config: every attack of that task, with settings small enough for seconds.
    A rule-based attack not named below joins with its default config, so a new one needs no
    edit here; a model-based one needs its model and settings named."""
    configs = _named_configs(models, workers)
    for task, cfg in configs.items():
        named = {canonical_name(s if isinstance(s, str) else s["attack"], task) for s in cfg["splits"]}
        cfg["splits"] += sorted(cls.name for cls in attack_classes()
                                if task in cls.tasks and not cls.batched and cls.name not in named)
    return configs


def _named_configs(models: dict[str, str], workers: int) -> dict[str, dict]:
    return {
        "multiple_choice": {
            "name": "golden-race", "data": {"path": "@sample/race", "limit": LIMIT}, "seed": 2021,
            "workers": workers,
            "splits": [
                "charswap", "addsent", "diagnosis", "option_only",
                {"attack": "distractor_extraction",
                 "config": {"model": models["qa"], "shuffle": True, "max_length": 96, "doc_stride": 32,
                            "max_answer_tokens": 8, "batch_size": 8}},
                {"attack": "distractor_generation",
                 "config": {"model": models["unilm"], "beam_size": 4, "max_target_tokens": 4,
                            "max_source_length": 96, "batch_size": 8}},
                {"attack": "distractor_generation", "name": "distractor_generation_causal_lm",
                 "config": {"backend": "causal_lm", "model": models["lm"], "beam_size": 3,
                            "max_target_tokens": 3, "max_passage_tokens": 40}},
            ]},
        "extractive_qa": {
            "name": "golden-squad", "data": {"path": "@sample/squad", "limit": LIMIT}, "seed": 2017,
            "workers": workers,
            "splits": [
                "charswap", "addonesent", "addsentmod",
                {"attack": "addsent", "config": {"model": models["qa"], "max_length": 96}},
                {"attack": "addany", "config": {"model": models["qa"], "max_length": 96, "length": 3,
                                                "epochs": 2, "candidates": 3, "restart_after": 1,
                                                "restarts": 1}},
                {"attack": "addcommon", "config": {"model": models["qa"], "max_length": 96, "length": 3,
                                                   "epochs": 1, "candidates": 3}},
            ]},
    }


def split_name(spec) -> str:
    return spec if isinstance(spec, str) else spec.get("name") or spec["attack"]


def is_model_based(task: str, spec) -> bool:
    return get_attack(spec if isinstance(spec, str) else spec["attack"], task).batched


def golden_names() -> list[tuple[str, str]]:
    """(task, split) of every golden file, `original` included, for test ids."""
    configs = release_configs({"qa": "", "unilm": "", "lm": ""})
    return [(task, split) for task, cfg in configs.items()
            for split in ["original"] + [split_name(s) for s in cfg["splits"]]]


def golden_file(task: str, split: str) -> Path:
    return GOLDEN / task / f"{split}.jsonl"


# --------------------------------------------------------------------------- tiny models


def _sample_words() -> list[str]:
    """Every word of the bundled sample. The conftest tokenizer knows only the conftest passage:
    on the sample it would read almost nothing but [UNK], and the goldens would not see the text."""
    def strings(obj):
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for value in obj.values():
                yield from strings(value)
        elif isinstance(obj, list):
            for value in obj:
                yield from strings(value)

    words = set()
    for name in ("@sample/race", "@sample/squad"):
        root = Path(release_config_from_dict({"data": {"path": name}}).data.resolved_path())
        for path in sorted(p for p in ([root] if root.is_file() else root.rglob("*")) if p.is_file()):
            for text in strings(json.loads(path.read_text(encoding="utf-8"))):
                words.update(re.findall(r"[a-z]+", text.lower()))
    return sorted(words)


def make_models(folder: Path, positions: int = 256) -> dict[str, str]:
    """A WordPiece tokenizer over the sample's words and three random checkpoints using it: a span
    extractor (DE and the SQuAD adversaries), a UniLM generator and a causal LM (DG's backends).
    Each is drawn under torch seed 0, so every build gives the same files; `positions` is the
    longest input the BERT ones read."""
    import torch
    from transformers import BertConfig, BertForQuestionAnswering, BertTokenizerFast, LlamaConfig, LlamaForCausalLM

    from advrace.models.generators.unilm import UniLMSeq2Seq

    folder.mkdir(parents=True, exist_ok=True)
    vocab = folder / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + list("0123456789.,?!_'\"-") + _sample_words()) + "\n", encoding="utf-8")
    tok = BertTokenizerFast(str(vocab))
    bert = dict(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=64, max_position_embeddings=positions, initializer_range=0.2)
    llama = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                        bos_token_id=tok.cls_token_id, eos_token_id=tok.sep_token_id,
                        pad_token_id=tok.pad_token_id)
    models = {}
    for name, make in (("qa", lambda: BertForQuestionAnswering(BertConfig(**bert))),
                       ("unilm", lambda: UniLMSeq2Seq(BertConfig(**bert))),
                       ("lm", lambda: LlamaForCausalLM(llama))):
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            model = make()
        model.save_pretrained(folder / name)
        tok.save_pretrained(folder / name)
        models[name] = str(folder / name)
    return models


# --------------------------------------------------------------------------- building


@contextlib.contextmanager
def fixed_compute():
    """Models on the CPU with one thread: the goldens are CPU's, and a tiny model gains nothing
    from threads. Restores both settings afterwards."""
    import torch

    threads, cpu = torch.get_num_threads(), os.environ.get("ACCELERATE_USE_CPU")
    torch.set_num_threads(1)
    os.environ["ACCELERATE_USE_CPU"] = "true"
    try:
        yield
    finally:
        torch.set_num_threads(threads)
        if cpu is None:
            os.environ.pop("ACCELERATE_USE_CPU", None)
        else:
            os.environ["ACCELERATE_USE_CPU"] = cpu


@dataclass
class Built:
    files: dict[tuple[str, str], bytes]  # (task, split) -> the split's file as the release wrote it
    manifests: dict[str, dict]  # task -> manifest
    models: dict[str, str]  # name -> checkpoint folder


def build(root: Path, workers: int = 1, rule_based_only: bool = False) -> Built:
    """Every golden release under `root`; with `rule_based_only`, no models and no model splits."""
    root = Path(root)
    models = {"qa": "", "unilm": "", "lm": ""} if rule_based_only else make_models(root / "models")
    files, manifests = {}, {}
    with fixed_compute():
        for task, cfg in release_configs(models, workers).items():
            if rule_based_only:
                cfg = {**cfg, "splits": [s for s in cfg["splits"] if not is_model_based(task, s)]}
            out = root / task
            manifests[task] = build_release(release_config_from_dict(cfg), out)
            for split in manifests[task]["splits"]:
                files[task, split] = (out / split_file(split)).read_bytes()
    return Built(files, manifests, models)


def environment(built: Built) -> dict:
    """What the goldens depend on besides advrace: named in a failure's message when it differs."""
    import torch
    import transformers

    from advrace.models.runtime.checkpoint_info import checkpoint_sha256

    return {
        "torch": torch.__version__,
        "transformers": transformers.__version__,
        "resources": {task: m["resources"] for task, m in sorted(built.manifests.items())},
        "checkpoints": {name: checkpoint_sha256(path) for name, path in sorted(built.models.items())},
    }
