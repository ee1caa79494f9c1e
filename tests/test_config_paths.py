"""Relative paths in a config file are read from the file's folder; those on the command line
(`--data`, `--set`, `--output-dir`, `--out`) from the shell's. Checked from a working directory
that is not the config's, with small data and models made here."""

import json
import shutil
from pathlib import Path

import pytest
import yaml

from advrace.cli import main
from advrace.core.config import load_config
from advrace.core.errors import ConfigError
from advrace.core.paths import DATA, MODEL, PATH, looks_like_model_name, missing_paths, named_path, resolve
from conftest import make_race_dir, make_tokenizer

REPO = Path(__file__).resolve().parents[1]
TINY_MODEL = {"model_type": "bert", "vocab_size": 128, "hidden_size": 32, "num_hidden_layers": 2,
              "num_attention_heads": 2, "intermediate_size": 64, "max_position_embeddings": 128}


def _write(path: Path, values: dict) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump(values, sort_keys=False), encoding="utf-8")
    return path


@pytest.fixture
def elsewhere(tmp_path, monkeypatch) -> Path:
    """A working directory that is neither the config's folder nor above it."""
    cwd = tmp_path / "elsewhere"
    cwd.mkdir()
    monkeypatch.chdir(cwd)
    return cwd


# --------------------------------------------------------------------------- the rule


def test_what_counts_as_a_path(tmp_path):
    folder = str(tmp_path / "configs")
    (tmp_path / "configs" / "owner" / "local").mkdir(parents=True)
    assert resolve("../runs/de/final", folder, MODEL) == str(tmp_path / "runs" / "de" / "final")
    assert resolve("./de", folder, MODEL) == str(tmp_path / "configs" / "de")
    assert resolve("a/b/c", folder, MODEL) == str(tmp_path / "configs" / "a" / "b" / "c")
    assert resolve("owner/local", folder, MODEL) == str(tmp_path / "configs" / "owner" / "local")  # it exists there
    assert resolve("owner/model", folder, MODEL) == str(tmp_path / "configs" / "owner" / "model")  # owner is here
    for name in ("bert-base-uncased", "roberta-large", "org/model", "minilm", "smollm2", "sliding-window",
                 "sliding-window:distance", "similarity", "similarity:minilm"):
        assert resolve(name, folder, MODEL) == name, name
    assert resolve("similarity:../enc", folder, MODEL) == f"similarity:{tmp_path / 'enc'}"
    for fixed in ("/abs/model", "~/models/de", "@sample/race", "", None, 3):
        assert resolve(fixed, folder, MODEL) == fixed and resolve(fixed, folder, PATH) == fixed
    assert resolve("ehovy/race", folder, DATA) == "ehovy/race"
    assert resolve("rajpurkar/squad:plain_text", folder, DATA) == "rajpurkar/squad:plain_text"
    assert resolve("RACE/test", folder, PATH) == str(tmp_path / "configs" / "RACE" / "test")
    assert resolve("dev.json", folder, DATA) == str(tmp_path / "configs" / "dev.json")
    assert resolve("runs/x", None, PATH) == "runs/x"  # a command-line value stays as given
    assert named_path("bert-base-uncased", MODEL) is None and named_path("runs/de/final", MODEL) == "runs/de/final"
    # an ensemble of readers: each part read on its own
    assert resolve("similarity, ../runs/mc", folder, MODEL) == f"similarity,{tmp_path / 'runs' / 'mc'}"
    from advrace.core.paths import missing_paths

    assert missing_paths({"select_with": f"similarity,{tmp_path / 'runs' / 'mc'}"}) == [
        ("select_with", str(tmp_path / "runs" / "mc"), MODEL)]


def test_bundled_configs_name_the_repository_paths_from_any_folder(elsewhere):
    cfg = load_config(str(REPO / "configs" / "release" / "sample.yaml"))
    models = {s.split: s.config["model"] for s in cfg.splits if "model" in s.config}
    assert models == {"distractor_extraction": str(REPO / "runs" / "de-sample" / "final"),
                      "distractor_generation": str(REPO / "runs" / "dg-sample" / "final")}
    assert "select_with" not in cfg.splits[-1].config  # DG's default ensemble of the built-in readers
    assert load_config(str(REPO / "configs" / "release" / "race-test.yaml")).data.path == str(REPO / "RACE" / "test")
    assert cfg.data.path == "@sample/race"


