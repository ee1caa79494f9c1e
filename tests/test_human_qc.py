"""Quality control of a human study, as crowd studies run it: versions of one question kept apart,
control questions and the exclusion of annotators who fail them, baseline items (the originals),
and the time spent per item."""

import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.human_eval import controls, report, store
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.study import create_study, item_payload
from advrace.human_eval.validate import TamperedStudy, validate_release
from advrace.release import build_release, check_release, read_split
from conftest import race_passage, squad_doc

SPLIT = "charswap"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    """30 RACE questions, each changed by charswap and by addsent: two versions of each."""
    root = tmp_path_factory.mktemp("qc")
    folder = root / "RACE" / "test" / "middle"
    folder.mkdir(parents=True)
    for n in range(10):
        (folder / f"{n}.txt").write_text(json.dumps(race_passage(f"middle{n}.txt", 3)), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "RACE" / "test")},
                                            "splits": [SPLIT, "addsent"], "workers": 1}), root / "rel")
    return root / "rel"


def study_rows(db):
    """(meta, items by id, each annotator's item ids in queue order)."""
    conn = store.connect(db)
    try:
        items = {i["id"]: i for i in store.all_items(conn)}
        queues = {a["name"]: store.queues(conn).get(a["id"], []) for a in store.annotators(conn)}
        return store.meta(conn), items, queues
    finally:
        conn.close()


def answer(db, how, finish=True):
    """Every annotator answers their queue as `how(name, item)` says: "gold", "wrong" (the option
    after the gold), "unanswerable", or None (left unanswered); then presses Finish."""
    conn = store.connect(db)
    try:
        for a in store.annotators(conn):
            for iid in store.queues(conn)[a["id"]]:
                item = store.item(conn, iid)
                label = item["payload"]["label"]
                said = how(a["name"], item)
                if said == "gold":
                    store.save_annotation(conn, a["id"], iid, choice=label)
                elif said == "wrong":
                    store.save_annotation(conn, a["id"], iid, choice=(label + 1) % 4)
                elif said == "unanswerable":
                    store.save_annotation(conn, a["id"], iid, unanswerable=True, reason="multiple correct options")
            if finish:
                store.mark_finished(conn, a["id"])
    finally:
        conn.close()


