"""A DG distractor mended by people and verified blind, through the app's real pages in headless
Chromium (issue 45, "the same for a DG item mended with a new distractor and verified blind"):
three judges judge a DG study; a majority mark two questions "multiple correct options" and one
judge of each writes a new distractor in place of a second right option; `create --verify` gives
the two mends to annotators who never saw the questions, who answer them blind on the judge form
(no mend controls); `validate` writes a release that verifies against the study, in which the
mend both verifiers approved stands with its mender and votes in provenance, and the one a
verifier answered with another option (a tie: not approved) is put back as its original, the
mend and its votes kept in its provenance."""

import threading

import pytest

from advrace.cli import main
from advrace.core.provenance import INVALID, PeopleEdited, Validated
from advrace.human_eval import mending, store
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.study import create_study
from advrace.human_eval.validate import INVALID_REASON, MENDED_REASON, NO_MEND_REASON
from advrace.human_eval.verifying import add_verify_items
from advrace.release import load_manifest, read_split
from test_human_edit_browser import finish, save, source_of
from test_human_eval_browser import CHROMEDRIVER, CHROMIUM, chrome
from test_human_mend import dg_release  # noqa: F401  (the module-scope fixture: a real DG split)

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")

SPLIT = "distractor_generation"
MULTIPLE = mending.MEND_REASON
JUDGES = ("annotator1", "annotator2", "annotator3")
MENDERS = {"annotator1": 0, "annotator2": 1}  # who mends which of the two mended questions (by sorted record id)
TRIED = ("on a farm near the mountains", "near the mountains", "in the old school", "by the river")


