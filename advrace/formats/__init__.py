"""Readers that turn RACE and SQuAD inputs into validated, immutable examples.

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
import string
import zlib
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Iterator

from advrace.core.errors import ConfigError, DataError
from advrace.core.examples import Answer, MCExample, SpanExample

FORMATS = ("race-dir", "race-jsonl", "advrace-json", "squad", "hub")

_HUB_DEFAULT_CONFIGS = {"ehovy/race": "all"}
_HUB_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]*/[A-Za-z0-9][A-Za-z0-9_.-]*(:[A-Za-z0-9_.-]+)?$")
_FILE_SUFFIXES = (".json", ".jsonl", ".gz", ".txt", ".csv", ".tsv", ".parquet")
_RACE_FIELDS = ("article", "questions", "options", "answers")
_HUB_ROW_FIELDS = ("example_id", "article", "question", "options", "answer")


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

    @property
    def kept(self) -> int:
        return len(self.examples)

    def fingerprint(self) -> str:
        """sha256 of the inputs, independent of where they live; computed while loading.

        A result built by hand (no inputs read) falls back to hashing its examples.
        """
        if self._digest:
            return self._digest
        h = hashlib.sha256()
        for ex in self.examples:
            h.update(json.dumps(ex.to_record(), sort_keys=True, ensure_ascii=False).encode("utf-8"))
            h.update(b"\n")
        return h.hexdigest()


class _Bad(Exception):
    """A record-level problem; the caller knows which file and record it belongs to."""

    def __init__(self, problem: str):
        super().__init__(problem)
        self.problem = problem


class _Collector:
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
                raise _Bad(f"duplicate id {ex.id!r} (first used by {self._ids[ex.id]})")
        except _Bad as e:
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

    def result(self, source: str, fmt: str, files: list[str], digest: str) -> LoadResult:
        return LoadResult(examples=self.examples, source=source, format=fmt, files=sorted(files),
                          read=self.read, skipped=self.skipped, _digest=digest)


class _Hasher:
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


# ---------------------------------------------------------------- argument and path checks


def _check_args(limit: int | None, n_options: int | None = 4) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ConfigError(f"limit must be a whole number of questions, 0 or more, got {limit!r}")
    if n_options is not None and (isinstance(n_options, bool) or not isinstance(n_options, int)
                                  or not 2 <= n_options <= 26):
        raise ConfigError(f"n_options must be an integer from 2 to 26, got {n_options!r}")


def _looks_like_hub_name(path: str) -> bool:
    if path.startswith((".", "/", "~")) or path.lower().endswith(_FILE_SUFFIXES):
        return False
    return bool(_HUB_NAME.match(path))


def _need_file(path: str) -> None:
    if os.path.isdir(path):
        raise DataError(path, None, "is a folder, but this format reads a single file")
    if not os.path.exists(path):
        raise DataError(path, None, "no such file")


def _read_bytes(path: str) -> bytes:
    try:
        with open(path, "rb") as f:
            return f.read()
    except OSError as e:
        raise DataError(path, None, f"cannot read the file ({e.strerror or e})") from None


def _gunzip(path: str, raw: bytes) -> bytes:
    if raw[:2] != b"\x1f\x8b":
        return raw
    try:
        return gzip.decompress(raw)
    except (OSError, EOFError, zlib.error) as e:
        raise DataError(path, None, f"not a valid gzip file ({e})") from None


def _decode(raw: bytes, line: int | None = None) -> str:
    """UTF-8 text (a leading BOM is dropped); _Bad says where the first invalid byte is."""
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        if line is None:
            lineno = raw.count(b"\n", 0, e.start) + 1
            where = f"line {lineno}, byte {e.start}"
        else:
            where = f"byte {e.start} of the line"
        raise _Bad(f"invalid UTF-8 encoding at {where} ({e.reason})") from None


def _parse_json(text: str, *, in_line: bool = False, **kwargs) -> Any:
    try:
        return json.loads(text, **kwargs)
    except json.JSONDecodeError as e:
        where = f"column {e.colno}" if in_line else f"line {e.lineno}, column {e.colno}"
        raise _Bad(f"invalid JSON at {where}: {e.msg}") from None
    except RecursionError:
        raise _Bad("invalid JSON: nested too deeply") from None


def _read_json_file(path: str, **kwargs) -> tuple[bytes, Any]:
    raw = _read_bytes(path)
    try:
        return raw, _parse_json(_decode(raw), **kwargs)
    except _Bad as e:
        raise DataError(path, None, e.problem) from None


# ---------------------------------------------------------------- field validation


def _field(obj: dict, name: str, kind: type | tuple[type, ...] = str) -> Any:
    if name not in obj:
        raise _Bad(f"missing field {name!r}")
    value = obj[name]
    if kind is int:
        ok = isinstance(value, int) and not isinstance(value, bool)
    else:
        ok = isinstance(value, kind)
    if not ok:
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise _Bad(f"field {name!r} must be a {want}, got {type(value).__name__}")
    return value


def _text(obj: dict, name: str) -> str:
    value = _field(obj, name, str)
    if not value.strip():
        raise _Bad(f"empty {name}" if value == "" else f"empty {name} (whitespace only)")
    return value


def _options(value: Any, n_options: int) -> tuple[str, ...]:
    if not isinstance(value, list):
        raise _Bad(f"options must be a list, got {type(value).__name__}")
    if len(value) != n_options:
        raise _Bad(f"wrong number of options: expected {n_options} options, got {len(value)}")
    for i, opt in enumerate(value):
        if not isinstance(opt, str):
            raise _Bad(f"option {i} must be a string, got {type(opt).__name__}")
    return tuple(value)


def _label(value: Any, n_options: int, *, allow_int: bool, name: str = "answer") -> int:
    letters = string.ascii_uppercase[:n_options]
    span = f"{letters[0]}-{letters[-1]}"
    if isinstance(value, str):
        if len(value) == 1 and value in string.ascii_uppercase:
            if value not in letters:
                raise _Bad(f"{name} {value!r} is out of range for {n_options} options "
                           f"(expected a letter {span})")
            return letters.index(value)
        raise _Bad(f"{name} {value!r} is not a letter {span}")
    if allow_int and isinstance(value, int) and not isinstance(value, bool):
        if not 0 <= value < n_options:
            raise _Bad(f"{name} {value} is out of range for {n_options} options "
                       f"(expected 0-{n_options - 1} or a letter {span})")
        return value
    want = f"an index 0-{n_options - 1} or a letter {span}" if allow_int else f"a letter {span}"
    raise _Bad(f"{name} must be {want}, got {type(value).__name__} {value!r}")


def _mc(ex_id: str, passage: str, question: Any, options: Any, answer: Any, n_options: int,
        *, allow_int: bool = False, label_name: str = "answer") -> MCExample:
    if not isinstance(question, str):
        raise _Bad(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise _Bad("empty question" if question == "" else "empty question (whitespace only)")
    opts = _options(options, n_options)
    label = _label(answer, n_options, allow_int=allow_int, name=label_name)
    return MCExample(id=ex_id, passage=passage, question=question, options=opts, label=label,
                     source_id=ex_id)


def _need_obj(obj: Any, what: str) -> dict:
    if not isinstance(obj, dict):
        raise _Bad(f"expected a JSON object for {what}, got {type(obj).__name__}")
    return obj


# ---------------------------------------------------------------- RACE passages


def _race_passage(obj: Any, fallback_id: str) -> tuple[str, str, list, list, list]:
    """Check a RACE passage object's shape; returns (passage_id, article, qs, opts, answers)."""
    obj = _need_obj(obj, "a RACE passage")
    passage_id = fallback_id
    if "id" in obj:
        passage_id = _field(obj, "id", str)
        if not passage_id.strip():
            raise _Bad("empty id")
    for name in _RACE_FIELDS:
        if name not in obj:
            raise _Bad(f"missing field {name!r}")
    article = _text(obj, "article")
    questions = _field(obj, "questions", list)
    options = _field(obj, "options", list)
    answers = _field(obj, "answers", list)
    if not len(questions) == len(options) == len(answers):
        raise _Bad(f"lengths disagree: {len(questions)} questions, {len(options)} option lists, "
                   f"{len(answers)} answers")
    return passage_id, article, questions, options, answers


