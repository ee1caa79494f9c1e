"""Attacks, one module each, all behind `attacks.base.Attack` and found through the registry."""

from .base import REGISTRY, Attack, CannotPerturb, Outcome, available_attacks, get_attack, register
from . import charswap  # noqa: F401  (registers itself)

__all__ = ["REGISTRY", "Attack", "CannotPerturb", "Outcome", "available_attacks", "get_attack", "register"]
