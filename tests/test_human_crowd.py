"""A study run on a crowd platform: `human-eval export-tasks` writes its queues as a CSV of tasks,
`human-eval import-answers` reads the platform's results back through the app's answer checks.
The same answers given in the app and through the CSV give byte-identical validated releases,
and a tampered results file is refused with nothing stored."""

import csv
import hashlib
import io
import re
import shutil
import threading
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.human_eval import crowd, store
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.study import create_study
from advrace.human_eval.validate import validate_release
from advrace.release import build_release
from conftest import make_race_dir, squad_doc

SPLIT = "charswap"
NAMES = ("annotator1", "annotator2", "annotator3")


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("crowd")
    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "splits": [SPLIT], "workers": 1})
    build_release(cfg, root / "rel")
    return root / "rel"


@pytest.fixture(scope="module")
def squad_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("crowd-squad")
    (root / "squad.json").write_text(__import__("json").dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "splits": [SPLIT],
                                            "workers": 1}), root / "rel")
    return root / "rel"


def decision(name: str, item: dict) -> dict:
    """The answer form an annotator gives an item, the same in the app and on the platform: the
    gold, a distractor (or a span that is not the gold), 'cannot be answered' with a reason, or
    the gold with a comment; drawn from the annotator's name and the item."""
    draw = int(hashlib.sha256(f"{name} {item['record_id']}".encode()).hexdigest(), 16) % 5
    p = item["payload"]
    if draw == 3:
        return {"choice": "unanswerable", "reason": "multiple correct options", "comment": "B and C both fit"}
    if item["task"] == MULTIPLE_CHOICE:
        choice = p["label"] if draw != 2 else (p["label"] + 1) % len(p["options"])
        return {"choice": str(choice), **({"comment": "easy, but “quoted”,\nover two lines"} if draw == 4 else {})}
    gold = p["answers"][0]
    text, start = (gold["text"], gold["answer_start"]) if draw != 2 else (p["context"][:6], 0)
    return {"choice": "answer", "answer_text": text, "answer_start": str(start)}


def start_server(db):
    server = HumanEvalServer(("127.0.0.1", 0), db)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


def post(url, form):
    request = urllib.request.Request(url, data=urllib.parse.urlencode(form).encode())
    with urllib.request.urlopen(request, timeout=30) as r:
        return r.status, r.read().decode()


def answer_in_the_app(db, tokens: dict, finish=NAMES):
    """Each annotator opens their link and answers their queue in order through the web app,
    as a browser posts the form (every field, empty ones too), then presses Finish."""
    conn = store.connect(db)
    server, url = start_server(db)
    try:
        for name in NAMES:
            person = store.annotator_by_name(conn, name)
            base = f"{url}/a/{tokens[name]}"
            for row in store.queue(conn, person["id"]):
                with urllib.request.urlopen(f"{base}/item/{row['position']}", timeout=30) as r:
                    csrf = re.search(r"name=csrf value='([^']+)'", r.read().decode()).group(1)
                form = {"choice": "", "reason": "", "comment": "", **decision(name, store.item(conn, row["item_id"]))}
                if store.item(conn, row["item_id"])["task"] == EXTRACTIVE_QA:
                    form = {"answer_text": "", "answer_start": "", **form}
                assert post(f"{base}/item/{row['position']}", {"csrf": csrf, **form})[0] == 200
            if name in finish:
                post(f"{base}/finish", {"csrf": csrf})
    finally:
        server.shutdown()
        server.server_close()
        conn.close()


def read_csv(path):
    with open(path, encoding="utf-8", newline="") as f:
        reader = csv.DictReader(f)
        return list(reader.fieldnames), list(reader)


def write_csv(path, header, rows):
    with open(path, "w", encoding="utf-8", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=header)
        writer.writeheader()
        writer.writerows(rows)
    return path


def fill(db, tasks, workers: dict):
    """The tasks file as the workers fill it: each row's answer form, and the worker's id."""
    conn = store.connect(db)
    try:
        rows = []
        for row in tasks:
            form = decision(row["annotator"], store.item(conn, int(row["item_id"])))
            form.pop("choice") if form.get("choice") == "answer" else None  # the span itself is the answer
            rows.append({**row, **form, "worker_id": workers[row["annotator"]]})
        return rows
    finally:
        conn.close()


