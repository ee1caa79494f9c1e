"""The one way a human-evaluation rate is written (advrace.metrics.human_rates): the card, `human-eval
validate` and `human-eval report` all read it, so these strings are what a reader sees in each."""

from __future__ import annotations

from advrace.human_eval.report import _f1_text, wilson
from advrace.metrics.human_rates import ci_text, kappa_text, percent_ci, validation_summary


def test_a_rate_is_a_percent_with_its_wilson_interval():
    assert percent_ci(5 / 7, wilson(5, 7), "valid") == "71.4% valid (95% CI 35.9–91.8)"  # docs/human-eval.md
    assert percent_ci(5 / 7, wilson(5, 7)) == "71.4% (95% CI 35.9–91.8)"  # a report cell: the column says what
    assert percent_ci(None, None, "valid") == "n/a"  # nobody judged: never a measured-looking 0
    assert ci_text((0.549, 0.894)) == "95% CI 54.9–89.4"
    assert _f1_text(0.5, (0.25, 0.75)) == "50.0 (95% CI 25.0–75.0)"  # F1 in points, the same interval


def test_kappa_has_two_places_or_is_na():
    assert (kappa_text(0.6234), kappa_text(-0.05), kappa_text(None)) == ("0.62", "-0.05", "n/a")


def test_one_splits_validation_in_one_line():
    v = {"judged": 7, "valid_rate": 5 / 7, "valid_ci": wilson(5, 7), "judgements": 21, "correct_rate": 16 / 21,
         "correct_ci": wilson(16, 21), "fleiss_kappa": 0.6234}
    assert validation_summary(v) == ("7 items judged, 71.4% valid (95% CI 35.9–91.8), 76.2% of 21 judgements chose "
                                     "the gold (95% CI 54.9–89.4), kappa 0.62")
    old = {k: v[k] for k in ("judged", "valid_rate", "valid_ci", "fleiss_kappa")}  # validated before the correct rate
    assert validation_summary(old) == "7 items judged, 71.4% valid (95% CI 35.9–91.8), kappa 0.62"
    assert validation_summary({"judged": 0}) == "none judged"
