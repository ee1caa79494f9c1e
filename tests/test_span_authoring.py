"""Authoring span questions (SQuAD) against a span model: the analysis the page shows, the API
that checks and stores drafts, and the write -> export -> validate -> report loop over HTTP."""

import json
import re

import pytest

from advrace.cli import main as advrace_main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.examples import SpanExample
from advrace.core.provenance import Authored
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.human_eval import report, store
from advrace.human_eval.authoring import (AuthoringModel, export_authored, load_authoring_model, model_task,
                                          submit)
from advrace.human_eval.span_authoring import SpanAuthoringModel
from advrace.human_eval.study import add_authors, create_study
from advrace.models.encoders.span_scoring import answer_distribution, load_span_model
from advrace.release import build_release, check_release, read_split
from advrace.training import train
from conftest import squad_doc, tiny
from test_human_eval import request, start

CONTEXT = squad_doc()["data"][0]["paragraphs"][0]["context"]
QUESTION = "Which sea does the Danube reach before it ends?"


@pytest.fixture(scope="module")
def author_model(span_model):
    return SpanAuthoringModel(span_model)


@pytest.fixture(scope="module")
def squad_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("squad-rel")
    (root / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(root / "squad.json")}, "splits": [], "workers": 1}),
                  root / "rel")
    return root / "rel"


def test_the_page_shows_what_evaluation_scores(span_model, author_model):
    """Answers, probabilities and the predicted span are the evaluation scorer's n-best list (in
    fp32), also for a paragraph read in several windows."""
    scorer = load_span_model(span_model, bf16=False)
    long_context = " ".join([CONTEXT] * 4)
    for context in (CONTEXT, long_context):
        out = author_model.analyse(context, QUESTION)
        n_best = scorer.n_best([QUESTION], [context], 20)[0]
        assert [a["text"] for a in out["answers"]] == [s.text for s in n_best[:5]]
        assert [(a["start"], a["end"]) for a in out["answers"]] == [(s.start, s.end) for s in n_best[:5]]
        expected = [p for _, p in answer_distribution(n_best)][:5]
        assert [a["probability"] for a in out["answers"]] == pytest.approx(expected, abs=1e-5)
        assert out["prediction"] == {"text": n_best[0].text, "start": n_best[0].start, "end": n_best[0].end}
        assert context[out["prediction"]["start"]:out["prediction"]["end"]] == out["prediction"]["text"]
        assert author_model.analyse(context, QUESTION) == out  # the same draft, the same page


def test_word_importance_over_the_question_and_the_paragraph(author_model):
    """Gradient x embedding of the predicted span's start and end logits, per word; in a long
    paragraph only the words of the window the prediction came from score."""
    out = author_model.analyse(CONTEXT, QUESTION)
    q_words = out["importance"]["question"]
    assert [QUESTION[s:e] for s, e, _ in q_words] == QUESTION.split()
    assert max(abs(v) for _, _, v in q_words) == pytest.approx(1.0)
    c_words = out["importance"]["context"]
    assert [CONTEXT[s:e] for s, e, _ in c_words] == CONTEXT.split()
    assert max(abs(v) for _, _, v in c_words) == pytest.approx(1.0)
    long_context = " ".join([CONTEXT] * 4)
    words = author_model.analyse(long_context, QUESTION)["importance"]["context"]
    assert sum(1 for *_, v in words if v == 0) > len(words) // 2  # the 64-token window sees a part
    # the question's words are the scored ones: a changed word changes the importance
    other = author_model.analyse(CONTEXT, "Which river flows through ten countries?")
    assert [w[:2] for w in other["importance"]["question"]] != [w[:2] for w in q_words]


def test_the_model_task_comes_from_the_checkpoint(span_model, tokenizer_dir, race_dir, tmp_path):
    assert model_task(span_model) == EXTRACTIVE_QA
    assert model_task("sliding-window") == MULTIPLE_CHOICE
    mc = train(tiny(tokenizer_dir, race_dir, tmp_path, max_steps=1, epochs=1), progress=False)["final"]
    assert model_task(mc) == MULTIPLE_CHOICE
    assert isinstance(load_authoring_model(span_model), SpanAuthoringModel)
    assert isinstance(load_authoring_model(mc), AuthoringModel)
    # a folder that `advrace train` did not write: its config's architecture says
    from transformers import AutoModelForQuestionAnswering

    plain = tmp_path / "plain-qa"
    AutoModelForQuestionAnswering.from_pretrained(span_model).save_pretrained(plain)
    assert model_task(plain) == EXTRACTIVE_QA
    assert model_task(tmp_path / "nothing-here") == MULTIPLE_CHOICE  # loading it reports the problem


