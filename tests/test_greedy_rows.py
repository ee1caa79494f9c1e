"""Rows leaving a packed greedy batch (advrace.models.decoders.greedy_decoding): a row that stops
is dropped from the tokens, positions, key slots and cache, and the rows left decode on. On every
family the packed core shares for (eager and SDPA), rows that stop at different steps, with and
without a shared prefix, get the tokens of their whole sequence re-run alone: a row dropped a step
early loses its last token, and a cache row mixed with another's (or slots or positions left out
of step with the cache) changes the tokens of the rows after it. A cache the core cannot drop rows
from keeps them (counted), and a model whose forward takes no `logits_to_keep` prefills with its
full logits (counted); both give the same tokens."""

import pytest
import torch

from advrace.models.decoders.greedy_decoding import SharedPrefix, greedy_generate
from advrace.models.decoders.packed_decoding import PackedCore
from test_decoder_families import ALIBI, CASES, VOCAB
from test_greedy_decoding import _rerun, tiny

pytestmark = pytest.mark.usefixtures("one_thread")
NEW = 6


def _ids(n: int, seed: int) -> tuple[int, ...]:
    return tuple(torch.randint(3, VOCAB, (n,), generator=torch.Generator().manual_seed(seed)).tolist())


PREFIX = _ids(4, 10)  # 4 + the longest context (6) + NEW - 1 = 15 tokens: within the sliding window (16)
CONTEXTS = [_ids(n, 20 + i) for i, n in enumerate((5, 1, 6, 3, 2, 4))]
STOPS_AT = (2, NEW, 1, 4, 3, 5)  # the step at which each row stops (NEW: it runs to the end)


def _stops(model, contexts, prefix):
    """(stop, want): a stop that ends each row at its STOPS_AT step (it stops on that row's
    tokens so far), and each row's tokens re-run alone up to where `stop` first says done."""
    free = [_rerun(model, prefix + c, steps=NEW) for c in contexts]
    ends = {f[:k] for f, k in zip(free, STOPS_AT) if k < NEW}

    def stop(tokens):
        return tuple(tokens) in ends

    want = [next((f[:k] for k in range(1, NEW + 1) if f[:k] in ends), f) for f in free]
    return stop, want


class _Watched(PackedCore):
    """A core that records the batch sizes its rows were dropped to."""

    def __init__(self, model):
        super().__init__(model)
        self.kept_sizes = []

    def select_rows(self, cache, rows):
        self.kept_sizes.append(len(rows))
        return super().select_rows(cache, rows)


@pytest.mark.parametrize("with_prefix", [True, False], ids=["prefix", "no-prefix"])
@pytest.mark.parametrize("family, impl", [c for c in CASES if c[0] not in ALIBI])
def test_rows_that_stop_at_different_steps_leave_the_batch_with_their_own_tokens(family, impl, with_prefix):
    model = tiny(family, impl)
    core = _Watched(model)
    prefix = PREFIX if with_prefix else ()
    with torch.inference_mode():
        stop, want = _stops(model, CONTEXTS, prefix)
        got = greedy_generate(model, CONTEXTS, max_new_tokens=NEW, stop=stop, core=core,
                              prefix=SharedPrefix(prefix) if with_prefix else None)
    assert got == want
    assert len({len(w) for w in want}) >= 4  # rows stop at several different steps
    assert len(set(want)) >= 4  # and most rows's tokens differ from the others'
    assert core.unshared.record()["run_alone"] == 0
    assert core.kept_sizes and core.kept_sizes == sorted(core.kept_sizes, reverse=True)
    assert core.kept_sizes[-1] < len(CONTEXTS) - 1 and core.rows_kept == 0


def test_a_cache_that_cannot_drop_rows_keeps_them_and_counts_them():
    model = tiny("llama", "sdpa")
    core = PackedCore(model)
    core.select_rows = lambda cache, rows: False
    with torch.inference_mode():
        stop, want = _stops(model, CONTEXTS, PREFIX)
        got = greedy_generate(model, CONTEXTS, max_new_tokens=NEW, stop=stop, core=core, prefix=SharedPrefix(PREFIX))
    assert got == want
    last = max(len(w) for w in want)
    assert core.rows_kept == sum(len(w) < last for w in want) > 1  # each row that stopped before the last


def test_a_forward_without_logits_to_keep_prefills_with_full_logits():
    from transformers import LlamaForCausalLM

    class Plain(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None):
            return super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                   past_key_values=past_key_values, use_cache=use_cache)

    reference = tiny("llama", "sdpa")
    model = Plain(reference.config).eval()
    model.load_state_dict(reference.state_dict())
    core = PackedCore(model)
    assert not core.keeps_logits and PackedCore(reference).keeps_logits
    with torch.inference_mode():
        stop, want = _stops(reference, CONTEXTS, PREFIX)
        got = greedy_generate(model, CONTEXTS, max_new_tokens=NEW, stop=stop, core=core, prefix=SharedPrefix(PREFIX))
    assert got == want
    assert core.full_logit_prefills >= 2  # the prefix's and the rows' (the probe's too)


def test_a_forward_that_slices_logits_the_old_way_prefills_with_full_logits():
    """A family that takes `logits_to_keep` but slices with it as `hidden[:, keep]` (biogpt, csm,
    remote code) gives [rows, rows, 1, vocab] for a 2D one: the core's probe sees the shape and
    asks for no slice, and the answers are the reference's."""
    from transformers import LlamaForCausalLM

    class OldSlicing(LlamaForCausalLM):
        def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None,
                    use_cache=None, logits_to_keep=0, **kwargs):
            out = super().forward(input_ids=input_ids, attention_mask=attention_mask, position_ids=position_ids,
                                  past_key_values=past_key_values, use_cache=use_cache)
            if isinstance(logits_to_keep, torch.Tensor):
                out.logits = out.logits[:, logits_to_keep]
            return out

    reference = tiny("llama", "sdpa")
    model = OldSlicing(reference.config).eval()
    model.load_state_dict(reference.state_dict())
    core = PackedCore(model)
    assert not core.keeps_logits
    with torch.inference_mode():
        stop, want = _stops(reference, CONTEXTS, PREFIX)
        got = greedy_generate(model, CONTEXTS, max_new_tokens=NEW, stop=stop, core=core, prefix=SharedPrefix(PREFIX))
    assert got == want
    assert core.full_logit_prefills >= 2


def test_the_shared_prefix_is_not_changed_by_the_batches_that_use_it():
    """The prefix's cache is viewed, not copied, into each batch: decoding must never write
    through the views into it."""
    model = tiny("llama", "eager")
    core = PackedCore(model)
    shots = SharedPrefix(PREFIX)
    with torch.inference_mode():
        stop, want = _stops(model, CONTEXTS, PREFIX)
        first = greedy_generate(model, CONTEXTS[:3], max_new_tokens=NEW, stop=stop, core=core, prefix=shots)
        keys = [layer.keys.clone() for layer in shots._cache.layers]
        second = greedy_generate(model, CONTEXTS[3:], max_new_tokens=NEW, stop=stop, core=core, prefix=shots)
        again = greedy_generate(model, CONTEXTS[:3], max_new_tokens=NEW, stop=stop, core=core, prefix=shots)
    assert first + second == want and again == first
    assert all(torch.equal(k, layer.keys) for k, layer in zip(keys, shots._cache.layers))
    assert all(layer.keys.shape[0] == 1 for layer in shots._cache.layers)
