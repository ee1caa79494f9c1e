"""Training-set recipes: plain fine-tuning, adversarial data augmentation, and the option-only probe.

Adversarial copies are made by `advrace.release.runner.run_splits`, the code that builds releases, so a
model is trained against exactly the perturbations it is later tested on. Slices come from a
seeded permutation of the training set: `targeted` attacks round(fraction * N) questions with
one attack, `mixed` gives each attack its own disjoint slice. Only perturbed copies are added; a
question the attack cannot change is replaced by the next unused one of the permutation, so each
slice has its full size whenever enough questions can be perturbed.
"""

from __future__ import annotations

import dataclasses
from collections import Counter

from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.seeding import seeded_rng
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.release.runner import run_splits
from advrace.resources import get_resources

from .config import RecipeConfig


def check_attacks(recipe: RecipeConfig) -> None:
    """Fail before any model is loaded if an attack is unknown or its config is wrong."""
    from advrace.attacks import get_attack  # deferred for start-up time: importing the attacks loads every attack module

    for spec in recipe.attacks:
        get_attack(spec.attack, MULTIPLE_CHOICE)(spec.config, seed=0)


def slice_order(n: int, seed: int) -> list[int]:
    order = list(range(n))
    seeded_rng("advrace-train-slices", seed).shuffle(order)
    return order


def _attack(spec, seed: int, examples: list, resources, workers: int | None, progress: bool):
    _, results = run_splits(_release_cfg(spec, seed), examples, resources, workers=workers,
                            progress=progress)
    return results[spec.split]


def _release_cfg(spec, seed: int):
    return release_config_from_dict({
        "seed": seed,
        "splits": [{"attack": spec.attack, "name": spec.split, "config": dict(spec.config),
                    "seed": spec.seed}],
    }, "recipe.attacks")


def adversarial_copies(recipe: RecipeConfig, examples: list, seed: int, resources=None,
                       progress: bool = False) -> tuple[list, dict]:
    """The perturbed copies to add, in permutation order per attack, and what was done."""
    n = len(examples)
    size = round(recipe.fraction * n)
    order = slice_order(n, seed)
    k = len(recipe.attacks)
    slices = [order[j * size:(j + 1) * size] for j in range(k)]
    spare = order[k * size:]
    if resources is None:
        resources = get_resources(recipe.resources or None)

    added, report = [], {}
    for spec, todo in zip(recipe.attacks, slices):
        got, tried, reasons = [], 0, Counter()
        while todo:
            result = _attack(spec, seed, [examples[i] for i in todo], resources, recipe.workers, progress)
            tried += len(todo)
            for i, ex, ok, why in zip(todo, result.examples, result.perturbed, result.reasons):
                if ok:
                    got.append((i, dataclasses.replace(ex, id=f"{ex.id}@{spec.split}")))
                else:
                    reasons[why or "unperturbed"] += 1
            need = size - len(got)
            todo, spare = spare[:need], spare[need:]
        added.extend(ex for _, ex in got)
        report[spec.split] = {"attack": spec.attack, "slice": size, "added": len(got), "tried": tried,
                              "unperturbed": dict(sorted(reasons.items())),
                              "source_ids": [examples[i].source_id for i, _ in got]}
    return added, report


def build_train_set(recipe: RecipeConfig, examples: list, seed: int, resources=None,
                    progress: bool = False) -> tuple[list, dict]:
    """The training examples for a recipe, and a report of how they were made."""
    if recipe.kind == "finetune":
        return list(examples), {"task": "finetune", "original": len(examples), "added": 0}
    if recipe.kind == "option_only":
        return [ex.without_context() for ex in examples], {"task": "option_only",
                                                           "original": len(examples), "added": 0}
    if recipe.kind != "adversarial":
        raise ConfigError(f"unknown recipe task {recipe.kind!r}")
    added, per_attack = adversarial_copies(recipe, examples, seed, resources, progress)
    return list(examples) + added, {"task": "adversarial", "mode": recipe.mode,
                                    "fraction": recipe.fraction, "original": len(examples),
                                    "added": len(added), "attacks": per_attack}


def eval_view(recipe: RecipeConfig, examples: list) -> list:
    """Dev questions as the recipe's model sees them: without passage and question for option_only."""
    if recipe.kind == "option_only":
        return [ex.without_context() for ex in examples]
    return examples
