"""The SQuAD attacks' causal LM (their `answer_model`), loaded once per process and (name,
precision): the closed-book answers (attacks.squad.closed_book) and the fluency of the sentences
(attacks.sentences.fluency) read the same copy.
"""

from __future__ import annotations

from advrace.models.runtime.loading import load_model

_LOADED: dict[tuple, tuple] = {}


def loaded_lm(model: str, bf16: bool | None = False) -> tuple:
    """(model, tokenizer, device, bf16) of the SQuAD attacks' causal LM, loaded once per process
    and name: the closed-book answers and the fluency of the sentences share it."""
    key = (model, bf16)
    if key not in _LOADED:
        from transformers import AutoModelForCausalLM  # deferred: start-up time (torch, transformers)

        _LOADED[key] = load_model(AutoModelForCausalLM, model, bf16,
                                  "answer_model (the closed-book fakes and the fluency of addonesent, addsentmod, "
                                  "addsent)", '`advrace train` (objective causal_lm); or set answer_model to smollm2, '
                                  'or to "" for Jia and Liang\'s rules alone', quiet=True)
    return _LOADED[key]
