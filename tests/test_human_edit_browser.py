"""Jia and Liang's edit-then-verify step through the app's real pages, in headless Chromium (issue
45's first "Done when" box): three annotators edit the same machine sentences of AddOneSent and
AddSent (the live checks refuse a gold answer as they type), three others verify the edits blind,
and one of the verifiers answers their control question wrong and is excluded, which turns edits
their vote had rejected into approved ones. `validate` then writes a release that verifies with
its study, in which AddOneSent holds an approved edit, AddSent the approved edit a tiny span reader
(`--adversary`) does worst on, and provenance every edit with its editor and its verifiers' votes.

Six annotators, not five: the three editors edit every sentence, so every question is in their
queues, and a verifier never had the question they verify in their queue (`add_verify_items`), so
the verifiers are three other people."""

import json
import threading

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.provenance import PeopleEdited
from advrace.human_eval import store
from advrace.human_eval.editing import create_edit_study
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.verifying import UNGRAMMATICAL, add_verify_items, approvals
from advrace.release import build_release, check_release, read_split
from test_human_edit import squad_doc_with_controls
from test_human_eval_browser import CHROMEDRIVER, CHROMIUM, chrome

pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")

# What each editor writes for each edit item, by (split, question), for the machine sentences of
# seed 3 (addonesent: q0 "The Elbe reaches the Pacific Ocean.", q1 "The Kamchatka flows through
# fifteen." (AddSent's q0 and q1 sentences are the same: one item each), q2 "Zanzibar City was built
# on the banks of the Vltava."; addsent: q2 "Halloway City was built on the banks of the Vltava.");
# None: beyond repair. q2's three edits are all approved, and the reader's F1 differs on each (0.29,
# 0.0, 0.4 with the conftest reader): AddSent takes the second.
EDITS = {
    "annotator1": {("addonesent", "q0"): "The Elbe flows into the Pacific Ocean.",
                   ("addonesent", "q1"): "The Sava flows through fifteen countries.",
                   ("addonesent", "q2"): "Zanzibar City was built on the Elbe.",
                   ("addsent", "q2"): None},
    "annotator2": {("addonesent", "q0"): "Elbe reach Pacific Ocean the sea of.", ("addonesent", "q1"): None,
                   ("addonesent", "q2"): "Zanzibar City stands on the banks of the Elbe.",
                   ("addsent", "q2"): None},
    "annotator3": {("addonesent", "q0"): None, ("addonesent", "q1"): None, ("addonesent", "q2"): None,
                   ("addsent", "q2"): "Paris and Halloway City were built on the banks of the Elbe."},
}
UNGRAMMATICAL_EDITS = {"Elbe reach Pacific Ocean the sea of."}  # every verifier says "no" to it
CARELESS = "annotator5"  # a verifier who answers their control wrong and calls every edit ungrammatical


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


def queue_length(db, token):
    conn = store.connect(db)
    try:
        return len(store.queue(conn, store.person_by_token(conn, token)["id"]))
    finally:
        conn.close()


