"""Jia and Liang's SQuAD adversaries: conversion rules, fake answers, placement, and the search."""

import json

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.release import build_release, read_split
from advrace.resources import get_resources
from advrace.attacks import get_attack
from advrace.attacks.sentences.readability import WH_WORDS, leftover_wh_words, readability_problem, unknown_word_forms
from advrace.attacks.sentences.declarative_rules import declarative_candidates, past_tense, third_person
from advrace.attacks.squad.fake_answers import TYPES, answer_type, fake_answers
from advrace.attacks.sentences.question_mutation import mutate_question
from conftest import FixedNeighbourResources, squad_doc


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.mark.parametrize("question, answer, rule, sentence", [
    ("Who founded the company?", "Jeff Dean", "subject_who", "Jeff Dean founded the company."),
    ("Which team won Super Bowl 50?", "the Lions", "subject_wh_np", "The Lions won Super Bowl 50."),
    ("Which city hosted Super Bowl 50?", "Chicago", "subject_np_of", "The city of Chicago hosted Super Bowl 50."),
    ("Whose army invaded Poland?", "Napoleon", "subject_whose", "Napoleon's army invaded Poland."),
    ("How many people live in Warsaw?", "2,000", "subject_how_many", "2,000 people live in Warsaw."),
    ("How much money was spent on the project?", "$5 million", "subject_how_many",
     "$5 million was spent on the project."),
    ("Who was born in Poland?", "Jeff Dean", "subject_who", "Jeff Dean was born in Poland."),
    ("Which river is longer than the Danube?", "the Elbe", "subject_wh_np", "The Elbe is longer than the Danube."),
    ("What did Tesla develop?", "a radio", "do_what", "Tesla developed a radio."),
    ("When did the war end?", "1918", "do_when", "The war ended in 1918."),
    ("Why did the king leave?", "the war", "do_why", "The king left because of the war."),
    ("How did the army cross the river?", "boat", "do_how", "The army crossed the river by boat."),
    ("What city did Tesla move to in 1880?", "Chicago", "do_wh_np", "Tesla moved to Chicago in 1880."),
    ("What city did Tesla move to in 1880?", "Chicago", "do_wh_np_np_of",
     "Tesla moved to the city of Chicago in 1880."),
    ("In what year did the university open?", "1880", "do_prep_wh_np", "The university opened in 1880."),
    ("How many tackles did Luke Kuechly register?", "17", "do_how_many", "Luke Kuechly registered 17 tackles."),
    ("What type of engine does the car use?", "a steam engine", "do_wh_np", "The car uses a steam engine."),
    ("Where was Tesla born?", "Chicago", "aux_where", "Tesla was born in Chicago."),
    ("What can a computer do?", "math", "aux_what", "A computer can do math."),
    ("What has the company built?", "a bridge", "aux_what", "The company has built a bridge."),
    ("What is the capital of France?", "Berlin", "copula_what", "The capital of France is Berlin."),
    ("Who was the first president?", "Jeff Dean", "copula_who", "The first president was Jeff Dean."),
    ("How long is the river?", "500 miles", "how_adj_copula", "The river is 500 miles long."),
    ("Which player had the most interceptions?", "Jeff Dean", "subject_wh_np",
     "Jeff Dean had the most interceptions."),
    ("The war ended in what year?", "1918", "in_situ", "The war ended in 1918."),
    ("What type of model did Einstein fail to make?", "a tractor", "do_wh_np", "Einstein failed to make a tractor."),
    ("How would the societies in Europe support travelers?", "money", "aux_how",
     "The societies in Europe would support travelers by money."),
    ("What is a synonym for chloroplast DNA?", "a tractor", "copula_what", "A synonym for chloroplast DNA is a tractor."),
    ("What are both Branko Milanovic and Joseph Stiglitz?", "economists", "copula_what",
     "Both Branko Milanovic and Joseph Stiglitz are economists."),
])
def test_conversion_rules(res, question, answer, rule, sentence):
    got = {c.rule: c.sentence for c in declarative_candidates(question, answer, res)}
    assert got.get(rule) == sentence, got


def test_yes_no_questions_have_no_declarative_form(res):
    assert declarative_candidates("Did the war end?", "yes", res) == []


