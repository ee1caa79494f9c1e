"""Human validation as a release's gate: a study of every changed question (`human-eval create
--all-changed`) becomes a validated release (`human-eval validate`), which `advrace verify --study`
checks against the study."""

import hashlib
import json
import sqlite3
from collections import Counter
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.provenance import Validated, Vote
from advrace.human_eval import store
from advrace.human_eval.study import create_study
from advrace.human_eval.validate import INVALID_REASON, TamperedStudy, validate_release
from advrace.release.build import WITH_SOURCE
from advrace.release import FORMAT_VERSION, build_release, check_release, perturbed_flags, read_split
from conftest import make_race_dir, squad_doc

SPLIT = "charswap"


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("hv")
    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "splits": ["charswap", "addsent"],
                                    "workers": 1})
    build_release(cfg, root / "rel")
    return root / "rel"


def records(release_dir, split):
    path = release_dir / "data" / f"{split}-00000-of-00001.jsonl"
    return {r["id"]: r for r in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def judge(db, invalid_by: dict[str, set[str]], finish=("annotator1", "annotator2", "annotator3"), wrong_by=None):
    """Every annotator answers their queue: the right option, 'unanswerable' where `invalid_by`
    names them for the item's record id, or the option after the gold (a distractor) where
    `wrong_by` does; those in `finish` press Finish."""
    conn = store.connect(db)
    try:
        for a in store.annotators(conn):
            for row in store.queue(conn, a["id"]):
                item = store.item(conn, row["item_id"])
                label = item["payload"]["label"]
                if a["name"] in invalid_by.get(item["record_id"], ()):
                    store.save_annotation(conn, a["id"], item["id"], unanswerable=True,
                                          reason="multiple correct options")
                elif a["name"] in (wrong_by or {}).get(item["record_id"], ()):
                    store.save_annotation(conn, a["id"], item["id"], choice=(label + 1) % len(item["payload"]["options"]))
                else:
                    store.save_annotation(conn, a["id"], item["id"], choice=label)
            if a["name"] in finish:
                store.mark_finished(conn, a["id"])
    finally:
        conn.close()


def ids(release_dir, split=SPLIT):
    return sorted(records(release_dir, split))


def test_all_changed_takes_every_changed_item_and_records_the_release(release, tmp_path):
    out = create_study(release, tmp_path / "s.db", splits=["original", SPLIT], all_changed=True, annotators=3)
    changed = [rid for rid, flag in perturbed_flags(release, SPLIT).items() if flag]
    conn = store.connect(tmp_path / "s.db")
    meta = store.meta(conn)
    assert sorted(i["record_id"] for i in store.all_items(conn)) == sorted(changed) and out["items"] == len(changed)
    assert meta["manifest_sha256"] == hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()
    assert meta["all_changed"] and meta["judgements"] == 3
    queues = store.queues(conn)
    assert all(sorted(q) == sorted(i["id"] for i in store.all_items(conn)) for q in queues.values())
    with pytest.raises(ConfigError, match="no changed items"):
        create_study(release, tmp_path / "o.db", splits=["original"], all_changed=True)


def test_fewer_judgements_than_annotators_spread_evenly_and_never_twice(release, tmp_path):
    for name in ("a.db", "b.db"):
        create_study(release, tmp_path / name, splits=[SPLIT, "addsent"], all_changed=True, annotators=4,
                     judgements=2, seed=7)
    conn = sqlite3.connect(tmp_path / "a.db")
    rows = conn.execute("SELECT person_id, item_id FROM queue ORDER BY person_id, position").fetchall()
    assert rows == sqlite3.connect(tmp_path / "b.db").execute(
        "SELECT person_id, item_id FROM queue ORDER BY person_id, position").fetchall()
    per_item = Counter(item for _, item in rows)
    assert set(per_item.values()) == {2} and len(per_item) == 14
    assert len(set(rows)) == len(rows)  # nobody sees an item twice
    load = Counter(person for person, _ in rows)
    assert max(load.values()) - min(load.values()) <= 1
    with pytest.raises(ConfigError, match="--judgements 5"):
        create_study(release, tmp_path / "c.db", all_changed=True, annotators=4, judgements=5)


def test_majority_keeps_valid_items_with_votes_and_puts_invalid_ones_back(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=3)
    items = ids(release)
    judge(tmp_path / "s.db", {items[0]: {"annotator1"}, items[1]: {"annotator1", "annotator3"},
                              items[2]: {"annotator1", "annotator2", "annotator3"}})
    validation = validate_release(tmp_path / "s.db", release, tmp_path / "v")
    assert check_release(tmp_path / "v")
    out, source, original = records(tmp_path / "v", SPLIT), records(release, SPLIT), records(release, "original")
    # 2 of 3 valid: kept as attacked, the votes in provenance
    kept = out[items[0]]
    assert kept["perturbed"] and kept["question"] == source[items[0]]["question"]
    last = json.loads(kept["provenance"])[-1]
    assert last == {"type": "validated", "verdict": "valid", "votes": [
        {"annotator": "annotator1", "valid": False, "reason": "multiple correct options"},
        {"annotator": "annotator2", "valid": True}, {"annotator": "annotator3", "valid": True}]}
    # 1 of 3 and 0 of 3 valid: back as in `original`, unperturbed, with the reason
    for rid in items[1:3]:
        back, orig = out[rid], original["original/" + rid.split("/", 1)[1]]
        assert not back["perturbed"] and back["attack"] == SPLIT and back["id"] == rid
        assert {k: back[k] for k in ("passage", "question", "options", "label")} == \
               {k: orig[k] for k in ("passage", "question", "options", "label")}
        assert back["passage"] != source[rid]["passage"]
        assert json.loads(back["provenance"])[-1]["reason"] == INVALID_REASON
    example = next(ex for ex in read_split(tmp_path / "v", SPLIT) if ex.id == items[1])
    assert example.provenance[-1] == Validated("invalid", (
        Vote("annotator1", False, "multiple correct options"), Vote("annotator2", True),
        Vote("annotator3", False, "multiple correct options")), INVALID_REASON)
    v = validation["splits"][SPLIT]
    assert (v["judged"], v["valid"], v["invalid"], v["unjudged"]) == (7, 5, 2, 0)
    manifest = check_release(tmp_path / "v")
    assert manifest["splits"][SPLIT]["perturbed"] == 5 and manifest["splits"][SPLIT]["count"] == 7
    stats = json.loads((tmp_path / "v" / "stats.json").read_text())
    assert stats["splits"][SPLIT]["unperturbed_reasons"] == {INVALID_REASON: 2}
    # the splits nobody studied are byte for byte the source's
    for split in ("original", "addsent"):
        assert manifest["splits"][split]["sha256"] == check_release(release)["splits"][split]["sha256"]
    assert "addsent" not in manifest["validation"]["splits"]


def test_the_manifest_and_card_record_the_study(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=3)
    items = ids(release)
    judge(tmp_path / "s.db", {items[0]: {"annotator1"}, items[3]: {"annotator2", "annotator3"}})
    validate_release(tmp_path / "s.db", release, tmp_path / "v")
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    conn = store.connect(tmp_path / "s.db")
    study = manifest["validation"]["study"]
    assert study["annotations_sha256"] == store.annotations_sha256(conn)
    assert (study["annotators"], study["judgements"], study["partial"]) == (3, 3, False)
    assert manifest["validation"]["source_release"] == {
        "name": "advrace-release", "manifest_sha256": hashlib.sha256((release / "manifest.json").read_bytes()).hexdigest()}
    v = manifest["validation"]["splits"][SPLIT]
    assert v["valid_rate"] == pytest.approx(6 / 7, abs=1e-4)
    # 7 items, 3 raters: 18 valid and 3 invalid judgements, 1 and 2 invalid on two items
    p_j = (18 / 21) ** 2 + (3 / 21) ** 2
    p_bar = (5 * 1 + 1 / 3 + 1 / 3) / 7
    assert v["fleiss_kappa"] == pytest.approx((p_bar - p_j) / (1 - p_j), abs=1e-3)
    assert v["valid_ci"][0] < 6 / 7 < v["valid_ci"][1]
    assert (v["judgements"], v["correct"]) == (21, 18) and v["correct_rate"] == pytest.approx(18 / 21, abs=1e-4)
    card = (tmp_path / "v" / "README.md").read_text()
    low, high = (f"{100 * x:.1f}" for x in v["valid_ci"])
    c_low, c_high = (f"{100 * x:.1f}" for x in v["correct_ci"])
    assert f"`{SPLIT}`: validated by people: 7 items judged, 85.7% valid (95% CI {low}–{high}), 85.7% of 21 " \
           f"judgements chose the gold (95% CI {c_low}–{c_high}), kappa {v['fleiss_kappa']:.2f}; 1 judged invalid" in card
    assert "a valid vote only when the annotator chose the gold" in card
    assert manifest["validation"]["source_release"]["manifest_sha256"][:16] in card
    assert manifest["validation"]["study"]["items_sha256"] == store.items_sha256(store.all_items(conn))


def test_a_tie_is_invalid(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=2)
    items = ids(release)
    judge(tmp_path / "s.db", {items[0]: {"annotator1"}}, finish=("annotator1", "annotator2"))
    validate_release(tmp_path / "s.db", release, tmp_path / "v")
    out = records(tmp_path / "v", SPLIT)
    assert not out[items[0]]["perturbed"] and all(out[rid]["perturbed"] for rid in items[1:])


def test_drop_removes_invalid_items_and_same_inputs_give_the_same_bytes(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=3, judgements=1)
    items = ids(release)
    judge(tmp_path / "s.db", {rid: {"annotator1", "annotator2", "annotator3"} for rid in items[:2]})
    validate_release(tmp_path / "s.db", release, tmp_path / "d1", drop=True)
    validate_release(tmp_path / "s.db", release, tmp_path / "d2", drop=True)
    assert sorted(records(tmp_path / "d1", SPLIT)) == items[2:]
    manifest = check_release(tmp_path / "d1")
    assert manifest["splits"][SPLIT]["count"] == 5 and manifest["validation"]["invalid"] == "dropped"
    assert manifest["validation"]["splits"][SPLIT]["fleiss_kappa"] is None  # one judgement per item
    for path in sorted(p for p in (tmp_path / "d1").rglob("*") if p.is_file()):
        assert path.read_bytes() == (tmp_path / "d2" / path.relative_to(tmp_path / "d1")).read_bytes(), path
    card = (tmp_path / "d1" / "README.md").read_text()
    assert "dropped from the split" in card and "except those people judged invalid" in card


def test_an_unfinished_study_is_refused_unless_partial(release, tmp_path):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=3, judgements=2, seed=3)
    conn = store.connect(tmp_path / "s.db")
    third = next(a["id"] for a in store.annotators(conn) if a["name"] == "annotator3")
    waiting = [store.item(conn, iid)["record_id"] for iid in store.queues(conn)[third]]
    # the first of annotator3's items has, from the annotator who finished, an invalid vote: with 2
    # judgements that already decides it (at best a tie), so --partial gives it its verdict
    early, unjudged = waiting[0], set(waiting[1:])
    judge(tmp_path / "s.db", {early: {"annotator1", "annotator2", "annotator3"}}, finish=("annotator1", "annotator2"))
    with pytest.raises(ConfigError, match=r"s\.db: unfinished study: \d+ of 7 items .*annotator3 .*--partial") as err:
        validate_release(tmp_path / "s.db", release, tmp_path / "v")
    assert not (tmp_path / "v").exists()
    assert f"{len(waiting)} of 7 items" in str(err.value)
    validation = validate_release(tmp_path / "s.db", release, tmp_path / "v", partial=True)
    v = validation["splits"][SPLIT]
    assert validation["study"]["partial"] and v["unjudged"] == len(unjudged)
    assert (v["judged"], v["invalid"]) == (7 - len(unjudged), 1)
    source, out = records(release, SPLIT), records(tmp_path / "v", SPLIT)
    for rid in unjudged:
        assert out[rid]["perturbed"] and out[rid]["question"] == source[rid]["question"]
        last = json.loads(out[rid]["provenance"])[-1]
        assert last["verdict"] == "unvalidated" and len(last["votes"]) == 1
    decided = json.loads(out[early]["provenance"])[-1]
    assert not out[early]["perturbed"] and decided["verdict"] == "invalid" and len(decided["votes"]) == 1
    assert "not yet judged" in (tmp_path / "v" / "README.md").read_text()


