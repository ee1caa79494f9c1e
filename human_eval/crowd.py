"""A study run on a crowd platform (Prolific, Mechanical Turk) instead of the app: its queues
written out as a CSV of tasks (`export_tasks`), and the platform's results file read back
(`import_answers`) through the app's own answer checks (`answers.save_form`), so that the
database is the one the app would have written and `validate` cannot tell the two apart.

One queue (an annotator account) is one worker: `assignment` gives every item K *different*
annotators and keeps versions of one question apart, which holds only if a queue is never shared
by two workers and no worker takes two queues; the import refuses both. Every row carries the
study's id and an HMAC of (study, queue, position, item, the item's payload) under a key kept in
the database, so a row that was edited, moved to another queue, or belongs to another study is
refused; a keyless hash would let a worker try the four labels against it and find the gold.
"""

from __future__ import annotations

import csv
import hashlib
import hmac
import json
import os
import secrets
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import LETTERS, plural

from . import store
from .answers import page_of, save_form

CROWD_KEY = "crowd"  # meta: {"study_id": ..., "key": ...}, made by the first export
WORKER_KEY = "crowd_worker:"  # meta, + an annotator's name: the platform's id of the worker who answered that queue
ID_COLUMNS = ("study_id", "annotator", "position", "item_id", "row_hash")
# What the page shows, as in the app (`page`: which of its forms, `answers.page_of`), never the gold. `kind` is not
# shown: a control item must look like the items around it.
SHOWN_COLUMNS = ("page", "task", "title", "passage", "context", "question")
SPAN_COLUMNS = ("sentence", "sentence_start", "sentence_end", "fake", "asked", "mend")
# The answer form's field names (answers.save_form), one column each, left empty for the worker.
ANSWER_COLUMNS = ("choice", "answer_text", "answer_start", "reason", "comment", "grammatical",
                  "edit_text", "beyond_repair", "mend_option", "mend_text")
WORKER_COLUMN = "worker_id"
# Where platforms put the worker's id: ours, Mechanical Turk's results file, Prolific's id (as a
# survey tool records it from Prolific's URL parameter).
WORKER_ALIASES = (WORKER_COLUMN, "Answer." + WORKER_COLUMN, "Input." + WORKER_COLUMN, "WorkerId", "participant_id",
                  "PROLIFIC_PID")
PLATFORM_WORKER_COLUMNS = ("WorkerId", "PROLIFIC_PID")  # filled by the platform, not by the worker's form
REJECTED = ("Rejected",)  # Mechanical Turk's AssignmentStatus of work the researcher refused: not imported
MAX_PROBLEMS = 20


def option_count(items: list[dict]) -> int:
    return max([4] + [len(i["payload"]["options"]) for i in items if i["task"] == MULTIPLE_CHOICE])


def columns(n_options: int) -> list[str]:
    options = [f"option_{LETTERS[k]}" for k in range(n_options)]
    return [*ID_COLUMNS, *SHOWN_COLUMNS, *options, *SPAN_COLUMNS, *ANSWER_COLUMNS, WORKER_COLUMN]


def shown(item: dict, n_options: int) -> dict[str, str]:
    """The item as a worker sees it: the passage (or paragraph), question and options, and for a
    SQuAD sentence to edit or verify, its text and where it stands; never a label or answers."""
    p = item["payload"]
    out = {"page": page_of(item), "task": item["task"], "title": p.get("title", ""),
           "passage": p.get("passage", ""), "context": p.get("context", ""), "question": p["question"]}
    options = p.get("options", [])
    out.update({f"option_{LETTERS[k]}": options[k] if k < len(options) else "" for k in range(n_options)})
    span = p.get("highlight") or p.get("sentence")
    fake = p.get("fake")
    out.update(sentence=p["context"][span[0]:span[1]] if span else "",
               sentence_start=str(span[0]) if span else "", sentence_end=str(span[1]) if span else "",
               fake=p["context"][fake[0]:fake[1]] if fake else "", asked=p.get("asked") or "", mend=p.get("mend") or "")
    return out


def row_hash(key: str, study_id: str, annotator: str, position: int, item: dict) -> str:
    """What binds a row to its study, queue, position and item as stored: keyed, so that nobody
    without the database can make one, nor test a guessed label against it."""
    payload = json.dumps(item["payload"], ensure_ascii=False, sort_keys=True)
    message = json.dumps([study_id, annotator, position, item["id"], hashlib.sha256(payload.encode()).hexdigest()])
    return hmac.new(key.encode(), message.encode(), hashlib.sha256).hexdigest()[:32]


