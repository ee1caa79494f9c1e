"""The audit: each kind of violation, planted with the examples' own edit methods, is flagged; the
real attacks' sample splits pass; a build records the counts, and --drop-flagged leaves flagged
questions as they were."""

import dataclasses
import json

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.provenance import AdversarialSentence, AttackSummary, NewDistractors, Replacement, TextReplaced
from advrace.release import audit as A
from advrace.release import build_release, read_split

PASSAGE = ("Tom lives in a small village near the mountains. Every morning he walks to school with his "
           "sister Mary. Homework can put you in a bad mood, and that might be a good thing.")


def mc(question="Where does Tom live?", options=("In a big city.", "In a small village.", "By the sea.",
                                                 "In the desert."), label=1):
    return MCExample(id="q1", passage=PASSAGE, question=question, options=options, label=label)


def checks(attack, src, ex, ctx):
    return [name for _, _, name, _ in A.audit_split(attack, [src], [ex], ctx).flags]


def addsent_record(sentence, replacements, fallback=False):
    return AttackSummary("addsent", sentences=(AdversarialSentence(sentence, replacements=tuple(replacements),
                                                                   negation_fallback=fallback),))


def rep(old, new, kind, start, pos=None):
    return Replacement(start, start + len(old), old, new, kind, pos=pos)


# --------------------------------------------------------------------------- AddSent


def test_inserted_gold_answer_is_flagged(ctx):
    src = mc()
    sentence = "Jim lives in a small village."
    ex = src.insert_sentence(sentence, 0).with_provenance(addsent_record(sentence, []))
    assert checks("addsent", src, ex, ctx) == [A.GOLD_IN_INSERT]
    clean = "Jim lives by the sea."
    ex = src.insert_sentence(clean, 0).with_provenance(addsent_record(clean, []))
    assert checks("addsent", src, ex, ctx) == []


def test_a_sentence_of_synonyms_only_is_flagged_and_a_real_change_is_not(ctx):
    src = mc(question="What is the main purpose of the story?")
    para = "The main intent of the tale is by the sea."
    reps = [rep("purpose", "intent", "glove", 17), rep("story", "tale", "glove", 32)]
    ex = src.insert_sentence(para, 0).with_provenance(addsent_record(para, reps))
    assert checks("addsent", src, ex, ctx) == [A.PARAPHRASE]
    for changed, sentence in (
            ([reps[0], rep("story", "song", "glove", 32)],
             "The main intent of the song is by the sea."),
            ([reps[0], rep("main", "minor", "antonym", 12)],
             "The minor intent of the tale is by the sea.")):
        ex = src.insert_sentence(sentence, 0).with_provenance(addsent_record(sentence, changed))
        assert checks("addsent", src, ex, ctx) == []
    ex = src.insert_sentence(para, 0).with_provenance(addsent_record(para, reps, fallback=True))
    assert checks("addsent", src, ex, ctx) == [A.NEGATION_HINT]  # a hint, whatever its words


def test_text_changed_besides_the_insertion_is_flagged_but_spacing_is_not(ctx):
    src = mc()
    sentence = "Jim lives by the sea."
    ex = src.insert_sentence(sentence, 48).with_provenance(addsent_record(sentence, []))
    assert checks("addsent", src, ex, ctx) == []
    glued = dataclasses.replace(ex, passage=ex.passage.replace("mountains. Jim", "mountains.Jim"))
    assert checks("addsent", src, glued, ctx) == []
    edited = dataclasses.replace(ex, passage=ex.passage.replace("small village", "large village"))
    assert checks("addsent", src, edited, ctx) == [A.TEXT_CHANGED]
    relabelled = dataclasses.replace(ex, label=0)
    assert A.GOLD_CHANGED in checks("addsent", src, relabelled, ctx)


