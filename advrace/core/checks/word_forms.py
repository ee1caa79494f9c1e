"""The word view the validity predicates compare texts by: lowercase words, a word less its
possessive or its plural or tense ending, and the content words (not stopwords) of a text."""

from __future__ import annotations

import functools
import re
from typing import Iterable

from advrace.core.text import words


def lower_words(text: str) -> list[str]:
    return [w.lower() for w in words(text)]


NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve twenty thirty forty "
                         "fifty sixty hundred thousand million first second third".split())


POSSESSIVE_RE = re.compile(r"['’]s$")


def bare_word(word: str) -> str:
    """'tom's' -> 'tom': a possessive is the name's mention."""
    return POSSESSIVE_RE.sub("", word)


def content_words(text: str, stopwords: Iterable[str]) -> list[str]:
    """Words and numbers that are not stopwords ('40' and "Tom's" count; "don't" does not)."""
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else set(stopwords)
    return [b for b in map(bare_word, lower_words(text)) if b.isalnum() and b not in stop]


def suffix_stem(word: str) -> str:
    """A word less one plural or tense ending ("patents", "patented" -> "patent")."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


@functools.lru_cache(maxsize=64)
def word_stems(text: str) -> frozenset[str]:
    """A source's word stems, kept for the next candidate of the same question."""
    return frozenset(suffix_stem(bare_word(w)) for w in lower_words(text))