@pytest.mark.parametrize("verb, past, third", [("go", "went", "goes"), ("develop", "developed", "develops"),
                                               ("stop", "stopped", "stops"), ("carry", "carried", "carries"),
                                               ("move", "moved", "moves"), ("watch", "watched", "watches")])
def test_tense_restoration(verb, past, third):
    assert past_tense(verb) == past and third_person(verb) == third


@pytest.mark.parametrize("context, answer, kind", [
    ("Barack Obama was born in Hawaii in 1961.", "Barack Obama", "person"),
    ("Barack Obama was born in Hawaii in 1961.", "1961", "year"),
    ("The company sold 300 cars in July.", "July", "month"),
    ("The company sold 300 cars in July.", "300", "number"),
    ("The river is long and very cold.", "cold", "adjective"),
    ("She plays the violins every evening.", "violins", "plural_noun"),
])
def test_answer_types(res, context, answer, kind):
    start = context.index(answer)
    assert answer_type(context, start, start + len(answer), res) == kind


def test_fake_answers_never_equal_the_answer_or_appear_in_the_context():
    assert len(TYPES) >= 26
    assert fake_answers("person", "Jeff Dean", "Nothing here.")[:2] == ["Ada Lovelace", "Ingrid Holm"]
    assert "Ada Lovelace" not in fake_answers("person", "x", "Ada Lovelace wrote notes.")
    assert set(fake_answers("month", "x", "", second_set=True)).isdisjoint(fake_answers("month", "x", ""))


@pytest.mark.parametrize("sentence, problem", [
    ("The Lions won the game.", None),
    ("The Lions won the game", "no final punctuation"),
    ("Black Sea is a sea.", "contains a gold answer"),
    ("Which sea does the Danube reach?", "same as the question"),
    ("The Danube and the Lions.", "no verb"),
])
def test_readability_checks(res, sentence, problem):
    assert readability_problem(sentence, "Which sea does the Danube reach?", ["the Black Sea"], res) == problem


def _squad_release(tmp_path, splits):
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    cfg = release_config_from_dict({"name": "s", "data": {"path": str(path)}, "seed": 3, "splits": splits, "workers": 1})
    return build_release(cfg, tmp_path / "rel"), tmp_path / "rel"


def test_sentences_are_appended_or_prepended_with_offsets_kept(tmp_path):
    manifest, out = _squad_release(tmp_path, ["addonesent", "addsentmod"])
    originals = {ex.source_id: ex for ex in read_split(out, "original")}
    changed = 0
    for split, prepend in (("addonesent", False), ("addsentmod", True)):
        for ex in read_split(out, split):
            orig = originals[ex.source_id]
            for a in ex.answers:
                assert ex.context[a.start:a.end] == a.text
            record = ex.provenance[-1]
            if record.unchanged:
                continue
            changed += 1
            sentence = record.sentences[0].sentence
            if prepend:
                assert ex.context == sentence + " " + orig.context
                assert ex.answers[0].start == orig.answers[0].start + len(sentence) + 1
            else:
                assert ex.context == orig.context + " " + sentence
                assert ex.answers == orig.answers
            assert readability_problem(sentence, orig.question, [a.text for a in orig.answers],
                                       get_resources()) is None
    assert changed >= 2
    split_stats = json.loads((out / "stats.json").read_text())["splits"]
    stats = split_stats["addonesent"]["attack_stats"]
    assert stats["rules"] and stats["answer_types"]
    for split in ("addonesent", "addsentmod"):  # each fake rule's share of the attacked questions
        attack_stats, attacked = split_stats[split]["attack_stats"], split_stats[split]["perturbed"]
        counts, shares = attack_stats["fake_answer_rules"], attack_stats["fake_answer_rule_shares"]
        assert attacked and set(shares) == set(counts) and sum(counts.values()) == attacked
        assert shares == {rule: pytest.approx(n / attacked, rel=1e-3) for rule, n in counts.items()}


def test_addsent_name_dispatches_on_the_task():
    assert get_attack("addsent", "multiple_choice").__module__ == "advrace.attacks.addsent"
    assert get_attack("addsent", "extractive_qa").__module__ == "advrace.attacks.squad_addsent"
    with pytest.raises(Exception, match="does not apply to extractive_qa"):
        get_attack("diagnosis", "extractive_qa")


