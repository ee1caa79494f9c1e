"""Where the benches write what they measured: a dated row in `docs/results.md`.

Every bench takes `--record`; with it, its figures go into its own table of the results page
(between `<!-- bench:NAME -->` and `<!-- /bench:NAME -->`, newest first) with the date, the
machine (CPU model and cores, the GPU when one ran), the versions of advrace, torch and
transformers, and the exact command. The page is the one place a measured figure lives; the other
pages link to it. `ADVRACE_RESULTS_PAGE` names another page (the tests use one).
"""

from __future__ import annotations

import argparse
import datetime
import os
import platform
import shlex
import sys
from importlib import metadata
from pathlib import Path

PAGE = Path(__file__).resolve().parents[1] / "docs" / "results.md"
HEADER = "| date | machine | versions | command | figures |\n|---|---|---|---|---|"


def add_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--record", action="store_true",
                        help="write the result as a dated row of docs/results.md")


def subprocess_env(tmp: Path, base: dict | None = None) -> dict:
    """The environment for a timed subprocess: bytecode written to (and read from) a fresh cache
    under `tmp`, as an installed package keeps it. PYTHONDONTWRITEBYTECODE is dropped: with a
    cache prefix and no writing, every import of every run would compile its module again
    (seconds per process, measured on `bench/model_load.py`'s loads)."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(Path(tmp) / "pycache")
    return env


def cpu_model() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text(encoding="utf-8").splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def machine() -> str:
    """The CPU and its cores, and the GPU when torch has one (only when the bench loaded torch)."""
    text = f"{cpu_model()}, {os.cpu_count()} cores"
    torch = sys.modules.get("torch")
    if torch is not None and torch.cuda.is_available():
        text += f"; {torch.cuda.get_device_name(0)}"
    return text


def versions() -> str:
    found = []
    for name in ("advrace", "torch", "transformers"):
        try:
            found.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            pass
    return ", ".join(found)


def command(name: str, argv: list[str]) -> str:
    """The command that ran bench NAME (bench/NAME.py) with `argv`, less `--record`."""
    return shlex.join(["python", f"bench/{name}.py", *[a for a in argv if a != "--record"]])


def _cell(value) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def row(name: str, figures: dict, argv: list[str] | None = None) -> str:
    figures_text = "; ".join(f"{key} {value}" for key, value in figures.items())
    cells = [datetime.date.today().isoformat(), machine(), versions(),
             f"`{command(name, sys.argv[1:] if argv is None else argv)}`", figures_text]
    return "| " + " | ".join(_cell(c) for c in cells) + " |"


def markers(name: str) -> tuple[str, str]:
    """The comments around bench NAME's table."""
    return f"<!-- bench:{name} -->", f"<!-- /bench:{name} -->"


def table(text: str, name: str) -> list[str]:
    """The lines of bench NAME's table in the page `text` (header first)."""
    start, end = markers(name)
    return text.partition(start)[2].partition(end)[0].strip("\n").splitlines()


def record(name: str, figures: dict, argv: list[str] | None = None) -> Path:
    """Put one row, newest first, into bench NAME's table of the results page; returns the page.

    A bench without a table yet gets one, in a section of its own at the end of the page."""
    page = Path(os.environ.get("ADVRACE_RESULTS_PAGE", PAGE))
    text = page.read_text(encoding="utf-8")
    start, end = markers(name)
    if start not in text:
        text = text.rstrip("\n") + f"\n\n## `bench/{name}.py`\n\n{start}\n{HEADER}\n{end}\n"
    head, _, rest = text.partition(start)
    tail = rest.partition(end)[2]
    lines = table(text, name)
    if lines[:2] != HEADER.splitlines():
        raise ValueError(f"{page}: the table after {start} does not start with the results header; "
                         f"restore it as:\n{HEADER}")
    lines.insert(2, row(name, figures, argv))
    page.write_text(head + start + "\n" + "\n".join(lines) + "\n" + end + tail, encoding="utf-8")
    print(f"recorded in {page}")
    return page
