"""Typed fake answers from the data (fake_answers.FakePool), the checks that keep the question's
change in the added sentence, and the spread of GloVe substitutions."""

import random

import pytest

from advrace.resources import get_resources
from advrace.attacks.squad.candidates import sentence_candidates
from advrace.attacks.squad.config import AddSentConfig
from advrace.attacks.sentences.readability import doubled_words, readability_problem
from advrace.attacks.squad.fake_answers import FAKES, FakePool, type_key
from advrace.attacks.sentences.question_mutation import mutate_question
from advrace.core.provenance import AdversarialSentence, Replacement
from advrace.core.checks import REGISTRY, TextContext
from advrace.core.examples import Answer, SpanExample
from conftest import FixedNeighbourResources

CONTEXTS = [
    "Thomas Newcomen built the atmospheric engine in 1712 in Dudley. James Watt improved it in 1765.",
    "Nikola Tesla moved to New York in 1884 and worked for Thomas Edison. George Westinghouse bought his patents.",
    "Marie Curie won the Nobel Prize in 1903. Albert Einstein published his theory in 1905 in Bern.",
]


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.fixture(scope="module")
def pool(res):
    return FakePool.from_contexts(CONTEXTS, res, cap=2)


def _both_sets(pool, key, **kw):
    return pool.choose(key, second_set=False, **kw) + pool.choose(key, second_set=True, **kw)


def test_fakes_are_the_datas_phrases_of_the_answers_type(res, pool):
    persons = pool.phrases[("person",)]
    assert "Albert Einstein" in persons
    assert "Marie Curie" not in persons  # "curie" is a common noun (a unit): not trusted as a name
    got = _both_sets(pool, ("person",), avoid_answers=["Thomas Newcomen"], context=CONTEXTS[0],
                     question="Who built the engine?", rng=random.Random(1), k=10)
    fixed = set(FAKES["person"][0] + FAKES["person"][1])
    assert set(got) & set(persons) and set(got) <= set(persons) | fixed  # the fixed list when a set has none
    # never a phrase of the context, never one sharing a word with an answer of the paragraph
    assert not {"James Watt", "Thomas Newcomen", "Thomas Edison"} & set(got)
    years = _both_sets(pool, ("year",), avoid_answers=["1712"], context=CONTEXTS[0], question="When?",
                       rng=random.Random(1), k=10)
    assert years and set(years) <= {"1884", "1903", "1905"}


def test_the_two_sets_are_disjoint_and_each_fake_serves_at_most_cap_times(res, pool):
    kw = dict(avoid_answers=[], context="", question="", k=10)
    first, second = pool.choose(("person",), rng=random.Random(0), **kw), \
        pool.choose(("person",), rng=random.Random(0), second_set=True, **kw)
    assert first and second and not set(first) & set(second)
    fresh = FakePool.from_contexts(CONTEXTS, res, cap=2)
    seen = []
    for i in range(20):
        got = fresh.choose(("person",), rng=random.Random(i), k=1, **{k: v for k, v in kw.items() if k != "k"})
        if got:
            fresh.use(got[0])
            seen.append(got[0])
    counts = {s: seen.count(s) for s in seen}
    assert seen and max(counts.values()) <= 2
    # the fixed list only when the data has none left, under the same cap, rotating through it
    fixed = set(FAKES["person"][0])
    first_fixed = next(i for i, s in enumerate(seen) if s in fixed)
    assert all(counts[s] == 2 for s in seen[:first_fixed]) and not fixed & set(seen[:first_fixed])
    drawn = seen[first_fixed:]
    assert set(drawn) <= fixed and len(set(drawn)) == min(len(drawn), len(fixed))


