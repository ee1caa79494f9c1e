"""What every input format shares: the `Format` interface, the result a loader returns, and the
strict reading of files that all loaders do the same way.

Every loader is strict by default: the first malformed record stops the run with a DataError
that names the file, the record and the problem, because a benchmark silently built from half a
dataset is worse than no benchmark. With `lenient=True` bad records are skipped and listed, and
`read == kept + len(skipped)` always holds so a release can report exactly what was dropped.
"""

from __future__ import annotations

import gzip
import hashlib
import json
import os
import re
import zlib
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable

from advrace.core.errors import ConfigError, DataError
from advrace.core.examples import examples_sha256


@dataclass
class LoadResult:
    """What a loader produced, plus enough bookkeeping for a release manifest to cite it."""

    examples: list
    source: str
    format: str
    files: list[str]
    read: int
    skipped: list[dict] = field(default_factory=list)
    _digest: str = field(default="", repr=False, compare=False)
    part: str | None = None  # the data set's own split as read (see part_named); None: not named

    @property
    def kept(self) -> int:
        return len(self.examples)

    @property
    def passages(self) -> int:
        """Distinct passages (RACE) or contexts (SQuAD) among the examples."""
        return len({ex.passage_text for ex in self.examples})

    @property
    def levels(self) -> list[str]:
        """RACE's school levels among the examples, read from their RACE ids (`high1.txt-0`);
        empty for data without them."""
        return sorted({level for ex in self.examples if (level := race_level(ex.id))})

    def fingerprint(self) -> str:
        """sha256 of the inputs, independent of where they live; computed while loading.

        A result built by hand (no inputs read) falls back to hashing its examples.
        """
        return self._digest or examples_sha256(self.examples)


PART_NAMES = ("train", "dev", "validation", "test")
PART_ALIASES = {"validation": "dev"}  # names of one part: a card compares parts by these
RACE_LEVEL = re.compile(r"(high|middle)\d")


def race_level(example_id: str) -> str:
    """RACE's school level (`high`, `middle`) from an id such as `high1.txt-0`; "" for others."""
    m = RACE_LEVEL.match(example_id)
    return m.group(1) if m else ""


def part_words(text: str) -> list[str]:
    """The names of a data set's parts among `text`'s words, as written and in PART_NAMES order;
    a whole word only, so `devtools` or `contest` names none. File names, recipe names and
    descriptions are read alike, so a card's check agrees with what a manifest records."""
    words = set(re.findall(r"[a-z]+", text.lower()))
    return [s for s in PART_NAMES if s in words]


def canonical_part(name: str) -> str:
    """One name per part (`validation` is `dev`), for comparing parts named differently."""
    return PART_ALIASES.get(name, name)


def part_named(path: str, files=()) -> str | None:
    """The data set's own part (train, dev, test) as its folder and file names say: `dev` for RACE/dev/middle or
    dev-v1.1.json, `dev+test` for a folder holding RACE's dev/ and test/. Only the data's own
    names and those of its two nearest folders count (exactly, not as parts of a longer name),
    so where a copy sits does not change what a release says about it."""
    below = {folder.lower() for rel in files for folder in rel.split("/")[:-1]}
    found = [s for s in PART_NAMES if s in below]
    if found:
        return "+".join(found)
    path = os.path.abspath(path)
    if os.path.isfile(path):
        found = part_words(os.path.basename(path))
        if len(found) == 1:
            return found[0]
        path = os.path.dirname(path)
    for _ in range(3):
        if os.path.basename(path).lower() in PART_NAMES:
            return os.path.basename(path).lower()
        path = os.path.dirname(path)
    return None


class Probe:
    """A path as the formats see it while `detect_format` or a mismatch check asks each in turn:
    every check and every read happens once, however many formats ask."""

    def __init__(self, path: str):
        self.path = path
        self.lower = path.lower()

    @cached_property
    def exists(self) -> bool:
        return os.path.exists(self.path)

    @cached_property
    def isdir(self) -> bool:
        return os.path.isdir(self.path)

    def suffix(self, *endings: str) -> bool:
        """An existing file (not a folder) whose name ends in one of `endings`, in any case."""
        return self.exists and not self.isdir and self.lower.endswith(endings)

    @cached_property
    def parsed(self) -> Any:
        """The file as one JSON value; a DataError when it cannot be read or parsed, since a
        file named .json that is not JSON should say so rather than 'unknown format'."""
        return read_json_file(self.path)[1]

    @cached_property
    def peek(self) -> tuple[Any, bool] | None:
        """`(value, whole)` for sniffing: the file (gunzipped) as one JSON value, whole=True;
        failing that, its first non-empty line as one, whole=False; None when neither parses.
        Never raises for bad data: it only ever improves an error message."""
        if not os.path.isfile(self.path):
            return None
        try:
            text = gunzip(self.path, read_bytes(self.path)).decode("utf-8")
        except (DataError, UnicodeDecodeError):
            return None
        try:
            return json.loads(text), True
        except RecursionError:
            return None
        except ValueError:
            first = next((line for line in text.splitlines() if line.strip()), "")
            try:
                return json.loads(first), False
            except (ValueError, RecursionError):
                return None


