"""The human-evaluation app over HTTP: access, CSRF, answers, resume, the report and the load test."""

import json
import math
import re
import shlex
import socket
import sqlite3
import threading
import urllib.error
import urllib.parse
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from advrace.cli import _parser as advrace_parser, main as advrace_main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.human_eval import report, store
from advrace.human_eval.authoring import AuthoringModel, export_authored
from advrace.human_eval.server import HumanEvalServer
from advrace.human_eval.study import add_authors, create_study
from advrace.models.encoders.mc_encoding import encode_mc, question_with_option
from advrace.models.encoders.mc_scoring import load_checkpoint
from advrace.release import build_release, check_release, read_split, write_release
from advrace.training import train
from conftest import make_race_dir, squad_doc, tiny


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args, **kwargs):
        return None


OPENER = urllib.request.build_opener(NoRedirect)


def request(url, data=None, headers=None):
    body = urllib.parse.urlencode(data).encode() if isinstance(data, dict) else data
    req = urllib.request.Request(url, data=body, headers=headers or {})
    try:
        with OPENER.open(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode(), dict(exc.headers)


@pytest.fixture(scope="module")
def mc_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("he")
    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, root / "rel")
    return root / "rel"


def start(db, model=None):
    server = HumanEvalServer(("127.0.0.1", 0), db, model)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    return server, f"http://127.0.0.1:{server.server_port}"


@pytest.fixture
def study(mc_release, tmp_path):
    # every annotator gets every item, versions of one question too (the app's tests need full queues)
    out = create_study(mc_release, tmp_path / "study.db", per_split=5, seed=1, annotators=3,
                       same_annotator_versions=True)
    server, url = start(tmp_path / "study.db")
    yield {"db": tmp_path / "study.db", "url": url, "tokens": out["annotators"], "items": out["items"]}
    server.shutdown()
    server.server_close()


def csrf_of(html):
    return re.search(r"name=csrf value='([^']+)'", html).group(1)


def test_create_samples_each_split_and_interleaves(mc_release, tmp_path):
    # both annotators get every sampled item, so the versions of a question sampled in both splits
    # come to one annotator: the study has to ask for that (tests/test_human_qc.py: kept apart by default)
    out = create_study(mc_release, tmp_path / "s.db", per_split=4, seed=3, annotators=2, same_annotator_versions=True)
    conn = sqlite3.connect(tmp_path / "s.db")
    per_split = dict(conn.execute("SELECT split, COUNT(*) FROM items GROUP BY split").fetchall())
    assert per_split == {"original": 4, "charswap": 4} and out["items"] == 8
    orders = [[r[0] for r in conn.execute("SELECT i.split FROM queue q JOIN items i ON i.id = q.item_id "
                                           "WHERE q.person_id = ? ORDER BY q.position", (pid,))] for pid in (1, 2)]
    assert all(sorted(o) == sorted(orders[0]) for o in orders)
    assert orders[0] != ["original"] * 4 + ["charswap"] * 4  # interleaved
    assert conn.execute("SELECT COUNT(*) FROM people WHERE token_sha256 = ?",
                        (list(out["annotators"].values())[0],)).fetchone()[0] == 0  # stored hashed only
    create_study(mc_release, tmp_path / "s2.db", per_split=4, seed=3, annotators=2, same_annotator_versions=True)
    conn2 = sqlite3.connect(tmp_path / "s2.db")
    assert conn.execute("SELECT record_id FROM items").fetchall() == conn2.execute("SELECT record_id FROM items").fetchall()
    with pytest.raises(ConfigError, match="already exists"):
        create_study(mc_release, tmp_path / "s.db")