def test_loading_a_config_by_a_relative_name_keeps_paths_relative(monkeypatch):
    monkeypatch.chdir(REPO)
    cfg = load_config("configs/release/sample.yaml")
    assert [s.config["model"] for s in cfg.splits if "model" in s.config] == ["runs/de-sample/final",
                                                                            "runs/dg-sample/final"]


def test_owner_name_is_a_path_when_a_folder_of_that_owner_is_here(tmp_path, monkeypatch):
    """`runs/dg` beside `runs/` is a run not trained yet, not a Hub id; `org/name` with no `org`
    folder stays a Hub id (nothing here downloads)."""
    (tmp_path / "configs" / "runs").mkdir(parents=True)
    folder = str(tmp_path / "configs")
    assert resolve("runs/dg", folder, MODEL) == str(tmp_path / "configs" / "runs" / "dg")
    assert resolve("org/name", folder, MODEL) == "org/name"
    monkeypatch.chdir(tmp_path / "configs")
    assert not looks_like_model_name("runs/dg") and looks_like_model_name("org/name")
    assert looks_like_model_name("runs/dg", str(tmp_path)) and not looks_like_model_name("runs/dg", folder)
    assert missing_paths({"model": "runs/dg", "select_with": "org/reader"}) == [("model", "runs/dg", MODEL)]


def test_a_run_not_trained_yet_is_reported_missing_with_how_to_train_it(tmp_path, monkeypatch, capsys):
    (tmp_path / "runs" / "de").mkdir(parents=True)
    config = _write(tmp_path / "release.yaml", {"data": {"path": "nowhere"}, "splits": [
        {"attack": "distractor_generation", "config": {"model": "runs/dg"}}]})
    monkeypatch.chdir(tmp_path / "runs")  # the config's folder is not the shell's
    assert main(["build", str(config), "--out", "out"]) == 2
    err = capsys.readouterr().err
    assert f"model {tmp_path / 'runs' / 'dg'}: no such folder; train it with `advrace train " \
           f"configs/train/dg-cpu.yaml --output-dir {tmp_path / 'runs' / 'dg'}`" in err
    monkeypatch.chdir(tmp_path)
    assert main(["build", "--data", "nowhere", "--attacks", "distractor_generation", "--out", "out",
                 "--set", "splits.distractor_generation.model=runs/dg"]) == 2
    assert "model runs/dg: no such folder; train it with" in capsys.readouterr().err


def test_the_loader_reports_a_run_not_trained_yet_without_asking_the_hub(tmp_path, monkeypatch):
    from advrace.attacks import get_attack
    from advrace.core.examples import MCExample

    (tmp_path / "runs").mkdir()
    monkeypatch.chdir(tmp_path)
    assert get_attack("distractor_generation")({"model": "org/name"}).config.backend == "causal_lm"  # a Hub id
    attack = get_attack("distractor_generation")({"model": "runs/dg"})
    ex = MCExample(id="q", passage="Tom walked home.", question="Where did Tom walk?",
                   options=("home", "to school", "to the park", "to town"), label=0)
    with pytest.raises(ConfigError, match=r"no checkpoint folder runs/dg; make one with `advrace train "
                                          r"configs/train/dg-cpu.yaml`"):
        attack.apply_batch([ex])


# --------------------------------------------------------------------------- releases


@pytest.fixture
def project(tmp_path, span_model) -> Path:
    """A project folder: data, a span checkpoint and configs in their own folders."""
    root = tmp_path / "project"
    race = make_race_dir(root / "data")  # data/RACE/test
    assert race == root / "data" / "RACE" / "test"
    shutil.copytree(span_model, root / "models" / "de")
    return root


