"""Distractors mended by people (issue 45, item 3): a judge of a DE or DG item who finds a second
right answer puts their own wrong option in its place; the attack's option checks run on it live
and on save; it is stored as a candidate, withdrawn by a later answer without it, and the page
shows it again. The DG study comes from a real DG split built by a tiny random Llama."""

import json
import re
import shutil
import sqlite3
import threading
import time
import urllib.error
import urllib.request
from urllib.parse import urlencode

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.provenance import AttackSummary, NewDistractors
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.human_eval import mending, store
from advrace.human_eval.answers import save_form
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.study import create_study
from advrace.release import build_release, read_split
from conftest import PASSAGE

MULTIPLE = mending.MEND_REASON
WHERE = {"passage": PASSAGE, "question": "Where does Tom live?",
         "options": ["In a big city", "In a small village", "Near the school", "By the sea"], "label": 1}
TRUE = {"passage": PASSAGE, "question": "Which of the following is true according to the passage?",
        "options": ["Tom lives in a big city.", "Tom walks to school with his sister.", "Mrs Green is a scientist.",
                    "Mary plays football."], "label": 1}
LONG = "In a small village near the mountains where Tom walks to school every morning with his sister Mary"


@pytest.fixture(scope="module")
def dg_release(tiny_llama, tmp_path_factory):
    """A release with a real DG split: a random tiny Llama's candidates, loose enough filters that
    every question gets new distractors (machine junk, as a judge would want mended)."""
    root = tmp_path_factory.mktemp("mend")
    config = {"model": tiny_llama["lm"], "beam_size": 8, "max_target_tokens": 4,
              "select_with": None, "max_answer_cosine": None, "min_jaccard_distance": 0.0}
    build_release(release_config_from_dict({"data": {"path": str(tiny_llama["race"])}, "workers": 1,
                                            "splits": [{"attack": "distractor_generation", "config": config}]}),
                  root / "rel")
    return root / "rel"


def hand_study(path, payloads, settings=None, kinds=None):
    """A study database written with the store's own functions: one annotator, these items (DE
    payloads by default) in this order; `settings` the DE split's config (the checks' settings)."""
    conn = store.connect(path)
    store.init(conn)
    with store.transaction(conn):
        store.set_meta(conn, **{mending.SETTINGS_KEY: {"distractor_extraction": settings or {}}})
        ids = [store.add_item(conn, "distractor_extraction", f"distractor_extraction/q{i}", f"q{i}", MULTIPLE_CHOICE,
                              p, kind=(kinds or {}).get(i, store.JUDGE)) for i, p in enumerate(payloads)]
        person, token = store.add_person(conn, "ann", store.ANNOTATOR)
        store.set_queue(conn, person, ids)
    return conn, token


def person_of(conn):
    return conn.execute("SELECT * FROM people").fetchone()


def checked(conn, item_id, option, text):
    return mending.check(conn, store.item(conn, item_id), {"mend_option": str(option), "mend_text": text})


def mend_form(option, text, choice="unanswerable", reason=MULTIPLE):
    return {"choice": choice, "reason": reason, "mend_option": str(option), "mend_text": text}


# --------------------------------------------------------------------------- which items offer a mend


def test_a_study_offers_mends_on_the_dg_items_with_the_splits_settings(dg_release, tmp_path):
    examples = read_split(dg_release, "distractor_generation")
    assert all(mending.mend_kind(ex) == mending.TEXT for ex in examples)
    create_study(dg_release, tmp_path / "s.db", splits=["original", "distractor_generation"], per_split=2,
                 annotators=1)
    conn = store.connect(tmp_path / "s.db")
    items = store.all_items(conn)
    assert {i["split"]: i["payload"].get("mend") for i in items} == {"original": None, "distractor_generation": "text"}
    settings = store.meta(conn)[mending.SETTINGS_KEY]
    assert list(settings) == ["distractor_generation"] and settings["distractor_generation"]["min_jaccard_distance"] == 0.0
    # a DE question is mended with a span; one that a later attack changed again is not mended
    de = examples[0].with_provenance(AttackSummary("distractor_extraction", distractors=NewDistractors(("x",), ("y",))))
    assert mending.mend_kind(de) == mending.SPAN
    assert mending.mend_kind(de.with_provenance(AttackSummary("charswap"))) is None