def _add_passage(out: _Collector, file: str, record: str | None, qname: Callable[[str, int], str],
                 obj: Any, fallback_id: str, n_options: int) -> None:
    try:
        pid, article, questions, options, answers = _race_passage(obj, fallback_id)
    except _Bad as e:
        out.bad(file, record, e.problem)
        return
    for k, (q, opts, ans) in enumerate(zip(questions, options, answers)):
        if out.full:
            return
        ex_id = f"{pid}-{k}"
        out.add(file, qname(pid, k),
                lambda q=q, opts=opts, ans=ans, ex_id=ex_id: _mc(ex_id, article, q, opts, ans, n_options))


def _natural_key(rel: str) -> tuple:
    parts = [tuple(int(p) if i % 2 else p for i, p in enumerate(re.split(r"(\d+)", c)))
             for c in rel.split("/")]
    return (parts, rel)


def _race_files(path: str) -> list[str]:
    found = []
    for root, dirs, names in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for name in names:
            if name.endswith(".txt") and not name.startswith("."):
                rel = os.path.relpath(os.path.join(root, name), path)
                found.append(rel.replace(os.sep, "/"))
    return sorted(found, key=_natural_key)


def load_race_dir(path, *, lenient: bool = False, limit: int | None = None,
                  n_options: int = 4) -> LoadResult:
    """Every `*.txt` RACE passage below `path`, in natural order of relative path."""
    _check_args(limit, n_options)
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DataError(path, None, "no such folder")
    if not os.path.isdir(path):
        raise DataError(path, None, "is not a folder; race-dir reads every *.txt passage below a "
                                    "folder such as RACE/test")
    rels = _race_files(path)
    if not rels:
        raise DataError(path, None, "no *.txt files below this folder (RACE passages look like "
                                    "RACE/test/high/1.txt)")
    out, hasher, files = _Collector(lenient, limit), _Hasher(), []
    for rel in rels:
        if out.full:
            break
        file = os.path.join(path, rel)
        try:
            raw = _read_bytes(file)
        except DataError as e:
            out.bad(file, None, e.problem)
            continue
        files.append(rel)
        hasher.add(rel, raw)
        try:
            obj = _parse_json(_decode(raw))
        except _Bad as e:
            out.bad(file, None, e.problem)
            continue
        _add_passage(out, file, None, lambda pid, k: f"{pid} question {k}", obj, rel, n_options)
    return out.result(path, "race-dir", files, hasher.hexdigest())


