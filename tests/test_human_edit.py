"""Jia and Liang's edit-then-verify step: `human-eval create --edit` (people rewrite each machine
sentence), the edit checks, `create --verify` (other people verify each edit blind) and the
approval of an edit by its verifiers' votes."""

import json
import sqlite3
from collections import Counter

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.provenance import Vote
from advrace.human_eval import store
from advrace.human_eval.answers import save_form
from advrace.human_eval.editing import create_edit_study, edit_problem
from advrace.human_eval.study import create_study
from advrace.human_eval.verifying import UNGRAMMATICAL, add_verify_items, approvals
from advrace.release import build_release, read_split
from conftest import make_race_dir, squad_doc

# addonesent twice under two names (same seed, same sentences): each sentence is edited once
SPLITS = ["charswap", {"attack": "addonesent", "config": {"answer_model": ""}},
          {"attack": "addonesent", "name": "again", "config": {"answer_model": ""}}]
# a good edit of each question's machine sentence (see the release below): keeps the fake, no gold
GOOD = {"q0": "The Elbe flows into the Pacific Ocean.", "q1": "The Sava flows through fifteen countries.",
        "q2": "Zanzibar City was built on the banks of the Elbe."}


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    root = tmp_path_factory.mktemp("edit")
    (root / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "seed": 3,
                                            "splits": SPLITS, "workers": 1}), root / "rel")
    return root / "rel"


def squad_doc_with_controls() -> dict:
    """The Danube questions and a paragraph of "Why" questions, which AddOneSent and AddSent leave
    as they are (no rule mutates "why"): original questions nobody edits or verifies, so that
    every queue can hold a control, however many of the Danube questions it has."""
    doc = squad_doc()
    context = ("The Rhine rises in the Alps. It is about 1,230 kilometres long. Cologne and Basel were built "
               "on it because it carried trade.")
    qas = [{"id": f"why{i}", "question": q, "answers": [{"text": a, "answer_start": context.index(a)}]}
           for i, (q, a) in enumerate([("Why do people like the Rhine?", "it carried trade"),
                                       ("Why do people like Basel?", "it carried trade"),
                                       ("Why do people like Cologne?", "it carried trade")])]
    doc["data"].append({"title": "Rhine", "paragraphs": [{"context": context, "qas": qas}]})
    return doc


@pytest.fixture(scope="module")
def control_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("controls")
    (root / "squad.json").write_text(json.dumps(squad_doc_with_controls()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "seed": 3,
                                            "splits": SPLITS[1:2], "workers": 1}), root / "rel")
    return root / "rel"


@pytest.fixture(scope="module")
def race_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("race")
    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "splits": ["charswap"],
                                            "workers": 1}), root / "rel")
    return root / "rel"


def edit_items(db):
    conn = store.connect(db)
    try:
        return [i for i in store.all_items(conn) if i["kind"] == store.EDIT]
    finally:
        conn.close()


def edit_all(db, text=GOOD, beyond=(), finish=True):
    """Every annotator with edit items saves `text[source_id]` through the form (or beyond repair
    where `beyond` names (annotator, source_id)), and presses Finish."""
    conn = store.connect(db)
    try:
        for person in store.annotators(conn):
            for row in store.queue(conn, person["id"]):
                item = store.item(conn, row["item_id"])
                if item["kind"] != store.EDIT:
                    continue
                form = ({"beyond_repair": "yes", "edit_text": ""} if (person["name"], item["source_id"]) in beyond
                        else {"edit_text": text[item["source_id"]]})
                assert save_form(conn, person, item, form) is None
            if finish:
                store.mark_finished(conn, person["id"])
    finally:
        conn.close()


