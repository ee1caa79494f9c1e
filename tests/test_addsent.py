"""AddSent on hand-written RACE-style questions, with the real installed resources."""

from __future__ import annotations

from collections import Counter

import pytest

from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.provenance import AttackSummary, SentencesInserted
from advrace.resources import get_resources
from advrace.core.text import words
from advrace.attacks.addsent import AddSent
from advrace.attacks.sentences.number_swaps import new_number
from advrace.attacks.sentences.question_swaps import apply_edits
from advrace.attacks.sentences.refusals import contains_gold, search_failure
from advrace.attacks.sentences.statements import declarative, named_in_passage, passage_case, statement
from advrace.resources.inflection import inflection_candidates
from advrace.attacks.base import CannotPerturb

PASSAGE = (
    "Tom lives in a small village near the mountains. Every morning he walks to school with his "
    "sister Mary.\nTheir teacher, Mrs Green, often tells them stories about famous scientists. "
    "Yesterday she talked about Marie Curie, who studied radioactivity and won two Nobel prizes.\n"
    "After school, Tom likes playing football while Mary practises the piano."
)


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.fixture(scope="module")
def addsent(res):
    return AddSent({}, seed=11, resources=res)


class _NoNeighbours:
    def __init__(self, glove):
        self._glove = glove

    def nearest(self, word, k=10):
        return []

    def __contains__(self, word):
        return word in self._glove


class NoWordResources:
    """The real resources minus GloVe neighbours and antonyms, so only negation is left."""

    def __init__(self, real):
        self._real = real
        self.glove = _NoNeighbours(real.glove)

    def antonyms(self, word, pos):
        return []

    def __getattr__(self, name):
        return getattr(self._real, name)


@pytest.fixture(scope="module")
def negating(res):
    return AddSent({"negation_fallback": True}, seed=11, resources=NoWordResources(res))


@pytest.fixture(scope="module")
def with_fallback(res):
    """AdvRACE's own rules: "not" where nothing else changes, the distractor glued after a question."""
    return AddSent({"negation_fallback": True, "glued_fallback": True}, seed=11, resources=res)


@pytest.fixture(scope="module")
def no_fallback(res):
    return AddSent({"negation_fallback": False}, seed=11, resources=res)


def mc(question, options, label=0, qid="q"):
    return MCExample(id=qid, passage=PASSAGE, question=question, options=tuple(options), label=label)


def summary(example):
    return example.provenance[-1]


def run(attack, example):
    out = attack.apply(example)
    assert out.perturbed, out.reason
    return out.example, summary(out.example).sentences


def test_config_is_validated():
    assert AddSent({}).config.insertions == 2
    for bad in ({"insertions": 0}, {"insertions": 4}, {"neighbours": 0}, {"number_mode": "words"},
                {"insertions": True}, {"keep_words": "passage"}, {"colour": 1}):
        with pytest.raises(ConfigError):
            AddSent(bad)
    assert AddSent({"keep_words": ["Passage"]}).config.keep_words == ("passage",)


def test_declarative_forms():
    assert declarative("Where does Tom live?", "In a small village.") == \
        "Where does Tom live in a small village."
    assert declarative("Tom is a great  _  singer.", "Folk.") == "Tom is a great folk singer."
    assert declarative(".John Denver died in  _  .", "1997") == "John Denver died in 1997."
    assert declarative("_ is the best title.", "a happy day") == "A happy day is the best title."
    assert declarative("Tom went home because ...", "He was tired.") == \
        "Tom went home because he was tired."
    assert declarative("The story tells us that…", "I was wrong") == "The story tells us that I was wrong."
    assert declarative("Tom loves _ and Jill loves _ .", "sports; animals") == \
        "Tom loves sports and Jill loves animals."
    assert declarative("What's the best title of this passage(  )?", "Colour") == \
        "What's the best title of this passage colour."
    assert declarative("Which is right?", "TV is bad!") == "Which is right TV is bad."


def test_declarative_keeps_names_capitalised(res):
    assert declarative("Who helped Mary?", "Tom's mother", res) == "Who helped Mary Tom's mother."
    assert declarative("Who helped Mary?", "Her mother", res) == "Who helped Mary her mother."


def test_inflection_rules():
    assert inflection_candidates("stop", "VBD")[0] == "stopped"
    assert inflection_candidates("like", "VBD") == ["liked"]
    assert inflection_candidates("cry", "VBZ") == ["cries"]
    assert inflection_candidates("watch", "VBZ") == ["watches"]
    assert inflection_candidates("hate", "VBG") == ["hating"]
    assert inflection_candidates("lie", "VBG") == ["lying"]
    assert inflection_candidates("big", "JJR") == []