def test_a_dg_study_with_mend_payloads_validates(dg_release, tmp_path):
    """`validate` rebuilds each item's payload from the release: the mend in it must come out the
    same, or every DE/DG study would read as tampered."""
    from advrace.human_eval.validate import validate_release

    create_study(dg_release, tmp_path / "s.db", splits=["distractor_generation"], all_changed=True, annotators=1)
    conn = store.connect(tmp_path / "s.db")
    ann = person_of(conn)
    for row in store.queue(conn, ann["id"]):
        item = store.item(conn, row["item_id"])
        assert item["payload"]["mend"] == "text"
        assert save_form(conn, ann, item, {"choice": str(item["payload"]["label"])}) is None
    store.mark_finished(conn, ann["id"])
    conn.close()
    validation = validate_release(tmp_path / "s.db", dg_release, tmp_path / "v")
    assert validation["splits"]["distractor_generation"]["valid"] == len(read_split(dg_release, "distractor_generation"))


def test_controls_and_baselines_offer_a_mend_like_the_judge_items_and_theirs_is_never_verified(dg_release, tmp_path):
    """In a DG study, a control or baseline without the mend box (or with an empty `mend` column
    in a crowd task) would be told from the judge items at a glance. Their mend is stored with the
    judgement and never goes to verify; `validate` expects the payloads `create` wrote."""
    from advrace.human_eval.study import quality_item_problems
    from advrace.human_eval.verifying import to_verify

    create_study(dg_release, tmp_path / "s.db", splits=["distractor_generation"], all_changed=True, annotators=4,
                 judgements=1, controls_rate=0.3, baseline_rate=0.5)
    conn = store.connect(tmp_path / "s.db")
    items = store.all_items(conn)
    extra = [i for i in items if i["kind"] in (store.CONTROL, store.BASELINE)]
    assert {i["kind"] for i in extra} == {store.CONTROL, store.BASELINE}
    assert {i["payload"].get("mend") for i in items} == {"text"}
    assert all(mending.offered(i) for i in items)
    assert quality_item_problems(items, dg_release, 0) == []
    tampered = [{**extra[0], "payload": {**extra[0]["payload"], "mend": "span"}}]
    assert "differs from the release's" in quality_item_problems(tampered, dg_release, 0)[0]
    people = {p["id"]: p for p in store.annotators(conn)}
    queues = store.queues(conn)
    kinds = {i["id"]: i for i in items}
    mended = []
    for pid, ids in queues.items():
        for iid in ids:
            item = kinds[iid]
            if item["kind"] in (store.CONTROL, store.JUDGE) and item["kind"] not in {k for k, _ in mended}:
                k = (item["payload"]["label"] + 1) % len(item["payload"]["options"])
                words = item["payload"]["passage"].lower().split()
                text = next(t for t in (" ".join(words[i:i + 3]) for i in range(len(words)))
                            if not checked(conn, iid, k, t).problems)
                assert save_form(conn, people[pid], item, mend_form(k, text)) is None
                mended.append((item["kind"], iid))
    assert {k for k, _ in mended} == {store.CONTROL, store.JUDGE}
    assert {c["item_kind"] for c in store.candidates(conn)} == {store.CONTROL, store.JUDGE}
    assert [c["item_id"] for c in to_verify(conn)] == [iid for k, iid in mended if k == store.JUDGE]


def test_a_control_offers_the_mend_of_the_judge_items_beside_it():
    def items(*kinds, kind=store.JUDGE):
        return [{"kind": kind, "payload": {"mend": k} if k else {}} for k in kinds]

    assert mending.control_mend(items(None), "original/q0", 0) is None  # a study without DE or DG
    assert mending.control_mend(items("text", kind=store.VERIFY), "original/q0", 0) is None
    assert mending.control_mend(items(None, "text"), "original/q0", 0) == "text"
    both = items("text", "span")
    drawn = [mending.control_mend(both, f"original/q{i}", 0) for i in range(20)]
    assert set(drawn) == {"text", "span"}  # with DE and DG judge items, controls look like either
    assert drawn == [mending.control_mend(both, f"original/q{i}", 0) for i in range(20)]
    assert mending.offered({"kind": store.BASELINE, "payload": {"mend": "span"}})
    assert not mending.offered({"kind": store.VERIFY, "payload": {"mend": "span"}})


