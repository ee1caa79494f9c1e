"""The benches write their figures into the results page (bench/results.py), each into its own table."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "bench"))

import results  # noqa: E402  (bench/results.py)

NOT_BENCHES = {"results.py", "original_charswap.py", "original_addsent.py"}  # the helper; the released AdvRACE scripts that startup.py times


@pytest.fixture
def page(tmp_path, monkeypatch):
    path = tmp_path / "results.md"
    path.write_text((REPO / "docs" / "results.md").read_text(encoding="utf-8"), encoding="utf-8")
    monkeypatch.setenv("ADVRACE_RESULTS_PAGE", str(path))
    return path


def test_a_row_goes_first_in_its_own_table(page, monkeypatch):
    before = page.read_text(encoding="utf-8")
    old_rows = results.table(before, "startup")[2:]
    monkeypatch.setattr(sys, "argv", ["bench/startup.py", "RACE/dev/middle", "--record", "--sizes", "10"])
    results.record("startup", {"advrace --help s": "0.20", "pipe": "a|b"})
    after = page.read_text(encoding="utf-8")
    rows = results.table(after, "startup")
    assert rows[:2] == results.HEADER.splitlines()
    assert rows[3:] == old_rows, "older rows stay, below the new one"
    cells = rows[2].split(" | ")
    assert "cores" in cells[1]
    assert "advrace" in cells[2]
    assert cells[3] == "`python bench/startup.py RACE/dev/middle --sizes 10`"
    assert "advrace --help s 0.20; pipe a\\|b" in cells[4]
    assert results.table(after, "train_memory") == results.table(before, "train_memory")


def test_a_bench_without_a_table_gets_one(page):
    results.record("new_bench", {"speed-up": "2.0x"}, argv=["--limit", "3"])
    rows = results.table(page.read_text(encoding="utf-8"), "new_bench")
    assert len(rows) == 3 and rows[2].endswith("speed-up 2.0x |")
    assert "## `bench/new_bench.py`" in page.read_text(encoding="utf-8")


def test_a_damaged_table_is_refused_with_what_to_do(page):
    page.write_text("<!-- bench:startup -->\n| date |\n<!-- /bench:startup -->\n", encoding="utf-8")
    with pytest.raises(ValueError, match="restore it as"):
        results.record("startup", {"x": 1})


@pytest.mark.parametrize("bench", sorted(p.name for p in (REPO / "bench").glob("*.py") if p.name not in NOT_BENCHES))
def test_every_bench_can_record(bench):
    source = (REPO / "bench" / bench).read_text(encoding="utf-8")
    assert "results.add_argument(" in source and "results.record(" in source, \
        f"bench/{bench} does not write its result with --record (bench/results.py)"


def test_a_bench_run_records_its_figures(page):
    run = subprocess.run([sys.executable, "bench/audit_quality.py", "--kinds", "negation_hint", "--record"],
                         cwd=REPO, capture_output=True, text=True, timeout=600,
                         env={**os.environ, "ADVRACE_RESULTS_PAGE": str(page)})
    assert run.returncode == 0, run.stderr[-3000:]
    row = results.table(page.read_text(encoding="utf-8"), "audit_quality")[2]
    assert "`python bench/audit_quality.py --kinds negation_hint`" in row
    assert "negation_hint (" in row and "precision" in row and "recall" in row


def test_timed_subprocesses_keep_their_bytecode(tmp_path):
    """A bench's subprocess env caches bytecode under its prefix even where the caller's env
    forbids writing it: otherwise every timed run compiles every module it imports again."""
    (tmp_path / "probe_module.py").write_text("VALUE = 1\n", encoding="utf-8")
    env = results.subprocess_env(tmp_path, {**os.environ, "PYTHONDONTWRITEBYTECODE": "1"})
    assert "PYTHONDONTWRITEBYTECODE" not in env
    subprocess.run([sys.executable, "-c", "import probe_module"], cwd=tmp_path, env=env, check=True)
    assert list((tmp_path / "pycache").rglob("probe_module*.pyc"))
