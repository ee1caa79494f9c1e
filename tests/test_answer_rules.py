"""Jia and Liang's answer rules past the typed pool (attacks/squad/answer_rules.py): every SQuAD answer gets a
fake, typed as finely as a rule allows, and the question mutation and declarative rules that let
those fakes into a sentence."""

import random

import pytest

from advrace.attacks.squad.candidates import sentence_candidates
from advrace.attacks.squad.config import AddSentConfig
from advrace.attacks.squad.answer_rules import (ANSWER_RULES, CATCH_ALL, LEXFILE_FAKES, POS_FAKES, FallbackFakes,
                                                shift_date, shift_number)
from advrace.attacks.sentences.declarative_rules import declarative_candidates
from advrace.attacks.squad.fake_answers import FakePool, answer_type
from advrace.attacks.sentences.question_mutation import mutate_question
from advrace.core.examples import Answer, SpanExample
from advrace.metrics import normalize_answer
from advrace.resources import get_resources


@pytest.fixture(scope="module")
def res():
    return get_resources()


def test_the_rules_are_one_ordered_tuple_in_jia_and_liangs_order():
    """The order a question's fakes are tried in, each rule by its name (docs/attacks/adversarial-squad.md):
    the gold's numbers moved, the kind the question names and the closed-book answer before the
    gold's own form, the catch-all last."""
    assert [rule.name for rule in ANSWER_RULES] == [
        "date", "number", "asked_name", "closed_book", "asked_kind", "abbreviation", "ner", "wh",
        "lexfile_neighbours", "pos_neighbours", "lexfile_nouns", "pos_words", "catch_all"]
    assert len({rule.make for rule in ANSWER_RULES}) == len(ANSWER_RULES)


@pytest.mark.parametrize("text, date, number", [
    ("between 1550 and 1580", "between 1525 and 1555", "between 1475 and 1505"),
    ("March 3, 1911", "September 14, 1886", None),  # a date's day and year are the date rule's
    ("3 March", "14 September", None),
    ("early March", "early September", None),
    ("June Carter", None, None),  # a month's name in a name is no month
    ("the Salt March", None, None),
    ("the 1990s", "the 1960s", None),
    ("about 21", None, "about 71"),
    ("three years", None, "eight years"),
    ("$5 million", None, "$1 million"),
    ("the 18th century", None, "the 68th century"),
    ("12th", None, "62nd"),
])
def test_dates_and_numbers_move_as_jia_and_liang_moved_them(text, date, number):
    assert shift_date(text) == date
    assert shift_number(text) == number


def test_each_fixed_noun_is_of_its_wordnet_file_and_the_sets_are_disjoint(res):
    wn = res.wordnet
    for lexfile, sets in LEXFILE_FAKES.items():
        for singular, plural in sets[0] + sets[1]:
            assert wn.synsets(singular.replace(" ", "_"), "n")[0].lexname() == lexfile, singular
        first = {w for pair in sets[0] for w in pair}
        assert not first & {w for pair in sets[1] for w in pair}, lexfile
    for tag, (one, two) in POS_FAKES.items():
        assert not set(one) & set(two), tag
    assert not set(CATCH_ALL[0]) & set(CATCH_ALL[1])


def _example(context, answer, question):
    start = context.index(answer)
    return SpanExample(id="q", title="t", context=context, question=question, answers=(Answer(answer, start),))


CASES = [
    # (context, answer, question, the rule expected first, its kind)
    ("The plague lasted until 1351 in the city.", "1351", "When did the plague end in the city?", "date", "year"),
    ("The council met in the spring of 1780 to decide.", "the spring of 1780", "When did the council meet?",
     "date", None),
    ("Students learn about the Magna Carta from the NAACP.", "NAACP", "Which group taught the students?",
     "abbreviation", "abbreviation"),
    ("The old mill was run by a quiet miller named Hobb.", "a quiet miller named Hobb", "Who ran the old mill?",
     "wh_who", "person"),
    ("Romans built long aqueducts across the valley.", "long aqueducts", "What did the Romans build?", "lexfile",
     "plural_noun"),
    ("The committee found the report rather vague.", "vague", "How did the committee find the report?",
     "pos_jj", "adjective"),
    ("After the storm the villagers repaired the bridge.", "repaired the bridge",
     "What did the villagers do after the storm?", "pos_vbd", "verb_past"),
]


