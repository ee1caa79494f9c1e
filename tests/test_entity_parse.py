"""`Resources.entities`: the named entities of a text through the tokenizer and `ner` alone (the
entity check of question mutation reads nothing else of a changed question), exactly the full
parse's. The small English model's `ner` has its own tok2vec, so leaving the rest out changes
nothing; a pipeline where that may not hold (its `ner` listens to the shared tok2vec, or the
probe disagrees) gets full parses instead, counted in `entity_work` and said once."""

from __future__ import annotations

import pytest

from advrace.resources import ResourceConfig, Resources
from advrace.resources.spacy_pipeline import entities_only_refusal, entity_tuples, model_name, probe_entities
from test_parse_syntax import nlp  # noqa: F401  (the small English model, or skipped)

# none of these is a probe text: names of many kinds, numbers, dates, several sentences, no entity
TEXTS = ["Who founded the Ford Motor Company in Dearborn, Michigan?",
         "Who founded the Ford Motor Company in Detroit, Michigan?",
         "In what year did the Normans conquer England under William the Conqueror?",
         "How much did Apple pay for Beats Electronics in 2014, in US dollars?",
         "What percentage of Kenya's population speaks Swahili?",
         "Which river flows through Budapest? Is it the Danube or the Rhine?",
         "the old man sold his farm to a stranger",
         "What did Marie Curie discover at the Sorbonne on 21 December 1898 at 3 p.m.?",
         "Where did the Super Bowl XLVIII halftime show with Bruno Mars take place?",
         "Which Act of Parliament created the BBC Trust and the National Health Service?",
         "", "   ", "Où est la Tour Eiffel ?"]


def _resources(nlp, tmp_path) -> Resources:
    res = Resources(ResourceConfig(cache_dir=str(tmp_path)))
    res.__dict__["nlp"] = nlp
    return res


def _full(nlp, text):
    return tuple((e.text, e.start_char, e.end_char, e.label_) for e in nlp(text).ents)


def test_entities_alone_equal_the_full_parse(nlp, tmp_path):
    res = _resources(nlp, tmp_path)
    res.prepare_entities(TEXTS[:4])  # a batch, then one by one: the same
    assert [res.entities(t) for t in TEXTS] == [_full(nlp, t) for t in TEXTS]
    assert res.entity_work.record() == {"entities_only": len(TEXTS), "from_parse": 0, "full_parse": 0, "several_sentences": 0,
                                        "why_full": None}
    assert res._entities_skip and "ner" not in res._entities_skip
    assert any(len(res.entities(t)) > 1 for t in TEXTS) and res.entities(TEXTS[6]) == ()
    assert res.entities(TEXTS[0]) != res.entities(TEXTS[1])  # cached under the whole text


def test_a_full_parse_already_made_is_read(nlp, tmp_path):
    res = _resources(nlp, tmp_path)
    doc = res.parse(TEXTS[0])
    res.prepare_entities(TEXTS[:2])
    assert res.entities(TEXTS[0]) == entity_tuples(doc)
    assert res.entities(TEXTS[1]) == _full(nlp, TEXTS[1])
    assert (res.entity_work.alone, res.entity_work.from_parse) == (1, 1)


def test_the_small_model_passes_the_checks(nlp):
    assert entities_only_refusal(nlp) is None
    assert probe_entities(nlp, tuple(n for n in nlp.pipe_names if n != "ner")) is None


def _listening_pipeline():
    import spacy

    blank = spacy.blank("en")
    blank.add_pipe("tok2vec")
    ner = blank.add_pipe("ner", config={"model": {
        "@architectures": "spacy.TransitionBasedParser.v2", "state_type": "ner", "extra_state_tokens": False,
        "hidden_width": 16, "maxout_pieces": 2, "use_upper": True, "nO": None,
        "tok2vec": {"@architectures": "spacy.Tok2VecListener.v1", "width": 96, "upstream": "*"}}})
    for label in ("PERSON", "GPE"):
        ner.add_label(label)
    blank.initialize()
    return blank


def _preset_org(doc):
    """A component that marks each text's first word as an ORG before `ner` runs: `ner` keeps
    preset entities, so the full parse has it and the recogniser alone does not."""
    from spacy.tokens import Span

    if len(doc):
        doc.ents = [Span(doc, 0, 1, label="ORG")]
    return doc