def test_a_verdict_is_given_as_soon_as_the_votes_so_far_decide_it():
    from advrace.human_eval.votes import verdict

    yes, no = Vote("a", True), Vote("b", False, "chose option B")
    assert verdict((yes, yes), 3) == "valid" and verdict((no, no), 3) == "invalid"
    assert verdict((yes, no), 3) is None and verdict((yes,), 3) is None and verdict((), 3) is None
    assert verdict((no,), 2) == "invalid" and verdict((yes,), 2) is None  # a tie is invalid, so one invalid vote decides
    assert verdict((yes, yes), 4) is None and verdict((no, no), 4) == "invalid"
    assert verdict((yes, yes, no), 3) == "valid" and verdict((yes, no, no), 3) == "invalid"


def test_a_study_of_another_release_or_a_sample_is_refused(release, tmp_path):
    other = tmp_path / "other"
    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "seed": 1,
                                            "splits": ["charswap"], "workers": 1}), other)
    create_study(other, tmp_path / "o.db", splits=[SPLIT], all_changed=True, annotators=1)
    judge(tmp_path / "o.db", {}, finish=("annotator1",))
    with pytest.raises(ConfigError, match=r"o\.db: the study was made from the release .*validate it against"):
        validate_release(tmp_path / "o.db", release, tmp_path / "v")
    create_study(release, tmp_path / "p.db", per_split=2, annotators=1)
    with pytest.raises(ConfigError, match=r"p\.db: a sampled study .*--all-changed"):
        validate_release(tmp_path / "p.db", release, tmp_path / "v")
    (tmp_path / "n.db").write_text("not a database")
    with pytest.raises(ConfigError, match=r"n\.db: not a study database"):
        validate_release(tmp_path / "n.db", release, tmp_path / "v")


