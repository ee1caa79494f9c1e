"""Offline linguistic resources for the attacks: spaCy, WordNet, GloVe, stopwords, word lists.

One module per resource; `Resources` composes them for one `ResourceConfig`. Every resource is
loaded on first use and cached, so a run that never needs GloVe never pays for it, and
`get_resources` keeps one `Resources` per config in each process so worker processes load each
resource once. `Resources.versions()` reports what a release was built with, for its manifest.
"""

from __future__ import annotations

import functools
import os
import threading
from dataclasses import dataclass
from pathlib import Path

from advrace.core.checking import build_dataclass
from advrace.core.errors import ConfigError

from .glove import GloVe, glove_version, load_glove
from .packages import package_version
from .spacy_pipeline import (EntityWork, TextCache, entities_only_route, entity_tail, entity_tuples, load_pipeline,
                             load_sentencizer, load_tagger, model_meta, model_name, model_version, parse_batch,
                             sentence_starts_batch)
from .synonymy import same_meaning as _same_meaning
from .word_tags import WordTagLexicon, lexicon_path, tag_words
from .wordlists import (common_words_version, load_common_words, load_stopwords, porter_stem,
                        stemmer_version, stopwords_version)
from .wordnet import (UPOS_TO_WORDNET, load_wordnet, reopen_files, wordnet_antonyms,
                      wordnet_version)

__all__ = ["GloVe", "ResourceConfig", "Resources", "get_resources"]


@dataclass(frozen=True)
class ResourceConfig:
    """Where each resource comes from; hashable, so it keys the per-process cache."""

    spacy_model: str | None = None
    glove_path: str | None = None
    glove_vocab: int = 100_000
    wordnet_dir: str | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        if self.glove_vocab < 1:
            raise ConfigError(f"resources.glove_vocab must be a positive integer, not {self.glove_vocab!r}")

    @classmethod
    def from_dict(cls, d: dict | None) -> ResourceConfig:
        """Build from the `resources` section of a release config: unknown keys and values of the
        wrong type are refused by the shared checker."""
        return build_dataclass(cls, {} if d is None else d, "resources")

    def resolved_cache_dir(self) -> Path:
        """The cache folder: the configured one, else $ADVRACE_CACHE, else ~/.cache/advrace."""
        raw = self.cache_dir or os.environ.get("ADVRACE_CACHE") or "~/.cache/advrace"
        return Path(raw).expanduser()


