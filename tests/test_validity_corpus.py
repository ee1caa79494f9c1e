"""The labelled validity corpus (tests/validity/): the audit flags every invalid item with its
kind's flag and no valid item at all."""

import importlib.util
import sys
from pathlib import Path

import pytest


_spec = importlib.util.spec_from_file_location(
    "advrace_validity_corpus", Path(__file__).resolve().parent / "validity" / "corpus.py")
corpus = importlib.util.module_from_spec(_spec)
sys.modules[_spec.name] = corpus
_spec.loader.exec_module(corpus)


def _wrong(items, ctx):
    out = []
    for item in items:
        flags = corpus.audit(item, ctx)
        if not corpus.judged_right(item, flags):
            label = "valid, flagged" if item.valid else f"invalid, not flagged {item.flag!r}"
            out.append(f"{item.id} ({label}): {item.why}\n    flags: "
                       + ("; ".join(f"{name}: {detail}" for name, detail in flags) or "none"))
    return out


@pytest.mark.parametrize("kind", corpus.KINDS)
def test_each_kind_has_ten_valid_and_ten_invalid_items(kind):
    items = list(corpus.load([kind]))
    assert sum(i.valid for i in items) >= 10 and sum(not i.valid for i in items) >= 10, kind
    assert len({i.id for i in items}) == len(items)
    assert all(i.why for i in items)


@pytest.mark.parametrize("kind", corpus.KINDS)
def test_the_audit_flags_every_invalid_item_and_no_valid_one(kind, ctx):
    items = list(corpus.load([kind]))
    wrong = _wrong(items, ctx)
    assert not wrong, f"{kind}: {len(wrong)} of {len(items)} items judged wrong:\n" + "\n".join(wrong)


@pytest.mark.parametrize("item", [
    pytest.param(item, id=item.id, marks=() if item.valid else pytest.mark.xfail(
        strict=True, reason=f"known miss: {item.why}"))
    for item in corpus.load(corpus.KNOWN_MISSES)])
def test_known_misses_pass_their_valid_items_and_still_miss_their_invalid_ones(item, ctx):
    """A kind no check catches yet (a second right answer, read on real DG splits): its valid
    items pass the audit, its invalid ones are expected to pass it too, strictly, so that a check
    that catches one fails here and moves the kind into KINDS."""
    assert corpus.judged_right(item, corpus.audit(item, ctx))


def test_the_audit_names_every_kind_it_is_known_to_miss():
    """A split of an attack whose invalid items the audit misses says so (`not checked:`), so that
    no flags are not read as validated. The corpus names RACE's AddSent by its old name, the alias
    `addsent`, as old releases do: the name is resolved by the item's task, as the audit does."""
    from advrace.attacks import canonical_name
    from advrace.release.audit import UNCHECKED

    attacks = {canonical_name(item.attack, item.attacked.task)
               for item in corpus.load(corpus.KNOWN_MISSES) if not item.valid}
    assert attacks and all(UNCHECKED.get(a) for a in attacks)


def test_every_fake_answer_of_the_corpus_questions_has_the_properties_of_a_fake():
    """AddOneSent's and AddSentMod's fake answers for the corpus's SQuAD questions and the written
    traps (squad_fakes.yaml): every fake any rule offers, and every sentence's, has the properties
    of `fake_problems` (differs from every gold and contains none, new to the context, of the
    gold's group or, for the date, number and asked_kind rules, of a gold of that rule's type); a
    closed-book answer that is the gold in other words is none."""
    import random
    from collections import Counter

    from advrace.attacks.squad.candidates import sentence_candidates
    from advrace.attacks.squad.config import AddSentConfig
    from advrace.attacks.squad.fake_problems import fake_problems
    from advrace.attacks.squad.answer_rules import FallbackFakes
    from advrace.attacks.squad.closed_book import usable, unlike_the_golds
    from advrace.attacks.squad.fake_answers import FakePool, answer_type
    from advrace.core.provenance import AdversarialSentence
    from advrace.resources import get_resources

    res = get_resources()
    questions = corpus.squad_questions()
    examples = [ex for ex, _ in questions]
    res.prepare_parses([ex.context for ex in examples] + [ex.question for ex in examples])
    pool = FakePool.from_contexts([ex.context for ex in examples], res, cap=3)
    closed = unlike_the_golds({ex.id: c and usable(c, ex.question, res.stopwords) for ex, c in questions},
                              {ex.id: [a.text for a in ex.answers] for ex in examples}, res)
    # the written closed-book answers that restate their gold are dropped
    assert [ex.id for ex, c in questions if c and ex.id in closed] == ["squad_fakes-02", "squad_fakes-10"]
    paragraph = {}
    for ex in examples:
        paragraph.setdefault(ex.context, set()).update(a.text for a in ex.answers)
    problems, rules = [], Counter()
    for second in (False, True):
        for ex in examples:
            avoid = sorted(paragraph[ex.context])
            kind = answer_type(ex.context, ex.answers[0].start, ex.answers[0].end, res)
            for choice in FallbackFakes(pool, res, second).choices(ex, kind, avoid, random.Random(0),
                                                                   closed=closed.get(ex.id)):
                for fake in choice.fakes:
                    offered = AdversarialSentence("", answer=fake, fake_rule=choice.rule)
                    problems += [f"{ex.id} offered {choice.rule} {fake!r}: {p}"
                                 for p in fake_problems(ex, offered, res)]
            out, _ = sentence_candidates(ex, res, AddSentConfig(answer_model=""), second, random.Random(0), pool,
                                         avoid, closed.get(ex.id))
            for record in out:
                rules[record.fake_rule] += 1
                problems += [f"{ex.id} {record.fake_rule} {record.answer!r} in {record.sentence!r}: {p}"
                             for p in fake_problems(ex, record, res)]
    assert not problems, "\n".join(problems)
    assert {"typed", "date", "number", "closed_book"} <= set(rules), rules  # the trusted rules were seen


@pytest.mark.parametrize("fake, rule, sentence, problem", [
    ("Lima", "typed", "Ann was born in Lima.", None),
    ("Leeds", "typed", "Ann was born in Leeds.", "the gold"),
    ("north Leeds", "typed", "Ann was born in north Leeds.", "contains the gold"),
    ("Tom", "wh_who", "Ann was born in Tom.", "in the context"),
    ("1875", "closed_book", "Ann was born in 1875.", "a time, the gold"),  # a year for "Where"
    ("Leeds 2", "number", "Ann was born in Leeds 2.", "rule number"),  # the gold is no number
])
def test_fake_problems_names_each_broken_property(fake, rule, sentence, problem):
    """The properties the corpus test holds every fake to, each broken once."""
    from advrace.attacks.squad.fake_problems import fake_problems
    from advrace.core.examples import Answer, SpanExample
    from advrace.core.provenance import AdversarialSentence
    from advrace.resources import get_resources

    context = "Tom was born in Leeds in 1931 and worked there all his life."
    ex = SpanExample(id="q", title="t", context=context, question="Where was Tom born?",
                     answers=(Answer("Leeds", context.index("Leeds")),))
    found = fake_problems(ex, AdversarialSentence(sentence, answer=fake, fake_rule=rule), get_resources())
    assert (not found) if problem is None else any(problem in p for p in found), found
