"""Every decoder family users run, scored right by the packed-decoding core
(advrace.models.decoders.packed_decoding): tiny random configs of Llama, Qwen2, Qwen3, Mistral (sliding
window), Gemma 2 (eager only, soft-capping, sliding and global layers), Gemma 3 (sliding and
global layers), Phi-3 (sliding window), GPT-2 (learned positions), OLMo 1 and 2, OPT, GPT-NeoX,
and the ALiBi families MPT, BLOOM and Falcon (positions from the mask, not from position_ids),
each with eager and SDPA attention where the model has both.

- Options packed over a shared prompt give each (prompt, option) pair's log-likelihood as the
  pair run alone does, within 1e-4 in fp32, for batches of mixed lengths and prompts longer than
  the sliding window (those run alone, counted). The ALiBi families fail the core's probe and
  run every question alone, counted with the reason; a sequence exactly as long as the window
  still shares.
- Greedy generation over the shared cache equals re-running the whole model at every step.
- DG's tree-attention beam decoder gives the hypotheses of the plain reordering decoder.
- Flash and flex attention take no custom mask: scored exactly, unshared and counted. The eager
  case shows that a boolean mask would have been wrong (the check can fail).
"""

import json

import pytest
import torch

from advrace.models.decoders.continuation_scoring import shared_logprobs
from advrace.models.decoders.greedy_decoding import greedy_generate
from advrace.models.decoders.packed_decoding import PackedCore, unmasked_reason
from advrace.models.decoders.packed_scoring import Request, unshared_logprobs

pytestmark = pytest.mark.usefixtures("one_thread")
VOCAB, WINDOW = 96, 16


def _config(family: str):
    import transformers as tf

    common = dict(vocab_size=VOCAB, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=256,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2)
    return {
        "llama": lambda: tf.LlamaConfig(**common),
        "qwen2": lambda: tf.Qwen2Config(**common),
        "qwen3": lambda: tf.Qwen3Config(**common, head_dim=8),
        "mistral": lambda: tf.MistralConfig(**common, sliding_window=WINDOW),
        "gemma2": lambda: tf.Gemma2Config(**common, head_dim=8, sliding_window=WINDOW),
        "gemma3": lambda: tf.Gemma3TextConfig(**{**common, "num_hidden_layers": 3}, head_dim=8,
                                              sliding_window=WINDOW,
                                              layer_types=["sliding_attention", "sliding_attention",
                                                           "full_attention"]),
        "phi3": lambda: tf.Phi3Config(**common, sliding_window=WINDOW),
        "gpt2": lambda: tf.GPT2Config(vocab_size=VOCAB, n_embd=32, n_layer=2, n_head=4, n_positions=256,
                                      bos_token_id=1, eos_token_id=2),
        "olmo": lambda: tf.OlmoConfig(**common),
        "olmo2": lambda: tf.Olmo2Config(**common),
        "opt": lambda: tf.OPTConfig(vocab_size=VOCAB, hidden_size=32, word_embed_proj_dim=32, ffn_dim=64,
                                    num_hidden_layers=2, num_attention_heads=4, max_position_embeddings=256,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2),
        "gptneox": lambda: tf.GPTNeoXConfig(vocab_size=VOCAB, hidden_size=32, intermediate_size=64,
                                            num_hidden_layers=2, num_attention_heads=4,
                                            max_position_embeddings=256, pad_token_id=0, bos_token_id=1,
                                            eos_token_id=2),
        "mpt": lambda: tf.MptConfig(vocab_size=VOCAB, d_model=32, n_heads=4, n_layers=2, max_seq_len=256,
                                    pad_token_id=0, bos_token_id=1, eos_token_id=2),
        "bloom": lambda: tf.BloomConfig(vocab_size=VOCAB, hidden_size=32, n_head=4, n_layer=2, pad_token_id=0,
                                        bos_token_id=1, eos_token_id=2),
        "falcon": lambda: tf.FalconConfig(vocab_size=VOCAB, hidden_size=32, num_attention_heads=4,
                                          num_hidden_layers=2, alibi=True, pad_token_id=0, bos_token_id=1,
                                          eos_token_id=2),
    }[family]()


SLIDING = {"mistral", "gemma2", "gemma3", "phi3"}
ALIBI = {"mpt", "bloom", "falcon"}  # fail the probe: MPT scores wrong packed, BLOOM and Falcon crash
EAGER_ONLY = {"gemma2", "mpt", "bloom"}  # gemma2: soft-capped attention; transformers refuses SDPA for all three
CASES = [(f, impl) for f in ("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "gpt2", "olmo",
                             "olmo2", "opt", "gptneox", "mpt", "bloom", "falcon")
         for impl in ("eager", "sdpa") if not (impl == "sdpa" and f in EAGER_ONLY)]


