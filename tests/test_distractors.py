import random

import pytest

from advrace.core.distractors import (insert_answer_span, replace_distractors, select_distractors,
                                 sentence_starts, token_overlap)
from advrace.core.examples import MCExample
from advrace.core.provenance import OptionsReplaced

PASSAGE = "Tom lives in a village. He walks to school!  Mary plays the piano? She is good."


def example(label=1):
    return MCExample(id="q1", passage=PASSAGE, question="Where does Tom live?",
                     options=("In a city", "  In a small village ", "By the sea", "In a desert"),
                     label=label)


def test_sentence_starts():
    assert sentence_starts(PASSAGE) == [0, 24, 45, 67, len(PASSAGE)]
    assert sentence_starts("") == [0]


@pytest.mark.parametrize("seed", range(8))
def test_insert_answer_span_points_at_answer(seed):
    ex = example()
    new, start, end = insert_answer_span(ex, random.Random(seed))
    assert new.passage[start:end] == "In a small village"
    assert new.options == ex.options and new.label == ex.label
    again, s2, e2 = insert_answer_span(ex, random.Random(seed))
    assert (again.passage, s2, e2) == (new.passage, start, end)


def test_rng_decides_position():
    ex = example()
    at = random.Random(3).choice(sentence_starts(PASSAGE))
    new, start, _ = insert_answer_span(ex, random.Random(3))
    assert new.provenance[-1].sentences[0].at == at
    positions = {insert_answer_span(ex, random.Random(s))[1] for s in range(40)}
    assert len(positions) > 1


def test_token_overlap():
    assert token_overlap("The red car", "the car") == 1.0
    assert token_overlap("a b c d", "c d e f") == 0.5
    assert token_overlap("", "x") == 0.0
    assert token_overlap("...", "x") == 0.0


def test_select_skips_answer_containment():
    cands = ["In a small village near here", "small village", "in  A SMALL village", "the mountains"]
    assert select_distractors(cands, "In a small village", max_overlap_answer=1.0) == ["the mountains"]


def test_select_skips_empty():
    assert select_distractors(["", "  ", "--", "river bank"], "city") == ["river bank"]


def test_select_overlap_with_answer_threshold():
    cands = ["red apple pie", "blue sky"]
    assert select_distractors(cands, "red apple tree", max_overlap_answer=0.5) == ["blue sky"]
    assert select_distractors(cands, "red apple tree", max_overlap_answer=0.7) == cands


def test_select_overlap_with_each_other():
    cands = ["old stone bridge", "old stone wall", "new bridge", "green field"]
    assert select_distractors(cands, "river") == ["old stone bridge", "new bridge", "green field"]
    assert select_distractors(cands, "river", max_overlap_each_other=0.4) == [
        "old stone bridge", "green field"]
    assert select_distractors(cands, "river", max_overlap_each_other=0.7) == [
        "old stone bridge", "old stone wall", "new bridge"]


def test_select_k():
    cands = ["one", "two", "three", "four"]
    assert select_distractors(cands, "zero") == ["one", "two", "three"]
    assert select_distractors(cands, "zero", k=1) == ["one"]


def test_replace_distractors_full():
    ex = example(label=1)
    new, kept = replace_distractors(ex, ["A", "B", "C"])
    assert kept == 0
    assert new.options == ("A", ex.options[1], "B", "C")
    assert new.label == 1 and new.answer == ex.answer
    assert isinstance(new.provenance[-1], OptionsReplaced)


def test_replace_distractors_fallback():
    ex = example(label=0)
    new, kept = replace_distractors(ex, ["X"])
    assert kept == 2
    assert new.options == ("In a city", "X", "By the sea", "In a desert")
    assert new.label == 0 and new.answer == ex.answer
    same, kept0 = replace_distractors(ex, [])
    assert kept0 == 3 and same.options == ex.options


def test_jaccard_distance():
    from advrace.core.distractors import jaccard_distance

    assert jaccard_distance("the red car", "The red car") == 0.0
    assert jaccard_distance("a b c", "c d") == pytest.approx(1 - 1 / 4)
    assert jaccard_distance("x y", "z") == 1.0
    assert jaccard_distance("", "") == 1.0


def test_select_by_jaccard_keeps_pairs_far_apart():
    # "red old car" vs "red car": J = 2/3, distance 1/3 <= 0.5 -> too close
    # "blue old bike" vs "red car": distance 1.0; vs "red old car": J = 1/5 -> distance 0.8
    cands = ["red car", "red old car", "blue old bike", "red car!", "green tree house"]
    got = select_distractors(cands, "a river", min_jaccard_distance=0.5)
    assert got == ["red car", "blue old bike", "green tree house"]
    # the overlap rule would also reject "blue old bike" against "red old car" only above 0.5
    assert select_distractors(cands, "a river", min_jaccard_distance=0.9, k=5) == [
        "red car", "blue old bike", "green tree house"]
    assert select_distractors(cands, "a river", min_jaccard_distance=0.0, k=5) == [
        "red car", "red old car", "blue old bike", "green tree house"]


@pytest.mark.parametrize("label", range(4))
def test_label_follows_the_answer_after_replacement_and_reordering(label):
    ex = example(label)
    answer = ex.answer
    new, kept = replace_distractors(ex, ["D1", "D2", "D3"], order=[2, 0, 3, 1])
    assert kept == 0
    assert new.answer == answer
    assert sorted(new.distractors) == ["D1", "D2", "D3"]
    assert new.options[new.label] == answer
    assert len(new.provenance) == 1 and isinstance(new.provenance[0], OptionsReplaced)
    with pytest.raises(ValueError):
        replace_distractors(ex, ["D1"], order=[0, 0, 1, 2])


@pytest.mark.parametrize("text, answer, expected", [
    ("in a warehouse by the river", "In a bakery on Pudding Lane.", "In a warehouse by the river."),
    ("baker, Thomas Farriner,", "In a bakery.", "Baker, Thomas Farriner."),
    ("The old laws.", "did not act quickly", "The old laws"),
    ("Tom likes tea", "his sister", "Tom likes tea"),
    ("why not?", "Because it rained.", "Why not?"),
    ("  ", "Answer.", ""),
])
def test_match_format(text, answer, expected):
    from advrace.core.distractors import match_format

    assert match_format(text, answer) == expected


def test_match_format_lowers_a_first_word_only_where_the_passage_writes_it_lower():
    from advrace.core.distractors import match_format

    passage = "The old laws stayed. Tom thought the laws were fair, and I agreed."
    assert match_format("The old laws", "did not act", passage) == "the old laws"
    assert match_format("Tom thought", "did not act", passage) == "Tom thought"
    assert match_format("I agreed", "did not act", passage) == "I agreed"
    assert match_format("The old laws", "did not act") == "The old laws"
