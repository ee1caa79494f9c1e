"""The SQuAD attacks' causal LM (their `answer_model`), loaded once per process and (name,
precision): the closed-book answers (attacks.squad.closed_book) and the fluency of the sentences
(attacks.sentences.fluency) read the same copy.

A build's forked workers share the copy their parent loaded (`fork_references` before the fork,
`check_forked` in each worker) instead of each loading its own, but only once a probe shows the
forked copy computes what the parent's did: torch's thread pools are not promised to survive a
fork, so a worker whose copy fails the probe drops it and loads its own, and says so.
"""

from __future__ import annotations

from advrace.models.runtime import loading
from advrace.models.runtime.loading import load_model

_LOADED: dict[tuple, tuple] = {}
# A short fixed input whose log-probs a forked copy must reproduce exactly (`check_forked`).
PROBE_TEXT = "Tom walked to school with his sister, and the teacher told them a story."


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


def probe_logprobs(loaded: tuple):
    """The log-probs of PROBE_TEXT under a loaded LM, at torch's thread count now (the caller sets
    it: the count moves the last bits)."""
    import torch  # deferred: start-up time

    model, tok, device, bf16 = loaded
    ids = tok(PROBE_TEXT, return_tensors="pt").input_ids.to(device)
    with torch.no_grad(), torch.autocast(device.type, dtype=torch.bfloat16, enabled=bool(bf16)):
        return torch.log_softmax(model(ids).logits.float(), dim=-1)


def fork_references(keys) -> dict[tuple, object]:
    """In the parent, before forking: the probe log-probs of the LMs a build's attacks loaded
    (`keys`, as `loaded_lm` keys them), which a worker's forked copy must reproduce to be used
    (`check_forked`)."""
    return {key: probe_logprobs(_LOADED[key]) for key in sorted(keys, key=repr) if key in _LOADED}


def check_forked(references: dict[tuple, object]) -> list[str]:
    """In a forked worker: each inherited LM whose probe differs from the parent's (or raises) is
    dropped (here and from the shared loads), so that the worker's first use loads its own copy.
    Returns one note per copy dropped."""
    import torch  # deferred: start-up time

    notes = []
    for key, reference in references.items():
        if key not in _LOADED:
            continue
        try:
            reason = None if torch.equal(probe_logprobs(_LOADED[key]), reference) else \
                "its log-probs differ from the parent's"
        except Exception as exc:  # any failure of the forked copy means: do not use it
            reason = f"{type(exc).__name__}: {exc}"
        if reason:
            loading.SHARED.forget(_LOADED.pop(key)[0])
            notes.append(f"{key[0]}: the forked copy failed its probe ({reason}); this worker loads its own")
    return notes
