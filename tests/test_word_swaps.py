"""Word swaps that keep a question English and change what it asks about (attacks.word_swaps),
in SQuAD's question mutation and RACE's AddSent, with the real installed resources. Each kind is
tested on the sentence a wrong implementation writes (seen in real builds) and on a valid twin."""

from __future__ import annotations

import random

import pytest

from advrace.attacks.addsent import AddSent
from advrace.attacks.sentences.question_mutation import mutate_question
from advrace.attacks.sentences.word_swaps import (changes_referent, counted_by_ordinal, frame_fits, hyphen_part, in_fixed_phrase,
                                        keeps_form, known, same_field,
                                        name_pool, negated_antonym, same_ordinal_form, sense_antonyms,
                                        whole_name)
from advrace.core.provenance import Replacement
from advrace.resources import get_resources

from conftest import FixedNeighbourResources


@pytest.fixture(scope="module")
def res():
    return get_resources()


def _tok(res, text, word):
    return next(t for t in res.parse(text) if t.text == word)


# 1. part of speech and inflection

@pytest.mark.parametrize("question, word, new, keeps", [
    ("Where do the children play?", "children", "kids", True),
    ("Where do the children play?", "children", "child", False),  # plural stays plural
    ("When was the plastome discovered?", "discovered", "invented", True),
    ("When was the plastome discovered?", "discovered", "invent", False),  # VBN stays VBN
    ("When was the plastome discovered?", "discovered", "invention", False),
    ("What is the largest river?", "largest", "longest", True),
    ("What is the largest river?", "largest", "large", False),  # JJS stays JJS
    ("What happened in the 17th century?", "17th", "14th", True),
    ("What happened in the 17th century?", "17th", "17", False),  # an ordinal stays an ordinal
    ("What happened in the 17th century?", "17th", "second", False),  # of its own form
    ("What happened in the 17th century?", "century", "17th", False),  # "in the 14th 17th"
])
def test_a_swap_keeps_the_words_form(res, question, word, new, keeps):
    tok = _tok(res, question, word)
    tag = res.word_tags([new])[0][1]
    assert keeps_form(tok, new, tag, res, AddSent({}, resources=res).swaps.irregular()) is keeps


def test_ordinal_forms():
    assert same_ordinal_form("17th", "14th") and same_ordinal_form("second", "third")
    assert not same_ordinal_form("17th", "14st") and not same_ordinal_form("17th", "century")


# 2. names swap whole

def test_a_multi_word_name_is_one_unit(res):
    doc = res.parse("What did the United Kingdom sign with the Russian Federation?")
    names = {whole_name(t).text for t in doc if whole_name(t) is not None}
    assert names == {"United Kingdom", "Russian Federation"}
    assert whole_name(_tok(res, "Where is London?", "London")) is None  # one word: swapped as a word


@pytest.mark.parametrize("question, names", [
    ("What did the United Kingdom sign with the Russian Federation?", ["United Kingdom", "Russian Federation"]),
    ("Where did the team play in Los Angeles?", ["Los Angeles"]),
    ("What was the Habsburg Empire's capital?", ["Habsburg Empire"]),
    # no entity of a name label here: a run of proper nouns is one name all the same
    ("What was the final score of the AFC Championship Game?", ["AFC Championship Game"]),
])
def test_a_name_part_is_never_swapped_alone(res, question, names):
    """"Europe Federation", "San Houston", "The Habsburg Imperial": the wrong swaps change one word
    of a name. Each name stays whole or goes whole, to a name that shares none of its words."""
    for seed in range(3):
        mutated, reps = mutate_question(question, res, rng=random.Random(seed), common_words=True)
        for name in names:
            words = name.split()
            assert name in mutated or not any(w in mutated.split() for w in words), (mutated, reps)
            for r in reps:
                if set(r.old.split()) & set(words):
                    assert r.kind == "name" and name in r.old and not set(r.new.split()) & set(words), r


def test_a_whole_name_goes_to_a_whole_name_of_its_kind_from_the_pool(res):
    pool = name_pool([res.parse("The Ottoman Empire fought the Russian Empire. Paris and New South Wales.")])
    assert "Ottoman Empire" in pool["GPE"] or "Ottoman Empire" in pool.get("NORP", []) + pool.get("ORG", [])
    question = "What did the United Kingdom sign?"
    mutated, reps = mutate_question(question, res, rng=random.Random(0), names={"GPE": ["Nigeria"]})
    assert mutated == "What did Nigeria sign?", (mutated, reps)  # not "the Nigeria"
    assert [(r.old, r.new, r.kind) for r in reps] == [("the United Kingdom", "Nigeria", "name")]
    mutated, reps = mutate_question(question, res, rng=random.Random(0), names={"GPE": ["Ottoman Empire"]})
    assert mutated == "What did the Ottoman Empire sign?", (mutated, reps)
    # a pool name sharing a word may be the same entity ("Kingdom of Great Britain"): not taken
    mutated, reps = mutate_question(question, res, rng=random.Random(0), names={"GPE": ["Kingdom of Spain"]})
    assert "Kingdom of Spain" not in mutated


