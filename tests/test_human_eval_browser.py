"""The web app's real pages in headless Chromium (Debian's chromium and chromium-driver, which
the make targets install)."""

import json
import re
import shutil
import sqlite3
import threading
import time

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.examples import MCExample
from advrace.human_eval import report
from advrace.human_eval.authoring import AuthoringModel, export_authored
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.span_authoring import SpanAuthoringModel
from advrace.release import build_release, check_release, write_release
from conftest import make_race_dir, squad_doc
from advrace.human_eval.study import add_authors, create_study

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(not (CHROMIUM and CHROMEDRIVER),
                                reason="needs Debian's chromium and chromium-driver (make test installs them)")


def chrome():
    """A headless Chromium of its own: its own profile, so its own cookies."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu",
                "--window-size=1200,1600"):
        options.add_argument(arg)
    driver = webdriver.Chrome(service=Service(CHROMEDRIVER), options=options)
    driver.implicitly_wait(5)
    return driver


@pytest.fixture(scope="module")
def browser():
    driver = chrome()
    yield driver
    driver.quit()


def serve(db, model=None):
    server = HumanEvalServer(("127.0.0.1", 0), db, model)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def study(tmp_path):
    passages = [MCExample("evil", "Tom <script>window.pwned = 1</script> lives in a small village. "
                                  "<img src=x onerror=\"window.pwned = 2\">",
                          "Where does Tom live?", ("In a small village", "By the sea", "In a city", "<b>x</b>"), 0)]
    write_release({"original": passages}, tmp_path / "evil", name="evil", source={"name": "t"})
    root = tmp_path / "race"
    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "splits": ["charswap"],
                                            "workers": 1}), tmp_path / "rel")
    out = create_study(tmp_path / "rel", tmp_path / "study.db", per_split=2, annotators=2, seed=4)
    evil = create_study(tmp_path / "evil", tmp_path / "evil.db", per_split=1, annotators=1)
    server, url = serve(tmp_path / "study.db")
    evil_server, evil_url = serve(tmp_path / "evil.db")
    yield {"url": url, "tokens": list(out["annotators"].values()), "items": out["items"],
           "evil_url": evil_url, "evil_token": list(evil["annotators"].values())[0], "db": tmp_path / "study.db"}
    for s in (server, evil_server):
        s.shutdown()
        s.server_close()


def _save(browser, expect_suffix=None):
    """Submit the form and wait for the page it leads to (a click does not wait for it)."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.ID, "save").click()
    wait = WebDriverWait(browser, 10)
    wait.until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)
    if expect_suffix:
        wait.until(lambda d: d.current_url.endswith(expect_suffix))