def test_sentences_on_negated_questions_not_sentences_and_meta_text_are_flagged(ctx):
    """Read on held-out RACE: an EXCEPT question restated with a wrong option says it is the
    exception; a sentence made with "not" rules an option out; "We can infer from the passage
    that ..." inside the passage is about the passage."""
    reps = [rep("village", "town", "glove", 20, "NOUN")]
    for question, sentence, record, want in [
            ("Tom lives in all of these EXCEPT _ .", "Tom lives in all of these town EXCEPT by the sea.",
             reps, A.REGISTRY["negated_restated"].flag),
            ("What can we infer from the passage?", "We can infer from the passage that Jim lives by the sea.",
             [rep("Tom", "Jim", "glove", 0, "PROPN")],
             A.REGISTRY["meta_text"].flag)]:
        src = mc(question=question)
        ex = src.insert_sentence(sentence, 0).with_provenance(addsent_record(sentence, record))
        assert want in checks("addsent", src, ex, ctx), question
    src = mc(question="Where does Tom live?")
    sentence = "Tom does not live by the sea."
    ex = src.insert_sentence(sentence, 0).with_provenance(addsent_record(
        sentence, [rep("", "not", "negation", 14)], fallback=True))
    assert checks("addsent", src, ex, ctx) == [A.NEGATION_HINT]


def test_a_squad_sentence_whose_change_vanished_is_flagged(ctx):
    context = "Savery patented his steam pump in 1698."
    src = SpanExample(id="s1", title="t", context=context, question="When did Savery patent his steam pump?",
                      answers=(Answer("1698", 34),))
    reps = (Replacement(9, 15, "Savery", "Newcomen", "glove"),)
    for sentence, flagged in [("Savery patented his steam pump in 1997.", True),
                              ("Newcomen patented his steam pump in 1997.", False),
                              ("Newcomen's steam pump was patented in 1997.", False)]:
        ex = src.insert_sentence(sentence, len(context)).with_provenance(
            AttackSummary("addonesent", sentences=(AdversarialSentence(sentence, replacements=reps),)))
        assert (A.REGISTRY["change_vanished"].flag in checks("addonesent", src, ex, ctx)) is flagged, sentence


# --------------------------------------------------------------------------- CharSwap


def test_swaps_that_move_an_end_letter_or_touch_options_or_gold_are_flagged(ctx):
    src = mc()
    good = src.replace_spans("passage", [(4, 9, "lvies")]).with_provenance(AttackSummary("charswap"))
    assert checks("charswap", src, good, ctx) == []
    moved = src.replace_spans("passage", [(4, 9, "livse")]).with_provenance(AttackSummary("charswap"))
    assert checks("charswap", src, moved, ctx) == [A.LETTER_MOVED]
    options = good.replace_options(["In a big ctiy.", *good.options[1:]]).with_provenance(AttackSummary("charswap"))
    assert A.OPTION_CHANGED in checks("charswap", src, options, ctx)

    context = "The Danube flows into the Black Sea."
    squad = SpanExample(id="s1", title="t", context=context, question="Which sea?",
                        answers=(Answer("Black Sea", context.index("Black Sea")),))
    start = context.index("Black")
    swapped = dataclasses.replace(
        squad, context=context.replace("Black", "Balck"), answers=(Answer("Balck Sea", start),),
        provenance=(TextReplaced("context", (Replacement(start, start + 5, "Black", "Balck"),)),))
    found = checks("charswap", squad, swapped, ctx)
    assert A.SWAP_IN_GOLD in found and A.GOLD_CHANGED in found


# --------------------------------------------------------------------------- DE and DG


def replaced(src, new):
    options = list(src.options)
    for slot, text in zip([i for i in range(len(options)) if i != src.label], new):
        options[slot] = text
    record = NewDistractors(original=src.distractors, new=tuple(new))
    return src.replace_options(options).with_provenance(AttackSummary("distractor_generation", distractors=record))


