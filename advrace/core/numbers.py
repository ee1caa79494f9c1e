"""Computed numbers as a release records them: to 4 significant digits.

A model's scores, a search's trace of expected F1, a mean in stats.json: their last digits
follow the order in which a library sums, which moves between versions (transformers 5.24.0
changed one AddAny trace value from 0.249534 to 0.249533). A release records such floats through
`significant`, so its bytes depend on what was computed, not on the summation order; a value
sitting on a rounding boundary can still flip by one unit of the last digit kept (`agree`
allows that much and no more).

Only what is recorded goes through here: decisions (the search's comparisons, thresholds)
use the values as computed.
"""

from __future__ import annotations

import math

DIGITS = 4  # significant digits of every computed float in a release's records and stats


def significant(x: float, digits: int = DIGITS) -> float | None:
    """`x` rounded to `digits` significant digits (decimal, round half to even on the binary
    value), as the float whose shortest repr shows those digits: 0.2495338 -> 0.2495,
    1234.56 -> 1235.0. -0.0 gives 0.0; a non-finite value, which JSON cannot hold, None."""
    x = float(x)
    if not math.isfinite(x):
        return None
    return float(f"{x:.{digits}g}") + 0.0  # + 0.0 turns -0.0 into 0.0


def significant_floats(obj, digits: int = DIGITS):
    """`obj` (dicts, lists and tuples, nested) with every float through `significant`; ints,
    bools, strings and the containers' types and key order are kept."""
    if isinstance(obj, float):
        return significant(obj, digits)
    if isinstance(obj, dict):
        return {k: significant_floats(v, digits) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return type(obj)(significant_floats(v, digits) for v in obj)
    return obj


def agree(a: float, b: float, digits: int = DIGITS) -> bool:
    """Whether two recorded floats differ by at most one unit in the `digits`-th significant
    digit of the larger (0.2495 and 0.2496 agree; 0.2495 and 0.2505 do not): what a change of
    summation order can do to a value rounded by `significant`."""
    a, b = float(a), float(b)
    if a == b:
        return True
    if not (math.isfinite(a) and math.isfinite(b)):
        return False
    unit = 10.0 ** (math.floor(math.log10(max(abs(a), abs(b)))) - digits + 1)
    return abs(a - b) <= unit * (1 + 1e-9)


def argmax(values) -> int:
    """The index of the largest value, the first one on a tie (how every scorer picks an option)."""
    return max(range(len(values)), key=lambda i: (values[i], -i))


def share_of(n: int, m: int, noun: str = "") -> str:
    """`1,115 of 1,190 (93%)`: a part of a whole, the percent rounded down (a share just under
    half never reads 50%)."""
    return f"{n:,} of {m:,}{' ' + noun if noun else ''} ({100 * n // m if m else 0}%)"
