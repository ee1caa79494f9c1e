"""What a training run fits: a multiple-choice reader, a span extractor, a distractor generator,
or an objective of another package.

Every module of this package defines one objective and its settings and registers it, so a new
objective is one new file; objectives from other packages come in through the
`advrace.objectives` entry-point group, read only when a config names an objective that is not
built in (or when every name is listed).
"""

from advrace.core.registry import import_submodules

from .base import (PLUGIN_GROUP, REGISTRY, NoSettings, Objective, get_objective, objective_class,
                   objective_names, register_objective, setting_keys)

import_submodules(__name__, __path__)

__all__ = ["PLUGIN_GROUP", "REGISTRY", "NoSettings", "Objective", "get_objective", "objective_class",
           "objective_names", "register_objective", "setting_keys"]