def test_new_distractors_that_give_the_answer_away_or_repeat_it_are_flagged(ctx):
    src = mc()
    fine = replaced(src, ["In the mountains.", "At his sister's school.", "Near his school."])
    assert checks("distractor_generation", src, fine, ctx) == []
    found = checks("distractor_generation", src, replaced(src, ["In a very small village.", "By the sea.", "Tom."]), ctx)
    assert A.EQUIVALENT in found  # the answer with one word more
    assert A.FORM in found  # one word beside sentences
    son = mc(question="Who did the man give the drink to?", options=("His wife.", "His son.", "His mother.",
                                                                   "His daughter."), label=1)
    assert A.EQUIVALENT in checks("distractor_generation", son, replaced(son, ["He was my son.", "His mother.",
                                                                               "His daughter."]), ctx)
    dup = checks("distractor_generation", src, replaced(src, ["In the mountains.", "in the mountains", "Far away."]), ctx)
    assert A.DUPLICATE in dup
    # read on RACE dev-middle's DG split: a twin of a kept option, and an option that repeats the question
    kept = mc(question="The teacher is going to read the exercise books  _", options=(
        "in class", "at home", "at school", "in the classroom"), label=1)
    assert A.DUPLICATE in checks("distractor_generation", kept, replaced(kept, ["at the school"]), ctx)
    assert A.ECHO in checks("distractor_generation", kept, replaced(kept, ["the exercise books"]), ctx)
    assert checks("distractor_generation", kept, replaced(kept, ["in the mountains"]), ctx) == []
    both = mc(options=("In a city.", "Near a lake.", "Both A and B.", "By the sea."), label=2)
    assert A.GOLD_REFERS in checks("distractor_generation", both, replaced(both, ["In the mountains.",
                                                                                 "Near his school.", "Far away."]), ctx)


def test_a_negated_question_given_new_distractors_is_flagged_unless_they_are_stated(ctx):
    """A release built before negated questions kept their options is flagged; with
    `negated_questions: stated` only a distractor the passage does not state is."""
    src = mc(question="Which of the following is NOT true about Tom?",
             options=("Tom lives in a village.", "Tom has a sister.", "Tom walks to school.", "Tom drives a car."),
             label=3)
    stated, unstated = "Tom walks to school with his sister Mary.", "Tom lives near his school."
    ex = replaced(src, [stated, unstated])
    assert A.NEGATED in checks("distractor_generation", src, ex, ctx)
    flags = A.audit_split("distractor_generation", [src], [ex], ctx, {"negated_questions": "stated"}).flags
    assert [(name, detail.startswith(repr(unstated))) for _, _, name, detail in flags] == \
        [("new distractor of a negated question not stated in the passage", True)]
    assert A.NEGATED not in checks("distractor_generation", mc(), replaced(mc(), ["In the mountains."]), ctx)


def test_a_stated_sentence_is_flagged_for_what_is_true_questions_only(ctx):
    stated = "Homework can put you in a bad mood."
    for question, flagged in [("Which of the following is TRUE according to the passage?", True),
                              ("What can we learn from the text?", True),
                              ("Which of the following is NOT true?", False),
                              ("Where does Tom live?", False)]:
        src = mc(question=question, options=("Tom lives in a city.", "Tom has a sister.",
                                             "Mary lives alone.", "Tom hates school."))
        ex = replaced(src, [stated, "Mary walks to the mountains.", "Tom drives to school."])
        assert (A.STATED in checks("distractor_extraction", src, ex, ctx)) is flagged, question


def test_the_cosine_of_a_paraphrased_answer_is_checked_on_the_real_encoder():
    src = mc(options=("He was sad.", "The physician.", "A teacher.", "A farmer."), label=1,
             question="Who helped Tom?")
    ex = replaced(src, ["The doctor.", "A singer.", "A driver."])
    strict = A.AuditContext(overrides={"max_answer_cosine": 0.75, "min_grounded_share": 0})
    flags = A.audit_split("distractor_generation", [src], [ex], strict).flags
    assert {(name, "doctor" in detail) for _, _, name, detail in flags} == {(A.EQUIVALENT, True)}
    # the encoder's cosine, and WordNet (a doctor is a physician) for a short option
    details = [detail for *_, detail in flags]
    assert any("a paraphrase of the answer" in d for d in details) and any("a synonym of the answer" in d for d in details)


