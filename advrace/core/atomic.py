"""Folders and files that appear whole or not at all: releases, reports and caches are written
beside their destination and renamed into place, so an interrupted run never leaves half of one."""

from __future__ import annotations

import os
import shutil
from contextlib import contextmanager
from pathlib import Path

from advrace.core.errors import ConfigError


def check_replaceable(out: Path, marker: str, what: str) -> None:
    """Refuse to replace a non-empty folder that is not an earlier `what` (has no `marker`)."""
    if out.exists() and (not out.is_dir() or (any(out.iterdir()) and not (out / marker).exists())):
        raise ConfigError(f"{out}: exists and is not an advrace {what}; choose another --out or remove it")


@contextmanager
def atomic_dir(out: str | Path, marker: str, what: str):
    """Yield an empty temporary folder; when the block succeeds it replaces `out`."""
    out = Path(out)
    check_replaceable(out, marker, what)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir()
    try:
        yield tmp
        if out.exists():
            old = out.with_name(f".{out.name}.old-{os.getpid()}")
            os.rename(out, old)
            os.rename(tmp, out)
            shutil.rmtree(old)
        else:
            os.rename(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def write_text_atomically(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