def test_no_fake_where_the_type_is_unknown(res, pool):
    context = "The engine was built in a hurry by workers in the town."
    start = context.index("hurry")
    assert type_key("other", context, start, start + 5, res) is None
    assert pool.choose(None, [], context, "", random.Random(0)) == []
    start = context.index("workers")
    assert type_key("plural_noun", context, start, start + 7, res, "Which workers built the engine?") == \
        ("plural_noun", "noun.person")
    # a question that names no noun gives no second opinion on WordNet's first sense
    assert type_key("plural_noun", context, start, start + 7, res, "By what was the engine built?") is None


def test_common_noun_fakes_share_the_heads_wordnet_file(res):
    contexts = ["The theory of evolution changed biology.", "His belief in fate was strong.",
                "A tractor pulled the cart across the field."]
    pool = FakePool.from_contexts(contexts, res)
    start = contexts[1].index("belief")
    key = type_key("noun", contexts[1], start, start + 6, res, "What belief was strong?")
    assert key == ("noun", "noun.cognition")
    got = _both_sets(pool, key, avoid_answers=["belief"], context=contexts[1], question="", rng=random.Random(0))
    assert got and all("tractor" not in g and "cart" not in g for g in got)


def lost_replacements(sentence, mutated, reps, res=None):
    """The shared change_vanished check, as the attack asks it."""
    ctx = TextContext(same_meaning_fn=res.same_meaning if res else None)
    record = AdversarialSentence(sentence, question=mutated, replacements=tuple(reps))
    return REGISTRY["change_vanished"].lost(sentence, record, ctx)


def test_a_change_that_vanished_is_caught():
    mutated = "In what century did Savery patent his steam pump?"
    reps = [Replacement(8, 15, "year", "century", "glove")]
    assert lost_replacements("Savery patented his steam pump in 1997.", mutated, reps) == reps
    reps = [Replacement(0, 6, "Savery", "Tesla", "glove")]
    assert lost_replacements("Tesla patented his steam pump in 1997.", "In what year did Tesla patent ...", reps) == []
    assert lost_replacements("Savery patented his steam pump in 1997.", "In what year did Tesla patent ...", reps) == reps


def test_a_sentence_that_lost_the_change_is_never_a_candidate(res):
    cfg = AddSentConfig()
    context = "Thomas Savery patented his steam pump in 1698. The engine was used in mines."
    start = context.index("1698")
    ex = SpanExample(id="q1", title="Savery", context=context, question="In what year did Savery patent his steam pump?",
                     answers=(Answer("1698", start),))
    pool = FakePool.from_contexts([context, "Newcomen built it in 1712."], res)
    cands, rejected = sentence_candidates(ex, res, cfg, rng=random.Random(0), pool=pool)
    mutated_words = set()
    for c in cands:
        assert lost_replacements(c.sentence, c.question, list(c.replacements)) == []
        mutated_words |= {r.new for r in c.replacements}
    assert cands or rejected


@pytest.mark.parametrize("sentence, doubled", [
    ("The name is is the origin.", True), ("The origin is the a tractor.", True),
    ("He said that the war ended.", False), ("The origin is a tractor.", False)])
def test_doubled_words_are_refused(res, sentence, doubled):
    assert bool(doubled_words(sentence)) == doubled
    problem = readability_problem(sentence, "What is the origin?", ["x"], res)
    assert (problem == "doubled word") == doubled


def test_detached_possessive_is_refused(res):
    assert readability_problem("Hollow 's career was one of his most unproductive.", "What part?", ["x"],
                               res) == "detached possessive"


def test_substitutions_rotate_among_the_nearest_candidates(res):
    fixed = FixedNeighbourResources(res, {"usa": ["canada", "mexico", "france", "germany"]})
    picks = {tuple(r.new for r in mutate_question("What did the USA build in 1990?", fixed, neighbours=10,
                                                  rng=random.Random(seed))[1] if r.old == "USA")
             for seed in range(12)}
    assert len(picks) > 1 and all(p[0] in ("CANADA", "MEXICO", "FRANCE") for p in picks)
    # without an rng, the first one, as before
    _, reps = mutate_question("What did the USA build in 1990?", fixed, neighbours=10)
    assert [r.new for r in reps if r.old == "USA"] == ["CANADA"]