# --------------------------------------------------------------------------- the checks


def test_a_de_mend_must_be_words_of_one_paragraph(tmp_path):
    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "span"}])
    good = checked(conn, 1, 2, "near the mountains")
    assert good.problems == () and good.text == "Near the mountains"  # dressed like the answer, as DE does
    assert "form" in good.checks and "answer_equivalent" not in good.checks
    assert checked(conn, 1, 2, "Near the mountains").problems == ()  # the saved text checks again
    assert "words of the passage" in checked(conn, 1, 2, "in a cave").problems[0]
    across = checked(conn, 1, 2, "his sister Mary. Their teacher")
    assert any("words of the passage" in p for p in across.problems)


def test_a_mend_equal_to_another_option_or_the_one_it_replaces_is_refused(tmp_path):
    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}])
    assert checked(conn, 1, 2, "in a small village.").problems == (
        "The new option is option B again; write a different one.",)
    assert "as it stands" in checked(conn, 1, 2, "Near the school").problems[0]
    assert "Type a wrong answer" in checked(conn, 1, 2, "   ").problems[0]
    assert "Choose the option" in checked(conn, 1, "", "On a farm").problems[0]


def test_the_attacks_form_and_stated_checks_refuse_with_the_splits_settings(tmp_path):
    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}, {**TRUE, "mend": "text"}])
    long = checked(conn, 1, 2, LONG)
    assert long.problems == ("The new option gives itself away by its look: it is much longer or shorter than "
                             "the other options.",)
    stated = checked(conn, 2, 0, "Mary practises the piano.")
    assert len(stated.problems) == 1 and "something the passage says" in stated.problems[0]
    assert checked(conn, 2, 0, "Mary plays the violin.").problems == ()
    # the split's own settings: with form giveaways allowed, the long option passes
    loose, _ = hand_study(tmp_path / "t.db", [{**WHERE, "mend": "text"}], {"reject_form_giveaways": False})
    assert checked(loose, 1, 2, LONG).problems == ()


def test_no_check_tells_the_gold_apart(tmp_path):
    """A new option close to the gold is refused no more than one close to a distractor: the
    judge, who may still change their answer, learns nothing of which option is right."""
    from advrace.core.checks.option_identity import answer_equivalence

    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}])
    assert answer_equivalence("In a small house", "In a small village")  # what the attack refuses beside its gold
    assert checked(conn, 1, 2, "In a small house").problems == checked(conn, 1, 2, "In a big school").problems == ()


def test_the_live_check_says_the_same_whichever_option_is_the_gold(tmp_path):
    """A worker who types one text in place of one option must learn nothing of the gold from the
    answer: not from the text as it will stand (dressed like the option it replaces, never like the
    gold: "a fish" beside "Tom." would read "A fish."), nor from a refusal (the form check runs
    beside the same options whether or not the replaced one is the gold). Four items that differ
    only in their label."""
    options = ["Tom walks to school with his sister every morning.", "Tom lives in a small village.", "a cat",
               "a dog"]
    base = {"passage": PASSAGE, "question": "What does Tom have?", "options": options, "mend": "text"}
    conn, _ = hand_study(tmp_path / "s.db", [{**base, "label": label} for label in range(4)])
    texts = ["a fish", "the fish swims in the pond near Tom", "Mary"]
    for k in range(4):
        for typed in texts:
            answers = [mending.live(conn, store.item(conn, item_id), {"mend_option": str(k), "mend_text": typed})
                       for item_id in (1, 2, 3, 4)]
            assert all(a == answers[0] for a in answers), (k, typed, answers)
    said = mending.live(conn, store.item(conn, 3), {"mend_option": "3", "mend_text": "a fish"})
    assert said["text"] == "a fish"  # like "a dog", which it replaces; the gold (C, "a cat") plays no part
    said = mending.live(conn, store.item(conn, 1), {"mend_option": "2", "mend_text": "a fish"})
    assert said["text"] == "a fish"  # the gold A would have made it "A fish."