def test_access_needs_the_right_token(study):
    url = study["url"]
    assert request(f"{url}/a/not-a-token")[0] == 403
    assert request(f"{url}/a/")[0] == 404
    alice, bob = list(study["tokens"].values())[:2]
    status, _, headers = request(f"{url}/a/{alice}")
    assert status == 303 and headers["Location"].endswith("/item/0")
    status, html, headers = request(f"{url}/a/{alice}/item/0")
    assert status == 200 and "Referrer-Policy" in headers and "script-src 'self'" in headers["Content-Security-Policy"]
    # bob's form token does not work on alice's queue, and no token at all is refused
    _, bob_html, _ = request(f"{url}/a/{bob}/item/0")
    assert request(f"{url}/a/{alice}/item/0", {"choice": "0", "csrf": csrf_of(bob_html)})[0] == 403
    assert request(f"{url}/a/{alice}/item/0", {"choice": "0"})[0] == 403
    conn = sqlite3.connect(study["db"])
    assert conn.execute("SELECT COUNT(*) FROM annotations").fetchone()[0] == 0


def test_unknown_pages_are_refused_after_the_token_check(study):
    url, token = study["url"], list(study["tokens"].values())[0]
    assert request(f"{url}/")[0] == 200
    assert request(f"{url}/static/app.js")[0] == 200 and request(f"{url}/static/server.py")[0] == 404
    assert request(f"{url}/a/not-a-token/nowhere")[0] == 403  # a wrong token is always refused
    assert request(f"{url}/a/{token}/nowhere")[0] == 404  # the right one, then the page is unknown
    assert request(f"{url}/a/{token}/item/999")[0] == 404
    assert request(f"{url}/a/{token}/finish")[0] == 404  # a write is never a GET
    assert request(f"{url}/author/{token}")[0] == 403  # an annotator's token is no author's


def test_all_sql_is_in_store():
    for path in Path(store.__file__).parent.glob("*.py"):
        if path.name != "store.py":
            text = path.read_text(encoding="utf-8")
            assert not re.search(r"\.execute(many|script)?\(|\b(SELECT|INSERT INTO|DELETE FROM|BEGIN)\b", text), path


def test_answer_unanswerable_change_and_finish(study):
    url, token = study["url"], list(study["tokens"].values())[0]
    _, html, _ = request(f"{url}/a/{token}/item/0")
    csrf = csrf_of(html)
    status, _, headers = request(f"{url}/a/{token}/item/0", {"choice": "1", "csrf": csrf})
    assert status == 303 and headers["Location"].endswith("/item/1")
    # unanswerable needs a reason
    status, html, _ = request(f"{url}/a/{token}/item/1", {"choice": "unanswerable", "csrf": csrf})
    assert status == 422 and "choose a reason" in html
    request(f"{url}/a/{token}/item/1", {"choice": "unanswerable", "reason": "no correct option",
                                        "comment": "all wrong", "csrf": csrf})
    # resume: the entry point goes to the first unanswered item
    assert request(f"{url}/a/{token}")[2]["Location"].endswith("/item/2")
    # change an answer
    request(f"{url}/a/{token}/item/0", {"choice": "2", "csrf": csrf})
    conn = store.connect(study["db"])
    rows = store.annotations(conn)
    assert [(r["choice"], r["unanswerable"], r["reason"]) for r in rows if r["annotator"] == "annotator1"] in (
        [(2, 0, None), (None, 1, "no correct option")], [(None, 1, "no correct option"), (2, 0, None)])
    assert {r["revisions"] for r in rows} == {0, 1}
    for pos in range(2, study["items"] - 1):
        request(f"{url}/a/{token}/item/{pos}", {"choice": "0", "csrf": csrf})
    # Finish waits for every question: one left open is refused, nothing is marked finished
    status, html, _ = request(f"{url}/a/{token}/finish", {"csrf": csrf})
    assert status == 409 and "1 question of your queue still without an answer" in html and "/progress" in html
    conn = store.connect(study["db"])
    assert not [p for p in store.annotators(conn) if p["name"] == "annotator1"][0]["finished"]
    conn.close()
    request(f"{url}/a/{token}/item/{study['items'] - 1}", {"choice": "0", "csrf": csrf})
    _, progress, _ = request(f"{url}/a/{token}/progress")
    assert f"{study['items']} of {study['items']} answered" in progress and "Finish" in progress
    request(f"{url}/a/{token}/finish", {"csrf": csrf})
    assert request(f"{url}/a/{token}/item/0", {"choice": "3", "csrf": csrf})[0] == 409


