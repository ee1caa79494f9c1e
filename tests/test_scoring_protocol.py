"""What decides a decoder LM's number, recorded and honoured: the BOS policy (the tokenizer's
default, as lm-evaluation-harness 0.4.10+; never two with a chat template), the maximum length
(--max-length, else the config's, text_config first), per-pair truncation warned and counted,
the fallback of a sliding-window model said once and recorded, and the protocol record in
results.json and results.md."""

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from advrace.cli import main as cli_main
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.models.decoders.packed_scoring import unshared_logprobs
from advrace.models.decoders.llm_scoring import CausalLMScorer, load_causal_scorer, model_max_length
from advrace.models.protocol.scoring_protocol import PER_QUESTION, differences
from conftest import PASSAGE, race_passage

pytestmark = pytest.mark.usefixtures("one_thread")
SPECIALS = ["<pad>", "<s>", "</s>", "<unk>"]


def word_tokenizer(folder: Path, *, adds_bos: bool, chat_template: str | None = None):
    """A word-level tokenizer of the test passages that puts <s> first by default (as Llama 3's
    does) or not (as GPT-2's), saved so that a model folder can carry it."""
    import re

    from tokenizers import Tokenizer, models, pre_tokenizers, processors
    from transformers import PreTrainedTokenizerFast

    text = PASSAGE + " " + json.dumps(race_passage("high1.txt", 3)) + " article question answer a b c d A B C D"
    words = sorted(set(re.findall(r"[A-Za-z]+|[0-9]|[^\sA-Za-z0-9]", text)))
    vocab = {w: i for i, w in enumerate(SPECIALS + words)}
    core = Tokenizer(models.WordLevel(vocab, unk_token="<unk>"))
    core.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    if adds_bos:
        core.post_processor = processors.TemplateProcessing(single="<s> $A", special_tokens=[("<s>", 1)])
    tok = PreTrainedTokenizerFast(tokenizer_object=core, bos_token="<s>", eos_token="</s>", pad_token="<pad>",
                                  unk_token="<unk>")
    if chat_template:
        tok.chat_template = chat_template
    tok.save_pretrained(folder)
    return tok


def tiny_lm(folder: Path, tok, **config) -> str:
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, pad_token_id=0, bos_token_id=1,
                      eos_token_id=2, **{"max_position_embeddings": 512, **config})
    LlamaForCausalLM(cfg).save_pretrained(folder)
    tok.save_pretrained(folder)
    return str(folder)


@pytest.fixture(scope="module")
def setup(tiny_llama, tmp_path_factory):
    """The shared RACE release, and tiny Llamas of word tokenizers that do and do not add a BOS."""
    root = tmp_path_factory.mktemp("protocol")
    bos_tok = word_tokenizer(root / "tok-bos", adds_bos=True)
    plain_tok = word_tokenizer(root / "tok-plain", adds_bos=False)
    return {"release": tiny_llama["mc"], "examples": tiny_llama["examples"],
            "bos_lm": tiny_lm(root / "bos-lm", bos_tok), "plain_lm": tiny_lm(root / "plain-lm", plain_tok),
            "short_lm": tiny_lm(root / "short-lm", plain_tok, max_position_embeddings=96)}


def _source(summary) -> dict:
    (label, *_) = summary["models"]
    return summary["results"][label]["source"]


def test_bos_follows_the_tokenizers_default(setup):
    ex = setup["examples"][0]
    bos = load_causal_scorer(setup["bos_lm"], bf16=False)
    assert bos.adds_bos and bos.mc_request(ex).context[0] == 1
    assert bos.mc_request(ex).context[1] != 1
    never = load_causal_scorer(setup["bos_lm"], bf16=False, bos="never")
    assert not never.adds_bos and never.mc_request(ex).context == bos.mc_request(ex).context[1:]
    plain = load_causal_scorer(setup["plain_lm"], bf16=False)
    assert not plain.adds_bos and plain.mc_request(ex).context[0] != 1
    assert load_causal_scorer(setup["plain_lm"], bf16=False, bos="always").mc_request(ex).context[0] == 1
    with pytest.raises(ConfigError, match="unknown BOS policy"):
        load_causal_scorer(setup["plain_lm"], bos="sometimes")


def test_a_chat_template_that_writes_bos_gets_no_second(setup, tmp_path):
    tok = word_tokenizer(tmp_path / "tok", adds_bos=True,
                         chat_template="{{ bos_token }}{% for m in messages %}{{ m['content'] }}{% endfor %} answer: ")
    scorer = CausalLMScorer(load_causal_scorer(setup["bos_lm"]).model, tok, method="letter")
    request = scorer.mc_request(setup["examples"][0])
    assert scorer.chat and request.context[0] == 1 and request.context[1] != 1
    assert request.context.count(1) == 1