def test_a_release_config_reads_its_data_and_model_from_its_folder(project, elsewhere):
    config = _write(project / "configs" / "release.yaml", {
        "name": "relative", "seed": 3, "workers": 1, "audit": False,
        "data": {"path": "../data/RACE/test", "format": "race-dir"},
        "splits": ["charswap", {"attack": "distractor_extraction",
                                "config": {"model": "../models/de", "max_length": 64, "doc_stride": 16,
                                           "max_answer_tokens": 8, "batch_size": 4, "max_answer_cosine": None}}]})
    assert main(["build", str(config), "--out", "out", "--quiet"]) == 0
    manifest = json.loads((elsewhere / "out" / "manifest.json").read_text())
    assert manifest["source"]["kept"] == 7
    assert manifest["splits"]["distractor_extraction"]["config"]["model"] == "models/de"
    # the manifest's copy of the config names the checkpoint as its split does, not by where it sat
    assert manifest["config"]["splits"][1]["config"]["model"] == "models/de"
    assert main(["verify", "out"]) == 0


def test_a_missing_model_fails_before_any_data_is_read(project, elsewhere, capsys, monkeypatch):
    import advrace.release.build as build

    def no_reading(*args, **kwargs):
        raise AssertionError("data read before the config's paths were checked")

    monkeypatch.setattr(build, "load", no_reading)
    config = _write(project / "configs" / "release.yaml", {
        "data": {"path": "../data/RACE/test"},
        "splits": ["charswap", {"attack": "distractor_extraction", "config": {"model": "../runs/de-sample/final"}}]})
    assert main(["build", str(config), "--out", "out"]) == 2
    err = capsys.readouterr().err
    missing = project / "runs" / "de-sample" / "final"
    assert f"{config}: split 'distractor_extraction': model {missing}: no such folder" in err
    assert f"--output-dir {project / 'runs' / 'de-sample'}" in err  # what to do
    assert not (elsewhere / "out").exists()

    cfg = load_config(str(config))
    from advrace.release.runner import check_splits
    with pytest.raises(ConfigError, match="no such folder"):
        check_splits(cfg)


def test_a_missing_resource_file_fails_before_any_data_is_read(project, elsewhere, capsys):
    config = _write(project / "configs" / "release.yaml", {
        "data": {"path": "../data/RACE/test"}, "resources": {"glove_path": "glove.txt"}, "splits": ["charswap"]})
    assert main(["build", str(config), "--out", "out"]) == 2
    assert f"resources.glove_path {project / 'configs' / 'glove.txt'}: no such file" in capsys.readouterr().err


def test_data_on_the_command_line_is_read_from_the_current_folder(project, monkeypatch):
    config = _write(project / "configs" / "rule.yaml", {"data": {"path": "../nowhere"}, "seed": 1,
                                                        "splits": ["charswap"]})
    monkeypatch.chdir(project)
    assert main(["build", str(config), "--data", "data/RACE/test", "--out", "out", "--quiet"]) == 0
    assert json.loads((project / "out" / "manifest.json").read_text())["source"]["kept"] == 7


def test_a_split_setting_on_the_command_line_is_read_from_the_current_folder(project, monkeypatch):
    from advrace.core.config import with_settings
    from advrace.release.runner import check_splits

    config = _write(project / "configs" / "release.yaml", {
        "data": {"path": "../data/RACE/test"},
        "splits": [{"attack": "distractor_extraction", "config": {"model": "../runs/none/final"}}]})
    monkeypatch.chdir(project)
    with pytest.raises(ConfigError, match="no such folder"):
        check_splits(load_config(str(config)))
    cfg = with_settings(load_config(str(config)), ["splits.distractor_extraction.model=models/de"])
    assert cfg.splits[0].config["model"] == "models/de"
    check_splits(cfg)


def test_a_bundled_config_builds_from_another_folder(elsewhere):
    config = REPO / "configs" / "release" / "sample-rule-based.yaml"
    assert main(["build", str(config), "--limit", "3", "--out", "X", "--quiet"]) == 0
    assert (elsewhere / "X" / "manifest.json").is_file()
    assert main(["verify", "X"]) == 0


# --------------------------------------------------------------------------- training and ablation


def _train_config(tokenizer: str, data: str, **extra) -> dict:
    return {"name": "tiny", "model_config": TINY_MODEL, "tokenizer": tokenizer,
            "train": {"path": data, "format": "race-dir"}, "dev": {"path": data, "format": "race-dir"},
            "lr": 1e-3, "warmup_ratio": 0.0, "epochs": 1, "batch_size": 2, "max_length": 96,
            "save_every_steps": None, "tensorboard": False, "feature_cache": False, **extra}


