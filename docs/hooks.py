"""MkDocs hook: let mkdocstrings find `advrace.attacks`, `advrace.training` and `advrace.human_eval`.

They live in the top-level folders `attacks/`, `training/` and `human_eval/`, which setup.py's
`package_dir` installs inside `advrace`; griffe reads source folders and knows nothing of
`package_dir`. So the hook lays the package out as installed (links in a temporary folder, read
from setup.py) and points the Python handler there: a fresh checkout documents itself, installed
or not.
"""

from __future__ import annotations

import ast
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority

ROOT = Path(__file__).resolve().parents[1]
_TMP: tempfile.TemporaryDirectory | None = None


def _package_dir() -> dict[str, str]:
    tree = ast.parse((ROOT / "setup.py").read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.keyword) and node.arg == "package_dir":
            return ast.literal_eval(node.value)
    raise ValueError("setup.py has no package_dir")


def _installed_layout(target: Path) -> None:
    package = target / "advrace"
    package.mkdir()
    mapped = {name.split(".", 1)[1]: folder for name, folder in _package_dir().items()}
    for entry in (ROOT / "advrace").iterdir():
        if entry.name not in mapped:
            (package / entry.name).symlink_to(entry)
    for name, folder in mapped.items():
        (package / name).symlink_to(ROOT / folder)


@event_priority(100)
def on_config(config):
    global _TMP
    _TMP = tempfile.TemporaryDirectory(prefix="advrace-docs-")
    _installed_layout(Path(_TMP.name))
    config["plugins"]["mkdocstrings"].config["handlers"].setdefault("python", {})["paths"] = [_TMP.name]
    return config


def on_shutdown():
    if _TMP is not None:
        _TMP.cleanup()