def test_one_edit_item_per_machine_sentence_each_to_k_editors_none_twice(release, tmp_path, capsys):
    assert main(["human-eval", "create", str(release), "--splits", "addonesent,again", "--edit", "--editors", "3",
                 "--annotators", "4", "--db", str(tmp_path / "e.db")]) == 0
    out = capsys.readouterr().out
    assert "3 sentences to edit from addonesent, again, each by 3 editors, 4 annotators" in out
    assert out.count("/a/") == 4
    items = edit_items(tmp_path / "e.db")
    changed = {ex.source_id: ex for ex in read_split(release, "addonesent")}
    assert sorted(i["source_id"] for i in items) == ["q0", "q1", "q2"]  # the same sentence in `again`: once
    for item in items:
        p, ex = item["payload"], changed[item["source_id"]]
        sentence = ex.provenance[-1].sentences[0]
        assert p["context"][slice(*p["sentence"])] == p["machine"] == sentence.sentence
        assert p["context"][slice(*p["fake"])] == p["answer"] == sentence.answer
        assert p["records"] == [f"addonesent/{ex.source_id}", f"again/{ex.source_id}"]
        assert p["mutated"] == sentence.question and p["answers"][0]["text"] == ex.answers[0].text
    assert {i["source_id"]: i["payload"]["asked"] for i in items}["q1"] == "number"  # "How many ..."
    conn = store.connect(tmp_path / "e.db")
    meta = store.meta(conn)
    assert (meta["stage"], meta["editors"]) == ("edit", 3)
    assert main(["human-eval", "create", str(release), "--edit", "--judgements", "2", "--db", str(tmp_path / "j.db")]) == 2
    assert "drop --per-split and --judgements" in capsys.readouterr().err
    queued = [(pid, iid) for pid, ids in store.queues(conn).items() for iid in ids]
    assert len(set(queued)) == len(queued)  # nobody edits a sentence twice
    assert set(Counter(iid for _, iid in queued).values()) == {3}
    # K is capped at the number of annotators
    assert create_edit_study(release, tmp_path / "c.db", splits=["addonesent"], editors=5, annotators=2)["editors"] == 2


def test_edit_is_refused_on_race_and_on_splits_without_inserted_sentences(release, race_release, tmp_path, capsys):
    with pytest.raises(ConfigError, match="charswap hold no inserted sentences"):
        create_edit_study(release, tmp_path / "a.db", splits=["addonesent", "charswap"])
    assert not (tmp_path / "a.db").exists()
    assert main(["human-eval", "create", str(race_release), "--edit", "--db", str(tmp_path / "r.db")]) == 2
    assert "multiple_choice release; --edit rewrites the sentences SQuAD adversaries insert" in capsys.readouterr().err


def test_the_edit_checks_refuse_a_gold_a_dropped_fake_and_the_question_and_keep_a_good_edit(release, tmp_path):
    create_edit_study(release, tmp_path / "e.db", splits=["addonesent"], editors=1, annotators=1)
    item = next(i for i in edit_items(tmp_path / "e.db") if i["source_id"] == "q0")
    p = item["payload"]  # Which sea does the Danube reach? gold: Black Sea; fake: the Pacific Ocean
    assert "contains “Black Sea”, an answer" in edit_problem(p, "The Elbe reaches the black sea.")
    assert "drops the fake answer “the Pacific Ocean”" in edit_problem(p, "The Elbe reaches the Pacific.")
    assert "the question restated" in edit_problem(p, "which sea does the Danube reach")
    assert "the question restated" in edit_problem(p, "Which sea does the Elbe reach?")  # the mutated question
    assert edit_problem(p, GOOD["q0"]) is None
    assert edit_problem(p, "The Elbe, a river, reaches the Pacific Ocean.") is None  # "Pacific" alone is no gold
    assert "beyond repair" in edit_problem(p, "  ")
    assert edit_problem(p, "", beyond_repair=True) is None
    # the same checks on save: nothing stored when refused, the text kept when accepted
    conn = store.connect(tmp_path / "e.db")
    person = store.annotators(conn)[0]
    item = store.item(conn, item["id"])
    assert "Black Sea" in save_form(conn, person, item, {"edit_text": "The Black Sea is reached by the Elbe."})
    assert store.candidate(conn, person["id"], item["id"]) is None
    assert save_form(conn, person, item, {"edit_text": f"  {GOOD['q0']} "}) is None
    assert store.candidate(conn, person["id"], item["id"])["text"] == GOOD["q0"]
    assert save_form(conn, person, item, {"edit_text": "", "beyond_repair": "yes"}) is None
    saved = store.candidate(conn, person["id"], item["id"])
    assert saved["beyond_repair"] == 1 and saved["text"] is None
    queue = store.queue(conn, person["id"])
    assert [r["annotation_id"] is not None for r in queue if r["item_id"] == item["id"]] == [True]  # answered