# --------------------------------------------------------------------------- storing


def test_a_mend_is_stored_with_its_judgement_and_withdrawn_by_an_answer_without_it(tmp_path):
    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}])
    ann, item = person_of(conn), store.item(conn, 1)
    assert save_form(conn, ann, item, mend_form(2, "on a farm near the mountains")) is None
    a, c = store.annotation(conn, ann["id"], 1), store.candidate(conn, ann["id"], 1)
    assert (a["unanswerable"], a["reason"]) == (1, MULTIPLE)
    assert (c["option"], c["text"], c["beyond_repair"]) == (2, "On a farm near the mountains", 0)
    assert mending.page(conn, ann, item) == {"kind": "text", "option": 2, "text": "On a farm near the mountains"}
    # a refused mend changes nothing
    assert "option B again" in save_form(conn, ann, item, mend_form(0, "In a small village"))
    assert (store.candidate(conn, ann["id"], 1)["option"], store.candidate(conn, ann["id"], 1)["text"]) == (
        2, "On a farm near the mountains")
    # the same judgement without a mend withdraws it; so does another answer
    assert save_form(conn, ann, item, {"choice": "unanswerable", "reason": MULTIPLE, "mend_text": ""}) is None
    assert store.candidate(conn, ann["id"], 1) is None and store.annotation(conn, ann["id"], 1)["unanswerable"]
    assert save_form(conn, ann, item, mend_form(2, "near the mountains")) is None
    assert store.candidate(conn, ann["id"], 1) is not None
    assert save_form(conn, ann, item, {"choice": "1"}) is None
    assert store.candidate(conn, ann["id"], 1) is None and store.annotation(conn, ann["id"], 1)["choice"] == 1


@pytest.mark.parametrize("form, problem", [
    (mend_form(2, "On a farm", choice="1"), "choose “The question cannot be answered”"),
    (mend_form(2, "On a farm", reason="conflicting information"), "“multiple correct options”"),
    (mend_form(2, "On a farm", reason=""), "“multiple correct options”"),
    ({"choice": "unanswerable", "reason": MULTIPLE, "mend_text": "On a farm"}, "Choose the option"),
])
def test_mend_fields_with_another_answer_are_refused_and_nothing_is_stored(tmp_path, form, problem):
    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}])
    ann = person_of(conn)
    error = save_form(conn, ann, store.item(conn, 1), form)
    assert error and problem in error
    assert store.annotation(conn, ann["id"], 1) is None and store.candidate(conn, ann["id"], 1) is None


def test_only_a_judge_item_with_a_mend_takes_one(tmp_path):
    conn, _ = hand_study(tmp_path / "s.db", [dict(WHERE), {**WHERE, "mend": "text"}], kinds={1: store.VERIFY})
    ann = person_of(conn)
    for item_id in (1, 2):
        item = store.item(conn, item_id)
        assert not mending.offered(item) and mending.page(conn, ann, item) is None
        assert "takes no new option" in save_form(conn, ann, item, mend_form(2, "On a farm"))
        assert save_form(conn, ann, item, {"choice": "0"}) is None


