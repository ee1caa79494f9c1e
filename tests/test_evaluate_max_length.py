"""`advrace evaluate` scores a checkpoint at the length it was trained with (recorded by
`advrace train` in training_info.json), unless --max-length says otherwise."""

import argparse
import json
import shutil

import pytest

from advrace.core.config import release_config_from_dict
from advrace.evaluation import add_evaluate_parser, evaluate_command, load_checkpoint
from advrace.models.encoders import mc_scoring, span_scoring
from advrace.models.encoders.span_scoring import load_span_model
from advrace.release import build_release
from conftest import make_race_dir, make_tokenizer, squad_doc, tiny


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny multiple-choice model trained at 40 tokens, and a RACE release to score it on."""
    from advrace.training import train

    tmp = tmp_path_factory.mktemp("trained")
    race = make_race_dir(tmp)
    run = train(tiny(make_tokenizer(tmp), race, tmp, max_length=40, epochs=1), progress=False)
    build_release(release_config_from_dict({"data": {"path": str(race)}, "splits": ["charswap"], "workers": 1}),
                  tmp / "rel")
    return {"final": run["final"], "release": tmp / "rel", "tmp": tmp}


@pytest.fixture
def lengths_used(monkeypatch):
    """The max_length every multiple-choice and span encoding call is made with."""
    seen = []
    encode_mc, encode_windows = mc_scoring.encode_mc, span_scoring.encode_windows

    def mc(tokenizer, examples, max_length=512):
        seen.append(max_length)
        return encode_mc(tokenizer, examples, max_length)

    def windows(*args, max_length, **kwargs):
        seen.append(max_length)
        return encode_windows(*args, max_length=max_length, **kwargs)

    monkeypatch.setattr(mc_scoring, "encode_mc", mc)
    monkeypatch.setattr(span_scoring, "encode_windows", windows)
    return seen


def source(out, model="tiny") -> dict:  # the run's name (conftest.tiny), as the report names its checkpoint
    return json.loads((out / "results.json").read_text(encoding="utf-8"))["results"][model]["source"]


def test_evaluate_uses_the_recorded_training_length(trained, tmp_path, lengths_used):
    info = json.loads(open(f"{trained['final']}/training_info.json").read())
    assert info["config"]["max_length"] == 40
    evaluate_command(trained["release"], [trained["final"]], [], tmp_path / "auto", progress=False)
    assert source(tmp_path / "auto")["max_length"] == 40
    assert lengths_used and set(lengths_used) == {40}
    lengths_used.clear()
    evaluate_command(trained["release"], [trained["final"]], [], tmp_path / "given", max_length=64, progress=False)
    assert source(tmp_path / "given")["max_length"] == 64 and set(lengths_used) == {64}


def test_cli_max_length_defaults_to_the_checkpoint_and_an_explicit_one_wins(trained, tmp_path, lengths_used):
    parser = argparse.ArgumentParser(prog="advrace")
    handler = add_evaluate_parser(parser.add_subparsers(dest="command"))
    base = ["evaluate", str(trained["release"]), "--model", trained["final"], "--quiet"]
    args = parser.parse_args(base + ["--out", str(tmp_path / "auto")])
    assert args.max_length is None and handler(args) == 0
    assert source(tmp_path / "auto")["max_length"] == 40 and set(lengths_used) == {40}
    lengths_used.clear()
    assert handler(parser.parse_args(base + ["--out", str(tmp_path / "given"), "--max-length", "72"])) == 0
    assert source(tmp_path / "given")["max_length"] == 72 and set(lengths_used) == {72}
    help_text = parser._subparsers._group_actions[0].choices["evaluate"].format_help()
    assert "trained with" in " ".join(help_text.split())


def test_without_a_record_the_length_is_512(trained, tmp_path):
    bare = tmp_path / "bare"
    shutil.copytree(trained["final"], bare)
    (bare / "training_info.json").unlink()
    assert load_checkpoint(bare).max_length == 512
    assert load_checkpoint(trained["final"]).max_length == 40
    assert load_checkpoint(trained["final"], max_length=100).max_length == 100
    (bare / "training_info.json").write_text("{not json", encoding="utf-8")
    assert load_checkpoint(bare).max_length == 512


def test_span_models_read_in_windows_of_the_recorded_length(trained, tmp_path, lengths_used):
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForQuestionAnswering

    torch.manual_seed(0)
    tokenizer = AutoTokenizer.from_pretrained(trained["final"])
    model = BertForQuestionAnswering(BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=1,
                                                num_attention_heads=2, intermediate_size=64,
                                                max_position_embeddings=128))
    folder = tmp_path / "span"
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    (folder / "training_info.json").write_text(json.dumps({"config": {"max_length": 48}}), encoding="utf-8")
    scorer = load_span_model(str(folder))
    assert (scorer.max_length, scorer.doc_stride) == (48, 12)
    scorer = load_span_model(str(folder), max_length=64)
    assert (scorer.max_length, scorer.doc_stride) == (64, 16)
    (tmp_path / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(tmp_path / "squad.json")}, "splits": ["charswap"],
                                            "workers": 1}), tmp_path / "qa")
    lengths_used.clear()
    evaluate_command(tmp_path / "qa", [str(folder)], [], tmp_path / "report", progress=False)
    assert source(tmp_path / "report", f"{tmp_path.name}/span")["max_length"] == 48 and set(lengths_used) == {48}
