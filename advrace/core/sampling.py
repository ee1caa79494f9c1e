"""A seeded sample of questions that keeps passages whole (`advrace build --sample N`).

`--limit N` takes the first N questions, which in SQuAD are one article's and in RACE one level's.
A sample for a quick look or a human study should instead be drawn from the whole set, with a
passage's questions kept together (they share the passage's attacks and its reading), and each
stratum (RACE's middle and high school) represented in its share.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Sample:
    indices: tuple[int, ...]  # positions of the chosen questions, in input order
    passages: int
    by_stratum: dict[str, int]  # questions chosen per stratum; {} when there is one stratum


def quotas(sizes: dict[str, int], n: int) -> dict[str, int]:
    """`n` shared out in proportion to `sizes`, by largest remainder (ties by stratum name)."""
    total = sum(sizes.values())
    exact = {s: n * k / total for s, k in sizes.items()}
    out = {s: int(x) for s, x in exact.items()}
    for s in sorted(sizes, key=lambda s: (-(exact[s] - out[s]), s))[:n - sum(out.values())]:
        out[s] += 1
    return out


def sample_by_passage(keys: Sequence[str], strata: Sequence[str], n: int, seed: int) -> Sample:
    """About `n` of the questions whose passage keys are `keys`, whole passages at a time.

    Each stratum gets its proportional quota; its passages are visited in a seeded random order
    and taken while they fit the quota. A quota left short takes one more passage (the smallest)
    when that comes closer to it, so each stratum's count is as near its quota as the greedy walk
    over whole passages gets: exact when passages of one question remain, else within half a
    passage.
    """
    groups: dict[str, list[int]] = {}
    stratum_of: dict[str, str] = {}
    for i, (key, stratum) in enumerate(zip(keys, strata)):
        groups.setdefault(key, []).append(i)
        stratum_of.setdefault(key, stratum)
    sizes: dict[str, int] = {}
    for key, members in groups.items():
        sizes[stratum_of[key]] = sizes.get(stratum_of[key], 0) + len(members)
    rng = random.Random(f"advrace-sample:{seed}")
    chosen: list[int] = []
    passages = 0
    by_stratum: dict[str, int] = {}
    for stratum, quota in sorted(quotas(sizes, n).items()):
        order = [k for k in groups if stratum_of[k] == stratum]
        rng.shuffle(order)
        taken, skipped = 0, []
        for key in order:
            if taken == quota:
                break
            if taken + len(groups[key]) <= quota:
                chosen += groups[key]
                taken += len(groups[key])
                passages += 1
            else:
                skipped.append(key)
        if taken < quota and skipped:
            extra = min(skipped, key=lambda k: len(groups[k]))  # the first smallest, in the seeded order
            if taken + len(groups[extra]) - quota <= quota - taken:
                chosen += groups[extra]
                taken += len(groups[extra])
                passages += 1
        by_stratum[stratum] = taken
    return Sample(tuple(sorted(chosen)), passages, by_stratum if len(sizes) > 1 else {})


def select(examples: list, n: int, seed: int, key: Callable, stratum: Callable) -> tuple[list, Sample]:
    """The sampled examples, in input order, and what was drawn."""
    drawn = sample_by_passage([key(ex) for ex in examples], [stratum(ex) for ex in examples], n, seed)
    return [examples[i] for i in drawn.indices], drawn