def test_text_is_escaped(mc_release, tmp_path):
    evil = MCExample("x1", "Hello <script>window.pwned=1</script> <b>bold</b>", "Which <i>one</i>?",
                     ("<img src=x onerror=alert(1)>", "b", "c", "d"), 1)
    write_release({"original": [evil]}, tmp_path / "evil", name="evil", source={"name": "t"})
    out = create_study(tmp_path / "evil", tmp_path / "e.db", per_split=1, annotators=1)
    server, url = start(tmp_path / "e.db")
    try:
        _, html, _ = request(f"{url}/a/{list(out['annotators'].values())[0]}/item/0")
    finally:
        server.shutdown()
        server.server_close()
    assert "<script>window" not in html and "&lt;script&gt;window.pwned=1&lt;/script&gt;" in html
    assert "<img src=x" not in html and "<i>one" not in html


def test_squad_items_take_a_span(tmp_path):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "splits": [], "workers": 1}), tmp_path / "rel")
    out = create_study(tmp_path / "rel", tmp_path / "q.db", per_split=3, annotators=2, seed=0)
    server, url = start(tmp_path / "q.db")
    try:
        tokens = list(out["annotators"].values())
        conn = store.connect(tmp_path / "q.db")
        for k, token in enumerate(tokens):
            _, html, _ = request(f"{url}/a/{token}/item/0")
            csrf = csrf_of(html)
            for row in store.queue(conn, k + 1):
                item = store.item(conn, row["item_id"])
                gold = item["payload"]["answers"][0]
                answer = gold["text"] if k == 0 else "Danube"
                offset = gold["answer_start"] if k == 0 else item["payload"]["context"].index("Danube")
                status, page_html, _ = request(f"{url}/a/{token}/item/{row['position']}",
                                               {"choice": "answer", "answer_text": answer,
                                                "answer_start": str(offset), "csrf": csrf})
                assert status == 303, page_html
            bad = request(f"{url}/a/{token}/item/0", {"choice": "answer", "answer_text": "not in it", "csrf": csrf})
            assert bad[0] == 422 and "span of the paragraph" in bad[1]
    finally:
        server.shutdown()
        server.server_close()
    result = report.compute(tmp_path / "q.db")
    entry = result["splits"]["original"]
    # one annotator selects each gold, the other "Danube" (no gold answer): a tie on every item, so invalid
    assert entry["judgements"] == 6 and entry["valid_rate"] == 0.0 and entry["judged"] == 3
    assert entry["correct_rate"] == pytest.approx(0.5)
    assert 0.5 <= entry["human_f1"] < 1.0


def test_a_span_whose_offset_does_not_match_is_refused_not_moved(tmp_path):
    """The annotator's client must send where the selection starts; a span that is not at that
    offset (or has none) is refused, never stored at another occurrence of the same words."""
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "splits": [], "workers": 1}), tmp_path / "rel")
    out = create_study(tmp_path / "rel", tmp_path / "q.db", per_split=3, annotators=1, seed=0)
    token = list(out["annotators"].values())[0]
    server, url = start(tmp_path / "q.db")
    try:
        _, html, _ = request(f"{url}/a/{token}/item/0")
        csrf = csrf_of(html)
        for offset, told in [("0", "at character 0 (“The Da” is there)"), ("", "without its position")]:
            status, page, _ = request(f"{url}/a/{token}/item/0", {"choice": "answer", "answer_text": "Danube",
                                                                   "answer_start": offset, "csrf": csrf})
            assert status == 422 and "Question 1 of 3" in page
            assert "the answer “Danube”" in page and told in page
        conn = store.connect(tmp_path / "q.db")
        assert store.annotation(conn, 1, store.queue(conn, 1)[0]["item_id"]) is None
    finally:
        server.shutdown()
        server.server_close()