def test_race_never_swaps_a_name_part_alone(res):
    addsent = AddSent({}, seed=1, resources=res)
    doc = res.parse("Why did Tom move to Los Angeles?")
    eligible = {t.text for t in doc if addsent.swaps.glove_eligible(t, [])}
    assert "Tom" in eligible and not {"Los", "Angeles"} & eligible


# 3. ordinals and hyphenated words keep their construction

def test_a_noun_an_ordinal_counts_keeps_its_word(res):
    """GloVe's neighbours of "century" include "tradition" and "17th": "in the 14th tradition",
    "in the 14th 17th" (seen on SQuAD). The counted noun stays; the ordinal moves."""
    doc = res.parse("What style spread in the 17th century?")
    assert counted_by_ordinal(doc[-2]) and not counted_by_ordinal(doc[1])
    fixed = FixedNeighbourResources(res, {"century": ["tradition", "17th"], "17th": ["14th", "18th"],
                                          "style": ["fashion", "genre"]})
    for seed in range(3):
        mutated, reps = mutate_question("What style spread in the 17th century?", fixed, rng=random.Random(seed),
                                        common_words=True)
        assert mutated.endswith(("14th century?", "18th century?")), (mutated, reps)
        assert all(r.old != "century" for r in reps)


def test_a_part_of_a_hyphenated_word_stays(res):
    """"half-sister" -> "second-sister": a part of a hyphenated word swapped alone."""
    doc = res.parse("What is the name of his half-sister?")
    assert hyphen_part(next(t for t in doc if t.text == "half")) and not hyphen_part(doc[3])
    fixed = FixedNeighbourResources(res, {"half": ["second", "third"], "sister": ["daughter", "niece"],
                                          "half-sister": ["stepdaughter"], "name": []})
    mutated, reps = mutate_question("What is the name of his half-sister?", fixed, rng=random.Random(0),
                                    common_words=True, verbs=True)
    assert "half-sister" in mutated and not any(r.old in ("half", "sister", "half-sister") for r in reps), reps
    mutated, reps = mutate_question("What is the name of his sister?", fixed, rng=random.Random(0),
                                    common_words=True)  # the twin: a plain word swaps
    assert [r.old for r in reps] == ["sister"], reps


def test_a_scanning_error_is_no_word(res):
    assert not known(res, "rrmPrs") and not known(res, "e") and known(res, "ordinal") and known(res, "London")
    addsent = AddSent({}, seed=1, resources=res)
    doc = res.parse("The ordinal. e rrmPrs shows the dog.")
    eligible = {t.text for t in doc if addsent.swaps.glove_eligible(t, [])}
    assert "rrmPrs" not in eligible and "dog" in eligible


# 4. antonyms of the word's sense

@pytest.mark.parametrize("question, word, fixed", [
    ("When does the marathon usually take place in the town?", "place", True),  # WordNet take_place
    ("Tom likes to have fun with friends.", "fun", True),  # the bare object of a light verb
    ("Most people shopping on line are young.", "line", True),  # on_line, as "online"
    ("Why should students pay attention in class?", "attention", True),
    ("When does the marathon usually take place in the town?", "town", False),
    ("What did Tom give his mother?", "mother", False),  # a modified object
    ("Tom lost his money on the bus.", "money", False),
    ("Who bought the old house?", "house", False),
])
def test_a_word_of_a_fixed_phrase_is_not_swapped_alone(res, question, word, fixed):
    """Read on RACE dev-middle (issue 46): "take place" -> "takes way", "shopping on line" ->
    "shopping on point" ("telling lies" -> "telling reaches" is `same_field`'s)."""
    tok = _tok(res, question, word)
    assert in_fixed_phrase(tok, res.wordnet) is fixed
    addsent = AddSent({}, seed=1, resources=res)
    if fixed:
        assert not addsent.swaps.glove_eligible(tok, [])