@pytest.mark.parametrize("key, value, allowed", [("length", 0, ">= 1"), ("common_words", 0, ">= 1"),
                                                 ("candidates", 0, ">= 1"), ("epochs", 0, ">= 1"),
                                                 ("n_best", 0, ">= 1"), ("restarts", -1, ">= 0"),
                                                 ("max_length", 4, ">= 8")])
def test_addany_settings_out_of_range_are_config_errors(key, value, allowed):
    for name in ("addany", "addcommon"):
        with pytest.raises(ConfigError) as info:
            get_attack(name)({"model": "runs/squad", key: value})
        assert str(info.value) == f"attack {name!r}: config.{key} must be an integer {allowed}, got {value}"


def test_cli_build_refuses_addany_with_no_words_before_reading_anything(tmp_path, capsys):
    config = tmp_path / "r.yaml"
    config.write_text("splits:\n  - attack: addany\n    config: {model: runs/squad, length: 0}\n", encoding="utf-8")
    code = main(["build", str(config), "--data", str(tmp_path / "missing.json"), "--out", str(tmp_path / "out")])
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert "attack 'addany': config.length must be an integer >= 1, got 0" in err


class _NoCommonWords:
    """The real resources with no common words left to search over."""

    def __init__(self, real):
        self._real = real

    def common_words(self, n):
        return []

    def __getattr__(self, name):
        return getattr(self._real, name)


def test_addany_with_no_words_to_search_leaves_the_example_unchanged_with_its_reason(res, squad_file):
    from advrace.formats import load

    examples = load(str(squad_file)).examples
    attack = get_attack("addany")({"model": "runs/squad"}, resources=_NoCommonWords(res))
    outcomes = attack.apply_batch(examples)  # no model is loaded: the search stops before querying it
    assert [(o.perturbed, o.reason) for o in outcomes] == [(False, "no words to search over")] * len(examples)
    assert [o.example for o in outcomes] == examples


def test_model_dependent_adversaries(span_model, tmp_path):
    manifest, out = _squad_release(tmp_path, [
        {"attack": "addsent", "config": {"model": span_model, "max_length": 64}},
        {"attack": "addany", "config": {"model": span_model, "max_length": 64, "length": 3, "epochs": 2,
                                        "candidates": 3, "restart_after": 1, "restarts": 1}},
        {"attack": "addcommon", "config": {"model": span_model, "max_length": 64, "length": 3, "epochs": 1,
                                           "candidates": 2}}])
    for split in ("addsent", "addany", "addcommon"):
        assert manifest["splits"][split]["model_dependent"] is True
        assert len(manifest["splits"][split]["checkpoint_sha256"]) == 64
        assert manifest["splits"][split]["inference"]["precision"] == "fp32"  # by default, anywhere
    assert "model-dependent" in (out / "README.md").read_text()
    for ex in read_split(out, "addsent"):
        record = ex.provenance[-1]
        if not record.unchanged:
            assert record.model_f1 == min(record.candidate_f1)
            assert ex.context.endswith(record.sentences[0].sentence)
    for split in ("addany", "addcommon"):
        for ex in read_split(out, split):
            record = ex.provenance[-1]
            trace = record.search.trace
            assert all(b <= a for a, b in zip(trace, trace[1:]))  # accepted moves never raise it
            # the record's value is its trace's last, at the same precision
            assert record.search.expected_f1 == trace[-1] <= trace[0] and record.search.queries > 1
            assert len(record.sentences[0].sentence.split()) == 3
            for a in ex.answers:
                assert ex.context[a.start:a.end] == a.text
    from advrace.attacks.squad_addany import OFFENSIVE

    common = set(get_resources().common_words(1000)) - OFFENSIVE
    for ex in read_split(out, "addcommon"):
        assert all(w in common for w in ex.provenance[-1].sentences[0].sentence.rstrip(".").split())


# grammar: sentences seen on XQuAD before the rules checked what they inflect