def _click_and_wait(browser, element_id):
    """Click a button that loads a page, and wait for the new page."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    old = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.ID, element_id).click()
    WebDriverWait(browser, 10).until(lambda d: old.id != d.find_element(By.TAG_NAME, "html").id)


def _finish(browser):
    """Press Finish on the progress page, then confirm it on the page that says it is final."""
    _click_and_wait(browser, "finish")
    _click_and_wait(browser, "finish-yes")


def test_annotator_answers_marks_unanswerable_and_resumes(browser, study):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    url, token = study["url"], study["tokens"][0]
    browser.get(f"{url}/a/{token}")
    assert browser.current_url.endswith("/item/0")
    assert "Question 1 of 4" in browser.page_source
    browser.find_element(By.ID, "choice-1").click()
    _save(browser, "/item/1")
    # unanswerable without a reason is refused, with one it is saved
    browser.find_element(By.ID, "choice-unanswerable").click()
    _save(browser)
    assert "choose a reason" in browser.find_element(By.CLASS_NAME, "error").text
    assert browser.current_url.endswith("/item/1")
    browser.find_element(By.ID, "choice-unanswerable").click()
    Select(browser.find_element(By.ID, "reason")).select_by_visible_text("conflicting information")
    browser.find_element(By.ID, "comment").send_keys("two options say the same")
    _save(browser, "/item/2")
    # leave, come back: the app resumes at the first unanswered question
    browser.get("about:blank")
    browser.get(f"{url}/a/{token}")
    assert browser.current_url.endswith("/item/2")
    # the earlier answer is shown and can be changed
    browser.get(f"{url}/a/{token}/item/0")
    assert browser.find_element(By.ID, "choice-1").is_selected()
    browser.find_element(By.ID, "choice-2").click()
    _save(browser, "/item/2")
    browser.get(f"{url}/a/{token}/progress")
    WebDriverWait(browser, 10).until(lambda d: "answered" in d.find_element(By.CLASS_NAME, "progress").text)
    assert "2 of 4 answered" in browser.find_element(By.CLASS_NAME, "progress").text
    browser.get(f"{url}/a/{token}/item/0")
    assert browser.find_element(By.ID, "choice-2").is_selected()


def test_scripts_in_a_passage_are_text_and_never_run(browser, study):
    from selenium.webdriver.common.by import By

    browser.get(f"{study['evil_url']}/a/{study['evil_token']}/item/0")
    passage = browser.find_element(By.CLASS_NAME, "passage").text
    assert "<script>window.pwned = 1</script>" in passage and "<img src=x" in passage
    assert "<b>x</b>" in browser.find_elements(By.CLASS_NAME, "option")[3].text
    time.sleep(0.3)
    assert browser.execute_script("return window.pwned === undefined")
    assert not browser.find_elements(By.CSS_SELECTOR, ".passage script, .passage img")


def test_requests_without_or_with_another_token_are_refused(browser, study):
    from selenium.webdriver.common.by import By

    browser.get(f"{study['url']}/a/not-a-real-token/item/0")
    assert "access denied" in browser.find_element(By.CLASS_NAME, "error").text
    # annotator 2's page cannot write into annotator 1's queue: its form token is annotator 2's
    browser.get(f"{study['url']}/a/{study['tokens'][1]}/item/0")
    form = browser.find_element(By.TAG_NAME, "form")
    browser.execute_script("arguments[0].action = arguments[1]", form,
                           f"{study['url']}/a/{study['tokens'][0]}/item/3")
    browser.find_element(By.ID, "choice-0").click()
    _save(browser)
    assert "wrong form token" in browser.find_element(By.CLASS_NAME, "error").text


def test_a_span_selected_after_an_emoji_is_stored_where_it_was_selected(browser, tmp_path):
    """The DOM counts UTF-16 units, the server characters: the page sends the character offset."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    doc = squad_doc()
    para = doc["data"][0]["paragraphs"][0]
    para["context"] = "\U0001F30A " + para["context"]
    for qa in para["qas"]:
        qa["answers"][0]["answer_start"] += 2
    (tmp_path / "squad.json").write_text(json.dumps(doc), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(tmp_path / "squad.json")}, "splits": [], "workers": 1}),
                  tmp_path / "rel")
    token = list(create_study(tmp_path / "rel", tmp_path / "e.db", per_split=1, annotators=1)["annotators"].values())[0]
    server, url = serve(tmp_path / "e.db")
    try:
        browser.get(f"{url}/a/{token}/item/0")

        def select_sea(d):
            d.execute_script(
                "const box = document.getElementById('context'); const t = box.firstChild;"
                "const s = t.textContent.indexOf('Black Sea'); const r = document.createRange();"
                "r.setStart(t, s); r.setEnd(t, s + 9);"
                "const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);"
                "box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));")
            return d.find_element(By.ID, "selected").text == "Black Sea"

        WebDriverWait(browser, 10).until(select_sea)
        _save(browser, "/progress")
    finally:
        server.shutdown()
        server.server_close()
    row = sqlite3.connect(tmp_path / "e.db").execute("SELECT answer_text, answer_start FROM annotations").fetchone()
    assert row == ("Black Sea", para["context"].index("Black Sea"))


