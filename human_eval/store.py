"""The study database: SQLite in WAL mode, the only place annotations live.

Every SQL statement of the human evaluation lives here, each in a function named for what it
does, and every query is parameterised. Each thread opens its own connection (`connect`), so the threaded
server can take many annotators at once; writes are short transactions, and an answer is an
upsert keyed by (annotator, item), so a retried or repeated submission never stores twice.
Access tokens are stored as their sha256 only: the database alone does not let anyone in.
"""

from __future__ import annotations

import hashlib
import json
import secrets
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advrace.core.tasks import EXTRACTIVE_QA

SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS items (
    id INTEGER PRIMARY KEY, split TEXT NOT NULL, record_id TEXT NOT NULL, source_id TEXT NOT NULL,
    task TEXT NOT NULL, payload TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS people (
    id INTEGER PRIMARY KEY, name TEXT NOT NULL UNIQUE, role TEXT NOT NULL,
    token_sha256 TEXT NOT NULL UNIQUE, csrf TEXT NOT NULL, finished INTEGER NOT NULL DEFAULT 0);
CREATE TABLE IF NOT EXISTS queue (
    person_id INTEGER NOT NULL REFERENCES people(id), position INTEGER NOT NULL,
    item_id INTEGER NOT NULL REFERENCES items(id), PRIMARY KEY (person_id, position));
CREATE TABLE IF NOT EXISTS annotations (
    id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id),
    item_id INTEGER NOT NULL REFERENCES items(id), choice INTEGER, answer_text TEXT,
    answer_start INTEGER, unanswerable INTEGER NOT NULL DEFAULT 0, reason TEXT, comment TEXT,
    created REAL NOT NULL, updated REAL NOT NULL, revisions INTEGER NOT NULL DEFAULT 0,
    UNIQUE (person_id, item_id));
CREATE TABLE IF NOT EXISTS edits (
    id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id), draft TEXT NOT NULL,
    output TEXT NOT NULL, created REAL NOT NULL, submission_id INTEGER);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id), example TEXT NOT NULL,
    fooled INTEGER NOT NULL, output TEXT NOT NULL, model TEXT NOT NULL, created REAL NOT NULL);
