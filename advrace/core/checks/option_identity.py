"""Whether a new option is the answer or another option in other words, or names the other
options: then the gold is no longer the one right answer, or the options repeat themselves."""

from __future__ import annotations

import re
from typing import Iterable, Sequence

from advrace.core.text import fold_case_and_spaces

from .word_forms import content_words, lower_words, suffix_stem

END_PUNCT_RE = re.compile(r"[\s.?!,;:]+$")


def option_key(text: str) -> str:
    """What tells options apart, insensitive to case, spaces and end punctuation: 'Tom.' and
    'tom' are one option."""
    return END_PUNCT_RE.sub("", fold_case_and_spaces(text))


def answer_equivalence(candidate: str, answer: str, *, max_overlap: float = 0.5,
                       stopwords: Iterable[str] = ()) -> str | None:
    """Why the candidate could be the answer in other words, or None: it equals, contains or is
    contained in the answer (by whole words), holds every content word of the answer (with
    `stopwords`: "He was my son" for "His son"), or more than `max_overlap` of the words of the
    shorter of the two are the other's. A one-character answer ('A', '3') is not searched for."""
    cand, gold = option_key(candidate), option_key(answer)
    if not cand or not gold:
        return None
    if cand == gold:
        return "equals the answer"
    c_words, g_words = lower_words(candidate), lower_words(answer)
    padded_c, padded_g = f" {' '.join(c_words)} ", f" {' '.join(g_words)} "
    if len(gold) >= 2 and g_words and padded_g in padded_c:
        return "contains the answer"
    if len(cand) >= 2 and c_words and padded_c in padded_g:
        return "is contained in the answer"
    gold_content = {suffix_stem(w) for w in content_words(answer, stopwords)} if stopwords else set()
    if len(gold) >= 2 and gold_content and gold_content <= {suffix_stem(w) for w in content_words(candidate, stopwords)}:
        return "holds every content word of the answer"
    if word_overlap(candidate, answer) > max_overlap:
        return "shares most words with the answer"
    return None


ARTICLES_RE = re.compile(r"\b(?:a|an|the)\b")
SUBJECT_RE = re.compile(r"^(?:i|you|he|she|it|we|they)\s+")


def option_core(text: str) -> str:
    """An option without its articles and leading subject pronoun: what two options share when
    they say the same thing ("at the school" and "at school"; "he doesn't write down a word" and
    "doesn't write down a word"). Quantifiers and negations stay: "I know none of these people"
    and "I know most of these people" differ."""
    return " ".join(SUBJECT_RE.sub("", ARTICLES_RE.sub(" ", " ".join(lower_words(text)))).split())


def same_option(a: str, b: str) -> bool:
    core_a, core_b = option_core(a), option_core(b)
    return core_a == core_b if core_a or core_b else option_key(a) == option_key(b)


def word_overlap(a: str, b: str) -> float:
    """Share of the smaller lowercase word set found in the other, up to a plural or tense ending
    ("doctors" is "doctor"); 0 when either has no words."""
    wa, wb = {suffix_stem(w) for w in lower_words(a)}, {suffix_stem(w) for w in lower_words(b)}
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


# An answer that names other options ("both A and B", "All of the above"): replacing the
# distractors changes what it says.
OPTION_REFERENCE_RE = re.compile(
    r"\b(?:all|none|both|neither)\b(?:\s+of)?(?:\s+the)?\s+(?:above|[A-D]\b)"
    r"|\b[A-D]\s*(?:,|and|or|&)\s*[A-D]\b|^\s*[A-D]\s*[.)]?\s*$", re.IGNORECASE)


def refers_to_options(text: str) -> bool:
    """'both A and B', 'All of the above', 'A, B and C': an option whose meaning is the others'."""
    return OPTION_REFERENCE_RE.search(text) is not None


def duplicate_options(options: Sequence[str]) -> list[int]:
    """Indices of options that repeat an earlier one (case, spaces and end punctuation aside)."""
    seen, out = set(), []
    for i, option in enumerate(options):
        key = option_key(option)
        if key in seen:
            out.append(i)
        seen.add(key)
    return out