def test_irregular_antonyms_are_inflected_or_refused(addsent):
    assert addsent.swaps.inflect("lose", "VBD") == "lost"
    assert addsent.swaps.inflect("go", "VBD") is None  # went or gone: cannot tell
    assert addsent.swaps.inflect("dislike", "VBZ") == "dislikes"
    # "was started" -> "was came": verb.exc names only "came", which is no participle
    assert addsent.swaps.inflect("come", "VBN") == "come" and addsent.swaps.inflect("come", "VBD") == "came"


def test_new_number_values():
    import random

    years = new_number("1998", random.Random(1), set(), 3)
    assert len(set(years)) == 3 and all(1 <= abs(int(y) - 1998) <= 10 for y in years)
    counts = new_number("1,200", random.Random(1), set(), 8)
    assert all(600 <= int(c.replace(",", "")) <= 2401 for c in counts)
    assert all(("," in c) == (int(c.replace(",", "")) >= 1000) for c in counts)
    assert new_number("3.5", random.Random(1), set(), 1)[0].count(".") == 1
    assert new_number("7", random.Random(1), {"5", "6", "8"}, 20).count("5") == 0
    assert new_number("seven", random.Random(1), set(), 1) == []


def test_glove_replacements_keep_pos_and_change_stem(addsent, res):
    ex = mc("Why did the farmer sell his horse?",
            ["He needed money", "The horse was old", "He wanted a car", "His son asked him to"])
    _, sentences = run(addsent, ex)
    doc = res.parse(ex.question)
    by_offset = {t.idx: t for t in doc}
    glove = [r for s in sentences for r in s.replacements if r.kind == "glove"]
    assert {r.old for r in glove} == {"farmer", "horse"}
    for rep in glove:
        tok = by_offset[rep.start]
        assert tok.text == rep.old
        assert res.word_pos(rep.new) == tok.pos_
        assert res.stem(rep.new) != res.stem(rep.old)
        assert rep.new.lower() not in {w.lower() for w in words(ex.question)}
    first = {r.old: r.new for r in sentences[0].replacements if r.kind == "glove"}
    second = {r.old: r.new for r in sentences[1].replacements if r.kind == "glove"}
    assert first != second


def test_names_keep_their_case_and_numbers_move(addsent):
    ex = mc("Tom moved to Paris in 1998 because  _  .",
            ["he found a job", "he got married", "he was ill", "he sold his house"])
    _, sentences = run(addsent, ex)
    years = []
    for s in sentences:
        reps = {r.old: r for r in s.replacements}
        assert reps["Tom"].new[0].isupper() and reps["Paris"].new[0].isupper()
        assert reps["1998"].kind == "number"
        years.append(int(reps["1998"].new))
        assert s.sentence.startswith(reps["Tom"].new + " ")
    assert len(set(years)) == 2 and all(1 <= abs(y - 1998) <= 10 for y in years)


def test_at_most_one_antonym_per_sentence(addsent, res):
    ex = mc("Why was the old man happy when he won the game?",
            ["He liked games", "His son came home", "He got a prize", "It was sunny"])
    _, sentences = run(addsent, ex)
    targets = []
    for s in sentences:
        antonyms = [r for r in s.replacements if r.kind == "antonym"]
        assert len(antonyms) == 1
        targets.append(antonyms[0].old)
        assert not s.negation_fallback
    assert targets[0] != targets[1]  # three targets: the second sentence uses another one
    for s in sentences:
        for rep in s.replacements:
            if rep.kind == "antonym" and rep.old == "old":
                assert rep.new in res.antonyms("old", "ADJ")
            if rep.kind == "antonym" and rep.old == "won":
                assert rep.new == "lost"


def test_no_change_of_meaning_is_left_unperturbed(no_fallback, res):
    """Without the "not" fallback (the default), a question with nothing to change is left as it was."""
    assert AddSent({}).config.negation_fallback is False
    out = no_fallback.apply(mc("Who can do it?", ["Jack", "Tom", "Mary", "Mike"]))
    assert not out.perturbed and out.reason == "no change of meaning"
    # a verb with GloVe neighbours of its field and frame is swapped where nothing else changes
    _, sentences = run(no_fallback, mc("Who can drive?", ["Jack", "Tom", "Mary", "Mike"]))
    assert all(r.kind == "glove" and r.old == "drive" for s in sentences for r in s.replacements)
    out = AddSent({"negation_fallback": False}, seed=11, resources=NoWordResources(res)).apply(
        mc("What does Tom like?", ["football", "the piano", "swimming", "chess"]))
    assert not out.perturbed and out.reason == "no change of meaning"


def test_not_fallback_with_real_resources(with_fallback):
    ex = mc("Who can do it?", ["Jack", "Tom", "Mary", "Mike"])
    _, sentences = run(with_fallback, ex)
    for s in sentences:
        assert s.negation_fallback
        assert s.sentence == f"{s.answer} cannot do it."  # a statement, not the question glued to the option
        assert [r.kind for r in s.replacements] == ["negation"]
        assert s.question == "Who cannot do it?"


