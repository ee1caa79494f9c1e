"""`advrace compare REPORT_A REPORT_B`: two evaluation reports side by side, per model and split,
and first of all whether their numbers can be compared at all: the same release (the sha256 of
its manifest), and for each decoder LM the same scoring protocol (advrace.models.decoders.scoring_protocol).
A difference in either is said before any number, line by line."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.evaluation.report import METRIC_TITLES
from advrace.models.decoders.scoring_protocol import differences


def read_report(path) -> dict:
    """A report's results.json (a report folder or the file itself)."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no results.json there; give a folder written by `advrace evaluate`") from None
    except ValueError as exc:
        raise ConfigError(f"{file}: not JSON ({exc})") from None
    if not isinstance(summary, dict) or "results" not in summary or "release" not in summary:
        raise ConfigError(f"{file}: not an advrace evaluation report (no `results` and `release`)")
    return summary


def _protocol(summary: dict, model: str) -> dict:
    return (summary["results"][model].get("source") or {}).get("protocol") or {}


def caveats(a: dict, b: dict) -> list[str]:
    """What keeps the two reports' numbers from meaning the same thing, one line each."""
    lines = []
    ra, rb = a["release"], b["release"]
    if ra.get("manifest_sha256") != rb.get("manifest_sha256") or ra.get("name") != rb.get("name"):
        lines.append(f"different releases: {ra.get('name')} (manifest sha256 {str(ra.get('manifest_sha256'))[:16]}) "
                     f"vs {rb.get('name')} (manifest sha256 {str(rb.get('manifest_sha256'))[:16]})")
    for model in [m for m in a["models"] if m in b["models"]]:
        diff = differences(_protocol(a, model), _protocol(b, model))
        if diff:
            lines.append(f"`{model}` was scored under different protocols: " + "; ".join(diff))
    return lines


def compare_reports(a: dict, b: dict, names: tuple[str, str] = ("A", "B")) -> str:
    """The comparison as Markdown: the caveats first, then per shared model and split each
    metric in both reports and B - A (percentage points)."""
    lines = [f"# {names[0]} vs {names[1]}", ""]
    warn = caveats(a, b)
    if warn:
        lines += ["**These numbers do not compare directly:**", ""] + [f"- {w}" for w in warn] + [""]
    else:
        lines += ["Same release, and every model shared by both was scored under the same protocol.", ""]
    models = [m for m in a["models"] if m in b["models"]]
    only = [(names[0], m) for m in a["models"] if m not in models] + \
           [(names[1], m) for m in b["models"] if m not in models]
    for metric in [m for m in a["metrics"] if m in b["metrics"]]:
        lines += [f"## {METRIC_TITLES.get(metric, metric)}", "", f"| model | split | {names[0]} | {names[1]} | "
                  f"{names[1]} − {names[0]} |", "|---|---|---:|---:|---:|"]
        for model in models:
            splits_a, splits_b = a["results"][model]["splits"], b["results"][model]["splits"]
            for split in [s for s in splits_a if s in splits_b]:
                x, y = splits_a[split].get(metric), splits_b[split].get(metric)
                delta = f"{y - x:+.2f}" if x is not None and y is not None else "–"
                show = [f"{v:.2f}" if v is not None else "–" for v in (x, y)]
                lines.append(f"| {model} | {split} | {show[0]} | {show[1]} | {delta} |")
        lines.append("")
    if only:
        lines += ["Models in one report only: " + ", ".join(f"`{m}` ({n})" for n, m in only) + ".", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


COMPARE_EPILOG = textwrap.dedent("""\
    example:
      advrace compare reports/smollm2 reports/smollm2-bos

    Prints, as Markdown: first what keeps the numbers from comparing (another release, by the
    sha256 of its manifest.json; a model scored under another protocol: prompt, BOS, shots,
    truncation, maximum length, weights, ...), then each metric per model and split in both
    reports and the difference in percentage points. Models are matched by their report label.
    Exit status: 0, or 2 if a report cannot be read.
    """)


def add_compare_parser(subparsers):
    """Add the `compare` subcommand; returns its handler."""
    p = subparsers.add_parser(
        "compare", help="compare two evaluation reports, and say whether their numbers compare",
        description="Put two reports of `advrace evaluate` side by side, after saying whether they "
                    "scored the same release under the same protocols.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=COMPARE_EPILOG)
    p.add_argument("report_a", help="report folder (or its results.json)")
    p.add_argument("report_b", help="report folder (or its results.json)")

    def handler(args) -> int:
        print(compare_reports(read_report(args.report_a), read_report(args.report_b),
                              (str(args.report_a), str(args.report_b))).rstrip())
        return 0

    p.set_defaults(handler=handler)
    return handler