"""

ANNOTATOR, AUTHOR = "annotator", "author"  # the roles of people
REASONS = ("missing key information", "conflicting information", "uninterpretable content",
           "no correct option", "multiple correct options")


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


def connect(path: str | Path) -> sqlite3.Connection:
    conn = sqlite3.connect(str(path), timeout=30, isolation_level=None, check_same_thread=False)
    conn.row_factory = sqlite3.Row
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA busy_timeout=30000")
    conn.execute("PRAGMA foreign_keys=ON")
    return conn


def init(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


@contextmanager
def transaction(conn, immediate: bool = False) -> Iterator[sqlite3.Connection]:
    """One transaction: committed when the block ends, rolled back if it raises. `immediate`
    takes the write lock at once (for a read followed by writes)."""
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def set_meta(conn, **values) -> None:
    for key, value in values.items():
        conn.execute("INSERT INTO meta(key, value) VALUES (?, ?) ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                     (key, json.dumps(value)))


def meta(conn) -> dict:
    return {r["key"]: json.loads(r["value"]) for r in conn.execute("SELECT key, value FROM meta")}


# --------------------------------------------------------------------------- people


def add_person(conn, name: str, role: str) -> tuple[int, str]:
    """Create an annotator or author; returns their id and their secret token (shown once,
    stored hashed)."""
    token = secrets.token_urlsafe(24)
    cur = conn.execute("INSERT INTO people(name, role, token_sha256, csrf) VALUES (?, ?, ?, ?)",
                       (name, role, token_hash(token), secrets.token_urlsafe(24)))
    return cur.lastrowid, token


def person_by_token(conn, token: str | None, role: str | None = None):
    if not token or len(token) > 200:
        return None
    row = conn.execute("SELECT * FROM people WHERE token_sha256 = ?", (token_hash(token),)).fetchone()
    if row is None or (role is not None and row["role"] != role):
        return None
    return row


def mark_finished(conn, person_id: int) -> None:
    """The annotator pressed Finish: their answers can no longer change. The sha256 of their
    answers is kept in meta (`finished_sha256:<name>`), so that `human-eval validate` can tell an
    answer changed in the database afterwards from one given in the app."""
    with transaction(conn, immediate=True):
        conn.execute("UPDATE people SET finished = 1 WHERE id = ?", (person_id,))
        name = conn.execute("SELECT name FROM people WHERE id = ?", (person_id,)).fetchone()["name"]
        set_meta(conn, **{FINISHED_KEY + name: annotations_sha256(conn, person_id)})


FINISHED_KEY = "finished_sha256:"  # + an annotator's name: the sha256 of their answers when they finished


def annotators(conn) -> list[sqlite3.Row]:
    """The annotators (id, name, finished) in the order they were created."""
    return conn.execute("SELECT id, name, finished FROM people WHERE role = ? ORDER BY id", (ANNOTATOR,)).fetchall()


def annotator_names(conn) -> list[str]:
    return [r["name"] for r in conn.execute("SELECT name FROM people WHERE role = ? ORDER BY name", (ANNOTATOR,))]


# --------------------------------------------------------------------------- items and queues


def add_item(conn, split: str, record_id: str, source_id: str, task: str, payload: dict) -> int:
    """Store a sampled item (what an annotator is shown); returns its id."""
    cur = conn.execute("INSERT INTO items(split, record_id, source_id, task, payload) VALUES (?, ?, ?, ?, ?)",
                       (split, record_id, source_id, task, json.dumps(payload, ensure_ascii=False)))
    return cur.lastrowid


def item(conn, item_id: int) -> dict:
    row = conn.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
    return {**dict(row), "payload": json.loads(row["payload"])}


def item_by_record_id(conn, record_id: str) -> dict | None:
    """An item by its release record id (`<split>/<source_id>`), or None."""
    row = conn.execute("SELECT * FROM items WHERE record_id = ?", (record_id,)).fetchone()
    return None if row is None else {**dict(row), "payload": json.loads(row["payload"])}


def paragraphs(conn, limit: int = 500) -> list[dict]:
    """The study's SQuAD paragraphs, each once, in item order, for authors to pick from:
    {"record_id", "split", "title", "context"} of the first item with that paragraph (a split's
    attack may have changed it, so the split is shown with it)."""
    seen, out = set(), []
    for r in conn.execute("SELECT record_id, split, payload FROM items WHERE task = ? ORDER BY id", (EXTRACTIVE_QA,)):
        payload = json.loads(r["payload"])
        if payload["context"] in seen:
            continue
        seen.add(payload["context"])
        out.append({"record_id": r["record_id"], "split": r["split"], "title": payload.get("title", ""),
                    "context": payload["context"]})
        if len(out) == limit:
            break
    return out


def all_items(conn) -> list[dict]:
    """Every item in the order it was created, its payload decoded."""
    return [{**dict(r), "payload": json.loads(r["payload"])} for r in conn.execute("SELECT * FROM items ORDER BY id")]


def queues(conn) -> dict[int, list[int]]:
    """Each person's item ids in queue order, by person id."""
    out: dict[int, list[int]] = {}
    for r in conn.execute("SELECT person_id, item_id FROM queue ORDER BY person_id, position"):
        out.setdefault(r["person_id"], []).append(r["item_id"])
    return out


def items_per_split(conn) -> dict[str, int]:
    return dict(conn.execute("SELECT split, COUNT(*) FROM items GROUP BY split").fetchall())


def set_queue(conn, person_id: int, item_ids: list[int]) -> None:
    """The person's items, in this order."""
    conn.executemany("INSERT INTO queue(person_id, position, item_id) VALUES (?, ?, ?)",
                     [(person_id, k, iid) for k, iid in enumerate(item_ids)])


def queue(conn, person_id: int) -> list[sqlite3.Row]:
    """The person's items in order, each with their annotation if any."""
    return conn.execute(
        "SELECT q.position, q.item_id, a.id AS annotation_id, a.choice, a.answer_text, a.unanswerable "
        "FROM queue q LEFT JOIN annotations a ON a.person_id = q.person_id AND a.item_id = q.item_id "
        "WHERE q.person_id = ? ORDER BY q.position", (person_id,)).fetchall()


# --------------------------------------------------------------------------- annotations


def annotation(conn, person_id: int, item_id: int) -> sqlite3.Row | None:
    """The person's answer to the item, if any."""
    return conn.execute("SELECT * FROM annotations WHERE person_id = ? AND item_id = ?",
                        (person_id, item_id)).fetchone()


