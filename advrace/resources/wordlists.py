"""Small word resources: spaCy's stopwords (nltk's list cannot be downloaded offline), the most
common English words by wordfreq (Jia and Liang used the Brown top 1,000), and the Porter
stemmer for comparing words across inflections."""

from __future__ import annotations

import functools
import importlib.util
import sys
from collections.abc import Callable

from advrace.core.errors import ResourceMissing

from .packages import lean_import, module_dir, package_version

SPACY_STOP_WORDS = "spacy.lang.en.stop_words"


def load_stopwords() -> frozenset[str]:
    """spaCy's English stopword list, lowercased, read without importing spaCy: `import spacy`
    pulls in thinc and torch (seconds), while the list is one self-contained file."""
    return frozenset(w.lower() for w in _spacy_stop_words())


def _spacy_stop_words() -> set[str]:
    loaded = sys.modules.get(SPACY_STOP_WORDS)
    if loaded is not None:
        return loaded.STOP_WORDS
    root = module_dir("spacy")
    path = root / "lang" / "en" / "stop_words.py" if root is not None else None
    if path is not None and path.is_file():
        spec = importlib.util.spec_from_file_location("_advrace_spacy_stop_words", path)
        module = importlib.util.module_from_spec(spec)
        try:
            spec.loader.exec_module(module)
            return module.STOP_WORDS
        except (ImportError, AttributeError):  # a future spaCy whose file is not standalone
            pass
    try:
        # deferred for start-up time: importing spaCy takes seconds
        from spacy.lang.en.stop_words import STOP_WORDS
    except ImportError:
        raise ResourceMissing("spaCy is not installed; `pip install spacy`") from None
    return STOP_WORDS


def stopwords_version(stopwords: Callable[[], frozenset[str]]) -> str:
    """The manifest line; `stopwords` is called (to count them) only when spaCy is installed."""
    spacy_v = package_version("spacy")
    if spacy_v is None:
        return "missing"
    return f"spacy {spacy_v} STOP_WORDS ({len(stopwords())} words)"


def load_common_words(n: int) -> list[str]:
    """The n most frequent English words by wordfreq, keeping alphabetic ones only."""
    try:
        import wordfreq  # deferred: only AddAny and AddCommon need it
    except ImportError:
        raise ResourceMissing("wordfreq is not installed; `pip install wordfreq`") from None
    return [w for w in wordfreq.top_n_list("en", n) if w.isalpha()]


def common_words_version() -> str:
    wf = package_version("wordfreq")
    return f"wordfreq {wf} top_n_list en" if wf else "missing"


@functools.lru_cache(maxsize=1)
def _porter():
    lean_import("nltk")
    # deferred for start-up time: importing nltk takes half a second
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@functools.lru_cache(maxsize=200_000)
def porter_stem(word: str) -> str:
    """Porter stem of the lowercased word."""
    return _porter().stem(word.lower())


def stemmer_version() -> str:
    return f"nltk {package_version('nltk') or 'missing'} PorterStemmer"