def test_author_edits_and_sees_the_prediction_change(browser, tmp_path):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import WebDriverWait

    create_study(_tiny_release(tmp_path), tmp_path / "a.db", per_split=1, annotators=1)
    token = add_authors(tmp_path / "a.db", ["alice"])["alice"]
    server, url = serve(tmp_path / "a.db", AuthoringModel("sliding-window"))
    try:
        browser.get(f"{url}/author/{token}")
        browser.find_element(By.ID, "passage").send_keys(
            "Tom lives in a small village near the mountains. Mary lives by the sea.")
        browser.find_element(By.ID, "question").send_keys("Where does Tom live?")
        for i, text in enumerate(["in a small village", "by the sea", "in a big city", "on the moon"]):
            browser.find_element(By.ID, f"option-{i}").send_keys(text)
        wait = WebDriverWait(browser, 10)
        wait.until(lambda d: d.find_element(By.ID, "prediction").text == "model predicts A")
        # rewrite option A so that it no longer matches the passage: the prediction follows
        a = browser.find_element(By.ID, "option-0")
        a.clear()
        a.send_keys("in a desert")
        wait.until(lambda d: d.find_element(By.ID, "prediction").text == "model predicts B")
        assert len(browser.find_elements(By.CSS_SELECTOR, "#probabilities .prob")) == 4
        browser.find_element(By.CSS_SELECTOR, "input[name=label][value='0']").click()
        browser.find_element(By.ID, "submit").click()
        wait.until(lambda d: "the model was fooled" in d.find_element(By.ID, "submitted").text)
    finally:
        server.shutdown()
        server.server_close()
    conn = sqlite3.connect(tmp_path / "a.db")
    assert conn.execute("SELECT COUNT(*) FROM submissions WHERE fooled = 1").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM edits WHERE submission_id = 1").fetchone()[0] >= 2


def _tiny_release(tmp_path):
    ex = MCExample("t1", "A passage.", "A question?", ("a", "b", "c", "d"), 0)
    write_release({"original": [ex]}, tmp_path / "tiny", name="tiny", source={"name": "t"})
    return tmp_path / "tiny"


def _squad_release(tmp_path):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "splits": [], "workers": 1}), tmp_path / "squad")
    return tmp_path / "squad"


def _select(browser, element_id, start, end):
    """Select characters [start, end) of a text box, as a drag of the mouse would."""
    browser.execute_script("arguments[0].focus(); arguments[0].setSelectionRange(arguments[1], arguments[2])",
                           browser.find_element("id", element_id), start, end)


def _marked(browser, kind):
    """The paragraph's characters highlighted as `kind` (a span crossed by another is in pieces)."""
    return "".join(m.get_attribute("textContent") for m in browser.find_elements("css selector", f"#highlight mark.{kind}"))