def verifier_queues(db):
    """{name: [verify item dicts]} and the editors of each source id."""
    conn = store.connect(db)
    try:
        names = {p["id"]: p["name"] for p in store.annotators(conn)}
        items = {i["id"]: i for i in store.all_items(conn)}
        mine, editors = {}, {}
        for pid, ids in store.queues(conn).items():
            for iid in ids:
                if items[iid]["kind"] == store.VERIFY:
                    mine.setdefault(names[pid], []).append(items[iid])
                else:
                    editors.setdefault(items[iid]["source_id"], set()).add(names[pid])
        return mine, editors
    finally:
        conn.close()


def test_verify_items_never_go_to_an_editor_and_a_sentence_s_edits_may_share_a_verifier(release, tmp_path, capsys):
    """An editor never verifies an edit of their sentence; the edits of one SQuAD sentence may go to
    one verifier (as Jia and Liang's filterers saw all five edits of a sentence: they share the fake
    and the paragraph, so seeing several tells nothing of the gold)."""
    db = tmp_path / "e.db"
    create_edit_study(release, db, splits=["addonesent"], editors=2, annotators=2, seed=1)
    edit_all(db, finish=False)
    with pytest.raises(ConfigError, match="annotator1, annotator2 have not pressed Finish"):
        add_verify_items(db, verifiers=1, annotators=2)
    edit_all(db, beyond={("annotator1", "q2")})
    conn = store.connect(db)
    finished = store.meta(conn)[store.FINISHED_CANDIDATES_KEY + "annotator1"]  # their edits, as at Finish
    assert finished == store.candidates_sha256([store.candidate_row(c) for c in store.candidates(conn)
                                                if c["annotator"] == "annotator1"])
    conn.close()
    # 5 candidates (q2's by annotator1 beyond repair), 3 verifiers each, and 2 annotators besides the editors
    with pytest.raises(ConfigError, match=r"only 2 of 2 annotators may take it"):
        add_verify_items(db, verifiers=3, annotators=2)
    # two verifiers for each of the two edits of q0 and q1 from two annotators: each gets both
    assert main(["human-eval", "create", "--verify", "--db", str(db), "--verifiers", "2", "--annotators", "2"]) == 0
    out = capsys.readouterr().out
    assert "5 verify items for 5 candidates, each to 2 verifiers" in out and out.count("/a/") == 2
    mine, editors = verifier_queues(db)
    assert set(mine) == {"annotator3", "annotator4"}
    per_item = Counter(i["id"] for items in mine.values() for i in items)
    assert len(per_item) == 5 and set(per_item.values()) == {2}
    for name, items in mine.items():
        sources = Counter(i["source_id"] for i in items)
        assert sources == {"q0": 2, "q1": 2, "q2": 1}, name  # both edits of one sentence to one verifier
        assert not any(name in editors[s] for s in sources)
    conn = store.connect(db)
    meta = store.meta(conn)
    assert meta["stage"] == "verify" and meta["verify_rounds"][0]["verifiers"] == 2
    assert meta["annotators"] == [f"annotator{k}" for k in range(1, 5)]
    verify = [i for i in store.all_items(conn) if i["kind"] == store.VERIFY]
    cands = {c["id"]: c for c in store.candidates(conn)}
    for item in verify:
        p = item["payload"]
        text = cands[item["candidate_id"]]["text"]
        assert p["context"][slice(*p["highlight"])] == text and "machine" not in p
        gold = p["answers"][0]
        assert p["context"][gold["answer_start"]:gold["answer_start"] + len(gold["text"])] == gold["text"]
    with pytest.raises(ConfigError, match="no candidate to verify"):
        add_verify_items(db, verifiers=1, annotators=1)