def as_mturk(header, rows, workers: dict):
    """Mechanical Turk's results file: the columns it was given as Input.<col>, the form's fields
    as Answer.<field>, the worker in WorkerId, and its own bookkeeping columns."""
    answers = set(crowd.ANSWER_COLUMNS)
    out_header = ["HITId", "WorkerId", "AssignmentStatus", *(f"Input.{c}" for c in header),
                  *(f"Answer.{c}" for c in crowd.ANSWER_COLUMNS)]
    out = []
    for k, row in enumerate(rows):
        out.append({"HITId": f"hit{k}", "WorkerId": workers[row["annotator"]], "AssignmentStatus": "Submitted",
                    **{f"Input.{c}": ("" if c in answers or c == "worker_id" else row[c]) for c in header},
                    **{f"Answer.{c}": row.get(c, "") for c in crowd.ANSWER_COLUMNS}})
    return out_header, out


def dump(db) -> list[str]:
    conn = store.connect(db)
    try:
        return list(conn.iterdump())
    finally:
        conn.close()


def answers_of(db) -> list[tuple]:
    """What each annotation and annotator's state holds, not when it was saved."""
    conn = store.connect(db)
    try:
        rows = [tuple(store.answer_row(a).items()) + (a["revisions"],) for a in store.annotations(conn)]
        return rows + [tuple(a) for a in store.annotators(conn)]
    finally:
        conn.close()


@pytest.fixture
def exported(release, tmp_path):
    """A study of every changed question, 2 judgements per item over 3 annotators, copied before
    anyone answers: app.db is answered in the app, crowd.db through export-tasks and import-answers."""
    out = create_study(release, tmp_path / "app.db", splits=[SPLIT], all_changed=True, annotators=3, judgements=2,
                       seed=5)
    shutil.copy(tmp_path / "app.db", tmp_path / "crowd.db")
    assert main(["human-eval", "export-tasks", str(tmp_path / "crowd.db"), "--format", "csv",
                 "--out", str(tmp_path / "tasks.csv")]) == 0
    header, tasks = read_csv(tmp_path / "tasks.csv")
    return {"tokens": out["annotators"], "header": header, "tasks": tasks, "app": tmp_path / "app.db",
            "db": tmp_path / "crowd.db", "dir": tmp_path}


WORKERS = {"annotator1": "A1B2C3MTURK", "annotator2": "A9Z8Y7MTURK", "annotator3": "5f3e0prolific"}


def test_the_tasks_file_shows_what_the_page_shows_and_never_the_gold(exported):
    conn = store.connect(exported["db"])
    queues = {a["name"]: [(r["position"], r["item_id"]) for r in store.queue(conn, a["id"])]
              for a in store.annotators(conn)}
    tasks = exported["tasks"]
    assert [(t["annotator"], int(t["position"]), int(t["item_id"])) for t in tasks] == \
        [(name, pos, iid) for name in NAMES for pos, iid in queues[name]]
    assert exported["header"] == ["study_id", "annotator", "position", "item_id", "row_hash", "page", "task", "title",
                                  "passage", "context", "question", "option_A", "option_B", "option_C", "option_D",
                                  "sentence", "sentence_start", "sentence_end", "fake", "asked", "mend",
                                  "choice", "answer_text", "answer_start", "reason", "comment", "grammatical",
                                  "edit_text", "beyond_repair", "mend_option", "mend_text", "worker_id"]
    study_id = store.meta(conn)["crowd"]["study_id"]
    for t in tasks:
        p = store.item(conn, int(t["item_id"]))["payload"]
        assert t["study_id"] == study_id and (t["page"], t["task"]) == ("judge", MULTIPLE_CHOICE)
        assert (t["passage"], t["question"]) == (p["passage"], p["question"])
        assert [t[f"option_{x}"] for x in "ABCD"] == p["options"]
        shown = {"study_id", "annotator", "position", "item_id", "row_hash", "page", "task", "passage", "question",
                 "option_A", "option_B", "option_C", "option_D"}
        assert {c for c, v in t.items() if v} == shown  # the label nowhere, the answer columns empty
    hashes = [t["row_hash"] for t in tasks]
    assert len(set(hashes)) == len(hashes) and all(re.fullmatch(r"[0-9a-f]{32}", h) for h in hashes)
    # a hash binds the row to its queue, position, item (and what it shows) and study
    key, item = store.meta(conn)["crowd"]["key"], store.item(conn, int(tasks[0]["item_id"]))
    same = crowd.row_hash(key, study_id, "annotator1", 0, item)
    assert same != crowd.row_hash(key, study_id, "annotator2", 0, item)
    assert same != crowd.row_hash(key, study_id, "annotator1", 1, item)
    assert same != crowd.row_hash(key, "another", "annotator1", 0, item)
    relabelled = {**item, "payload": {**item["payload"], "label": item["payload"]["label"] + 1}}
    assert same != crowd.row_hash(key, study_id, "annotator1", 0, relabelled)
    # one queue alone (a batch for one worker): its rows, the same bytes
    assert main(["human-eval", "export-tasks", str(exported["db"]), "--annotators", "annotator2",
                 "--out", str(exported["dir"] / "one.csv")]) == 0
    assert read_csv(exported["dir"] / "one.csv")[1] == [t for t in tasks if t["annotator"] == "annotator2"]
    with pytest.raises(ConfigError, match=r"no annotator \(queue\) named annotator7"):
        crowd.export_tasks(exported["db"], exported["dir"] / "x.csv", ["annotator7"])
    # the same database exports the same bytes again
    first = (exported["dir"] / "tasks.csv").read_bytes()
    crowd.export_tasks(exported["db"], exported["dir"] / "again.csv")
    assert (exported["dir"] / "again.csv").read_bytes() == first