# --------------------------------------------------------------------------- SQuAD sentences


def test_squad_sentences_with_gold_unknown_forms_or_wh_words_are_flagged(ctx):
    context = "The Texans won the game against Stark Industries."
    src = SpanExample(id="s1", title="t", context=context, question="Who won the game?",
                      answers=(Answer("The Texans", 0),))
    for sentence, want in [("The Bears won the cup.", []),
                           ("The Bears inned the cup.", [A.UNKNOWN_WORD]),
                           ("The Bears won the what cup.", [A.WH_LEFT]),
                           ("the texans won the cup.", [A.GOLD_IN_INSERT])]:
        ex = src.insert_sentence(sentence, len(context)).with_provenance(
            AttackSummary("addonesent", sentences=(AdversarialSentence(sentence),)))
        assert checks("addonesent", src, ex, ctx) == want, sentence


# --------------------------------------------------------------------------- releases

LEAKY = '''
from advrace.attacks.base import Attack, register
from advrace.core.provenance import AttackSummary
from advrace.release.audit import check_gold_in_insert, register_checks

@register
class Leaky(Attack):
    """Inserts the gold answer into every other passage: what the audit must catch."""
    name = "leaky_test"
    tasks = ("multiple_choice",)

    def perturb(self, example, rng):
        text = example.answer if len(example.question) % 2 else "Nobody knows where"
        return example.insert_sentence(text, 0).with_provenance(AttackSummary(self.name))

register_checks("leaky_test", check_gold_in_insert)
'''


@pytest.fixture
def leaky(install_plugin):
    install_plugin("leaky_plugin", LEAKY, "advrace.attacks", "leaky_test")
    yield
    from advrace.attacks import base

    base.REGISTRY.unregister("leaky_test")
    A.CHECKS.pop("leaky_test", None)
    A.UNCHECKED.pop("leaky_test", None)


def _config(**extra):
    return release_config_from_dict({"name": "audit-test", "data": {"path": "@sample/race", "format": "race-dir",
                                                                    "limit": 12},
                                     "splits": ["leaky_test", "charswap"], "workers": 1, **extra})


def test_a_build_records_the_audit_and_the_card_warns(leaky, tmp_path, capsys):
    A.register_unchecked("leaky_test", "a leak in other words")
    out = tmp_path / "rel"
    build_release(_config(), out)
    stats = json.loads((out / "stats.json").read_text())
    leak = stats["audit"]["leaky_test"]
    assert leak["flagged"] > 0 and leak["by_check"] == {A.GOLD_IN_INSERT: leak["flagged"]}
    assert leak["unchecked"] == ["a leak in other words"] and stats["audit"]["charswap"]["unchecked"] == []
    assert stats["audit"]["charswap"]["flagged"] == 0
    card = (out / "README.md").read_text()
    assert "## Audit" in card and f"`leaky_test`: the audit flagged {leak['flagged']} of" in card
    assert "`leaky_test`: the audit does not see a leak in other words" in card

    assert main(["audit", str(out), "--details"]) == 1
    printed = capsys.readouterr().out
    flagged_ids = [line.split(":")[0].strip() for line in printed.splitlines() if A.GOLD_IN_INSERT in line
                   and line.startswith("    ")]
    assert len(flagged_ids) == leak["flagged"] and all(i.startswith("leaky_test/") for i in flagged_ids)
    assert "    not checked: a leak in other words; read a sample" in printed
    assert main(["audit", str(out), "--split", "charswap"]) == 0


def test_drop_flagged_keeps_every_question_and_leaves_flagged_ones_unchanged(leaky, tmp_path):
    out = tmp_path / "rel"
    build_release(_config(drop_flagged=True), out)
    stats = json.loads((out / "stats.json").read_text())
    flagged = stats["audit"]["leaky_test"]
    assert flagged["dropped"] == flagged["flagged"] > 0
    original = {ex.source_id: ex for ex in read_split(out, "original")}
    split = read_split(out, "leaky_test")
    assert len(split) == len(original)
    kept = [ex for ex in split if ex.passage == original[ex.source_id].passage]
    assert len(kept) == flagged["dropped"]
    reasons = stats["splits"]["leaky_test"]["unperturbed_reasons"]
    assert reasons == {f"audit: {A.GOLD_IN_INSERT}": flagged["dropped"]}
    assert main(["audit", str(out)]) == 0