@pytest.mark.parametrize("question, mutated", [
    ("What does Tom like?", "What does Tom not like?"),
    ("Tom likes  _  .", "Tom does not like  _  ."),
    ("Tom watched  _  .", "Tom did not watch  _  ."),
    ("They play for  _  .", "They do not play for  _  ."),
    ("What did Tom not like?", "What did Tom like?"),
    ("Why didn't Tom go?", "Why did Tom go?"),
])
def test_not_fallback_forms(negating, question, mutated):
    _, sentences = run(negating, mc(question, ["football", "the piano", "swimming", "chess"]))
    assert all(s.negation_fallback for s in sentences)
    assert {s.question for s in sentences} == {mutated}


@pytest.mark.parametrize("question", [
    "Which is true?", "What can we learn from the passage?", "We can infer from the text that  _  .",
    "What can we know about Tom?", "What is the best title for the passage?",
    "What is the passage mainly about?", "The author wrote the article to  _  .",
])
def test_no_not_sentence_about_the_passage(negating, question):
    """'We cannot infer from the text that X' is text about the passage, and a hint: such a
    question is said of another text or stated by another referent, never negated."""
    out = negating.apply(mc(question, ["football", "the piano", "swimming", "chess"]))
    if out.perturbed:
        for s in summary(out.example).sentences:
            assert not s.negation_fallback and " not " not in f" {s.sentence} "
            assert "another" in s.sentence.lower() or s.rule == "other_referent"
    else:
        assert "negation" not in out.reason and "about the passage" not in out.reason


@pytest.mark.parametrize("question", [
    "Which of the following is NOT true?", "Which is not true according to the passage?",
    "All of the following are mentioned EXCEPT  _  .", "Which statement is false?",
    "Which of the following is wrong?", "What is not mentioned in the passage?",
    "Which is untrue?", "Which of the following statements is incorrect?",
])
def test_negated_questions_are_said_of_others(addsent, negating, question):
    """A negated question never gets its own words back as a statement (that says a distractor
    does not fit: a hint); its options are said of people the passage does not name, the gold
    ("Tom is tall", false of the passage's Tom) first, so it still looks stated."""
    for attack in (addsent, negating):
        _, sentences = run(attack, mc(question, ["Tom is tall", "Mary is kind", "Tom likes chess", "It rained"]))
        # the gold said of someone else is still said: never for "Which is NOT mentioned?"
        mentioned = "mentioned" in question
        assert (sentences[0].option == 0) != mentioned and all(s.option != 0 for s in sentences[0 if mentioned else 1:])
        for s in sentences:
            assert s.rule == "other_referent" and not s.negation_fallback
            assert not {"Tom", "Mary"} & set(words(s.sentence))
            assert s.sentence.split()[-1] in ("tall.", "kind.", "chess.")


def test_negated_question_with_nothing_to_say_of_others_is_skipped(addsent):
    out = addsent.apply(mc("All of the following are mentioned EXCEPT  _  .", ["chess", "music", "rain", "Paris"]))
    assert not out.perturbed and out.reason == "negated question: no subject to move to another referent"


def test_negated_questions_ask_about_what_is_true(addsent):
    """'Why didn't Tom go?' asks for what is so, not for the one option that is not."""
    out = addsent.apply(mc("Why didn't the farmer sell his horse?",
                           ["He needed it", "It was young", "Nobody wanted it", "His son said no"]))
    assert out.perturbed or not out.reason.startswith("negated question"), out.reason


def test_no_negation_point(negating):
    out = negating.apply(mc("Tom  _  .", ["a", "b", "c", "d"]))
    assert not out.perturbed and out.reason == "no negation point"


