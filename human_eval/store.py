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
    task TEXT NOT NULL, payload TEXT NOT NULL, kind TEXT NOT NULL DEFAULT 'judge',
    candidate_id INTEGER REFERENCES candidates(id));
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
    grammatical INTEGER, UNIQUE (person_id, item_id));
CREATE TABLE IF NOT EXISTS candidates (
    id INTEGER PRIMARY KEY, item_id INTEGER NOT NULL REFERENCES items(id),
    person_id INTEGER NOT NULL REFERENCES people(id), text TEXT, option INTEGER,
    beyond_repair INTEGER NOT NULL DEFAULT 0, created REAL NOT NULL, updated REAL NOT NULL,
    revisions INTEGER NOT NULL DEFAULT 0, UNIQUE (person_id, item_id));
CREATE TABLE IF NOT EXISTS views (
    person_id INTEGER NOT NULL REFERENCES people(id), item_id INTEGER NOT NULL REFERENCES items(id),
    first_shown REAL NOT NULL, PRIMARY KEY (person_id, item_id));
CREATE TABLE IF NOT EXISTS edits (
    id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id), draft TEXT NOT NULL,
    output TEXT NOT NULL, created REAL NOT NULL, submission_id INTEGER);
CREATE TABLE IF NOT EXISTS submissions (
    id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL REFERENCES people(id), example TEXT NOT NULL,
    fooled INTEGER NOT NULL, output TEXT NOT NULL, model TEXT NOT NULL, created REAL NOT NULL);
"""

ANNOTATOR, AUTHOR = "annotator", "author"  # the roles of people
# What an item asks of its annotator (items.kind):
# - JUDGE: answer a changed question (valid = chose the gold); on RACE, may mend a second right answer;
# - EDIT: rewrite a machine-written SQuAD sentence (a candidate), or mark it beyond repair;
# - VERIFY: answer blind a question that holds one candidate (items.candidate_id), and say whether it
#   is grammatical;
# - CONTROL: an original question with a known answer, to measure each annotator's accuracy;
# - BASELINE: the original of a studied question, to report the valid rate of what was not attacked.
JUDGE, EDIT, VERIFY, CONTROL, BASELINE = "judge", "edit", "verify", "control", "baseline"
KINDS = (JUDGE, EDIT, VERIFY, CONTROL, BASELINE)
PRIMARY_KINDS = (JUDGE, EDIT)  # one per studied changed question; the others point at one or stand beside
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
    upgrade(conn)
    return conn


def init(conn: sqlite3.Connection) -> None:
    conn.executescript(SCHEMA)


# Columns added since the first study databases: (table, column, declaration). `upgrade` adds them
# to a database written by an earlier advrace, whose items are then all judge items.
ADDED_COLUMNS = (("items", "kind", "TEXT NOT NULL DEFAULT 'judge'"),
                 ("items", "candidate_id", "INTEGER REFERENCES candidates(id)"),
                 ("annotations", "grammatical", "INTEGER"))


def upgrade(conn: sqlite3.Connection) -> None:
    """Bring a study database of an earlier advrace to this schema (new tables and columns)."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "items" not in tables:
        return
    for table, column, declaration in ADDED_COLUMNS:
        if column not in {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}:
            conn.execute(f"ALTER TABLE {table} ADD COLUMN {column} {declaration}")
    conn.executescript(SCHEMA)


@contextmanager
def transaction(conn, immediate: bool = False) -> Iterator[sqlite3.Connection]:
    """One transaction: committed when the block ends, rolled back if it raises. `immediate`
    takes the write lock at once (for a read followed by writes). Inside another transaction it
    is a savepoint, so that the outer one (an imported file's, all rows or none) decides."""
    if conn.in_transaction:
        yield from _savepoint(conn)
        return
    conn.execute("BEGIN IMMEDIATE" if immediate else "BEGIN")
    try:
        yield conn
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def _savepoint(conn) -> Iterator[sqlite3.Connection]:
    conn.execute("SAVEPOINT nested")
    try:
        yield conn
    except BaseException:
        conn.execute("ROLLBACK TO nested")
        conn.execute("RELEASE nested")
        raise
    conn.execute("RELEASE nested")


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
        # Their rewrites (an editor's, a mending judge's), kept the same way; kept when there are none
        # too, so that a candidate added afterwards shows.
        mine = [candidate_row(c) for c in candidates(conn) if c["person_id"] == person_id]
        set_meta(conn, **{FINISHED_CANDIDATES_KEY + name: candidates_sha256(mine)})


def is_finished(conn, person_id: int) -> bool:
    """Whether the person has pressed Finish, as the database has it now (not as a row read earlier)."""
    return bool(conn.execute("SELECT finished FROM people WHERE id = ?", (person_id,)).fetchone()["finished"])


FINISHED_KEY = "finished_sha256:"  # + an annotator's name: the sha256 of their answers when they finished
FINISHED_CANDIDATES_KEY = "finished_candidates_sha256:"  # + a name: the sha256 of their candidates then