def tiny(family: str, impl: str, dtype=None):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    kwargs = {"dtype": dtype} if dtype is not None else {}
    model = AutoModelForCausalLM.from_config(_config(family), attn_implementation=impl, **kwargs).eval()
    assert model.config._attn_implementation == impl
    return model


def requests(seed: int = 0) -> list[Request]:
    """Questions of mixed lengths: prompts of 5-10 tokens (within the window) and 25-40 (beyond
    it), options of 1-4 tokens."""
    g = torch.Generator().manual_seed(seed)

    def ids(n):
        return tuple(torch.randint(3, VOCAB, (n,), generator=g).tolist())

    return [Request(ids(n), tuple(ids(1 + k) for k in range(4))) for n in (5, 10, 7, 25, 40)]


def _gap(a, b) -> float:
    return max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))


@pytest.mark.parametrize("family,impl", CASES)
def test_shared_log_likelihoods_equal_unshared_ones(family, impl):
    model = tiny(family, impl)
    core = PackedCore(model)
    assert core.describe()["mask"] == ("additive" if impl == "eager" else "boolean")
    reqs = requests()
    with torch.inference_mode():
        shared = shared_logprobs(model, reqs, core=core)
        reference = unshared_logprobs(model, reqs)
        alone = [shared_logprobs(model, [r])[0] for r in reqs]
    assert _gap(shared, reference) < 1e-4
    assert _gap(alone, reference) < 1e-4  # a question's scores do not depend on its batch
    assert len({round(v, 3) for row in shared for v in row}) > 10
    record = core.unshared.record()
    if family in ALIBI:
        assert core.limit == 0
        assert core.describe()["probe"] == {"dtype": "float32", "tolerance": "0.0001", "passed": False}
        assert record["shared"] == 0 and record["run_alone"] == 5
        ((reason, n),) = record["reasons"].items()
        assert n == 5 and reason.startswith("packed probe ") and impl in reason
    elif family in SLIDING:
        assert core.limit == WINDOW and record["shared"] == 3 and record["run_alone"] == 2
        assert record["reasons"] == {f"sliding window of {WINDOW} tokens": 2} and record["cost_ratio"] > 1
    else:
        assert core.limit is None and record["run_alone"] == 0 and record["shared"] == 5
    if family not in ALIBI:
        assert core.describe()["probe"] == {"dtype": "float32", "tolerance": "0.0001", "passed": True}


@pytest.mark.parametrize("family,impl", CASES)
def test_greedy_generation_equals_rerunning_the_model(family, impl):
    model = tiny(family, impl)
    contexts = [r.context for r in requests(1)][:4]
    with torch.inference_mode():
        fast = greedy_generate(model, contexts, max_new_tokens=5, stop=lambda t: False)
        for context, got in zip(contexts, fast):
            ids = list(context)
            for _ in range(5):
                ids.append(int(model(input_ids=torch.tensor([ids])).logits[0, -1].argmax()))
            assert got == tuple(ids[len(context):])


@pytest.mark.parametrize("family,impl", [("llama", "eager"), ("qwen3", "sdpa"), ("gpt2", "eager"),
                                         ("olmo2", "sdpa")])
def test_tree_beam_decoding_equals_the_reordering_decoder(family, impl):
    """Sliding-window families decode one question at a time with the reordering decoder itself."""
    from advrace.models.decoders.beam_search import beam_search
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder, ReorderingDecoder

    assert not any(CausalDecoder(tiny(f, "eager")).batched for f in SLIDING | ALIBI)
    model = tiny(family, impl)
    decoder = CausalDecoder(model)
    assert decoder.batched
    prompts = [r.context for r in requests(2)[:3]]
    width = max(len(p) for p in prompts)
    ids = torch.tensor([list(p) + [0] * (width - len(p)) for p in prompts])
    lengths = torch.tensor([len(p) for p in prompts])
    got = beam_search(decoder, ids, lengths, beam_size=3, max_length=4, eos_id=2)
    for q, p in enumerate(prompts):
        (want,) = beam_search(ReorderingDecoder(model), torch.tensor([list(p)]), torch.tensor([len(p)]),
                              beam_size=3, max_length=4, eos_id=2)
        assert [h.tokens for h in got[q]] == [h.tokens for h in want]
        assert [h.logprob for h in got[q]] == pytest.approx([h.logprob for h in want], abs=1e-4)


