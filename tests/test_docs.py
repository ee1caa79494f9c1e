"""The documentation site builds with warnings as errors, and no Markdown file leaves a code block open.

An unclosed fence turns the rest of a page into one code block, on GitHub, PyPI (the README is
setup.py's long_description) and the site alike; `mkdocs build --strict` fails on a broken link,
a missing page or a docstring that mkdocstrings cannot render.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
SKIP = {".git", ".venv", ".venv-latest", "site", "node_modules", "releases", "runs"}
FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,})(.*)$")


def unclosed_fence(text: str) -> int | None:
    """The line number of a code fence that is never closed (CommonMark's rule), or None."""
    opened = None
    for number, line in enumerate(text.splitlines(), 1):
        match = FENCE.match(line)
        if not match:
            continue
        fence, rest = match.groups()
        if opened is None:
            if not (fence[0] == "`" and "`" in rest):
                opened = (fence, number)
        elif fence[0] == opened[0][0] and len(fence) >= len(opened[0]) and not rest.strip():
            opened = None
    return opened[1] if opened else None


def markdown_files() -> list[Path]:
    return sorted(p for p in REPO.rglob("*.md") if not SKIP & set(p.relative_to(REPO).parts))


def test_unclosed_fence_is_found():
    assert unclosed_fence("text\n```8%).\nmore\n") == 2
    assert unclosed_fence("```bash\nmake test\n```\n") is None
    assert unclosed_fence("````\n```\nstill code\n````\n") is None


@pytest.mark.parametrize("path", markdown_files(), ids=lambda p: str(p.relative_to(REPO)))
def test_no_unclosed_code_fence(path):
    line = unclosed_fence(path.read_text(encoding="utf-8"))
    assert line is None, f"{path.relative_to(REPO)}:{line}: this code fence is never closed; add a closing ``` line"


def test_markdown_files_were_found():
    names = {str(p.relative_to(REPO)) for p in markdown_files()}
    assert {"README.md", "docs/index.md", "advrace/sample_data/README.md"} <= names


def test_site_builds_strict(tmp_path):
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    run = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
                         cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert run.returncode == 0, run.stderr[-4000:]
    api = (tmp_path / "site" / "api" / "index.html").read_text(encoding="utf-8")
    for anchor in ("advrace.release.build_release", "advrace.attacks.base.Attack", "advrace.attacks.base.register",
                   "advrace.core.examples.MCExample", "advrace.models.encoders.readers", "advrace.models.encoders.mc_scoring",
                   "advrace.models.decoders.llm_scoring.CausalLMScorer",
                   "advrace.models.decoders.llm_scoring.load_causal_scorer"):
        assert f'id="{anchor}' in api, f"the API reference lacks {anchor}"