def test_two_mends_of_one_race_question_never_go_to_one_verifier(race_release, tmp_path):
    """The options two mends of one question share include the gold: one verifier seeing both
    would deduce it, so each mend of a question needs a verifier of its own."""
    db = tmp_path / "j.db"
    create_study(race_release, db, splits=["charswap"], all_changed=True, annotators=2)
    conn = store.connect(db)
    judges = store.annotators(conn)
    items = [store.item(conn, r["item_id"]) for r in store.queue(conn, judges[0]["id"])][:2]
    for item in items:  # both judges mend both questions, each their own option
        for k, judge in enumerate(judges):
            store.save_candidate(conn, judge["id"], item["id"], option=(item["payload"]["label"] + 1 + k) % 4,
                                 text=f"a new distractor {k}")
    for person in judges:
        store.mark_finished(conn, person["id"])
    conn.close()
    # 2 mends of each question, one verifier each: one new annotator cannot take both
    with pytest.raises(ConfigError, match="only 0 of 1 annotator may take it"):
        add_verify_items(db, verifiers=1, annotators=1)
    add_verify_items(db, verifiers=1, annotators=2)
    mine, _ = verifier_queues(db)
    assert sorted(mine) == ["annotator3", "annotator4"]
    for name, queued in mine.items():
        sources = [i["source_id"] for i in queued]
        assert sorted(sources) == sorted(i["source_id"] for i in items), name  # one mend of each question


def test_a_race_mend_is_verified_blind_by_someone_who_never_judged_it(race_release, tmp_path):
    db = tmp_path / "j.db"
    create_study(race_release, db, splits=["charswap"], all_changed=True, annotators=2)
    conn = store.connect(db)
    judge = store.annotators(conn)[0]
    item = store.item(conn, store.queue(conn, judge["id"])[0]["item_id"])
    wrong = (item["payload"]["label"] + 1) % 4
    store.save_candidate(conn, judge["id"], item["id"], option=wrong, text="a new distractor")
    for person in store.annotators(conn):
        store.mark_finished(conn, person["id"])
    conn.close()
    add_verify_items(db, verifiers=1, annotators=1)
    mine, _ = verifier_queues(db)
    assert list(mine) == ["annotator3"]
    (verify,) = mine["annotator3"]
    options = list(item["payload"]["options"])
    options[wrong] = "a new distractor"
    assert verify["payload"] == {**item["payload"], "options": options} and verify["task"] == "multiple_choice"


def answer(conn, name, item, *, text=None, grammatical=True):
    """`name` answers a verify item: the gold (or `text` where it stands in the paragraph) and grammatical."""
    person = next(p for p in store.annotators(conn) if p["name"] == name)
    p = item["payload"]
    gold = p["answers"][0]
    span = {"answer_text": gold["text"], "answer_start": str(gold["answer_start"])} if text is None else \
        {"answer_text": text, "answer_start": str(p["context"].index(text))}
    form = {"choice": "answer", **span, "grammatical": "yes" if grammatical else "no"}
    assert save_form(conn, person, store.item(conn, item["id"]), form) is None


def to_verify(release, db, verifiers):
    """One editor's good edits, each verified by `verifiers` new annotators: (connection, verify items by source id)."""
    create_edit_study(release, db, splits=["addonesent"], editors=1, annotators=1)
    edit_all(db)
    add_verify_items(db, verifiers=verifiers, annotators=verifiers)
    conn = store.connect(db)
    return conn, {i["source_id"]: i for i in store.all_items(conn) if i["kind"] == store.VERIFY}


