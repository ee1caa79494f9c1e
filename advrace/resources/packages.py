"""Installed-package lookups that import nothing, so a manifest can name every resource's
version without paying for loading it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
from pathlib import Path


def package_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def module_dir(module: str) -> Path | None:
    """The folder of an installed package, found without importing it."""
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])