def test_report_numbers_by_hand(mc_release, tmp_path):
    create_study(mc_release, tmp_path / "r.db", per_split=2, seed=0, annotators=3)
    conn = store.connect(tmp_path / "r.db")
    items = conn.execute("SELECT id, split, payload FROM items ORDER BY id").fetchall()
    labels = {r["id"]: json.loads(r["payload"])["label"] for r in items}
    # item-by-item answers of annotators 1..3: 'c' correct, 'w' a wrong option, 'u' unanswerable
    plan = {items[0]["id"]: "ccc", items[1]["id"]: "ccw", items[2]["id"]: "cuu", items[3]["id"]: "www"}
    for iid, answers in plan.items():
        for pid, a in zip((1, 2, 3), answers):
            if a == "u":
                store.save_annotation(conn, pid, iid, unanswerable=True, reason="missing key information")
            else:
                store.save_annotation(conn, pid, iid, choice=labels[iid] if a == "c" else (labels[iid] + 1) % 4)
    result = report.write(tmp_path / "r.db", tmp_path / "out")
    by_split = {}
    for r in items:
        by_split.setdefault(r["split"], []).append(plan[r["id"]])
    for split, plans in by_split.items():
        flat = "".join(plans)
        e = result["splits"][split]
        assert e["judgements"] == len(flat)
        # valid: the items whose majority chose the gold (a wrong option is no valid vote); correct: the judgements
        assert e["valid_rate"] == pytest.approx(sum(p.count("c") >= 2 for p in plans) / len(plans))
        assert e["correct_rate"] == pytest.approx(flat.count("c") / len(flat))
        lo, hi = e["correct_ci"]
        assert lo <= e["correct_rate"] <= hi
    assert sum(e["valid"] for e in result["splits"].values()) == 2
    # Fleiss' kappa over all four items, of the vote: chose the gold or not
    assert result["fleiss_kappa"] == pytest.approx(report.fleiss_kappa(
        [["gold" if a == "c" else "not" for a in answers] for answers in plan.values()]))
    assert len(result["disagreements"]) == 2
    assert {"report.json", "report.md", "report.png"} <= {p.name for p in (tmp_path / "out").iterdir()}
    assert "missing key information: 2" in (tmp_path / "out" / "report.md").read_text()
    assert report.export_jsonl(tmp_path / "r.db", tmp_path / "a.jsonl") == 12


def test_fleiss_kappa_and_wilson_by_hand():
    # Fleiss (1971)-style toy: 3 items, 2 raters, perfect agreement on distinct categories -> 1
    assert report.fleiss_kappa([["a", "a"], ["b", "b"], ["c", "c"]]) == pytest.approx(1.0)
    # p_a = p_b = 0.5, every item split -> P_bar = 0, P_e = 0.5 -> kappa = -1
    assert report.fleiss_kappa([["a", "b"], ["b", "a"]]) == pytest.approx(-1.0)
    lo, hi = report.wilson(45, 50)
    assert lo == pytest.approx(0.7864, abs=1e-3) and hi == pytest.approx(0.9565, abs=1e-3)


