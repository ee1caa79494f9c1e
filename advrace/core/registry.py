"""Named extension points (attacks, input formats, training objectives, validity checks) that
other packages can add to without forking: a user's package lists its classes in a Python
entry-point group, the convention pytest and friends use, and they register themselves when
loaded. Each extension point is one `Registry`, so an unknown name reads the same everywhere."""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Iterator, Mapping
from importlib.metadata import entry_points
from typing import Any, Generic, TypeVar

from .errors import ConfigError

_LOADED: set[str] = set()
T = TypeVar("T")


class UnknownName(ConfigError):
    """A name that no registry entry has: the message lists the names there are."""


class Registry(Mapping[str, T], Generic[T]):
    """Names to entries (classes, or one object per class), in registration order. Reading it as
    a mapping sees what is registered so far; `names` and `lookup` first import the entry points
    of `group`, so a plugin is loaded only when someone asks for the list or for a name that is
    not built in."""

    def __init__(self, kind: str, group: str | None = None):
        self.kind = kind  # how messages name an entry: "attack", "format", ...
        self.group = group
        self._entries: dict[str, T] = {}

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)

    def add(self, name: str, entry: T) -> T:
        """Register `entry` as `name` and return the entry kept: a second registration of the same
        class (a module imported twice) keeps the first; another class of a taken name is refused."""
        known = self._entries.get(name)
        if known is None:
            self._entries[name] = entry
            return entry
        if _origin(known) is not _origin(entry):
            raise ValueError(f"two {self.kind}s named {name!r}: {_qualname(known)} and {_qualname(entry)}")
        return known

    def register(self, cls: type) -> type:
        """Class decorator: register `cls` under its `name`."""
        self.add(cls.name, cls)
        return cls

    def unregister(self, name: str) -> None:
        """Forget an entry (a test's, say); unknown names are ignored."""
        self._entries.pop(name, None)

    def load_plugins(self) -> None:
        if self.group is not None:
            load_plugins(self.group)

    def names(self) -> tuple[str, ...]:
        """Every name, third-party ones included, in registration order."""
        self.load_plugins()
        return tuple(self._entries)

    def lookup(self, name: Any, where: str | None = None) -> T:
        """The entry of `name`, or an `UnknownName` that lists the known names (prefixed with
        `where`, the config key that gave the name, when there is one)."""
        if not isinstance(name, str) or name not in self._entries:
            self.load_plugins()
        if isinstance(name, str) and name in self._entries:
            return self._entries[name]
        prefix = f"{where}: " if where else ""
        raise UnknownName(f"{prefix}unknown {self.kind} {name!r}; choose one of "
                          f"{', '.join(sorted(self._entries))}")


def _origin(entry) -> type:
    return entry if isinstance(entry, type) else type(entry)


def _qualname(entry) -> str:
    cls = _origin(entry)
    return f"{cls.__module__}.{cls.__qualname__}"


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