class Format:
    """One input format. Subclass it, set the attributes, implement `load`, and decorate the
    class with `advrace.formats.register_format`; `load`, `detect_format`, `--format` and the
    configs then know it by `name`.
    """

    name: str = ""
    tasks: tuple[str, ...] = ()  # advrace.core.tasks names of the examples it yields
    description: str = ""  # a noun phrase, as in "looks like <description>, not race-jsonl"
    local: bool = True  # reads local files or folders, so a mismatch can be sniffed
    priority: int = 0  # asked before formats of lower priority; ties in registration order

    def load(self, path: str, *, lenient: bool = False, limit: int | None = None,
             n_options: int = 4, part: str = "test") -> LoadResult:
        """Read `path`; `part` (train, dev, test...) means something only to sources that hold
        several, such as the hub."""
        raise NotImplementedError

    def detect(self, probe: Probe) -> bool:
        """Whether a path given without --format is in this format, judged by its name and,
        where the name is not enough, its top-level shape."""
        return False

    def sniff(self, probe: Probe) -> bool:
        """Whether the contents look like this format: asked only after a load in another
        format failed, to name the format that would have worked."""
        return False


class BadRecord(Exception):
    """A record-level problem; the caller knows which file and record it belongs to."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


class Collector:
    """Counts records, keeps good examples, and raises or lists bad ones."""

    def __init__(self, lenient: bool, limit: int | None):
        self.lenient = lenient
        self.limit = limit
        self.examples: list = []
        self.skipped: list[dict] = []
        self.read = 0
        self._ids: dict[str, str] = {}

    @property
    def full(self) -> bool:
        return self.limit is not None and len(self.examples) >= self.limit

    def add(self, file: str, record: str | None, build: Callable[[], Any]) -> None:
        self.read += 1
        try:
            ex = build()
            if ex.id in self._ids:
                raise BadRecord(f"duplicate id {ex.id!r} (first used by {self._ids[ex.id]})")
        except BadRecord as e:
            self._fail(DataError(file, record, e.problem))
            return
        except ValueError as e:
            self._fail(DataError(file, record, str(e)))
            return
        self._ids[ex.id] = file if record is None else f"{file}, record {record}"
        self.examples.append(ex)

    def bad(self, file: str, record: str | None, problem: str) -> None:
        """A unit (file, row, paragraph) that yields no examples counts as one record read."""
        self.read += 1
        self._fail(DataError(file, record, problem))

    def _fail(self, err: DataError) -> None:
        if not self.lenient:
            raise err
        self.skipped.append(err.as_dict())

    def result(self, source: str, fmt: str, files: list[str], digest: str, part: str | None = None
               ) -> LoadResult:
        """The result; `part` defaults to what the source's folder and file names say."""
        return LoadResult(examples=self.examples, source=source, format=fmt, files=sorted(files),
                          read=self.read, skipped=self.skipped, _digest=digest,
                          part=part if part is not None else part_named(source, files))


class Hasher:
    """Hashes (relative name, bytes) pairs in name order, so copies elsewhere hash the same."""

    def __init__(self):
        self._parts: list[tuple[str, str]] = []

    def add(self, name: str, data: bytes) -> None:
        self._parts.append((name, hashlib.sha256(data).hexdigest()))

    def hexdigest(self) -> str:
        h = hashlib.sha256()
        for name, digest in sorted(self._parts):
            h.update(name.encode("utf-8") + b"\0" + digest.encode("ascii") + b"\n")
        return h.hexdigest()


def file_digest(path: str, raw: bytes) -> str:
    """The fingerprint of a one-file input: its bytes under its base name."""
    hasher = Hasher()
    hasher.add(os.path.basename(path), raw)
    return hasher.hexdigest()


def check_args(limit: int | None, n_options: int | None = 4) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a whole number of questions, 0 or more, got {limit!r}")
    if n_options is not None and (isinstance(n_options, bool) or not isinstance(n_options, int)
                                  or not 2 <= n_options <= 26):
        raise ConfigError(f"n_options must be an integer from 2 to 26, got {n_options!r}")


def need_file(path: str) -> None:
    if os.path.isdir(path):
        raise DataError(path, None, "is a folder, but this format reads a single file")
    if not os.path.exists(path):
        raise DataError(path, None, "no such file")


def read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DataError(path, None, f"cannot read the file ({e.strerror or e})") from None


def gunzip(path: str, raw: bytes) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(path, None, f"not a valid gzip file ({e})") from None


def decode(raw: bytes, line: int | None = None) -> str:
    """UTF-8 text (a leading BOM is dropped); BadRecord says where the first invalid byte is."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if line is None:
            lineno = raw.count(b"\n", 0, e.start) + 1
            where = f"line {lineno}, byte {e.start}"
        else:
            where = f"byte {e.start} of the line"
        raise BadRecord(f"invalid UTF-8 encoding at {where} ({e.reason})") from None


def parse_json(text: str, *, in_line: bool = False, **kwargs) -> Any:
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        where = f"column {e.colno}" if in_line else f"line {e.lineno}, column {e.colno}"
        raise BadRecord(f"invalid JSON at {where}: {e.msg}") from None
    except RecursionError:
        raise BadRecord("invalid JSON: nested too deeply") from None


def read_json_file(path: str, **kwargs) -> tuple[bytes, Any]:
    raw = read_bytes(path)
    try:
        return raw, parse_json(decode(raw), **kwargs)
    except BadRecord as e:
        raise DataError(path, None, e.problem) from None
