"""Strict config checking: every value of a config mapping against its dataclass field's type.

Without it `attack_passage: "false"` is a true value and `seed: abc` a traceback far from the
config; here either is a ConfigError (exit 2) naming the key, the value and the type expected.
All configs (attacks, releases, training runs, ablation grids, `--set`) go through this one
checker, so they accept and refuse the same things.
"""

from __future__ import annotations

import copy
import dataclasses
import functools
import numbers
import os
import sys
import types
import typing
from collections.abc import Mapping
from typing import Any, Literal, Union

from advrace.core.errors import ConfigError

NONE = type(None)
PLURALS = {bool: "true/false values", int: "integers", float: "numbers", str: "strings"}


class _Mismatch(Exception):
    """A value that does not fit a type; the caller words the ConfigError for the whole value."""


def check_keys(cls: type, values: Any, where: str, skip: tuple[str, ...] = ()) -> dict:
    """A copy of `values`, refused unless a mapping whose keys are all fields of `cls`."""
    if not isinstance(values, Mapping):
        raise ConfigError(f"{where}: expected a mapping, got {type(values).__name__}")
    known = set(_fields(cls)) - set(skip)
    unknown = sorted(str(k) for k in values if k not in known)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                          f"known: {', '.join(sorted(known)) or 'none'}")
    return dict(values)


def build_dataclass(cls: type, values: Any, where: str, skip: tuple[str, ...] = ()):
    """An instance of dataclass `cls` from a config mapping, each value checked against its field.

    `where` names the mapping in messages; a field is named `where.key` (nested dataclasses and
    list items extend the path). A field's key is its name, or `field(metadata={"key": ...})`
    where the config spells it otherwise; `skip` lists keys a config may not set. Values are
    converted where YAML gives a near miss: an int for a float, a string such as "1e-5" (YAML 1.1
    reads it as a string) for a float, a list for a tuple, null for an empty mapping or list.
    A number's range is its field's metadata: `min` (at least), `above` (more than), `max`.
    """
    values = check_keys(cls, values, where, skip)
    hints = _hints(cls)
    kwargs = {}
    for key, f in _fields(cls).items():
        hint = hints.get(f.name, Any)
        if key in values:
            kwargs[f.name] = check_value(values[key], hint, f"{where}.{key}")
            check_range(kwargs[f.name], f.metadata, f"{where}.{key}")
        elif key not in skip and f.default is dataclasses.MISSING \
                and f.default_factory is dataclasses.MISSING:
            raise ConfigError(f"{where}: {key!r} is required ({describe(hint)})")
    return cls(**kwargs)


