"""Named extension points (attacks, input formats, training objectives) that other packages can
add to without forking: a user's package lists its classes in a Python entry-point group, the
convention pytest and friends use, and they register themselves when loaded."""

from __future__ import annotations

import importlib
import pkgutil
from importlib.metadata import entry_points

from .errors import ConfigError

_LOADED: set[str] = set()


def import_submodules(package: str, path) -> None:
    """Import every module of a package, in name order: each one registers what it defines, so
    adding one is adding one file."""
    for info in sorted(pkgutil.iter_modules(path), key=lambda m: m.name):
        if not info.name.startswith("_"):
            importlib.import_module(f"{package}.{info.name}")


def load_plugins(group: str) -> None:
    """Import, once per process, every entry point of `group` (e.g. `advrace.attacks`)."""
    if group in _LOADED:
        return
    _LOADED.add(group)
    for ep in sorted(entry_points(group=group), key=lambda e: e.name):
        try:
            ep.load()
        except Exception as exc:  # a broken plugin must say which one, not break every command
            raise ConfigError(f"the {group} entry point {ep.name!r} ({ep.value}) failed to load: "
                              f"{type(exc).__name__}: {exc}") from exc
