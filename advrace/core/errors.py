"""Errors that the CLI turns into a one-line message and a non-zero exit."""

from __future__ import annotations


class AdvraceError(Exception):
    """Base class: a problem the user can fix. The CLI prints it and exits with `exit_code`."""

    exit_code = 1


class DataError(AdvraceError):
    """A malformed input record: names the file, the record and what is wrong."""

    exit_code = 2

    def __init__(self, file: str, record: str | None, problem: str):
        self.file = str(file)
        self.record = record
        self.problem = problem
        where = self.file if record is None else f"{self.file}, record {record}"
        hint = "" if record is None else " (fix the record, or pass --lenient to skip and list bad records)"
        super().__init__(f"{where}: {problem}{hint}")

    def as_dict(self) -> dict:
        return {"file": self.file, "record": self.record, "problem": self.problem}


class ConfigError(AdvraceError):
    """A bad release config or command-line combination."""

    exit_code = 2


class ResourceMissing(AdvraceError):
    """A linguistic resource is not installed; the message says how to install it."""

    exit_code = 3


class EditError(ValueError):
    """An edit that would break a label or answer offset (for example, touching a gold span)."""


class VerifyError(AdvraceError):
    """A release whose files do not match its manifest."""

    exit_code = 1