def _author(db, model):
    token = add_authors(db, ["alice"])["alice"]
    server, url = start(db, model)
    _, html, _ = request(f"{url}/author/{token}")
    csrf = re.search(r"data-csrf='([^']+)'", html).group(1)
    headers = {"Content-Type": "application/json", "X-CSRF-Token": csrf}

    def post(path, draft):
        status, body, _ = request(f"{url}/author/{token}/{path}", json.dumps(draft).encode(), headers)
        return status, json.loads(body)

    return server, url, token, html, post


def test_drafts_are_checked_analysed_and_stored(author_model, squad_release, tmp_path):
    db = tmp_path / "a.db"
    create_study(squad_release, db, per_split=3, annotators=1)
    server, url, token, html, post = _author(db, author_model)
    try:
        assert "span-author-form" in html and "Start from a paragraph of the study" in html
        assert html.count("<option value='original/") == 1  # three questions, one paragraph
        assert "[original] Danube: The Danube is Europe" in html
        record_id = re.search(r"<option value='(original/[^']+)'", html).group(1)
        _, picked, _ = request(f"{url}/author/{token}?from={record_id}")
        assert "The Danube is Europe&#39;s second-longest river." in picked
        status, out = post("predict", {"context": "", "question": ""})  # the page opens blank
        assert status == 200 and out == {"answers": [], "prediction": None, "importance": None}
        status, out = post("predict", {"context": CONTEXT, "question": QUESTION})
        assert status == 200 and "model_f1" not in out and out["prediction"]["text"]
        predicted = out["prediction"]
        # the answer's offsets are checked against the paragraph
        status, out = post("predict", {"context": CONTEXT, "question": QUESTION, "answer_text": "Black Sea",
                                       "answer_start": 3})
        assert status == 422 and "not the paragraph's text at character 3" in out["error"]
        status, out = post("submit", {"context": CONTEXT, "question": QUESTION})
        assert status == 422 and out["error"] == "mark the answer in the paragraph"
        status, out = post("predict", {"context": "x" * 20001, "question": QUESTION})
        assert status == 422 and out["error"] == "the paragraph is too long (20,000 characters at most)"
        assert post("predict", {"context": 3, "question": QUESTION})[1]["error"] == "paragraph and question must be text"
        # an answer that shares no word with the model's: fooled
        words = [m for m in re.finditer(r"[A-Za-z]+", CONTEXT)
                 if m.group().lower() not in predicted["text"].lower()]
        gold = words[-1]
        draft = {"context": CONTEXT, "question": QUESTION, "title": "Danube", "answer_text": gold.group(),
                 "answer_start": gold.start(), "source": record_id}
        status, out = post("submit", draft)
        assert status == 200 and out["fooled"] is True and out["model_f1"] == 0.0
        # the model's own answer: not fooled
        status, out = post("submit", {**draft, "answer_text": predicted["text"], "answer_start": predicted["start"]})
        assert status == 200 and out["fooled"] is False and out["model_f1"] == 1.0
    finally:
        server.shutdown()
        server.server_close()
    conn = store.connect(db)
    rows = store.submissions(conn)
    assert [r["fooled"] for r in rows] == [True, False]
    assert rows[0]["author"] == "alice" and rows[0]["model"] == author_model.name
    assert len(rows[0]["history"]) == 3  # two accepted predictions and the submission (refusals are no edits)
    assert rows[0]["history"][-1]["output"]["fooled"] is True
    assert rows[0]["example"]["answers"] == [{"text": gold.group(), "answer_start": gold.start()}]


def test_authored_span_questions_go_through_a_study(author_model, squad_release, tmp_path, capsys):
    """write -> export-authored (a SQuAD release that verifies) -> create -> annotate by span
    selection -> the report's human F1 for the authored split."""
    db = tmp_path / "w.db"
    server, url, token, html, post = _author(db, author_model)
    try:
        assert "Start from a paragraph" not in html  # no study: paste a paragraph
        for question, answer in [("Which sea does the river reach?", "Black Sea"),
                                 ("Name a city on its banks.", "Vienna")]:
            status, out = post("submit", {"context": CONTEXT, "question": question, "answer_text": answer,
                                          "answer_start": CONTEXT.index(answer)})
            assert status == 200, out
    finally:
        server.shutdown()
        server.server_close()
    assert advrace_main(["human-eval", "export-authored", str(db), "--out", str(tmp_path / "authored")]) == 0
    fooled = sum(1 for r in store.submissions(store.connect(db)) if r["fooled"])
    assert capsys.readouterr().out.strip().endswith(
        f"2 extractive_qa questions in split human_authored, {fooled} of which fooled the model")
    assert check_release(tmp_path / "authored")["task"] == EXTRACTIVE_QA
    examples = read_split(tmp_path / "authored", "human_authored")
    assert all(isinstance(ex, SpanExample) for ex in examples)
    assert [ex.answers[0].text for ex in examples] == ["Black Sea", "Vienna"]
    record = examples[0].provenance[0]
    assert isinstance(record, Authored) and record.author == "alice" and record.history
    assert record.model_answer == record.history[-1]["output"]["prediction"]["text"]

    out = create_study(tmp_path / "authored", tmp_path / "v.db", per_split=5, annotators=1)
    annotator = next(iter(out["annotators"].values()))
    server, url = start(tmp_path / "v.db")
    try:
        _, page, _ = request(f"{url}/a/{annotator}/item/0")
        assert "id=context" in page  # span selection
        csrf = re.search(r"name=csrf value='([^']+)'", page).group(1)
        conn = store.connect(tmp_path / "v.db")
        for row in store.queue(conn, 1):
            item = store.item(conn, row["item_id"])
            gold = item["payload"]["answers"][0]["text"]
            answer = gold if gold == "Black Sea" else "Budapest"  # one right, one wrong
            status, body, _ = request(f"{url}/a/{annotator}/item/{row['position']}",
                                      {"choice": "answer", "answer_text": answer,
                                       "answer_start": str(CONTEXT.index(answer)), "csrf": csrf})
            assert status == 303, body
    finally:
        server.shutdown()
        server.server_close()
    entry = report.compute(tmp_path / "v.db")["splits"]["human_authored"]
    assert entry["judgements"] == 2 and entry["human_f1"] == pytest.approx(0.5)
    assert entry["correct_rate"] == pytest.approx(0.5)


