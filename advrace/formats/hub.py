"""A Hugging Face hub dataset named `owner/name[:config]`: RACE rows (ehovy/race) become
multiple-choice examples, SQuAD rows (rajpurkar/squad) span examples. Needs the network."""

from __future__ import annotations

import hashlib
import os

from advrace.core.errors import ConfigError
from advrace.core.examples import SpanExample
from advrace.core.paths import looks_like_dataset_name
from advrace.core.tasks import TASKS

from .base import BadRecord, Collector, Format, LoadResult, Probe, check_args
from .records import RACE_ROW_FIELDS, answer_set, field_of, race_row, span_example, text_of
from .registry import register_format

NAME = "hub"

_DEFAULT_CONFIGS = {"ehovy/race": "all"}


def _hub_name(name: str) -> tuple[str, str | None]:
    repo, _, config = name.partition(":")
    return repo, (config or _DEFAULT_CONFIGS.get(repo))


def _hub_span(row: dict) -> SpanExample:
    for name in ("id", "context", "question", "answers"):
        if name not in row:
            raise BadRecord(f"missing field {name!r}")
    qid = field_of(row, "id", str)
    context = text_of(row, "context")
    ans = row["answers"]
    if isinstance(ans, dict):
        texts, starts = ans.get("text"), ans.get("answer_start")
        if not isinstance(texts, list) or not isinstance(starts, list) or len(texts) != len(starts):
            raise BadRecord("field 'answers' must hold equally long 'text' and 'answer_start' lists")
        pairs = list(zip(texts, starts))
    elif isinstance(ans, list) and all(isinstance(a, dict) for a in ans):
        pairs = [(a.get("text"), a.get("answer_start")) for a in ans]
    else:
        raise BadRecord(f"field 'answers' must be a dict of lists, got {type(ans).__name__}")
    title = row.get("title") or ""
    return span_example(qid, title if isinstance(title, str) else str(title), context, row["question"],
                        answer_set(pairs))


def _hub_load(repo: str, config: str | None, part: str):
    try:
        import datasets  # deferred for start-up time: it takes seconds, and only the hub needs it
    except ImportError:
        raise ConfigError("loading from the hub needs the 'datasets' package (pip install datasets); "
                          "or pass a local path instead") from None
    label = f"{repo}" + (f":{config}" if config else "")
    try:
        return datasets.load_dataset(repo, config, split=part)
    except Exception as e:  # any hub failure leaves the user with the same fix: a local copy
        kind = type(e).__name__
        offline = isinstance(e, (ConnectionError, TimeoutError)) or any(
            w in kind for w in ("Connection", "Offline", "Timeout", "HTTP", "LocalEntryNotFound"))
        why = ("the Hugging Face hub is unreachable" if offline
               else "the Hugging Face hub could not provide it")
        local = "" if os.path.exists(repo) else f" (there is no local file or folder {repo!r} either)"
        raise ConfigError(f"cannot load {label!r} split {part!r}: {why} ({kind}: {e}); "
                          f"download the data and pass a local path instead "
                          f"(a RACE folder, a .jsonl file or a SQuAD .json){local}") from None


def load_hub(name, part: str = "test", *, lenient: bool = False, limit: int | None = None,
             n_options: int = 4) -> LoadResult:
    """A hub dataset (`owner/name[:config]`); RACE rows become MCExamples, SQuAD rows SpanExamples."""
    check_args(limit, n_options)
    repo, config = _hub_name(str(name))
    canonical = repo + (f":{config}" if config else "")
    ds = _hub_load(repo, config, part)
    columns = set(getattr(ds, "column_names", None) or [])
    span = {"context", "answers"} <= columns
    if not span and not set(RACE_ROW_FIELDS) <= columns:
        raise ConfigError(f"{canonical!r} split {part!r} has columns {sorted(columns)}; expected "
                          f"RACE columns {list(RACE_ROW_FIELDS)} or SQuAD columns "
                          "['id', 'title', 'context', 'question', 'answers']")
    file = f"{canonical} ({part} split)"
    out = Collector(lenient, limit)
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
        out.add(file, record, lambda row=row, k=k: race_row(row, k, n_options))
    digest = hashlib.sha256(f"hub\0{canonical}\0{part}".encode("utf-8")).hexdigest()
    return out.result(canonical, NAME, [], digest, part=part)


@register_format
class Hub(Format):
    name = NAME
    tasks = TASKS
    description = "a Hugging Face hub dataset"
    local = False

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test") -> LoadResult:
        return load_hub(path, part, lenient=lenient, limit=limit, n_options=n_options)

    def detect(self, probe: Probe) -> bool:
        return not probe.exists and looks_like_dataset_name(probe.path)