def test_a_mend_of_the_gold_is_set_aside_not_verified(tmp_path, capsys):
    """A judge who took the gold for a second right answer and replaced it: the mend box could not
    refuse it without telling them the gold, and it has no gold to be verified against. Once every
    judge has finished, `create --verify` sets it aside and says so; the other mend is verified."""
    from advrace.cli import main
    from advrace.human_eval.verifying import replaced_gold, to_verify

    conn, _ = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "text"}, {**WHERE, "mend": "text"}])
    ann = person_of(conn)
    assert save_form(conn, ann, store.item(conn, 1), mend_form(2, "on a farm near the mountains")) is None
    assert save_form(conn, ann, store.item(conn, 2), mend_form(WHERE["label"], "on a farm near the mountains")) is None
    store.mark_finished(conn, ann["id"])
    replaced = [c["item_id"] for c in replaced_gold(conn)]
    assert replaced == [2] and [c["item_id"] for c in to_verify(conn)] == [1]
    assert main(["human-eval", "create", "--verify", "--db", str(tmp_path / "s.db"), "--verifiers", "1",
                 "--annotators", "1"]) == 0
    out = capsys.readouterr().out
    assert "1 verify item for 1 candidate" in out and "set aside 1 mend that replaced the right answer" in out
    verify = [i for i in store.all_items(conn) if i["kind"] == store.VERIFY]
    assert [store.candidate_row(c)["item_id"] for c in store.candidates(conn)
            if c["id"] == verify[0]["candidate_id"]] == [1] and len(verify) == 1
    assert main(["human-eval", "create", "--verify", "--db", str(tmp_path / "s.db"), "--verifiers", "1",
                 "--annotators", "1"]) == 2
    assert "1 mend replaced the right answer, set aside" in capsys.readouterr().err


# --------------------------------------------------------------------------- the app


@pytest.fixture
def app(tmp_path):
    conn, token = hand_study(tmp_path / "s.db", [{**WHERE, "mend": "span"}, dict(WHERE),
                                                 {**WHERE, "mend": "span"}], kinds={2: store.VERIFY})
    server = HumanEvalServer(("127.0.0.1", 0), tmp_path / "s.db")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield {"url": f"http://127.0.0.1:{server.server_port}/a/{token}", "csrf": person_of(conn)["csrf"], "conn": conn}
    server.shutdown()
    server.server_close()


def post(url, fields, csrf):
    req = urllib.request.Request(url, data=urlencode(fields).encode(), method="POST",
                                 headers={"X-CSRF-Token": csrf} if csrf else {})
    try:
        with urllib.request.urlopen(req) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_live_check_answers_json(app):
    check = f"{app['url']}/item/0/mend-check"
    status, out = post(check, {"mend_option": "2", "mend_text": "near  the mountains"}, app["csrf"])
    assert status == 200 and out["ok"] and out["problems"] == [] and out["text"] == "Near the mountains"
    assert out["option"] == 2 and "form" in out["checks"] and "stated_in_passage" in out["checks"]
    status, out = post(check, {"mend_option": "2", "mend_text": "on the moon"}, app["csrf"])
    assert status == 200 and not out["ok"] and "words of the passage" in out["problems"][0]
    assert post(check, {"mend_option": "2", "mend_text": "on the moon"}, "wrong")[0] == 403
    assert post(f"{app['url']}/item/1/mend-check", {"mend_option": "2", "mend_text": "x"}, app["csrf"])[0] == 422
    assert post(f"{app['url']}/item/2/mend-check", {"mend_option": "2", "mend_text": "x"}, app["csrf"])[0] == 422
    assert post(f"{app['url']}/item/9/mend-check", {}, app["csrf"])[0] == 404


