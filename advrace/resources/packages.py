"""Installed-package lookups that import nothing, so a manifest can name every resource's
version without paying for loading it."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
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


# Optional dependencies a package imports when they are installed but that advrace's use of it
# never touches: thinc (under spaCy) imports torch only for torch-wrapped layers, which the
# spaCy pipelines used here do not have, and nltk's __init__ imports scipy.stats and sklearn only
# for its collocation statistics and classifiers. Together they are most of a rule-based build's
# start-up (torch alone takes seconds).
UNUSED_EXTRAS = {"spacy": ("torch",), "nltk": ("scipy", "sklearn")}


def lean_import(name: str):
    """Import `name`, hiding while it is first imported the optional dependencies of
    `UNUSED_EXTRAS` that are not imported yet; the package then runs without them (it guards
    these imports), and later imports of them elsewhere work as usual. A package already
    imported is returned as it is."""
    top = name.partition(".")[0]
    if top in sys.modules or top not in UNUSED_EXTRAS:
        return importlib.import_module(name)
    hidden = [m for m in UNUSED_EXTRAS[top] if m not in sys.modules]
    for m in hidden:
        sys.modules[m] = None  # makes `import m` raise ImportError
    try:
        importlib.import_module(top)
    finally:
        for m in hidden:
            if m in sys.modules and sys.modules[m] is None:
                del sys.modules[m]
    return importlib.import_module(name)