def test_a_database_with_both_tasks_exports_one(author_model, tmp_path):
    db = tmp_path / "both.db"
    for model, draft in [(author_model, {"context": CONTEXT, "question": QUESTION, "answer_text": "Black Sea",
                                         "answer_start": CONTEXT.index("Black Sea")}),
                         (AuthoringModel("sliding-window"), {"passage": CONTEXT, "question": QUESTION,
                                                             "options": ["Black Sea", "North Sea"], "label": 0})]:
        conn = store.connect(db)
        store.init(conn)
        person, _ = store.add_person(conn, f"author-{model.task}", store.AUTHOR)
        submit(conn, person, draft, model.analyse_draft(draft), model)
        conn.close()
    with pytest.raises(ConfigError, match="two tasks .*1 extractive_qa, 1 multiple_choice.*--task"):
        export_authored(db, tmp_path / "x")
    assert export_authored(db, tmp_path / "qa", task=EXTRACTIVE_QA)[0]["task"] == EXTRACTIVE_QA
    assert export_authored(db, tmp_path / "mc", task=MULTIPLE_CHOICE)[0]["task"] == MULTIPLE_CHOICE


def test_the_page_computes_in_fp32_on_a_machine_that_prefers_bf16(span_model, author_model, monkeypatch):
    """Gradients need fp32: where evaluation would choose bf16 by itself, the page still does not."""
    from advrace.models.runtime import precision

    monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: True)
    assert load_span_model(span_model).bf16 is True  # what evaluation would do here
    model = SpanAuthoringModel(span_model)
    assert model.scorer.bf16 is False
    assert all(p.dtype.is_floating_point and p.dtype.itemsize == 4 for p in model.scorer.model.parameters())
    assert model.analyse(CONTEXT, QUESTION) == author_model.analyse(CONTEXT, QUESTION)


@pytest.mark.slow
def test_the_real_minilm_reads_drafts_through_its_own_tokenizer():
    """The offline MiniLM (a new span head on its pretrained encoder; `--task` says what it is
    for, since its config does not): its uncased WordPiece tokenizer lowercases and splits
    punctuation and rare words, and importance still lands on the author's words as written."""
    from advrace.models.runtime.loading import model_source

    model = load_authoring_model(model_source("minilm")[0], task=EXTRACTIVE_QA)  # its head: drawn from seed 0
    context = ("The Danube—Europe's second-longest river—flows through TEN countries (Austria, Hungary, "
               "Serbia...) before reaching the Black Sea; Vienna & Budapest were built on its banks.")
    question = "Which sea does the Danube's water eventually reach?"
    out = model.analyse(context, question)
    assert [question[s:e] for s, e, _ in out["importance"]["question"]] == question.split()
    assert [context[s:e] for s, e, _ in out["importance"]["context"]] == context.split()
    assert all(v != 0 for *_, v in out["importance"]["question"])  # every word has sub-tokens the model saw
    assert context[out["prediction"]["start"]:out["prediction"]["end"]] == out["prediction"]["text"]
    assert 0 < sum(a["probability"] for a in out["answers"]) <= 1 + 1e-9


def test_the_threshold_is_an_f1(capsys):
    for bad in ("0", "1.5", "half"):
        with pytest.raises(SystemExit) as exit_:
            advrace_main(["human-eval", "author", "--model", "m", "--db", "d.db", "--fooled-below", bad])
        assert exit_.value.code == 2
        assert "--fooled-below" in capsys.readouterr().err