@pytest.mark.parametrize("context, answer, question, rule, want", CASES)
def test_every_answer_gets_a_fake_by_the_first_rule_that_applies(res, context, answer, question, rule, want):
    ex = _example(context, answer, question)
    res.prepare_parses([context, question])
    pool = FakePool.from_contexts([context], res, cap=3)
    for second in (False, True):
        kind = answer_type(context, ex.answers[0].start, ex.answers[0].end, res)
        choices = list(FallbackFakes(pool, res, second).choices(ex, kind, [answer], random.Random(0)))
        assert choices[0].rule == rule
        assert want is None or choices[0].kind == want
        assert choices[-1].rule == "catch_all" and choices[-1].fakes  # some fake always exists
        for choice in choices:
            for fake in choice.fakes:
                assert normalize_answer(fake) != normalize_answer(answer)
                assert f" {normalize_answer(fake)} " not in f" {normalize_answer(context)} "


def test_a_plural_answer_gets_a_plural_fake_with_its_determiner(res):
    ex = _example("The king kept the lions in the tower.", "the lions", "What did the king keep in the tower?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    lexfile = next(c for c in FallbackFakes(pool, res).choices(ex, "other", ["the lions"], random.Random(0))
                   if c.rule == "lexfile")
    assert lexfile.kind == "plural_noun"
    assert all(f.startswith("the ") and f.endswith("s") for f in lexfile.fakes), lexfile.fakes


