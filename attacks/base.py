"""The attack interface: a name, a config, and one method from an example to a perturbed one.

Every random choice comes from `Attack.rng_for(example)`, a generator seeded from the release
seed, the attack's name and the example's source id, so an attack's output for an example does
not depend on the order of examples, the number of workers, or which other attacks ran.

Each attack has one name. An old name that meant one attack per task (`addsent`: AdvRACE's AddSent
`mc_addsent` on RACE, Jia and Liang's `squad_addsent` on SQuAD) stays an alias (`ALIASES`),
resolved by the task: `get_attack("addsent", task)`. An attack asked for by its alias records the
alias in the release (split, records, provenance) and a renamed attack seeds its randomness with
its old name, so a release built with the alias is byte for byte what it was, and one built with
the new name differs from it only in the name.
"""

from __future__ import annotations

import dataclasses
import functools
import random
from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, ClassVar

from advrace.core.checking import build_dataclass
from advrace.core.seeding import hashed_rng
from advrace.core.errors import ConfigError
from advrace.core.registry import Registry
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE, TASKS
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
    name: ClassVar[str]  # its own name; under an alias (`get_attack`), the alias its records keep
    _own_name: ClassVar[str | None] = None  # set on a class under an alias: the name it stands for
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

    @property
    def own_name(self) -> str:
        """The attack's own name, under an alias too: what its checks and settings are registered by."""
        return self._own_name or self.name

    def rng_for(self, example) -> random.Random:
        return hashed_rng(self.seed, SEED_NAMES.get(self.name, self.name), example.source_id)

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

    def preload(self) -> tuple:
        """Load, in the build's parent before it forks workers, the models `apply` will use, so
        that the workers share one copy (advrace.release.runner checks each forked copy); returns
        their `loaded_lm` keys, so that a model loaded for something else is not counted as this
        build's."""
        return ()

    def summarize(self, examples: list) -> dict:
        """Attack-specific statistics over a finished split, for stats.json."""
        return {}

    def describe(self) -> dict:
        return {"attack": self.name, "config": dataclasses.asdict(self.config), "seed": self.seed}


PLUGIN_GROUP = "advrace.attacks"
REGISTRY: Registry[type[Attack]] = Registry("attack", PLUGIN_GROUP)  # one class per name

# Old names that now mean one attack per task, kept so that old configs and releases still read
# (deprecated for new configs: write the attack's own name).
# "addsent" named both AdvRACE's AddSent (multiple choice) and Jia and Liang's (extractive QA).
ALIASES: dict[str, dict[str, str]] = {"addsent": {MULTIPLE_CHOICE: "mc_addsent", EXTRACTIVE_QA: "squad_addsent"}}
# an attack renamed takes its randomness from its old name, so a release is the same under either
SEED_NAMES = {name: alias for alias, by_task in ALIASES.items() for name in by_task.values()}


def register(cls: type[Attack]) -> type[Attack]:
    """Class decorator: an attack module registers its attack when imported (third-party ones
    are imported through the `advrace.attacks` entry-point group)."""
    if cls.name in ALIASES:
        raise ValueError(f"attack name {cls.name!r} is an alias of {', '.join(ALIASES[cls.name].values())}")
    return REGISTRY.register(cls)


def canonical_name(name: str, task: str | None) -> str:
    """The attack's own name: an alias resolved for `task` (a release's split keeps the name its
    config used, so whoever reads a release's attack names resolves them here), any other name as
    it is. An alias without a task, or for a task it has no attack of, is a ConfigError."""
    by_task = ALIASES.get(name)
    if by_task is None:
        return name
    if task in by_task:
        return by_task[task]
    named = " and ".join(f"{attack!r} ({t})" for t, attack in by_task.items())
    raise ConfigError(f"attack {name!r} is an alias that names one attack per task: {named}; "
                      + (f"it has none for {task} examples" if task else "name the attack itself or give the task"))


def get_attack(name: str, task: str | None = None) -> type[Attack]:
    """The attack class of that name, for `task` when given (an alias needs it). An alias gives its
    task's attack recording the alias as its name, so a release built with an old name reads as
    it did: its splits, records and provenance keep that name."""
    cls = REGISTRY.lookup(canonical_name(name, task))
    if task is not None and task not in cls.tasks:
        raise ConfigError(f"attack {name!r} does not apply to {task} examples; it applies to "
                          f"{', '.join(cls.tasks)}")
    return _recording(cls, name) if name != cls.name else cls


def attacks_named(name: str) -> list[type[Attack]]:
    """The attack class of that name; for an alias, its attack for each task (each recording the
    alias). An unknown name is an error listing the known names."""
    if name in ALIASES:
        return [get_attack(name, task) for task in ALIASES[name]]
    return [REGISTRY.lookup(name)]


@functools.cache
def _recording(cls: type[Attack], alias: str) -> type[Attack]:
    """`cls` under the alias a config used: the same attack, whose records name it `alias`."""
    return type(cls)(cls.__name__, (cls,), {"name": alias, "_own_name": cls.name, "__module__": cls.__module__,
                                            "__qualname__": cls.__qualname__, "__doc__": cls.__doc__})


def attack_classes() -> list[type[Attack]]:
    return [REGISTRY[name] for name in available_attacks()]


def available_attacks() -> list[str]:
    """The attacks' own names; the aliases (`ALIASES`) are left out."""
    return sorted(REGISTRY.names())
