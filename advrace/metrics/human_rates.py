"""What human validation's numbers mean, and the one way each is written.

The dataset card, `advrace human-eval validate` and `advrace human-eval report` all say a valid
rate as "71.4% valid (95% CI 35.9–91.8)" and kappa to two places, and define the rates with the
same sentence (docs/human-eval.md). They read it here, below all three, so that the wording cannot
drift between a card and the report it was validated from.
"""

from __future__ import annotations

from advrace.core.text import plural

RATES = ("A judgement is a valid vote only when the annotator chose the gold answer; an item is valid when "
         "the majority of its judgements are valid votes (a tie is invalid). Valid rate: the share of judged "
         "items that are valid; correct rate: the share of judgements that chose the gold; kappa: Fleiss' kappa "
         "of the vote, over the items with all their judgements.")


def ci_text(ci) -> str:
    """A 95% interval of a share, in percent points: "95% CI 35.9–91.8"."""
    return f"95% CI {100 * ci[0]:.1f}–{100 * ci[1]:.1f}"


def percent_ci(rate: float | None, ci, what: str = "") -> str:
    """A rate as a percent with its 95% interval, as every human-evaluation rate is written
    ("71.4% valid (95% CI 35.9–91.8)"); n/a for none."""
    if rate is None:
        return "n/a"
    return f"{100 * rate:.1f}%{' ' + what if what else ''} ({ci_text(ci)})"


def kappa_text(kappa: float | None) -> str:
    """Fleiss' kappa to two places; n/a where it is undefined (one judgement per item, or all agree)."""
    return "n/a" if kappa is None else f"{kappa:.2f}"


def validation_summary(v: dict) -> str:
    """One split's validation in one line: "7 items judged, 71.4% valid (95% CI ...), 76.2% of 21
    judgements chose the gold (95% CI ...), kappa 0.62"."""
    if not v["judged"]:
        return "none judged"
    # a release validated by advrace before the correct rate was recorded has none to give
    correct = ""
    if "correct_rate" in v:
        judgements = plural(v["judgements"], "judgement")
        correct = percent_ci(v["correct_rate"], v["correct_ci"], f"of {judgements} chose the gold") + ", "
    return (f"{plural(v['judged'], 'item')} judged, {percent_ci(v['valid_rate'], v['valid_ci'], 'valid')}, {correct}"
            f"kappa {kappa_text(v['fleiss_kappa'])}")
