"""The attack interface: a name, a config, and one method from an example to a perturbed one.

Every random choice comes from `Attack.rng_for(example)`, a generator seeded from the release
seed, the attack's name and the example's source id, so an attack's output for an example does
not depend on the order of examples, the number of workers, or which other attacks ran.
"""

from __future__ import annotations

import dataclasses
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from advrace.core.checking import build_dataclass
from advrace.core.seeding import hashed_rng
from advrace.core.errors import ConfigError
from advrace.core.registry import Registry
from advrace.core.tasks import TASKS
from advrace.resources import get_resources


class CannotPerturb(Exception):
    """The attack has nothing to change in this example; the reason is counted in the stats."""

    def __init__(self, reason: str):
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True)
class Outcome:
    example: Any
    perturbed: bool
    reason: str | None = None


@dataclass(frozen=True)
class NoConfig:
    pass


class Attack(ABC):
    name: ClassVar[str]
    tasks: ClassVar[tuple[str, ...]] = TASKS
    Config: ClassVar[type] = NoConfig
    uses: ClassVar[tuple[str, ...]] = ()  # keys of Resources.versions() recorded in the manifest
    # True for model-based attacks: they take a whole split at once (apply_batch) in the main
    # process(es), rather than one passage at a time in forked workers.
    batched: ClassVar[bool] = False
    # True for probes (diagnosis, option_only): they ask how a model reads, not how robust it is,
    # so reports do not average them and human studies leave them out unless asked.
    probe: ClassVar[bool] = False

    def __init__(self, config: dict | None = None, seed: int = 0, resources=None):
        # unknown keys and values of the wrong type are refused here, when the attack is made,
        # not when it first reads the value
        self.config = build_dataclass(self.Config, config or {}, f"attack {self.name!r}: config")
        self.seed = int(seed)
        self._resources = resources

    @property
    def resources(self):
        if self._resources is None:
            self._resources = get_resources()
        return self._resources

    def rng_for(self, example) -> random.Random:
        return hashed_rng(self.seed, self.name, example.source_id)

    @abstractmethod
    def perturb(self, example, rng: random.Random):
        """Return the perturbed example, or raise CannotPerturb(reason)."""

    def apply(self, example) -> Outcome:
        if example.task not in self.tasks:
            raise ConfigError(f"attack {self.name!r} does not apply to {example.task} examples")
        try:
            new = self.perturb(example, self.rng_for(example))
        except CannotPerturb as exc:
            return Outcome(example, False, exc.reason)
        return Outcome(new, True)

    def apply_batch(self, examples: list, state=None, progress: bool = False) -> list[Outcome]:
        """Every example at once; `state` (an Accelerate state) shards model inference."""
        return [self.apply(ex) for ex in examples]

    def prepare(self, examples: list) -> None:
        """Analyse a batch of examples ahead of `apply` (e.g. parse them in one spaCy batch)."""

    def summarize(self, examples: list) -> dict:
        """Attack-specific statistics over a finished split, for stats.json."""
        return {}

    def describe(self) -> dict:
        return {"attack": self.name, "config": dataclasses.asdict(self.config), "seed": self.seed}


PLUGIN_GROUP = "advrace.attacks"
# name -> the attack classes of that name, with disjoint tasks: "addsent" is AdvRACE's for
# multiple choice and Jia and Liang's for SQuAD.
REGISTRY: Registry[list[type[Attack]]] = Registry("attack", PLUGIN_GROUP)


def register(cls: type[Attack]) -> type[Attack]:
    """Class decorator: an attack module registers its attack when imported (third-party ones
    are imported through the `advrace.attacks` entry-point group)."""
    classes = REGISTRY.add(cls.name, [cls])  # a taken name gives back its list
    if cls not in classes:
        clash = [c for c in classes if set(c.tasks) & set(cls.tasks)]
        if clash:
            raise ValueError(f"two attacks named {cls.name!r} apply to {sorted(set(clash[0].tasks) & set(cls.tasks))}")
        classes.append(cls)
    return cls


def attacks_named(name: str) -> list[type[Attack]]:
    """Every attack class of that name (one per task), or an error listing the known names."""
    return list(REGISTRY.lookup(name))


def get_attack(name: str, task: str | None = None) -> type[Attack]:
    """The attack class of that name for `task` (the first registered when no task is given)."""
    classes = attacks_named(name)
    if task is None:
        return classes[0]
    for cls in classes:
        if task in cls.tasks:
            return cls
    raise ConfigError(f"attack {name!r} does not apply to {task} examples; it applies to "
                      f"{', '.join(t for c in classes for t in c.tasks)}")


def attack_classes() -> list[type[Attack]]:
    return [cls for name in available_attacks() for cls in REGISTRY[name]]


def available_attacks() -> list[str]:
    return sorted(REGISTRY.names())