def test_squad_sentences_are_shown_and_controls_look_like_verify_items(squad_release, tmp_path):
    """A SQuAD edit item shows its sentence and fake answer; a control with a highlighted sentence
    is exported as the verify page shows it, its kind and gold answers nowhere in the file."""
    create_study(squad_release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=1)
    conn = store.connect(tmp_path / "s.db")
    judge = store.all_items(conn)[0]
    p = judge["payload"]
    sentence = [0, p["context"].index(".") + 1]
    fake = [p["context"].index("Europe"), p["context"].index("Europe") + len("Europe")]
    with store.transaction(conn):
        edit = store.add_item(conn, SPLIT, judge["record_id"], judge["source_id"], EXTRACTIVE_QA,
                              {**p, "sentence": sentence, "fake": fake, "asked": "location",
                               "machine": p["context"][sentence[0]:sentence[1]]}, kind=store.EDIT)
        control = store.add_item(conn, "original", "original/x", judge["source_id"], EXTRACTIVE_QA,
                                 {**p, "highlight": sentence}, kind=store.CONTROL)
        person = store.annotators(conn)[0]["id"]
        conn.execute("INSERT INTO queue(person_id, position, item_id) VALUES (?, 100, ?), (?, 101, ?)",
                     (person, edit, person, control))
    conn.close()
    crowd.export_tasks(tmp_path / "s.db", tmp_path / "t.csv")
    text = (tmp_path / "t.csv").read_text(encoding="utf-8")
    rows = {int(r["item_id"]): r for r in read_csv(tmp_path / "t.csv")[1]}
    assert (rows[edit]["page"], rows[edit]["sentence"], rows[edit]["fake"], rows[edit]["asked"]) == \
        ("edit", p["context"][:p["context"].index(".") + 1], "Europe", "location")
    assert (rows[edit]["sentence_start"], rows[edit]["sentence_end"]) == tuple(str(x) for x in sentence)
    assert (rows[control]["page"], rows[control]["sentence"]) == ("verify", rows[edit]["sentence"])
    assert rows[judge["id"]]["page"] == "judge" and rows[judge["id"]]["sentence"] == ""
    assert all(rows[i]["context"] == p["context"] and rows[i]["question"] == p["question"]
               for i in (judge["id"], edit, control))
    assert "control" not in text and "answer_start\":" not in text and "answers" not in text