# ---------------------------------------------------------------- RACE jsonl


def _lines(raw: bytes) -> Iterator[tuple[int, bytes]]:
    for n, line in enumerate(raw.split(b"\n"), start=1):
        if line.strip():
            yield n, line


def load_race_jsonl(path, *, lenient: bool = False, limit: int | None = None,
                    n_options: int = 4) -> LoadResult:
    """One RACE question (hub shape) or one RACE passage per line; gzip is detected by content."""
    _check_args(limit, n_options)
    path = os.fspath(path)
    _need_file(path)
    raw = _read_bytes(path)
    text = _gunzip(path, raw)
    out = _Collector(lenient, limit)
    seen: dict[str, int] = {}
    for n, line in _lines(text):
        if out.full:
            break
        record = f"line {n}"
        try:
            row = _need_obj(_parse_json(_decode(line, n), in_line=True), "a row")
        except _Bad as e:
            out.bad(path, record, e.problem)
            continue
        if "questions" in row:
            if isinstance(row.get("id"), str):
                record = f"line {n} (id={row['id']})"
            _add_passage(out, path, record, lambda pid, k, r=record: f"{r} question {k}",
                         row, f"line{n}", n_options)
        elif "question" in row:
            eid = row.get("example_id")
            k = None
            if isinstance(eid, str):
                record = f"line {n} (example_id={eid})"
                k = seen.get(eid, 0)
                seen[eid] = k + 1
            out.add(path, record, lambda row=row, k=k: _hub_mc(row, k, n_options))
        else:
            out.bad(path, record, "row has neither 'question' (one question per line, as on the "
                                  "hub) nor 'questions' (one passage per line, as in RACE files)")
    hasher = _Hasher()
    hasher.add(os.path.basename(path), raw)
    return out.result(path, "race-jsonl", [os.path.basename(path)], hasher.hexdigest())


