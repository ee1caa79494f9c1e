"""Where an option's words come from: only the question's (it answers nothing), or the
passage's (RACE's options are written from it, so one about nothing in it gives itself away)."""

from __future__ import annotations

from typing import Iterable, Sequence

from .word_forms import NUMBER_WORDS, content_words, suffix_stem, word_stems


def repeats_question(candidate: str, question: str, stopwords: Iterable[str]) -> bool:
    """Whether a new option only repeats the question's words ("it seems that the writer of the
    story works" for "It seems that the writer of the story works _ ."; "Bob" for "_ and Bob are
    in a family."): it answers nothing, so a reader drops it at once. Every content word is the
    question's; a number word counts as new ("Two people." answers "How many people ...?")."""
    stop = set(stopwords) - NUMBER_WORDS  # "Two people." answers "How many people ...?"
    content = [suffix_stem(w) for w in content_words(candidate, stop)]
    if not content:
        return False
    asked = word_stems(question)
    return all(w in asked for w in content)


def grounded_share(candidate: str, sources: Sequence[str], stopwords: Iterable[str]) -> float:
    """Share of the candidate's content words that occur (up to a plural or tense ending) in the
    sources (the passage and question): RACE's own distractors are written from the passage, so
    one about nothing in it gives itself away. 0 for a candidate without content words."""
    content = content_words(candidate, stopwords)
    if not content:
        return 0.0
    known = set().union(*map(word_stems, sources))
    return sum(suffix_stem(w) in known for w in content) / len(content)