def annotator_by_name(conn, name: str) -> sqlite3.Row | None:
    """An annotator's whole row (as the app has it once their token is checked), or None."""
    return conn.execute("SELECT * FROM people WHERE name = ? AND role = ?", (name, ANNOTATOR)).fetchone()


def annotators(conn) -> list[sqlite3.Row]:
    """The annotators (id, name, finished) in the order they were created."""
    return conn.execute("SELECT id, name, finished FROM people WHERE role = ? ORDER BY id", (ANNOTATOR,)).fetchall()


def annotator_names(conn) -> list[str]:
    return [r["name"] for r in conn.execute("SELECT name FROM people WHERE role = ? ORDER BY name", (ANNOTATOR,))]


# --------------------------------------------------------------------------- items and queues


def add_item(conn, split: str, record_id: str, source_id: str, task: str, payload: dict, kind: str = JUDGE,
             candidate_id: int | None = None) -> int:
    """Store an item (what an annotator is shown, and what scoring needs); returns its id."""
    if kind not in KINDS:
        raise ValueError(f"unknown item kind {kind!r}")
    cur = conn.execute("INSERT INTO items(split, record_id, source_id, task, payload, kind, candidate_id) "
                       "VALUES (?, ?, ?, ?, ?, ?, ?)",
                       (split, record_id, source_id, task, json.dumps(payload, ensure_ascii=False), kind,
                        candidate_id))
    return cur.lastrowid


def item(conn, item_id: int) -> dict:
    row = conn.execute("SELECT * FROM items WHERE id = ?", (item_id,)).fetchone()
    return {**dict(row), "payload": json.loads(row["payload"])}


def item_by_record_id(conn, record_id: str) -> dict | None:
    """The judge or edit item of a release record id (`<split>/<source_id>`), or None."""
    row = conn.execute("SELECT * FROM items WHERE record_id = ? AND kind IN (?, ?) ORDER BY id",
                       (record_id, *PRIMARY_KINDS)).fetchone()
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


def set_queue(conn, person_id: int, item_ids: list[int]) -> None:
    """The person's items, in this order."""
    conn.executemany("INSERT INTO queue(person_id, position, item_id) VALUES (?, ?, ?)",
                     [(person_id, k, iid) for k, iid in enumerate(item_ids)])


def append_queue(conn, person_id: int, item_ids: list[int]) -> None:
    """Add items after the person's queue (a later stage of the study: verify items)."""
    start = conn.execute("SELECT COALESCE(MAX(position) + 1, 0) FROM queue WHERE person_id = ?",
                         (person_id,)).fetchone()[0]
    conn.executemany("INSERT INTO queue(person_id, position, item_id) VALUES (?, ?, ?)",
                     [(person_id, start + k, iid) for k, iid in enumerate(item_ids)])


def queue(conn, person_id: int) -> list[sqlite3.Row]:
    """The person's items in order, each with their annotation if any (for an edit item, its
    candidate: an edit is answered by the rewrite, not by an annotation)."""
    return conn.execute(
        "SELECT q.position, q.item_id, CASE WHEN i.kind = 'edit' THEN c.id ELSE a.id END AS annotation_id, "
        "a.choice, a.answer_text, a.unanswerable "
        "FROM queue q JOIN items i ON i.id = q.item_id "
        "LEFT JOIN annotations a ON a.person_id = q.person_id AND a.item_id = q.item_id "
        "LEFT JOIN candidates c ON c.person_id = q.person_id AND c.item_id = q.item_id "
        "WHERE q.person_id = ? ORDER BY q.position", (person_id,)).fetchall()


# --------------------------------------------------------------------------- annotations


def annotation(conn, person_id: int, item_id: int) -> sqlite3.Row | None:
    """The person's answer to the item, if any."""
    return conn.execute("SELECT * FROM annotations WHERE person_id = ? AND item_id = ?",
                        (person_id, item_id)).fetchone()


def save_annotation(conn, person_id: int, item_id: int, *, choice=None, answer_text=None,
                    answer_start=None, unanswerable=False, reason=None, comment=None, grammatical=None) -> None:
    """An answer (upsert); `grammatical` (True/False) only for verify items."""
    now = time.time()
    conn.execute(
        "INSERT INTO annotations(person_id, item_id, choice, answer_text, answer_start, unanswerable, reason, "
        "comment, created, updated, grammatical) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT(person_id, item_id) DO UPDATE SET choice=excluded.choice, answer_text=excluded.answer_text, "
        "answer_start=excluded.answer_start, unanswerable=excluded.unanswerable, reason=excluded.reason, "
        "comment=excluded.comment, updated=excluded.updated, revisions=annotations.revisions + 1, "
        "grammatical=excluded.grammatical",
        (person_id, item_id, choice, answer_text, answer_start, int(bool(unanswerable)), reason, comment, now, now,
         None if grammatical is None else int(bool(grammatical))))


def annotations(conn) -> list[dict]:
    """Every answer (judge, verify, control and baseline items), with its annotator's name and its
    item's fields."""
    rows = conn.execute(
        "SELECT a.*, p.name AS annotator, i.split, i.record_id, i.source_id, i.task, i.payload, i.kind, "
        "i.candidate_id "
        "FROM annotations a JOIN people p ON p.id = a.person_id JOIN items i ON i.id = a.item_id "
        "ORDER BY i.id, p.name").fetchall()
    return [{**dict(r), "payload": json.loads(r["payload"])} for r in rows]


