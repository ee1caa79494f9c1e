"""Word-level helpers shared by attacks and statistics."""

from __future__ import annotations

import difflib
import functools
import re

WORD_RE = re.compile(r"\w+(?:['’]\w+)*")
# A purely alphabetic token with no letter, digit, underscore or apostrophe glued to it, so that
# "year," yields "year" and "don't" or "3rd" yield nothing an attack may scramble.
ALPHA_TOKEN_RE = re.compile(r"(?<![\w'’])[A-Za-z]+(?![\w'’])")
# The gap after a sentence's closing punctuation; the second also takes any run of newlines,
# since a passage's lines (titles, list items) often end without punctuation.
# A fill-in-the-blank question's blank, as RACE writes it: a run of underscores. The encoder
# fills it with each option.
BLANK_RE = re.compile(r"_+(?:\s*_+)*")
# AddSent also fills an empty pair of parentheses, which some RACE questions use as a blank; the
# encoder does not, so that scores stay those of the paper's input format.
BLANK_OR_PARENS_RE = re.compile(BLANK_RE.pattern + r"|\(\s*\)")
SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?])\s+")
SENTENCE_OR_LINE_BREAK_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def words(text: str) -> list[str]:
    return WORD_RE.findall(text)


@functools.lru_cache(maxsize=8192)
def count_words(text: str) -> int:
    """Cached: stats count every original passage again for each split."""
    return sum(1 for _ in WORD_RE.finditer(text))


def alpha_tokens(text: str) -> list[re.Match]:
    return list(ALPHA_TOKEN_RE.finditer(text))


def changed_words(before: str, after: str) -> int:
    """Words of `after` that are not an unchanged word of `before` (substituted or inserted)."""
    old, new = words(before), words(after)
    if len(old) == len(new):
        return sum(a != b for a, b in zip(old, new))
    matcher = difflib.SequenceMatcher(a=old, b=new, autojunk=False)
    return len(new) - sum(block.size for block in matcher.get_matching_blocks())


def sentence_breaks(text: str, *, line_breaks: bool = False) -> list[re.Match]:
    """The gaps between sentences, found by punctuation alone (and newlines with `line_breaks`).

    For code that loads no spaCy model (distractor extraction's answer insertion, the
    similarity reader). These are not the boundaries of `Resources.sentence_starts`, which come
    from spaCy's statistical `senter` and keep "Mr. Smith went home." whole."""
    pattern = SENTENCE_OR_LINE_BREAK_RE if line_breaks else SENTENCE_BREAK_RE
    return list(pattern.finditer(text))


def split_sentences(text: str, *, line_breaks: bool = False) -> list[str]:
    """The non-empty, stripped sentences between `sentence_breaks`."""
    pieces, last = [], 0
    for m in sentence_breaks(text, line_breaks=line_breaks):
        pieces.append(text[last:m.start()])
        last = m.end()
    pieces.append(text[last:])
    return [s.strip() for s in pieces if s.strip()]