def test_twenty_annotators_fifty_answers_each_store_exactly_1000(tmp_path):
    examples = [MCExample(f"q{i}", f"Passage number {i}.", f"Question {i}?", ("a", "b", "c", "d"), i % 4)
                for i in range(25)]
    write_release({"original": examples, "other": examples}, tmp_path / "rel", name="load", source={"name": "t"})
    # the two splits hold the same 25 questions, and everyone answers all 50
    out = create_study(tmp_path / "rel", tmp_path / "load.db", per_split=25, annotators=20, seed=2,
                       same_annotator_versions=True)
    assert out["items"] == 50
    server, url = start(tmp_path / "load.db")

    def annotate(token):
        _, html, _ = request(f"{url}/a/{token}/item/0")
        csrf = csrf_of(html)
        codes = [request(f"{url}/a/{token}/item/{pos}", {"choice": str(pos % 4), "csrf": csrf})[0]
                 for pos in range(50)]
        codes.append(request(f"{url}/a/{token}/item/7", {"choice": "1", "csrf": csrf})[0])  # a repeat
        return codes

    try:
        with ThreadPoolExecutor(20) as pool:
            results = list(pool.map(annotate, out["annotators"].values()))
    finally:
        server.shutdown()
        server.server_close()
    assert all(code == 303 for codes in results for code in codes)
    conn = sqlite3.connect(tmp_path / "load.db")
    assert conn.execute("SELECT COUNT(*) FROM annotations").fetchone()[0] == 1000
    assert conn.execute("SELECT COUNT(DISTINCT person_id || '-' || item_id) FROM annotations").fetchone()[0] == 1000
    assert conn.execute("SELECT SUM(revisions) FROM annotations").fetchone()[0] == 20


def test_authoring_api_records_edits_and_exports_a_release(mc_release, tmp_path):
    create_study(mc_release, tmp_path / "a.db", per_split=1, annotators=1)
    token = add_authors(tmp_path / "a.db", ["alice"])["alice"]
    server, url = start(tmp_path / "a.db", AuthoringModel("sliding-window"))
    try:
        status, html, _ = request(f"{url}/author/{token}")
        assert status == 200
        csrf = re.search(r"data-csrf='([^']+)'", html).group(1)
        draft = {"passage": "Tom lives in a small village near the mountains.", "question": "Where does Tom live?",
                 "options": ["in a small village", "by the sea", "in a city", "on a boat"], "label": 1}
        headers = {"Content-Type": "application/json", "X-CSRF-Token": csrf}
        status, body, _ = request(f"{url}/author/{token}/predict", json.dumps(draft).encode(), headers)
        out = json.loads(body)
        assert status == 200 and out["prediction"] == 0 and abs(sum(out["probabilities"]) - 1) < 1e-6
        assert request(f"{url}/author/{token}/predict", json.dumps(draft).encode(),
                       {"Content-Type": "application/json"})[0] == 403
        status, body, _ = request(f"{url}/author/{token}/submit", json.dumps(draft).encode(), headers)
        assert status == 200 and json.loads(body)["fooled"] is True
    finally:
        server.shutdown()
        server.server_close()
    manifest, _ = export_authored(tmp_path / "a.db", tmp_path / "authored")
    assert check_release(tmp_path / "authored")["splits"]["human_authored"]["count"] == 1
    ex = read_split(tmp_path / "authored", "human_authored")[0]
    record = ex.provenance[0]
    assert record.author == "alice" and record.fooled and len(record.history) == 2
    assert ex.options[ex.label] == "by the sea" and manifest["task"] == MULTIPLE_CHOICE


def test_word_importance_from_a_checkpoint(tokenizer_dir, race_dir, tmp_path):
    """Gradient x embedding per word (Wallace et al., eq. 1), summed over sub-tokens."""
    run = train(tiny(tokenizer_dir, race_dir, tmp_path, max_steps=2, epochs=1), progress=False)
    model = AuthoringModel(run["final"], max_length=96)
    passage = "Tom lives in a small village near the mountains."
    question = "Mrs Green often tells stories about  _  ."
    out = model.analyse(passage, question, ["famous scientists", "football", "mountains", "pianists"])
    assert abs(sum(out["probabilities"]) - 1) < 1e-6 and 0 <= out["prediction"] < 4
    words = out["importance"]["passage"]
    assert [passage[s:e] for s, e, _ in words] == passage.split()
    assert max(abs(v) for _, _, v in words) == pytest.approx(1.0)
    q_words = out["importance"]["question"]
    assert [question[s:e] for s, e, _ in q_words] == question.split()
    assert all(v == 0 for s, _, v in q_words if s >= question.index("_"))  # the blank holds the option
    assert model.analyse(passage, question, ["famous scientists", "football", "mountains", "pianists"]) == out


