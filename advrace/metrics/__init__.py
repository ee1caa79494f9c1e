"""Scores for the two tasks, as `evaluate` modules shipped with the package.

The modules live beside this file and are loaded from their local path, so scoring works offline
and does not depend on the Hub's copies. `squad_em_f1` is the official SQuAD v1.1 definition in
plain Python; the `squad_v11` module calls it, so per-example and averaged numbers agree exactly.
"""

from __future__ import annotations

import functools
import re
import string
from collections import Counter
from pathlib import Path

METRICS_DIR = Path(__file__).parent
METRICS = ("mc_accuracy", "squad_v11")

_ARTICLES = re.compile(r"\b(a|an|the)\b")
_PUNCTUATION = frozenset(string.punctuation)


def normalize_answer(text: str) -> str:
    """Lowercase, drop punctuation, drop the articles a/an/the, collapse whitespace (SQuAD v1.1)."""
    text = "".join(ch for ch in text.lower() if ch not in _PUNCTUATION)
    return " ".join(_ARTICLES.sub(" ", text).split())


def exact_match(prediction: str, gold: str) -> float:
    return float(normalize_answer(prediction) == normalize_answer(gold))


def token_f1(prediction: str, gold: str) -> float:
    pred_tokens = normalize_answer(prediction).split()
    gold_tokens = normalize_answer(gold).split()
    same = sum((Counter(pred_tokens) & Counter(gold_tokens)).values())
    if same == 0:
        return 0.0
    precision = same / len(pred_tokens)
    recall = same / len(gold_tokens)
    return 2 * precision * recall / (precision + recall)


def squad_em_f1(prediction: str, golds) -> tuple[float, float]:
    """(EM, F1) of one prediction, each the best over the gold answers, in [0, 1]."""
    golds = list(golds)
    if not golds:
        raise ValueError("a SQuAD question needs at least one gold answer")
    return (max(exact_match(prediction, g) for g in golds),
            max(token_f1(prediction, g) for g in golds))


def metric_path(name: str) -> str:
    if name not in METRICS:
        raise ValueError(f"unknown metric {name!r}; known: {', '.join(METRICS)}")
    return str(METRICS_DIR / name / f"{name}.py")


@functools.lru_cache(maxsize=None)
def load_metric(name: str):
    """The `evaluate` module `name`, loaded once per process from the package."""
    import evaluate

    return evaluate.load(metric_path(name), keep_in_memory=True)
