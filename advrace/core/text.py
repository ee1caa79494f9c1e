"""Word-level helpers shared by attacks and statistics."""

from __future__ import annotations

import difflib
import functools
import re

WORD_RE = re.compile(r"\w+(?:['’]\w+)*")
# A purely alphabetic token with no letter, digit, underscore or apostrophe glued to it, so that
# "year," yields "year" and "don't" or "3rd" yield nothing an attack may scramble.
ALPHA_TOKEN_RE = re.compile(r"(?<![\w'’])[A-Za-z]+(?![\w'’])")
# A fill-in-the-blank question's blank, as RACE writes it: a run of underscores. The encoder
# fills it with each option.
BLANK_RE = re.compile(r"_+(?:\s*_+)*")
# AddSent also fills an empty pair of parentheses, which some RACE questions use as a blank; the
# encoder does not, so that scores stay those of the paper's input format.
BLANK_OR_PARENS_RE = re.compile(BLANK_RE.pattern + r"|\(\s*\)")
# The gap after a sentence's closing punctuation; the second also takes any run of newlines,
# since a passage's lines (titles, list items) often end without punctuation.
SENTENCE_BREAK_RE = re.compile(r"(?<=[.!?])\s+")
SENTENCE_OR_LINE_BREAK_RE = re.compile(r"(?<=[.!?])\s+|\n+")


def fold_case_and_spaces(text: str) -> str:
    """Lower case, every run of spaces one space: the form in which two texts are compared as
    the same words."""
    return " ".join(text.split()).lower()


def plural(n: int, word: str, many: str | None = None) -> str:
    """`1 split`, `2 splits`, `0 questions`: a count with its noun in the right number."""
    return f"{n:,} {word if n == 1 else many or word + 's'}"


def words(text: str) -> list[str]:
    return WORD_RE.findall(text)


@functools.lru_cache(maxsize=8192)
def count_words(text: str) -> int:
    """Cached: stats count every original passage again for each split."""
    return sum(1 for _ in WORD_RE.finditer(text))


def alpha_tokens(text: str) -> list[re.Match]:
    return list(ALPHA_TOKEN_RE.finditer(text))


def word_edits(before: str, after: str) -> tuple[int, int]:
    """(words of `after` substituted or inserted, words of `before` deleted without a substitute).

    Two counts, because a split that removes text (option_only empties the passage and the
    question) changes no word, and a share of changed words alone would call it untouched.
    """
    old, new = words(before), words(after)
    if len(old) == len(new):
        return sum(a != b for a, b in zip(old, new)), 0
    changed = removed = 0
    for op, i1, i2, j1, j2 in difflib.SequenceMatcher(a=old, b=new, autojunk=False).get_opcodes():
        if op != "equal":
            changed += j2 - j1
            removed += max(0, (i2 - i1) - (j2 - j1))
    return changed, removed


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


LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"  # option letters: A is option 0 (RACE's answers, prompts, the web app)
