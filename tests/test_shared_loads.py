"""One process loads a model once (advrace.models.runtime.loading.load_model): a second load of
the same checkpoint with the same options, while the first is held, is the same object; one whose
shared state a user changed, one with other options, one saved again, or one no longer held, is
loaded afresh."""

from __future__ import annotations

import gc

import pytest

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")

from advrace.models.runtime import loading  # noqa: E402
from advrace.models.runtime.model_args import ModelArgs  # noqa: E402
from tests.conftest import make_tokenizer, save_tiny_llama  # noqa: E402


@pytest.fixture
def lm(tmp_path):
    tok = transformers.AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    loading.SHARED.clear()
    yield save_tiny_llama(tok, tmp_path / "lm")
    loading.SHARED.clear()


def _load(path, **kwargs):
    return loading.load_model(transformers.AutoModelForCausalLM, path, False, quiet=True, **kwargs)


def _logits(loaded):
    ids = loaded.tokenizer("tom lives in a small village", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return loaded.model(ids.to(loaded.device)).logits


def test_a_held_model_is_shared_and_scores_as_a_fresh_load(lm):
    first = _load(lm)
    expected = _logits(first)
    second = _load(lm)
    assert second.model is first.model and second.tokenizer is first.tokenizer
    assert torch.equal(_logits(second), expected)
    loading.SHARED.clear()
    fresh = _load(lm)
    assert fresh.model is not first.model and torch.equal(_logits(fresh), expected)


def test_a_model_no_one_holds_is_freed_and_loaded_again(lm):
    import weakref

    first = _load(lm)
    gone = weakref.ref(first.model)
    del first
    gc.collect()
    assert gone() is None, "the registry must not keep a model alive"
    again = _load(lm)
    assert again.model is not None and loading.SHARED.shared == 0


@pytest.mark.parametrize("change", ["padding_side", "train", "generation", "attention", "weights in place",
                                    "weights replaced"])
def test_a_model_whose_shared_state_was_changed_is_not_handed_out(lm, change):
    first = _load(lm)
    if change == "padding_side":
        first.tokenizer.padding_side = "left" if first.tokenizer.padding_side == "right" else "right"
    elif change == "train":
        first.model.train()
    elif change == "generation":
        first.model.generation_config.max_new_tokens = 3
    elif change == "attention":
        first.model.config._attn_implementation = "eager"
    elif change == "weights in place":
        with torch.no_grad():
            first.model.lm_head.weight.mul_(1.0)  # the same values, but written: a trainer's step is such a write
    else:
        first.model.lm_head.weight = torch.nn.Parameter(first.model.lm_head.weight.detach().clone())
    second = _load(lm)
    assert second.model is not first.model and loading.SHARED.changed == 1
    assert not second.model.training


def test_other_options_or_a_folder_saved_again_are_other_loads(lm, tmp_path):
    first = _load(lm)
    eager = _load(lm, model_args=ModelArgs(attn_implementation="eager"))
    assert eager.model is not first.model
    assert eager.model.config._attn_implementation == "eager" != first.model.config._attn_implementation
    tok = transformers.AutoTokenizer.from_pretrained(lm)
    with torch.no_grad():
        first.model.model.embed_tokens.weight.add_(1.0)
    first.model.save_pretrained(lm)
    tok.save_pretrained(lm)
    again = _load(lm)
    assert again.model is not first.model
    assert torch.equal(again.model.model.embed_tokens.weight, first.model.model.embed_tokens.weight)