def test_authoring_model_sees_what_evaluation_scores(tokenizer_dir, race_dir, tmp_path):
    """One encoder for training, evaluation and authoring: the page's model gets encode_mc's
    input ids and gives the evaluation scorer's option scores, also where the input is truncated
    (authoring used to truncate only the passage, at 384 tokens)."""
    run = train(tiny(tokenizer_dir, race_dir, tmp_path, max_steps=2, epochs=1), progress=False)
    assert AuthoringModel(run["final"]).max_length == load_checkpoint(run["final"]).max_length  # the same default
    passage = ("Tom lives in a small village near the mountains. Every morning he walks to school with his "
               "sister Mary. Their teacher, Mrs Green, often tells them stories about famous scientists.")
    question = "_ is what Mrs Green often tells Tom and his sister Mary about after school, near the mountains."
    options = ["stories about famous scientists", "football", "the mountains", "pianists"]
    example = MCExample("draft", passage, question, tuple(options), 0)
    for max_length in (32, 512):
        model = AuthoringModel(run["final"], max_length=max_length)
        scorer = load_checkpoint(run["final"], max_length=max_length, bf16=False)
        ids = model.encode(example).input_ids
        assert ids == encode_mc(scorer.tokenizer, [example], max_length)[0].input_ids
        if max_length == 32:  # truncated: the passage-only truncation of old gives other inputs
            old = scorer.tokenizer([passage] * 4, [question_with_option(question, o) for o in options],
                                   truncation="only_first", max_length=max_length)["input_ids"]
            assert all(len(x) == max_length for x in ids) and len(set(ids)) == 4  # every option kept
            assert [list(x) for x in ids] != old
        scores = scorer.predict_mc([example])[0]
        top = max(scores)
        expected = [math.exp(s - top) / sum(math.exp(t - top) for t in scores) for s in scores]
        out = model.analyse(passage, question, options)
        assert out["probabilities"] == pytest.approx(expected, rel=0, abs=1e-8)
        assert out["prediction"] == scores.index(top)
        # importance only for the words the model saw: past the truncation, words score 0
        words = out["importance"]["passage"]
        assert [passage[s:e] for s, e, _ in words] == passage.split()
        if max_length == 32:
            assert words[-1][2] == 0 and any(v != 0 for _, _, v in words)


def created_links_and_command(capsys, release, db, *flags):
    """The links and the serve command that `human-eval create` prints."""
    assert advrace_main(["human-eval", "create", str(release), "--db", str(db), "--per-split", "1",
                         "--annotators", "2", *flags]) == 0
    out = capsys.readouterr().out
    links = re.findall(r"^  annotator\d+: (\S+)$", out, re.M)
    command = re.search(r"^Start the app with: (.+)$", out, re.M).group(1)
    return [urllib.parse.urlsplit(link) for link in links], shlex.split(command)


@pytest.mark.parametrize("flags", [["--port", "8765"], ["--host", "10.1.2.3", "--port", "9001"], []])
def test_create_prints_the_serve_command_that_serves_its_links(mc_release, tmp_path, capsys, flags):
    """Followed literally, the printed command serves the printed links (it used to leave out
    --port, so a study created with --port 8765 was served on 8000 and every link was dead)."""
    db = tmp_path / "my studies" / "study.db"  # a path that needs quoting
    db.parent.mkdir()
    links, words = created_links_and_command(capsys, mc_release, db, *flags)
    assert words[0] == "advrace" and len(links) == 2
    args = advrace_parser().parse_args(words[1:])
    assert (args.command, args.human_command, args.db) == ("human-eval", "serve", str(db))
    assert {(link.hostname, link.port) for link in links} == {(args.host, args.port)}
    assert args.port == (int(flags[flags.index("--port") + 1]) if flags else 8000)


