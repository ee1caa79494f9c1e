"""The kinds of model evaluation scores, one registry entry each (advrace.models.kinds): which
release tasks each fits and which settings it honours; evaluation asks the registry."""

import pytest

from advrace.core.errors import ConfigError
from advrace.core.registry import UnknownName
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.evaluation.scoring import check_fits, make_scorer
from advrace.models.kinds import MODEL_KINDS, kinds_for


def test_each_kind_says_what_it_fits_and_honours():
    assert list(MODEL_KINDS) == ["multiple_choice", "reader", "span_extraction", "causal_lm"]
    assert kinds_for(MULTIPLE_CHOICE) == ("multiple_choice", "reader", "causal_lm")
    assert kinds_for(EXTRACTIVE_QA) == ("span_extraction", "causal_lm")
    assert [k for k, kind in MODEL_KINDS.items() if "model_args" in kind.honours] == ["causal_lm"]
    with pytest.raises(UnknownName, match="unknown model kind 'unilm'"):
        MODEL_KINDS.lookup("unilm")


def test_evaluation_asks_the_registry():
    assert check_fits("sliding-window", MULTIPLE_CHOICE, "REL") == "reader"
    with pytest.raises(ConfigError, match="is a built-in reader, which cannot score the extractive-QA"):
        check_fits("sliding-window", EXTRACTIVE_QA, "REL")
    reader = make_scorer("sliding-window", batch_size=4, max_length=None, bf16=None, accelerator=None)
    assert hasattr(reader, "predict_mc")
    with pytest.raises(ConfigError, match="do not apply to a built-in reader"):
        make_scorer("sliding-window", batch_size=4, max_length=None, bf16=None, accelerator=None,
                    model_args="dtype=bfloat16")