def test_the_crowd_route_gives_the_apps_release_byte_for_byte(release, exported, capsys):
    tmp = exported["dir"]
    answer_in_the_app(exported["app"], exported["tokens"])
    filled = fill(exported["db"], exported["tasks"], WORKERS)
    # Mechanical Turk's results for two queues, a Prolific survey's export (participant_id) for the third
    header, rows = as_mturk(exported["header"], [r for r in filled if r["annotator"] != "annotator3"], WORKERS)
    write_csv(tmp / "mturk.csv", header, rows)
    prolific = [{**{k: v for k, v in r.items() if k != "worker_id"}, "participant_id": r["worker_id"]}
                for r in filled if r["annotator"] == "annotator3"]
    write_csv(tmp / "prolific.csv", [*exported["header"][:-1], "participant_id"], prolific)
    for name in ("mturk.csv", "prolific.csv"):
        assert main(["human-eval", "import-answers", str(exported["db"]), str(tmp / name)]) == 0
    out = capsys.readouterr().out
    assert "finished: annotator1, annotator2" in out and "finished: annotator3" in out
    assert answers_of(exported["db"]) == answers_of(exported["app"])
    conn = store.connect(exported["db"])
    assert crowd.workers(store.meta(conn)) == WORKERS
    conn.close()
    for db, out_dir in ((exported["app"], tmp / "v-app"), (exported["db"], tmp / "v-crowd")):
        validate_release(db, release, out_dir)
    app_files = sorted(p.relative_to(tmp / "v-app") for p in (tmp / "v-app").rglob("*") if p.is_file())
    assert app_files == sorted(p.relative_to(tmp / "v-crowd") for p in (tmp / "v-crowd").rglob("*") if p.is_file())
    for rel in app_files:
        assert (tmp / "v-app" / rel).read_bytes() == (tmp / "v-crowd" / rel).read_bytes(), rel
    assert main(["verify", str(tmp / "v-crowd"), "--study", str(exported["db"])]) == 0
    # the results downloaded again (all rows so far): nothing changes
    before = dump(exported["db"])
    assert main(["human-eval", "import-answers", str(exported["db"]), str(tmp / "mturk.csv")]) == 0
    assert "0 answers stored" in capsys.readouterr().out and dump(exported["db"]) == before


def test_span_answers_round_trip(squad_release, tmp_path):
    """SQuAD: a span travels as its text and offset, checked against the paragraph as the app checks it."""
    out = create_study(squad_release, tmp_path / "app.db", splits=[SPLIT], all_changed=True, annotators=3,
                       judgements=2, seed=2)
    shutil.copy(tmp_path / "app.db", tmp_path / "crowd.db")
    crowd.export_tasks(tmp_path / "crowd.db", tmp_path / "t.csv")
    header, tasks = read_csv(tmp_path / "t.csv")
    answer_in_the_app(tmp_path / "app.db", out["annotators"])
    crowd.import_answers(tmp_path / "crowd.db", write_csv(tmp_path / "r.csv", header, fill(tmp_path / "crowd.db", tasks,
                                                                                           WORKERS)))
    assert answers_of(tmp_path / "crowd.db") == answers_of(tmp_path / "app.db")
    # a span at another occurrence than the one selected is refused, as in the app
    rows = fill(tmp_path / "crowd.db", tasks, WORKERS)
    spans = [r for r in rows if r.get("answer_start")]
    spans[0]["answer_start"] = str(int(spans[0]["answer_start"]) + 1)
    with pytest.raises(ConfigError, match=r"does not match the paragraph at character"):
        crowd.import_answers(tmp_path / "crowd.db", write_csv(tmp_path / "bad.csv", header, rows))


def other_study_row(release, tmp_path, header):
    """A filled row of another study of the same release (same item ids, same queue names)."""
    create_study(release, tmp_path / "other.db", splits=[SPLIT], all_changed=True, annotators=3, judgements=2, seed=5)
    crowd.export_tasks(tmp_path / "other.db", tmp_path / "other.csv")
    return fill(tmp_path / "other.db", read_csv(tmp_path / "other.csv")[1][:1], WORKERS)[0]


def line_of(header, rows, k) -> int:
    """The line of the CSV file on which rows[k] starts (a passage can hold line breaks)."""
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=header)
    writer.writeheader()
    writer.writerows(rows[:k])
    return buffer.getvalue().count("\n") + 1


def tamper(kind: str, rows: list[dict], release, tmp_path, header) -> list[dict]:
    rows = [dict(r) for r in rows]
    if kind == "edited":
        rows[3]["question"] = rows[3]["question"] + " really?"
    elif kind == "row hash":
        rows[3]["row_hash"] = "0" * 32
    elif kind == "moved":  # to the other queue that has the item, at its position there: only the hash tells
        other = next(r for r in rows if r["item_id"] == rows[3]["item_id"] and r["annotator"] != rows[3]["annotator"])
        rows[3].update(annotator=other["annotator"], position=other["position"], worker_id=other["worker_id"])
    elif kind == "another study":
        rows[3] = other_study_row(release, tmp_path, header)
    elif kind == "duplicate":
        rows.insert(4, dict(rows[3]))
    elif kind == "unknown item":
        rows[3]["item_id"] = "999"
    elif kind == "unknown queue":
        rows[3]["annotator"] = "annotator9"
    elif kind == "unknown position":
        rows[3]["position"] = "77"
    elif kind == "two workers":
        rows[3]["worker_id"] = "SOMEONEELSE"
    elif kind == "worker on two queues":
        for r in rows:
            if r["annotator"] == "annotator2":
                r["worker_id"] = WORKERS["annotator1"]
    elif kind == "refused answer":
        rows[3].update(choice="7", reason="", comment="")
    elif kind == "no reason":
        rows[3].update(choice="unanswerable", reason="")
    elif kind == "no worker":
        rows[3]["worker_id"] = ""
    return rows


