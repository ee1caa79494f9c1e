"""`--model-args` for decoder LMs (advrace.models.runtime.model_args): parsing and its errors, refusal
where they do not apply, a model dispatched by Accelerate over the CPU and disk scoring as the
plainly loaded one, bf16 weights, and the record in the report; lm-evaluation-harness's keys
(pretrained, add_bos_token, max_length, parallelize mapped; tokenizer, gguf_file, peft loaded;
the rest refused with a reason). Tiny random Llamas, one written as a GGUF file here."""

import inspect
import json
import shutil
import sys
from pathlib import Path

import pytest
import torch

from advrace.cli import main as cli_main
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.models.decoders.llm_scoring import CausalLMScorer, load_causal_scorer
from advrace.models.runtime import loading
from advrace.models.runtime.model_args import LM_EVAL_REFUSED, ModelArgs, attention_implementations

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tiny_llama, tmp_path_factory):
    """The shared tiny Llama and RACE release, and a random multiple-choice model of the test tokenizer."""
    from transformers import BertConfig, BertForMultipleChoice

    mc_model = tmp_path_factory.mktemp("model-args") / "mc-model"
    tok = tiny_llama["tok"]
    torch.manual_seed(0)
    BertForMultipleChoice(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                     intermediate_size=37)).save_pretrained(mc_model)
    tok.save_pretrained(mc_model)
    return {"lm": tiny_llama["lm"], "mc_model": str(mc_model), "release": tiny_llama["mc"],
            "examples": tiny_llama["examples"], "squad": tiny_llama["squad_examples"]}


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
    ("pretrained=gpt2", ["pretrained", "--model", "the model's name from Python"]),
    ("add_bos_token=false", ["add_bos_token", "--bos", "bos='always' or 'never' from Python"]),
    ("max_length=64", ["max_length", "--max-length"]),
    ("load_in_4bit=True", ["load_in_4bit", "not supported", "bitsandbytes", "dtype=bfloat16"]),
    ("delta=other", ["delta", "not supported", "save_pretrained the sum"]),
    ("device=cuda:0", ["device", "device_map=DEVICE"]),
    ("parallelize=sometimes", ["parallelize=sometimes", "true or false"]),
    ("gguf_file=model.bin", ["gguf_file=model.bin", ".gguf file"]),
    ("peft=", ["peft", "no value"]),
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


# --------------------------------------------------------------------------- lm-evaluation-harness's keys


def test_lm_evals_evaluation_keys_become_the_commands_settings():
    settings = {}
    args = ModelArgs.parse("pretrained=org/model, add_bos_token=True,max_length=256,parallelize=True,dtype=auto",
                           settings)
    assert settings == {"model": "org/model", "bos": "always", "max_length": 256}
    assert args == ModelArgs(dtype="auto", device_map="auto")  # parallelize=True: Accelerate's device_map
    assert args.given() == {"dtype": "auto", "device_map": "auto"}
    settings = {}
    assert ModelArgs.parse("add_bos_token=false,parallelize=false", settings) == ModelArgs()
    assert settings == {"bos": "never"}
    # as in lm-eval, a device_map given beside parallelize is kept
    assert ModelArgs.parse("parallelize=true,device_map=cpu").device_map == "cpu"
    settings = {}
    assert ModelArgs.coerce({"add_bos_token": False, "max_length": 64, "parallelize": True}, settings) \
        == ModelArgs(device_map="auto")
    assert settings == {"bos": "never", "max_length": 64}
    with pytest.raises(ConfigError, match="max_length=0: .*a positive number of tokens"):
        ModelArgs.parse("max_length=0", {})
    with pytest.raises(ConfigError, match="add_bos_token=yes: .*true or false"):
        ModelArgs.parse("add_bos_token=yes", {})


def test_every_key_of_lm_evals_hf_model_is_taken_or_refused_with_a_reason():
    """Each keyword of the installed lm-eval's HFLM: none is an unknown key, so a pasted
    --model_args never meets a bare "unknown"; the refused ones say why."""
    hf = pytest.importorskip("lm_eval.models.huggingface")
    keys = [k for k in inspect.signature(hf.HFLM.__init__).parameters if k not in ("self", "kwargs")]
    assert {"add_bos_token", "max_length", "parallelize", "peft", "tokenizer", "gguf_file", "dtype"} <= set(keys)
    for key in keys + ["load_in_4bit", "load_in_8bit"]:
        try:
            ModelArgs.parse(f"{key}=x.gguf", {})
        except ConfigError as err:
            assert "unknown key" not in str(err), str(err)
            if key in LM_EVAL_REFUSED:
                assert f"{key}=x.gguf: lm-evaluation-harness's {key} is not supported here: " \
                       f"{LM_EVAL_REFUSED[key]}" in str(err)
        else:
            assert key not in LM_EVAL_REFUSED
    assert "bitsandbytes" in LM_EVAL_REFUSED["load_in_4bit"]


