"""`--model-args` for decoder LMs (advrace.models.runtime.model_args): parsing and its errors, refusal
where they do not apply, a model dispatched by Accelerate over the CPU and disk scoring as the
plainly loaded one, bf16 weights, and the record in the report. Tiny random Llamas."""

import json
from pathlib import Path

import pytest
import torch

from advrace.cli import main as cli_main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.formats import load
from advrace.models.decoders.llm_scoring import load_causal_scorer
from advrace.models.runtime import loading
from advrace.models.runtime.model_args import ModelArgs, attention_implementations
from advrace.release import build_release
from conftest import make_race_dir, make_tokenizer, save_tiny_llama, squad_doc

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice

    root = tmp_path_factory.mktemp("model-args")
    race, tok_dir = make_race_dir(root), make_tokenizer(root)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    lm = save_tiny_llama(tok, root / "lm")
    torch.manual_seed(0)
    BertForMultipleChoice(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37)).save_pretrained(root / "mc-model")
    tok.save_pretrained(root / "mc-model")
    release = root / "release"
    build_release(release_config_from_dict({"data": {"path": str(race)}, "splits": ["charswap"], "workers": 1}),
                  release)
    (root / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    return {"lm": lm, "mc_model": str(root / "mc-model"), "release": release, "examples": load(str(race)).examples,
            "squad": load(str(root / "squad.json")).examples}


@pytest.fixture
def no_loading(monkeypatch):
    """Fails the test if any model starts loading."""
    def refuse(*args, **kwargs):
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(loading, "from_pretrained", refuse)


def _gap(a, b) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


# --------------------------------------------------------------------------- parsing


def test_the_lm_evaluation_harness_spelling_is_parsed():
    args = ModelArgs.parse(" dtype=bfloat16, device_map=auto,attn_implementation=eager,revision=main,"
                           "trust_remote_code=True")
    assert args == ModelArgs(dtype="bfloat16", device_map="auto", attn_implementation="eager", revision="main",
                             trust_remote_code=True)
    assert args.given() == {"dtype": "bfloat16", "device_map": "auto", "attn_implementation": "eager",
                            "revision": "main", "trust_remote_code": True}
    assert ModelArgs.parse(str(args)) == args
    assert args.model_kwargs() == {"dtype": torch.bfloat16, "device_map": "auto", "attn_implementation": "eager",
                                   "revision": "main", "trust_remote_code": True}
    assert args.tokenizer_kwargs() == {"revision": "main", "trust_remote_code": True}
    with pytest.raises(AttributeError):
        args.dtype = "float32"  # frozen


def test_defaults_load_fp32_and_trust_no_remote_code():
    none = ModelArgs.coerce(None)
    assert not none and none.given() == {} and not none.places
    assert none.model_kwargs() == {"dtype": torch.float32}
    assert not ModelArgs.parse("trust_remote_code=false")  # the default, given: nothing to record
    assert ModelArgs.coerce({"dtype": torch.bfloat16}) == ModelArgs.parse("dtype=bfloat16")
    assert ModelArgs.parse("device_map=0").model_kwargs()["device_map"] == 0
    assert ModelArgs.parse("dtype=auto").model_kwargs()["dtype"] == "auto"


@pytest.mark.parametrize("text, words", [
    ("precision=bf16", ["precision", "dtype, device_map, attn_implementation, revision, trust_remote_code"]),
    ("dtype=bf16", ["dtype=bf16", "auto, float32, bfloat16, float16"]),
    ("device_map=everywhere", ["device_map=everywhere", "auto", "cuda:0"]),
    ("device_map=disk", ["device_map=disk", "one device"]),
    ("attn_implementation=fast", ["attn_implementation=fast", "eager", "sdpa", "flash_attention_2", "flex_attention"]),
    ("trust_remote_code=yes please", ["trust_remote_code=yes please", "true or false"]),
    ("dtype", ["dtype", "no value"]),
    ("revision=", ["revision", "no value"]),
    ("dtype=float16,dtype=float32", ["dtype given twice"]),
    ("pretrained=gpt2", ["pretrained", "--model"]),
])
def test_bad_keys_and_values_name_the_key_value_and_what_is_allowed(text, words):
    with pytest.raises(ConfigError) as err:
        ModelArgs.parse(text)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_the_attention_implementations_are_those_transformers_registers():
    names = attention_implementations()
    assert names[0] == "eager" and {"sdpa", "flash_attention_2", "flex_attention"} <= set(names)
    for name in names:
        assert ModelArgs(attn_implementation=name).attn_implementation == name


def test_python_callers_get_the_same_checks():
    with pytest.raises(ConfigError, match="dtype=int8"):
        ModelArgs(dtype="int8")
    with pytest.raises(ConfigError, match="unknown"):
        ModelArgs.coerce({"max_memory": {"cpu": "1GB"}})
    with pytest.raises(ConfigError, match="trust_remote_code"):
        ModelArgs(trust_remote_code="true")  # a string from Python is not a bool
    placed = ModelArgs(device_map={"model.embed_tokens": "cpu", "lm_head": "disk"})
    assert placed.given()["device_map"] == {"model.embed_tokens": "cpu", "lm_head": "disk"}
    assert hash(placed)  # frozen all the way down


# --------------------------------------------------------------------------- refusals before loading


def test_the_command_line_refuses_bad_model_args_with_exit_2_before_loading(setup, tmp_path, capsys, no_loading):
    code = cli_main(["evaluate", str(setup["release"]), "--model", setup["lm"], "--model-args", "dtype=fp8",
                     "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "dtype=fp8" in err and "auto, float32, bfloat16, float16" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("which", ["mc_model", "reader"])
def test_model_args_are_refused_for_models_they_do_not_apply_to(setup, tmp_path, which, no_loading):
    """A multiple-choice checkpoint or a built-in reader would ignore them: refused, the causal LM
    given first is not loaded either."""
    other = {"mc_model": setup["mc_model"], "reader": "sliding-window"}[which]
    with pytest.raises(ConfigError, match="do not apply to (a multiple-choice model|a built-in reader)"):
        evaluate_command(setup["release"], [setup["lm"], other], out=tmp_path / "r", progress=False,
                         model_args="dtype=bfloat16")
    assert not (tmp_path / "r").exists()


def test_model_args_without_a_model_are_refused(setup, tmp_path):
    preds = tmp_path / "p.json"
    preds.write_text("{}", encoding="utf-8")
    with pytest.raises(ConfigError, match="no --model"):
        evaluate_command(setup["release"], predictions=[preds], out=tmp_path / "r", model_args="dtype=float16")


def test_a_revision_of_a_local_folder_is_refused(setup, tmp_path, no_loading):
    with pytest.raises(ConfigError, match="revision=v2: .* is a local folder"):
        evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", model_args="revision=v2")
    with pytest.raises(ConfigError, match="revision=v2: smollm2 is read from an installed package"):
        load_causal_scorer("smollm2", model_args="revision=v2")


def test_device_map_is_refused_under_several_processes(setup, tmp_path, monkeypatch, no_loading):
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(ConfigError, match="device_map=auto: not with several processes"):
        evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", model_args="device_map=auto")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks a machine without CUDA")
def test_a_cuda_device_map_without_cuda_is_refused(setup, no_loading):
    with pytest.raises(ConfigError, match="device_map=cuda:0: names a CUDA device"):
        load_causal_scorer(setup["lm"], model_args="device_map=cuda:0")


# --------------------------------------------------------------------------- loading with them


def test_a_model_dispatched_over_cpu_and_disk_scores_as_the_plain_one(setup):
    """Accelerate's big-model inference: the embeddings, the second layer and the head offloaded
    to disk (meta tensors, loaded by hooks for each forward pass), the rest on the CPU. The
    scorer leaves the model where it was placed and sends inputs to the embeddings' device."""
    plain = load_causal_scorer(setup["lm"], bf16=False)
    device_map = {"model.embed_tokens": "disk", "model.layers.0": "cpu", "model.layers.1": "disk",
                  "model.norm": "cpu", "model.rotary_emb": "cpu", "lm_head": "disk"}
    split = load_causal_scorer(setup["lm"], bf16=False, model_args=ModelArgs(device_map=device_map))
    assert split.model.hf_device_map == device_map
    offloaded = {n for n, p in split.model.named_parameters() if p.device.type == "meta"}
    assert "model.embed_tokens.weight" in offloaded and "model.layers.0.self_attn.q_proj.weight" not in offloaded
    assert split.device == torch.device("cpu")
    examples = setup["examples"]
    assert _gap(split.predict_mc(examples), plain.predict_mc(examples)) < 1e-4
    split.share_prefix = plain.share_prefix = False
    assert _gap(split.predict_mc(examples), plain.predict_mc(examples)) < 1e-4
    assert split.predict_qa(setup["squad"]) == plain.predict_qa(setup["squad"])
    # never moved: the offloaded weights are still on the meta device, the map unchanged
    assert {n for n, p in split.model.named_parameters() if p.device.type == "meta"} == offloaded
    assert split.model.hf_device_map == device_map


def test_loaded_in_bf16_and_recorded(setup, tmp_path, capsys):
    code = cli_main(["evaluate", str(setup["release"]), "--model", setup["lm"], "--splits", "original",
                     "--model-args", "dtype=bfloat16,attn_implementation=eager,device_map=auto", "--quiet",
                     "--out", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    (source,) = [r["source"] for r in json.loads((tmp_path / "r" / "results.json").read_text())["results"].values()]
    assert source["model_args"] == {"dtype": "bfloat16", "device_map": "auto", "attn_implementation": "eager"}
    assert source["inference"]["weights"] == "bfloat16" and source["inference"]["precision"] == "bf16"
    md = (tmp_path / "r" / "results.md").read_text()
    assert "weights in bfloat16" in md and "model args: dtype=bfloat16, device_map=auto, attn_implementation=eager" in md

    scorer = load_causal_scorer(setup["lm"], model_args={"dtype": "bfloat16", "attn_implementation": "eager"})
    assert {p.dtype for p in scorer.model.parameters()} == {torch.bfloat16}
    assert scorer.model.config._attn_implementation == "eager"
    assert scorer.bf16 is False  # no autocast over bf16 weights: they compute in bf16 as they are
    assert scorer.inference["weights"] == "bfloat16"


def test_without_model_args_nothing_changes_in_the_record(setup, tmp_path):
    summary = evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=False,
                               splits=["original"])
    (result,) = summary["results"].values()
    assert "model_args" not in result["source"] and "weights" not in result["source"]["inference"]
    assert "model args" not in (tmp_path / "r" / "results.md").read_text()


def test_help_explains_model_args_and_how_they_differ_from_autocast(capsys):
    with pytest.raises(SystemExit):
        cli_main(["evaluate", "--help"])
    out = capsys.readouterr().out
    assert "--model-args KEY=VALUE,..." in out and "trust_remote_code=true|false" in out
    assert "bf16 autocast" in out and "dtype=bfloat16" in out and "device_map=auto" in out


def test_the_evaluation_page_documents_model_args():
    page = (Path(__file__).resolve().parents[1] / "docs" / "evaluation.md").read_text(encoding="utf-8")
    assert "--model-args" in page and "device_map=auto" in page and "source.model_args" in page