ANSWER_FIELDS = ("choice", "answer_text", "answer_start", "unanswerable", "reason", "comment")
# Added to a hashed answer row only when set, so that judge-only studies hash as before.
OPTIONAL_ANSWER_FIELDS = ("grammatical",)


def annotations_sha256(conn, person_id: int | None = None) -> str:
    """The sha256 of what was answered (annotator, item's record id and the answer's fields; not
    when or how often it was saved), of one person or of everyone."""
    return rows_sha256([answer_row(a) for a in annotations(conn) if person_id is None or a["person_id"] == person_id])


def answer_row(annotation: dict) -> dict:
    """What `annotations_sha256` hashes of a row of `annotations`."""
    row = {k: annotation[k] for k in ("annotator", "record_id", *ANSWER_FIELDS)}
    if annotation.get("kind", JUDGE) != JUDGE:
        row["item_id"] = annotation["item_id"]  # several items share a record id
    row.update({k: annotation[k] for k in OPTIONAL_ANSWER_FIELDS if annotation.get(k) is not None})
    return row


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
        if item.get("kind", JUDGE) != JUDGE:  # a judge-only study hashes as before kinds existed
            row.update(kind=item["kind"], candidate_id=item.get("candidate_id"))
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


# --------------------------------------------------------------------------- candidates (people's edits)


def save_candidate(conn, person_id: int, item_id: int, *, text: str | None = None, option: int | None = None,
                   beyond_repair: bool = False) -> int:
    """A person's rewrite of an item's machine text (upsert, keyed by person and item): an edited
    SQuAD sentence (`text`), a RACE option replaced by their own distractor (`option`, `text`), or
    the sentence marked beyond repair (`beyond_repair`, no text). Returns the candidate's id."""
    now = time.time()
    conn.execute(
        "INSERT INTO candidates(item_id, person_id, text, option, beyond_repair, created, updated) "
        "VALUES (?, ?, ?, ?, ?, ?, ?) ON CONFLICT(person_id, item_id) DO UPDATE SET text=excluded.text, "
        "option=excluded.option, beyond_repair=excluded.beyond_repair, updated=excluded.updated, "
        "revisions=candidates.revisions + 1",
        (item_id, person_id, text, option, int(bool(beyond_repair)), now, now))
    return conn.execute("SELECT id FROM candidates WHERE person_id = ? AND item_id = ?",
                        (person_id, item_id)).fetchone()["id"]


def delete_candidate(conn, person_id: int, item_id: int) -> None:
    """Withdraw a person's candidate for an item (a judge who no longer mends it)."""
    conn.execute("DELETE FROM candidates WHERE person_id = ? AND item_id = ?", (person_id, item_id))


def candidate(conn, person_id: int, item_id: int) -> sqlite3.Row | None:
    return conn.execute("SELECT * FROM candidates WHERE person_id = ? AND item_id = ?",
                        (person_id, item_id)).fetchone()


def candidates(conn) -> list[dict]:
    """Every candidate in order, with its author's name and its item's record id, split and kind."""
    rows = conn.execute(
        "SELECT c.*, p.name AS annotator, i.record_id, i.split, i.source_id, i.kind AS item_kind "
        "FROM candidates c JOIN people p ON p.id = c.person_id JOIN items i ON i.id = c.item_id "
        "ORDER BY c.id").fetchall()
    return [dict(r) for r in rows]


CANDIDATE_FIELDS = ("text", "option", "beyond_repair")


def candidate_row(c: dict) -> dict:
    """What `candidates_sha256` hashes of a row of `candidates`."""
    return {"annotator": c["annotator"], "record_id": c["record_id"], "item_id": c["item_id"],
            **{k: c[k] for k in CANDIDATE_FIELDS}}


def candidates_sha256(rows: list[dict]) -> str:
    """The sha256 of candidate rows (`candidate_row`), one JSON line each, by item and annotator."""
    h = hashlib.sha256()
    for r in sorted(rows, key=lambda r: (r["item_id"], r["annotator"])):
        h.update((json.dumps(r, ensure_ascii=False, sort_keys=True) + "\n").encode("utf-8"))
    return h.hexdigest()


# --------------------------------------------------------------------------- timing


def record_view(conn, person_id: int, item_id: int) -> None:
    """When the person first saw the item (page load), for the time spent per item."""
    conn.execute("INSERT OR IGNORE INTO views(person_id, item_id, first_shown) VALUES (?, ?, ?)",
                 (person_id, item_id, time.time()))


def views(conn) -> list[dict]:
    """Each (annotator, item) first shown, with the item's kind and split."""
    rows = conn.execute("SELECT v.*, p.name AS annotator, i.kind, i.split FROM views v "
                        "JOIN people p ON p.id = v.person_id JOIN items i ON i.id = v.item_id ORDER BY v.rowid")
    return [dict(r) for r in rows.fetchall()]