def test_a_related_word_is_refused_for_common_words_not_for_names(res):
    # "years" (a common noun in a DATE entity): a neighbour reported as related is refused
    near = {"years": ["decades", "months"], "tesla": ["edison", "westinghouse"]}
    same = {("years", "decades"): "hypernym", ("tesla", "edison"): "hypernym"}
    fixed = FixedNeighbourResources(res, near, same)
    _, reps = mutate_question("What did Tesla build 20 years ago?", fixed, neighbours=10)
    news = {r.old: r.new for r in reps}
    assert news.get("years") != "decades"
    assert news.get("Tesla") == "Edison"  # a name's relative is another name: Jia and Liang's point


@pytest.mark.parametrize("gold, question, kind, ok", [
    ("Dolby Digital", "Sky Box office also include what optional soundtracks?", "person", False),  # a product
    ("Dolby Digital", "What were NTL's services rebranded as?", "person", False),
    ("Dolby Digital", "Who first sent radio waves across the Atlantic?", "person", True),
    ("Dolby Digital", "What German poet was descended from Huguenots?", "person", True),
    ("Horniman Museum", "The Los Angeles Clippers are a team belonging to which sport?", "organisation", False),
    ("Horniman Museum", "Which museum would receive the loans?", "organisation", True),
    ("Dolby Digital", "Which team won Super Bowl 50?", "organisation", False),  # a name of no common noun
    ("Brazil", "Which nation contains most of the forest?", "country", True),
    ("Brazil", "Which city contains most of the forest?", "country", False),  # a country, not a city
    ("Brazil", "What contains most of the forest?", "country", False),
    ("Korean", "What nationality is Hoesung Lee?", "nationality", True),
    ("Korean", "What tribes feared the Romans?", "nationality", False),
    ("four", "How many Panthers players were selected?", "number", True),  # a count of persons
    ("four", "Which player was selected?", "number", False),
])
def test_the_question_and_the_type_must_agree(res, gold, question, kind, ok):
    context = f"{gold} was chosen by them."
    assert (type_key(kind, context, 0, len(gold), res, question) is not None) == ok


@pytest.mark.parametrize("kind, text, key", [
    ("country", "Brazil", ("place", "country")), ("country", "Chicago", ("place", "city")),
    ("location", "Sea of Japan", ("place", "sea")), ("country", "Duval County", ("place", "county")),
    ("country", "Lavoisier", None),  # WordNet's Lavoisier is a chemist: the tagger's slip
    ("location", "Middle Rhine", None), ("organisation", "Van Nuys Airport", ("named", "airport")),
    ("organisation", "University of Paris", ("named", "university")), ("organisation", "State Route 99", ("named", "route")),
    ("organisation", "Pittsburgh Steelers", None), ("nationality", "Islamic", None), ("nationality", "Dutch", ("nationality",)),
    ("number", "2,400", ("number", "integer")), ("number", "two", ("number", "word")), ("number", "almost a third", None),
    ("year", "1950s", ("year", "decade")), ("date", "12 May 1705", ("date", "day month year")),
    ("date", "between 1550 and 1580", None), ("money", "515 million years", None), ("percent", "up to 30%", None),
    ("quantity", "12 miles", ("quantity", "length")), ("quantity", "415,000 to 587,000 square kilometres", None),
    ("time", "17 seconds", None), ("time", "7:30 a.m.", ("time",)),
])
def test_a_phrase_is_keyed_by_more_than_the_taggers_label(res, kind, text, key):
    """Gold and fake share a place's class, a name's head noun, a number's and a date's form."""
    from advrace.attacks.squad.fake_answers import refined_key

    assert refined_key(kind, text, res) == key


