"""Jia and Liang's edit-then-verify step through the app's real pages, in headless Chromium: three
annotators edit the same machine sentences (the live checks refuse a gold answer as they type),
three others verify the edits blind, the approvals follow their votes, and `validate` gives
AddOneSent an approved edit with every edit and verification in its provenance. (AddSent, chosen
by a reader, and an annotator excluded by controls are the lead's to add.)"""

import json
import threading

import pytest

from advrace.core.config import release_config_from_dict
from advrace.human_eval import store
from advrace.human_eval.editing import create_edit_study
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.verifying import UNGRAMMATICAL, add_verify_items, approvals
from advrace.release import build_release
from conftest import squad_doc
from test_human_eval_browser import CHROMEDRIVER, CHROMIUM, chrome

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")

# What each editor writes for each question's machine sentence (addonesent, seed 3: q0 "The Elbe
# reaches the sea of the Pacific Ocean.", q1 "The Sava flows through fifteen.", q2 "Zanzibar City
# were built on the banks of the Elbe."); None: beyond repair.
EDITS = {
    "annotator1": {"q0": "The Elbe flows into the Pacific Ocean.", "q1": "The Sava flows through fifteen countries.",
                   "q2": "Zanzibar City was built on the banks of the Elbe."},
    "annotator2": {"q0": "The Elbe reaches the sea called the Pacific Ocean.", "q1": "The Sava crosses fifteen lands.",
                   "q2": None},
    "annotator3": {"q0": "Elbe reach Pacific Ocean the sea of.", "q1": "Fifteen countries are crossed by the Sava.",
                   "q2": "Zanzibar City stands on the banks of the Elbe."},
}
UNGRAMMATICAL_EDITS = {"Elbe reach Pacific Ocean the sea of."}  # every verifier says "no" to it
FOOLED_BY = {"Fifteen countries are crossed by the Sava.": "Fifteen"}  # its verifier selects the fake answer


def serve(db):
    server = HumanEvalServer(("127.0.0.1", 0), db)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture(scope="module")
def browser():
    driver = chrome()
    yield driver
    driver.quit()


def save(browser):
    """Submit the page's form and wait for the page it leads to."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.ID, "save").click()
    wait = WebDriverWait(browser, 10)
    wait.until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)
    wait.until(lambda d: d.execute_script("return document.readyState") == "complete"
               and d.find_elements(By.CSS_SELECTOR, "p.progress"))


def refusal(browser):
    """The error the page shows, if any (without waiting for one to appear)."""
    return browser.execute_script("const e = document.getElementById('error'); return e && e.textContent")


def finish(browser, url, token):
    """Press Finish on the progress page, and confirm that the answers are final."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 10)
    browser.get(f"{url}/a/{token}/progress")
    wait.until(lambda d: "All answered" in d.page_source)
    for button in ("finish", "finish-yes"):
        old = browser.find_element(By.TAG_NAME, "html")
        browser.find_element(By.ID, button).click()
        wait.until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)
    wait.until(lambda d: "You have finished" in d.page_source)


def source_of(db, token, pos):
    conn = store.connect(db)
    try:
        person = store.person_by_token(conn, token)
        item = store.item(conn, store.queue(conn, person["id"])[pos]["item_id"])
        return item
    finally:
        conn.close()


def edit_queue(browser, url, db, name, token, first: bool):
    """The editor works through their queue on the edit page; the first editor first types a
    sentence holding the gold answer (the live check says why, before anything is saved) and then
    saves one without the fake answer (refused on save, their text kept)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 10)
    conn = store.connect(db)
    positions = len(store.queue(conn, store.person_by_token(conn, token)["id"]))
    conn.close()
    for pos in range(positions):
        item = source_of(db, token, pos)
        browser.get(f"{url}/a/{token}/item/{pos}")
        box = browser.find_element(By.ID, "edit-box")
        assert box.get_attribute("value") == item["payload"]["machine"]  # prefilled with the machine's sentence
        assert browser.find_element(By.CSS_SELECTOR, "#edit-paragraph mark.fake").text == item["payload"]["answer"]
        text = EDITS[name][item["source_id"]]
        if first and pos == 0:
            gold = item["payload"]["answers"][0]["text"]
            box.clear()
            box.send_keys(f"The answer is {gold}.")
            wait.until(lambda d: "an answer to the question" in d.find_element(By.ID, "edit-problem").text)
            box.clear()
            box.send_keys("A sentence with no fake answer.")
            save(browser)
            assert "drops the fake answer" in browser.find_element(By.ID, "error").text
            box = browser.find_element(By.ID, "edit-box")
            assert box.get_attribute("value") == "A sentence with no fake answer."
        if text is None:
            browser.find_element(By.ID, "beyond-repair").click()
        else:
            box.clear()
            box.send_keys(text)
            wait.until(lambda d: d.find_element(By.ID, "edit-problem").get_attribute("data-checked") == text)
            assert browser.find_element(By.ID, "edit-problem").text == ""  # the live checks accept it
        save(browser)
        assert refusal(browser) is None, refusal(browser)


def select(browser, text, start):
    """Select characters [start, start + len(text)) of the paragraph with the mouse, across the
    highlight's <mark>; again until the page's script has taken it."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    def attempt(d):
        d.execute_script(
            "const box = document.getElementById('context');"
            "const walk = document.createTreeWalker(box, NodeFilter.SHOW_TEXT); const r = document.createRange();"
            "let seen = 0, n; const s = arguments[0], e = arguments[1];"
            "while ((n = walk.nextNode())) { const len = n.textContent.length;"
            "  if (s >= seen && s <= seen + len) r.setStart(n, s - seen);"
            "  if (e >= seen && e <= seen + len) { r.setEnd(n, e - seen); break; } seen += len; }"
            "const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);"
            "box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));", start, start + len(text))
        return d.find_element(By.ID, "selected").text == text

    WebDriverWait(browser, 10).until(attempt)


