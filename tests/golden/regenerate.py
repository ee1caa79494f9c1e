"""Rewrite the golden files from a fresh build: `python tests/golden/regenerate.py` from the repo root.

Run it only when a change to a release is intended, then review `git diff tests/golden`:
every changed line is a record that a release built with this code would change.
"""

import json
import os
import sys
import tempfile
from pathlib import Path

# This checkout's code, not whatever copy of advrace the virtualenv has installed.
sys.path[:0] = [str(Path(__file__).resolve().parents[2]), str(Path(__file__).resolve().parent)]

from golden_build import ENVIRONMENT, GOLDEN, build, environment, golden_file  # noqa: E402


def main() -> int:
    from transformers.utils import logging

    logging.disable_progress_bar()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["ADVRACE_CACHE"] = str(Path(tmp) / "cache")  # cold caches, as in the tests
        built = build(Path(tmp) / "build")
        again = build(Path(tmp) / "again")
        if again.files != built.files or environment(again) != environment(built):
            print("two builds differ: the goldens would not be reproducible", file=sys.stderr)
            return 1
        stale = set(GOLDEN.glob("*/*.jsonl"))
        for (task, split), data in sorted(built.files.items()):
            path = golden_file(task, split)
            path.parent.mkdir(exist_ok=True)
            path.write_bytes(data)
            stale.discard(path)
            records = data.count(b"\n")
            print(f"{path.relative_to(GOLDEN.parents[1])}: {records} records")
        for path in sorted(stale):
            path.unlink()
            print(f"{path.relative_to(GOLDEN.parents[1])}: removed (no such split any more)")
        ENVIRONMENT.write_text(json.dumps(environment(built), indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
