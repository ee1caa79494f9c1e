"""Diagnosis: the question stated with its correct answer, inserted at a sentence boundary."""

from __future__ import annotations

import pytest

from advrace.core.examples import MCExample
from advrace.core.provenance import SentencesInserted
from advrace.resources import get_resources
from advrace.attacks.diagnosis import Diagnosis

PASSAGE = (
    "Tom lives in a small village near the mountains. Every morning he walks to school with his "
    "sister Mary. After school, Tom likes playing football while Mary practises the piano."
)


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.fixture(scope="module")
def diagnosis(res):
    return Diagnosis({}, seed=3, resources=res)


def mc(question, options, label):
    return MCExample(id="d", passage=PASSAGE, question=question, options=tuple(options), label=label)


@pytest.mark.parametrize("seed", range(4))
def test_inserts_question_with_correct_answer(res, seed):
    ex = mc("What does Mary practise after school?", ["the violin", "football", "the piano"], 2)
    out = Diagnosis({}, seed=seed, resources=res).apply(ex)
    assert out.perturbed
    new = out.example
    record = new.provenance[-1]
    assert record.attack == "diagnosis" and record.sentences[0].answer == "the piano"
    sentence = record.sentences[0].sentence
    assert sentence == "What does Mary practise after school the piano."
    insert = next(r for r in new.provenance if isinstance(r, SentencesInserted))
    placed = insert.sentences[0]
    assert placed.text == sentence
    assert placed.at in set(res.sentence_starts(ex.passage)) | {len(ex.passage)}
    assert new.passage[placed.start:placed.start + len(sentence)] == sentence
    assert new.options == ex.options and new.label == ex.label and new.question == ex.question


def test_blank_takes_the_answer(diagnosis):
    ex = mc(".Every morning Tom walks to  _  with his sister.", ["school", "the park", "work"], 0)
    record = diagnosis.apply(ex).example.provenance[-1]
    assert record.sentences[0].sentence == "Every morning Tom walks to school with his sister."


def test_summarize_is_a_dict(diagnosis):
    assert diagnosis.summarize([]) == {}