def crowd_id(conn, create: bool = False) -> dict | None:
    """The study's id and row-hash key (made once, by the first export)."""
    found = store.meta(conn).get(CROWD_KEY)
    if found is None and create:
        found = {"study_id": uuid.uuid4().hex, "key": secrets.token_hex(32)}
        with store.transaction(conn, immediate=True):
            store.set_meta(conn, **{CROWD_KEY: found})
    return found


def export_tasks(db_path, out_file, annotators: list[str] | None = None) -> dict:
    """Write one CSV row per queued task (every annotator's queue, or those named, in order; a
    batch per queue lets a platform give each queue to one worker). Returns {"rows", "queues",
    "study_id"}."""
    conn = store.connect(db_path)
    try:
        people = store.annotators(conn)
        unknown = sorted(set(annotators or ()) - {p["name"] for p in people})
        if unknown:
            raise ConfigError(f"{db_path}: no annotator (queue) named {', '.join(unknown)}; the study's are "
                              f"{', '.join(p['name'] for p in people)}")
        ids = crowd_id(conn, create=True)
        items = {i["id"]: i for i in store.all_items(conn)}
        n_options = option_count(list(items.values()))
        rows = []
        for person in (p for p in people if not annotators or p["name"] in annotators):
            for r in store.queue(conn, person["id"]):
                item = items[r["item_id"]]
                rows.append({"study_id": ids["study_id"], "annotator": person["name"], "position": str(r["position"]),
                             "item_id": str(item["id"]),
                             "row_hash": row_hash(ids["key"], ids["study_id"], person["name"], r["position"], item),
                             **shown(item, n_options)})
        queues = len({r["annotator"] for r in rows})
    finally:
        conn.close()
    out = Path(out_file)
    out.parent.mkdir(parents=True, exist_ok=True)
    with out.open("w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns(n_options), restval="", lineterminator="\r\n")
        writer.writeheader()
        writer.writerows(rows)
    return {"rows": len(rows), "queues": queues, "study_id": ids["study_id"]}


def read_rows(path: Path) -> tuple[list[str], list[tuple[int, dict]]]:
    """The file's header and its rows, each with the line it starts on."""
    if not path.is_file():
        raise ConfigError(f"{path}: no such results file; give the CSV the platform wrote")
    limit = csv.field_size_limit(1 << 26)  # a passage can be longer than csv's default 128 KiB field
    try:
        with path.open(encoding="utf-8-sig", newline="") as f:
            reader = csv.DictReader(f)
            header, rows, line = list(reader.fieldnames or []), [], 2
            for row in reader:
                rows.append((line, row))
                line = reader.line_num + 1
    except (UnicodeDecodeError, csv.Error) as exc:
        raise ConfigError(f"{path}: not a UTF-8 CSV file ({exc}); save the platform's results as CSV (UTF-8)") from None
    finally:
        csv.field_size_limit(limit)
    return header, rows


def value(row: dict, names) -> str:
    """The first non-empty of the columns `names` (a column under its plain or platform name)."""
    for name in names:
        if row.get(name):
            return row[name]
    return ""


def as_input(column: str) -> tuple[str, str]:
    return column, "Input." + column  # Mechanical Turk names the columns it was given Input.<col>


def as_answer(column: str) -> tuple[str, str]:
    return "Answer." + column, column  # ... and the form's fields Answer.<field>


def edited_column(row: dict, expected: dict[str, str]) -> str | None:
    """How a shown column the file holds differs from what the study shows, if it does."""
    for column, want in expected.items():
        text = value(row, as_input(column))
        if any(c in row for c in as_input(column)) and text != want:
            k = len(os.path.commonprefix([text, want]))
            return (f"column {column} is not what the study shows (from character {k}: {text[k:k + 30]!r} "
                    f"instead of {want[k:k + 30]!r})")
    return None


def snapshot(conn, person_id: int, item_id: int) -> tuple:
    """What the person's answer to the item stored (not when, or how often)."""
    def fields(row):
        return None if row is None else {k: row[k] for k in row.keys()
                                         if k not in ("id", "created", "updated", "revisions")}
    return fields(store.annotation(conn, person_id, item_id)), fields(store.candidate(conn, person_id, item_id))


class _Undone(Exception):
    """Rolls back one row's savepoint: an answer that changes nothing, or that is refused."""


def import_answers(db_path, results_file, *, finish: bool = False) -> dict:
    """Store every answer of a platform's results file as the app would, or nothing: the file is
    refused as a whole (a ConfigError naming each bad row's line) when any row is for another
    study, an unknown queue, position or item, edited (its row hash), a second answer to one
    task, from a second worker on a queue (or a worker on a second queue), or refused by
    `save_form`. An answer already stored unchanged (a results file downloaded again with more
    rows) is left as it is. A queue whose every task is answered (or, with `finish`, every queue
    in the file) is marked finished, as the app's Finish does. Returns counts."""
    path = Path(results_file)
    header, rows = read_rows(path)
    missing = [c for c in ID_COLUMNS if not set(as_input(c)) & set(header)]
    if missing:
        raise ConfigError(f"{path}: no column {', '.join(missing)} (found: {', '.join(header[:12])}); give the "
                          "results file of the tasks `advrace human-eval export-tasks` wrote, with its columns kept")
    conn = store.connect(db_path)
    try:
        return _import(conn, db_path, path, rows, finish)
    finally:
        conn.close()


class _Task(NamedTuple):
    """The task a row answers: the annotator's queue, the position in it, the item id as the row
    writes it, and the item."""

    annotator: str
    position: int
    item_id: str
    item: dict


@dataclass
class _Tasks:
    """What a results file's rows are checked against: the study's id and row-hash key, its items,
    each annotator's queue, and which worker answered which queue (as stored, and as the file
    goes on to say)."""

    conn: object
    ids: dict
    items: dict[int, dict]
    n_options: int
    people: dict[str, dict]
    queues: dict[str, dict[int, int]]
    worker_of: dict[str, str]
    queue_of: dict[str, str]
    seen: dict[tuple, int] = field(default_factory=dict)  # (annotator, item id) -> the line that answered it

    @classmethod
    def read(cls, conn, db_path, path: Path) -> _Tasks:
        ids = crowd_id(conn)
        if ids is None:
            raise ConfigError(f"{db_path}: this study database was never exported (`advrace human-eval export-tasks`), "
                              f"so {path} is not a results file of its tasks; give the database you exported")
        meta, items = store.meta(conn), {i["id"]: i for i in store.all_items(conn)}
        people = {a["name"]: store.annotator_by_name(conn, a["name"]) for a in store.annotators(conn)}
        queues = {name: {r["position"]: r["item_id"] for r in store.queue(conn, p["id"])} for name, p in people.items()}
        worker_of = workers(meta)
        return cls(conn, ids, items, option_count(list(items.values())), people, queues, worker_of,
                   {w: name for name, w in worker_of.items()})

    def rejected_problem(self, row: dict) -> str | None:
        """A row the platform rejected is not imported; it is a problem only when an earlier import
        stored its answer, which is still counted."""
        name, position = value(row, as_input("annotator")), value(row, as_input("position"))
        stored = name in self.queues and position.isdecimal() and int(position) in self.queues[name] and any(
            snapshot(self.conn, self.people[name]["id"], self.queues[name][int(position)]))
        if stored:
            return (f"{name}'s task {position} was rejected on the platform after its answer was imported: "
                    "the answer is still in the study; create the study again from the release and import "
                    "the accepted rows only")
        return None

    def task(self, row: dict) -> tuple[_Task | None, str | None]:
        """The task a row answers, or why the row names no task of this study as export-tasks wrote it."""
        study, name, position, item_id, given = (value(row, as_input(c)) for c in ID_COLUMNS)
        if study != self.ids["study_id"]:
            return None, (f"study id {study or '(empty)'} is not this study's ({self.ids['study_id']}): a row of "
                          "another study")
        if name not in self.queues:
            return None, f"no annotator (queue) named {name!r} in this study"
        if not position.isdecimal() or int(position) not in self.queues[name]:
            return None, f"{name}'s queue has no position {position!r}"
        if not item_id.isdecimal() or int(item_id) not in self.items:
            return None, f"no item {item_id!r} in this study"
        position, item = int(position), self.items[int(item_id)]
        if self.queues[name][position] != item["id"] or not hmac.compare_digest(
                given, row_hash(self.ids["key"], study, name, position, item)):
            return None, (f"the row hash does not match {name}'s task {position} (item {item_id}): the row was edited, "
                          "or moved from another queue or study; upload the rows export-tasks wrote, unchanged")
        edited = edited_column(row, shown(item, self.n_options))
        if edited:
            return None, (f"{edited} for item {item_id}; the worker saw an edited task: upload the rows export-tasks "
                          "wrote, unchanged")
        return _Task(name, position, item_id, item), None

    def answerer_problem(self, line: int, row: dict, task: _Task) -> str | None:
        """Why this answer cannot count: a second answer to the task, or not exactly one worker, or
        a worker on two queues or two workers on one (which would count one person twice on an
        item). Records the answer's line and its worker when it can."""
        name, position, item_id, item = task
        if (name, item["id"]) in self.seen:
            return (f"a second answer to {name}'s task {position} (item {item_id}); the first is on line "
                    f"{self.seen[name, item['id']]}")
        self.seen[name, item["id"]] = line
        # The platform's own column wins over one a worker's form could fill (`Answer.worker_id`).
        platform = [c for c in PLATFORM_WORKER_COLUMNS if row.get(c)]
        ids_given = {row[c] for c in (platform or WORKER_ALIASES) if row.get(c)}
        if len(ids_given) != 1:
            return (f"{'no worker id' if not ids_given else 'two worker ids ' + ', '.join(sorted(ids_given))} "
                    f"(columns {', '.join(WORKER_ALIASES)}): each answer names the one worker who gave it")
        worker = ids_given.pop()
        if self.worker_of.setdefault(name, worker) != worker:
            return (f"{name}'s queue answered by worker {worker!r}, but it is worker {self.worker_of[name]!r}'s: "
                    "a queue is one worker's")
        if self.queue_of.setdefault(worker, name) != name:
            return (f"worker {worker!r} answered {name}'s queue and {self.queue_of[worker]}'s: one worker takes one "
                    "queue (two would count one person twice on an item)")
        return None


def answer_form(row: dict) -> dict[str, str]:
    """The answer form's fields the row fills; a field left empty is one the page did not send."""
    form = {c: value(row, as_answer(c)) for c in ANSWER_COLUMNS}
    return {k: v for k, v in form.items() if v}


def _import(conn, db_path, path: Path, rows: list, finish: bool) -> dict:
    tasks = _Tasks.read(conn, db_path, path)
    problems, todo, counts = [], [], {"unanswered": 0, "rejected": 0}
    for line, row in rows:
        if row.get("AssignmentStatus") in REJECTED:
            counts["rejected"] += 1
            problem = tasks.rejected_problem(row)
        else:
            task, problem = tasks.task(row)
            form = answer_form(row) if task else None
            if task and not form:
                counts["unanswered"] += 1
                continue
            problem = problem or tasks.answerer_problem(line, row, task)
            if problem is None:
                todo.append((line, tasks.people[task.annotator], task.item, form))
        if problem:
            problems.append((line, problem))
    with store.transaction(conn, immediate=True):  # the answers of good rows are checked even if others are bad
        counts.update(_store(conn, todo, problems))
        if problems:
            raise _refused(path, problems)
        store.set_meta(conn, **{WORKER_KEY + name: w for name, w in tasks.worker_of.items()})
        counts["finished"] = _finish(conn, tasks.people, {p["name"] for _, p, _, _ in todo}, finish)
    return {**counts, "rows": len(rows)}


def _store(conn, todo: list, problems: list[tuple[int, str]]) -> dict:
    counts = {"stored": 0, "unchanged": 0}
    for line, person, item, form in todo:
        before = snapshot(conn, person["id"], item["id"])
        try:
            with store.transaction(conn):
                error = save_form(conn, person, item, form)
                if error:
                    raise _Undone(f"{person['name']}'s answer to item {item['id']} is refused: {error}")
                if snapshot(conn, person["id"], item["id"]) == before:
                    raise _Undone(None)
                if person["finished"]:
                    raise _Undone(f"{person['name']} has finished; their answer to item {item['id']} "
                                  "differs from the one they finished with, and a finished answer cannot change")
        except _Undone as undone:
            if undone.args[0]:
                problems.append((line, undone.args[0]))
            else:
                counts["unchanged"] += 1
            continue
        counts["stored"] += 1
    return counts


def _finish(conn, people: dict, names: set, finish: bool) -> list[str]:
    """Mark finished each queue in the file that is all answered (every one with `finish`)."""
    done = []
    for name in sorted(names):
        person = people[name]
        if not person["finished"] and (finish or all(r["annotation_id"] is not None
                                                     for r in store.queue(conn, person["id"]))):
            store.mark_finished(conn, person["id"])
            done.append(name)
    return done


def _refused(path: Path, problems: list[tuple[int, str]]):
    """Every problem found, by line (the first MAX_PROBLEMS)."""
    more = f"\n  ... and {len(problems) - MAX_PROBLEMS} more" if len(problems) > MAX_PROBLEMS else ""
    return ConfigError(f"{path}: refused, nothing imported ({plural(len(problems), 'problem')}):\n  "
                       + "\n  ".join(f"line {line}: {problem}" for line, problem in sorted(problems)[:MAX_PROBLEMS])
                       + more)


def workers(meta: dict) -> dict[str, str]:
    """Each annotator (queue) answered on a platform, with the worker's id there (from the
    study's `store.meta`), for the report to name."""
    return {k[len(WORKER_KEY):]: v for k, v in meta.items() if k.startswith(WORKER_KEY)}