def test_a_named_fake_shares_the_golds_head_and_the_fixed_lists_serve_only_their_class(res):
    context = "The Van Nuys Airport is busy. Planes also use Heathrow Airport and the Hoover Dam."
    pool = FakePool.from_contexts([context, "Planes use the Burbank Airport and the Long Beach Airport."], res)
    key = type_key("facility", context, 4, 20, res, "What is the busiest airport?")
    assert key == ("named", "airport")
    got = _both_sets(pool, key, avoid_answers=["Van Nuys Airport"], context=context,
                     question="What is the busiest airport?", rng=random.Random(0), k=5)
    # "Airport" is the head, not a word shared with the answer; the tagger took Long Beach's for a GPE
    assert sorted(got) == ["the Burbank Airport", "the Long Beach Airport"]
    # the fixed country list has Chicago and Nairobi: no fake for a country
    assert pool.choose(("place", "country"), [], "", "", random.Random(0), k=5) == ["Norway"]


def test_a_noun_answer_needs_the_question_and_the_answer_to_agree_on_its_kind(res):
    context = "Inflammation occurs because of the presence of melatonin."
    start = context.index("melatonin")
    # WordNet files melatonin under noun.body, the question asks for a molecule (noun.substance)
    assert type_key("noun", context, start, start + 9, res, "Inflammation occurs because of what molecule?") is None
    context = "The engine burns coal."
    start = context.index("coal")
    assert type_key("noun", context, start, start + 4, res, "What fuel does the engine burn?") == \
        ("noun", "noun.substance")


@pytest.mark.parametrize("gold, kind, ok", [
    ("Climate Change", "organisation", False), ("free India", "country", False), ("Ward", "organisation", False),
    ("DTIME(f(n))", "organisation", False), ("Lowry Digital", "organisation", False), ("France", "country", True),
    ("the Merkits", "person", False), ("17 seconds", "time", False), ("7:30 p.m.", "time", True),
    ("the 10 years", "date", False), ("July 1961", "date", True)])
def test_a_gold_the_tagger_mislabelled_gets_no_fake(res, gold, kind, ok):
    context = f"It was {gold} again."
    start = context.index(gold)
    question = {"person": "Who did it?", "country": "Where was it?"}.get(kind, "What was it?")
    assert (type_key(kind, context, start, start + len(gold), res, question) is not None) == ok


def test_a_four_digit_number_is_a_year(res):
    context = "Jochi was born in 1185."
    start = context.index("1185")
    assert type_key("number", context, start, start + 4, res, "What year was Jochi born?") == ("year",)


def test_a_quantity_fake_measures_what_the_answer_measures(res):
    from advrace.attacks.squad.fake_answers import quantity_kind

    assert [quantity_kind(t) for t in ("2,850 km", "300 tons", "110 mph", "5 horsepower", "12 apples")] == \
        ["length", "mass", "speed", "power", None]
    context = "The Danube is 2,850 km long."
    start = context.index("2,850 km")
    key = type_key("quantity", context, start, start + 8, res, "How long is the Danube?")
    assert key == ("quantity", "length")
    got = FakePool(3, res).choose(key, ["2,850 km"], context, "How long is the Danube?", random.Random(0), k=5)
    assert got == ["40 kilometres"]  # the fixed list's length, not its "300 tons"


def test_common_word_answers_get_no_fake_by_default(res):
    context = "The engine burns coal."
    start = context.index("coal")
    assert type_key("noun", context, start, start + 4, res, "What fuel does the engine burn?",
                    common_words=False) is None
    assert AddSentConfig().common_word_fakes is False


def test_a_number_fake_has_the_answers_magnitude(res):
    pool = FakePool.from_contexts(["The club had 281,754 members, 2,818 coaches and 17 trophies. Its rival had 31 trophies."], res)
    kw = dict(avoid_answers=["24"], context="", question="How many interceptions?", rng=random.Random(0), k=1)
    got = pool.choose(("number", "integer"), real="24", **kw) + pool.choose(("number", "integer"), real="24",
                                                                             second_set=True, **kw)
    assert got and all(len(g) == 2 for g in got)  # 17 and 31, before 2,818 and 281,754