def test_pretrained_names_the_model_when_model_is_absent(setup, tmp_path, capsys):
    code = cli_main(["evaluate", str(setup["release"]), "--model-args", f"pretrained={setup['lm']},max_length=64",
                     "--splits", "original", "--no-bf16", "--quiet", "--out", str(tmp_path / "r")])
    assert code == 0, capsys.readouterr().err
    results = json.loads((tmp_path / "r" / "results.json").read_text())
    (source,) = [r["source"] for r in results["results"].values()]
    assert source["path"] == setup["lm"] and source["max_length"] == 64
    assert source["protocol"]["max_length"] == 64 and "model_args" not in source  # nothing left to load with


def test_pretrained_beside_model_and_settings_that_disagree_are_refused(setup, tmp_path, no_loading):
    run = dict(out=tmp_path / "r", progress=False)
    with pytest.raises(ConfigError, match="give the model once"):
        evaluate_command(setup["release"], [setup["mc_model"]], model_args=f"pretrained={setup['lm']}", **run)
    with pytest.raises(ConfigError, match="--model hf with --model-args pretrained=.*leave out --model hf"):
        evaluate_command(setup["release"], ["hf"], model_args=f"pretrained={setup['lm']}", **run)
    with pytest.raises(ConfigError, match=r"--bos always and --model-args add_bos_token \(false, that is --bos never\)"):
        evaluate_command(setup["release"], [setup["lm"]], model_args="add_bos_token=false", bos="always", **run)
    with pytest.raises(ConfigError, match="--max-length 32 and --model-args max_length=64 disagree"):
        evaluate_command(setup["release"], [setup["lm"]], model_args="max_length=64", max_length=32, **run)
    assert not (tmp_path / "r").exists()


def test_a_tokenizer_from_another_folder(setup, tmp_path):
    """A folder holding weights alone loads with tokenizer= and scores as the folder with both;
    without it, it cannot load."""
    bare = tmp_path / "bare"
    shutil.copytree(setup["lm"], bare, ignore=shutil.ignore_patterns("tokenizer*", "vocab*", "special_tokens*"))
    assert not list(bare.glob("tokenizer*"))
    with pytest.raises(loading.ModelLoadError):
        load_causal_scorer(str(bare))
    with pytest.raises(ConfigError, match="tokenizer=./no/such: no such folder"):
        load_causal_scorer(str(bare), model_args="tokenizer=./no/such")
    whole = load_causal_scorer(setup["lm"], bf16=False)
    split = load_causal_scorer(str(bare), bf16=False, model_args=f"tokenizer={setup['lm']}")
    examples = setup["examples"]
    assert split.tokenizer.get_vocab() == whole.tokenizer.get_vocab()
    assert _gap(split.predict_mc(examples), whole.predict_mc(examples)) < 1e-6