def test_an_edit_is_approved_by_a_strict_majority_of_gold_and_grammatical_votes(release, tmp_path):
    db = tmp_path / "e.db"
    conn, verify = to_verify(release, db, 3)
    person = store.annotators(conn)[1]
    assert save_form(conn, person, store.item(conn, verify["q0"]["id"]),
                     {"choice": "answer", "answer_text": "Black Sea",
                      "answer_start": str(verify["q0"]["payload"]["context"].index("Black Sea"))}) == \
        "say whether the highlighted sentence is grammatical English"
    # q0: all three approve; q1: one picks the fake answer, one says ungrammatical; q2: one of three
    for name in ("annotator2", "annotator3", "annotator4"):
        answer(conn, name, verify["q0"])
    answer(conn, "annotator2", verify["q1"])
    answer(conn, "annotator3", verify["q1"], text="fifteen")
    answer(conn, "annotator4", verify["q1"], grammatical=False)
    answer(conn, "annotator2", verify["q2"])
    answer(conn, "annotator3", verify["q2"], grammatical=False)
    answer(conn, "annotator4", verify["q2"], text="Zanzibar City")
    assert all(not a.votes and not a.approved for a in approvals(conn).values())  # nobody finished yet
    for p in store.annotators(conn):
        store.mark_finished(conn, p["id"])
    got = approvals(conn)
    c = {s: i["candidate_id"] for s, i in verify.items()}
    assert got[c["q0"]].approved and [v.valid for v in got[c["q0"]].votes] == [True, True, True]
    assert not got[c["q1"]].approved and not got[c["q2"]].approved
    assert got[c["q1"]].votes == (Vote("annotator2", True),
                                  Vote("annotator3", False, "selected the added sentence's answer “fifteen”"),
                                  Vote("annotator4", False, UNGRAMMATICAL))
    # a verifier left out (below the control threshold): q1 has two of two left, one approving: a tie
    without = approvals(conn, exclude_annotators=["annotator4"])
    assert without[c["q0"]].approved and len(without[c["q0"]].votes) == 2
    assert not without[c["q1"]].approved and not without[c["q2"]].approved
    # q2 with only its approving verifier left: approved (1 of 1)
    assert approvals(conn, exclude_annotators=["annotator3", "annotator4"])[c["q2"]].approved
    conn.close()
    # read through the study object validate uses: the same verdicts
    from advrace.human_eval.validate import read_study

    assert approvals(read_study(db)) == got


def test_a_tie_is_not_approved(release, tmp_path):
    conn, verify = to_verify(release, tmp_path / "e.db", 2)
    answer(conn, "annotator2", verify["q0"])
    answer(conn, "annotator3", verify["q0"], grammatical=False)
    answer(conn, "annotator2", verify["q1"])
    answer(conn, "annotator3", verify["q1"])
    for p in store.annotators(conn):
        store.mark_finished(conn, p["id"])
    got = approvals(conn)
    assert not got[verify["q0"]["candidate_id"]].approved and got[verify["q1"]["candidate_id"]].approved
    assert not got[verify["q2"]["candidate_id"]].approved  # nobody answered it
    conn.close()


def test_the_edit_page_routes_by_kind(release, tmp_path):
    from advrace.human_eval.server import item_template, marked

    create_edit_study(release, tmp_path / "e.db", splits=["addonesent"], editors=1, annotators=1)
    item = edit_items(tmp_path / "e.db")[0]
    assert item_template(item) == "edit.html"
    assert item_template({**item, "kind": store.VERIFY, "payload": {"highlight": [0, 1]}}) == "verify.html"
    assert item_template({**item, "kind": store.VERIFY, "payload": {}}) == "item.html"
    assert item_template({**item, "kind": store.VERIFY, "task": "multiple_choice",
                          "payload": {"highlight": [0, 1]}}) == "item.html"
    assert marked("abcdef", {"sentence": [1, 5], "fake": [2, 3], "none": None}) == [
        ("a", ""), ("b", "sentence"), ("c", "sentence fake"), ("de", "sentence"), ("f", "")]
    assert sqlite3.connect(tmp_path / "e.db").execute("SELECT COUNT(*) FROM candidates").fetchone() == (0,)