@pytest.fixture
def disagreeing(nlp):
    import spacy
    from spacy.language import Language

    if "test_preset_org" not in Language.factories:
        Language.component("test_preset_org", func=_preset_org)
    model = spacy.load(model_name(None))
    model.remove_pipe("lemmatizer")
    model.add_pipe("test_preset_org", name="lemmatizer", before="ner")  # passes the name checks
    return model


@pytest.mark.parametrize("kind", ["listener", "probe"])
def test_fallback_to_the_full_parse_counted_and_said_once(kind, nlp, disagreeing, tmp_path, capsys):
    model = _listening_pipeline() if kind == "listener" else disagreeing
    why = entities_only_refusal(model)
    if kind == "listener":
        assert why == "ner listens to a shared tok2vec"
    else:
        assert why is None
        assert "probe differs" in probe_entities(model, tuple(n for n in model.pipe_names if n != "ner"))
    res, texts = _resources(model, tmp_path), TEXTS[:10]
    res.prepare_entities(texts[:3])
    got = [res.entities(t) for t in texts]
    assert got == [_full(model, t) for t in texts]
    if kind == "probe":
        assert all(ents[0].label_ == "ORG" and ents[0].start_char == 0 for ents in got)
    assert res._entities_skip is None
    record = res.entity_work.record()
    assert (record["entities_only"], record["full_parse"]) == (0, len(texts))
    assert ("listens" in record["why_full"]) if kind == "listener" else ("probe differs" in record["why_full"])
    err = capsys.readouterr().err
    assert err.count("entities are read from full parses") == 1, err


def test_refused_where_ner_is_not_last_or_its_input_is_rewritten(disagreeing):
    import spacy

    assert entities_only_refusal(spacy.blank("en")) == "ner is not the pipeline's last component"
    disagreeing.remove_pipe("lemmatizer")
    ruler = disagreeing.get_pipe("attribute_ruler")
    assert entities_only_refusal(disagreeing) is None
    ruler.add([[{"LOWER": "paris"}]], {"NORM": "london"})
    assert "sets an attribute ner's embedding reads" in entities_only_refusal(disagreeing)


def test_a_question_of_several_sentences_reads_full_parses(nlp, tmp_path):
    """Only the parser's sentence starts can make the recogniser alone differ (an entity never
    crosses one): the changed questions of a question the parser splits are parsed in full."""
    from advrace.attacks.sentences.word_swaps import changed_text, entity_keepers, one_sentence
    from advrace.resources import get_resources

    pytest.importorskip("nltk", reason="nltk is not installed")
    res, ref = _resources(nlp, tmp_path), _resources(nlp, tmp_path)
    res.__dict__["wordnet"] = ref.__dict__["wordnet"] = get_resources().wordnet
    ref.__dict__["_entities_skip"] = None  # every text parsed in full
    two, one = "Tom Hanks flew there. Why did he fly to Paris in 1999?", "Why did Tom Hanks fly to Paris in 1999?"
    assert not one_sentence(res.parse(two)) and one_sentence(res.parse(one))
    pairs = [(w.lower(), w) for w in ("London", "Smith", "Rome", "Madrid")]
    work = res.entity_work
    for question in (two, one):
        tok, ref_tok = (next(t for t in r.parse(question) if t.text == "Paris") for r in (res, ref))
        kept = entity_keepers(res, tok, iter(pairs), "GPE", 3)
        assert kept == entity_keepers(ref, ref_tok, iter(pairs), "GPE", 3) and len(kept) > 1
        if question == two:
            assert work.several_sentences > 0 and work.alone == 0
    assert work.alone > 0
    texts = [changed_text(tok, w) for w in ("Lisbon", "Vienna")]
    res.prepare_entities(texts, one_sentence=False)
    assert all(t in res._parses for t in texts)
    lone, before = changed_text(tok, "Oslo"), work.several_sentences
    assert res.entities(lone, one_sentence=False) == _full(nlp, lone)
    assert work.several_sentences == before + 1 and lone in res._parses and lone not in res._entities