def config_dict(value: Any) -> Any:
    """A config dataclass as the mapping a config file spells it, each field under its key (see
    `build_dataclass`), nested ones too: what `dataclasses.asdict` gives, but for renamed keys."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.metadata.get("key", f.name): config_dict(getattr(value, f.name))
                for f in dataclasses.fields(value)}
    if isinstance(value, (list, tuple)):
        return type(value)(config_dict(v) for v in value)
    if isinstance(value, dict):
        return {k: config_dict(v) for k, v in value.items()}
    return copy.deepcopy(value)


def check_range(value: Any, bounds: Mapping, where: str) -> None:
    """Refuse a number outside `min` / `above` / `max` of `bounds` (None, where allowed, passes)."""
    low, above, high = bounds.get("min"), bounds.get("above"), bounds.get("max")
    if value is None or isinstance(value, bool) or not isinstance(value, numbers.Real) or (
            (low is None or value >= low) and (above is None or value > above)
            and (high is None or value <= high)):
        return
    kind = "an integer" if isinstance(value, int) else "a number"
    span = " and ".join(f"{op} {bound:g}" for op, bound in ((">=", low), (">", above), ("<=", high))
                        if bound is not None)
    raise ConfigError(f"{where} must be {kind} {span}, got {value!r}")


def check_value(value: Any, hint: Any, where: str) -> Any:
    """`value` converted to type `hint`, or a ConfigError naming `where`, the value and the type."""
    try:
        return _convert(value, hint, where)
    except _Mismatch:
        raise ConfigError(f"{where} must be {describe(hint)}, got {_show(value)}") from None


def describe(hint: Any) -> str:
    """A type in the words of a config file: `true, false or null`, `a list of strings`."""
    words = _words(hint)
    return words[0] if len(words) == 1 else f"{', '.join(words[:-1])} or {words[-1]}"


def _words(hint: Any) -> list[str]:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (Union, types.UnionType):
        return [w for a in args if a is not NONE for w in _words(a)] + (["null"] if NONE in args else [])
    if hint is NONE:
        return ["null"]
    if hint is bool:
        return ["true", "false"]
    if origin is Literal:
        return [f"one of {', '.join(map(repr, args))}"]
    if hint in (list, tuple) or origin in (list, tuple):
        item = _item_type(hint)
        return ["a list" if item is Any else f"a list of {_plural(item)}"]
    if hint in (dict, Mapping) or origin in (dict, Mapping):
        keys = _item_type(hint)
        return ["a mapping" if keys is Any else f"a mapping with {_plural(keys)} as keys"]
    if dataclasses.is_dataclass(hint):
        return ["a mapping"]
    names = {int: "an integer", float: "a number", str: "a string"}
    if hint in names:
        return [names[hint]]
    if hint is Any:
        return ["anything"]
    return [f"a {getattr(hint, '__name__', hint)}"]


def _plural(hint: Any) -> str:
    if hint in PLURALS:
        return PLURALS[hint]
    words = describe(hint)
    return "mappings" if words == "a mapping" else f"items that are each {words}"


def _convert(value: Any, hint: Any, where: str) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if hint is Any or hint is object:
        return value
    if origin in (Union, types.UnionType):
        if value is None and NONE in args:
            return None
        for arg in args:
            if arg is not NONE:
                try:
                    return _convert(value, arg, where)
                except _Mismatch:
                    pass
        raise _Mismatch
    if hint is NONE:
        if value is None:
            return None
        raise _Mismatch
    if origin is Literal:
        if any(value == a and type(value) is type(a) for a in args):
            return value
        raise _Mismatch
    if hint is bool:
        if isinstance(value, bool):
            return value
        raise _Mismatch
    if hint is int:
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
        raise _Mismatch
    if hint is float:
        return _float(value)
    if hint is str:
        if isinstance(value, (str, os.PathLike)):  # a Path from Python code, for a path setting
            return os.fspath(value)
        raise _Mismatch
    if hint in (list, tuple) or origin in (list, tuple):
        return _sequence(value, hint, where)
    if hint in (dict, Mapping) or origin in (dict, Mapping):
        return _mapping(value, args, where)
    if dataclasses.is_dataclass(hint):
        if isinstance(value, hint):
            return value
        if isinstance(value, Mapping):
            return build_dataclass(hint, value, where)
        raise _Mismatch
    if isinstance(hint, type):
        if isinstance(value, hint):
            return value
        raise _Mismatch
    return value


def _float(value: Any) -> float:
    if isinstance(value, numbers.Real) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str):  # YAML 1.1 reads 1e-5 (no dot) as a string
        try:
            return float(value)
        except ValueError:
            pass
    raise _Mismatch


def _sequence(value: Any, hint: Any, where: str) -> list | tuple:
    if value is None:
        value = []
    if not isinstance(value, (list, tuple)):
        raise _Mismatch
    args = typing.get_args(hint)
    if (typing.get_origin(hint) or hint) is tuple and args and args[-1] is not Ellipsis:
        if len(value) != len(args):
            raise _Mismatch
        return tuple(_convert(v, a, f"{where}[{i}]") for i, (v, a) in enumerate(zip(value, args)))
    item = _item_type(hint)
    items = [_convert(v, item, f"{where}[{i}]") for i, v in enumerate(value)]
    return tuple(items) if (typing.get_origin(hint) or hint) is tuple else items


def _mapping(value: Any, args: tuple, where: str) -> dict:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise _Mismatch
    if not args:
        return dict(value)
    key_type, value_type = args
    return {_convert(k, key_type, where): _convert(v, value_type, f"{where}.{k}") for k, v in value.items()}


def _item_type(hint: Any) -> Any:
    args = typing.get_args(hint)
    return args[0] if args else Any


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 80 else text[:77] + "..."


@functools.lru_cache(maxsize=None)
def _fields(cls: type) -> dict[str, dataclasses.Field]:
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    return {f.metadata.get("key", f.name): f for f in dataclasses.fields(cls) if f.init}


@functools.lru_cache(maxsize=None)
def _hints(cls: type) -> dict[str, Any]:
    """Field types resolved from the (string) annotations; a field whose annotation cannot be
    resolved (a third-party attack's own type, say) is not checked."""
    try:
        return typing.get_type_hints(cls)
    except Exception:
        pass
    hints = {}
    for f in dataclasses.fields(cls):
        owner = next((c for c in cls.__mro__ if f.name in getattr(c, "__annotations__", {})), cls)
        try:
            hints[f.name] = eval(f.type, vars(sys.modules[owner.__module__])) \
                if isinstance(f.type, str) else f.type
        except Exception:
            hints[f.name] = Any
    return hints