@pytest.mark.parametrize("family", ["llama", "gemma2", "gpt2"])
def test_a_boolean_mask_under_eager_attention_masks_nothing(family):
    """What the core's additive mask fixes: eager attention adds the mask to the scores, so the
    boolean mask that SDPA reads would let options see each other (the scores then differ)."""
    model = tiny(family, "eager")
    core = PackedCore(model)
    core.additive = False  # the mask before the fix
    reqs = [r for r in requests() if len(r.context) < WINDOW]
    with torch.inference_mode():
        wrong = shared_logprobs(model, reqs, core=core)
        reference = unshared_logprobs(model, reqs)
    assert _gap(wrong, reference) > 1e-3


@pytest.mark.parametrize("family,impl", [("llama", "eager"), ("gemma2", "eager"), ("qwen2", "sdpa")])
def test_bf16_compute_and_bf16_weights_stay_finite_and_close(family, impl):
    """bf16 autocast over fp32 weights, and weights loaded in bf16 (the additive mask then takes
    bf16's minimum, not fp32's, which would overflow)."""
    reqs = [r for r in requests() if len(r.context) < WINDOW]
    fp32 = tiny(family, impl)
    with torch.inference_mode():
        reference = unshared_logprobs(fp32, reqs)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            autocast = shared_logprobs(fp32, reqs)
        weights = shared_logprobs(tiny(family, impl, dtype=torch.bfloat16), reqs)
    for got in (autocast, weights):
        assert all(torch.isfinite(torch.tensor(row)).all() for row in got)
        assert _gap(got, reference) < 0.25  # bf16 rounding, not a mask gone wrong (that gives > 1)


def test_a_sequence_exactly_as_long_as_the_window_shares_and_one_more_runs_alone():
    """The sliding-window boundary: a sliding layer lets a token see the last `window` tokens
    (itself included), so a pair feeding exactly WINDOW tokens is exact when shared; one more
    token is not (shown by forcing it to share) and runs alone."""
    g = torch.Generator().manual_seed(3)

    def ids(n):
        return tuple(torch.randint(3, VOCAB, (n,), generator=g).tolist())

    at = Request(ids(WINDOW - 2), (ids(3), ids(1), ids(2)))  # longest pair: WINDOW - 2 + 3 - 1 tokens fed
    past = Request(ids(WINDOW - 1), (ids(3), ids(2)))
    assert (at.longest, past.longest) == (WINDOW, WINDOW + 1)
    for family in sorted(SLIDING):
        model = tiny(family, "eager")
        core = PackedCore(model)
        with torch.inference_mode():
            got = shared_logprobs(model, [at, past], core=core)
            reference = unshared_logprobs(model, [at, past])
            core.limit = WINDOW + 1  # a boundary one token too far
            wrong = shared_logprobs(model, [past], core=core)
        assert _gap(got, reference) < 1e-4, family
        assert core.unshared.shared == 1 + 1 and core.unshared.reasons == {f"sliding window of {WINDOW} tokens": 1}
        assert _gap(wrong, reference[1:]) > 1e-4, family  # past the tolerance the test holds sharing to


def test_a_model_that_ignores_position_ids_is_caught_by_the_probe():
    """A model the core knows nothing about (as a trust_remote_code model would be), whose config
    says eager: it drops the position ids, so packed options would start at the wrong positions.
    The probe sees it and every question runs alone; the same model keeping its position ids
    shares."""
    from transformers import LlamaForCausalLM

    class DropsPositions(LlamaForCausalLM):
        def forward(self, *args, position_ids=None, **kwargs):
            return super().forward(*args, **kwargs)

    torch.manual_seed(0)
    model = DropsPositions._from_config(_config("llama"), attn_implementation="eager").eval()
    assert model.config._attn_implementation == "eager"
    core = PackedCore(model)
    assert core.limit == 0 and not core.probe["passed"] and "eager" in core.why_limited
    reqs = requests()
    with torch.inference_mode():
        assert _gap(shared_logprobs(model, reqs, core=core), unshared_logprobs(model, reqs)) < 1e-4
    assert core.unshared.record()["run_alone"] == 5
    assert PackedCore(tiny("llama", "eager")).limit is None


