"""Seeded random generators: every random choice derives from the config's seed and a name, so
the same inputs and config give the same outputs whatever the order, workers or processes."""

from __future__ import annotations

import hashlib
import random


def seeded_rng(*parts) -> random.Random:
    """A generator seeded by its parts (a purpose, the seed, an id), joined by NUL characters."""
    return random.Random("\0".join(str(p) for p in parts))


def hashed_rng(*parts) -> random.Random:
    """The attacks' generator: seeded by the first 8 bytes of the parts' sha256, as releases
    since advrace 0.1 have been built (changing it would change every attacked split)."""
    key = "\0".join(str(p) for p in parts).encode()
    return random.Random(int.from_bytes(hashlib.sha256(key).digest()[:8], "big"))