# What each tampering is refused for: the row named (its index; None: any) and the problem.
PROBLEMS = {
    "edited": (3, "column question is not what the study shows"),
    "row hash": (3, "the row hash does not match"),
    "moved": (3, "the row hash does not match"),
    "another study": (3, "study id [0-9a-f]+ is not this study's .*a row of another study"),
    "duplicate": (4, "a second answer to .* the first is on line {first}"),
    "unknown item": (3, "no item '999' in this study"),
    "unknown queue": (3, "no annotator \\(queue\\) named 'annotator9'"),
    "unknown position": (3, "annotator.'s queue has no position '77'"),
    "two workers": (3, "annotator.'s queue answered by worker 'SOMEONEELSE', but it is worker '[^']+''s"),
    "worker on two queues": (None, "worker 'A1B2C3MTURK' answered annotator2's queue and annotator1's"),
    "refused answer": (3, "annotator.'s answer to item \\d+ is refused: choose an option"),
    "no reason": (3, "annotator.'s answer to item \\d+ is refused: choose a reason"),
    "no worker": (3, "no worker id"),
}




@pytest.mark.parametrize("kind", list(PROBLEMS))
def test_a_tampered_results_file_is_refused_and_nothing_stored(release, exported, kind, capsys):
    tmp = exported["dir"]
    rows = tamper(kind, fill(exported["db"], exported["tasks"], WORKERS), release, tmp, exported["header"])
    header = exported["header"]
    before = dump(exported["db"])
    path = write_csv(tmp / "results.csv", header, rows)
    assert main(["human-eval", "import-answers", str(exported["db"]), str(path)]) == 2
    err = capsys.readouterr().err
    assert str(path) in err and "nothing imported" in err
    index, problem = PROBLEMS[kind]
    line = r"\d+" if index is None else line_of(header, rows, index)
    problem = problem.replace("{first}", str(line_of(header, rows, 3)))
    assert re.search(f"line {line}: {problem}", err), err
    assert dump(exported["db"]) == before
    # the same file unaltered is taken
    assert main(["human-eval", "import-answers", str(exported["db"]),
                 str(write_csv(tmp / "ok.csv", header, fill(exported["db"], exported["tasks"], WORKERS)))]) == 0


def test_a_row_over_several_lines_is_named_by_the_line_it_starts_on(exported):
    rows = fill(exported["db"], exported["tasks"], WORKERS)
    for r in rows[:3]:
        r["comment"] = "one\ntwo\nthree"
    rows[3]["row_hash"] = "f" * 32
    rows[1].update(choice="9", reason="")
    path = write_csv(exported["dir"] / "r.csv", exported["header"], rows)
    text = path.read_text(encoding="utf-8")
    line = text[:text.index(rows[3]["study_id"] + "," + rows[3]["annotator"] + ",3,")].count("\n") + 1
    assert line > 11  # the comments' and passages' line breaks
    # every problem is named, those the answer checks find too, in the order of the file
    with pytest.raises(ConfigError, match=f"2 problems.*\n  line {line_of(exported['header'], rows, 1)}: annotator1's answer to item \\d+ is refused: "
                                          f"choose an option.*\n  line {line}: the row hash does not match"):
        crowd.import_answers(exported["db"], path)