def test_the_probe_compares_in_fp32_under_autocast_and_at_the_weights_dtype_in_half_precision():
    """Scoring under bf16 autocast does not make the probe bf16 (it would then fail a right core
    on rounding, or pass a wrong one); bf16 weights are probed at bf16 with bf16's tolerance, which
    still catches a crash."""
    with torch.autocast("cpu", dtype=torch.bfloat16):
        # gemma3 under SDPA: a bf16 probe would part by ~1e-3 from rounding alone
        right, alibi = PackedCore(tiny("gemma3", "sdpa")), PackedCore(tiny("mpt", "eager"))
    assert right.limit == WINDOW and right.probe == {"dtype": "float32", "tolerance": "0.0001", "passed": True}
    assert alibi.limit == 0 and alibi.probe["dtype"] == "float32" and not alibi.probe["passed"]
    half = PackedCore(tiny("llama", "sdpa", dtype=torch.bfloat16))
    assert half.limit is None and half.probe == {"dtype": "bfloat16", "tolerance": "0.5", "passed": True}
    bloom = tiny("bloom", "eager", dtype=torch.bfloat16)
    core = PackedCore(bloom)
    assert core.limit == 0 and core.probe["dtype"] == "bfloat16" and "ValueError" in core.why_limited
    reqs = [r for r in requests() if len(r.context) < WINDOW]
    with torch.inference_mode():
        assert _gap(shared_logprobs(bloom, reqs, core=core), unshared_logprobs(bloom, reqs)) == 0


def test_flex_attention_is_scored_exactly_unshared_and_counted():
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    flex, eager = tiny("llama", "flex_attention"), tiny("llama", "eager")  # the same weights (seed 0)
    core = PackedCore(flex)
    assert core.limit == 0 and core.probe is None and core.describe()["mask"] == "none"
    reqs = requests()
    with torch.inference_mode():
        got = shared_logprobs(flex, reqs, core=core)
        assert _gap(got, unshared_logprobs(eager, reqs)) < 1e-4
    assert core.unshared.record()["reasons"] == {"attention 'flex_attention' takes no custom 4D mask": 5}
    assert not CausalDecoder(flex).batched  # DG decodes with the plain reordering decoder


def test_flash_attention_runs_unshared_instead_of_being_refused():
    """flash-attn cannot be installed here: a model built eager whose config then says
    flash_attention_2 meets the core's decision, which must not run the model packed (nor probe it)."""
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    assert unmasked_reason("sdpa") is None and unmasked_reason("eager") is None
    model = tiny("llama", "eager")
    model.config._attn_implementation = "flash_attention_2"
    core = PackedCore(model)
    assert core.limit == 0 and core.probe is None
    assert core.why_limited == unmasked_reason("flash_attention_2") == \
        "attention 'flash_attention_2' takes no custom 4D mask"
    assert core.describe()["attention"] == "flash_attention_2" and core.describe()["mask"] == "none"
    assert not CausalDecoder(model).batched


def test_evaluate_scores_an_alibi_model_unshared_and_counts_why(tmp_path):
    """End to end: a tiny MPT saved as a folder (as the issue met it: exit 0, wrong scores) is
    scored as its own unshared scoring scores it, and results.json counts every question as run
    alone with the probe's reason. (A flex-attention folder takes the same path, decided by
    `unmasked_reason`; its torch.compile costs a minute here.)"""
    from transformers import AutoTokenizer, MptConfig, MptForCausalLM

    from advrace.cli import main as cli_main
    from advrace.core.config import release_config_from_dict
    from advrace.formats import load
    from advrace.models.decoders.llm_scoring import load_causal_scorer
    from advrace.release import build_release
    from conftest import make_race_dir, make_tokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    torch.manual_seed(0)
    mpt = tmp_path / "mpt"
    MptForCausalLM(MptConfig(vocab_size=len(tok), d_model=32, n_heads=4, n_layers=2, max_seq_len=512,
                             pad_token_id=tok.pad_token_id)).save_pretrained(mpt)
    tok.save_pretrained(mpt)
    race = make_race_dir(tmp_path)
    release = tmp_path / "rel"
    build_release(release_config_from_dict({"data": {"path": str(race)}, "splits": [], "workers": 1}), release)
    examples = load(str(race)).examples
    out = tmp_path / "r"
    assert cli_main(["evaluate", str(release), "--model", str(mpt), "--out", str(out), "--no-bf16", "--quiet"]) == 0
    (entry,) = json.loads((out / "results.json").read_text())["results"].values()
    decoding = entry["source"]["decoding"]
    assert decoding["shared"] == 0 and decoding["run_alone"] == len(examples)
    assert decoding["probe"] == {"dtype": "float32", "tolerance": "0.0001", "passed": False}
    ((said, n),) = decoding["reasons"].items()
    assert said.startswith("packed probe ") and n == len(examples)
    scorer = load_causal_scorer(str(mpt), bf16=False)
    with torch.inference_mode():
        reference = unshared_logprobs(scorer.model, [scorer.mc_request(ex) for ex in examples])
    by_source = {ex.source_id: ref for ex, ref in zip(examples, reference)}
    records = [json.loads(x) for x in next((out / "predictions").glob("*.jsonl")).read_text().splitlines()]
    assert len(records) == len(examples)
    for rec in records:
        assert rec["scores"] == pytest.approx(by_source[rec["source_id"]], abs=1e-4)