def test_blank_gets_the_distractor(addsent):
    ex = mc("Mrs Green often tells stories about  _  .",
            ["famous scientists", "football players", "mountains", "pianists"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert "_" not in s.sentence
        assert s.sentence.endswith(" about " + s.answer + ".")
        assert s.sentence.startswith("Mrs ")  # a title is not a name to replace


def test_trailing_dots_are_a_blank(addsent):
    ex = mc("Tom went to the market because ...",
            ["he was hungry", "His mother was ill.", "he liked the smell", "it was raining"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        text = s.answer
        assert "..." not in s.sentence
        assert s.sentence.endswith(" because " + text[0].lower() + text[1:].rstrip(".") + ".")


def test_two_different_insertions(addsent):
    ex = mc("Where does Tom live?", ["In a big city", "In a small village", "By the sea", "In the desert"],
            label=1)
    new, sentences = run(addsent, ex)
    assert len(sentences) == 2
    assert sentences[0].sentence != sentences[1].sentence
    assert sentences[0].option != sentences[1].option
    for s in sentences:
        assert s.option != ex.label
        assert s.answer == ex.options[s.option]
        assert s.question != ex.question
    assert new.options == ex.options and new.label == ex.label and new.question == ex.question


def test_insert_positions_match_the_passage(addsent, res):
    ex = mc("Why did the farmer sell his horse?",
            ["He needed money", "The horse was old", "He wanted a car", "His son asked him to"])
    new, sentences = run(addsent, ex)
    insert = next(r for r in new.provenance if isinstance(r, SentencesInserted))
    assert [p.text for p in insert.sentences] == [s.sentence for s in sentences]
    boundaries = set(res.sentence_starts(ex.passage)) | {len(ex.passage)}
    for placed in insert.sentences:
        start, text = placed.start, placed.text
        assert new.passage[start:start + len(text)] == text
        assert placed.at in boundaries
    assert len(new.passage) > len(ex.passage)


def test_gold_text_never_inserted(res):
    ex = mc("Why did Tom go to the park?", ["the park", "near the park", "the zoo", "the school"])
    for seed in range(8):
        new, sentences = run(AddSent({}, seed=seed, resources=res), ex)
        used = {s.option for s in sentences}
        assert used == {2, 3}
        for s in sentences:
            assert "the park" not in s.sentence.lower()
            assert not contains_gold(s.sentence, ex.answer)


def test_gold_words_are_never_candidates(addsent):
    ex = mc("Tom lives in a small  _  near the mountains.", ["village", "town", "city", "farm"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert "village" not in s.sentence.lower()


def test_deterministic_per_seed(res):
    examples = [mc(q, opts, qid=f"q{i}") for i, (q, opts) in enumerate([
        ("Why did the farmer sell his horse?", ["money", "age", "a car", "his son"]),
        ("Where does Tom live?", ["a city", "a village", "the sea", "the desert"]),
        ("Mary bought 12 apples and  _  oranges.", ["3", "5", "7", "9"]),
    ])]
    first = [AddSent({}, seed=1, resources=res).apply(e).example for e in examples]
    again = [AddSent({}, seed=1, resources=res).apply(e).example for e in examples]
    other = [AddSent({}, seed=2, resources=res).apply(e).example for e in examples]
    assert [e.to_record() for e in first] == [e.to_record() for e in again]
    assert [e.passage for e in first] != [e.passage for e in other]


def test_not_enough_distractors(addsent):
    same = addsent.apply(mc("Where does Tom live?", ["a village", "A village.", "a village", "a village"]))
    assert not same.perturbed and same.reason == "no distinct distractor"
    one = addsent.apply(mc("Where does Tom live?", ["a village", "a city", "a city", "A City."]))
    assert not one.perturbed and one.reason == "no distinct distractor"
    assert AddSent({"insertions": 1}, resources=addsent.resources).apply(
        mc("Where does Tom live?", ["a village", "a city", "a city", "a village"])).perturbed


def test_a_failed_search_says_which_sentence_failed_and_why(addsent):
    """'Knife.' makes the first sentence; every other distractor contains the gold 'fork', so the
    second sentence is what fails: with min_insertions 2 the reason says so rather than that none
    could be made; by default (min_insertions 1) the question keeps its one sentence, counted."""
    ex = mc("What can you use to put food in your mouth?", ["fork", "Knife.", "Knife or fork.", "Knife and fork"])
    out = AddSent({"min_insertions": 2}, seed=11, resources=addsent.resources).apply(ex)
    assert not out.perturbed and out.reason == "only 1 of 2 sentences: gold answer in sentence"
    out = addsent.apply(ex)
    assert out.perturbed and [s.answer for s in summary(out.example).sentences] == ["Knife."]
    assert addsent.summarize([out.example])["fewer_sentences"] == 1
    with pytest.raises(ConfigError, match="min_insertions must be an integer from 1 to insertions"):
        AddSent({"min_insertions": 3}, resources=addsent.resources)


def test_a_tie_of_refusals_is_reported_as_the_first_met_not_by_name():
    refused = Counter()
    for why in ("a 'not' sentence rules out an option", "gold answer in sentence",
                "gold answer in sentence", "a 'not' sentence rules out an option"):
        refused[why] += 1
    assert search_failure(refused, 0, 2) == "a 'not' sentence rules out an option"
    assert search_failure(Counter(), 0, 2) == "edits leave the question unchanged"


def test_cannot_perturb_is_raised_directly(addsent):
    import random

    with pytest.raises(CannotPerturb):
        addsent.perturb(mc("Where does Tom live?", ["a", "a", "a", "a"]), random.Random(0))


@pytest.mark.parametrize("n", [1, 3])
def test_other_insertion_counts(res, n):
    ex = mc("Why did the farmer sell his horse?", ["money", "age", "a car", "his son"])
    new, sentences = run(AddSent({"insertions": n}, seed=5, resources=res), ex)
    assert len(sentences) == n == len({s.sentence for s in sentences})
    assert len({s.option for s in sentences}) == n


def test_summarize(with_fallback, no_fallback):
    examples = [
        mc("Who can do it?", ["Jack", "Tom", "Mary", "Mike"], qid="a"),
        mc("Why did the farmer sell his horse?", ["money", "age", "a car", "his son"], qid="b"),
        mc("Where does Tom live?", ["a village", "a village", "a village", "a village"], qid="c"),
        mc("Which is NOT true?", ["Tom is tall", "Mary is kind", "Tom likes chess", "It rained"], qid="d"),
    ]
    outs = []
    for e in examples:
        out = with_fallback.apply(e)
        outs.append(out.example if out.perturbed else
                    e.with_provenance(AttackSummary(with_fallback.name, unchanged=out.reason)))
    stats = with_fallback.summarize(outs)
    assert stats["questions"] == 4 and stats["perturbed"] == 3
    assert stats["negated_questions_skipped"] == 0 and stats["negated_questions_attacked"] == 1
    assert stats["negation_fallback_share"] == pytest.approx(1 / 3, abs=1e-4)
    assert stats["negation_fallback_questions"] == pytest.approx(1 / 3, abs=1e-4)
    kinds = stats["replacements_by_kind"]
    assert kinds["negation"] == 2 and kinds["glove"] >= 4 and kinds["antonym"] == 2
    assert kinds["other_referent"] == 2
    assert stats["sentences_by_rule"] == {"subject_who": 2, "do_why": 2, "other_referent": 2}
    assert stats["glued_share"] == 0.0  # every sentence a statement (glued_fallback is on, and unused)
    inserted = [s.sentence for o in outs if o.provenance and summary(o).sentences for s in summary(o).sentences]
    assert stats["avg_inserted_words"] == pytest.approx(sum(len(words(s)) for s in inserted) / len(inserted), abs=1e-3)
    assert with_fallback.summarize([])["negation_fallback_share"] == 0.0
    default = [no_fallback.apply(e) for e in examples]
    assert [o.reason for o in default] == ["no change of meaning", None, "no distinct distractor", None]
    stats = no_fallback.summarize([o.example if o.perturbed else
                               o.example.with_provenance(AttackSummary(no_fallback.name, unchanged=o.reason)) for o in default])
    assert stats["perturbed"] == 2 and stats["negation_fallback_share"] == 0.0
    assert stats["negated_questions_skipped"] == 0 and "negation" not in stats["replacements_by_kind"]
    assert stats["glued_share"] == 0.0


def test_multiple_choice_only(addsent):
    from advrace.core.examples import SpanExample

    ctx = "Tom lives in a village."
    span = SpanExample(id="s", title="t", context=ctx, question="Where does Tom live?",
                       answers=(("a village", ctx.index("a village")),))
    with pytest.raises(ConfigError):
        addsent.apply(span)


# paraphrases: a replacement that keeps the question's meaning makes the passage answer it wrongly


class _FixedNeighbours:
    """GloVe whose nearest words are fixed per word (the real vectors for membership)."""

    def __init__(self, glove, neighbours):
        self._glove, self._neighbours = glove, neighbours

    def nearest(self, word, k=10):
        return [(w, 0.9 - i / 100) for i, w in enumerate(self._neighbours.get(word, []))][:k]

    def prepare(self, words, k=10):
        pass

    def __contains__(self, word):
        return word in self._glove


class SynonymNeighbourResources(NoWordResources):
    """The real resources with GloVe neighbours that are all synonyms or spelling variants of
    the question's words, as GloVe's nearest neighbours of common nouns often are."""

    def __init__(self, real, neighbours):
        super().__init__(real)
        self.glove = _FixedNeighbours(real.glove, neighbours)


def test_synonym_neighbours_are_never_taken(addsent, res):
    tok = next(t for t in res.parse("What is the story mainly about?") if t.text == "story")
    plain = AddSent({}, seed=11, resources=res)
    plain._same_meaning_filter = False
    assert "tale" in plain.swaps.glove_candidates(tok, set(), set(), 6)  # the real nearest synonym
    cands = addsent.swaps.glove_candidates(tok, set(), set(), 6)
    assert cands and "tale" not in cands
    assert all(res.same_meaning("story", c, "NOUN") is None for c in cands)


@pytest.mark.parametrize("neighbours", [
    {"purpose": ["intent", "aim"], "behavior": ["behaviour"]},
    # near senses: a sibling sharing a word ("aim"), a hyponym one link down
    {"purpose": ["objective"], "behavior": ["conduct"]},
])
def test_only_synonyms_fall_back_to_negation(res, neighbours):
    resources = SynonymNeighbourResources(res, neighbours)
    ex = mc("What is the purpose of Tom's behavior?",
            ["To help Mary", "To win a prize", "To please his teacher", "To find a job"])
    out = AddSent({"negation_fallback": False}, seed=11, resources=resources).apply(ex)
    assert not out.perturbed and out.reason == "no change of meaning"
    attack = AddSent({"negation_fallback": True, "glued_fallback": True}, seed=11, resources=resources)
    _, sentences = run(attack, ex)
    for s in sentences:
        assert s.negation_fallback
        assert [r.kind for r in s.replacements] == ["negation"]
        assert "intent" not in s.sentence and "behaviour" not in s.sentence
        assert "purpose of Tom's behavior" in s.sentence


def test_a_sentence_that_keeps_the_meaning_is_negated(res):
    """The safety net behind the candidate filter: edits none of which changes the meaning give
    way to negation."""
    resources = SynonymNeighbourResources(res, {"film": ["movie"]})
    ex = mc("Why does Tom like the film?", ["It is funny", "It is short", "It is sad", "It is new"])
    unfiltered = AddSent({}, seed=11, resources=resources)
    unfiltered._same_meaning_filter = False
    plan = unfiltered.swaps.plan(ex, unfiltered.rng_for(ex))
    edits, fallback = unfiltered.swaps.variant(plan, 0)
    assert not fallback and [e[2] for e in edits] == ["movie"]
    assert edits[0][3].same_meaning == "synonym" and edits[0][3].changes_meaning is False
    filtered = AddSent({"negation_fallback": True}, seed=11, resources=resources)
    edits, fallback = filtered.swaps.variant(plan, 0)
    assert fallback and [e[3].kind for e in edits] == ["negation"]
    assert AddSent({"negation_fallback": False}, seed=11, resources=resources).swaps.variant(plan, 0) == ([], True)


def test_replacement_records_say_the_meaning_changed(addsent):
    ex = mc("Why did the farmer sell his horse?",
            ["He needed money", "The horse was old", "He wanted a car", "His son asked him to"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        for rep in s.replacements:
            assert rep.changes_meaning is True
            if rep.kind == "glove":
                assert rep.same_meaning is None and rep.pos == "NOUN"
                assert ex.question[rep.start:rep.end] == rep.old


def test_truth_words_are_kept(addsent):
    """'Which is FALSE according to the passage X' would say that a distractor is false."""
    ex = mc("Which of the following is TRUE about Tom's old village?",
            ["Tom is happy", "Tom is sad", "Tom is tired", "Tom is ill"])
    plan = addsent.swaps.plan(ex, addsent.rng_for(ex))
    changed = [tok.text for tok, _ in plan.substitutions + plan.antonyms]
    assert changed and "TRUE" not in changed
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert "FALSE" not in s.sentence and not {r.old.lower() for r in s.replacements} & {"true"}


def test_framing_words_are_kept(addsent, with_fallback):
    ex = mc("What do the underlined words in the last sentence mean?",
            ["Tom is happy", "Tom is sad", "Tom is tired", "Tom is ill"])
    assert addsent.apply(ex).reason == "no change of meaning"  # only framing words to change
    _, sentences = run(with_fallback, ex)
    for s in sentences:
        assert not {r.old.lower() for r in s.replacements} & {"words", "sentence"}


# issue 46: author questions, statements, whole-passage, what-the-passage-states


def test_author_question_is_said_of_another_writer(addsent):
    """'The writer urges the listeners to obey their parents.' keeps this passage's writer and
    answers the question with a distractor; the sentence must be about another writer."""
    ex = mc("The writer urges the readers to  _  .",
            ["be independent", "obey their parents", "read more books", "travel alone"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert s.sentence.startswith("Another writer ")
        assert "the writer" not in s.sentence.lower()
        assert any(r.kind == "reframe" and r.new == "Another" for r in s.replacements)


def test_author_question_keeping_a_title_is_skipped(negating):
    """'Another writer mentioned the book The Magic of Thinking Big because ...' is still about
    the very book asked of: skipped, counted; the same question without a title is attacked."""
    titled = mc("The author mentioned the book The Magic of Thinking Big mainly because  _  .",
                ["its price was attractive", "it changed his life", "it was new", "it was short"])
    out = negating.apply(titled)
    assert not out.perturbed and out.reason == "title kept in a question about the author"
    _, sentences = run(negating, mc("The author mentioned the book mainly because  _  .", titled.options))
    assert all(s.sentence.startswith("Another author mentioned the book mainly because ") for s in sentences)


def test_author_not_moved_is_skipped(negating):
    out = negating.apply(mc("Writers like  _  .", ["chess", "music", "rain", "Paris"]))
    assert not out.perturbed and out.reason == "author not moved to another person"


def test_wh_question_gets_a_statement_not_the_question_glued(addsent, with_fallback):
    """AdvRACE glued the distractor after the question ('Where does Tom live a town.'); the
    declarative rules state it. Where they cannot, the question is skipped (counted) unless
    glued_fallback asks for AdvRACE's form, recorded as rule 'glued'."""
    ex = mc("Where does Tom live?", ["in a village", "in a city", "in a castle", "on a boat"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert s.rule not in ("glued", "blank") and "?" not in s.sentence
        assert not s.sentence.lower().startswith("where")
        assert s.sentence.endswith(s.answer + ".")
    # nothing to swap, so negated: "Who cannot drive with?", whose stranded preposition the rules refuse
    unstated = mc("Who can drive with?", ["Jack", "Tom", "Mary", "Mike"])
    no_glue = AddSent({"negation_fallback": True}, seed=11, resources=with_fallback.resources)
    out = no_glue.apply(unstated)
    assert not out.perturbed and out.reason.startswith("no statement: ")
    _, sentences = run(with_fallback, unstated)
    assert all(s.rule == "glued" for s in sentences)


@pytest.mark.parametrize("question, start", [
    ("What is the passage mainly about?", "Another passage is mainly about "),
    ("What is the best title for the passage?", "The best title for another passage is \""),
])
def test_whole_passage_question_is_said_of_another_text(negating, question, start):
    _, sentences = run(negating, mc(question, ["school life", "a trip", "a new friend", "football"]))
    for s in sentences:
        assert s.sentence.startswith(start)
        assert not s.negation_fallback


@pytest.mark.parametrize("question", ["Which of the following is true?", "What can we learn from the passage?"])
def test_what_the_passage_states_is_said_of_another_referent(addsent, question):
    """'Tom is tall.' inserted for 'Which is true?' would make a distractor true of the passage's
    Tom; said of another person it lures a word matcher and leaves the gold the only answer."""
    ex = mc(question, ["Tom lives in a village", "Mary is a teacher", "He hates football", "The teacher is tall"])
    _, sentences = run(addsent, ex)
    assert len(sentences) == 2
    for s in sentences:
        assert s.rule == "other_referent"
        said = set(words(s.sentence))
        assert not {"Mary", "He", "Tom"} & said
        assert s.sentence.startswith("Another teacher") or any(r.new in s.sentence for r in s.replacements)
        assert ex.options[s.option].split()[-1] in s.sentence


def test_clause_option_is_said_of_another_referent(addsent):
    ex = mc("What did Tom do after school?",
            ["He walked home.", "He played football.", "She sang a song.", "He read a book."])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert s.rule == "other_referent"
        first = s.sentence.split()[0]
        assert first not in ("He", "She", "Tom") and first[0].isupper()


def test_other_people_are_not_the_passage_s(res):
    """A name drawn for another referent is none the passage, question or options use."""
    from advrace.attacks.sentences.other_referent import OTHER_PEOPLE
    passage = PASSAGE + " " + " ".join(n.split()[0] for n in OTHER_PEOPLE[:-1]) + " came too."
    ex = MCExample(id="q", passage=passage, question="Which of the following is true?",
                   options=("He is tall", "She is kind", "He likes chess", "She is ill"), label=0)
    attack = AddSent({"insertions": 1}, seed=3, resources=res)
    _, sentences = run(attack, ex)
    assert OTHER_PEOPLE[-1] in sentences[0].sentence


def test_a_claim_about_a_kind_is_another_person_s_belief(addsent):
    """'Teenagers need less sleep than adults.' moved to a neighbour kind ('Youngsters need ...')
    is the passage's writer stating the distractor; as another person's belief it is reported."""
    ex = mc("Which of the following would the writer most probably agree with?",
            ["Sleep helps memory", "Teenagers need less sleep than adults", "Students should study all night",
             "Dogs can dream every night"])
    _, sentences = run(addsent, ex)
    for s in sentences:
        assert s.rule == "other_referent"
        name, rest = s.sentence.split(" believes that ")
        assert name in OTHER_PEOPLE_NAMES and rest == ex.options[s.option][0].lower() + ex.options[s.option][1:] + "."
    out = addsent.apply(mc("Which of the following is an opinion?", ex.options))
    assert not out.perturbed and "opinion" in out.reason


OTHER_PEOPLE_NAMES = __import__("advrace.attacks.sentences.other_referent", fromlist=["OTHER_PEOPLE"]).OTHER_PEOPLE


def test_same_takes_the_definite_article(res):
    """"became a different man" -> "became a same man" (read on dev-middle): "same" takes "the"."""
    attack = AddSent({"insertions": 1}, seed=3, resources=NoWordResources(res))
    attack.resources.antonyms = res.antonyms  # antonyms only, no GloVe words
    ex = mc("Why did Tom's father become a different person?",
            ["Because he lost an arm.", "Because he lost his job.", "Because he moved away.", "Because he got rich."])
    plan = attack.swaps.plan(ex, __import__("random").Random(0))
    assert any(t.text == "different" for t, _ in plan.antonyms)
    j = next(j for j in range(4) if any(e[2] == "same" for e in attack.swaps.variant(plan, j)[0]))
    text = apply_edits(ex.question, attack.swaps.variant(plan, j)[0])
    assert "the same person" in text and "a same" not in text


@pytest.mark.parametrize("question, option, sentence", [
    # a frame after the question: its pronoun takes the question's subject, so the change shows
    ("What are the children doing in the afternoon? They are  _  .", "playing", "The children are playing."),
    ("What's Mike? He's a   _", "policeman", "Mike's a policeman."),
    ("What do Jack and Mary have? They have  _  .", "bikes", "Jack and Mary have bikes."),
    # "Because _" is a fragment: the why-question states whole
    ("Why did the Indians go to America? Because   _  .", "northern Asia became very cold",
     "The Indians went to America because northern Asia became very cold."),
    # read on dev-middle (issue 46): each its own kind of sentence the rules wrote broken before
    ("What did the writer think of the school trip?", "terrible", "The writer thought the school trip was terrible."),
    ("What did people think of Hill before the age of nine?", "foolish",
     "People thought Hill was foolish before the age of nine."),
    ("What does Tom think of his parents?", "strict", "Tom thinks his parents are strict."),
    ("The best title  of the passage is   _  .", "How to keep calm in earthquakes",
     'The best title of the passage is "How to keep calm in earthquakes".'),
    ('The best title should be "  _  ".', "Emperor Yang", 'The best title should be "Emperor Yang".'),
    ("How many people are there in-the story?", "Two.", "There are two people in the story."),
])
def test_a_question_then_a_frame_is_one_statement(res, question, option, sentence):
    """"What's Mike? He's a doctor." kept the question (the grammar check refused 30 such items
    of dev-middle), and "He's a doctor." alone names no one the question's change can reach."""
    assert statement(question, option, res)[0] == sentence


def test_a_fragment_after_a_question_is_no_statement(res):
    """"How does the elephant smell? Through two holes _": the frame alone has no verb."""
    sentence, why = statement("How does the elephant smell? Through two holes   _  .", "in the cup", res)
    assert sentence == "" and why == "a fragment after the question"


def test_an_option_takes_the_passage_s_case():
    """RACE capitalises options ("Knife.", "Fun"); the passage shows whether the word is a name."""
    passage = "You eat with a knife and fork. It was fun. Tom lives with his aunt Polly. Then Bill paid the bill."
    assert passage_case("Knife.", passage) == "knife."
    assert passage_case("Fun", passage) == "fun"
    assert passage_case("Polly.", passage) == "Polly." and named_in_passage("Polly.", passage)
    assert passage_case("Bill", passage) == "Bill"  # written both ways: left as it is
    assert passage_case("Great", passage) == "Great"  # not in the passage: left to the tagger
    assert not named_in_passage("Knife.", passage)


def test_a_yes_or_no_reply_is_no_sentence(addsent):
    """"Yes, Alex Morgan and Jordan Lee do." for "Do they often have sports ...?": no statement."""
    ex = mc("Do they often have sports in the morning or in the afternoon?",
            ["In the afternoon.", "Yes, they do.", "No, they don't.", "In the morning."], label=0)
    out = addsent.apply(ex)
    sentences = summary(out.example).sentences if out.perturbed else ()
    assert not any(s.sentence.lower().startswith(("yes", "no,")) for s in sentences)


def test_the_most_fluent_sentence_is_kept(res):
    """With a fluency model, several passing sentences compete and the LM's most fluent is kept,
    its score recorded; without one, the first that passes is kept and no score is written."""
    ex = mc("What did Tom play after school?", ["football", "the piano", "chess", "tennis"])
    scored = AddSent({"fluency_model": "smollm2"}, seed=11, resources=res)
    first = AddSent({}, seed=11, resources=res)
    assert first.config.fluency_model == ""
    by_scored = summary(scored.apply(ex).example).sentences
    s_first = summary(first.apply(ex).example).sentences[0]
    assert s_first.fluency is None and all(s.fluency is not None for s in by_scored)
    assert by_scored[0].sentence != by_scored[1].sentence
    assert {r.new for r in by_scored[0].replacements} != {r.new for r in by_scored[1].replacements}
    from advrace.attacks.sentences.fluency import fluency
    from advrace.core.numbers import significant
    scorer = fluency("smollm2")
    best = scorer.scores([by_scored[0].sentence])[0]
    assert abs(significant(best) - by_scored[0].fluency) < 2e-3  # alone, or beside its pool: rounding only
    if s_first.sentence != by_scored[0].sentence:  # the first that passed competed and lost
        assert scorer.scores([s_first.sentence])[0] <= best + 2e-3
