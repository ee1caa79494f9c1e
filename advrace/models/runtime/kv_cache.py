"""Passing a key-value cache to a Transformers model and taking it back, under the name its
version uses: `past_key_values` up to transformers 5.23, `cache` from 5.24 (where the old name
still works but warns in every call). The locked version and a newer one then run the same
code without a FutureWarning."""

from __future__ import annotations

import functools
import inspect


@functools.cache
def forward_parameters(cls) -> frozenset[str] | None:
    """The argument names of a model class's forward (None where its signature cannot be read)."""
    try:
        return frozenset(inspect.signature(cls.forward).parameters)
    except (TypeError, ValueError):
        return None


def _argument(cls) -> str:
    names = forward_parameters(cls)
    return "cache" if names is not None and "cache" in names else "past_key_values"


def with_cache(model, cache) -> dict:
    """The keyword that hands `cache` to `model`'s forward."""
    return {_argument(type(model)): cache}


def returned_cache(output):
    """The cache a forward returned (None when it returned none)."""
    cache = getattr(output, "cache", None)
    return cache if cache is not None else getattr(output, "past_key_values", None)
