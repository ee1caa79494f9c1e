"""Word-level helpers shared by attacks and statistics."""

from __future__ import annotations

import difflib
import functools
import re

WORD_RE = re.compile(r"\w+(?:['’]\w+)*")
# A purely alphabetic token with no letter, digit, underscore or apostrophe glued to it, so that
# "year," yields "year" and "don't" or "3rd" yield nothing an attack may scramble.
ALPHA_TOKEN_RE = re.compile(r"(?<![\w'’])[A-Za-z]+(?![\w'’])")


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