@pytest.mark.parametrize("question, bad", [
    ("Who did the Texans victory in the ACC Cup game?", "inned"),
    ("How many interceptions did Danny Leonard score touchdowns with in 2020?", "withed"),
    ("Who did Tesla partner with in 1888?", "withed"),
    ("When did the last glacial beginning?", "beginninged"),
    ("In which year did James Sheepshanks donated a small collection of paintings?", "donateded"),
])
def test_only_verbs_are_inflected(res, question, bad):
    sentences = [c.sentence for c in declarative_candidates(question, "Jeff Dean", res)]
    assert not any(bad in s.split() for s in sentences), sentences
    for s in sentences:
        assert unknown_word_forms(s, set(), res) == [], s


@pytest.mark.parametrize("question, answer, sentence", [
    ("In what districts are the registration numbers for cars all of the same type?", "Jeff Dean",
     "The registration numbers for cars all of the same type are in the districts of Jeff Dean."),
    ("The Congregation supports those persons who conscientiously oppose what?", "the war",
     "The Congregation supports those persons who conscientiously oppose the war."),
])
def test_no_wh_word_is_left(res, question, answer, sentence):
    sentences = [c.sentence for c in declarative_candidates(question, answer, res)]
    assert sentence in sentences
    for s in sentences:
        assert leftover_wh_words(s, res) == [], s


@pytest.mark.parametrize("sentence, problem", [
    ("The Texans victory inned Stark Industries the ACC Cup game.", "unknown word form"),
    ("Danny Leonard score touchdowns withed 17 interceptions in 2020.", "unknown word form"),
    ("The numbers of the same antitype are the what districts of Jeff Dean.", "wh-word left"),
    ("The Congregation supports persons who oppose what.", "wh-word left"),
    ("The policies are quick fixes that ignore which facts.", "wh-word left"),
    # clauses a statement may hold, names, numbers, words of the context
    ("Tesla was born in the city where the Danube reaches the Black Sea.", None),
    ("Ribault claimed what is now Tampa in 1562.", None),
    ("The fossils in which they are found are old.", None),
    ("Kuechly registered 118 tackles for the Panthers.", None),
    ("The Ctenophores shouldn't glow at night.", None),
])
def test_readability_catches_broken_grammar(res, sentence, problem):
    context = "Ctenophores glow at night. Kuechly played for the Panthers."
    assert readability_problem(sentence, "Who did the Texans beat?", ["the Lions"], res, context) == problem


def test_unknown_word_forms(res):
    assert unknown_word_forms("The team inned and withed the game.", set(), res) == ["inned", "withed"]
    assert unknown_word_forms("The team inned the game.", {"inned"}, res) == []
    assert unknown_word_forms("Jeff Dean's 3rd team scored 17 touchdowns in 2020.", set(), res) == []
    assert unknown_word_forms("Xyzzy plugh the game.", set(), res) == ["plugh"]
    assert {"what", "which", "who", "whom", "whose", "when", "where", "why", "how"} == WH_WORDS


def test_mutation_never_takes_a_synonym(res):
    fixed = FixedNeighbourResources(res, {"usa": ["america", "canada"]})
    mutated, reps = mutate_question("What did the USA build in 1990?", fixed, neighbours=10)
    assert [r.new for r in reps if r.old == "USA"] == ["CANADA"]
    assert "AMERICA" not in mutated


def test_each_fake_rule_has_its_share_of_the_attacked_questions_not_of_the_split():
    from advrace.attacks.squad_addsent import AddOneSent
    from advrace.core.examples import Answer, SpanExample
    from advrace.core.provenance import AdversarialSentence, AttackSummary

    base = SpanExample(id="q", title="t", context="Tom lives in Leeds.", question="Where does Tom live?",
                       answers=(Answer("Leeds", 13),))

    def attacked(rule):
        record = AdversarialSentence("Ann lives in Lima.", answer="Lima", fake_rule=rule)
        return base.with_provenance(AttackSummary("addonesent", sentences=(record,)))

    examples = [attacked("typed"), attacked("typed"), attacked("closed_book"), base]  # one left unchanged
    stats = AddOneSent({"answer_model": ""}).summarize(examples)
    assert stats["fake_answer_rules"] == {"closed_book": 1, "typed": 2}
    assert stats["fake_answer_rule_shares"] == {"closed_book": 0.3333, "typed": 0.6667}
