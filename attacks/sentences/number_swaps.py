"""Other values for a number written in digits, as AddSent's `number_mode: value` swaps them: a
year moves by 1-10, a day of the month stays a day, other numbers stay within a factor of two."""

from __future__ import annotations

import random
import re

NUMBER_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")


def new_number(text: str, rng: random.Random, avoid: set[str], count: int,
               day: bool = False) -> list[str]:
    """Up to `count` different values for a number in digits: years move by 1-10, other numbers
    land in [n/2, 2n+1] (a day of the month stays in 1-28), keeping commas and decimals."""
    if not NUMBER_RE.fullmatch(text):
        return []
    commas = "," in text
    places = len(text.split(".")[1]) if "." in text else 0
    n = int(text.replace(",", "").replace(".", ""))

    def fmt(value: int) -> str:
        whole, frac = divmod(value, 10 ** places)
        head = f"{whole:,}" if commas else str(whole)
        return f"{head}.{str(frac).zfill(places)}" if places else head

    if not commas and not places and len(text) == 4 and 1000 <= n <= 2100:
        pool = [n + d for d in range(-10, 11) if d]
        rng.shuffle(pool)
    else:
        low, high = (1, 28) if day and not places and n <= 31 else (n // 2, 2 * n + 1)
        if high - low <= 64:
            pool = [v for v in range(low, high + 1) if v != n]
            rng.shuffle(pool)
        else:
            pool = [rng.randint(low, high) for _ in range(64)]
    out = []
    for value in pool:
        s = fmt(value)
        if value != n and s not in out and s.lower() not in avoid:
            out.append(s)
            if len(out) == count:
                break
    return out
