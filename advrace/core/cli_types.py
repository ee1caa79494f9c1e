"""Argument types shared by the command-line parsers of every floor (argparse `type=` callables),
so that a subcommand defined below the CLI need not import the CLI."""

from __future__ import annotations


def comma_list(value: str) -> list[str]:
    """`a, b,,c` -> ["a", "b", "c"]: a comma-separated option value, blanks dropped."""
    return [v.strip() for v in value.split(",") if v.strip()]
