import json

import pytest

from advrace.core.errors import ConfigError
from conftest import tiny
from advrace.training.ablation import ablate, grid_from_dict, run_config


def grid(tokenizer_dir, race_dir, tmp_path, **extra):
    base = tiny(tokenizer_dir, race_dir, tmp_path, epochs=1, save_every_steps=None)
    values = {
        "name": "t",
        "release": {"config": None},
        "train_config": base,
        "runs": [
            {"name": "original", "recipe": {"task": "finetune"}},
            {"name": "+charswap", "recipe": {"task": "adversarial", "mode": "targeted", "attacks": ["charswap"]}},
            {"name": "option-only", "recipe": {"task": "option_only"}, "evaluate_on": ["option_only"]},
        ],
        "output_dir": str(tmp_path / "abl"),
        "max_length": 96,
        "bf16": False,
        **extra,
    }
    return values


def test_grid_on_the_sample_trains_each_run_and_writes_one_matrix(tokenizer_dir, race_dir, tmp_path):
    from advrace.core.config import release_config_from_dict
    from advrace.release import build_release

    release = tmp_path / "release"
    build_release(release_config_from_dict({"data": {"path": "@sample/race", "limit": 24}, "seed": 1, "workers": 1,
                                            "splits": ["charswap", "diagnosis", "option_only"]}), release)
    sample = {"train.path": "@sample/race", "train.limit": 40, "dev.path": "@sample/race", "dev.limit": 12}
    g = grid_from_dict(grid(tokenizer_dir, race_dir, tmp_path, release={"path": str(release)}, set=sample,
                            baselines=["sliding-window"]))
    summary = ablate(g, progress=False)
    out = tmp_path / "abl"
    results = json.loads((out / "report" / "results.json").read_text())
    assert results == summary
    assert list(results["models"]) == ["original", "+charswap", "option-only", "sliding-window"]
    assert set(results["results"]["sliding-window"]["splits"]) == {"original", "charswap", "diagnosis",
                                                                   "option_only"}
    full = results["results"]["original"]["splits"]
    assert set(full) == {"original", "charswap", "diagnosis", "option_only"}
    assert set(results["results"]["option-only"]["splits"]) == {"option_only"}
    for run in ("original", "+charswap", "option-only"):
        assert (out / "runs" / run / "final" / "config.json").is_file()
        assert (out / "report" / "predictions" / f"{run}.jsonl").is_file()
    table = (out / "report" / "results.md").read_text()
    assert "+charswap" in table and "option-only" in table
    adv_set = json.loads((out / "runs" / "+charswap" / "data" / "train_set.json").read_text())
    assert adv_set  # the adversarial recipe recorded what it added


def test_run_config_layers_overrides(tokenizer_dir, race_dir, tmp_path):
    g = grid_from_dict(grid(tokenizer_dir, race_dir, tmp_path, release={"path": "x"},
                            set={"train.limit": 3, "lr": 0.5}))
    cfg = run_config(g, g.runs[1])
    assert cfg["train"]["limit"] == 3 and cfg["lr"] == 0.5
    assert cfg["recipe"]["attacks"] == ["charswap"] and cfg["name"] == "+charswap"
    assert "output_dir" not in cfg


def test_grid_errors(tokenizer_dir, race_dir, tmp_path):
    values = grid(tokenizer_dir, race_dir, tmp_path, release={"path": "x"})
    with pytest.raises(ConfigError, match="unknown key"):
        grid_from_dict({**values, "runz": []})
    with pytest.raises(ConfigError, match="unique 'name'"):
        grid_from_dict({**values, "runs": [{"name": "a"}, {"name": "a"}]})
    with pytest.raises(ConfigError, match="release needs"):
        grid_from_dict({**values, "release": {}})
    with pytest.raises(ConfigError, match="unknown baseline"):
        grid_from_dict({**values, "baselines": ["bm25"]})


class PreferFirst:
    name = "prefer-first"

    def predict_mc(self, examples):
        return [[1.0] + [0.0] * (len(ex.options) - 1) for ex in examples]


def test_ablate_checks_and_reads_the_release_once(tokenizer_dir, race_dir, tmp_path, monkeypatch):
    """R runs and B baselines hash the release once and read each split once, and score as
    score_release does on its own (training is replaced by a scorer object)."""
    import advrace.evaluation.scoring as scoring
    import advrace.training.ablation as ablation
    import advrace.training.loop as loop
    from advrace.core.config import release_config_from_dict
    from advrace.evaluation import score_release
    from advrace.release import build_release, check_release, read_split

    release = tmp_path / "release"
    build_release(release_config_from_dict({"data": {"path": str(race_dir)}, "seed": 1, "workers": 1,
                                            "splits": ["charswap", "option_only"]}), release)
    alone = {"run": score_release(release, PreferFirst(), progress=False),
             "sliding-window": score_release(release, "sliding-window", progress=False)}
    checks, reads = [], []

    def counted_check(path):
        checks.append(path)
        return check_release(path)

    def counted_read(path, split):
        reads.append(split)
        return read_split(path, split)

    for module in (ablation, scoring):
        monkeypatch.setattr(module, "check_release", counted_check)
        monkeypatch.setattr(module, "read_split", counted_read)
    monkeypatch.setattr(loop, "train", lambda *a, **k: {"best": PreferFirst(), "final": None, "metrics": {}})
    g = grid_from_dict(grid(tokenizer_dir, race_dir, tmp_path, release={"path": str(release)},
                            baselines=["sliding-window"]))
    summary = ablate(g, progress=False)
    assert len(checks) == 1 and sorted(reads) == ["charswap", "option_only", "original"]
    assert set(summary["results"]["option-only"]["splits"]) == {"option_only"}
    for name, scored in [("original", "run"), ("+charswap", "run"), ("sliding-window", "sliding-window")]:
        for split, cell in summary["results"][name]["splits"].items():
            assert cell["accuracy"] == pytest.approx(alone[scored][split]["accuracy"], abs=0.005)
