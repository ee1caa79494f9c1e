"""advrace.models.protocol.lm_eval_race against lm-evaluation-harness's own `race` task, run from the
installed lm_eval package on rows in EleutherAI/race's format that this test writes: the context
(`doc_to_text`), the choices and target, and the (context, continuation) pairs that lm-eval's
task object builds; and the scorer's `contexts` hook."""

import importlib.util
import json
import random
from pathlib import Path

import pytest

from advrace.formats import load_race_dir
from advrace.models.protocol import lm_eval_race
from advrace.release.records import in_split

lm_eval = pytest.importorskip("lm_eval", reason="lm-evaluation-harness is not installed")

RACE_TASK = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "tasks" / "race"

ARTICLE = ("Tom lives in a small village near the mountains.\nHis sister Mary plays the piano. "
           "Their teacher, Mrs Green, says \"Keep reading!\" \u2014 and they do, even at the caf\u00e9.\n")


def _q(question, options, answer):
    return question, options, answer


# Four articles, in RACE's raw format: blanks at the end ("  _  ."), blanks elsewhere, one question
# only, quotes and backslashes in the text, questions starting with "." as RACE's dev set has them,
# and an article of twelve questions (question 10 must come after question 9).
ARTICLES = {
    "high7.txt": [
        _q("Tom's sister is  _  .", ["Jane", "Mary", "Ann", "Kate"], "B"),
        _q("Where does Tom live?", ["In a city", "By the sea", "In a village", "On a boat"], "C"),
        _q(".The teacher's name is  _  .", ["Mrs Green", "Mrs Brown", "Mr Black", "Miss White"], "A"),
    ],
    "high12.txt": [
        _q("What does Mary play?", ["The violin", "The piano", "Football", "Chess"], "B"),
    ],
    "middle3.txt": [
        _q("The  _  lives near the mountains.", ["teacher", "cat", "family", "village"], "C"),
        _q("Mrs Green says \"Keep  _  \"", ["reading!", "quiet", "going", "out"], "A"),
        _q("They read at  _  ?", ["home", "the caf\u00e9", "school", "night"], "B"),
        _q("Tom is Mary's  _  .", ["father", "teacher", "brother", "friend"], "C"),
        _q(".Which is true?  ", ["Tom can't read.", "It's a \\ back\\slash.", "Mary sings.", "Mrs Green reads."],
           "D"),
    ],
    "middle20.txt": [
        _q(f"Question number {k} is  _  ." if k % 3 == 0 else f"What is {k} plus one?",
           [str(k + 1), str(k + 2), str(k), f"{k}'s \"answer\""], "ABCD"[k % 4])
        for k in range(12)
    ],
}


def _raw(pid: str) -> dict:
    qs = ARTICLES[pid]
    return {"article": ARTICLE + f"This is {pid}.", "questions": [q for q, _, _ in qs],
            "options": [o for _, o, _ in qs], "answers": [a for _, _, a in qs], "id": pid}


def eleuther_rows() -> list[dict]:
    """EleutherAI/race rows, written here as that data set has them: per article, `article`, and
    `problems`, the str() of a list of {question, answer, options} in RACE's order."""
    rows = []
    for pid in ARTICLES:
        raw = _raw(pid)
        problems = [{"question": q, "answer": a, "options": o}
                    for q, o, a in zip(raw["questions"], raw["options"], raw["answers"])]
        rows.append({"article": raw["article"], "problems": str(problems)})
    return rows


@pytest.fixture(scope="module")
def examples(tmp_path_factory):
    """The articles' questions as advrace reads a RACE folder, under the ids of a release's
    original split."""
    root = tmp_path_factory.mktemp("race-lm-eval") / "RACE" / "test"
    for pid in ARTICLES:  # high7.txt -> RACE/test/high/7.txt
        level = pid.rstrip(".txt0123456789")
        (root / level).mkdir(parents=True, exist_ok=True)
        (root / level / pid[len(level):]).write_text(json.dumps(_raw(pid)), encoding="utf-8")
    loaded = load_race_dir(root)
    return [in_split(ex, "original") for ex in loaded.examples]