@pytest.mark.parametrize("edit, problem", [
    ("UPDATE items SET payload = replace(payload, 'Tom', 'Tim') WHERE id = 1", "text differs from the release"),
    ("DELETE FROM items WHERE id = 7", "is missing"),
    ("UPDATE annotations SET unanswerable = 1, reason = 'no correct option', choice = NULL WHERE id = 2",
     "answers changed after they pressed Finish"),
    ("UPDATE queue SET item_id = item_id + 100 WHERE person_id = 2 AND position = 0", "queue is not the one the study assigned"),
    ("UPDATE people SET finished = 1 WHERE name = 'annotator2'", "app did not record their answers"),
])
def test_a_tampered_database_is_refused(release, tmp_path, edit, problem):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=2)
    judge(tmp_path / "s.db", {}, finish=("annotator1",))
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("PRAGMA foreign_keys=OFF")
    conn.execute(edit)
    conn.commit()
    conn.close()
    with pytest.raises(TamperedStudy, match=problem) as err:
        validate_release(tmp_path / "s.db", release, tmp_path / "v", partial=True)
    assert str(tmp_path / "s.db") in str(err.value) and err.value.exit_code != 0


def test_verify_checks_the_study_link(release, tmp_path, capsys):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=2)
    judge(tmp_path / "s.db", {ids(release)[0]: {"annotator2"}}, finish=("annotator1", "annotator2"))
    assert main(["human-eval", "validate", str(tmp_path / "s.db"), str(release), "--out", str(tmp_path / "v")]) == 0
    assert "advrace verify" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0
    out = capsys.readouterr().out
    assert "validated by people from the release 'advrace-release'" in out and "is the one it was validated from" in out
    # another study of the same release: other annotations
    create_study(release, tmp_path / "t.db", splits=[SPLIT], all_changed=True, annotators=2)
    judge(tmp_path / "t.db", {}, finish=("annotator1", "annotator2"))
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "t.db")]) == 1
    assert "t.db: its annotations" in capsys.readouterr().err
    # a study of another release
    assert main(["verify", str(release), "--study", str(tmp_path / "s.db")]) == 2
    assert "not a validated release" in capsys.readouterr().err
    # a manifest that no longer names its source release
    manifest = json.loads((tmp_path / "v" / "manifest.json").read_text())
    del manifest["validation"]["source_release"]["name"]
    (tmp_path / "v" / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify", str(tmp_path / "v")]) == 1
    assert "validation.source_release.name" in capsys.readouterr().err


def test_create_takes_a_sample_or_every_changed_item_not_both(release, tmp_path, capsys):
    assert main(["human-eval", "create", str(release), "--db", str(tmp_path / "s.db"), "--all-changed",
                 "--per-split", "3"]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert main(["human-eval", "create", str(release), "--db", str(tmp_path / "s.db"), "--all-changed",
                 "--splits", SPLIT, "--annotators", "3", "--judgements", "2"]) == 0
    assert "created" in capsys.readouterr().out and store.meta(store.connect(tmp_path / "s.db"))["judgements"] == 2
    assert main(["human-eval", "validate", str(tmp_path / "s.db"), str(release), "--out", str(tmp_path / "v")]) == 2
    assert "unfinished study" in capsys.readouterr().err
    assert main(["human-eval", "validate", str(tmp_path / "s.db"), str(release), "--out", str(tmp_path / "v"),
                 "--partial"]) == 0
    assert f"{SPLIT}: 7 items not yet judged, left as they were and marked unvalidated" in capsys.readouterr().out
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0


def test_a_squad_release_validates_and_its_squad_json_follows(squad_file, tmp_path):
    build_release(release_config_from_dict({"data": {"path": str(squad_file)}, "splits": ["charswap"],
                                            "workers": 1}), tmp_path / "rel")
    create_study(tmp_path / "rel", tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=1)
    items = ids(tmp_path / "rel")
    conn = store.connect(tmp_path / "s.db")
    person = store.annotators(conn)[0]["id"]
    for row in store.queue(conn, person):
        item = store.item(conn, row["item_id"])
        if item["record_id"] == items[0]:
            store.save_annotation(conn, person, item["id"], unanswerable=True, reason="no correct option")
        else:
            answer = item["payload"]["answers"][0]
            store.save_annotation(conn, person, item["id"], answer_text=answer["text"], answer_start=answer["answer_start"])
    store.mark_finished(conn, person)
    conn.close()
    validate_release(tmp_path / "s.db", tmp_path / "rel", tmp_path / "v")
    check_release(tmp_path / "v")
    squad = json.loads((tmp_path / "v" / "squad" / f"{SPLIT}.json").read_text())
    questions = {qa["id"]: qa["question"] for doc in squad["data"] for p in doc["paragraphs"] for qa in p["qas"]}
    original = records(tmp_path / "rel", "original")
    assert questions[items[0]] == original["original/" + items[0].split("/", 1)[1]]["question"]
    assert questions[items[1]] == records(tmp_path / "rel", SPLIT)[items[1]]["question"]


def test_a_format_1_release_is_validated_into_the_current_format(tmp_path):
    """A release written by advrace 0.1.0 (tests/previous_release): every split is written again in
    the current format, and the one studied carries the verdicts."""
    previous = Path(__file__).parent / "previous_release" / "addsent-0.1.0-d7b608c"
    create_study(previous, tmp_path / "s.db", splits=["addsent"], all_changed=True, annotators=1)
    first = ids(previous, "addsent")[0]
    judge(tmp_path / "s.db", {first: {"annotator1"}}, finish=("annotator1",))
    validate_release(tmp_path / "s.db", previous, tmp_path / "v")
    manifest = check_release(tmp_path / "v")
    assert manifest["format_version"] == FORMAT_VERSION and manifest["splits"]["addsent"]["perturbed"] == 76
    assert [ex.id for ex in read_split(tmp_path / "v", "original")] == [ex.id for ex in read_split(previous, "original")]
    assert read_split(tmp_path / "v", "addsent")[1].provenance[:-1] == read_split(previous, "addsent")[1].provenance


def test_an_annotator_who_chooses_a_distractor_votes_invalid(release, tmp_path):
    """The issue's case: one annotator chose a wrong option on every changed item. Choosing a
    distractor is the failure validation exists to catch, never a valid vote."""
    create_study(release, tmp_path / "one.db", splits=[SPLIT], all_changed=True, annotators=1)
    items = ids(release)
    judge(tmp_path / "one.db", {}, finish=("annotator1",), wrong_by={rid: {"annotator1"} for rid in items})
    v = validate_release(tmp_path / "one.db", release, tmp_path / "v1")["splits"][SPLIT]
    assert (v["valid"], v["invalid"], v["valid_rate"], v["correct_rate"]) == (0, 7, 0.0, 0.0)
    source = records(release, SPLIT)
    for rid, row in records(tmp_path / "v1", SPLIT).items():
        assert not row["perturbed"]
        wrong = "ABCD"[(source[rid]["label"] + 1) % 4]
        assert json.loads(row["provenance"])[-1]["votes"] == [
            {"annotator": "annotator1", "valid": False, "reason": f"chose option {wrong}"}]
    # three annotators: two choosing a distractor outvote the gold; one alone does not
    create_study(release, tmp_path / "three.db", splits=[SPLIT], all_changed=True, annotators=3)
    judge(tmp_path / "three.db", {}, wrong_by={items[0]: {"annotator1", "annotator3"}, items[1]: {"annotator2"}})
    v = validate_release(tmp_path / "three.db", release, tmp_path / "v3")["splits"][SPLIT]
    assert (v["valid"], v["invalid"], v["correct"], v["judgements"]) == (6, 1, 18, 21)
    out = records(tmp_path / "v3", SPLIT)
    assert not out[items[0]]["perturbed"] and out[items[1]]["perturbed"]
    assert [vote["valid"] for vote in json.loads(out[items[1]]["provenance"])[-1]["votes"]] == [True, False, True]


def test_report_and_validate_give_one_valid_rate_and_one_kappa(release, tmp_path):
    from advrace.human_eval import report

    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=3)
    items = ids(release)
    # votes per item (valid ones): 3, 2, 1, 2, 3, 3, 0: 5 valid items of 7, 14 of 21 judgements chose the gold
    judge(tmp_path / "s.db", {items[1]: {"annotator1"}, items[6]: {"annotator1", "annotator2"}},
          wrong_by={items[2]: {"annotator2", "annotator3"}, items[3]: {"annotator3"}, items[6]: {"annotator3"}})
    v = validate_release(tmp_path / "s.db", release, tmp_path / "v")["splits"][SPLIT]
    r = report.write(tmp_path / "s.db", tmp_path / "report")["splits"][SPLIT]
    assert (v["valid"], v["judged"], v["correct"], v["judgements"]) == (5, 7, 14, 21)
    for key in ("valid_rate", "correct_rate", "fleiss_kappa"):
        assert r[key] == pytest.approx(v[key], abs=1e-4), key
    assert r["valid_rate"] == pytest.approx(5 / 7) and r["correct_rate"] == pytest.approx(14 / 21)
    md = (tmp_path / "report" / "report.md").read_text()
    assert "71.4% (95% CI" in md and f"{r['fleiss_kappa']:.2f} |" in md and "chose the gold" in md


def test_a_span_vote_is_valid_only_when_it_selects_a_gold_answer():
    from advrace.human_eval.votes import SPAN_F1, vote

    context = "The Denver Broncos won. The Chicago Broncos lost in 1990."
    payload = {"context": context, "question": "Who won?",
               "answers": [{"text": "Denver Broncos", "answer_start": 4}]}

    def span(text, start):
        return {"annotator": "a", "task": "extractive_qa", "payload": payload, "unanswerable": 0, "reason": None,
                "choice": None, "answer_text": text, "answer_start": start}

    assert vote(span("Denver Broncos", 4)).valid
    assert vote(span("The Denver Broncos", 0)).valid  # the official normalisation drops articles
    assert vote(span("Denver Broncos won", 4)).valid  # overlaps the gold, F1 0.8 >= SPAN_F1
    fake = context.index("Chicago")
    # F1 0.5 with the gold, but elsewhere in the paragraph: another answer, named as the added sentence's
    assert SPAN_F1 <= 0.5 and not vote(span("Chicago Broncos", fake)).valid
    assert vote(span("Chicago Broncos", fake), [(24, len(context))]).reason == \
        "selected the added sentence's answer “Chicago Broncos”"
    assert vote(span("Broncos won", 11)).valid is True  # overlaps, F1 0.8
    assert vote(span("won", 19)).reason == "selected “won”, not a gold answer"


def test_selecting_the_added_sentences_fake_answer_puts_the_question_back(tmp_path):
    """SQuAD: the annotator who selects the fake answer of the added sentence casts an invalid vote."""
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "seed": 3, "splits": ["addonesent"],
                                            "workers": 1}), tmp_path / "rel")
    changed = [ex for ex in read_split(tmp_path / "rel", "addonesent") if not ex.provenance[-1].unchanged]
    fooled = changed[0]
    sentence = fooled.provenance[-1].sentences[0]
    create_study(tmp_path / "rel", tmp_path / "s.db", splits=["addonesent"], all_changed=True, annotators=1)
    conn = store.connect(tmp_path / "s.db")
    person = store.annotators(conn)[0]["id"]
    for row in store.queue(conn, person):
        item = store.item(conn, row["item_id"])
        if item["record_id"] == fooled.id:
            at = fooled.context.index(sentence.sentence) + sentence.sentence.index(sentence.answer)
            store.save_annotation(conn, person, item["id"], answer_text=sentence.answer, answer_start=at)
        else:
            gold = item["payload"]["answers"][0]
            store.save_annotation(conn, person, item["id"], answer_text=gold["text"], answer_start=gold["answer_start"])
    store.mark_finished(conn, person)
    conn.close()
    v = validate_release(tmp_path / "s.db", tmp_path / "rel", tmp_path / "v")["splits"]["addonesent"]
    assert (v["invalid"], v["valid"]) == (1, len(changed) - 1)
    back = next(ex for ex in read_split(tmp_path / "v", "addonesent") if ex.id == fooled.id)
    original = next(ex for ex in read_split(tmp_path / "rel", "original") if ex.source_id == fooled.source_id)
    assert back.context == original.context
    assert back.provenance[-1].votes == (Vote("annotator1", False, f"selected the added sentence's answer "
                                                                  f"“{sentence.answer}”"),)


