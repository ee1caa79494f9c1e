"""Whether an option gives itself away by its form alone, beside the question's other options:
a word cut, a blank kept, a second sentence begun, its case, final stop or length."""

from __future__ import annotations

import re
from statistics import median
from typing import Callable, Iterator, Sequence

from advrace.core.text import words

from .option_identity import END_PUNCT_RE

CUT_RE = re.compile(r"['\u2019][a-z]|[,;:!?)\]}]|\.(?!\d)")  # not ".5 kilos"


# A blank of the passage or question ("being _ short of _ exercise", "( )"): no option holds one.
BLANK_RE = re.compile(r"_|\(\s*\)|（\s*）|\[\s*\]")


def _edge_cuts(candidate: str, passage: str) -> Iterator[tuple[str | None, str | None]]:
    """For each place the passage holds the candidate (case, spaces and end punctuation aside),
    its first word where that place begins inside a passage word and its last word where it ends
    inside one, else None: a letter or digit on both sides of the edge ("max" of "Lomax", "s" of
    "Tom's", "don" of "don't")."""
    cand = END_PUNCT_RE.sub("", candidate.strip())
    if not cand or not passage:
        return
    pieces = cand.split()
    pattern = re.compile(r"\s+".join(map(re.escape, pieces)), re.IGNORECASE)
    first, last = words(pieces[0])[:1], words(pieces[-1])[-1:]
    for m in pattern.finditer(passage):
        before, after = passage[max(0, m.start() - 2):m.start()], passage[m.end():m.end() + 3]
        head = first[0] if first and cand[0].isalnum() and re.search(r"[^\W_]['’]?$", before) else None
        tail = last[0] if last and cand[-1].isalnum() and re.match(r"[^\W_]|['’]t\b", after) else None
        yield head, tail


def cut_inside_word(candidate: str, passage: str, known_word: Callable[[str], bool] | None = None) -> str | None:
    """The piece of a word the candidate starts or ends with where it is a piece of the passage
    (case, spaces and end punctuation aside) found only with a word cut at its start or end
    ("oride" of "oride to protect teeth", where the passage has "fluoride to protect teeth"), or
    None. A piece that `known_word` knows is no cut ("old" of "told", "smell" of "smells": options
    people write); nor is a number ("October 1" of "October 10"). For a span taken from the
    passage, where neither excuse holds, see `span_cut`."""
    cut = None
    for head, tail in _edge_cuts(candidate, passage):
        found = [w for w in (head, tail) if w and w.isalpha() and not (known_word and known_word(w.lower()))]
        if not found:
            return None
        cut = cut or found[0]
    return cut


def span_cut(span: str, passage: str) -> str | None:
    """The piece of a passage word a span (DE's: a piece of the passage) begins or ends with,
    where every place the passage holds it begins or ends inside a word, or None: "max" of
    "Lomax,", "h" of "Sequoyah invented", "1" of "October 10". A piece that is a word itself
    ("man astonished" of "Boardman astonished") is a cut all the same, since the span was cut
    there; a span the passage also holds whole somewhere is not."""
    cut = None
    for head, tail in _edge_cuts(span, passage):
        if head is None and tail is None:
            return None
        cut = cut or head or tail
    return cut


def form_giveaway(candidate: str, others: Sequence[str], *, length_ratio: float = 3.0, passage: str = "",
                  known_word: Callable[[str], bool] | None = None) -> str | None:
    """How the candidate stands out from the other options by form alone, or None: it starts
    inside a word or clause ("'t worry"), it holds a blank ("being _ short of _ exercise"), it is a
    piece of the `passage` cut inside a word ("Oride to protect teeth"; see `cut_inside_word`), it
    runs on into another sentence ("Hide under a desk. Cover"), it alone starts in lower case or upper case, it
    alone ends (or does not end) with a full stop, or its length in words is more than
    `length_ratio` times off the others' median (for options of three words or more, where that
    can be told)."""
    others = [o.strip() for o in others if o.strip()]
    cand = candidate.strip()
    if not cand or not others:
        return None
    if CUT_RE.match(cand):  # "'t worry", ", and then": a span cut inside a word or a clause
        return "starts with a cut-off word or punctuation"
    if BLANK_RE.search(cand):
        return "holds a blank"
    piece = cut_inside_word(cand, passage, known_word)
    if piece:
        return "cut inside a word of the passage"
    if runs_into_next_sentence(cand):
        return "runs into a second sentence"
    first = [o[0] for o in others if o[0].isalpha()]
    if cand[0].isalpha() and len(first) == len(others):
        if cand[0].islower() and all(c.isupper() for c in first):
            return "starts in lower case, unlike the other options"
        if cand[0].isupper() and all(c.islower() for c in first):
            return "starts in upper case, unlike the other options"
    ends = [o.endswith((".", "!", "?")) for o in others]
    if all(ends) and not cand.endswith((".", "!", "?")):
        return "has no final full stop, unlike the other options"
    if not any(ends) and cand.endswith("."):
        return "ends with a full stop, unlike the other options"
    n, typical = len(words(cand)), median(len(words(o)) for o in others)
    if typical >= 3 and n * length_ratio < typical:
        return f"{n} words beside options of about {typical:g}"
    if n >= 3 and n > length_ratio * max(typical, 1):
        return f"{n} words beside options of about {typical:g}"
    return None


# A sentence break inside an option: not after an abbreviation ("Mrs. Green", "U.S. Army").
_INNER_BREAK_RE = re.compile(r"(\w+)?([.!?])\s+[A-Z\"'“‘]")
ABBREVIATIONS = frozenset({"mr", "mrs", "ms", "dr", "st", "prof", "jr", "sr", "mt", "no", "vs", "etc", "co",
                           "inc", "ltd", "jan", "feb", "aug", "sept", "oct", "nov", "dec"})


# RACE's passages often lack the space after a full stop ("on April l.Those who try"): a span
# across two such sentences glues a word to a capitalised one (its first letter capitalised where
# the span starts there: "L.Those who try"). Not after a dotted letter ("the U.S.Army",
# "J.K.Rowling"), nor after a capital initial before a name ("J.Rowling"): an initial before a
# stopword ("L.Those") is the glued break
_GLUED_BREAK_RE = re.compile(r"(?<![A-Za-z]\.)\b([A-Za-z][a-z]*)[.!?]([A-Z][a-z]+)")
# words a sentence opens with that no name is
_OPENERS = frozenset("the a an this that these those he she it they we i you there here but and so then when if "
                     "in on at as his her their our my its your what who how why some many most all one after "
                     "before because however yet or now once while although every each no not".split())


def runs_into_next_sentence(text: str) -> bool:
    """Whether a sentence ends inside the text and another begins (a span cut across two)."""
    for m in _INNER_BREAK_RE.finditer(text.strip()):
        word = m.group(1) or ""
        if m.group(2) == "." and (word.lower() in ABBREVIATIONS or len(word) == 1):
            continue
        return True
    return any(_glued_break(m) for m in _GLUED_BREAK_RE.finditer(text))


def _glued_break(m: re.Match) -> bool:
    word, after = m.group(1), m.group(2)
    if word.lower() in ABBREVIATIONS:
        return False
    return not (len(word) == 1 and word.isupper() and after.lower() not in _OPENERS)