def write_tiny_gguf(folder: Path) -> tuple[str, str]:
    """A random 2-layer Llama written both as a GGUF file (F32 tensors, a byte-level BPE
    tokenizer in its metadata, as llama.cpp writes one) and as a save_pretrained folder with the
    tokenizer Transformers reads from that GGUF: (GGUF folder, plain folder)."""
    import numpy as np
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM
    from transformers.convert_slow_tokenizer import bytes_to_unicode

    gguf = pytest.importorskip("gguf")
    tokens = ["<|endoftext|>", *bytes_to_unicode().values(), "Ġt", "he", "Ġthe"]
    heads, kv_heads, layers = 4, 2, 2
    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokens), hidden_size=32, intermediate_size=64, num_hidden_layers=layers,
                      num_attention_heads=heads, num_key_value_heads=kv_heads, max_position_embeddings=512,
                      bos_token_id=0, eos_token_id=0, tie_word_embeddings=False)
    model = LlamaForCausalLM(cfg)
    out = folder / "gguf"
    out.mkdir(parents=True)
    writer = gguf.GGUFWriter(str(out / "tiny.gguf"), "llama")
    writer.add_context_length(512)
    writer.add_embedding_length(32)
    writer.add_block_count(layers)
    writer.add_feed_forward_length(64)
    writer.add_head_count(heads)
    writer.add_head_count_kv(kv_heads)
    writer.add_rope_freq_base(cfg.rope_parameters["rope_theta"])
    writer.add_rope_dimension_count(32 // heads)
    writer.add_layer_norm_rms_eps(cfg.rms_norm_eps)
    writer.add_vocab_size(len(tokens))
    writer.add_tokenizer_model("gpt2")
    writer.add_tokenizer_pre("default")
    writer.add_token_list(tokens)
    writer.add_token_types([3] + [1] * (len(tokens) - 1))
    writer.add_token_merges(["Ġ t", "h e", "Ġt he"])
    writer.add_bos_token_id(0)
    writer.add_eos_token_id(0)
    writer.add_add_bos_token(False)

    def permuted(w, n):  # llama.cpp's order of the rotary halves in q and k
        return w.reshape(n, 2, w.shape[0] // n // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)

    names = {"model.embed_tokens.weight": "token_embd.weight", "model.norm.weight": "output_norm.weight",
             "lm_head.weight": "output.weight"}
    parts = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down", "input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm"}
    for i in range(layers):
        names.update({f"model.layers.{i}.{hf}.weight": f"blk.{i}.{gg}.weight" for hf, gg in parts.items()})
    for key, value in model.state_dict().items():
        w = value.numpy().astype(np.float32)
        if key.endswith(("q_proj.weight", "k_proj.weight")):
            w = permuted(w, heads if "q_proj" in key else kv_heads)
        writer.add_tensor(names[key], np.ascontiguousarray(w))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    plain = folder / "plain"
    model.save_pretrained(plain)
    AutoTokenizer.from_pretrained(out, gguf_file="tiny.gguf").save_pretrained(plain)
    return str(out), str(plain)


def test_a_model_read_from_a_gguf_file_scores_as_its_weights_saved_plainly(setup, tmp_path):
    gguf_folder, plain = write_tiny_gguf(tmp_path)
    assert loading.checkpoint_kind(gguf_folder) == (None, None)  # no config.json: nothing to read
    assert loading.checkpoint_kind(gguf_folder, {"gguf_file": "tiny.gguf"})[0] == "causal_lm"
    from_gguf = load_causal_scorer(gguf_folder, bf16=False, model_args="gguf_file=tiny.gguf")
    saved = load_causal_scorer(plain, bf16=False)
    examples = setup["examples"]
    assert _gap(from_gguf.predict_mc(examples), saved.predict_mc(examples)) < 1e-5
    with pytest.raises(ConfigError, match="gguf_file=other.gguf: no such file in .*its GGUF files: tiny.gguf"):
        load_causal_scorer(gguf_folder, model_args="gguf_file=other.gguf")
    with pytest.raises(ConfigError, match="gguf_file=x.gguf: smollm2 is read from an installed package, which has "
                                          "its own GGUF file"):
        load_causal_scorer("smollm2", model_args="gguf_file=x.gguf")
    # as lm-eval's command line spells it: pretrained= and gguf_file=
    summary = evaluate_command(setup["release"], out=tmp_path / "r", progress=False, bf16=False, splits=["original"],
                               model_args=f"pretrained={gguf_folder},gguf_file=tiny.gguf")
    (result,) = summary["results"].values()
    assert result["source"]["model_args"] == {"gguf_file": "tiny.gguf"}
    assert result["source"]["path"] == gguf_folder


def test_a_peft_adapter_is_put_on_the_model(setup, tmp_path):
    peft = pytest.importorskip("peft")
    from transformers import AutoModelForCausalLM

    base = AutoModelForCausalLM.from_pretrained(setup["lm"])
    torch.manual_seed(1)
    adapted = peft.get_peft_model(base, peft.LoraConfig(r=2, target_modules=["q_proj", "v_proj"],
                                                        init_lora_weights=False))
    adapted.save_pretrained(tmp_path / "adapter")
    plain = load_causal_scorer(setup["lm"], bf16=False)
    with_lora = load_causal_scorer(setup["lm"], bf16=False, model_args=f"peft={tmp_path / 'adapter'}")
    assert isinstance(with_lora.model, peft.PeftModel)
    # the adapter's own forward pass, outside advrace, gives the same log-likelihoods
    reference = CausalLMScorer(adapted.eval(), plain.tokenizer, bf16=False)
    examples = setup["examples"]
    assert _gap(with_lora.predict_mc(examples), reference.predict_mc(examples)) < 1e-5
    assert _gap(with_lora.predict_mc(examples), plain.predict_mc(examples)) > 1e-3  # it changed the model
    with pytest.raises(loading.ModelLoadError, match="peft=.*: cannot put this PEFT adapter on the model"):
        load_causal_scorer(setup["lm"], model_args=f"peft={tmp_path}")  # a folder without an adapter


def test_an_adapter_without_the_peft_package_says_how_to_install_it(setup, tmp_path, monkeypatch, no_loading):
    monkeypatch.setitem(sys.modules, "peft", None)  # as if not installed
    (tmp_path / "adapter").mkdir()
    with pytest.raises(ConfigError, match="peft=.*needs the peft package; install it with `pip install peft`"):
        evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", model_args=f"peft={tmp_path / 'adapter'}")