def test_verify_study_runs_the_tamper_checks_again(release, tmp_path, capsys):
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=2)
    judge(tmp_path / "s.db", {}, finish=("annotator1", "annotator2"))
    validate_release(tmp_path / "s.db", release, tmp_path / "v")
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0
    assert "its tamper checks pass" in capsys.readouterr().out
    for edit, problem in [
        # the annotations (and so their sha256) are untouched: only the re-run checks see these
        ("UPDATE queue SET item_id = (SELECT item_id FROM queue WHERE person_id = 2 AND position = 1) "
         "WHERE person_id = 2 AND position = 0", "queue is not the one the study assigned"),
        ("UPDATE items SET payload = replace(payload, 'Tom', 'Tim')", "its items (sha256"),
    ]:
        copy = tmp_path / "copy.db"
        copy.write_bytes((tmp_path / "s.db").read_bytes())
        conn = sqlite3.connect(copy)
        conn.execute("PRAGMA foreign_keys=OFF")
        conn.execute(edit)
        conn.commit()
        conn.close()
        assert main(["verify", str(tmp_path / "v"), "--study", str(copy)]) == 1
        assert problem in capsys.readouterr().err
        copy.unlink()


def test_a_validated_release_is_audited_again(release, tmp_path):
    """After --drop the audit counts the split as written, not the source release's split."""
    create_study(release, tmp_path / "s.db", splits=[SPLIT], all_changed=True, annotators=1)
    items = ids(release)
    judge(tmp_path / "s.db", {rid: {"annotator1"} for rid in items[:2]}, finish=("annotator1",))
    validate_release(tmp_path / "s.db", release, tmp_path / "v", drop=True)
    audit = json.loads((tmp_path / "v" / "stats.json").read_text())["audit"]
    assert audit[SPLIT]["checked"] == 5 and audit["addsent"]["checked"] == 7
    assert f"| {SPLIT} | 5 | 0 |" in (tmp_path / "v" / "README.md").read_text()


