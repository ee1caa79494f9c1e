"""The `causal_lm` objective (a decoder-only LM fine-tuned on RACE's distractors) and the DG
attack reading its checkpoints: tiny random Llamas, a few steps each."""

import json
import math
from pathlib import Path

import pytest
import torch

from advrace.attacks import get_attack
from advrace.core.errors import ConfigError
from advrace.formats import load
from advrace.models.causal_encoding import IGNORE, collate_causal, prompt_ids, training_features
from conftest import make_race_dir, make_tokenizer, save_tiny_llama, tiny

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("causal")
    race, tok_dir = make_race_dir(root), make_tokenizer(root)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    return {"root": root, "race": race, "tok": tok, "lm": save_tiny_llama(tok, root / "lm"),
            "examples": load(str(race)).examples}


def _config(setup, out: Path, **extra) -> dict:
    section = {"max_passage_tokens": 24, "max_distractor_tokens": 6, **extra.pop("causal_lm", {})}
    extra = {"epochs": 1, "save_every_steps": None, **extra}
    return tiny(setup["tok"].name_or_path, setup["race"], out, objective="causal_lm", model=setup["lm"],
                model_config=None, tokenizer=None, causal_lm=section, **extra)


@pytest.fixture(scope="module")
def trained(setup):
    from advrace.training import train

    # the embeddings too: a tiny random model learns little through two frozen-embedding layers
    return train(_config(setup, setup["root"] / "run", lr=1e-2, epochs=4,
                         causal_lm={"train_embeddings": True}), progress=False)


def test_labels_cover_the_distractor_only(setup):
    tok, examples = setup["tok"], setup["examples"][:3]
    features = training_features(tok, examples, max_passage_tokens=10, max_distractor_tokens=6)
    assert len(features) == 9  # three distractors per question
    prompts = prompt_ids(tok, examples, 10)
    assert [f.prompt for f in features[:3]] == [tuple(prompts[0])] * 3
    assert all(f.target[-1] == tok.sep_token_id for f in features)  # the test tokenizer's EOS
    ex = examples[0]
    assert tok.decode(features[0].target[:-1]) in [d.lower() for d in ex.distractors]
    batch = collate_causal(features[:4], tok.pad_token_id)
    ids, labels, keep = batch["input_ids"], batch["labels"], batch["logits_to_keep"]
    assert labels.shape == (4, keep) and keep == max(len(f.target) for f in features[:4]) + 1
    for row, f in enumerate(features[:4]):
        scored = labels[row] != IGNORE
        assert scored.sum() == len(f.target)  # no prompt or padding token is scored
        assert labels[row][scored].tolist() == list(f.target) == ids[row, -len(f.target):].tolist()
        pads = ids.shape[1] - f.length
        assert batch["attention_mask"][row].tolist() == [0] * pads + [1] * f.length
        assert batch["position_ids"][row, pads:].tolist() == list(range(f.length))


def test_one_distractor_per_question_is_drawn_by_seed(setup):
    tok, examples = setup["tok"], setup["examples"]
    one = training_features(tok, examples, 10, 6, per_question=1, seed=1)
    assert len(one) == len(examples)
    assert one == training_features(tok, examples, 10, 6, per_question=1, seed=1)
    drawn = lambda seed: [f.target for f in training_features(tok, examples, 10, 6, 1, seed)]  # noqa: E731
    assert len({tuple(drawn(s)) for s in range(6)}) > 1


def test_logits_only_where_the_distractor_is(setup):
    """The loss of the loop's batch equals a full forward's loss on the distractor tokens."""
    from transformers import AutoModelForCausalLM

    tok = setup["tok"]
    model = AutoModelForCausalLM.from_pretrained(setup["lm"]).eval()
    features = training_features(tok, setup["examples"][:2], 12, 6)[:3]
    batch = collate_causal(features, tok.pad_token_id)
    with torch.no_grad():
        out = model(**batch)
        assert out.logits.shape[1] == batch["logits_to_keep"]
        losses = []
        for f in features:
            ids = torch.tensor([f.prompt + f.target])
            logits = model(input_ids=ids).logits[0, len(f.prompt) - 1:-1]
            losses.append(torch.nn.functional.cross_entropy(logits, torch.tensor(f.target), reduction="sum"))
    n = sum(len(f.target) for f in features)
    assert out.loss.item() == pytest.approx((sum(losses) / n).item(), rel=1e-4)


def test_trainable_layers_freezes_the_rest(setup):
    from advrace.training.objectives.causal_lm import TopLayersCausalLM
    from advrace.training.objectives.causal_lm import CausalLMSettings as S

    model = TopLayersCausalLM(S(trainable_layers=1)).from_pretrained(setup["lm"])
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trainable)
    assert "model.norm.weight" in trainable and not any(n.startswith("model.layers.0.") for n in trainable)
    every = TopLayersCausalLM(S(trainable_layers=0)).from_pretrained(setup["lm"])
    trainable = {n for n, p in every.named_parameters() if p.requires_grad}
    assert any(n.startswith("model.layers.0.") for n in trainable)
    assert not trainable & {"model.embed_tokens.weight", "lm_head.weight"}
    embed = TopLayersCausalLM(S(trainable_layers=1, train_embeddings=True)).from_pretrained(setup["lm"])
    trainable = {n for n, p in embed.named_parameters() if p.requires_grad}
    assert {"model.embed_tokens.weight", "lm_head.weight"} <= trainable
    assert not any(n.startswith("model.layers.0.") for n in trainable)


