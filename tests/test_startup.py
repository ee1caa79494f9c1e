"""A build loads only the resources its attacks use: CharSwap needs no spaCy (whose import
pulls in thinc and torch, seconds), no GloVe and no WordNet. Checked in a fresh interpreter,
since the test process has them all loaded."""

from __future__ import annotations

import json
import subprocess
import sys

RESOURCE_ATTRS = ("nlp", "sentencizer", "tagger", "glove", "wordnet", "stopwords")
HEAVY_MODULES = ("spacy", "thinc", "torch")

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
    assert "spacy" in found["addsent"]["modules"]


def test_stopwords_come_without_importing_spacy():
    code = ("import sys; from advrace.resources.wordlists import load_stopwords; "
            "n = len(load_stopwords()); print(n, 'spacy' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    from spacy.lang.en.stop_words import STOP_WORDS

    assert out.stdout.split() == [str(len({w.lower() for w in STOP_WORDS})), "False"]