def _hub_mc(row: dict, k: int | None, n_options: int) -> MCExample:
    """A hub-shaped RACE row; `k` is its position among rows of the same passage."""
    for name in _HUB_ROW_FIELDS:
        if name not in row:
            raise _Bad(f"missing field {name!r}")
    eid = _field(row, "example_id", str)
    if not eid.strip():
        raise _Bad("empty example_id")
    article = _text(row, "article")
    return _mc(f"{eid}-{k}", article, row["question"], row["options"], row["answer"], n_options)


# ---------------------------------------------------------------- AdvRACE release json


class _Pairs(dict):
    """A JSON object that remembers its keys in order, duplicates included."""

    pairs: list


def _pairs_hook(pairs: list) -> _Pairs:
    obj = _Pairs(pairs)
    obj.pairs = pairs
    return obj


def load_advrace_json(path, *, lenient: bool = False, limit: int | None = None,
                      n_options: int = 4) -> LoadResult:
    """The AdvRACE release dict `race_id -> {context, question, options, label}`, in key order."""
    _check_args(limit, n_options)
    path = os.fspath(path)
    _need_file(path)
    raw, data = _read_json_file(path, object_pairs_hook=_pairs_hook)
    if not isinstance(data, dict):
        raise DataError(path, None, "expected a JSON object mapping race_id to "
                                    f"{{context, question, options, label}}, got {type(data).__name__}")
    out = _Collector(lenient, limit)
    for race_id, rec in data.pairs:
        if out.full:
            break
        out.add(path, f"race_id {race_id}", lambda rid=race_id, rec=rec: _advrace_mc(rid, rec, n_options))
    hasher = _Hasher()
    hasher.add(os.path.basename(path), raw)
    return out.result(path, "advrace-json", [os.path.basename(path)], hasher.hexdigest())


def _advrace_mc(race_id: str, rec: Any, n_options: int) -> MCExample:
    rec = _need_obj(rec, "a record")
    for name in ("context", "question", "options", "label"):
        if name not in rec:
            raise _Bad(f"missing field {name!r}")
    if not race_id.strip():
        raise _Bad("empty race_id")
    context = _text(rec, "context")
    return _mc(race_id, context, rec["question"], rec["options"], rec["label"], n_options,
               allow_int=True, label_name="label")


# ---------------------------------------------------------------- SQuAD


def _answers(pairs: Iterable[tuple[Any, Any]]) -> tuple[Answer, ...]:
    seen, kept = set(), []
    for i, (text, start) in enumerate(pairs):
        if not isinstance(text, str):
            raise _Bad(f"answer {i} text must be a string, got {type(text).__name__}")
        if isinstance(start, bool) or not isinstance(start, int):
            raise _Bad(f"answer {i} answer_start must be an integer, got {type(start).__name__}")
        if (text, start) not in seen:
            seen.add((text, start))
            kept.append(Answer(text, start))
    if not kept:
        raise _Bad("no answers (unanswerable questions, as in SQuAD v2, are not supported)")
    return tuple(kept)