def test_training_changes_only_the_top_layers(setup, tmp_path):
    from safetensors.torch import load_file

    from advrace.training import train

    result = train(_config(setup, tmp_path, max_steps=2, causal_lm={"trainable_layers": 1}), progress=False)
    before = load_file(str(Path(setup["lm"]) / "model.safetensors"))
    after = load_file(str(Path(result["final"]) / "model.safetensors"))
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith(("model.layers.1.", "model.norm.")) for k in changed)


def test_objective_learns_and_saves_a_loadable_checkpoint(setup, trained):
    from transformers import AutoModelForCausalLM

    log = [json.loads(line) for line in Path(trained["log"]).read_text().splitlines()]
    losses = [r["loss"] for r in log if r["event"] == "train"]
    assert len(losses) >= 4 and losses[-1] < losses[0]
    evals = [r for r in log if r["event"] == "eval"]
    assert evals[-1]["dev_token_accuracy"] > evals[0]["dev_token_accuracy"]
    assert evals[-1]["dev_loss"] < evals[0]["dev_loss"] and math.isfinite(evals[-1]["dev_loss"])
    final = Path(trained["final"])
    info = json.loads((final / "training_info.json").read_text())
    assert info["objective"] == "causal_lm" and info["architecture"] == "AutoModelForCausalLM"
    assert info["config"]["causal_lm"]["max_passage_tokens"] == 24
    model = AutoModelForCausalLM.from_pretrained(final)
    assert type(model).__name__ == "LlamaForCausalLM"


def test_dg_reads_its_backend_from_the_checkpoint(setup, trained):
    examples = setup["examples"][:4]
    attack = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 4,
                                                  "max_target_tokens": 5})
    cfg = attack.config
    assert cfg.backend == "causal_lm" and cfg.max_passage_tokens == 24  # the training run's
    cands = attack.candidates(examples)
    assert len(cands) == 4 and all(1 <= len(c) <= 4 and all(isinstance(t, str) and t for t in c) for c in cands)
    # trained on these very questions, the generator's first candidates are RACE's distractors
    hits = sum(bool({c.lower() for c in cs} & {d.lower() for d in ex.distractors})
               for cs, ex in zip(cands, examples))
    assert hits >= 2
    again = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 4,
                                                 "max_target_tokens": 5})
    assert again.candidates(examples) == cands  # deterministic
    outcomes = attack.apply_batch(examples)
    assert [o.example.answer for o in outcomes] == [ex.answer for ex in examples]
    assert attack.describe()["config"]["backend"] == "causal_lm"
    assert attack.describe()["config"]["beam_size"] == 4


def test_dg_backend_defaults(setup, trained, tmp_path):
    make = lambda **c: get_attack("distractor_generation")(c)  # noqa: E731
    assert make(model=setup["lm"]).config.backend == "causal_lm"  # a causal LM folder, nothing recorded
    assert make(model=setup["lm"]).config.beam_size == 10
    assert make(model=setup["lm"]).config.max_passage_tokens == 400
    assert make(model="smollm2").config.backend == "causal_lm"
    assert make(model="HuggingFaceTB/SmolLM2-360M-Instruct").config.backend == "causal_lm"
    assert make(model=str(tmp_path / "runs" / "dg" / "final")).config.backend == "unilm"
    assert make(model=trained["final"], max_passage_tokens=8).config.max_passage_tokens == 8
    with pytest.raises(ConfigError, match="backend 'causal_lm'"):
        make(model=trained["final"], backend="unilm")
    with pytest.raises(ConfigError, match="objective 'causal_lm'"):
        get_attack("distractor_extraction")({"model": trained["final"]})


@pytest.mark.parametrize("bf16", [pytest.param(False, id="fp32"), pytest.param(True, id="bf16")])
def test_bf16_on_and_off(setup, trained, bf16):
    from advrace.training import train

    result = train(_config(setup, setup["root"] / f"mp-{bf16}", max_steps=2,
                           mixed_precision="bf16" if bf16 else "no"), progress=False)
    metrics = result["metrics"]
    assert metrics["step"] == 2 and math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["dev_loss"])
    examples = setup["examples"][:2]
    attack = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 3,
                                                  "max_target_tokens": 4, "bf16": bf16})
    cands = attack.candidates(examples)
    assert attack._bf16 is bf16 and attack.describe()["inference"]["precision"] == ("bf16" if bf16 else "fp32")
    assert all(1 <= len(c) <= 3 for c in cands)