def test_author_writes_a_span_question_that_fools_the_model(browser, span_model, tmp_path):
    """Pick a paragraph, write a question, see the model's answer change after an edit of the
    paragraph, mark an answer the model misses, submit: stored as fooling the model. Then the
    round trip: export-authored -> create -> an annotator selects the answer -> human F1."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    db = tmp_path / "s.db"
    create_study(_squad_release(tmp_path), db, per_split=3, annotators=1)
    token = add_authors(db, ["alice"])["alice"]
    server, url = serve(db, SpanAuthoringModel(span_model))
    wait = WebDriverWait(browser, 15)
    try:
        browser.get(f"{url}/author/{token}")
        Select(browser.find_element(By.ID, "paragraph-pick")).select_by_index(1)
        wait.until(lambda d: "?from=original" in d.current_url)
        paragraph = browser.find_element(By.ID, "paragraph")
        context = paragraph.get_attribute("value")
        assert context.startswith("The Danube is Europe's second-longest river.")
        question = browser.find_element(By.ID, "question")
        question.clear()
        question.send_keys("Which sea does the Danube reach before it ends?")
        wait.until(lambda d: [w.text for w in d.find_elements(By.CSS_SELECTOR, "#importance-question span")]
                   == "Which sea does the Danube reach before it ends?".split())
        first = browser.find_element(By.ID, "prediction").text
        assert first.startswith("model answers “")
        predicted = first[len("model answers “"):-1]
        assert _marked(browser, "predicted") == predicted
        assert len(browser.find_elements(By.CSS_SELECTOR, "#answers li")) == 5
        # edit the paragraph where the model found its answer: the answer changes
        edited = context.replace(predicted, "Atlantis")
        paragraph.clear()
        paragraph.send_keys(edited)
        wait.until(lambda d: d.find_element(By.ID, "prediction").text not in ("", first))
        now = browser.find_element(By.ID, "prediction").text[len("model answers “"):-1]
        assert now in edited and now != predicted
        # mark a word the model's answer does not contain: F1 0, fooled
        word = next(m for m in re.finditer(r"[A-Za-z]+", edited) if m.group().lower() not in now.lower())
        _select(browser, "paragraph", word.start(), word.end())
        browser.find_element(By.ID, "mark").click()
        assert word.group() in browser.find_element(By.ID, "answer-shown").text
        wait.until(lambda d: d.find_element(By.ID, "verdict").text == "F1 against your answer 0.00: fooled")
        assert _marked(browser, "gold") == word.group()
        browser.find_element(By.ID, "submit").click()
        wait.until(lambda d: "the model was fooled" in d.find_element(By.ID, "submitted").text)
    finally:
        server.shutdown()
        server.server_close()
    conn = sqlite3.connect(db)
    assert conn.execute("SELECT COUNT(*) FROM submissions WHERE fooled = 1").fetchone()[0] == 1
    assert conn.execute("SELECT COUNT(*) FROM edits WHERE submission_id = 1").fetchone()[0] >= 3
    example = json.loads(conn.execute("SELECT example FROM submissions").fetchone()[0])
    assert example["answers"] == [{"text": word.group(), "answer_start": word.start()}]
    assert example["context"] == edited and example["title"] == "Danube"

    # the round trip: export, validate in a new study by span selection, report human F1
    export_authored(db, tmp_path / "authored")
    assert check_release(tmp_path / "authored")["task"] == "extractive_qa"
    annotator = list(create_study(tmp_path / "authored", tmp_path / "v.db", per_split=5,
                                  annotators=1)["annotators"].values())[0]
    server, url = serve(tmp_path / "v.db")
    try:
        browser.get(f"{url}/a/{annotator}/item/0")

        def select_answer(d):
            """Select the word with the mouse (a selection, then mouseup); again until the page's
            script, which may start after the page reports loaded, has taken it."""
            d.execute_script(
                "const box = document.getElementById('context'); const r = document.createRange();"
                "r.setStart(box.firstChild, arguments[0]); r.setEnd(box.firstChild, arguments[1]);"
                "const sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(r);"
                "box.dispatchEvent(new MouseEvent('mouseup', {bubbles: true}));", word.start(), word.end())
            return d.find_element(By.ID, "selected").text == word.group()

        wait.until(select_answer)
        _save(browser, "/progress")
    finally:
        server.shutdown()
        server.server_close()
    entry = report.compute(tmp_path / "v.db")["splits"]["human_authored"]
    assert entry["judgements"] == 1 and entry["human_f1"] == 1.0 and entry["correct_rate"] == 1.0


def test_three_annotators_disagree_and_validate_writes_a_release_that_verifies(tmp_path):
    """Three people, each in their own browser, judge every changed question of a split, disagreeing
    on some on purpose, by finding no one right answer or by choosing a distractor; the validated
    release keeps the majority's verdicts (choosing a distractor is an invalid vote) and names its
    study."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select, WebDriverWait

    from advrace.cli import main
    from advrace.core.errors import ConfigError
    from advrace.human_eval import store
    from advrace.human_eval.validate import validate_release

    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path / "race"))},
                                            "splits": ["charswap"], "workers": 1}), tmp_path / "rel")
    db = tmp_path / "study.db"
    out = create_study(tmp_path / "rel", db, splits=["charswap"], all_changed=True, annotators=3, seed=2)
    conn = store.connect(db)
    labels = {item["record_id"]: item["payload"]["label"] for item in store.all_items(conn)}
    record_ids = sorted(labels)
    # who finds no one right answer: nobody, one (kept, 2:1), two (put back, 1:2), all three (put back)
    invalid_by = {record_ids[1]: {"annotator2"}, record_ids[2]: {"annotator1", "annotator3"},
                  record_ids[4]: {"annotator1", "annotator2", "annotator3"}}
    # who chooses a distractor over the gold: two (put back, 1:2), one (kept, 2:1)
    distracted_by = {record_ids[3]: {"annotator1", "annotator2"}, record_ids[5]: {"annotator3"}}
    at = {a["name"]: [store.item(conn, r["item_id"])["record_id"] for r in store.queue(conn, a["id"])]
          for a in store.annotators(conn)}
    conn.close()
    server, url = serve(db)
    drivers = {name: chrome() for name in out["annotators"]}
    try:
        for name, driver in drivers.items():
            driver.get(f"{url}/a/{out['annotators'][name]}")
            assert driver.current_url.endswith("/item/0")
        for pos in range(out["items"]):  # the three sessions take turns, each in its own browser
            for name, driver in drivers.items():
                assert driver.current_url.endswith(f"/item/{pos}")
                rid = at[name][pos]
                if name in invalid_by.get(rid, ()):
                    driver.find_element(By.ID, "choice-unanswerable").click()
                    Select(driver.find_element(By.ID, "reason")).select_by_visible_text("multiple correct options")
                elif name in distracted_by.get(rid, ()):
                    driver.find_element(By.ID, f"choice-{(labels[rid] + 1) % 4}").click()
                else:
                    driver.find_element(By.ID, f"choice-{labels[rid]}").click()
                _save(driver, "/progress" if pos == out["items"] - 1 else f"/item/{pos + 1}")
        # before anyone presses Finish, the study is unfinished
        with pytest.raises(ConfigError, match="unfinished study"):
            validate_release(db, tmp_path / "rel", tmp_path / "validated")
        for name, driver in drivers.items():
            assert f"{out['items']} of {out['items']} answered" in driver.find_element(By.CLASS_NAME, "progress").text
            _finish(driver)
            assert "You have finished" in driver.find_element(By.CSS_SELECTOR, "p.done").text
    finally:
        for driver in drivers.values():
            driver.quit()
        server.shutdown()
        server.server_close()

    assert main(["human-eval", "validate", str(db), str(tmp_path / "rel"), "--out", str(tmp_path / "validated")]) == 0
    assert main(["verify", str(tmp_path / "validated"), "--study", str(db)]) == 0
    manifest = check_release(tmp_path / "validated")
    v = manifest["validation"]["splits"]["charswap"]
    assert (v["judged"], v["valid"], v["invalid"], v["correct"], v["judgements"]) == (7, 4, 3, 12, 21)
    assert v["fleiss_kappa"] is not None and manifest["validation"]["study"]["annotators"] == 3
    card = (tmp_path / "validated" / "README.md").read_text(encoding="utf-8")
    assert "`charswap`: validated by people: 7 items judged, 57.1% valid (95% CI" in card
    assert "57.1% of 21 judgements chose the gold (95% CI" in card
    rows = {r["id"]: r for r in map(json.loads, (tmp_path / "validated" / "data" / "charswap-00000-of-00001.jsonl")
                                    .read_text(encoding="utf-8").splitlines())}
    originals = {r["source_id"]: r for r in map(json.loads, (tmp_path / "rel" / "data" / "original-00000-of-00001.jsonl")
                                                .read_text(encoding="utf-8").splitlines())}
    for rid in (record_ids[2], record_ids[3], record_ids[4]):
        row, orig = rows[rid], originals[rows[rid]["source_id"]]
        assert not row["perturbed"] and (row["passage"], row["question"]) == (orig["passage"], orig["question"])
        assert json.loads(row["provenance"])[-1]["verdict"] == "invalid"
    wrong = "ABCD"[(labels[record_ids[3]] + 1) % 4]
    assert [vote.get("reason") for vote in json.loads(rows[record_ids[3]]["provenance"])[-1]["votes"]] == [
        f"chose option {wrong}", f"chose option {wrong}", None]
    for rid, valid in ((record_ids[1], [True, False, True]), (record_ids[5], [True, True, False])):
        kept = json.loads(rows[rid]["provenance"])[-1]
        assert rows[rid]["perturbed"] and kept["verdict"] == "valid"
        assert [vote["valid"] for vote in kept["votes"]] == valid