def records(release_dir, split):
    path = Path(release_dir) / "data" / f"{split}-00000-of-00001.jsonl"
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_two_versions_of_a_question_never_go_to_one_annotator_unless_the_study_asks(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=4,
                 judgements=2, seed=5)
    meta, items, queues = study_rows(tmp_path / "s.db")
    assert meta["versions_apart"] is True
    for name, queue in queues.items():
        sources = [items[iid]["source_id"] for iid in queue]
        assert len(sources) == len(set(sources)), f"{name} has two versions of a question"
    assert set(Counter(iid for q in queues.values() for iid in q).values()) == {2} and len(items) == 60
    # validate recomputes the queues as create made them (kept apart), so a finished study is no tampered one
    answer(tmp_path / "s.db", lambda name, item: "gold")
    validation = validate_release(tmp_path / "s.db", release, tmp_path / "v")
    assert validation["study"]["versions_apart"] is True

    # every annotator judging every item cannot keep the versions apart: said, with what to do
    with pytest.raises(ConfigError, match=r"2 versions .*--annotators 6 or more, or --judgements 1, or "
                                          r"--same-annotator-versions") as err:
        create_study(release, tmp_path / "x.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=3)
    assert "question middle0.txt-0" in str(err.value) and not (tmp_path / "x.db").exists()

    # asked for, it is allowed and recorded: in the study, its report and the validated release
    create_study(release, tmp_path / "same.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=3,
                 same_annotator_versions=True)
    meta, items, queues = study_rows(tmp_path / "same.db")
    assert meta["versions_apart"] is False and all(len(q) == 60 for q in queues.values())
    answer(tmp_path / "same.db", lambda name, item: "gold")
    assert validate_release(tmp_path / "same.db", release, tmp_path / "w")["study"]["versions_apart"] is False
    assert check_release(tmp_path / "w")["validation"]["study"]["versions_apart"] is False
    report.write(tmp_path / "same.db", tmp_path / "r")
    assert "One annotator could judge several versions of one question (--same-annotator-versions)" in \
           (tmp_path / "r" / "report.md").read_text()
    assert json.loads((tmp_path / "r" / "report.json").read_text())["study"]["versions_apart"] is False


def test_a_study_made_before_versions_were_kept_apart_still_validates(release, tmp_path):
    """An earlier advrace wrote no versions_apart and dealt the items round robin: validate's
    recomputation must use the round robin for it, and the new default for a new study."""
    create_study(release, tmp_path / "old.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=4,
                 judgements=2, seed=5, same_annotator_versions=True)
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.execute("DELETE FROM meta WHERE key = 'versions_apart'")
    conn.commit()
    conn.close()
    answer(tmp_path / "old.db", lambda name, item: "gold")
    assert "versions_apart" not in validate_release(tmp_path / "old.db", release, tmp_path / "v")["study"]
    # the same database claiming its versions were kept apart: its queues are not that assignment
    conn = sqlite3.connect(tmp_path / "old.db")
    conn.execute("INSERT INTO meta(key, value) VALUES ('versions_apart', 'true')")
    conn.commit()
    conn.close()
    with pytest.raises(TamperedStudy, match="queue is not the one the study assigned"):
        validate_release(tmp_path / "old.db", release, tmp_path / "w")


def test_controls_are_mixed_at_the_rate_and_never_the_original_of_a_queued_question(release, tmp_path):
    create_study(release, tmp_path / "c.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=6,
                 judgements=2, seed=1, controls_rate=0.2)
    meta, items, queues = study_rows(tmp_path / "c.db")
    assert (meta["controls"], meta["min_accuracy"]) == (0.2, 0.75)
    originals = {ex.id: ex for ex in read_split(release, "original")}
    for name, queue in queues.items():
        kinds = Counter(items[iid]["kind"] for iid in queue)
        # 120 judgements over 6 annotators: about 20 judge items each, and 5 controls make 20% of 25
        assert set(kinds) == {store.JUDGE, store.CONTROL} and 19 <= kinds[store.JUDGE] <= 21, name
        assert kinds[store.CONTROL] == 5 and abs(kinds[store.CONTROL] / len(queue) - 0.2) < 0.01, name
        judged = {items[iid]["source_id"] for iid in queue if items[iid]["kind"] == store.JUDGE}
        mine = [items[iid] for iid in queue if items[iid]["kind"] == store.CONTROL]
        assert not {c["source_id"] for c in mine} & judged, f"{name} has the original of a question they judge"
        for c in mine:  # an original question, shown as one, with its known answer
            assert c["split"] == "original" and c["payload"] == item_payload(originals[c["record_id"]])
        positions = sorted(queue.index(c["id"]) for c in mine)
        assert positions != list(range(len(queue) - 5, len(queue))), f"{name}'s controls all come last"
    assert len({iid for q in queues.values() for iid in q if items[iid]["kind"] == store.CONTROL}) > 5
    # the same inputs give the same study
    create_study(release, tmp_path / "d.db", splits=[SPLIT, "addsent"], all_changed=True, annotators=6,
                 judgements=2, seed=1, controls_rate=0.2)
    assert study_rows(tmp_path / "d.db")[1:] == (items, queues)
    with pytest.raises(ConfigError, match="--controls 1.0: .*below 1"):
        create_study(release, tmp_path / "e.db", splits=[SPLIT], all_changed=True, controls_rate=1.0)
    with pytest.raises(ConfigError, match="--min-accuracy .*give --controls too"):
        create_study(release, tmp_path / "e.db", splits=[SPLIT], all_changed=True, min_accuracy=0.8)
    # everyone judging every question leaves no original that is not a version of a queued question
    with pytest.raises(ConfigError, match=r"--controls 0.1: annotator1 is to get 3 control questions, but only 0 "):
        create_study(release, tmp_path / "e.db", splits=[SPLIT], all_changed=True, annotators=2, controls_rate=0.1)


def test_a_squad_control_in_a_verify_queue_highlights_a_sentence_without_the_gold():
    from advrace.core.examples import Answer, SpanExample

    paragraph = squad_doc()["data"][0]["paragraphs"][0]
    context = paragraph["context"]
    first, second, third = ("The Danube is Europe's second-longest river.",
                            "It flows through ten countries, including Austria and Hungary, before reaching the "
                            "Black Sea.", "Vienna and Budapest were built on its banks.")
    # the sentences that hold none of the question's gold answers, by hand
    free = {"q0": {first, third}, "q1": {first, third}, "q2": {first, second}}
    for qa in paragraph["qas"]:
        gold = qa["answers"][0]
        ex = SpanExample(f"original/{qa['id']}", "Danube", context, qa["question"],
                         (Answer(gold["text"], gold["answer_start"]),))
        drawn = {context[slice(*controls.sentence_without_gold(ex, seed))] for seed in range(20)}
        assert drawn == free[qa["id"]], qa["id"]
        payload = controls.control_payload(item_payload(ex), ex, 3, highlight=True)
        assert payload == {**item_payload(ex), "highlight": controls.sentence_without_gold(ex, 3)}
        assert controls.control_payload(item_payload(ex), ex, 3, highlight=False) == item_payload(ex)
    # shown like a verify item in edit and verify queues; like the judge items in a judge queue
    assert controls.wants_highlight("extractive_qa", {store.EDIT})
    assert not controls.wants_highlight("extractive_qa", {store.JUDGE})
    assert not controls.wants_highlight("multiple_choice", {store.EDIT})


def test_an_annotator_who_fails_the_controls_is_excluded_and_no_longer_decides(release, tmp_path, capsys):
    """annotator1 answers every control wrong and finds every question unanswerable: with two
    judgements per item, their invalid vote ties each item they judged (invalid). Excluded, the
    item takes its verdict from the vote that counts (valid)."""
    def how(name, item):
        if name == "annotator4" and item["kind"] == store.CONTROL:
            return None  # answers no control: flagged, not excluded
        if name == "annotator1":
            return "wrong" if item["kind"] == store.CONTROL else "unanswerable"
        return "gold"

    for db, threshold in (("kept.db", 0.0), ("out.db", None)):
        create_study(release, tmp_path / db, splits=[SPLIT], all_changed=True, annotators=4, judgements=2, seed=2,
                     controls_rate=0.2, min_accuracy=threshold)
        answer(tmp_path / db, how)
    _, items, queues = study_rows(tmp_path / "out.db")
    assert study_rows(tmp_path / "kept.db")[2] == queues  # the threshold changes whose votes count, not the queues
    theirs = sorted(items[iid]["record_id"] for iid in queues["annotator1"] if items[iid]["kind"] == store.JUDGE)
    assert len(theirs) == 15

    kept = validate_release(tmp_path / "kept.db", release, tmp_path / "kept")
    assert kept["splits"][SPLIT]["invalid"] == 15 and kept["controls"]["excluded"] == []
    assert main(["human-eval", "validate", str(tmp_path / "out.db"), str(release), "--out", str(tmp_path / "out")]) == 0
    assert "were excluded from the votes: annotator1 (0% of 4)" in " ".join(capsys.readouterr().out.split())
    out = json.loads((tmp_path / "out" / "manifest.json").read_text())["validation"]
    v = out["splits"][SPLIT]
    assert (v["invalid"], v["valid"], v["unjudged"]) == (0, 30, 0)
    assert out["controls"] == {"rate": 0.2, "min_accuracy": 0.75,
                               "excluded": [{"annotator": "annotator1", "accuracy": 0.0, "controls": 4}],
                               "no_controls_answered": ["annotator4"]}
    assert check_release(tmp_path / "out")["validation"]["controls"] == out["controls"]
    card = (tmp_path / "out" / "README.md").read_text()
    assert "annotators below 0.75 accuracy on them were excluded from the votes: annotator1 (0% of 4)" in card
    assert "Two versions of one question never went to one annotator." in card
    before, after = records(tmp_path / "kept", SPLIT), records(tmp_path / "out", SPLIT)
    for rid in theirs:
        assert not before[rid]["perturbed"] and after[rid]["perturbed"]
        last = json.loads(after[rid]["provenance"])[-1]
        assert last["verdict"] == "valid" and len(last["votes"]) == 1 and last["votes"][0]["annotator"] != "annotator1"
        assert "reason" not in last  # decided by every vote that counts, not early
    # the report says who is out, and counts their judgements nowhere
    result = report.write(tmp_path / "out.db", tmp_path / "r")
    quality = result["quality"]["annotators"]
    assert quality["annotator1"]["excluded"] and quality["annotator1"]["accuracy"] == 0.0
    assert quality["annotator4"]["flagged"] and not quality["annotator4"]["excluded"]
    assert not quality["annotator2"]["excluded"] and quality["annotator2"]["accuracy"] == 1.0
    assert result["splits"][SPLIT]["valid_rate"] == 1.0 and result["splits"][SPLIT]["judgements"] == 45
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| annotator1 | 4 | 0.0% (95% CI" in md and "| excluded |" in md
    assert "| annotator4 | 0 | n/a | counted; flagged: answered no control question |" in md
    # a control whose answer was changed in the database is caught: it would change whom it excludes
    conn = sqlite3.connect(tmp_path / "out.db")
    conn.execute("UPDATE items SET payload = json_set(payload, '$.label', (json_extract(payload, '$.label') + 1) % 4) "
                 "WHERE id = (SELECT MIN(id) FROM items WHERE kind = 'control')")
    conn.commit()
    conn.close()
    with pytest.raises(TamperedStudy, match=r"control item \d+ \(original/.*\): its text differs from the release's"):
        validate_release(tmp_path / "out.db", release, tmp_path / "x")


def test_the_baseline_judges_originals_apart_and_reports_their_valid_rate(release, tmp_path):
    create_study(release, tmp_path / "b.db", splits=[SPLIT], all_changed=True, annotators=4, judgements=2, seed=3,
                 baseline_rate=0.2)
    meta, items, queues = study_rows(tmp_path / "b.db")
    baseline = [i for i in items.values() if i["kind"] == store.BASELINE]
    originals = {ex.id: ex for ex in read_split(release, "original")}
    assert len(baseline) == 6 and meta["baseline"] == 0.2 and meta["min_accuracy"] is None
    for b in baseline:
        assert b["payload"] == item_payload(originals[b["record_id"]])
        judges = [name for name, q in queues.items() if b["id"] in q]
        assert len(judges) == 2
        for name in judges:  # never to an annotator who has its attacked version
            assert b["source_id"] not in {items[iid]["source_id"] for iid in queues[name] if iid != b["id"]}
    # the originals of two baseline questions are judged unanswerable by both their judges; every
    # attacked question valid
    flawed = {b["id"] for b in sorted(baseline, key=lambda b: b["id"])[:2]}
    answer(tmp_path / "b.db", lambda name, item: "unanswerable" if item["id"] in flawed else "gold")
    result = report.write(tmp_path / "b.db", tmp_path / "r")
    base = result["baseline"]
    assert (base["items"], base["judged"], base["valid"]) == (6, 6, 4)
    assert base["valid_rate"] == pytest.approx(4 / 6) and tuple(base["valid_ci"]) == report.wilson(4, 6)
    assert result["splits"][SPLIT]["valid_rate"] == 1.0 and result["splits"][SPLIT]["judgements"] == 60
    low, high = (f"{100 * x:.1f}" for x in report.wilson(4, 6))
    assert f"| baseline: original | 6 | 6 | 12 | 66.7% (95% CI {low}–{high}) |" in \
           (tmp_path / "r" / "report.md").read_text()
    # they never change a release: the attacked questions all stay, the originals as they were
    validation = validate_release(tmp_path / "b.db", release, tmp_path / "v")
    assert validation["splits"][SPLIT]["valid"] == 30
    assert check_release(tmp_path / "v")["splits"]["original"]["sha256"] == \
           check_release(release)["splits"]["original"]["sha256"]
    # too few annotators without a version of the question: said, with what to do
    with pytest.raises(ConfigError, match=r"--baseline: the original of question .* only 0 of 2 annotators .*"
                                          r"leave out --baseline"):
        create_study(release, tmp_path / "x.db", splits=[SPLIT], all_changed=True, annotators=2, baseline_rate=0.1)


def test_the_report_times_each_item_from_its_first_view(release, tmp_path):
    import threading
    import urllib.request

    out = create_study(release, tmp_path / "t.db", splits=[SPLIT], all_changed=True, annotators=4, judgements=2,
                       seed=4, controls_rate=0.2)
    server = HumanEvalServer(("127.0.0.1", 0), tmp_path / "t.db")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    token = out["annotators"]["annotator1"]
    try:
        for _ in range(2):  # shown twice: the first time counts
            with urllib.request.urlopen(f"http://127.0.0.1:{server.server_port}/a/{token}/item/0", timeout=30) as r:
                assert r.status == 200
    finally:
        server.shutdown()
        server.server_close()
    conn = store.connect(tmp_path / "t.db")
    first = store.views(conn)
    assert [(v["annotator"], v["item_id"]) for v in first] == [("annotator1", store.queues(conn)[1][0])]
    # known times: annotator1's judge items 10, 30 and 60 s, a control 8 s; annotator2's 5 and 7 s; an
    # item answered without a view (a platform's file) and one saved before it was shown are not timed
    q1, q2 = store.queues(conn)[1], store.queues(conn)[2]
    kinds = {i["id"]: i["kind"] for i in store.all_items(conn)}
    j1 = [iid for iid in q1 if kinds[iid] == store.JUDGE]
    c1 = next(iid for iid in q1 if kinds[iid] == store.CONTROL)
    j2 = [iid for iid in q2 if kinds[iid] == store.JUDGE]
    plan = [(1, j1[0], 10), (1, j1[1], 30), (1, j1[2], 60), (1, c1, 8), (2, j2[0], 5), (2, j2[1], 7),
            (2, j2[2], None), (2, j2[3], -3)]
    conn.execute("DELETE FROM views")
    for pid, iid, seconds in plan:
        store.save_annotation(conn, pid, iid, choice=0)
        if seconds is not None:
            conn.execute("INSERT INTO views(person_id, item_id, first_shown) VALUES (?, ?, ?)", (pid, iid, 1000.0))
            conn.execute("UPDATE annotations SET created = ? WHERE person_id = ? AND item_id = ?",
                         (1000.0 + seconds, pid, iid))
    conn.close()
    times = report.write(tmp_path / "t.db", tmp_path / "r")["time_per_item"]
    assert times[store.JUDGE]["annotators"] == {"annotator1": {"items": 3, "median_seconds": 30.0},
                                                 "annotator2": {"items": 2, "median_seconds": 6.0}}
    assert times[store.JUDGE]["all"] == {"items": 5, "median_seconds": 10.0}
    assert times[store.CONTROL]["annotators"] == {"annotator1": {"items": 1, "median_seconds": 8.0}}
    md = (tmp_path / "r" / "report.md").read_text()
    assert "| judge | annotator1 | 3 | 30.0 |" in md and "| judge | all | 5 | 10.0 |" in md


def test_create_takes_the_quality_flags_and_records_them(release, tmp_path, capsys):
    db = tmp_path / "s.db"
    assert main(["human-eval", "create", str(release), "--db", str(db), "--splits", f"{SPLIT},addsent",
                 "--all-changed", "--annotators", "6", "--judgements", "2", "--controls", "0.1",
                 "--baseline", "0.1", "--min-accuracy", "0.8"]) == 0
    printed = capsys.readouterr().out
    assert "control questions into the queues (about 10% of each)" in printed and "below 0.8 accuracy" in printed
    assert "originals of 3 studied questions" in printed
    meta = store.meta(store.connect(db))
    assert (meta["controls"], meta["baseline"], meta["min_accuracy"], meta["versions_apart"]) == (0.1, 0.1, 0.8, True)
    assert main(["human-eval", "create", str(release), "--db", str(tmp_path / "t.db"), "--splits", SPLIT,
                 "--all-changed", "--min-accuracy", "0.8"]) == 2
    assert "give --controls too" in capsys.readouterr().err
    assert main(["human-eval", "create", str(release), "--db", str(tmp_path / "u.db"), "--splits", f"{SPLIT},addsent",
                 "--all-changed", "--same-annotator-versions"]) == 0
    assert "--same-annotator-versions; recorded" in capsys.readouterr().out
    assert store.meta(store.connect(tmp_path / "u.db"))["versions_apart"] is False
