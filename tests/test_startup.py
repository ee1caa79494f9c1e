"""A build loads only the resources its attacks use: CharSwap needs no spaCy (whose import
pulls in thinc and torch, seconds), no GloVe and no WordNet. Checked in a fresh interpreter,
since the test process has them all loaded."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from advrace.core.errors import ResourceMissing

RESOURCE_ATTRS = ("nlp", "sentencizer", "tagger", "glove", "wordnet", "stopwords")
HEAVY_MODULES = ("spacy", "thinc", "torch", "scipy.stats", "sklearn", "pandas", "pyarrow.dataset")

PROBE = """
import json, sys
from advrace.cli import main
from advrace.resources import get_resources
out = {}
for attack in sys.argv[2:]:
    assert main(["build", "--data", sys.argv[1], "--attacks", attack, "--out", sys.argv[1] + "-" + attack,
                 "--quiet"]) == 0
    out[attack] = {"modules": [m for m in %r if m in sys.modules],
                   "loaded": [a for a in %r if a in get_resources().__dict__]}
print(json.dumps(out))
""" % (HEAVY_MODULES, RESOURCE_ATTRS)


def probe(data, *attacks) -> dict:
    done = subprocess.run([sys.executable, "-c", PROBE, str(data), *attacks], capture_output=True,
                          text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.splitlines()[-1])


def test_charswap_loads_no_parser_glove_or_wordnet_and_addsent_does(race_dir):
    found = probe(race_dir, "charswap", "addsent")
    assert found["charswap"] == {"modules": [], "loaded": ["stopwords"]}
    assert set(found["addsent"]["loaded"]) >= {"nlp", "glove", "wordnet", "stopwords"}
    # spaCy and nltk without the torch, scipy.stats and sklearn they would import (UNUSED_EXTRAS),
    # and GloVe's word list read without pyarrow.dataset and pandas
    assert found["addsent"]["modules"] == ["spacy", "thinc"]


def test_stopwords_come_without_importing_spacy():
    code = ("import sys; from advrace.resources.wordlists import load_stopwords; "
            "n = len(load_stopwords()); print(n, 'spacy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from spacy.lang.en.stop_words import STOP_WORDS

    assert out.stdout.split() == [str(len({w.lower() for w in STOP_WORDS})), "False"]


def test_preloading_spacy_leaves_the_word_tagger_to_the_first_word_to_tag(tmp_path):
    """Workers share what the parent preloads; the tagger is needed only for words missing from
    the on-disk lexicon, so it is loaded when one is asked for, and tags as a preloaded one."""
    pytest.importorskip("spacy", reason="spaCy is not installed")
    from advrace.resources import ResourceConfig, Resources

    lazy = Resources(ResourceConfig(cache_dir=str(tmp_path / "a")))
    try:
        lazy.preload({"spacy_model"})
    except ResourceMissing as exc:
        pytest.skip(f"no spaCy model: {exc}")
    assert {"nlp", "sentencizer"} <= lazy.__dict__.keys() and "tagger" not in lazy.__dict__
    words = ["quickly", "ran", "blue", "houses"]
    tags = lazy.word_tags(words)
    assert "tagger" in lazy.__dict__
    eager = Resources(ResourceConfig(cache_dir=str(tmp_path / "b")))
    eager.__dict__["nlp"] = lazy.nlp
    _ = eager.tagger
    assert eager.word_tags(words) == tags
