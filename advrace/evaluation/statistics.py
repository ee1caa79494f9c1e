"""The statistics of the evaluation report: 95% intervals for a score and a paired test of a split
against `original`.

A split of a few hundred questions gives accuracies that move by several points from chance
alone, so a drop means little without its uncertainty. Every function here is pure and
deterministic (the bootstrap draws from a fixed seed), so the same scores give a byte-identical
report. Scores are proportions in [0, 1] here; the report scales them to percent.
"""

from __future__ import annotations

import math
from fractions import Fraction
from statistics import NormalDist

import numpy as np

LEVEL = 0.95
Z = NormalDist().inv_cdf(0.5 + LEVEL / 2)  # 1.959963984540054
RESAMPLES = 1000
SEED = 0
_CHUNK = 2_000_000  # indices drawn per batch: bounds the memory of a bootstrap over many questions


def wilson_interval(k: float, n: int, z: float = Z) -> tuple[float, float] | None:
    """The Wilson score interval of k successes in n trials (None when n is 0).

    Why Wilson rather than the normal (Wald) interval p ± z·sqrt(p(1-p)/n): Wald collapses to a
    point at 0% or 100% and leaves [0, 1] near them, exactly where small probe splits and strong
    models sit; Wilson keeps its nominal coverage there and never leaves [0, 1]."""
    if n <= 0:
        return None
    p = k / n
    denom = 1 + z * z / n
    centre = (p + z * z / (2 * n)) / denom
    half = z / denom * math.sqrt(max(p * (1 - p) / n + z * z / (4 * n * n), 0.0))
    low = 0.0 if k <= 0 else max(0.0, centre - half)  # exactly 0 (1) at 0 (n): no rounding residue
    high = 1.0 if k >= n else min(1.0, centre + half)
    return low, high


def _resampled_means(values: np.ndarray, resamples: int, seed: int) -> np.ndarray:
    """The means of `resamples` resamples of `values` with replacement, drawn from `seed`."""
    rng = np.random.default_rng(seed)
    n = len(values)
    per_batch = max(1, _CHUNK // max(n, 1))
    means = []
    for start in range(0, resamples, per_batch):
        idx = rng.integers(0, n, size=(min(per_batch, resamples - start), n))
        means.append(values[idx].mean(axis=1))
    return np.concatenate(means)


def bootstrap_interval(values, *, resamples: int = RESAMPLES, seed: int = SEED,
                       level: float = LEVEL) -> tuple[float, float] | None:
    """The percentile bootstrap interval of the mean of `values` (None when there are none).

    Why a bootstrap: a per-question F1 is a fraction in [0, 1], not a success or failure, so no
    binomial interval applies; resampling the questions assumes nothing about its distribution.
    The fixed seed makes the interval a function of the values alone."""
    values = np.asarray(values, dtype=float)
    if values.size == 0:
        return None
    means = _resampled_means(values, resamples, seed)
    tail = 100 * (1 - level) / 2
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)


def mcnemar_exact_p(b: int, c: int) -> float:
    """Two-sided exact McNemar p-value from the discordant counts: b questions right on one
    split and wrong on the other, c the reverse.

    Why: on the same questions two accuracies are paired, and only the discordant questions
    carry evidence of a difference; under no difference each is equally likely to go either
    way, so min(b, c) is binomial(b + c, 1/2). The tail is summed in exact integers (no
    scipy needed, no underflow for thousands of questions): p = min(1, 2·P(X ≤ min(b, c)))."""
    b, c = int(b), int(c)
    if b < 0 or c < 0:
        raise ValueError(f"discordant counts must be non-negative, got {b} and {c}")
    n, k = b + c, min(b, c)
    if n == 0:
        return 1.0
    term, tail = 1, 1  # C(n, 0)
    for i in range(k):
        term = term * (n - i) // (i + 1)
        tail += term
    return min(1.0, float(Fraction(2 * tail, 2 ** n)))


def paired_bootstrap_p(x, y, *, resamples: int = RESAMPLES, seed: int = SEED) -> float:
    """Two-sided paired bootstrap p-value for mean(x) = mean(y), x[i] and y[i] one question.

    Why: F1 is not binary, so McNemar does not apply. The per-question differences are
    resampled; the share of resampled means at least as far from the observed mean difference
    as that difference is from 0 estimates how often a difference this large would arise if
    the true one were 0 (the resampled means recentred on the null). Counted as (1 + hits) /
    (1 + resamples), so the p-value is never 0 and is at least 1/(1 + resamples)."""
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    if x.shape != y.shape:
        raise ValueError(f"paired values need equal lengths, got {x.size} and {y.size}")
    if x.size == 0:
        return 1.0
    d = x - y
    observed = float(d.mean())
    if observed == 0.0:
        return 1.0
    means = _resampled_means(d, resamples, seed)
    hits = int(np.count_nonzero(np.abs(means - observed) >= abs(observed) - 1e-12))
    return (1 + hits) / (1 + resamples)


def paired_p(x, y, binary: bool) -> float:
    """Two-sided p-value that paired per-question values x and y (one question each) have the same
    mean: the exact McNemar test on the discordant questions for right-or-wrong values, the paired
    bootstrap otherwise."""
    if binary:
        return mcnemar_exact_p(sum(1 for a, b in zip(x, y) if a and not b), sum(1 for a, b in zip(x, y) if b and not a))
    return paired_bootstrap_p([float(a) for a in x], [float(b) for b in y])


def paired_difference(x, y, binary: bool) -> dict | None:
    """mean(y) − mean(x) on paired questions (proportions), its percentile bootstrap interval (the
    per-question differences resampled, RESAMPLES times from SEED) and `paired_p`; None without
    questions. Why paired: two runs on the same questions agree on most of them, so the
    difference is far surer than two separate intervals suggest."""
    if len(x) != len(y):
        raise ValueError(f"paired values need equal lengths, got {len(x)} and {len(y)}")
    if not len(x):
        return None
    d = [float(b) - float(a) for a, b in zip(x, y)]
    return {"n": len(d), "difference": sum(d) / len(d), "ci": bootstrap_interval(d), "p": paired_p(x, y, binary)}