@pytest.mark.parametrize("word, new, fits", [
    ("lies", "reaches", False),  # GloVe's neighbours of the surface form: "telling reaches"
    ("students", "schools", False),
    ("drink", "drank", False),  # no noun at all
    ("porter", "harrison", False),  # a name WordNet knows only as one, for a common noun
    ("man", "boy", True),
    ("school", "college", True),
    ("person", "man", True),  # a top word matches any of its kind
    ("Fleming", "Hooper", True),  # a name: the name rules decide
])
def test_a_noun_takes_a_neighbour_of_its_kind(res, word, new, fits):
    assert same_field(res.wordnet, word, new) is fits


@pytest.mark.parametrize("question, word, new, fits", [
    ("The Prime Minister died because he was ill.", "died", "killed", False),  # takes an object
    ("The Prime Minister died because he was ill.", "died", "disappeared", True),
    ("Hawking first noticed something was wrong with him.", "noticed", "looked", False),  # no clause
    ("Who can drive?", "drive", "run", True),
    ("Who can join the club?", "join", "enter", True),
])
def test_a_verb_takes_a_neighbour_used_as_it_stands(res, question, word, new, fits):
    """The verb fallback of RACE's AddSent ("Who can drive?" -> "Mike can run.") keeps the
    verb's frame: object, clause, infinitive, adjective or none."""
    assert frame_fits(res.wordnet, _tok(res, question, word), new) is fits


def test_an_antonym_read_in_another_sense_is_not_taken(res):
    """know -> ignore: WordNet pairs them on ignore's fifth sense (be ignorant of), which SemCor
    never counts; readers take "ignore" as disregard ("From another passage, we ignore that ...",
    53 sentences of dev-middle). Antonyms on counted senses stay."""
    assert sense_antonyms(res, "know", "VERB") == []
    assert sense_antonyms(res, "stop", "VERB") == ["start"]
    assert sense_antonyms(res, "come", "VERB") == ["go"]
    assert sense_antonyms(res, "young", "ADJ") == ["old"]


def test_antonyms_only_of_the_dominant_senses(res):
    assert "lose" not in sense_antonyms(res, "find", "VERB")  # lose is on find's third sense
    assert sense_antonyms(res, "like", "VERB") == ["dislike"]
    assert "lose" in sense_antonyms(res, "win", "VERB")
    assert "unoriginal" not in sense_antonyms(res, "original", "ADJ")
    addsent = AddSent({}, seed=1, resources=res)
    assert "lost" not in addsent.swaps.antonym_forms(_tok(res, "What has Tom found in the passage?", "found"))
    assert "dislikes" in addsent.swaps.antonym_forms(_tok(res, "Tom likes the book because it is short.", "likes"))


# 5. a change must move the referent

@pytest.mark.parametrize("old, new, kind, pos, moves", [
    ("city", "town", "glove_common", "NOUN", False),
    ("purpose", "knowledge", "glove", "NOUN", False),
    ("flaw", "defect", "glove_common", "NOUN", False),
    ("original", "unoriginal", "antonym", None, False),
    ("America", "USA", "glove", "PROPN", False),
    ("London", "Melbourne", "glove", "PROPN", True),
    ("January", "March", "glove", "PROPN", True),
    ("doctor", "lawyer", "glove_common", "NOUN", True),
    ("village", "town", "glove_common", "NOUN", True),
    ("happy", "sad", "antonym", None, True),
    ("1990", "1991", "glove", "NUM", True),
])
def test_changes_referent(res, old, new, kind, pos, moves):
    assert changes_referent(Replacement(0, len(old), old, new, kind, pos=pos), res) is moves


def test_negated_antonyms():
    assert negated_antonym("original", "unoriginal") and negated_antonym("unusual", "usual")
    assert negated_antonym("legal", "illegal") and not negated_antonym("happy", "sad")


class _NegatedAntonym(FixedNeighbourResources):
    """The real resources whose only antonym of "original" is "unoriginal" on its first sense."""

    def antonyms(self, word, pos):
        return ["unoriginal"] if word.lower() == "original" else self._real.antonyms(word, pos)

    @property
    def wordnet(self):
        real = self._real.wordnet

        class _WN:
            def synsets(self, lemma, pos=None):
                if lemma == "original":
                    return [s for s in real.synsets(lemma, pos=pos) if s.name() == "original.a.03"]
                return real.synsets(lemma, pos=pos)

            def __getattr__(self, name):
                return getattr(real, name)
        return _WN()