# ------------------------------------------------------------ annotating fast and clearly


def _annotator(study, k):
    """Annotator k's row and stored answers ({position: answer row or None}), read now."""
    from advrace.human_eval import store

    conn = store.connect(study["db"])
    try:
        person = store.person_by_token(conn, study["tokens"][k], store.ANNOTATOR)
        return person, {r["position"]: store.annotation(conn, person["id"], r["item_id"])
                        for r in store.queue(conn, person["id"])}
    finally:
        conn.close()


def _answer_at(study, k, pos):
    return _annotator(study, k)[1][pos]


def _keys(browser, *keys):
    """Key presses sent to whatever has the focus (the page itself, after a load)."""
    from selenium.webdriver.common.action_chains import ActionChains

    ActionChains(browser).send_keys(*keys).perform()


def _ready(browser):
    """Wait until app.js has run on the page (it is deferred: a page can report loaded before)."""
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(browser, 10).until(lambda d: d.execute_script("return document.readyState") == "complete")


def test_instructions_on_every_page_and_the_example_on_the_first(browser, study, tmp_path):
    """Every judge page says what a right answer is, that a second right answer is "cannot be
    answered → multiple correct options", and what each other reason means; only the first page
    has the worked example. The passage stays in view when the page scrolls to Save."""
    from selenium.webdriver.common.by import By

    from advrace.human_eval import store

    url, token = study["url"], study["tokens"][0]
    for pos in range(4):
        browser.get(f"{url}/a/{token}/item/{pos}")
        instructions = browser.find_element(By.ID, "instructions")
        assert instructions.is_displayed()
        text = " ".join(instructions.text.split())
        assert "right answer" in text and "The question cannot be answered → multiple correct options" in text
        assert all(reason in text for reason in store.REASONS), text
        assert len(browser.find_elements(By.ID, "example")) == (1 if pos == 0 else 0)
        keys = browser.find_element(By.ID, "keys")
        assert keys.is_displayed() and "u cannot be answered" in " ".join(keys.text.split())
    # a SQuAD study's pages say to select a span, with its own example
    annotator = list(create_study(_squad_release(tmp_path), tmp_path / "q.db", per_split=3,
                                  annotators=1)["annotators"].values())[0]
    server, squad_url = serve(tmp_path / "q.db")
    try:
        browser.get(f"{squad_url}/a/{annotator}/item/0")
        assert "Select the right answer in the paragraph" in browser.find_element(By.ID, "instructions").text
        assert "Select Black Sea" in browser.find_element(By.ID, "example").text
        browser.get(f"{squad_url}/a/{annotator}/item/1")
        assert "multiple correct options" in browser.find_element(By.ID, "instructions").text
        assert not browser.find_elements(By.ID, "example")
    finally:
        server.shutdown()
        server.server_close()
    # a short window: scrolled down to Save, the passage is still on screen beside the question
    size = browser.get_window_size()
    browser.set_window_size(1200, 600)
    try:
        browser.get(f"{url}/a/{token}/item/0")
        browser.execute_script("document.getElementById('save').scrollIntoView()")
        assert browser.execute_script("return window.scrollY") > 0
        top, bottom = browser.execute_script(
            "const r = document.querySelector('.passage').getBoundingClientRect(); return [r.top, r.bottom]")
        assert 0 <= top < 100 < bottom
    finally:
        browser.set_window_size(size["width"], size["height"])


