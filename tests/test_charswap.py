import random

import pytest

from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.text import alpha_tokens
from advrace.attacks import get_attack
from advrace.attacks.charswap import swap, swap_positions


@pytest.fixture(scope="module")
def charswap():
    return get_attack("charswap")({}, seed=7)


def mc_example():
    passage = ("The young scientist studied volcanoes in Iceland for twelve years. "
               "Her research about volcanic ash, published in 2019, surprised everyone. "
               "Meanwhile, farmers nearby planted potatoes.")
    return MCExample(id="v-0", passage=passage, question="What did the scientist study in Iceland?",
                     options=("volcanoes", "glaciers", "potatoes growing", "ancient music"), label=0)


def test_swap_rules():
    assert swap_positions("abcd") == [1]
    assert swap_positions("book") == []  # the two inner letters are identical
    assert swap_positions("abc") == []
    assert swap("year", 1) == "yaer"
    for word in ["scientist", "Iceland", "volcanoes"]:
        for i in swap_positions(word):
            new = swap(word, i)
            assert new[0] == word[0] and new[-1] == word[-1] and new != word
            assert sorted(new) == sorted(word)


def test_tokens_never_include_punctuation_or_digits():
    toks = [m.group() for m in alpha_tokens("year, don't 3rd x2y well-known (Tom)")]
    assert toks == ["year", "well", "known", "Tom"]


def changed(before: str, after: str):
    return [(a.group(), b.group()) for a, b in zip(alpha_tokens(before), alpha_tokens(after))
            if a.group() != b.group()]


def test_charswap_on_multiple_choice(charswap):
    ex = mc_example()
    out = charswap.apply(ex)
    assert out.perturbed
    new = out.example
    assert new.options == ex.options and new.label == ex.label
    q_changes = changed(ex.question, new.question)
    # every non-stopword of 4+ letters in the question: scientist, study, Iceland
    assert {a for a, _ in q_changes} == {"scientist", "study", "Iceland"}
    p_changes = changed(ex.passage, new.passage)
    # passage words linked to the question/options by lowercase form or stem
    assert {a for a, _ in p_changes} == {"scientist", "studied", "volcanoes", "Iceland", "potatoes"}
    for a, b in q_changes + p_changes:
        assert a[0] == b[0] and a[-1] == b[-1] and sorted(a) == sorted(b) and a != b
    assert len(alpha_tokens(new.passage)) == len(alpha_tokens(ex.passage))
    assert "2019" in new.passage and "twelve" in new.passage  # unlinked words untouched
    rec = new.provenance[-1]
    assert rec.attack == "charswap" and rec.swaps.question == 3 and rec.swaps.passage == 5


def test_charswap_is_deterministic_and_seeded():
    ex = mc_example()
    a = get_attack("charswap")({}, seed=1).apply(ex).example
    b = get_attack("charswap")({}, seed=1).apply(ex).example
    assert a == b
    others = {get_attack("charswap")({}, seed=s).apply(ex).example.passage for s in range(2, 8)}
    assert len(others) > 1


def test_charswap_cannot_perturb_stopwords_only(charswap):
    ex = MCExample(id="s-0", passage="It is what it is.", question="Who is he?",
                   options=("a", "b", "c", "d"), label=1)
    out = charswap.apply(ex)
    assert not out.perturbed and out.reason == "no eligible word" and out.example is ex


def test_charswap_on_squad_keeps_answers(charswap):
    ctx = ("Marie Curie studied radioactivity in Paris. Curie won the Nobel Prize in Physics "
           "together with Pierre Curie. Radioactivity research made Curie famous.")
    ex = SpanExample(id="c1", title="Curie", context=ctx, question="Where did Curie study radioactivity?",
                     answers=(Answer("Paris", ctx.index("Paris")), Answer("Curie studied", 6)))
    new = charswap.apply(ex).example
    for a in new.answers:
        assert new.context[a.start:a.end] == a.text
    assert new.context[6:19] == "Curie studied"  # inside a gold span: untouched
    assert changed(ex.context, new.context)  # but other linked words changed
    assert new.question != ex.question


def test_unknown_config_key_is_rejected():
    from advrace.core.errors import ConfigError

    with pytest.raises(ConfigError, match="config: unknown key.*min_len"):
        get_attack("charswap")({"min_len": 3})


def test_rng_independent_of_order(charswap):
    ex = mc_example()
    first = charswap.apply(ex).example
    random.seed(0)
    charswap.apply(MCExample(id="other", passage="Different passage here.", question="Different?",
                             options=("a", "b", "c", "d"), label=0))
    assert charswap.apply(ex).example == first
