import dataclasses

import pytest

from advrace.core.errors import EditError
from advrace.core.examples import Answer, MCExample, SpanExample, example_from_record
from advrace.core.provenance import AttackSummary, Replacement, SentencesInserted


def mc():
    return MCExample(id="p-0", passage="One two. Three four. Five six.", question="Which number?",
                     options=("one", "two", "three", "four"), label=2)


def span():
    ctx = "Paris is in France. Berlin is in Germany. Rome is in Italy."
    return SpanExample(id="s1", title="Cities", context=ctx, question="Where is Berlin?",
                       answers=(Answer("Germany", ctx.index("Germany")), Answer("Berlin", 20)))


def test_examples_are_immutable():
    ex = mc()
    with pytest.raises(dataclasses.FrozenInstanceError):
        ex.label = 0
    assert isinstance(ex.options, tuple) and ex.source_id == "p-0"


def test_validation():
    with pytest.raises(ValueError, match="out of range"):
        MCExample(id="x", passage="p", question="q", options=("a", "b"), label=2)
    with pytest.raises(ValueError, match="not found"):
        SpanExample(id="x", title="", context="abc", question="q", answers=(Answer("b", 0),))


@pytest.mark.parametrize("at,expected", [
    (0, "New one. One two. Three four. Five six."),
    (9, "One two. New one. Three four. Five six."),
    (30, "One two. Three four. Five six. New one."),
])
def test_insert_sentence_spacing(at, expected):
    new = mc().insert_sentence("New one.", at)
    assert new.passage == expected
    assert new.label == 2 and new.answer == "three"
    [rec] = new.provenance[-1].sentences
    assert isinstance(new.provenance[-1], SentencesInserted) and rec.at == at
    assert new.passage[rec.start:rec.start + len("New one.")] == "New one."


def test_insert_several_sentences_at_once():
    ex = mc()
    new = ex.insert_sentences([("B b.", 9), ("A a.", 0), ("C c.", 9), ("D d.", 30)])
    assert new.passage == "A a. One two. B b. C c. Three four. Five six. D d."
    for rec in new.provenance[-1].sentences:
        assert new.passage[rec.start:rec.start + len(rec.text)] == rec.text
    sp = span()
    moved = sp.insert_sentences([("X x.", 0), ("Y y.", 20)])
    for a in moved.answers:
        assert moved.context[a.start:a.end] == a.text


def test_insert_keeps_answer_offsets():
    ex = span()
    for at in (0, 20, 42, len(ex.context)):
        new = ex.insert_sentence("Madrid is in Spain.", at)
        for a in new.answers:
            assert new.context[a.start:a.end] == a.text
    assert ex.insert_sentence("X.", 0).answers[0].start == ex.answers[0].start + 3


def test_insert_inside_answer_is_refused():
    ex = span()
    with pytest.raises(EditError, match="gold answer"):
        ex.insert_sentence("Oops.", ex.answers[0].start + 2)


def test_replace_spans_moves_answers_and_records_provenance():
    ex = span()
    new = ex.replace_spans("context", [(0, 5, "Lyon and Paris"), (48, 53, "Italia")])
    assert new.context.startswith("Lyon and Paris is in France.")
    for a in new.answers:
        assert new.context[a.start:a.end] == a.text
    edits = new.provenance[-1].replacements
    assert edits[0] == Replacement(start=0, end=5, old="Paris", new="Lyon and Paris")
    assert ex.context.startswith("Paris")  # the original is untouched


def test_replace_spans_refuses_overlaps_and_answer_cuts():
    ex = span()
    with pytest.raises(EditError):
        ex.replace_spans("context", [(0, 5, "a"), (3, 8, "b")])
    with pytest.raises(EditError, match="gold answer"):
        ex.replace_spans("context", [(ex.answers[0].start, ex.answers[0].start + 3, "Ger")])
    with pytest.raises(EditError, match="no editable text field"):
        ex.replace_spans("title", [(0, 1, "c")])


def test_question_edits_leave_answers():
    new = span().replace_spans("question", [(9, 15, "Bonn")])
    assert new.question == "Where is Bonn?" and new.answers == span().answers


def test_replace_options_keeps_or_moves_label():
    ex = mc()
    new = ex.replace_options(["a", "b", "three", "d"])
    assert new.answer == "three" and new.label == 2
    moved = ex.replace_options(["three", "b", "c", "d"], label=0)
    assert moved.answer == "three"
    assert moved.provenance[-1].old == ex.options


def test_records_round_trip():
    for ex in (mc().insert_sentence("Hi there.", 0), span().with_provenance(AttackSummary("x"))):
        assert example_from_record(ex.to_record()) == ex


def test_passage_field_names_the_text_an_insertion_goes_into():
    for ex, field in [(mc(), "passage"), (span(), "context")]:
        assert ex.passage_field == field and ex.passage_text == getattr(ex, field)
        inserted = ex.insert_sentence("Nobody knows.", 0)
        assert getattr(inserted, field).startswith("Nobody knows. ") and inserted.question == ex.question
        assert inserted.provenance[-1].field == field


@pytest.mark.parametrize("task", ["race", "squad"])
def test_a_row_loaded_by_datasets_reads_back(tmp_path, monkeypatch, task):
    """A release's provenance is a JSON string (one schema for every split), and
    `datasets.load_dataset("json", data_dir=...)` gives it back as that string."""
    import json

    datasets = pytest.importorskip("datasets")
    from conftest import make_race_dir, squad_doc

    from advrace.core.config import release_config_from_dict
    from advrace.release import build_release, read_split

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    if task == "race":
        data = make_race_dir(tmp_path)
    else:
        data = tmp_path / "squad.json"
        data.write_text(json.dumps(squad_doc()), encoding="utf-8")
    release = tmp_path / "release"
    build_release(release_config_from_dict({"data": {"path": str(data)}, "splits": ["charswap"], "workers": 1}),
                  release)
    rows = datasets.load_dataset("json", data_dir=str(release), cache_dir=str(tmp_path / "hf"))["charswap"]
    assert isinstance(rows[0]["provenance"], str)
    kind = MCExample if task == "race" else SpanExample
    examples = [kind.from_record(row) for row in rows]
    assert examples == read_split(release, "charswap")
    assert any(ex.provenance for ex in examples)
    assert [example_from_record(row) for row in rows] == examples