def test_create_on_every_interface_links_to_this_machine(mc_release, tmp_path, capsys):
    links, words = created_links_and_command(capsys, mc_release, tmp_path / "s.db", "--host", "0.0.0.0",
                                             "--port", "8766")
    args = advrace_parser().parse_args(words[1:])
    assert (args.host, args.port) == ("0.0.0.0", 8766)  # binds every interface, the links' host included
    assert {(link.hostname, link.port) for link in links} == {(socket.gethostname().lower(), 8766)}


@pytest.fixture(scope="module")
def probe_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("probes")
    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(root))}, "workers": 1, "splits": [
        "charswap", "option_only", {"attack": "option_only", "name": "pq_charswap", "from": "charswap"}]})
    build_release(cfg, root / "rel")
    return root / "rel"


def test_probe_splits_are_left_out_unless_named(probe_release, tmp_path, capsys):
    """option_only has no passage and no question: nobody can validate it. A probe is known by its
    attack in the manifest, so one under another name (pq_charswap) is left out too."""
    out = create_study(probe_release, tmp_path / "d.db", per_split=2, annotators=1)
    assert out["splits"] == ["original", "charswap"] and out["left_out"] == ["option_only", "pq_charswap"]
    conn = sqlite3.connect(tmp_path / "d.db")
    assert {r[0] for r in conn.execute("SELECT DISTINCT split FROM items")} == {"original", "charswap"}
    assert advrace_main(["human-eval", "create", str(probe_release), "--db", str(tmp_path / "o.db"),
                         "--per-split", "2", "--annotators", "1", "--splits", "option_only"]) == 0
    assert "left out" not in capsys.readouterr().out
    conn = sqlite3.connect(tmp_path / "o.db")
    assert [r[0] for r in conn.execute("SELECT DISTINCT split FROM items")] == ["option_only"]
    out = create_study(probe_release, tmp_path / "n.db", per_split=1, annotators=1,
                       splits=["charswap", "pq_charswap"])
    assert out["splits"] == ["charswap", "pq_charswap"] and out["left_out"] == []


def test_splits_nobody_annotated_report_na_not_zero(mc_release, tmp_path):
    create_study(mc_release, tmp_path / "r.db", per_split=2, seed=0, annotators=2)
    conn = store.connect(tmp_path / "r.db")
    items = conn.execute("SELECT id, split, payload FROM items WHERE split = 'charswap'").fetchall()
    for r in items:
        store.save_annotation(conn, 1, r["id"], choice=json.loads(r["payload"])["label"])
    result = report.write(tmp_path / "r.db", tmp_path / "out")
    saved = json.loads((tmp_path / "out" / "report.json").read_text())
    assert result["splits"]["charswap"]["correct_rate"] == 1.0
    for entry in (result["splits"]["original"], saved["splits"]["original"]):
        assert entry["judgements"] == 0
        assert [entry[k] for k in ("valid_rate", "valid_ci", "correct_rate", "correct_ci", "fleiss_kappa")] == [None] * 5
    md = (tmp_path / "out" / "report.md").read_text()
    row = next(line for line in md.splitlines() if line.startswith("| original |"))
    assert row == "| original | 2 | 0 | 0 | n/a | n/a | n/a |" and "0.0% (95% CI 0.0–0.0)" not in md
    # one of two judgements in on each charswap item: correct, but no verdict yet, so no valid rate
    charswap = result["splits"]["charswap"]
    assert charswap["valid_rate"] is None and charswap["judged"] == 0
    assert (tmp_path / "out" / "report.png").stat().st_size > 0
    # SQuAD: human F1 is n/a too, and a study nobody answered still reports
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "splits": [], "workers": 1}), tmp_path / "sq")
    create_study(tmp_path / "sq", tmp_path / "q.db", per_split=2, annotators=1)
    entry = report.write(tmp_path / "q.db", tmp_path / "qout")["splits"]["original"]
    assert entry["human_f1"] is None and entry["human_f1_ci"] is None
    assert "| original | 2 | 0 | 0 | n/a | n/a | n/a | n/a |" in (tmp_path / "qout" / "report.md").read_text()