@pytest.fixture(scope="module")
def preprocess():
    """lm-eval's race/preprocess_race.py, the module its race.yaml names with `!function`."""
    spec = importlib.util.spec_from_file_location("lm_eval_race_preprocess", RACE_TASK / "preprocess_race.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _by_article(docs):
    return {d.article_id: d for d in docs}


def test_documents_are_lm_evals(examples, preprocess):
    docs = lm_eval_race.documents(examples)
    assert [d.article_id for d in docs] == list(ARTICLES)
    for doc, row in zip(docs, eleuther_rows()):
        assert doc.context == preprocess.doc_to_text(row)
        assert doc.continuations == tuple(" " + c for c in preprocess.doc_to_choice(row))
        assert doc.target == preprocess.doc_to_target(row)
        assert doc.example.question == ARTICLES[doc.article_id][-1][0]
        assert len(doc.questions) == len(ARTICLES[doc.article_id])


def test_what_the_contexts_hold(examples):
    docs = _by_article(lm_eval_race.documents(examples))
    blank = docs["high7.txt"].context
    # an earlier question ending "  _  ." is the filled-in sentence; the scored one keeps its blank
    assert "\n\nTom's sister is Mary\nQuestion: Where does Tom live?\nAnswer: In a village\n" in blank
    assert blank.endswith("\n.The teacher's name is  _  .")
    # one question: advrace's own one-question prompt
    single = docs["high12.txt"]
    assert single.context == f"Article: {single.example.passage}\n\nWhat does Mary play?"
    # a blank elsewhere, or not followed by ".", is a question with its answer
    assert "Question: The  _  lives near the mountains.\nAnswer: family\n" in docs["middle3.txt"].context
    assert "Question: They read at  _  ?\nAnswer: the caf\u00e9\n" in docs["middle3.txt"].context
    twelve = docs["middle20.txt"]
    assert twelve.example.question == "What is 11 plus one?"
    assert twelve.context.index("What is 10 plus one?") > twelve.context.index("Question number 9 is 11\n")


def test_order_of_the_input_does_not_matter(examples):
    shuffled = list(examples)
    random.Random(0).shuffle(shuffled)
    assert _by_article(lm_eval_race.documents(shuffled)) == _by_article(lm_eval_race.documents(examples))
    assert lm_eval_race.contexts(examples) == {d.example.id: d.context for d in lm_eval_race.documents(examples)}
    assert list(lm_eval_race.contexts(examples)) == [
        "original/high7.txt-2", "original/high12.txt-0", "original/middle3.txt-4", "original/middle20.txt-11"]


def test_eleuther_rows(examples, preprocess):
    """advrace's EleutherAI/race rows read back to the same problems as the test's own rows."""
    for (_, questions), row in zip(lm_eval_race.group_articles(examples), eleuther_rows()):
        ours = lm_eval_race.eleuther_row(questions)
        assert ours["article"] == row["article"]
        assert preprocess.process_ast(ours["problems"]) == preprocess.process_ast(row["problems"])
        assert preprocess.doc_to_text(ours) == preprocess.doc_to_text(row)


def test_refusals(examples):
    first = examples[0]
    with pytest.raises(ValueError, match="appears twice"):
        lm_eval_race.documents([first, first])
    with pytest.raises(ValueError, match="exactly 4 options"):
        lm_eval_race.documents([first.replace_options(first.options[:3])])
    with pytest.raises(ValueError, match="does not name its passage"):
        lm_eval_race.documents([type(first)(id="x", passage="p", question="q?", options=("a", "b", "c", "d"),
                                            label=0, source_id="no-number")])


def test_lm_evals_task_object_builds_the_same_requests(examples, tmp_path, monkeypatch):
    """lm-eval's ConfigurableTask, from its own race.yaml (included) over a local copy of the rows:
    zero-shot context and (context, continuation) pairs as lm-eval would send them to a model."""
    from lm_eval.tasks import TaskManager

    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    data = tmp_path / "race.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in eleuther_rows()), encoding="utf-8")
    folder = tmp_path / "tasks"
    folder.mkdir()
    (folder / "race_local.yaml").write_text(
        f"include: {json.dumps(str(RACE_TASK / 'race.yaml'))}\ntask: race_local\ndataset_path: json\n"
        f"dataset_name: null\ndataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        f"  cache_dir: {json.dumps(str(tmp_path / 'hf'))}\n", encoding="utf-8")
    task = TaskManager(include_path=str(folder), include_defaults=False).load("race_local")["tasks"]["race_local"]
    docs = lm_eval_race.documents(examples)
    lm_docs = list(task.test_docs())
    assert len(lm_docs) == len(docs)
    for doc, lm_doc in zip(docs, lm_docs):
        ctx = task.fewshot_context(lm_doc, 0)
        assert ctx == doc.context
        requests = task.construct_requests(lm_doc, ctx, metadata=("race_local", 0, 1))
        assert [r.args for r in requests] == [(doc.context, c) for c in doc.continuations]
        assert task.doc_to_target(lm_doc) == doc.target


def test_scorer_takes_the_contexts(examples, tmp_path):
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from advrace.core.errors import ConfigError
    from advrace.models.decoders.continuation_scoring import encode_request
    from advrace.models.protocol.llm_prompts import race_prompt
    from advrace.models.decoders.llm_scoring import CausalLMScorer
    from conftest import make_tokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    torch.manual_seed(0)
    model = LlamaForCausalLM(LlamaConfig(vocab_size=len(tok), hidden_size=16, intermediate_size=32,
                                         num_hidden_layers=1, num_attention_heads=2, num_key_value_heads=1,
                                         max_position_embeddings=1024, pad_token_id=tok.pad_token_id))
    docs = lm_eval_race.documents(examples)
    contexts = lm_eval_race.contexts(examples)
    scorer = CausalLMScorer(model, tok, bf16=False, contexts=contexts)
    plain = CausalLMScorer(model, tok, bf16=False)
    for doc in docs:
        request = scorer.mc_request(doc.example)
        assert request == encode_request(tok, doc.context, list(doc.continuations), max_length=1024)
        assert plain.mc_request(doc.example) == encode_request(tok, race_prompt(doc.example),
                                                               list(doc.continuations), max_length=1024)
    assert scorer.mc_request(docs[1].example) == plain.mc_request(docs[1].example)  # one question
    assert scorer.mc_request(docs[0].example) != plain.mc_request(docs[0].example)
    assert len(scorer.predict_mc([d.example for d in docs])) == len(docs)
    with pytest.raises(ConfigError, match="zero-shot"):
        CausalLMScorer(model, tok, method="letter", contexts=contexts)