class Resources:
    """Lazy, cached access to every resource an attack may need, for one `ResourceConfig`.

    Each loaded resource is a cached property, so a test or benchmark can hand one `Resources`
    another's loaded models through `__dict__`."""

    def __init__(self, config: ResourceConfig | None = None):
        self.config = config if config is not None else ResourceConfig()
        self._common: dict[int, list[str]] = {}
        self._antonyms: dict[tuple[str, str], list[str]] = {}
        self._same_meaning: dict[tuple[str, str, str | None], str | None] = {}
        self._known: dict[str, bool] = {}
        self._lock = threading.RLock()
        self._wordnet_where = ""
        self._word_tags = WordTagLexicon(self._tag_lexicon_path)
        # Passages are shared by several questions and attacks; a bounded cache keyed by text
        # means each passage and question is analysed once as long as a passage's questions are
        # processed together (the release builder groups them), and batches fill it fast.
        self._sentences = TextCache(self._sentence_starts_batch, 4096)
        self._parses = TextCache(self._parse_batch, 8192)
        self._syntax = TextCache(self._syntax_batch, 8192)  # parses without the entities (`parse_syntax`)
        self._entities = TextCache(self._entities_batch, 8192)  # entities alone (`entities`)
        self.entity_work = EntityWork()

    # spaCy

    def _spacy_model_name(self) -> str:
        return model_name(self.config.spacy_model)

    def _spacy_model_meta(self) -> dict | None:
        return model_meta(self._spacy_model_name())

    @functools.cached_property
    def nlp(self):
        """The spaCy pipeline (tagger, parser, ner, lemmatizer) for passages and questions."""
        return load_pipeline(self._spacy_model_name())

    @functools.cached_property
    def sentencizer(self):
        """The pipeline's `senter` alone, for sentence starts (see `spacy_pipeline`)."""
        return load_sentencizer(self.nlp, self._spacy_model_name())

    @functools.cached_property
    def tagger(self):
        """The pipeline up to the tagger and attribute ruler: same tags as `nlp`, for words alone."""
        return load_tagger(self.nlp, self._spacy_model_name())

    def _sentence_starts_batch(self, texts: list[str]) -> list[tuple[int, ...]]:
        return sentence_starts_batch(self.sentencizer, texts)

    def _parse_batch(self, texts: list[str]) -> list:
        return parse_batch(self.nlp, texts)

    @functools.cached_property
    def _entity_tail(self) -> tuple[str, ...]:
        return entity_tail(self.nlp)

    def _syntax_batch(self, texts: list[str]) -> list:
        return parse_batch(self.nlp, texts, self._entity_tail)

    @functools.cached_property
    def _entities_skip(self) -> tuple[str, ...] | None:
        """The components `entities` leaves out, None where it must parse in full (checked once,
        on the pipeline and a probe: `spacy_pipeline.entities_only_route`)."""
        skip, why = entities_only_route(self.nlp)
        if why:
            self.entity_work.refuse(why, self._spacy_model_name())
        return skip

    def _entities_batch(self, texts: list[str]) -> list:
        skip = self._entities_skip
        if skip is None:
            self.entity_work.full_parse += len(texts)
            return [entity_tuples(doc) for doc in self._parse_batch(texts)]
        self.entity_work.alone += len(texts)
        return [entity_tuples(doc) for doc in parse_batch(self.nlp, texts, skip)]

    def sentence_starts(self, text: str) -> tuple[int, ...]:
        """Character offsets where the sentences of `text` start (the first is 0 for any text)."""
        return self._sentences.get(text)

    def parse(self, text: str):
        """The full spaCy analysis of a short text such as a question (cached by text); a text
        parsed by `parse_syntax` gets its entities added to the same doc."""
        if text not in self._parses and text in self._syntax:
            doc = self._syntax.pop(text)
            for name in self._entity_tail:
                doc = self.nlp.get_pipe(name)(doc)
            self._parses.put(text, doc)
        return self._parses.get(text)

    def parse_syntax(self, text: str):
        """The analysis of `parse` without the named entities (tags, lemmas, dependencies and
        sentences are the same): the entity recogniser is half of a short text's parse, and the
        statement rules and grammar checks, which parse every candidate sentence, never read
        entities. A caller that reads `ents` or `ent_type_` must use `parse`."""
        if text in self._parses or not self._entity_tail:
            return self._parses.get(text)
        return self._syntax.get(text)

    def entities(self, text: str, one_sentence: bool = True):
        """The named entities of `parse(text).ents`, as `spacy_pipeline.Entity` tuples (text,
        start_char, end_char, label_), cached by text: for a caller that reads nothing else of a
        question-sized text (the entity check of a question with a word swapped), the tokenizer
        and the recogniser alone, half the full parse's time, where `_entities_skip` allows;
        read off the full parse where that is cached. `one_sentence=False` (the question the text
        was made from parses as several sentences) reads the full parse: only the parser's
        sentence starts can make the two differ (`spacy_pipeline.entities_only_refusal`), which
        is also why this is not for passages."""
        if not one_sentence:
            if text not in self._parses:
                self.entity_work.several_sentences += 1
            return entity_tuples(self.parse(text))
        if text not in self._entities and text in self._parses:
            self.entity_work.from_parse += 1
            self._entities.put(text, entity_tuples(self._parses.get(text)))
        return self._entities.get(text)

    def prepare_entities(self, texts, one_sentence: bool = True) -> None:
        """Find the entities of many short texts in one batch, ahead of `entities` (with the
        same `one_sentence`)."""
        if not one_sentence:
            new = [t for t in dict.fromkeys(texts) if t not in self._parses]
            self.entity_work.several_sentences += len(new)
            self.prepare_parses(new)
            return
        self._entities.fill([t for t in texts if t not in self._parses])

    def prepare_sentences(self, texts) -> None:
        """Find the sentence starts of many passages in one batch, ahead of `sentence_starts`."""
        self._sentences.fill(texts)

    def prepare_parses(self, texts) -> None:
        """Parse many short texts in one batch, ahead of `parse`."""
        self._parses.fill(texts)

    def after_fork(self) -> None:
        """Give a forked worker its own WordNet file handles: handles inherited from the parent
        share one file offset, so workers reading at once would corrupt each other's reads."""
        reopen_files(self.__dict__.get("wordnet"))

    def preload(self, keys) -> None:
        """Load the named resources (keys of `versions`) now, so that forked workers share them
        instead of each loading its own copy; resources not named stay unloaded. The word tagger
        is not preloaded (start-up): it tags only words missing from the on-disk lexicon, which
        after a first build is usually none, and a worker that needs it loads it then."""
        loaders = {"spacy_model": ("nlp", "sentencizer"), "glove": ("glove",),
                   "wordnet": ("wordnet",), "stopwords": ("stopwords",)}
        for key in keys:
            for attr in loaders.get(key, ()):
                getattr(self, attr)
            if key == "stemmer":
                self.stem("preload")

    # word tags

    def _tag_lexicon_path(self) -> Path:
        return lexicon_path(self.config.resolved_cache_dir(), self._spacy_model_name(),
                            self._spacy_model_meta())

    def _tag_words(self, words: list[str]) -> list[tuple[str, str]]:
        return tag_words(self.tagger, words)

    def word_tags(self, words) -> list[tuple[str, str]]:
        """(universal POS, Penn tag) of each word tagged on its own, in one batch; cached, also
        on disk (`save_word_tags`), per spaCy model (see `word_tags`)."""
        return self._word_tags.lookup(words, self._tag_words)

    def take_new_word_tags(self) -> dict[str, tuple[str, str]]:
        """The tags computed since the last call (workers hand them to the main process)."""
        return self._word_tags.take_new()

    def add_word_tags(self, tags: dict) -> None:
        self._word_tags.add(tags)

    def save_word_tags(self) -> None:
        """Merge this process's new tags into the on-disk lexicon (atomically; last writer wins)."""
        self._word_tags.save()

    def word_pos(self, word: str) -> str:
        """The universal POS spaCy gives `word` on its own; used to match replacement words."""
        return self.word_tags([word])[0][0]

    # WordNet

    @functools.cached_property
    def wordnet(self):
        """An nltk WordNetCorpusReader, built offline from Debian's files when nltk has no data."""
        reader, self._wordnet_where = load_wordnet(self.config.wordnet_dir,
                                                   self.config.resolved_cache_dir())
        return reader

    def antonyms(self, word: str, pos: str) -> list[str]:
        """Single-word WordNet antonyms of the word's lemmas (morphy's first, then its other
        analyses), in first-seen order; [] for a POS outside NOUN/VERB/ADJ/ADV."""
        if pos not in UPOS_TO_WORDNET or not word:
            return []
        key = (word, pos)
        with self._lock:
            if key in self._antonyms:
                return list(self._antonyms[key])
        found = wordnet_antonyms(self.wordnet, word, pos)
        with self._lock:
            self._antonyms[key] = found
        return list(found)

    def same_meaning(self, word: str, new: str, pos: str | None = None) -> str | None:
        """Why `new` in place of `word` keeps the meaning ("synonym", "spelling variant",
        "inflection", and under a WordNet POS "hypernym", "hyponym", "sibling": near senses), or
        None when it changes it; see `synonymy.same_meaning` (cached)."""
        key = (word.lower(), new.lower(), pos)
        with self._lock:
            if key in self._same_meaning:
                return self._same_meaning[key]
        found = _same_meaning(self.wordnet, word, new, pos)
        with self._lock:
            self._same_meaning[key] = found
        return found

    def known_word(self, word: str) -> bool:
        """Whether a lowercase word is an English word form: a stopword, or in WordNet under some
        POS through its inflection rules ("smells", "told"); "oride" is not."""
        if word in self.stopwords:
            return True
        with self._lock:
            if word in self._known:
                return self._known[word]
        found = any(self.wordnet.morphy(word, pos) for pos in ("n", "v", "a", "r"))
        with self._lock:
            self._known[word] = found
        return found

    # GloVe

    @functools.cached_property
    def glove(self) -> GloVe:
        """GloVe capped at `glove_vocab` words, so neighbours are common words and search fast."""
        return load_glove(self.config.glove_path, self.config.glove_vocab)

    # small resources

    @functools.cached_property
    def stopwords(self) -> frozenset[str]:
        """spaCy's English stopword list, lowercased; importing it needs no model."""
        return load_stopwords()

    def common_words(self, n: int = 1000) -> list[str]:
        """The n most frequent English words by wordfreq, keeping alphabetic ones only."""
        with self._lock:
            if n not in self._common:
                self._common[n] = load_common_words(n)
            return list(self._common[n])

    def stem(self, word: str) -> str:
        """Porter stem of the lowercased word, to compare words across inflections."""
        return porter_stem(word)

    # manifest

    def versions(self, keys=None) -> dict[str, str]:
        """Versions of the named resources (default: all), read from metadata rather than by
        loading them; naming only what the attacks use keeps nltk and the rest unimported."""
        lines = {
            "spacy": lambda: package_version("spacy") or "missing",
            "spacy_model": lambda: model_version(
                self.nlp.meta if "nlp" in self.__dict__ else self._spacy_model_meta(),
                self._spacy_model_name()),
            "wordnet": lambda: wordnet_version(
                self.config.wordnet_dir,
                (self.wordnet, self._wordnet_where) if "wordnet" in self.__dict__ else None),
            "glove": lambda: glove_version(self.config.glove_path, self.config.glove_vocab),
            "stopwords": lambda: stopwords_version(lambda: self.stopwords),
            "common_words": common_words_version,
            "stemmer": stemmer_version,
        }
        wanted = lines if keys is None else [k for k in lines if k in set(keys)]
        return {k: lines[k]() for k in wanted}


_CACHE: dict[ResourceConfig, Resources] = {}
_CACHE_LOCK = threading.Lock()


def get_resources(config: ResourceConfig | dict | None = None) -> Resources:
    """The process-wide `Resources` for this config, so each worker loads each resource once."""
    if not isinstance(config, ResourceConfig):
        config = ResourceConfig.from_dict(config)
    with _CACHE_LOCK:
        res = _CACHE.get(config)
        if res is None:
            res = _CACHE[config] = Resources(config)
        return res