def judge_queue(browser, url, db, name, token, mended: list[str], texts: dict):
    """A judge works through their queue on the judge page: the gold, but on the two mended
    questions the first two judges say "multiple correct options" and each mends one."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    conn = store.connect(db)
    positions = len(store.queue(conn, store.person_by_token(conn, token)["id"]))
    conn.close()
    for pos in range(positions):
        item = source_of(db, token, pos)
        browser.get(f"{url}/a/{token}/item/{pos}")
        p = item["payload"]
        if item["record_id"] in mended and name in MENDERS:
            browser.find_element(By.ID, "choice-unanswerable").click()
            Select(browser.find_element(By.ID, "reason")).select_by_visible_text(MULTIPLE)
            if mended.index(item["record_id"]) == MENDERS[name]:
                option, text = texts[item["record_id"]]
                browser.find_element(By.ID, f"mend-option-{option}").click()
                browser.find_element(By.ID, "mend_text").send_keys(text)
                WebDriverWait(browser, 30).until(lambda d: "Accepted" in d.find_element(By.ID, "mend-status").text)
        else:
            browser.find_element(By.ID, f"choice-{p['label']}").click()
        save(browser)
    finish(browser, url, token)


def verify_queue(browser, url, db, token, wrong_on: str | None):
    """A verifier answers each mended question blind on the judge form, which offers no mend: the
    gold, but another option on `wrong_on`."""
    from selenium.webdriver.common.by import By

    conn = store.connect(db)
    positions = len(store.queue(conn, store.person_by_token(conn, token)["id"]))
    conn.close()
    shown = {}
    for pos in range(positions):
        item = source_of(db, token, pos)
        assert item["kind"] == store.VERIFY
        p = item["payload"]
        browser.get(f"{url}/a/{token}/item/{pos}")
        assert not browser.find_elements(By.ID, "mend") and "mend-check" not in browser.page_source
        shown[item["record_id"]] = [o.text for o in browser.find_elements(By.CLASS_NAME, "option")][:len(p["options"])]
        choice = p["label"] if item["record_id"] != wrong_on else (p["label"] + 1) % len(p["options"])
        browser.find_element(By.ID, f"choice-{choice}").click()
        save(browser)
    finish(browser, url, token)
    return shown


@pytest.fixture(scope="module")
def mended_study(dg_release, tmp_path_factory):  # noqa: F811
    """The whole study run through the app; returns what each step made."""
    tmp = tmp_path_factory.mktemp("mend-browser")
    db = tmp / "study.db"
    tokens = create_study(dg_release, db, splits=[SPLIT], all_changed=True, annotators=3, judgements=3,
                          seed=4)["annotators"]
    conn = store.connect(db)
    items = sorted((i for i in store.all_items(conn) if i["kind"] == store.JUDGE), key=lambda i: i["record_id"])
    mended = [i["record_id"] for i in items[:2]]
    texts = {}
    for item in items[:2]:  # a machine distractor to replace, and a new one the attack's checks accept
        option = next(k for k in range(len(item["payload"]["options"])) if k != item["payload"]["label"])
        text = next(t for t in TRIED if not mending.check(conn, item, {"mend_option": str(option),
                                                                       "mend_text": t}).problems)
        texts[item["record_id"]] = (option, text)
    conn.close()
    server = HumanEvalServer(("127.0.0.1", 0), db)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    url = f"http://127.0.0.1:{server.server_port}"
    browser = chrome()
    try:
        for name in JUDGES:
            judge_queue(browser, url, db, name, tokens[name], mended, texts)
        verifiers = add_verify_items(db, verifiers=2, annotators=2)["annotators"]
        shown = {}
        for k, token in enumerate(verifiers.values()):
            shown[k] = verify_queue(browser, url, db, token, wrong_on=mended[1] if k == 1 else None)
    finally:
        browser.quit()
        server.shutdown()
        server.server_close()
    out = tmp / "validated"
    assert main(["human-eval", "validate", str(db), str(dg_release), "--out", str(out)]) == 0
    return {"db": db, "release": dg_release, "out": out, "mended": mended, "texts": texts, "verifiers": verifiers,
            "shown": shown}


def test_the_mends_are_stored_and_verified_blind_by_annotators_who_never_saw_the_question(mended_study):
    conn = store.connect(mended_study["db"])
    candidates = store.candidates(conn)
    verify = [i for i in store.all_items(conn) if i["kind"] == store.VERIFY]
    queues = {a["name"]: store.queue(conn, a["id"]) for a in store.annotators(conn)}
    conn.close()
    stored = {c["record_id"]: (c["annotator"], c["option"], c["text"]) for c in candidates}
    mended, texts = mended_study["mended"], mended_study["texts"]
    assert {rid: (name, option) for rid, (name, option, _) in stored.items()} == {
        rid: (name, texts[rid][0]) for name, k in MENDERS.items() for rid in [mended[k]]}
    for rid in mended:  # the new option as the attack dresses it
        assert stored[rid][2].lower().rstrip(".") == texts[rid][1]
    assert sorted(i["record_id"] for i in verify) == sorted(mended)
    for name in mended_study["verifiers"]:  # each verifier had only the verify items: never the questions
        assert [r["item_id"] for r in queues[name]] == [i["id"] for i in verify]
        assert all(r["annotation_id"] is not None for r in queues[name])
    # the verifiers saw the new option in the replaced one's place
    for shown in mended_study["shown"].values():
        for rid, options in shown.items():
            option = texts[rid][0]
            assert options[option].endswith(stored[rid][2]), options


def test_validate_keeps_the_approved_mend_and_puts_the_rejected_one_back(mended_study):
    out, release, db = mended_study["out"], mended_study["release"], mended_study["db"]
    assert main(["verify", str(out), "--study", str(db)]) == 0
    kept, back = mended_study["mended"]
    machine = {ex.id: ex for ex in read_split(release, SPLIT)}
    original = {ex.source_id: ex for ex in read_split(release, "original")}
    got = {ex.id: ex for ex in read_split(out, SPLIT)}
    option, _ = mended_study["texts"][kept]
    ex = got[kept]
    # the mended question: the new option in place, the others and the gold as the machine's
    assert ex.label == machine[kept].label and ex.options[option] != machine[kept].options[option]
    assert [o for k, o in enumerate(ex.options) if k != option] == [
        o for k, o in enumerate(machine[kept].options) if k != option]
    record = ex.provenance[-1]
    assert isinstance(record, PeopleEdited) and record.chosen == 0 and record.machine == machine[kept].options[option]
    edit = record.edits[0]
    assert (edit.editor, edit.option, edit.text, edit.approved) == ("annotator1", option, ex.options[option], True)
    assert sorted(v.annotator for v in edit.verifications) == sorted(mended_study["verifiers"])
    assert all(v.valid for v in edit.verifications)
    judged = ex.provenance[-2]
    assert isinstance(judged, Validated) and (judged.verdict, judged.reason) == (INVALID, MENDED_REASON)
    assert sorted((v.annotator, v.valid, v.reason) for v in judged.votes) == [
        ("annotator1", False, MULTIPLE), ("annotator2", False, MULTIPLE), ("annotator3", True, None)]
    # the mend one verifier answered with another option (1 of 2: no majority) goes back
    assert (got[back].options, got[back].label) == (original[got[back].source_id].options,
                                                    original[got[back].source_id].label)
    rejected, judged = got[back].provenance[-1], got[back].provenance[-2]
    assert isinstance(judged, Validated) and (judged.verdict, judged.reason) == (INVALID, INVALID_REASON)
    assert isinstance(rejected, PeopleEdited) and rejected.chosen is None and rejected.why == NO_MEND_REASON
    (edit,) = rejected.edits  # the rejected mend stays in provenance, with its mender and votes
    assert (edit.editor, edit.option, edit.approved) == ("annotator2", mended_study["texts"][back][0], False)
    assert edit.machine == machine[back].options[edit.option] and edit.text != edit.machine
    assert sorted(v.valid for v in edit.verifications) == [False, True]
    numbers = load_manifest(out)["validation"]["splits"][SPLIT]
    assert (numbers["mended"], numbers["candidates"], numbers["verified"], numbers["approved"]) == (1, 2, 2, 1)
    assert numbers["back"] == 1 and numbers["kept"] == len(machine) - 1


def test_the_report_counts_verify_answers_as_approvals_not_as_judgements(mended_study, tmp_path):
    """The split's judgements are the judges' alone; the verifiers' answers are the mends'
    approval numbers."""
    from advrace.human_eval import report

    result = report.write(mended_study["db"], tmp_path)
    conn = store.connect(mended_study["db"])
    questions = sum(i["kind"] == store.JUDGE for i in store.all_items(conn))
    conn.close()
    e = result["splits"][SPLIT]
    assert (e["items"], e["judged"], e["judgements"]) == (questions, questions, 3 * questions)
    assert (e["valid"], e["invalid"], e["correct"]) == (questions - 2, 2, 3 * questions - 4)
    assert e["unanswerable_reasons"] == {MULTIPLE: 4}
    assert {k: e["verify"][k] for k in ("verify_items", "verifications", "approving", "approve_rate",
                                        "grammatical_asked", "candidates", "candidates_approved")} == {
        "verify_items": 2, "verifications": 4, "approving": 3, "approve_rate": 0.75, "grammatical_asked": 0,
        "candidates": 2, "candidates_approved": 1}
    text = (tmp_path / "report.md").read_text(encoding="utf-8")
    assert f"| {SPLIT} | 2 | 4 | 75.0% (95% CI" in text and "| not asked | 1 of 2 |" in text
