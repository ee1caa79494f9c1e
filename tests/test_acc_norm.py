"""lm-evaluation-harness's acc_norm, one definition read by evaluation and by the judge.

lm-eval divides each choice's log-likelihood by `len(choice)`: characters, of the choice without
the space the continuation puts before it. The numbers below tell that apart from the near misses:
the option with its leading space, tokens (here one token per option), and UTF-8 bytes."""

from __future__ import annotations

import pytest

from advrace.core.examples import MCExample
from advrace.evaluation.scoring import _score_mc
from advrace.models.judge import AnswerabilityJudge
from advrace.models.protocol.acc_norm import per_character
from advrace.models.protocol.llm_prompts import LOGLIKELIHOOD

OPTIONS = ("a", "abcd", "abc", "abcdefghij")
SCORES = [-3.0, -10.0, -6.0, -40.0]
# per character -3, -2.5, -2, -4 -> option 2; the raw log-likelihood picks option 0, and so does
# dividing by the option with its leading space (-1.5, -2, -1.5, -3.64) or by tokens (one each)
PER_CHARACTER = [-3.0, -2.5, -2.0, -4.0]


def test_acc_norm_divides_by_the_options_own_characters():
    assert per_character(SCORES, OPTIONS) == PER_CHARACTER
    assert per_character([-5.0], ["café"]) == [-1.25]  # 4 characters, 5 bytes
    assert per_character([-2.0], [""]) == [-2.0]  # an empty option counts as one character


class FixedScorer:
    """A decoder LM scored by log-likelihood, whose option scores are SCORES."""

    method = LOGLIKELIHOOD
    contexts = None
    name = "fixed"

    def predict_mc(self, examples, desc=None, progress=False):
        return [list(SCORES) for _ in examples]


EXAMPLE = MCExample(id="q1", passage="p", question="q", options=OPTIONS, label=2)


def test_evaluation_reports_accuracy_norm_per_character():
    (result,) = _score_mc({"original": [EXAMPLE]}, FixedScorer(), None, False).values()
    (record,) = result["records"]
    assert (record["prediction"], record["prediction_norm"]) == (0, 2)
    assert (result["accuracy"], result["accuracy_norm"]) == (0.0, 100.0)


def test_the_judge_scores_a_causal_lm_per_character():
    judge = AnswerabilityJudge(FixedScorer(), "fixed", 0.0, per_char=True)
    assert judge.option_scores([EXAMPLE]) == [pytest.approx(PER_CHARACTER)]