def test_a_later_verify_round_keeps_a_question_from_whoever_verified_it(race_release, tmp_path):
    """Exclusion across rounds: annotator3 verified a mend of question x in the first round and has
    not finished; a second round's mend of x (another version of it) may not go to them."""
    db = tmp_path / "j.db"
    create_study(race_release, db, splits=["charswap"], all_changed=True, annotators=2, judgements=1)
    conn = store.connect(db)
    first, second = store.annotators(conn)
    item = store.item(conn, store.queue(conn, first["id"])[0]["item_id"])
    store.save_candidate(conn, first["id"], item["id"], option=(item["payload"]["label"] + 1) % 4, text="a mend")
    for person in (first, second):
        store.mark_finished(conn, person["id"])
    add_verify_items(db, verifiers=1, annotators=1)
    # a second version of the same question, mended (as a crowd platform's file could bring it)
    other = store.add_item(conn, "charswap", item["record_id"], item["source_id"], item["task"], item["payload"])
    store.save_candidate(conn, second["id"], other, option=item["payload"]["label"] ^ 1, text="another mend")
    conn.close()
    with pytest.raises(ConfigError, match="only 0 of 1 annotator may take it"):
        add_verify_items(db, verifiers=1, annotators=0)
    assert add_verify_items(db, verifiers=1, annotators=1)["annotators"].keys() == {"annotator4"}
    mine, _ = verifier_queues(db)
    assert [i["candidate_id"] for i in mine["annotator4"]] == [2]


def test_the_fake_answer_is_marked_whatever_its_case():
    """A fake "the Halloway Canal" opens its sentence as "The Halloway Canal"."""
    from advrace.core.examples import SpanExample
    from advrace.core.provenance import AdversarialSentence
    from advrace.human_eval.editing import edit_payload

    context = "The Main canal is old. The Halloway Canal links the Vistula to the Rhine."
    ex = SpanExample("addonesent/x", "", context, "Which canal links the Danube to the Rhine?", [("The Main canal", 0)])
    sentence = AdversarialSentence("The Halloway Canal links the Vistula to the Rhine.", answer="the Halloway Canal")
    p = edit_payload(ex, 23, len(context), sentence, [ex.id])
    assert context[slice(*p["fake"])] == "The Halloway Canal" and p["machine"] == sentence.sentence