def test_max_length_is_read_from_text_config_first():
    tok = SimpleNamespace(model_max_length=10 ** 30)
    composite = SimpleNamespace(config=SimpleNamespace(max_position_embeddings=1200,
                                                       text_config=SimpleNamespace(max_position_embeddings=32768)))
    assert model_max_length(composite, tok) == (32768, "config.text_config.max_position_embeddings")
    gpt2 = SimpleNamespace(config=SimpleNamespace(n_positions=1024))
    assert model_max_length(gpt2, tok) == (1024, "config.n_positions")
    assert model_max_length(SimpleNamespace(config=SimpleNamespace()), SimpleNamespace(model_max_length=4096)) \
        == (4096, "tokenizer.model_max_length")
    assert model_max_length(SimpleNamespace(config=SimpleNamespace()), tok)[0] == 2048


def test_max_length_is_honoured_and_each_cut_is_warned_and_counted(setup, tmp_path, capsys):
    summary = evaluate_command(setup["release"], [setup["plain_lm"]], out=tmp_path / "r", progress=False,
                               bf16=False, max_length=40, splits=["original"])
    source = _source(summary)
    assert source["max_length"] == 40
    assert source["protocol"]["max_length"] == 40 and source["protocol"]["max_length_from"] == "--max-length"
    decoding = source["decoding"]
    assert decoding["questions_cut"] == 7 and len(decoding["cut_ids"]) == 7  # every test passage is longer
    assert decoding["reasons"] == {"context cut to the maximum length": 7}
    err = capsys.readouterr().err
    assert err.count("prompt tokens cut from the left to fit the maximum length 40") == 1  # once, with the count
    assert "7 question(s) had prompt tokens cut" in err
    # the scores are lm-eval's: each (context, option) pair cut on its own to 41 tokens
    scorer = load_causal_scorer(setup["plain_lm"], bf16=False, max_length=40)
    requests = [scorer.mc_request(ex) for ex in setup["examples"]]
    with torch.inference_mode():
        reference = unshared_logprobs(scorer.model, requests)
    assert all(len(r.pair(k)[0]) + len(r.pair(k)[1]) == 41 for r in requests for k in range(4))
    records = [json.loads(x) for x in next((tmp_path / "r" / "predictions").glob("*.jsonl")).read_text().splitlines()]
    by_source = {ex.source_id: ref for ex, ref in zip(setup["examples"], reference)}
    for rec in records:
        assert rec["scores"] == pytest.approx(by_source[rec["source_id"]], abs=1e-4)