DERIVED = "addsent_on_charswap"


@pytest.fixture(scope="module")
def derived_release(tmp_path_factory):
    """A release with a split built from charswap."""
    root = tmp_path_factory.mktemp("derived")
    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "workers": 1, "splits": [
        "charswap", {"attack": "addsent", "name": DERIVED, "from": "charswap"}]}), root / "rel")
    return root / "rel"


def attacked_in_both(release_dir) -> list[str]:
    """Source ids that charswap and the split built from it both changed."""
    cs, on_cs = records(release_dir, "charswap"), records(release_dir, DERIVED)
    return [rid.split("/", 1)[1] for rid in sorted(cs) if cs[rid]["perturbed"]
            and on_cs.get(f"{DERIVED}/{rid.split('/', 1)[1]}", {}).get("perturbed")]


def test_splits_built_from_a_studied_split_are_studied_with_it_and_follow_it(derived_release, tmp_path):
    """An invalid question goes back to its split's source (here the validated charswap, not
    original), and the split built from a split whose question went back goes back with it."""
    derived = DERIVED
    rel = derived_release
    with pytest.raises(ConfigError, match=f"{derived} \\(from charswap\\).*--splits charswap,{derived}"):
        create_study(rel, tmp_path / "x.db", splits=["charswap"], all_changed=True)
    # one annotator judges both versions of a question (the flag allows it): who voted what stays simple
    create_study(rel, tmp_path / "s.db", splits=["charswap", derived], all_changed=True, annotators=1,
                 same_annotator_versions=True)
    x, y = attacked_in_both(rel)[:2]
    # charswap's x is invalid; the derived split's y is invalid, its x valid
    judge(tmp_path / "s.db", {f"charswap/{x}": {"annotator1"}, f"{derived}/{y}": {"annotator1"}}, finish=("annotator1",))
    v = validate_release(tmp_path / "s.db", rel, tmp_path / "v")["splits"]
    assert (v["charswap"]["invalid"], v[derived]["invalid"], v[derived]["with_source"]) == (1, 1, 1)
    original, charswap = records(rel, "original"), records(rel, "charswap")
    out = records(tmp_path / "v", derived)
    # y: back as charswap's y (its source split's), not as original's
    assert not out[f"{derived}/{y}"]["perturbed"]
    assert out[f"{derived}/{y}"]["passage"] == charswap[f"charswap/{y}"]["passage"] != original[f"original/{y}"]["passage"]
    # x: people found it valid, but it was made from charswap's x, which went back: back with it
    assert not out[f"{derived}/{x}"]["perturbed"]
    assert out[f"{derived}/{x}"]["passage"] == original[f"original/{x}"]["passage"]
    stats = json.loads((tmp_path / "v" / "stats.json").read_text())
    assert stats["splits"][derived]["unperturbed_reasons"][WITH_SOURCE] == 1
    # re-audited: nothing flagged but AddSent's glued questions, which the grammar check flags (issue 46)
    assert set(stats["audit"][derived]["by_check"]) <= {"ungrammatical sentence"} and stats["audit"][derived]["checked"] == 7