def test_queues_finish_when_answered_or_with_finish_and_a_finished_answer_stays(exported, capsys):
    tmp, db = exported["dir"], exported["db"]
    rows = fill(db, exported["tasks"], WORKERS)
    first = [r for r in rows if r["annotator"] == "annotator1"]
    partial = [r if r["annotator"] != "annotator2" or k % 2 else {**r, **{c: "" for c in crowd.ANSWER_COLUMNS}}
               for k, r in enumerate(rows) if r["annotator"] != "annotator3"]
    # MTurk's rejected assignments are not imported
    rejected = as_mturk(exported["header"], rows, WORKERS)
    for r in rejected[1]:
        r["AssignmentStatus"] = "Rejected" if r["Input.annotator"] == "annotator3" else "Approved"
    assert main(["human-eval", "import-answers", str(db),
                 str(write_csv(tmp / "p.csv", exported["header"], partial))]) == 0
    out = capsys.readouterr().out
    assert "finished: annotator1" in out and "annotator2" not in out
    conn = store.connect(db)
    finished = {a["name"]: a["finished"] for a in store.annotators(conn)}
    assert finished == {"annotator1": 1, "annotator2": 0, "annotator3": 0}
    assert main(["human-eval", "import-answers", str(db), str(write_csv(tmp / "m.csv", *rejected)), "--finish"]) == 0
    out = capsys.readouterr().out
    assert "rejected on the platform" in out and "finished: annotator2" in out
    finished = {a["name"]: a["finished"] for a in store.annotators(conn)}
    assert finished == {"annotator1": 1, "annotator2": 1, "annotator3": 0}
    assert not any(a["annotator"] == "annotator3" for a in store.annotations(conn))
    # a finished queue's answer changed on the platform afterwards is refused
    changed = [dict(r) for r in first]
    changed[0].update(choice=str((int(changed[0]["choice"]) + 1) % 4) if changed[0]["choice"].isdigit()
                      else "0", reason="")
    before = dump(db)
    with pytest.raises(ConfigError, match=r"annotator1 has finished; their answer to item \d+ differs"):
        crowd.import_answers(db, write_csv(tmp / "c.csv", exported["header"], changed))
    assert dump(db) == before
    conn.close()


def test_a_study_never_exported_or_a_file_without_its_columns_is_refused(release, exported, tmp_path):
    create_study(release, tmp_path / "new.db", splits=[SPLIT], all_changed=True, annotators=1)
    path = write_csv(tmp_path / "r.csv", exported["header"], fill(exported["db"], exported["tasks"], WORKERS))
    with pytest.raises(ConfigError, match=r"new\.db: this study database was never exported"):
        crowd.import_answers(tmp_path / "new.db", path)
    # the row hashes are keyed by the study's secret: the same ids under another key are refused
    shutil.copy(exported["db"], tmp_path / "rekeyed.db")
    conn = store.connect(tmp_path / "rekeyed.db")
    store.set_meta(conn, crowd={**store.meta(conn)["crowd"], "key": "0" * 64})
    conn.close()
    with pytest.raises(ConfigError, match=r"line 2: the row hash does not match"):
        crowd.import_answers(tmp_path / "rekeyed.db", path)
    (tmp_path / "x.csv").write_text("WorkerId,Answer.choice\nA1,2\n", encoding="utf-8")
    with pytest.raises(ConfigError, match=r"x\.csv: no column study_id, annotator, position, item_id, row_hash"):
        crowd.import_answers(exported["db"], tmp_path / "x.csv")
    assert main(["human-eval", "import-answers", str(tmp_path / "none.db"), str(path)]) == 2
    (tmp_path / "latin.csv").write_bytes("study_id,annotator\nNaïve,x\n".encode("latin-1"))
    with pytest.raises(ConfigError, match=r"latin\.csv: not a UTF-8 CSV file"):
        crowd.import_answers(exported["db"], tmp_path / "latin.csv")
    with pytest.raises(ConfigError, match=r"gone\.csv: no such results file"):
        crowd.import_answers(exported["db"], tmp_path / "gone.csv")


# --------------------------------------------------------------------------- edit and verify tasks

# How the editors and verifiers answer the edit tasks (addonesent, seed 3): one edit beyond
# repair, one ungrammatical (every verifier says "no"), one whose verifier selects the fake answer.
EDITS = {
    "annotator1": {"q0": "The Elbe flows into the Pacific Ocean.", "q1": "The Sava flows through fifteen countries.",
                   "q2": "Zanzibar City was built on the banks of the Elbe."},
    "annotator2": {"q0": "The Elbe reaches the sea called the Pacific Ocean.", "q1": "The Sava crosses fifteen lands.",
                   "q2": None},
    "annotator3": {"q0": "Elbe reach Pacific Ocean the sea of.", "q1": "Fifteen countries are crossed by the Sava.",
                   "q2": "Zanzibar City stands on the banks of the Elbe."},
}
UNGRAMMATICAL = {"Elbe reach Pacific Ocean the sea of."}
FOOLED_BY = {"Fifteen countries are crossed by the Sava.": "Fifteen"}
EDITORS, VERIFIERS = ("annotator1", "annotator2", "annotator3"), ("annotator4", "annotator5", "annotator6")


