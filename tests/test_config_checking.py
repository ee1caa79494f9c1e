"""Every config value is checked against its field's type by one checker (advrace.core.checking)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import pytest
import yaml

from advrace.core.checking import build_dataclass, describe
from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.config import load_config as load_release
from advrace.core.errors import ConfigError
from advrace.attacks import get_attack
from conftest import tiny
from advrace.training.ablation import grid_from_dict
from advrace.training.config import apply_overrides
from advrace.training.config import train_config_from_dict
from advrace.training.config import load_config as load_train


@dataclass(frozen=True)
class Inner:
    depth: int = 1


@dataclass(frozen=True)
class Kinds:
    name: str
    flag: bool = False
    count: int = 0
    rate: float = 0.5
    limit: int | None = 3
    words: tuple[str, ...] = ()
    sizes: list[int] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    mode: Literal["fast", "slow"] = "fast"
    inner: Inner = field(default_factory=Inner)
    anything: Any = None
    source: str = field(default="original", metadata={"key": "from"})


def build(**values):
    return build_dataclass(Kinds, {"name": "k", **values}, "cfg")


def refused(match: str, **values) -> None:
    with pytest.raises(ConfigError, match=match) as info:
        build(**values)
    assert info.value.exit_code == 2


# ---------------------------------------------------------------- the checker, one type kind each


def test_bool_refuses_strings_and_numbers():
    assert build(flag=True).flag is True
    refused("cfg.flag must be true or false, got 'false'", flag="false")
    refused("cfg.flag must be true or false, got 1", flag=1)


def test_int_refuses_bools_floats_and_words():
    assert build(count=7).count == 7
    refused(r"cfg.count must be an integer, got 'four'", count="four")
    refused(r"cfg.count must be an integer, got True", count=True)
    refused(r"cfg.count must be an integer, got 4.0", count=4.0)


def test_float_takes_ints_and_yaml_1_1_exponent_strings():
    assert build(rate=1).rate == 1.0 and isinstance(build(rate=1).rate, float)
    assert build(rate=yaml.safe_load("1e-5")).rate == 1e-5
    refused(r"cfg.rate must be a number, got 'abc'", rate="abc")
    refused(r"cfg.rate must be a number, got False", rate=False)


def test_str_refuses_numbers():
    refused(r"cfg.name must be a string, got 2021", name=2021)


def test_optional_takes_none_and_still_checks_the_type():
    assert build(limit=None).limit is None
    assert build(limit=5).limit == 5
    refused(r"cfg.limit must be an integer or null, got 'ten'", limit="ten")


def test_lists_become_tuples_for_tuple_fields_and_items_are_checked():
    assert build(words=["a", "b"]).words == ("a", "b")
    assert build(sizes=(1, 2)).sizes == [1, 2]
    assert build(words=None).words == ()
    refused(r"cfg.words must be a list of strings, got \['a', 1\]", words=["a", 1])
    refused(r"cfg.words must be a list of strings, got 'a'", words="a")
    refused(r"cfg.sizes must be a list of integers", sizes=[1, "2"])


def test_mappings():
    assert build(extra={"k": 1}).extra == {"k": 1}
    assert build(extra=None).extra == {}
    refused(r"cfg.extra must be a mapping, got \[1\]", extra=[1])


def test_literal_choices():
    assert build(mode="slow").mode == "slow"
    refused(r"cfg.mode must be one of 'fast', 'slow', got 'medium'", mode="medium")


def test_nested_dataclasses_are_built_with_a_dotted_path():
    assert build(inner={"depth": 3}).inner == Inner(3)
    refused(r"cfg.inner.depth must be an integer, got 'deep'", inner={"depth": "deep"})
    refused(r"cfg.inner: unknown key\(s\) width; known: depth", inner={"width": 1})


def test_any_is_not_checked():
    assert build(anything=["x", {"y": 1}]).anything == ["x", {"y": 1}]


def test_unknown_missing_and_renamed_keys():
    with pytest.raises(ConfigError, match=r"cfg: unknown key\(s\) colour; known: anything, count, .*from"):
        build(colour="red")
    with pytest.raises(ConfigError, match=r"cfg: 'name' is required \(a string\)"):
        build_dataclass(Kinds, {}, "cfg")
    with pytest.raises(ConfigError, match="cfg: expected a mapping, got list"):
        build_dataclass(Kinds, [], "cfg")
    assert build(**{"from": "charswap"}).source == "charswap"
    refused(r"cfg.from must be a string, got 3", **{"from": 3})


def test_describe_in_words():
    assert describe(bool | None) == "true, false or null"
    assert describe(tuple[Inner, ...]) == "a list of mappings"
    assert describe(int | str) == "an integer or a string"


# ---------------------------------------------------------------- attack configs


def test_attack_values_are_type_checked():
    with pytest.raises(ConfigError) as info:
        get_attack("charswap")({"attack_passage": "false"})
    assert str(info.value) == "attack 'charswap': config.attack_passage must be true or false, got 'false'"
    assert info.value.exit_code == 2
    with pytest.raises(ConfigError, match=r"config.min_length must be an integer, got 'four'"):
        get_attack("charswap")({"min_length": "four"})
    with pytest.raises(ConfigError, match=r"config.bf16 must be true, false or null, got 'yes'"):
        get_attack("distractor_generation")({"model": "m", "bf16": "yes"})


def test_attack_configs_take_yaml_near_misses():
    dg = get_attack("distractor_generation")({"model": "m", "bf16": None, "length_penalty": "1e-1",
                                              "min_jaccard_distance": 1})
    assert dg.config.bf16 is None and dg.config.length_penalty == 0.1
    assert dg.config.min_jaccard_distance == 1.0 and isinstance(dg.config.min_jaccard_distance, float)
    addsent = get_attack("addsent", "multiple_choice")({"keep_words": ["Passage", "title"]})
    assert addsent.config.keep_words == ("passage", "title")


def write_yaml(path, values) -> str:
    path.write_text(yaml.safe_dump(values), encoding="utf-8")
    return str(path)


def test_cli_build_refuses_a_string_for_a_bool(race_dir, tmp_path, capsys):
    config = write_yaml(tmp_path / "r.yaml", {"workers": 1, "splits": [
        {"attack": "charswap", "config": {"attack_passage": "false"}}]})
    code = main(["build", config, "--data", str(race_dir), "--quiet", "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2
    assert "config.attack_passage" in err and "'false'" in err and "true or false" in err
    assert not (tmp_path / "out").exists()


def test_cli_build_checks_attack_configs_before_reading_data(tmp_path, capsys):
    config = write_yaml(tmp_path / "r.yaml", {"splits": [{"attack": "charswap",
                                                         "config": {"min_length": "four"}}]})
    code = main(["build", config, "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "out")])
    assert code == 2
    assert "config.min_length must be an integer, got 'four'" in capsys.readouterr().err


# ---------------------------------------------------------------- release configs


def test_release_split_seed_must_be_an_integer(tmp_path, capsys):
    with pytest.raises(ConfigError, match=r"splits\[0\].seed must be an integer or null, got 'abc'"):
        release_config_from_dict({"splits": [{"attack": "charswap", "seed": "abc"}]})
    config = tmp_path / "r.yaml"
    config.write_text("splits:\n  - attack: charswap\n    seed: abc\n", encoding="utf-8")
    assert main(["build", str(config), "--data", "@sample/race", "--out", str(tmp_path / "out")]) == 2
    assert "seed must be an integer or null, got 'abc'" in capsys.readouterr().err


def test_release_values_are_type_checked():
    cfg = release_config_from_dict({"seed": 3, "workers": None, "data": {"limit": None, "lenient": True},
                                    "splits": [{"attack": "charswap", "seed": None, "config": None}]})
    assert cfg.workers is None and cfg.data.limit is None and cfg.splits[0].seed is None
    assert cfg.splits[0].config == {}
    for values, message in [({"seed": "abc"}, r"config.seed must be an integer, got 'abc'"),
                            ({"data": {"lenient": "no"}}, r"data.lenient must be true or false, got 'no'"),
                            ({"data": {"limit": "ten"}}, r"data.limit must be an integer or null"),
                            ({"splits": [{"attack": "charswap", "config": ["x"]}]},
                             r"splits\[0\].config must be a mapping")]:
        with pytest.raises(ConfigError, match=message):
            release_config_from_dict(values)


def test_release_yaml_exponent_needs_no_dot(tmp_path):
    config = write_yaml(tmp_path / "r.yaml", {"splits": [{"attack": "distractor_extraction", "config": {
        "model": "m", "max_overlap_answer": "5e-1"}}]})
    spec = load_release(config).splits[0]
    assert get_attack(spec.attack)(spec.config).config.max_overlap_answer == 0.5


# ---------------------------------------------------------------- training configs and --set


def test_training_set_values_are_checked_through_the_config(tmp_path):
    config = write_yaml(tmp_path / "t.yaml", {"train": "data"})
    with pytest.raises(ConfigError, match=r"\.lr must be a number, got 'abc'"):
        load_train(config, ["lr=abc"])
    with pytest.raises(ConfigError, match=r"\.epochs must be an integer, got 'two'"):
        load_train(config, ["epochs=two"])
    with pytest.raises(ConfigError, match=r"\.recipe.seed must be an integer or null, got 'x'"):
        load_train(config, ["recipe.seed=x"])
    cfg = load_train(config, ["lr=1e-5", "max_steps=null", "dev.path=d", "tensorboard=false"])
    assert cfg.lr == 1e-5 and cfg.max_steps is None and cfg.dev.path == "d" and cfg.tensorboard is False


def test_training_cli_set_exits_2(tmp_path, capsys):
    from advrace.training.cli import main as train_main

    config = write_yaml(tmp_path / "t.yaml", {"train": "data"})
    assert train_main([config, "--set", "epochs=two"]) == 2
    err = capsys.readouterr().err
    assert "epochs must be an integer, got 'two'" in err


def test_objective_sections_are_checked_by_the_same_checker(tmp_path, capsys):
    from advrace.training.cli import main as train_main

    config = write_yaml(tmp_path / "t.yaml", {"train": "data", "objective": "span_extraction",
                                              "span_extraction": {"doc_stride": 64}})
    assert load_train(config, ["span_extraction.doc_stride=32"]).settings.doc_stride == 32
    assert train_main([config, "--set", "span_extraction.doc_stride=wide"]) == 2
    assert "span_extraction.doc_stride must be an integer, got 'wide'" in capsys.readouterr().err
    assert train_main([config, "--set", "span_extraction.stride=3"]) == 2
    assert "span_extraction: unknown key(s) stride" in capsys.readouterr().err
    assert train_main([config, "--set", "objective=distractor_generation"]) == 2
    assert "section 'span_extraction' is for objective 'span_extraction'" in capsys.readouterr().err


def test_training_ranges_still_checked_after_types():
    assert train_config_from_dict({"train": "x", "lr": "2e-5"}).lr == 2e-5
    with pytest.raises(ConfigError, match=r"config.lr must be a number > 0, got 0.0"):
        train_config_from_dict({"train": "x", "lr": 0})
    with pytest.raises(ConfigError, match=r"config.train.limit must be an integer >= 0, got -1"):
        train_config_from_dict(apply_overrides({"train": "x"}, ["train.limit=-1"]))
    with pytest.raises(ConfigError, match=r"config.train: unknown key\(s\) limt"):
        train_config_from_dict({"train": {"path": "x", "limt": 1}})


# ---------------------------------------------------------------- ablation grids


def grid(tokenizer_dir, race_dir, tmp_path, **extra) -> dict:
    return {"release": {"path": "x"}, "train_config": tiny(tokenizer_dir, race_dir, tmp_path),
            "runs": [{"name": "original"}], **extra}


def test_ablation_values_are_type_checked(tokenizer_dir, race_dir, tmp_path):
    values = grid(tokenizer_dir, race_dir, tmp_path)
    with pytest.raises(ConfigError, match=r"batch_size must be an integer, got 'abc'"):
        grid_from_dict({**values, "batch_size": "abc"})
    with pytest.raises(ConfigError, match=r"bf16 must be true, false or null, got 'yes'"):
        grid_from_dict({**values, "bf16": "yes"})
    with pytest.raises(ConfigError, match=r"runs\[0\].evaluate_on must be a list of strings or null"):
        grid_from_dict({**values, "runs": [{"name": "a", "evaluate_on": [1]}]})
    with pytest.raises(ConfigError, match=r"release.path must be a string or null, got 5"):
        grid_from_dict({**values, "release": {"path": 5}})
    with pytest.raises(ConfigError, match=r"\.set must be a mapping with strings as keys, got \{5: 1\}"):
        grid_from_dict({**values, "set": {5: 1}})


def test_ablation_overrides_are_checked_when_the_grid_is_read(tokenizer_dir, race_dir, tmp_path):
    values = grid(tokenizer_dir, race_dir, tmp_path)
    with pytest.raises(ConfigError, match=r"run 'original': config.lr must be a number, got 'abc'"):
        grid_from_dict({**values, "set": {"lr": "abc"}})
    with pytest.raises(ConfigError, match=r"run 'a': config.epochs must be an integer, got 'two'"):
        grid_from_dict({**values, "runs": [{"name": "a", "set": {"epochs": "two"}}]})


def test_ablation_accepts_lists_single_names_and_nulls(tokenizer_dir, race_dir, tmp_path):
    g = grid_from_dict({**grid(tokenizer_dir, race_dir, tmp_path), "bf16": None, "batch_size": 4,
                        "baselines": "similarity", "set": {"lr": "1e-4"},
                        "runs": [{"name": "a", "evaluate_on": "option_only"}, {"name": "b", "recipe": None}]})
    assert g.bf16 is None and g.batch_size == 4 and g.readers == ("similarity",)
    assert g.runs[0].evaluate_on == ("option_only",) and g.runs[1].recipe == {"task": "finetune"}
    assert g.overrides == {"lr": "1e-4"} and g.output_dir == "runs/ablation"


def test_data_split_is_read_as_the_data_sets_part():
    """`data.split` keeps its name in configs and manifests; in Python it is DataSpec.part, so
    that `split` means a release split only."""
    from advrace.core.config import with_settings

    cfg = release_config_from_dict({"data": {"path": "ehovy/race", "split": "validation"}})
    assert cfg.data.part == "validation" and cfg.to_dict()["data"]["split"] == "validation"
    assert with_settings(cfg, ["data.split=train"]).data.part == "train"
    with pytest.raises(ConfigError, match=r"config: data: unknown key\(s\) part"):
        release_config_from_dict({"data": {"part": "train"}})