def test_a_derived_release_takes_the_splits_built_from_a_changed_split_with_it(derived_release, tmp_path):
    """derive_release alone: a question put back (or dropped) in charswap is put back (or dropped)
    in the split built from it, though no decision names that split."""
    from advrace.release.build import Decision, derive_release

    x = attacked_in_both(derived_release)[0]
    decisions = {"charswap": {f"charswap/{x}": Decision(Validated("invalid"), keep=False, reason="refused")}}
    derive_release(derived_release, tmp_path / "back", decisions, {})
    out, original = records(tmp_path / "back", DERIVED), records(derived_release, "original")
    assert records(derived_release, DERIVED)[f"{DERIVED}/{x}"]["perturbed"]
    assert not out[f"{DERIVED}/{x}"]["perturbed"]
    assert out[f"{DERIVED}/{x}"]["passage"] == original[f"original/{x}"]["passage"]
    stats = json.loads((tmp_path / "back" / "stats.json").read_text())["splits"]
    before = json.loads((derived_release / "stats.json").read_text())["splits"]
    for split, reason in ((DERIVED, WITH_SOURCE), ("charswap", "refused")):
        assert Counter(stats[split]["unperturbed_reasons"]) - Counter(before[split]["unperturbed_reasons"]) == {reason: 1}
    derive_release(derived_release, tmp_path / "drop", decisions, {}, drop=True)
    kept = records(tmp_path / "drop", DERIVED)
    assert f"{DERIVED}/{x}" not in kept and len(kept) == len(records(derived_release, DERIVED)) - 1