def test_keys_choose_mark_unanswerable_and_save(browser, study):
    """2 then Enter saves option B; u marks "cannot be answered" and puts the focus on the reason,
    whose arrow keys pick one; keys typed into the comment box are text; Tab goes into an edit box."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support.ui import WebDriverWait

    url, token = study["url"], study["tokens"][0]
    wait = WebDriverWait(browser, 10)
    browser.get(f"{url}/a/{token}/item/0")
    _ready(browser)
    _keys(browser, "2")
    assert browser.find_element(By.ID, "choice-1").is_selected()
    _keys(browser, Keys.ENTER)
    wait.until(lambda d: d.current_url.endswith("/item/1"))
    assert _answer_at(study, 0, 0)["choice"] == 1
    assert browser.find_element(By.ID, "queue-progress").get_attribute("value") == "1"
    _ready(browser)
    _keys(browser, "u")
    assert browser.find_element(By.ID, "choice-unanswerable").is_selected()
    assert browser.switch_to.active_element.get_attribute("id") == "reason"
    _keys(browser, Keys.ARROW_DOWN)
    # typing into the comment: the keys are text, Enter a new line, nothing chosen or saved
    comment = browser.find_element(By.ID, "comment")
    comment.click()
    comment.send_keys("3u", Keys.ENTER, "x")
    assert comment.get_attribute("value") == "3u\nx"
    assert browser.find_element(By.ID, "choice-unanswerable").is_selected()
    assert not browser.find_element(By.ID, "choice-2").is_selected()
    assert browser.current_url.endswith("/item/1") and _answer_at(study, 0, 1) is None
    comment.send_keys(Keys.CONTROL, Keys.ENTER)
    wait.until(lambda d: d.current_url.endswith("/item/2"))
    saved = _answer_at(study, 0, 1)
    # (a form sends a new line as CRLF)
    assert (saved["unanswerable"], saved["reason"], saved["comment"]) == (1, "missing key information", "3u\r\nx")
    # Tab goes into the page's edit box (an edit page has one), and keys typed there are text
    _ready(browser)
    browser.execute_script("const box = document.createElement('textarea'); box.id = 'edit-box';"
                           "document.body.append(box);")
    _keys(browser, Keys.TAB)
    assert browser.switch_to.active_element.get_attribute("id") == "edit-box"
    _keys(browser, "4")
    assert browser.find_element(By.ID, "edit-box").get_attribute("value") == "4"
    assert not browser.find_element(By.ID, "choice-3").is_selected()


def test_the_reason_error_keeps_cannot_be_answered_and_the_comment(browser, study):
    """Saving "cannot be answered" without a reason is refused; the page shows again what was sent
    (not the earlier stored answer), so the annotator only picks the reason."""
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    url, token = study["url"], study["tokens"][1]
    browser.get(f"{url}/a/{token}/item/0")
    browser.find_element(By.ID, "choice-0").click()
    _save(browser, "/item/1")
    browser.get(f"{url}/a/{token}/item/0")
    browser.find_element(By.ID, "choice-unanswerable").click()
    browser.find_element(By.ID, "comment").send_keys("B and C are both right")
    _save(browser)
    assert "choose a reason" in browser.find_element(By.CLASS_NAME, "error").text
    assert browser.find_element(By.ID, "choice-unanswerable").is_selected()
    assert not browser.find_element(By.ID, "choice-0").is_selected()
    assert browser.find_element(By.ID, "comment").get_attribute("value") == "B and C are both right"
    Select(browser.find_element(By.ID, "reason")).select_by_visible_text("multiple correct options")
    _save(browser, "/item/1")
    saved = _answer_at(study, 1, 0)
    assert (saved["unanswerable"], saved["reason"], saved["comment"]) == (
        1, "multiple correct options", "B and C are both right")


def test_finish_is_confirmed_and_then_items_are_read_only(browser, study):
    """Finish asks first, on a page that says it is final (going back finishes nothing); after it an
    item page shows the answer with no form, and a save posted anyway gets a page that says why and
    links the progress page."""
    from selenium.webdriver.common.by import By

    url, token = study["url"], study["tokens"][1]
    for pos in range(4):
        browser.get(f"{url}/a/{token}/item/{pos}")
        browser.find_element(By.ID, f"choice-{pos % 4}").click()
        _save(browser)
    browser.get(f"{url}/a/{token}/item/0")
    csrf = browser.find_element(By.NAME, "csrf").get_attribute("value")
    browser.get(f"{url}/a/{token}/progress")
    _click_and_wait(browser, "finish")
    assert "This is final" in browser.find_element(By.ID, "confirm-finish").text
    assert not _annotator(study, 1)[0]["finished"]
    _click_and_wait(browser, "finish-no")
    assert not _annotator(study, 1)[0]["finished"] and browser.find_elements(By.ID, "finish")
    _finish(browser)
    assert _annotator(study, 1)[0]["finished"]
    assert "You have finished" in browser.find_element(By.CSS_SELECTOR, "p.done").text

    browser.get(f"{url}/a/{token}/item/2")
    assert not browser.find_elements(By.TAG_NAME, "form") and not browser.find_elements(By.ID, "save")
    assert "can no longer change" in browser.find_element(By.ID, "finished-note").text
    chosen = browser.find_element(By.CSS_SELECTOR, ".options-shown li.chosen").text
    assert chosen.startswith("C. ") and chosen in browser.find_element(By.ID, "your-answer").text
    before = _answer_at(study, 1, 2)
    # a save posted anyway (an old tab): refused with a page that says so and links the progress
    browser.execute_script(
        "const f = document.createElement('form'); f.method = 'post'; f.action = arguments[0];"
        "for (const [k, v] of [['csrf', arguments[1]], ['choice', '0']]) {"
        "  const i = document.createElement('input'); i.type = 'hidden'; i.name = k; i.value = v; f.append(i); }"
        "document.body.append(f); f.submit();", f"{url}/a/{token}/item/2", csrf)
    link = browser.find_element(By.ID, "next-link")
    assert "no longer change" in browser.find_element(By.CLASS_NAME, "error").text
    assert dict(_answer_at(study, 1, 2)) == dict(before)
    link.click()
    assert browser.current_url.endswith(f"/a/{token}/progress")


def test_the_next_page_loads_without_fetching_the_script_and_style_again(browser, study):
    """The static files' address carries their digest and the browser keeps them: from the second
    page on, only the page itself is fetched (half an item page's load on a busy machine)."""
    url, token = study["url"], study["tokens"][0]
    browser.get(f"{url}/a/{token}/item/0")
    _ready(browser)  # the first page's static files fully loaded (and so kept) before the next page asks
    browser.get(f"{url}/a/{token}/item/1")
    _ready(browser)
    fetched = browser.execute_script(
        "return performance.getEntriesByType('resource').filter(e => e.name.includes('/static/'))"
        ".map(e => [e.name.split('?')[0].split('/').pop(), e.transferSize])")
    assert sorted(name for name, _ in fetched) == ["app.js", "style.css"]
    assert all(size == 0 for _, size in fetched), fetched