def test_a_mutation_that_only_negates_the_word_is_mutated_further(res):
    """"the original settlers" -> "the unoriginal settlers" keeps the settlers: the negated
    antonym is never taken, so the high-confidence rules change nothing and the next rules move
    another word (the twin without that antonym takes the same path)."""
    fixed = _NegatedAntonym(res, {"settlers": ["colonists", "farmers"]})
    assert sense_antonyms(fixed, "original", "ADJ") == ["unoriginal"]
    question = "Who gave the original settlers an identity?"
    assert mutate_question(question, fixed, rng=random.Random(0)) == (question, [])
    mutated, reps = mutate_question(question, fixed, rng=random.Random(0), common_words=True)
    assert mutated == "Who gave the original farmers an identity?", (mutated, reps)  # colonists restates
    assert all(changes_referent(r, res) for r in reps)


def test_a_near_synonym_only_change_is_no_mutation(res):
    """"What is rubisco's flaw?" -> "What is rubisco's defect?" restates the question: refused,
    and with nothing else to change the question is left unmutated (counted by the caller);
    the twin with a real neighbour mutates."""
    fixed = FixedNeighbourResources(res, {"flaw": ["defect", "imperfection"], "rubisco": []})
    assert mutate_question("What is rubisco's flaw?", fixed, rng=random.Random(0), common_words=True)[1] == []
    fixed = FixedNeighbourResources(res, {"flaw": ["defect", "strength"], "rubisco": []})
    mutated, reps = mutate_question("What is rubisco's flaw?", fixed, rng=random.Random(0), common_words=True)
    assert mutated == "What is rubisco's strength?", (mutated, reps)


def test_a_persons_name_parts_go_to_name_parts(res):
    """A person's name is given names and surnames: each part may go to another part that keeps
    the whole a person's name ("Bill Gates" -> "Bill Powell"); a common word does not ("Bill
    Gates" -> "Senate House", seen on RACE dev-middle)."""
    addsent = AddSent({}, seed=1, resources=res)
    doc = res.parse("Bill Gates grew up in  _  .")
    for tok in doc[:2]:
        assert addsent.swaps.glove_eligible(tok, [])
        cands = addsent.swaps.glove_candidates(tok, set(), set(), 6)
        assert cands and not {"senate", "house", "pentagon", "capitol"} & set(cands), cands


@pytest.mark.parametrize("question, word, new, keeps", [
    ("What is the Saxon Garden in Polish?", "Polish", "Hungarian", True),
    ("What is the Saxon Garden in Polish?", "Polish", "Poland", False),  # a language for a country
    ("What is the capacity of a Turing machine?", "Turing", "Babbage", True),
    ("Why did the Indians go to America?", "America", "Europe", True),  # a place for a place
    ("What is the capacity of a Turing machine?", "Turing", "Reasoning", False),  # a common word
])
def test_a_single_word_name_keeps_its_kind(res, question, word, new, keeps):
    from advrace.attacks.sentences.word_swaps import keeps_entity
    tok = _tok(res, question, word)
    assert keeps_entity(res, tok, new, tok.ent_type_) is keeps


@pytest.mark.parametrize("question, name, new, mutated", [
    ("Where is the United Kingdom?", "United", "Nigeria", "Where is Nigeria?"),
    ("Where is the Danube Delta?", "Danube", "Nile", "Where is the Nile?"),  # a river keeps "the"
    ("Who won the AFC Championship game?", "AFC", "Copa", "Who won the Copa game?"),  # "the" is the game's
    ("Who coached the Los Angeles team?", "Los", "Houston", "Who coached the Houston team?"),
])
def test_the_article_follows_the_new_name(res, question, name, new, mutated):
    span = whole_name(_tok(res, question, name))
    pool = {span.root.ent_type_: [new]}
    assert mutate_question(question, res, rng=random.Random(0), names=pool)[0] == mutated


def test_a_single_name_in_race_goes_to_a_name_of_its_kind(res):
    """"Bill's company worked hard at _" -> "Senate's firm ...": GloVe's neighbours of "bill"
    (seen on RACE dev-middle). A name goes to a name spaCy reads as one of its kind."""
    addsent = AddSent({}, seed=1, resources=res)
    tok = _tok(res, "Bill started to play with computers  _  .", "Bill")
    cands = addsent.swaps.glove_candidates(tok, set(), set(), 6)
    assert cands and not {"senate", "house", "congress", "legislation"} & set(cands), cands


def test_a_frame_word_takes_no_antonym(res):
    """"What antitype of city has Poland been?" (type -> antitype, seen on XQuAD): Jia and Liang's
    DO_NOT_ALTER words frame the question, for antonyms as for neighbours."""
    mutated, reps = mutate_question("What type of city has Warsaw been?", res, rng=random.Random(0))
    assert "antitype" not in mutated and all(r.old != "type" for r in reps), (mutated, reps)