def _span(qid: str, title: str, context: str, question: Any, answers: tuple[Answer, ...]) -> SpanExample:
    if not isinstance(question, str):
        raise _Bad(f"question must be a string, got {type(question).__name__}")
    if not question.strip():
        raise _Bad("empty question" if question == "" else "empty question (whitespace only)")
    for a in answers:
        if not 0 <= a.start <= len(context) or context[a.start:a.end] != a.text:
            found = context[a.start:a.end] if 0 <= a.start <= len(context) else ""
            raise _Bad(f"answer {a.text!r} is not found in the context at answer_start {a.start} "
                       f"(the context has {found!r} there)")
    return SpanExample(id=qid, title=title, context=context, question=question, answers=answers,
                       source_id=qid)


def _squad_qa(qa: dict, title: str, context: str) -> SpanExample:
    qid = _field(qa, "id", str)
    if "question" not in qa:
        raise _Bad("missing field 'question'")
    ans = _field(qa, "answers", list)
    pairs = []
    for i, a in enumerate(ans):
        if not isinstance(a, dict):
            raise _Bad(f"answer {i} must be an object with text and answer_start")
        for name in ("text", "answer_start"):
            if name not in a:
                raise _Bad(f"answer {i} is missing field {name!r}")
        pairs.append((a["text"], a["answer_start"]))
    return _span(qid, title, context, qa["question"], _answers(pairs))


def load_squad(path, *, lenient: bool = False, limit: int | None = None) -> LoadResult:
    """SQuAD v1.1 JSON: one SpanExample per qa, answers deduplicated by (text, start)."""
    _check_args(limit, None)
    path = os.fspath(path)
    _need_file(path)
    raw, data = _read_json_file(path)
    if not isinstance(data, dict) or not isinstance(data.get("data"), list):
        raise DataError(path, None, "expected a SQuAD v1.1 object with a 'data' list of articles")
    out = _Collector(lenient, limit)
    for i, article in enumerate(data["data"]):
        if out.full:
            break
        try:
            article = _need_obj(article, "an article")
            title = article.get("title", "")
            if not isinstance(title, str):
                raise _Bad(f"field 'title' must be a str, got {type(title).__name__}")
            paragraphs = _field(article, "paragraphs", list)
        except _Bad as e:
            out.bad(path, f"article {i}", e.problem)
            continue
        for j, par in enumerate(paragraphs):
            if out.full:
                break
            where = f"article {i} ({title}) paragraph {j}"
            try:
                par = _need_obj(par, "a paragraph")
                if "context" not in par:
                    raise _Bad("missing field 'context'")
                context = _text(par, "context")
                qas = _field(par, "qas", list)
            except _Bad as e:
                out.bad(path, where, e.problem)
                continue
            for k, qa in enumerate(qas):
                if out.full:
                    break
                record = f"{where} qa {k}"
                if isinstance(qa, dict) and isinstance(qa.get("id"), str):
                    record = f"qa {qa['id']}"
                out.add(path, record, lambda qa=qa, title=title, context=context:
                        _squad_qa(_need_obj(qa, "a qa"), title, context))
    hasher = _Hasher()
    hasher.add(os.path.basename(path), raw)
    return out.result(path, "squad", [os.path.basename(path)], hasher.hexdigest())


# ---------------------------------------------------------------- Hugging Face hub


def _hub_name(name: str) -> tuple[str, str | None]:
    repo, _, config = name.partition(":")
    return repo, (config or _HUB_DEFAULT_CONFIGS.get(repo))