def test_add_person_returns_the_new_row_id_with_the_token(tmp_path):
    conn = store.connect(tmp_path / "p.db")
    try:
        store.init(conn)
        ids = [store.add_person(conn, name, store.ANNOTATOR) for name in ("ann", "bob")]
        rows = {r["name"]: r["id"] for r in conn.execute("SELECT id, name FROM people")}
        assert [pid for pid, _ in ids] == [rows["ann"], rows["bob"]]
        assert store.person_by_token(conn, ids[1][1])["name"] == "bob"
    finally:
        conn.close()


def test_a_rewrite_added_after_finish_shows_even_for_who_had_none(study):
    """Finish records the sha256 of a person's candidates also when they have none: one written
    into the database afterwards (a mend for a judge who mended nothing) is a tampered study."""
    from advrace.human_eval.validate import answer_problems, read_study

    conn = store.connect(study["db"])
    person = store.annotators(conn)[0]
    for row in store.queue(conn, person["id"]):
        store.save_annotation(conn, person["id"], row["item_id"], choice=0)
    store.mark_finished(conn, person["id"])
    assert answer_problems(read_study(study["db"])) == []
    store.save_candidate(conn, person["id"], store.queue(conn, person["id"])[0]["item_id"], option=1, text="a cat")
    conn.close()
    assert f"{person['name']}'s edits or mends changed after they pressed Finish" in answer_problems(
        read_study(study["db"]))


def test_a_study_database_of_an_earlier_advrace_is_brought_to_the_schema(tmp_path):
    """A database written before item kinds, candidates and verify answers existed: opening it adds
    what is missing, and its items read as the judge items they were."""
    db = tmp_path / "old.db"
    conn = sqlite3.connect(db)
    conn.executescript(
        "CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);"
        "CREATE TABLE items (id INTEGER PRIMARY KEY, split TEXT NOT NULL, record_id TEXT NOT NULL, "
        "source_id TEXT NOT NULL, task TEXT NOT NULL, payload TEXT NOT NULL);"
        "CREATE TABLE annotations (id INTEGER PRIMARY KEY, person_id INTEGER NOT NULL, item_id INTEGER NOT NULL, "
        "choice INTEGER, answer_text TEXT, answer_start INTEGER, unanswerable INTEGER NOT NULL DEFAULT 0, "
        "reason TEXT, comment TEXT, created REAL NOT NULL, updated REAL NOT NULL, "
        "revisions INTEGER NOT NULL DEFAULT 0, UNIQUE (person_id, item_id));"
        "INSERT INTO items VALUES (1, 'charswap', 'charswap/q1', 'q1', 'multiple_choice', '{}');")
    conn.close()
    conn = store.connect(db)
    assert [(i["id"], i["kind"], i["candidate_id"]) for i in store.all_items(conn)] == [(1, store.JUDGE, None)]
    assert "grammatical" in {r[1] for r in conn.execute("PRAGMA table_info(annotations)")}
    assert store.candidates(conn) == [] and store.views(conn) == []
    conn.close()


def test_a_split_the_release_does_not_have_is_refused_by_name(mc_release, tmp_path):
    with pytest.raises(ConfigError, match=r"no split\(s\) nope, nor"):
        create_study(mc_release, tmp_path / "s.db", per_split=2, splits=["charswap", "nope", "nor"])
    assert not (tmp_path / "s.db").exists()