def edit_or_verify_form(name: str, item: dict) -> dict:
    """The answer form of an edit item (the editor's sentence, or beyond repair) or of a verify
    item (the gold span, or the fake answer for a sentence in FOOLED_BY; grammatical unless in
    UNGRAMMATICAL), the same in the app and on the platform."""
    p = item["payload"]
    if item["kind"] == store.EDIT:
        text = EDITS[name][item["source_id"]]
        return {"beyond_repair": "yes"} if text is None else {"edit_text": text}
    sentence = p["context"][slice(*p["highlight"])]
    if sentence in FOOLED_BY:
        text, start = FOOLED_BY[sentence], p["highlight"][0] + sentence.index(FOOLED_BY[sentence])
    else:
        text, start = p["answers"][0]["text"], p["answers"][0]["answer_start"]
    return {"answer_text": text, "answer_start": str(start), "grammatical": "no" if sentence in UNGRAMMATICAL else "yes"}


def in_the_app(db, tokens: dict):
    """Each annotator answers their queue through the web app as the page posts it, then presses Finish."""
    conn = store.connect(db)
    server, url = start_server(db)
    try:
        for name, token in tokens.items():
            base = f"{url}/a/{token}"
            for row in store.queue(conn, store.annotator_by_name(conn, name)["id"]):
                with urllib.request.urlopen(f"{base}/item/{row['position']}", timeout=30) as r:
                    csrf = re.search(r"name=csrf value='([^']+)'", r.read().decode()).group(1)
                form = edit_or_verify_form(name, store.item(conn, row["item_id"]))
                if "answer_text" in form:
                    form = {"choice": "answer", "comment": "", **form}
                assert post(f"{base}/item/{row['position']}", {"csrf": csrf, **form})[0] == 200
            post(f"{base}/finish", {"csrf": csrf})
    finally:
        server.shutdown()
        server.server_close()
        conn.close()


def filled(db, tasks) -> list[dict]:
    conn = store.connect(db)
    try:
        return [{**t, **edit_or_verify_form(t["annotator"], store.item(conn, int(t["item_id"]))),
                 "worker_id": f"W-{t['annotator']}"} for t in tasks]
    finally:
        conn.close()


@pytest.fixture(scope="module")
def edit_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("crowd-edit")
    (root / "squad.json").write_text(__import__("json").dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "seed": 3, "splits": [
        {"attack": "addonesent", "config": {"answer_model": ""}}], "workers": 1}), root / "rel")
    return root / "rel"