def _hub_span(row: dict) -> SpanExample:
    for name in ("id", "context", "question", "answers"):
        if name not in row:
            raise _Bad(f"missing field {name!r}")
    qid = _field(row, "id", str)
    context = _text(row, "context")
    ans = row["answers"]
    if isinstance(ans, dict):
        texts, starts = ans.get("text"), ans.get("answer_start")
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise _Bad("field 'answers' must hold equally long 'text' and 'answer_start' lists")
        pairs = list(zip(texts, starts))
    elif isinstance(ans, list) and all(isinstance(a, dict) for a in ans):
        pairs = [(a.get("text"), a.get("answer_start")) for a in ans]
    else:
        raise _Bad(f"field 'answers' must be a dict of lists, got {type(ans).__name__}")
    title = row.get("title") or ""
    return _span(qid, title if isinstance(title, str) else str(title), context, row["question"],
                 _answers(pairs))


def _hub_load(repo: str, config: str | None, split: str):
    try:
        import datasets
    except ImportError:
        raise ConfigError("loading from the hub needs the 'datasets' package (pip install datasets); "
                          "or pass a local path instead") from None
    label = f"{repo}" + (f":{config}" if config else "")
    try:
        return datasets.load_dataset(repo, config, split=split)
    except Exception as e:  # any hub failure leaves the user with the same fix: a local copy
        kind = type(e).__name__
        offline = isinstance(e, (ConnectionError, TimeoutError)) or any(
            w in kind for w in ("Connection", "Offline", "Timeout", "HTTP", "LocalEntryNotFound"))
        why = ("the Hugging Face hub is unreachable" if offline
               else "the Hugging Face hub could not provide it")
        local = "" if os.path.exists(repo) else f" (there is no local file or folder {repo!r} either)"
        raise ConfigError(f"cannot load {label!r} split {split!r}: {why} ({kind}: {e}); "
                          f"download the data and pass a local path instead "
                          f"(a RACE folder, a .jsonl file or a SQuAD .json){local}") from None


def load_hub(name, split: str = "test", *, lenient: bool = False, limit: int | None = None,
             n_options: int = 4) -> LoadResult:
    """A hub dataset (`owner/name[:config]`); RACE rows become MCExamples, SQuAD rows SpanExamples."""
    _check_args(limit, n_options)
    repo, config = _hub_name(str(name))
    canonical = repo + (f":{config}" if config else "")
    ds = _hub_load(repo, config, split)
    columns = set(getattr(ds, "column_names", None) or [])
    span = {"context", "answers"} <= columns
    if not span and not set(_HUB_ROW_FIELDS) <= columns:
        raise ConfigError(f"{canonical!r} split {split!r} has columns {sorted(columns)}; expected "
                          f"RACE columns {list(_HUB_ROW_FIELDS)} or SQuAD columns "
                          "['id', 'title', 'context', 'question', 'answers']")
    file = f"{canonical} ({split} split)"
    out = _Collector(lenient, limit)
    seen: dict[str, int] = {}
    for i, row in enumerate(ds):
        if out.full:
            break
        if span:
            qid = row.get("id")
            record = f"row {i} (id={qid})" if isinstance(qid, str) else f"row {i}"
            out.add(file, record, lambda row=row: _hub_span(row))
            continue
        eid = row.get("example_id")
        k, record = None, f"row {i}"
        if isinstance(eid, str):
            record = f"row {i} (example_id={eid})"
            k = seen.get(eid, 0)
            seen[eid] = k + 1
        out.add(file, record, lambda row=row, k=k: _hub_mc(row, k, n_options))
    digest = hashlib.sha256(f"hub\0{canonical}\0{split}".encode("utf-8")).hexdigest()
    return out.result(canonical, "hub", [], digest)


# ---------------------------------------------------------------- dispatch