def test_controls_go_into_edit_and_verify_queues_and_a_verifier_who_fails_them_no_longer_decides(
        control_release, tmp_path, capsys):
    """--controls on an edit study: every editor's and every verifier's queue holds a control, an
    original question shown like a verify item (a sentence without the gold highlighted, asking
    "grammatical?"), never the original of a question in that queue. annotator4 answers their
    control wrong: q0's edit, approved by annotator4 and annotator5 and rejected by annotator6,
    is approved with their vote and not without it (a tie), so validate puts q0 back."""
    db = tmp_path / "e.db"
    assert main(["human-eval", "create", str(control_release), "--edit", "--editors", "1", "--annotators", "3",
                 "--controls", "0.1", "--min-accuracy", "0.5", "--db", str(db)]) == 0
    assert "mixed 3 control questions into the queues (about 10% of each, and of each verify round); annotators " \
           "below 0.5 accuracy" in capsys.readouterr().out
    assert main(["human-eval", "create", str(control_release), "--edit", "--baseline", "0.1", "--db",
                 str(tmp_path / "b.db")]) == 2
    assert "drop --baseline" in capsys.readouterr().err
    edit_all(db)
    assert main(["human-eval", "create", "--verify", "--db", str(db), "--controls", "0.2"]) == 2
    assert "at the rate the study was created with" in capsys.readouterr().err
    assert main(["human-eval", "create", "--verify", "--db", str(db), "--verifiers", "3", "--annotators", "3"]) == 0
    assert "3 verify items for 3 candidates, each to 3 verifiers, with 3 control questions mixed into their " \
           "queues" in capsys.readouterr().out
    conn = store.connect(db)
    items = {i["id"]: i for i in store.all_items(conn)}
    people = {p["name"]: p for p in store.annotators(conn)}
    originals = {ex.id: ex for ex in read_split(control_release, "original")}
    for name, person in people.items():
        queue = [items[iid] for iid in store.queues(conn)[person["id"]]]
        mine = [i for i in queue if i["kind"] == store.CONTROL]
        assert len(mine) == 1, name
        (control,) = mine
        assert control["source_id"] not in {i["source_id"] for i in queue if i is not control}, name
        p = control["payload"]
        sentence = p["context"][slice(*p["highlight"])]
        assert sentence and p["answers"][0]["text"] not in sentence  # shown like a verify item
        assert p == {**p, "question": originals[control["record_id"]].question}
        if name in ("annotator4", "annotator5", "annotator6"):  # they verify every Danube question
            assert control["source_id"].startswith("why") and len(queue) == 4, name
    verify = {i["source_id"]: i for i in items.values() if i["kind"] == store.VERIFY}
    for name in ("annotator4", "annotator5", "annotator6"):
        person = people[name]
        for iid in store.queues(conn)[person["id"]]:
            item = store.item(conn, iid)
            p = item["payload"]
            gold = p["answers"][0]
            right = item["kind"] != store.CONTROL or name != "annotator4"
            at = gold["answer_start"] if right else p["highlight"][0]
            text = gold["text"] if right else p["context"][at:at + 3]
            grammatical = not (name == "annotator6" and item["source_id"] == "q0")
            assert save_form(conn, person, item, {"choice": "answer", "answer_text": text, "answer_start": str(at),
                                                  "grammatical": "yes" if grammatical else "no"}) is None
        store.mark_finished(conn, person["id"])
    q0 = verify["q0"]["candidate_id"]
    assert approvals(conn)[q0].approved and not approvals(conn, exclude_annotators=["annotator4"])[q0].approved
    conn.close()
    from advrace.human_eval.validate import read_study, validate_release

    assert read_study(db).excluded == {"annotator4"}
    validation = validate_release(db, control_release, tmp_path / "v")
    assert validation["study"]["excluded"] == ["annotator4"]
    assert [e["annotator"] for e in validation["controls"]["excluded"]] == ["annotator4"]
    out = {ex.source_id: ex for ex in read_split(tmp_path / "v", "addonesent")}
    assert GOOD["q0"] not in out["q0"].context and GOOD["q1"] in out["q1"].context
    assert [v.annotator for v in out["q1"].provenance[-1].edits[0].verifications] == ["annotator5", "annotator6"]
    assert main(["verify", str(tmp_path / "v"), "--study", str(db)]) == 0


def test_a_verify_round_of_race_mends_mixes_in_controls_at_the_study_s_rate(race_release, tmp_path):
    """A judge study with controls: its verify round gives each verifier controls too (the study's
    rate), never the original of the question they verify, recorded in the round."""
    db = tmp_path / "j.db"
    create_study(race_release, db, splits=["charswap"], all_changed=True, annotators=2, judgements=1,
                 controls_rate=0.2)
    conn = store.connect(db)
    first = store.annotators(conn)[0]
    item = next(store.item(conn, r["item_id"]) for r in store.queue(conn, first["id"])
                if store.item(conn, r["item_id"])["kind"] == store.JUDGE)
    store.save_candidate(conn, first["id"], item["id"], option=(item["payload"]["label"] + 1) % 4, text="a mend")
    for person in store.annotators(conn):
        store.mark_finished(conn, person["id"])
    conn.close()
    out = add_verify_items(db, verifiers=1, annotators=1)
    assert out["controls"] == 1
    conn = store.connect(db)
    person = next(p for p in store.annotators(conn) if p["name"] == "annotator3")
    queue = [store.item(conn, r["item_id"]) for r in store.queue(conn, person["id"])]
    assert sorted(i["kind"] for i in queue) == [store.CONTROL, store.VERIFY]
    control = next(i for i in queue if i["kind"] == store.CONTROL)
    assert control["source_id"] != item["source_id"] and "mend" not in control["payload"]
    assert store.meta(conn)["verify_rounds"][0]["controls"] == {"annotator3": [control["id"]]}
    conn.close()