def test_a_max_length_beyond_the_model_is_refused(setup, tmp_path, capsys):
    code = cli_main(["evaluate", str(setup["release"]), "--model", setup["short_lm"], "--max-length", "4096",
                     "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "longer than the model takes (96, from its config.max_position_embeddings)" in err


def test_results_record_the_protocol(setup, tmp_path):
    other = tmp_path / "RACE" / "train" / "high"
    other.mkdir(parents=True)
    (other / "9.txt").write_text(json.dumps(race_passage("other9.txt", 3)), encoding="utf-8")
    summary = evaluate_command(setup["release"], [setup["bos_lm"]], out=tmp_path / "r", progress=False, bf16=False,
                               few_shot=1, few_shot_file=other.parent, few_shot_seed=7)
    protocol = _source(summary)["protocol"]
    manifest_sha = hashlib.sha256((setup["release"] / "manifest.json").read_bytes()).hexdigest()
    assert protocol["name"] == PER_QUESTION and "not lm-eval's race number" in protocol["description"]
    assert protocol["prompt"] == "Article: {passage}\n\n{question}"
    assert (protocol["target_delimiter"], protocol["fewshot_delimiter"]) == (" ", "\n\n")
    assert protocol["bos"] == "tokenizer" and protocol["adds_bos"] is True
    assert protocol["metrics"] == ["acc", "acc_norm"] and protocol["max_length"] == 512
    assert protocol["max_length_from"] == "config.max_position_embeddings"
    assert protocol["shots"] == 1 and protocol["few_shot_seed"] == 7
    assert protocol["few_shot_file"] == str(other.parent) and len(protocol["few_shot_sha256"]) == 64
    assert protocol["release"]["manifest_sha256"] == manifest_sha == summary["release"]["manifest_sha256"]
    assert "safetensors" in protocol["model"]["weights"]
    md = (tmp_path / "r" / "results.md").read_text()
    assert "protocol `advrace-per-question`" in md and "BOS added (policy: tokenizer)" in md
    assert "1-shot from" in md and "seed 7" in md and manifest_sha[:16] in md
    assert "decoding: sdpa attention, boolean 4D mask" in md


def test_models_scored_under_different_protocols_say_so(setup, tmp_path):
    summary = evaluate_command(setup["release"], [setup["plain_lm"], setup["bos_lm"]], out=tmp_path / "r",
                               progress=False, bf16=False, splits=["original"])
    a, b = (summary["results"][m]["source"]["protocol"] for m in summary["models"])
    assert any(line.startswith("adds_bos: False vs True") for line in differences(a, b))
    assert differences(a, a) == []
    md = (tmp_path / "r" / "results.md").read_text()
    assert "**Scored under different protocols**" in md and "adds_bos: False vs True" in md


def test_a_sliding_window_model_says_once_what_ran_alone(setup, tmp_path, capsys):
    """Prompts longer than the window cannot share a cache that keeps only the window: they run
    pair by pair (exact), said once on stderr and recorded with the cost."""
    from transformers import AutoTokenizer, MistralConfig, MistralForCausalLM

    tok = AutoTokenizer.from_pretrained(setup["plain_lm"])
    torch.manual_seed(0)
    MistralForCausalLM(MistralConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                     num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                                     sliding_window=64, pad_token_id=0, bos_token_id=1,
                                     eos_token_id=2)).save_pretrained(tmp_path / "mistral")
    tok.save_pretrained(tmp_path / "mistral")
    summary = evaluate_command(setup["release"], [str(tmp_path / "mistral")], out=tmp_path / "r", progress=False,
                               bf16=False)
    decoding = _source(summary)["decoding"]
    assert decoding["shared_cache_limit"] == 64 and decoding["run_alone"] == 14  # 7 questions x 2 splits
    assert decoding["reasons"] == {"sliding window of 64 tokens": 14} and decoding["cost_ratio"] > 1
    err = capsys.readouterr().err
    assert err.count("could not share their prompt's cache") == 1
    # the numbers are those of each pair run alone
    scorer = load_causal_scorer(str(tmp_path / "mistral"), bf16=False)
    requests = [scorer.mc_request(ex) for ex in setup["examples"]]
    with torch.inference_mode():
        reference = unshared_logprobs(scorer.model, requests)
    records = [json.loads(x) for x in next((tmp_path / "r" / "predictions").glob("*.jsonl")).read_text().splitlines()]
    by_source = {ex.source_id: ref for ex, ref in zip(setup["examples"], reference)}
    for rec in records:
        if rec["id"].startswith("original/"):
            assert rec["scores"] == pytest.approx(by_source[rec["source_id"]], abs=1e-4)


def test_compare_says_when_two_reports_were_scored_under_different_protocols(setup, tmp_path, capsys):
    for out, bos in (("a", "tokenizer"), ("b", "tokenizer"), ("c", "never")):
        evaluate_command(setup["release"], [setup["bos_lm"]], out=tmp_path / out, progress=False, bf16=False,
                         splits=["original"], bos=bos)
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    same = capsys.readouterr().out
    assert "Same release, and every model shared by both was scored under the same protocol." in same
    assert "| original |" in same and "+0.00" in same
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "c")]) == 0
    apart = capsys.readouterr().out
    assert "**These numbers do not compare directly:**" in apart
    assert "adds_bos: True vs False" in apart and "bos: 'tokenizer' vs 'never'" in apart
    assert cli_main(["compare", str(tmp_path / "a"), str(tmp_path / "nothing")]) == 2
    assert "no results.json there" in capsys.readouterr().err


def _scores(report: Path) -> dict:
    lines = next((report / "predictions").glob("*.jsonl")).read_text().splitlines()
    return {(r := json.loads(x))["id"]: r["scores"] for x in lines}


@pytest.mark.parametrize("lm, add_bos_token, bos", [("plain_lm", "true", "always"), ("bos_lm", "False", "never")])
def test_lm_evals_add_bos_token_and_max_length_score_as_bos_and_max_length(setup, tmp_path, lm, add_bos_token, bos):
    """lm-eval's model args, pasted: the same protocol and the same numbers as --bos and --max-length."""
    pasted = evaluate_command(setup["release"], out=tmp_path / "a", progress=False, bf16=False, splits=["original"],
                              model_args=f"pretrained={setup[lm]},add_bos_token={add_bos_token},max_length=48")
    flags = evaluate_command(setup["release"], [setup[lm]], out=tmp_path / "b", progress=False, bf16=False,
                             splits=["original"], bos=bos, max_length=48)
    protocol = _source(pasted)["protocol"]
    assert protocol["bos"] == bos and protocol["adds_bos"] is (bos == "always") and protocol["max_length"] == 48
    assert differences(protocol, _source(flags)["protocol"]) == []
    assert _scores(tmp_path / "a") == _scores(tmp_path / "b")


def test_results_md_says_the_default_dtype_is_not_lm_evals(setup, tmp_path):
    evaluate_command(setup["release"], [setup["plain_lm"]], out=tmp_path / "a", progress=False, bf16=False,
                     splits=["original"])
    note = "dtype float32, advrace's default, where lm-eval's default is auto"
    assert note in (tmp_path / "a" / "results.md").read_text()
    evaluate_command(setup["release"], [setup["plain_lm"]], out=tmp_path / "b", progress=False, bf16=False,
                     splits=["original"], model_args="dtype=float32")
    assert note not in (tmp_path / "b" / "results.md").read_text()
