"""The input formats by name. Built-in formats register when advrace.formats is imported; other
packages add theirs through the `advrace.formats` entry-point group, imported the first time
anyone asks for the list, so a new format never means editing the loader, the CLI or a config
checker."""

from __future__ import annotations

from advrace.core.registry import Registry
from advrace.core.tasks import TASKS

from .base import Format

PLUGIN_GROUP = "advrace.formats"
# one Format object per name, in registration order, which is the order names are listed in
REGISTRY: Registry[Format] = Registry("format", PLUGIN_GROUP)


def register_format(cls: type[Format]) -> type[Format]:
    """Class decorator: a format module registers its format when imported."""
    if not cls.name or not cls.tasks or not set(cls.tasks) <= set(TASKS):
        raise ValueError(f"format {cls.__name__} needs a name and tasks from {TASKS}")
    if type(REGISTRY.get(cls.name)) is not cls:  # the same class again: keep its object, make none
        REGISTRY.add(cls.name, cls())  # another class of a taken name is refused there
    return cls


def unregister_format(name: str) -> None:
    """Forget a format (a test's, say); unknown names are ignored."""
    REGISTRY.unregister(name)


def get_format(name: str) -> Format:
    return REGISTRY.lookup(name)


def format_names() -> tuple[str, ...]:
    """Every registered format's name, built-in ones first, as --format lists them."""
    return REGISTRY.names()


def detection_order() -> list[Format]:
    """The formats in the order detection asks them: by priority, then registration."""
    REGISTRY.load_plugins()
    return sorted(REGISTRY.values(), key=lambda fmt: -fmt.priority)
