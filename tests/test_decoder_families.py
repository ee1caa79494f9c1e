"""Every decoder family users run, scored right by the packed-decoding core
(advrace.models.decoders.packed_decoding): tiny random configs of Llama, Qwen2, Qwen3, Mistral (sliding
window), Gemma 2 (eager only, soft-capping, sliding and global layers), Gemma 3 (sliding and
global layers), Phi-3 (sliding window), GPT-2 (learned positions) and OLMo 1 and 2, each with
eager and SDPA attention where the model has both.

- Options packed over a shared prompt give each (prompt, option) pair's log-likelihood as the
  pair run alone does, within 1e-4 in fp32, for batches of mixed lengths and prompts longer than
  the sliding window (those run alone, counted).
- Greedy generation over the shared cache equals re-running the whole model at every step.
- DG's tree-attention beam decoder gives the hypotheses of the plain reordering decoder.
- An attention the core cannot mask is refused, and the eager case shows that a boolean mask
  would have been wrong (the check can fail).
"""

import json

import pytest
import torch

from advrace.models.decoders.continuation_scoring import Request, greedy_generate, shared_logprobs, unshared_logprobs
from advrace.models.decoders.packed_decoding import PackedCore, UnmaskableAttention

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
    }[family]()


SLIDING = {"mistral", "gemma2", "gemma3", "phi3"}
EAGER_ONLY = {"gemma2"}  # soft-capped attention: transformers refuses SDPA for it
CASES = [(f, impl) for f in ("llama", "qwen2", "qwen3", "mistral", "gemma2", "gemma3", "phi3", "gpt2", "olmo",
                             "olmo2")
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
    assert core.describe["mask"] == ("additive" if impl == "eager" else "boolean")
    reqs = requests()
    with torch.inference_mode():
        shared = shared_logprobs(model, reqs, core=core)
        reference = unshared_logprobs(model, reqs)
        alone = [shared_logprobs(model, [r])[0] for r in reqs]
    assert _gap(shared, reference) < 1e-4
    assert _gap(alone, reference) < 1e-4  # a question's scores do not depend on its batch
    assert len({round(v, 3) for row in shared for v in row}) > 10
    record = core.fallback.record()
    if family in SLIDING:
        assert core.limit == WINDOW and record["shared"] == 3 and record["run_alone"] == 2
        assert record["reasons"] == {f"sliding window of {WINDOW} tokens": 2} and record["cost_ratio"] > 1
    else:
        assert core.limit is None and record["run_alone"] == 0 and record["shared"] == 5


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
    from advrace.models.decoders.causal_encoding import CausalDecoder, ReorderingDecoder

    assert not any(CausalDecoder(tiny(f, "eager")).batched for f in SLIDING)
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


def test_an_attention_the_core_cannot_mask_is_refused():
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_config(_config("llama"), attn_implementation="flex_attention")
    with pytest.raises(UnmaskableAttention, match="flex_attention.*attn_implementation=sdpa"):
        PackedCore(model)
    # DG's decoder falls back to the plain reordering decoder, which needs no custom mask
    from advrace.models.decoders.causal_encoding import CausalDecoder

    assert not CausalDecoder(model).batched


def test_evaluate_refuses_an_unmaskable_model_with_exit_2(tmp_path, capsys):
    """A folder whose config asks for an attention the core cannot mask gets no number."""
    from transformers import AutoTokenizer

    from advrace.cli import main as cli_main
    from advrace.core.config import release_config_from_dict
    from advrace.release import build_release
    from conftest import make_race_dir, make_tokenizer, save_tiny_llama

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    lm = save_tiny_llama(tok, tmp_path / "lm")
    config = json.loads((tmp_path / "lm" / "config.json").read_text())
    (tmp_path / "lm" / "config.json").write_text(json.dumps({**config, "attn_implementation": "flex_attention"}))
    release = tmp_path / "rel"
    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "splits": [],
                                            "workers": 1}), release)
    code = cli_main(["evaluate", str(release), "--model", lm, "--out", str(tmp_path / "r"), "--quiet"])
    err = capsys.readouterr().err
    assert code == 2 and "flex_attention" in err and "attn_implementation=sdpa" in err
    assert not (tmp_path / "r").exists()