def test_a_question_of_undetermined_type_gets_a_sentence_and_its_rule_is_recorded(res):
    ex = _example("Romans built long aqueducts across the valley to carry water.", "long aqueducts",
                  "What did the Romans build across the valley?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    out, rejected = sentence_candidates(ex, res, AddSentConfig(), rng=random.Random(0), pool=pool)
    assert out, rejected
    assert {o.fake_rule for o in out} == {"lexfile"}
    assert all("aqueducts" not in o.sentence for o in out)


def test_a_question_the_high_confidence_rules_cannot_change_gets_a_common_words_neighbour(res):
    q = "When is the suspended team scheduled to return?"
    mutated, reps = mutate_question(q, res, rng=random.Random(0))
    assert not reps
    mutated, reps = mutate_question(q, res, rng=random.Random(0), common_words=True)
    assert reps and {r.kind for r in reps} == {"glove_common"}
    for r in reps:  # a word of the language that WordNet does not relate to the old one
        assert res.same_meaning(r.old, r.new, None) is None
        assert res.wordnet.morphy(r.new.lower(), "n") or res.wordnet.morphy(r.new.lower(), "a")


def test_a_name_glove_does_not_know_gets_jia_and_liangs_stand_in(res):
    mutated, reps = mutate_question("What is the NASUWT?", res, rng=random.Random(0), common_words=True)
    assert mutated == "What is the XKCD?" and reps[0].kind == "entity_type"


@pytest.mark.parametrize("question, answer, sentence", [
    ("When did the German army occupy Rhineland?", "1911", "The German army occupied Rhineland in 1911."),
    ("Who did the National Anthem at Super Bowl 50?", "Jeff Dean", "Jeff Dean did the National Anthem at Super Bowl 50."),
    ("WHy was the network formed in Michigan", "the war", "The network was formed in Michigan because of the war."),
    ("What is the longest time that a teaching certificate is good for?", "Jeff Dean",
     "The longest time that a teaching certificate is good for is Jeff Dean."),
    ("According to the AAA, what is the percentage of the gas stations that ran out?", "Jeff Dean",
     "According to the AAA, the percentage of the gas stations that ran out is Jeff Dean."),
    ("In 1972, what did Norway join?", "Jeff Dean", "In 1972, Norway joined Jeff Dean."),
    ("Name one of the causes of immunodeficiency.", "Jeff Dean", "One of the causes of immunodeficiency is Jeff Dean."),
])
def test_declarative_rules_survive_the_taggers_slips(res, question, answer, sentence):
    assert sentence in [c.sentence for c in declarative_candidates(question, answer, res, "year")]


@pytest.mark.parametrize("context, answer, question, rule, fake", [
    ("In 1930 Gandhi led the Salt March to Dandi, against the salt tax.", "the Salt March",
     "What protest did Gandhi lead in 1930?", None, None),  # not "the Salt September"
    ("The song was recorded by June Carter in Nashville.", "June Carter", "Who recorded the song?", None, None),
    ("The treaty was signed on March 15, 1990 in Rome.", "March 15, 1990", "When was the treaty signed?",
     "date", "September 26, 1965"),
    ("Manning was 39 when he played in the final.", "39", "How old was Manning when he played?", "number", "89"),
    ("Super Bowl 50 was played at Levi's Stadium.", "Super Bowl 50", "Which game was played at Levi's Stadium?",
     None, None),  # a name with a number in it is no number
])
def test_the_date_and_number_rules_fire_only_for_a_gold_of_their_type(res, context, answer, question, rule, fake):
    """The `date` and `number` rules move the gold's numbers, so the fake has the gold's type only
    where the gold, read as the fake_type check reads it, is a time or a number: they fire there
    alone, as that rule (and the check refuses them elsewhere)."""
    from advrace.core.checks.sentences import asked_group, wanted_group

    ex = _example(context, answer, question)
    res.prepare_parses([context, question])
    pool = FakePool.from_contexts([context], res, cap=3)
    kind = answer_type(context, ex.answers[0].start, ex.answers[0].end, res)
    choices = list(FallbackFakes(pool, res).choices(ex, kind, [answer], random.Random(0)))
    moved = [c for c in choices if c.rule in ("date", "number")]
    if rule is None:
        assert not moved, moved
        return
    assert [(c.rule, c.fakes) for c in moved] == [(rule, (fake,))]
    groups = {wanted_group(ex, lambda t, s, e: answer_type(t, s, e, res)), asked_group(question)}
    assert {"date": "time", "number": "number"}[rule] in groups


def test_a_verb_is_the_last_resort_of_the_mutation(res):
    q = "When was the plastome discovered?"
    assert not mutate_question(q, res, rng=random.Random(0), common_words=True)[1]
    mutated, reps = mutate_question(q, res, rng=random.Random(0), verbs=True)
    assert [r.kind for r in reps] == ["glove_verb"] and reps[0].old == "discovered"
    assert res.same_meaning("discovered", reps[0].new, "VERB") is None


def test_verb_swaps_false_leaves_a_question_only_a_verb_could_change_unattacked(res):
    """`verb_swaps: false`: the verb last resort is not taken, so a question nothing else changes
    gets no sentence, where the default gives it one whose only change is a verb."""
    from advrace.attacks.squad.candidates import _Mutations

    q = "When was the plastome discovered?"
    with_verbs = _Mutations(q, res, AddSentConfig(answer_model=""), random.Random(0))(frozenset(), 0)
    assert [r.kind for r in with_verbs[1]] == ["glove_verb"]
    without = _Mutations(q, res, AddSentConfig(answer_model="", verb_swaps=False), random.Random(0))(frozenset(), 0)
    assert without[1] == [] and without[0] == q


def test_readability_keeps_the_questions_own_slips_and_relative_clauses(res):
    from advrace.attacks.sentences.readability import leftover_wh_words, readability_problem
    question = "How many areas were impacted by the the death of vegetation?"
    assert readability_problem("Seven areas were impacted by the the death of vegetation.", question, ["three"],
                               res) is None
    assert readability_problem("Seven areas were were impacted by the death of vegetation.", question, ["three"],
                               res) == "doubled word"
    assert leftover_wh_words("Jeff Dean got a reward, which gave the team a new set of downs.", res) == []
    assert leftover_wh_words("Since 2006, what is the gender of the companion.", res) == ["what"]


def test_the_fake_type_check_reads_what_the_first_wh_word_asks(res):
    from advrace.core.checks.sentences import wanted_group
    called = _example("Revolutionary civil disobedience is an attempt.", "Revolutionary civil disobedience",
                      "What is it called when there is an active attempt to overthrow a government?")
    assert wanted_group(called, lambda t, s, e: "other") is None  # not "time": the "when" opens a clause
    when = _example("The war ended in 1918.", "1918", "When did the war end?")
    assert wanted_group(when, lambda t, s, e: "other") == "time"


def test_a_common_noun_gets_glove_neighbours_of_its_wordnet_file_that_are_other_things(res):
    ex = _example("The lamprey is a jawless fish of the rivers.", "The lamprey", "What jawless fish lives in rivers?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    found = FallbackFakes(pool, res)._neighbours("lamprey", False, "The lamprey", " the rivers ", set(), "lamprey", 3)
    assert found and found.rule == "lexfile" and len(found.fakes) >= 2
    other = FallbackFakes(pool, res, True)._neighbours("lamprey", False, "The lamprey", " the rivers ", set(),
                                                       "lamprey", 3)
    assert other and not set(other.fakes) & set(found.fakes)  # AddSentMod's neighbours are others
    for fake in found.fakes:
        assert fake.startswith("the ")  # the gold's determiner kept
        noun = fake.split()[-1]
        assert res.wordnet.synsets(noun, "n")[0].lexname() == "noun.animal"
        assert res.same_meaning("lamprey", noun, "NOUN") not in ("synonym", "hypernym", "hyponym")


def test_an_adjective_or_verb_gets_glove_words_of_its_tag_before_the_fixed_ones(res):
    ex = _example("Communities there are suburban and spread out.", "suburban",
                  "What characteristic do communities there have?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    pos = [c for c in FallbackFakes(pool, res).choices(ex, "adjective", ["suburban"], random.Random(0))
           if c.rule == "pos_jj"]
    assert len(pos) == 2 and set(pos[1].fakes) <= set(POS_FAKES["JJ"][0])  # the neighbours, then the list
    for word in pos[0].fakes:
        assert res.word_tags([word])[0][1] == "JJ" and res.wordnet.morphy(word, "a")
        assert res.same_meaning("suburban", word, "ADJ") not in ("synonym", "hypernym", "hyponym")


def test_a_question_that_names_its_kind_gets_a_kind_of_that_noun_before_the_answers_form(res):
    ex = _example("Doctors in the crowded camps feared typhus above all.", "typhus",
                  "Which disease did the doctors in the camps fear?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    kind = answer_type(ex.context, ex.answers[0].start, ex.answers[0].end, res)
    first = next(FallbackFakes(pool, res).choices(ex, kind, ["typhus"], random.Random(0)))
    assert first.rule == "asked_kind" and first.fakes
    disease = res.wordnet.synsets("disease", "n")[0]
    for fake in first.fakes:  # each a kind of disease, WordNet says
        senses = res.wordnet.synsets(fake, "n")
        assert any(disease in s.closure(lambda x: x.hypernyms()) for s in senses), fake
    ex = _example("Barges sailed up the Halloway River to the mill.", "the Halloway River",
                  "Which river did the barges sail up?")
    first = next(FallbackFakes(pool, res).choices(ex, "location", [ex.answers[0].text], random.Random(0)))
    assert first.rule == "asked_name" and all(f.endswith(" River") for f in first.fakes), first


@pytest.mark.parametrize("context, answer, question, kind_word", [
    ('In 1937 he published "A Machine to End War" in a weekly.', '"A Machine to End War"',
     "What article was published in 1937?", "Article"),  # a quoted title reads as a name
    ("The Taskforce of United Methodists on Abortion was organised in 1987.", "Taskforce of United Methodists",
     "What is the taskforce that was organised in 1987?", "Taskforce"),  # a noun WordNet does not know
])
def test_a_name_of_the_asked_noun_for_a_quoted_title_or_a_noun_wordnet_lacks(res, context, answer, question,
                                                                             kind_word):
    ex = _example(context, answer, question)
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    first = next(FallbackFakes(pool, res).choices(ex, "proper_noun", [answer], random.Random(0)))
    assert first.rule == "asked_name" and first.fakes and all(f.endswith(f" {kind_word}") for f in first.fakes)


def test_no_kind_of_the_asked_noun_where_wordnet_files_the_gold_under_no_sense_of_it(res):
    """GloVe's pick among every sense's kinds was read to miss: "continuation" for a principle."""
    ex = _example("The poem showed the principle of nonviolent protest to its readers.", "nonviolent protest",
                  "What was the principle shown in the poem?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    kind = answer_type(ex.context, ex.answers[0].start, ex.answers[0].end, res)
    rules = [c.rule for c in FallbackFakes(pool, res).choices(ex, kind, [ex.answers[0].text], random.Random(0))]
    assert "asked_kind" not in rules and rules


@pytest.mark.parametrize("question, group", [
    ("The Church supports those persons who conscientiously oppose what?", None),  # a relative "who"
    ("Who supports the persons that oppose the war?", "name"),
    ("In which year did the persons who opposed it leave?", "time"),
    ("What is it called when the river floods?", None),
    ("In what decades was he most active?", "time"),
])
def test_the_asking_wh_word_is_not_a_relative_pronoun_before_it(question, group):
    from advrace.core.checks.sentences import asked_group

    assert asked_group(question) == group


def test_the_audit_holds_a_date_or_number_fake_to_a_gold_of_that_type(res):
    """A release built before the rules were fixed (or by a plug-in rule of the same name) is
    audited: the fake_type check no longer takes the rule's name on trust."""
    from advrace.core.checks import REGISTRY, Subject, TextContext
    from advrace.core.provenance import AdversarialSentence

    check, ctx = REGISTRY["fake_type"], TextContext(answer_type_fn=lambda t, s, e: answer_type(t, s, e, res))

    def refused(context, gold, question, sentence, fake, rule):
        rec = AdversarialSentence(sentence, question=question, answer=fake, fake_rule=rule)
        return check.refuse(Subject(_example(context, gold, question), sentence, record=rec), ctx, {})

    salt = "Gandhi led the Salt March in 1930 against the tax."
    assert "no time" in refused(salt, "the Salt March", "What protest did Gandhi lead in 1930?",
                                "Indira led the Salt September in 1927.", "the Salt September", "date")
    assert "no number" in refused("Route 66 runs west.", "Route 66", "Which road runs west?",
                                  "Route 49 runs east.", "Route 49", "number")
    assert refused("The plague lasted until 1351 in the city.", "1351", "When did the plague end in the city?",
                   "The famine lasted until 1402 in the town.", "1402", "date") is None
    assert refused("Manning was 39 when he played in the final.", "39", "How old was Manning when he played?",
                   "Brady was 89 when he played in the semi.", "89", "number") is None
