"""The one greedy decoder (advrace.models.decoders.greedy_decoding) with a shared prefix, as the
closed-book fakes use it (their few-shot prompt): each row's tokens are those of the prefix and
its context run alone, the prefix runs once, a row too long for the shared cache runs alone and is
counted, and a row that stops early keeps its stopping token while the others run on."""

import pytest
import torch

from advrace.models.decoders.greedy_decoding import SharedPrefix, greedy_generate
from advrace.models.decoders.packed_decoding import PackedCore
from test_decoder_families import VOCAB, WINDOW, _config

pytestmark = pytest.mark.usefixtures("one_thread")
NEW = 5


def _ids(n: int, seed: int) -> tuple[int, ...]:
    return tuple(torch.randint(3, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist())


PREFIX = _ids(6, 0)
CONTEXTS = [_ids(7, 1), _ids(1, 2), _ids(3, 3)]  # mixed lengths, one a single token


def tiny(family: str, impl: str):
    """test_decoder_families' tiny model with weights large enough that a position off by the
    prefix's length changes the tokens."""
    from transformers import AutoModelForCausalLM

    config = _config(family)
    config.initializer_range = 0.5
    torch.manual_seed(0)
    return AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()


def _rerun(model, ids, steps: int = NEW) -> tuple[int, ...]:
    """The reference: the whole sequence re-run at every step, nothing cached or shared."""
    ids, out = list(ids), []
    for _ in range(steps):
        out.append(int(model(input_ids=torch.tensor([ids + out])).logits[0, -1].argmax()))
    return tuple(out)


@pytest.mark.parametrize("family, impl", [("llama", "eager"), ("llama", "sdpa"), ("qwen3", "sdpa"),
                                          ("gpt2", "eager"), ("mistral", "sdpa")])
def test_a_shared_prefix_gives_each_row_the_tokens_of_its_whole_context(family, impl):
    """Mistral's window (16) holds the prefix, the short contexts and their answers, not the
    7-token context's (6 + 7 + 5 - 1 = 17 tokens fed): that row runs alone, counted with what it
    cost (its prefix too) against what sharing would have run (its own tokens)."""
    model = tiny(family, impl)
    core = PackedCore(model)
    with torch.inference_mode():
        got = greedy_generate(model, CONTEXTS, max_new_tokens=NEW, stop=lambda t: False, core=core,
                              prefix=SharedPrefix(PREFIX))
        want = [_rerun(model, PREFIX + c) for c in CONTEXTS]
    assert got == want
    assert len(set(got)) > 1  # the answer depends on the context
    record = core.unshared.record()
    if family == "mistral":
        own = len(CONTEXTS[0]) + NEW - 1
        assert (record["shared"], record["run_alone"]) == (2, 1)
        assert record["reasons"] == {f"sliding window of {WINDOW} tokens": 1}
        assert (record["tokens_run_alone"], record["tokens_if_shared"]) == (len(PREFIX) + own, own)
    else:
        assert (record["shared"], record["run_alone"]) == (3, 0)


@pytest.mark.parametrize("family", ["llama", "mistral"])
def test_a_row_that_stops_early_keeps_its_stop_token_and_the_others_run_on(family):
    """`stop` is asked after each token a row takes: the row ends with the token that stopped it
    (the closed-book answer keeps the token that brings its line break), whether it shared the
    prefix or ran alone (mistral's long row), and a stopped row changes no other row's tokens."""
    model = tiny(family, "sdpa")
    with torch.inference_mode():
        free = [_rerun(model, PREFIX + c, steps=8) for c in CONTEXTS]
        # a token the first row takes second, that some other row never takes
        token = next(t for t in free[0][1:] if any(t not in other for other in free[1:]))

        def stop(tokens):
            return tokens[-1] == token

        got = greedy_generate(model, CONTEXTS, max_new_tokens=8, stop=stop, prefix=SharedPrefix(PREFIX))
    want = [f[:f.index(token) + 1] if token in f else f for f in free]
    assert got == want
    assert len(got[0]) < 8 and any(len(g) == 8 for g in got[1:])


def test_the_prefix_runs_once_for_every_batch():
    """Two batches over one SharedPrefix: the prefix's tokens go through the model once."""
    model = tiny("llama", "sdpa")
    core = PackedCore(model)
    runs = []
    prefill = core.prefill
    core.prefill = lambda prefixes, *a, **k: runs.append([tuple(p) for p in prefixes]) or prefill(prefixes, *a, **k)
    shots = SharedPrefix(PREFIX)
    with torch.inference_mode():
        first = greedy_generate(model, CONTEXTS[:2], max_new_tokens=3, stop=lambda t: False, core=core, prefix=shots)
        second = greedy_generate(model, CONTEXTS[2:], max_new_tokens=3, stop=lambda t: False, core=core, prefix=shots)
        assert first + second == [_rerun(model, PREFIX + c, steps=3) for c in CONTEXTS]
    assert runs.count([PREFIX]) == 1
    assert all(PREFIX not in rows or rows == [PREFIX] for rows in runs)