def save_annotation(conn, person_id: int, item_id: int, *, choice=None, answer_text=None,
                    answer_start=None, unanswerable=False, reason=None, comment=None) -> None:
    now = time.time()
    conn.execute(
        "INSERT INTO annotations(person_id, item_id, choice, answer_text, answer_start, unanswerable, reason, "
        "comment, created, updated) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(person_id, item_id) DO UPDATE SET choice=excluded.choice, answer_text=excluded.answer_text, "
        "answer_start=excluded.answer_start, unanswerable=excluded.unanswerable, reason=excluded.reason, "
        "comment=excluded.comment, updated=excluded.updated, revisions=annotations.revisions + 1",
        (person_id, item_id, choice, answer_text, answer_start, int(bool(unanswerable)), reason, comment, now, now))


def annotations(conn) -> list[dict]:
    rows = conn.execute(
        "SELECT a.*, p.name AS annotator, i.split, i.record_id, i.source_id, i.task, i.payload "
        "FROM annotations a JOIN people p ON p.id = a.person_id JOIN items i ON i.id = a.item_id "
        "ORDER BY i.id, p.name").fetchall()
    return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]


ANSWER_FIELDS = ("choice", "answer_text", "answer_start", "unanswerable", "reason", "comment")


def annotations_sha256(conn, person_id: int | None = None) -> str:
    """The sha256 of what was answered (annotator, item's record id and the answer's fields; not
    when or how often it was saved), of one person or of everyone."""
    return rows_sha256([answer_row(a) for a in annotations(conn) if person_id is None or a["person_id"] == person_id])


def answer_row(annotation: dict) -> dict:
    """What `annotations_sha256` hashes of a row of `annotations`."""
    return {k: annotation[k] for k in ("annotator", "record_id", *ANSWER_FIELDS)}


def rows_sha256(rows: list[dict]) -> str:
    """The sha256 of answer rows (`answer_row`), one JSON line each, by record id and annotator."""
    h = hashlib.sha256()
    for r in sorted(rows, key=lambda r: (r["record_id"], r["annotator"])):
        h.update((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return h.hexdigest()


def items_sha256(items: list[dict]) -> str:
    """The sha256 of a study's items (rows of `all_items`: id, split, record id and what was shown),
    so that a validated release can name the items it rests on."""
    h = hashlib.sha256()
    for item in sorted(items, key=lambda i: i["id"]):
        row = {k: item[k] for k in ("id", "split", "record_id", "source_id", "task", "payload")}
        h.update((json.dumps(row, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return h.hexdigest()


# --------------------------------------------------------------------------- authoring


def add_edit(conn, person_id: int, draft: dict, output: dict) -> None:
    """One model call on an author's draft, kept with its output (the edit history)."""
    conn.execute("INSERT INTO edits(person_id, draft, output, created) VALUES (?, ?, ?, ?)",
                 (person_id, json.dumps(draft, ensure_ascii=False), json.dumps(output), time.time()))


def add_submission(conn, person_id: int, example: dict, fooled: bool, output: dict, model: str,
                   draft: dict) -> int:
    """Store a submission and its final draft as an edit; the author's edits since their last
    submission become its history. Returns the submission's id."""
    with transaction(conn, immediate=True):
        cur = conn.execute("INSERT INTO submissions(person_id, example, fooled, output, model, created) "
                           "VALUES (?, ?, ?, ?, ?, ?)",
                           (person_id, json.dumps(example, ensure_ascii=False), int(fooled), json.dumps(output),
                            model, time.time()))
        sid = cur.lastrowid
        add_edit(conn, person_id, draft, output)
        conn.execute("UPDATE edits SET submission_id = ? WHERE person_id = ? AND submission_id IS NULL",
                     (sid, person_id))
    return sid


def submissions(conn) -> list[dict]:
    """Every submission in order, with its author's name, its example decoded and its history
    (each edit's draft, output and time)."""
    rows = conn.execute("SELECT s.*, p.name AS author FROM submissions s JOIN people p ON p.id = s.person_id "
                        "ORDER BY s.id").fetchall()
    out = []
    for r in rows:
        history = [{"draft": json.loads(h["draft"]), "output": json.loads(h["output"]), "time": h["created"]}
                   for h in conn.execute("SELECT * FROM edits WHERE submission_id = ? ORDER BY id", (r["id"],))]
        out.append({**dict(r), "example": json.loads(r["example"]), "output": json.loads(r["output"]),
                    "fooled": bool(r["fooled"]), "history": history})
    return out
