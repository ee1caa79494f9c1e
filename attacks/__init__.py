"""Attacks, one module each, all behind `attacks.base.Attack` and found through the registry."""

from .base import (REGISTRY, Attack, CannotPerturb, Outcome, attack_classes, available_attacks, get_attack,
                   register)
from . import (addsent, adversarial_squad, charswap, diagnosis,  # noqa: F401  (each registers itself)
               distractor_extraction, distractor_generation, option_only)

__all__ = ["REGISTRY", "Attack", "CannotPerturb", "Outcome", "attack_classes", "available_attacks", "get_attack",
           "register"]