def detect_format(path: str) -> str:
    """Guess the format from the path (and, for .json, the top-level shape)."""
    path = os.fspath(path)
    if os.path.isdir(path):
        return "race-dir"
    lower = path.lower()
    if not os.path.exists(path):
        if _looks_like_hub_name(path):
            return "hub"
        raise DataError(path, None, "no such file or folder (a hub dataset is named like "
                                    "'ehovy/race')")
    if lower.endswith((".jsonl", ".jsonl.gz")):
        return "race-jsonl"
    if lower.endswith(".json"):
        _, data = _read_json_file(path)
        if isinstance(data, dict) and "data" in data and "version" in data:
            return "squad"
        if isinstance(data, dict) and data:
            first = next(iter(data.values()))
            if isinstance(first, dict) and ("context" in first or "options" in first):
                return "advrace-json"
    raise ConfigError(f"cannot tell the format of {path!r}; pass --format "
                      f"(one of {', '.join(FORMATS)})")


_FORMAT_NAMES = {"race-dir": "a RACE folder", "race-jsonl": "RACE JSON lines",
                 "advrace-json": "an AdvRACE release file", "squad": "SQuAD v1.1 JSON"}


def sniff_format(path: str) -> str | None:
    """The format a file's contents look like (None when they fit none), to explain a mismatch."""
    if os.path.isdir(path):
        return "race-dir"
    if not os.path.isfile(path):
        return None
    try:
        text = _gunzip(path, _read_bytes(path)).decode("utf-8")
    except (DataError, UnicodeDecodeError):
        return None
    try:
        data = json.loads(text)
    except ValueError:
        first = next((line for line in text.splitlines() if line.strip()), "")
        try:
            data = json.loads(first)
        except ValueError:
            return None
        return "race-jsonl" if isinstance(data, dict) and ("question" in data or "questions" in data) else None
    if isinstance(data, dict) and isinstance(data.get("data"), list):
        return "squad"
    if isinstance(data, dict) and ("question" in data or "questions" in data):
        return "race-jsonl"
    if isinstance(data, dict) and data and isinstance(first := next(iter(data.values())), dict) \
            and "context" in first and "options" in first:
        return "advrace-json"
    return None


def _mismatch(path: str, fmt: str, exc: Exception | None) -> DataError | None:
    """A clearer error when the data is fine but in another format than the one asked for."""
    found = sniff_format(path)
    if found is None or found == fmt:
        return None
    return DataError(path, None, f"looks like {_FORMAT_NAMES[found]}, not {fmt}"
                                 f"{f' ({exc})' if exc else ''}; pass --format {found}, or set "
                                 f"format: {found} in the config")


def load(path: str, format: str | None = None, *, lenient: bool = False, limit: int | None = None,
         n_options: int = 4, split: str = "test") -> LoadResult:
    """Load `path` in `format` (detected when None); `split` applies to the hub only.

    When the data does not read as the format asked for but looks like another one, the error
    names that one, so a config's format left over from other data is easy to fix.
    """
    path = os.fspath(path)
    if format is None:
        return _load(path, detect_format(path), lenient, limit, n_options, split)
    if format not in FORMATS:
        raise ConfigError(f"unknown format {format!r}; choose one of {', '.join(FORMATS)}")
    try:
        result = _load(path, format, lenient, limit, n_options, split)
    except DataError as exc:
        if format != "hub":
            better = _mismatch(path, format, exc.problem if exc.record is None else None)
            if better is not None:
                raise better from None
        raise
    if format != "hub" and not result.examples and result.skipped:
        better = _mismatch(path, format, None)
        if better is not None:
            raise better
    return result


def _load(path: str, fmt: str, lenient: bool, limit: int | None, n_options: int, split: str) -> LoadResult:
    if fmt not in FORMATS:
        raise ConfigError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
    if fmt == "race-dir":
        return load_race_dir(path, lenient=lenient, limit=limit, n_options=n_options)
    if fmt == "race-jsonl":
        return load_race_jsonl(path, lenient=lenient, limit=limit, n_options=n_options)
    if fmt == "advrace-json":
        return load_advrace_json(path, lenient=lenient, limit=limit, n_options=n_options)
    if fmt == "squad":
        _check_args(limit, n_options)
        return load_squad(path, lenient=lenient, limit=limit)
    return load_hub(path, split, lenient=lenient, limit=limit, n_options=n_options)
