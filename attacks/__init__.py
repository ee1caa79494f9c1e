"""Attacks, one module each, all behind `Attack` (base.py) and found through the registry.

Every module of this package is imported here and registers its attack, so a new attack is one
new file; attacks from other packages come in through the `advrace.attacks` entry-point group.
"""

from advrace.core.registry import import_submodules

from .base import (ALIASES, PLUGIN_GROUP, REGISTRY, Attack, CannotPerturb, Outcome, attack_classes, attacks_named,
                   available_attacks, canonical_name, get_attack, register)

import_submodules(__name__, __path__)

__all__ = ["ALIASES", "PLUGIN_GROUP", "REGISTRY", "Attack", "CannotPerturb", "Outcome", "attack_classes",
           "attacks_named", "available_attacks", "canonical_name", "get_attack", "register"]
