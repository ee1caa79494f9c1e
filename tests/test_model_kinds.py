"""The kinds of model evaluation scores, one registry entry each (advrace.models.kinds): which
release tasks each fits and which settings it honours, and evaluation asking the registry, never a
list of its own: a checkpoint is told by its config and refused where it does not fit, and a kind
registered later is scored with the settings it honours and no others. The registry's order is
not part of its meaning, and nothing here depends on it."""

import json

import pytest

from advrace.core.errors import ConfigError
from advrace.core.registry import UnknownName
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.evaluation.scoring import check_fits, make_scorer
from advrace.models.kinds import MODEL_KINDS, SETTINGS, ModelKind, kinds_for


def test_each_kind_says_what_it_fits_and_honours():
    assert {name: set(kind.tasks) for name, kind in MODEL_KINDS.items()} == {
        "multiple_choice": {MULTIPLE_CHOICE}, "reader": {MULTIPLE_CHOICE}, "span_extraction": {EXTRACTIVE_QA},
        "causal_lm": {MULTIPLE_CHOICE, EXTRACTIVE_QA}}
    assert set(kinds_for(MULTIPLE_CHOICE)) == {"multiple_choice", "reader", "causal_lm"}
    assert set(kinds_for(EXTRACTIVE_QA)) == {"span_extraction", "causal_lm"}
    assert {k for k, kind in MODEL_KINDS.items() if "model_args" in kind.honours} == {"causal_lm"}
    assert {k for k, kind in MODEL_KINDS.items() if "accelerator" in kind.honours} == \
        {"multiple_choice", "reader", "causal_lm"}
    for kind in MODEL_KINDS.values():
        assert set(kind.honours) <= set(SETTINGS) and kind.description
    with pytest.raises(UnknownName, match="unknown model kind 'unilm'"):
        MODEL_KINDS.lookup("unilm")


@pytest.mark.parametrize("architecture, kind, fits", [
    ("BertForMultipleChoice", "multiple_choice", {MULTIPLE_CHOICE}),
    ("BertForQuestionAnswering", "span_extraction", {EXTRACTIVE_QA}),
    ("LlamaForCausalLM", "causal_lm", {MULTIPLE_CHOICE, EXTRACTIVE_QA}),
    ("GPT2LMHeadModel", "causal_lm", {MULTIPLE_CHOICE, EXTRACTIVE_QA}),
    ("BertModel", None, set()),
])
def test_a_checkpoint_is_told_by_its_config_and_refused_where_it_does_not_fit(tmp_path, architecture, kind, fits):
    (tmp_path / "config.json").write_text(json.dumps({"architectures": [architecture]}), encoding="utf-8")
    for task in (MULTIPLE_CHOICE, EXTRACTIVE_QA):
        if task in fits:
            assert check_fits(str(tmp_path), task, "REL") == kind
        else:
            with pytest.raises(ConfigError, match=f"{architecture} is .*, which cannot score the .* release REL"):
                check_fits(str(tmp_path), task, "REL")


def test_evaluation_asks_the_registry():
    assert check_fits("sliding-window", MULTIPLE_CHOICE, "REL") == "reader"
    with pytest.raises(ConfigError, match="is a built-in reader, which cannot score the extractive-QA"):
        check_fits("sliding-window", EXTRACTIVE_QA, "REL")
    reader = make_scorer("sliding-window", batch_size=4, max_length=None, bf16=None, accelerator=None)
    assert hasattr(reader, "predict_mc")
    with pytest.raises(ConfigError, match="do not apply to a built-in reader"):
        make_scorer("sliding-window", batch_size=4, max_length=None, bf16=None, accelerator=None,
                    model_args="dtype=bfloat16")


def test_a_kind_registered_later_gets_the_settings_it_honours_and_no_others():
    given = []

    class Scorer:
        def predict_mc(self, examples):
            return [[0.0] * len(ex.options) for ex in examples]

    def loader(model, **settings):
        given.append((model, settings))
        return Scorer()

    MODEL_KINDS.add("test_kind", ModelKind("test_kind", "a test kind", (MULTIPLE_CHOICE,), ("max_length", "llm"),
                                           loader))
    try:
        assert "test_kind" in kinds_for(MULTIPLE_CHOICE) and "test_kind" not in kinds_for(EXTRACTIVE_QA)
        scorer = make_scorer("some/model", batch_size=4, max_length=96, bf16=True, accelerator=None,
                             kind="test_kind", llm={"method": "letter"})
        assert isinstance(scorer, Scorer)
        assert given == [("some/model", {"max_length": 96, "method": "letter"})]
        with pytest.raises(ConfigError, match="do not apply to a test kind"):
            make_scorer("some/model", batch_size=4, max_length=96, bf16=True, accelerator=None, kind="test_kind",
                        model_args="dtype=bfloat16")
    finally:
        MODEL_KINDS.unregister("test_kind")
    assert "test_kind" not in kinds_for(MULTIPLE_CHOICE)