def test_an_edit_then_verify_study_through_the_csv_gives_the_apps_release(edit_release, tmp_path, capsys):
    from advrace.human_eval.editing import create_edit_study
    from advrace.human_eval.verifying import add_verify_items

    app, db = tmp_path / "app.db", tmp_path / "crowd.db"
    editors = create_edit_study(edit_release, app, splits=["addonesent"], editors=3, annotators=3)["annotators"]
    shutil.copy(app, db)
    in_the_app(app, editors)
    # the editors' tasks on the platform: the edit page's sentence and fake answer, the answer columns empty
    assert main(["human-eval", "export-tasks", str(db), "--out", str(tmp_path / "edit.csv")]) == 0
    header, tasks = read_csv(tmp_path / "edit.csv")
    conn = store.connect(db)
    for t in tasks:
        p = store.item(conn, int(t["item_id"]))["payload"]
        assert (t["page"], t["sentence"], t["fake"]) == ("edit", p["machine"], p["answer"])
        assert not any(t[c] for c in crowd.ANSWER_COLUMNS)
    conn.close()
    rows = filled(db, tasks)
    # tampered: the sentence shown edited, or a row hash; refused, nothing stored
    before = dump(db)
    for column, value in (("sentence", rows[1]["sentence"].rstrip(".") + " indeed."),
                          ("row_hash", "0" * 32)):
        bad = [dict(r) for r in rows]
        bad[1][column] = value
        assert main(["human-eval", "import-answers", str(db), str(write_csv(tmp_path / "bad.csv", header, bad))]) == 2
        err = capsys.readouterr().err
        assert re.search(f"line 3: {'column sentence is not what the study shows' if column == 'sentence' else 'the row hash does not match'}", err), err
        assert dump(db) == before
    # an edit queue finishes when every one of its edits is in, not before
    first = [r for r in rows if r["annotator"] == "annotator1"]
    crowd.import_answers(db, write_csv(tmp_path / "part.csv", header, first[:-1]))
    conn = store.connect(db)
    assert not store.annotator_by_name(conn, "annotator1")["finished"]
    conn.close()
    assert crowd.import_answers(db, write_csv(tmp_path / "edits.csv", header, rows))["finished"] == list(EDITORS)
    # verify items, made alike in both databases, to three new annotators
    verifiers = add_verify_items(app, verifiers=1, annotators=3)["annotators"]
    add_verify_items(db, verifiers=1, annotators=3)
    assert tuple(verifiers) == VERIFIERS
    in_the_app(app, verifiers)
    assert main(["human-eval", "export-tasks", str(db), "--annotators", ",".join(VERIFIERS),
                 "--out", str(tmp_path / "verify.csv")]) == 0
    header, tasks = read_csv(tmp_path / "verify.csv")
    conn = store.connect(db)
    for t in tasks:  # the verify page: the candidate sentence where it stands, no fake marked
        p = store.item(conn, int(t["item_id"]))["payload"]
        assert t["page"] == "verify" and t["sentence"] == p["context"][slice(*p["highlight"])] and not t["fake"]
    conn.close()
    assert len(tasks) == sum(t is not None for mine in EDITS.values() for t in mine.values())  # none beyond repair
    assert main(["human-eval", "import-answers", str(db), str(write_csv(tmp_path / "v.csv", header,
                                                                         filled(db, tasks)))]) == 0
    assert "finished: " + ", ".join(VERIFIERS) in capsys.readouterr().out
    assert answers_of(db) == answers_of(app)
    for study, out in ((app, tmp_path / "v-app"), (db, tmp_path / "v-crowd")):
        validate_release(study, edit_release, out)
    files = sorted(p.relative_to(tmp_path / "v-app") for p in (tmp_path / "v-app").rglob("*") if p.is_file())
    assert files == sorted(p.relative_to(tmp_path / "v-crowd") for p in (tmp_path / "v-crowd").rglob("*")
                           if p.is_file())
    for rel in files:
        assert (tmp_path / "v-app" / rel).read_bytes() == (tmp_path / "v-crowd" / rel).read_bytes(), rel
    assert main(["verify", str(tmp_path / "v-crowd"), "--study", str(db)]) == 0
    from advrace.release import load_manifest

    numbers = load_manifest(tmp_path / "v-crowd")["validation"]["splits"]["addonesent"]
    written = [t for mine in EDITS.values() for t in mine.values()]
    good = [t for t in written if t is not None and t not in UNGRAMMATICAL and t not in FOOLED_BY]
    assert (numbers["candidates"], numbers["beyond_repair"], numbers["verified"], numbers["approved"]) == (
        len(written), written.count(None), len(written) - written.count(None), len(good))
    assert 0 < len(good) < len(written) - written.count(None)


def test_work_rejected_after_its_import_a_worker_filled_id_and_odd_digits(exported, capsys):
    """Three ways a results file could store what it should not: answers imported before the
    researcher rejected that work stay counted (refused, named); a worker who fills in a field
    named worker_id blocks or changes whose answers they are (the platform's column wins); a
    digit that is not 0-9 ("²") in a position is a refused row, not a crash."""
    tmp, db = exported["dir"], exported["db"]
    rows = fill(db, exported["tasks"], WORKERS)
    header, mturk = as_mturk(exported["header"], rows, WORKERS)
    header = [*header, "Answer.worker_id"]
    mine = [r for r in mturk if r["Input.annotator"] == "annotator3"]
    for r in mine:
        r["Answer.worker_id"] = "someone-else"  # typed by the worker: MTurk's WorkerId still says who it was
    assert main(["human-eval", "import-answers", str(db), str(write_csv(tmp / "a.csv", header, mine))]) == 0
    conn = store.connect(db)
    assert crowd.workers(store.meta(conn))["annotator3"] == WORKERS["annotator3"]
    conn.close()
    for r in mine:
        r["AssignmentStatus"] = "Rejected"
    before = dump(db)
    with pytest.raises(ConfigError, match=r"annotator3's task \d+ was rejected on the platform after its answer "
                                          r"was imported"):
        crowd.import_answers(db, write_csv(tmp / "r.csv", header, mine))
    assert dump(db) == before
    odd = [dict(r) for r in rows if r["annotator"] == "annotator1"][:1]
    odd[0]["position"] = "²"
    with pytest.raises(ConfigError, match=r"annotator1's queue has no position '²'"):
        crowd.import_answers(db, write_csv(tmp / "o.csv", exported["header"], odd))