def test_a_refused_save_shows_the_mend_that_was_sent(app):
    fields = {"csrf": app["csrf"], **mend_form(3, "on the moon")}
    req = urllib.request.Request(f"{app['url']}/item/0", data=urlencode(fields).encode(), method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(req)
    page = refused.value.read().decode()
    assert refused.value.code == 422 and "words of the passage" in page
    assert "value='on the moon'" in page and re.search(r"id=mend-option-3\s+checked", page)
    assert store.candidate(app["conn"], person_of(app["conn"])["id"], 1) is None


def test_after_finish_the_page_says_which_option_the_mend_replaced(app):
    conn = app["conn"]
    ann = person_of(conn)
    assert save_form(conn, ann, store.item(conn, 1), mend_form(2, "near the mountains")) is None
    store.mark_finished(conn, ann["id"])
    with urllib.request.urlopen(f"{app['url']}/item/0") as resp:
        page = resp.read().decode()
    assert "Option C replaced by: Near the mountains" in page and "Your rewrite" not in page


def test_the_page_shows_mend_controls_only_on_a_judge_item_that_takes_one(app):
    def page(pos):
        with urllib.request.urlopen(f"{app['url']}/item/{pos}") as resp:
            return resp.read().decode()

    assert 'id=mend ' in page(0) and "mend-check" in page(0) and "select the words in the passage" in page(0)
    assert "id=mend" not in page(1) and "id=mend" not in page(2)


# --------------------------------------------------------------------------- in a browser

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver")
def test_an_annotator_mends_a_dg_item_through_the_page(dg_release, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from test_human_eval_browser import chrome

    token = list(create_study(dg_release, tmp_path / "s.db", splits=["distractor_generation"], per_split=2,
                              annotators=1)["annotators"].values())[0]
    server = HumanEvalServer(("127.0.0.1", 0), tmp_path / "s.db")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    browser = chrome()
    try:
        url = f"http://127.0.0.1:{server.server_port}/a/{token}"
        browser.get(f"{url}/item/0")
        text = browser.find_element(By.ID, "mend_text")
        WebDriverWait(browser, 10).until(lambda d: not text.is_enabled())  # off until "multiple correct options"
        options = [o.text for o in browser.find_elements(By.CLASS_NAME, "option")[:4]]
        browser.find_element(By.ID, "choice-unanswerable").click()
        Select(browser.find_element(By.ID, "reason")).select_by_visible_text(MULTIPLE)
        assert text.is_enabled()
        conn = store.connect(tmp_path / "s.db")
        item = store.item(conn, store.queue(conn, person_of(conn)["id"])[0]["item_id"])
        conn.close()
        label = item["payload"]["label"]
        target, twin = [i for i in range(4) if i != label][:2]  # machine distractors
        assert options[target].endswith(item["payload"]["options"][target])
        browser.find_element(By.ID, f"mend-option-{target}").click()
        status = browser.find_element(By.ID, "mend-status")
        text.send_keys(item["payload"]["options"][twin].lower())  # another option again: refused, live
        WebDriverWait(browser, 20).until(lambda d: "again" in status.text)
        browser.find_element(By.ID, "save").click()  # refused: not sent, the text stays with the reason
        time.sleep(0.5)
        assert browser.current_url.endswith("/item/0") and "again" in status.text
        assert text.get_attribute("value") == item["payload"]["options"][twin].lower()
        text.clear()
        text.send_keys("near the mountains")
        WebDriverWait(browser, 20).until(lambda d: "Accepted" in status.text)
        text.send_keys(Keys.ENTER)  # Enter saves (answerKeys), the held-back save above notwithstanding
        WebDriverWait(browser, 10).until(lambda d: d.current_url.endswith("/item/1"))
        browser.get(f"{url}/item/0")  # the mend is shown again
        assert browser.find_element(By.ID, f"mend-option-{target}").is_selected()
        assert browser.find_element(By.ID, "mend_text").get_attribute("value") == "Near the mountains"
    finally:
        browser.quit()
        server.shutdown()
        server.server_close()
    db = sqlite3.connect(tmp_path / "s.db")
    assert db.execute("SELECT option, text FROM candidates").fetchall() == [(target, "Near the mountains")]
    assert db.execute("SELECT unanswerable, reason FROM annotations").fetchall() == [(1, MULTIPLE)]


@pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER), reason="needs Debian's chromium and chromium-driver")
def test_on_a_de_item_words_selected_in_the_passage_become_the_new_option(app):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from test_human_eval_browser import chrome

    browser = chrome()
    try:
        browser.get(f"{app['url']}/item/0")
        browser.find_element(By.ID, "choice-unanswerable").click()
        Select(browser.find_element(By.ID, "reason")).select_by_visible_text(MULTIPLE)
        browser.find_element(By.ID, "mend-option-2").click()
        browser.execute_script(
            "const box = document.querySelector('.passage'); const t = box.firstChild;"
            "const s = t.textContent.indexOf('near the mountains'); const r = document.createRange();"
            "r.setStart(t, s); r.setEnd(t, s + 18);"
            "const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);"
            "box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));")
        assert browser.find_element(By.ID, "mend_text").get_attribute("value") == "near the mountains"
        status = browser.find_element(By.ID, "mend-status")
        WebDriverWait(browser, 20).until(lambda d: "Accepted" in status.text)
        assert "“Near the mountains”" in status.text
    finally:
        browser.quit()