def verify_queue(browser, url, db, token):
    """The verifier answers each verify item on the verify page: the gold (or the fake answer, for
    a sentence in FOOLED_BY), and grammatical unless the sentence is in UNGRAMMATICAL_EDITS."""
    from selenium.webdriver.common.by import By

    conn = store.connect(db)
    positions = len(store.queue(conn, store.person_by_token(conn, token)["id"]))
    conn.close()
    for pos in range(positions):
        p = source_of(db, token, pos)["payload"]
        browser.get(f"{url}/a/{token}/item/{pos}")
        sentence = browser.find_element(By.CSS_SELECTOR, "mark.highlight").text
        assert sentence == p["context"][slice(*p["highlight"])]
        if sentence in FOOLED_BY:
            fake = FOOLED_BY[sentence]
            select(browser, fake, p["highlight"][0] + sentence.index(fake))
        else:
            gold = p["answers"][0]
            select(browser, gold["text"], gold["answer_start"])
        if pos == 0:  # the grammatical question is required; the selected answer is kept
            chosen = browser.find_element(By.ID, "selected").text
            save(browser)
            assert "grammatical English" in browser.find_element(By.ID, "error").text
            assert browser.find_element(By.ID, "selected").text == chosen
        browser.find_element(By.ID, "grammatical-no" if sentence in UNGRAMMATICAL_EDITS else "grammatical-yes").click()
        save(browser)
        assert refusal(browser) is None, refusal(browser)


def edit_then_verify(browser, tmp_path):
    """The study run through the app; returns (release, study database)."""
    (tmp_path / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    release = tmp_path / "rel"
    build_release(release_config_from_dict({"data": {"path": str(tmp_path / "squad.json")}, "seed": 3, "splits": [
        {"attack": "addonesent", "config": {"answer_model": ""}}], "workers": 1}), release)
    db = tmp_path / "study.db"
    editors = create_edit_study(release, db, splits=["addonesent"], editors=3, annotators=3)["annotators"]
    server, url = serve(db)
    try:
        for k, (name, token) in enumerate(editors.items()):
            edit_queue(browser, url, db, name, token, first=k == 0)
            finish(browser, url, token)
        verifiers = add_verify_items(db, verifiers=1, annotators=3)["annotators"]
        for token in verifiers.values():
            verify_queue(browser, url, db, token)
            finish(browser, url, token)
    finally:
        server.shutdown()
        server.server_close()
    return release, db


def test_three_edit_the_same_sentences_and_three_others_verify_them(browser, tmp_path):
    release, db = edit_then_verify(browser, tmp_path)
    conn = store.connect(db)
    candidates = {c["id"]: c for c in store.candidates(conn)}
    written = {(c["annotator"], c["source_id"]): c["text"] for c in candidates.values()}
    assert written == {(name, q): text for name, mine in EDITS.items() for q, text in mine.items()}
    got = approvals(conn)
    conn.close()
    assert len(got) == 8  # every edit but the one beyond repair
    for cid, approval in got.items():
        text = candidates[cid]["text"]
        assert len(approval.votes) == 1 and approval.votes[0].annotator not in EDITS  # never its editor
        assert approval.approved == (text not in UNGRAMMATICAL_EDITS and text not in FOOLED_BY), text
        if text in UNGRAMMATICAL_EDITS:
            assert approval.votes[0].reason == UNGRAMMATICAL
        if text in FOOLED_BY:
            assert approval.votes[0].reason == f"selected the added sentence's answer “{FOOLED_BY[text]}”"
    # the release: AddOneSent takes an approved edit of each question where one was approved
    from advrace.human_eval.validate import validate_release
    from advrace.release import check_release, read_split

    validate_release(db, release, tmp_path / "v")
    check_release(tmp_path / "v")
    approved = {}
    for cid, approval in got.items():
        if approval.approved:
            approved.setdefault(candidates[cid]["source_id"], set()).add(candidates[cid]["text"])
    for ex in read_split(tmp_path / "v", "addonesent"):
        if ex.source_id in approved:
            assert any(text in ex.context for text in approved[ex.source_id]), (ex.source_id, ex.context)
        record = ex.provenance[-1]  # provenance: every edit with its editor and its verifiers' answers
        assert sorted(e.editor for e in record.edits) == sorted(n for n, mine in EDITS.items() if ex.source_id in mine)
        assert all(e.beyond_repair or len(e.verifications) == 1 for e in record.edits)
        if ex.source_id in approved:
            assert record.edits[record.chosen].approved and record.edits[record.chosen].text in ex.context