def test_training_config_paths_are_read_from_its_folder_and_set_from_the_shell(tmp_path, elsewhere):
    from advrace.training.config import check_paths, load_config as load_train_config

    root = tmp_path / "project"
    make_race_dir(root / "data")
    make_tokenizer(root)
    config = _write(root / "configs" / "train" / "tiny.yaml",
                    _train_config("../../tokenizer", "../../data/RACE/test", output_dir="../../runs/tiny"))
    cfg = load_train_config(config)
    assert cfg.tokenizer == str(root / "tokenizer")
    assert cfg.train.path == cfg.dev.path == str(root / "data" / "RACE" / "test")
    assert cfg.output_dir == str(root / "runs" / "tiny")
    check_paths(cfg)  # every file exists

    make_race_dir(elsewhere / "mine")
    cfg = load_train_config(config, ["train.path=mine/RACE/test", "output_dir=here"])
    assert cfg.train.path == "mine/RACE/test" and cfg.output_dir == "here"  # as given: the shell's folder
    assert cfg.dev.path == str(root / "data" / "RACE" / "test")
    check_paths(cfg)

    missing = load_train_config(config, ["model_config=null", "model=./nowhere/final"])
    with pytest.raises(ConfigError, match=r"model \./nowhere/final: no such folder"):
        check_paths(missing)
    from advrace.training import train
    with pytest.raises(ConfigError, match="dev.path .*no such file or folder"):
        train(load_train_config(config, ["dev.path=gone"]), progress=False)


def test_an_ablation_grid_runs_from_another_folder(tmp_path, elsewhere):
    root = tmp_path / "project"
    make_race_dir(root / "data")
    make_tokenizer(root)
    _write(root / "configs" / "train" / "tiny.yaml", _train_config("../../tokenizer", "../../data/RACE/test"))
    _write(root / "configs" / "release" / "rule.yaml", {
        "name": "rule", "seed": 1, "workers": 1, "data": {"path": "../../data/RACE/test", "format": "race-dir"},
        "splits": ["charswap", "option_only"]})
    grid = _write(root / "configs" / "ablation" / "grid.yaml", {
        "name": "tiny-grid",
        "release": {"config": "../release/rule.yaml"},
        "train_config": "../train/tiny.yaml",
        "set": {"dev.path": "../../data/RACE/test", "dev.limit": 4},
        "runs": [{"name": "original", "recipe": {"task": "finetune"}},
                 {"name": "option-only", "recipe": {"task": "option_only"}, "evaluate_on": ["option_only"]}],
        "output_dir": "../../out", "max_length": 96, "bf16": False})
    assert main(["ablate", str(grid), "--quiet"]) == 0
    out = root / "out"
    assert (out / "release" / "manifest.json").is_file()
    results = json.loads((out / "report" / "results.json").read_text())
    assert list(results["models"]) == ["original", "option-only"]
    assert not list(elsewhere.iterdir())  # nothing written in the shell's folder


def test_an_ablation_grid_reports_a_missing_file_before_training(tmp_path, elsewhere, capsys):
    root = tmp_path / "project"
    make_race_dir(root / "data")
    make_tokenizer(root)
    grid = {"release": {"path": "../releases/none"}, "train_config": "../train/tiny.yaml",
            "runs": [{"name": "original"}]}
    path = _write(root / "configs" / "ablation" / "grid.yaml", grid)
    assert main(["ablate", str(path), "--quiet"]) == 2
    assert f"train_config {root / 'configs' / 'train' / 'tiny.yaml'}: no such config file" in capsys.readouterr().err

    _write(root / "configs" / "train" / "tiny.yaml", _train_config("../../tokenizer", "../../data/RACE/test"))
    assert main(["ablate", str(path), "--quiet"]) == 2
    assert f"release.path {root / 'configs' / 'releases' / 'none'}: no such release folder" in capsys.readouterr().err

    _write(path, {**grid, "release": {"config": str(REPO / "configs" / "release" / "sample-rule-based.yaml")},
                  "set": {"train.path": "../../data/RACE/missing"}})
    assert main(["ablate", str(path), "--quiet", "--output-dir", "out"]) == 2
    assert f"train.path {root / 'data' / 'RACE' / 'missing'}: no such file or folder" in capsys.readouterr().err
    assert not (elsewhere / "out").exists()