def edit_page(browser, item, text, refuse_first: bool):
    """Edit the item's sentence on the edit page into `text` (None: beyond repair); with
    `refuse_first`, first type a sentence holding the gold answer (the live check says why, before
    anything is saved) and save one without the fake answer (refused on save, their text kept)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, 10)
    box = browser.find_element(By.ID, "edit-box")
    assert box.get_attribute("value") == item["payload"]["machine"]  # prefilled with the machine's sentence
    assert browser.find_element(By.CSS_SELECTOR, "#edit-paragraph mark.fake").text == item["payload"]["answer"]
    if refuse_first:
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


def verify_page(browser, item, name, ask_grammatical_first: bool):
    """Answer a verify item, or a control shown like one, on the verify page: the gold, and
    "grammatical" unless the sentence is in UNGRAMMATICAL_EDITS; CARELESS selects the first word of
    the highlighted sentence of a control (no gold) and calls every edit ungrammatical. With
    `ask_grammatical_first`, save first without saying (refused, the selected answer kept)."""
    from selenium.webdriver.common.by import By

    p = item["payload"]
    sentence = browser.find_element(By.CSS_SELECTOR, "mark.highlight").text
    assert sentence == p["context"][slice(*p["highlight"])]
    if name == CARELESS and item["kind"] == store.CONTROL:
        word = sentence.split()[0]
        select(browser, word, p["highlight"][0])
    else:
        gold = p["answers"][0]
        select(browser, gold["text"], gold["answer_start"])
    if ask_grammatical_first:
        chosen = browser.find_element(By.ID, "selected").text
        save(browser)
        assert "grammatical English" in browser.find_element(By.ID, "error").text
        assert browser.find_element(By.ID, "selected").text == chosen
    no = sentence in UNGRAMMATICAL_EDITS or (name == CARELESS and item["kind"] == store.VERIFY)
    browser.find_element(By.ID, "grammatical-no" if no else "grammatical-yes").click()
    save(browser)
    assert refusal(browser) is None, refusal(browser)


def work_queue(browser, url, db, name, token, first: bool):
    """The annotator works through their queue, each item on the page of its kind: edit items as
    EDITS says, verify items and controls (shown like verify items) by `verify_page`. `first`:
    the first edit and the first verify page also try what is refused."""
    refuse, asked = first, first
    for pos in range(queue_length(db, token)):
        item = source_of(db, token, pos)
        browser.get(f"{url}/a/{token}/item/{pos}")
        if item["kind"] == store.EDIT:
            edit_page(browser, item, EDITS[name][(item["split"], item["source_id"])], refuse)
            refuse = False
        else:
            verify_page(browser, item, name, asked)
            asked = False


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


def edit_then_verify(browser, root, span_model):
    """The study run through the app; returns (release, study database)."""
    (root / "squad.json").write_text(json.dumps(squad_doc_with_controls()), encoding="utf-8")
    release = root / "rel"
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "seed": 3, "workers": 1,
                                            "splits": [{"attack": "addonesent", "config": {"answer_model": ""}},
                                                       {"attack": "addsent", "config": {
                                                           "model": span_model, "max_length": 64,
                                                           "answer_model": ""}}]}), release)
    db = root / "study.db"
    editors = create_edit_study(release, db, splits=["addonesent", "addsent"], editors=3, annotators=3,
                                controls_rate=0.1)["annotators"]
    server, url = serve(db)
    try:
        for k, (name, token) in enumerate(editors.items()):
            work_queue(browser, url, db, name, token, first=k == 0)
            finish(browser, url, token)
        verifiers = add_verify_items(db, verifiers=2, annotators=3)["annotators"]
        for k, (name, token) in enumerate(verifiers.items()):
            work_queue(browser, url, db, name, token, first=k == 0)
            finish(browser, url, token)
    finally:
        server.shutdown()
        server.server_close()
    return release, db


@pytest.fixture(scope="module")
def study(browser, tmp_path_factory, span_model):
    return edit_then_verify(browser, tmp_path_factory.mktemp("edit-browser"), span_model)


def test_three_edit_the_same_sentences_three_others_verify_and_a_careless_verifier_is_excluded(
        study, span_model, tmp_path, capsys):
    release, db = study
    conn = store.connect(db)
    candidates = {c["id"]: c for c in store.candidates(conn)}
    written = {(c["annotator"], c["split"], c["source_id"]): c["text"] for c in candidates.values()}
    assert written == {(name, *key): text for name, mine in EDITS.items() for key, text in mine.items()}
    queues, items = store.queues(conn), {i["id"]: i for i in store.all_items(conn)}
    people = {p["name"]: p for p in store.annotators(conn)}
    for name, person in people.items():  # a control in every queue, never the original of a queued question
        mine = [items[iid] for iid in queues[person["id"]]]
        (control,) = [i for i in mine if i["kind"] == store.CONTROL]
        assert control["source_id"] not in {i["source_id"] for i in mine if i is not control}
    with_out, kept_in = approvals(conn, exclude_annotators=[CARELESS]), approvals(conn)
    conn.close()
    from advrace.human_eval.validate import read_study

    assert read_study(db).excluded == {CARELESS}
    good = {cid for cid, c in candidates.items() if c["text"] and c["text"] not in UNGRAMMATICAL_EDITS}
    assert len(with_out) == 6 and {cid for cid, a in with_out.items() if a.approved} == good
    for cid, approval in kept_in.items():  # never its editor; two verifiers each
        assert len(approval.votes) == 2 and not {v.annotator for v in approval.votes} & set(EDITS)
    # the careless verifier's "ungrammatical" tied the edits they verified: rejected with their vote
    swung = {cid for cid in good if not kept_in[cid].approved}
    assert swung and all(CARELESS in {v.annotator for v in kept_in[cid].votes} for cid in swung)
    assert all(v.reason == UNGRAMMATICAL for cid in swung for v in kept_in[cid].votes if v.annotator == CARELESS)

    out = tmp_path / "v"
    assert main(["human-eval", "validate", str(db), str(release), "--out", str(out), "--adversary", span_model]) == 0
    assert "check it with: advrace verify" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert main(["verify", str(out), "--study", str(db)]) == 0
    manifest = check_release(out)
    assert manifest["validation"]["study"]["excluded"] == [CARELESS]
    assert [e["annotator"] for e in manifest["validation"]["controls"]["excluded"]] == [CARELESS]
    by_text = {c["text"]: cid for cid, c in candidates.items() if c["text"]}
    chosen_texts = {}
    for split in ("addonesent", "addsent"):
        for ex in read_split(out, split):
            if ex.source_id.startswith("why"):  # the control questions: no attack changed them
                continue
            record = ex.provenance[-1]
            assert isinstance(record, PeopleEdited), ex.id
            # provenance: every edit of the question's pool (both splits' items), with its editor and votes
            pool = sorted((c for c in candidates.values() if c["source_id"] == ex.source_id),
                          key=lambda c: (c["item_id"], c["annotator"]))
            assert [(e.editor, e.text) for e in record.edits] == [(c["annotator"], c["text"]) for c in pool]
            for e in record.edits:
                if e.text:
                    cid = by_text[e.text]
                    assert e.approved == (cid in good)
                    assert [v.annotator for v in e.verifications] == sorted(
                        v.annotator for v in kept_in[cid].votes if v.annotator != CARELESS)
            assert record.chosen is not None and record.edits[record.chosen].approved, ex.id
            chosen_texts[ex.id] = record.edits[record.chosen].text
            assert chosen_texts[ex.id] in ex.context
    assert chosen_texts["addonesent/q0"] == chosen_texts["addsent/q0"] == EDITS["annotator1"][("addonesent", "q0")]
    assert chosen_texts["addonesent/q1"] == EDITS["annotator1"][("addonesent", "q1")]
    # the exclusion is visible in the release: an edit the careless vote rejected is approved there
    approved_there = {by_text[e.text] for split in ("addonesent", "addsent") for ex in read_split(out, split)
                      if isinstance(ex.provenance[-1], PeopleEdited) for e in ex.provenance[-1].edits if e.approved}
    assert approved_there & swung

    # AddSent's q2: the approved edit the reader does worst on; its F1s tell it from the others
    from advrace.attacks.squad.span_model import model_f1s
    from advrace.human_eval.selection import with_sentence
    from advrace.models.encoders.span_scoring import load_span_model

    example = {ex.id: ex for ex in read_split(release, "addsent")}["addsent/q2"]
    record = {ex.id: ex for ex in read_split(out, "addsent")}["addsent/q2"].provenance[-1]
    approved = [i for i, e in enumerate(record.edits) if e.approved]
    texts = [record.edits[i].text for i in approved]
    assert len(texts) == 3
    f1s = model_f1s(load_span_model(span_model, max_length=64), [example] * len(texts),
                    [with_sentence(example, t).context for t in texts])
    worst = min(range(len(texts)), key=lambda i: f1s[i])
    assert all(f1s[worst] < f for i, f in enumerate(f1s) if i != worst), f1s  # a strict worst
    assert worst != 0 and record.chosen == approved[worst]  # not the first approved, nor a draw
    assert texts[worst] == EDITS["annotator2"][("addonesent", "q2")]
    assert [record.edits[i].model_f1 for i in approved] == pytest.approx(f1s, abs=1e-3)
    assert record.adversary == manifest["validation"]["adversary"]["model"]
    assert chosen_texts["addonesent/q2"] in texts  # AddOneSent draws from the same approved pool
