"""The input formats by name. Built-in formats register when advrace.formats is imported; other
packages add theirs through the `advrace.formats` entry-point group, imported the first time
anyone asks for the list, so a new format never means editing the loader, the CLI or a config
checker."""

from __future__ import annotations

from advrace.core.errors import ConfigError
from advrace.core.registry import load_plugins
from advrace.core.tasks import TASKS

from .base import Format

PLUGIN_GROUP = "advrace.formats"
REGISTRY: dict[str, Format] = {}  # in registration order, which is the order names are listed in


def register_format(cls: type[Format]) -> type[Format]:
    """Class decorator: a format module registers its format when imported."""
    if not cls.name or not cls.tasks or not set(cls.tasks) <= set(TASKS):
        raise ValueError(f"format {cls.__name__} needs a name and tasks from {TASKS}")
    known = REGISTRY.get(cls.name)
    if known is None:
        REGISTRY[cls.name] = cls()
    elif type(known) is not cls:
        raise ValueError(f"two formats named {cls.name!r}: {type(known).__qualname__} and "
                         f"{cls.__qualname__}")
    return cls


def unregister_format(name: str) -> None:
    """Forget a format (a test's, say); unknown names are ignored."""
    REGISTRY.pop(name, None)


def get_format(name: str) -> Format:
    load_plugins(PLUGIN_GROUP)
    fmt = REGISTRY.get(name)
    if fmt is None:
        raise ConfigError(f"unknown format {name!r}; choose one of {', '.join(format_names())}")
    return fmt


def format_names() -> tuple[str, ...]:
    """Every registered format's name, built-in ones first, as --format lists them."""
    load_plugins(PLUGIN_GROUP)
    return tuple(REGISTRY)


def detection_order() -> list[Format]:
    """The formats in the order detection asks them: by priority, then registration."""
    load_plugins(PLUGIN_GROUP)
    return sorted(REGISTRY.values(), key=lambda fmt: -fmt.priority)