def test_the_rule_based_sample_splits_pass_the_audit(tmp_path):
    out = tmp_path / "rel"
    cfg = release_config_from_dict({"name": "s", "data": {"path": "@sample/race", "format": "race-dir"},
                                    "splits": ["addsent", "charswap", "diagnosis", "option_only"]})
    build_release(cfg, out)
    stats = json.loads((out / "stats.json").read_text())
    # AddSent states its sentences (issue 46), which the attack holds to the audit's own grammar check
    assert {split: a["flagged"] for split, a in stats["audit"].items()} == \
        {"addsent": 0, "charswap": 0, "diagnosis": 0, "option_only": 0}
    grammar = stats["audit"]["addsent"]["grammar"]
    assert grammar["flagged"] == 0 and grammar["sentences"] > 0 and not any(grammar["by_kind"].values())
    assert grammar["rate"] == pytest.approx(grammar["flagged"] / grammar["sentences"], rel=1e-3)
    assert not grammar["fluency"]["scored"] and "no language model" in grammar["fluency"]["why"]
    assert all(a["checked"] == stats["splits"]["original"]["count"] for a in stats["audit"].values())


def test_audit_refuses_an_unknown_split(tmp_path):
    out = tmp_path / "rel"
    build_release(release_config_from_dict({"name": "s", "data": {"path": "@sample/race", "limit": 4},
                                            "splits": ["charswap"]}), out)
    assert main(["audit", str(out), "--split", "addsent"]) == 2


def test_drop_flagged_puts_back_a_chained_split_made_from_a_flagged_question(leaky, tmp_path):
    """Splits are all attacked before any is audited: a split built from one whose flagged
    questions were put back must not ship the flagged text."""
    out = tmp_path / "rel"
    build_release(_config(drop_flagged=True, splits=[
        "leaky_test", {"attack": "charswap", "name": "cs_on_leaky", "from": "leaky_test"}]), out)
    stats = json.loads((out / "stats.json").read_text())
    dropped = stats["audit"]["leaky_test"]["dropped"]
    assert dropped > 0
    original = {ex.source_id: ex for ex in read_split(out, "original")}
    leaky = {ex.source_id: ex for ex in read_split(out, "leaky_test")}
    kept = {sid for sid, ex in leaky.items() if ex.passage == original[sid].passage}
    assert len(kept) == dropped
    chained = {ex.source_id: ex for ex in read_split(out, "cs_on_leaky")}
    for sid in kept:
        assert (chained[sid].passage, chained[sid].question, chained[sid].options) == \
            (leaky[sid].passage, leaky[sid].question, leaky[sid].options)
    assert stats["splits"]["cs_on_leaky"]["unperturbed_reasons"].get("audit: source split flagged") == dropped
    assert main(["audit", str(out)]) == 0


def test_a_release_built_before_the_near_meaning_check_is_flagged_where_it_paraphrases(ctx):
    """An AddSent release of the sample built by the previous version (tests/previous_release):
    `advrace audit` must flag at least 90% of the questions read as near-meaning restatements."""
    from pathlib import Path

    folder = Path(__file__).parent / "previous_release"
    labels = json.loads((folder / "near_meaning.json").read_text())
    audit = A.audit_release(folder / labels["release"], ctx=ctx)["addsent"]
    flagged = {ex_id.split("/", 1)[1] for _, ex_id, name, _ in audit.flags if name == A.PARAPHRASE}
    found = flagged & set(labels["near_meaning"])
    assert len(found) >= 0.9 * len(labels["near_meaning"]), sorted(set(labels["near_meaning"]) - found)
