"""The one sentence view of a passage that every check of what it states or asks reads
(`stated_in_passage`, `nearly_stated`, `asked_in_passage`), so that they cannot disagree on where
a sentence starts and ends, or on which of its words are a question.

A sentence is cut into pieces that ask and pieces that tell. A question asks from the start of
its sentence, or from the quotation mark that opens it ('Liu asked his teacher, "Can Chinese be
mixed with English?" in class.'), to its question mark and closing quotes; what the sentence
tells around it ("Liu asked his teacher ... in class") is a statement, its telling pieces joined,
since a question states nothing and its narration does. RACE's passages often glue sentences
("How quickly can you count?Many people think that ..."), which no break splits: a question
mark ends a piece all the same.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field

from advrace.core.text import split_sentences

from .word_forms import bare_word, lower_words, suffix_stem

# a question up to its "?" and closing quotes, or the text between questions
_QUESTION_PIECE_RE = re.compile(r"[^?]*\?+[\"'\u201d\u2019)]*|[^?]+")
# a quotation mark that opens a quote (after a space, a comma or a colon, before a word), and one
# that closes it (after a word or a stop, before no letter: not the apostrophe of "don't")
_OPENING_RE = re.compile(r"(?<![\w.,!?\"'\u201d\u2019])[\"'\u201c\u2018](?=[^\s\"'\u201c\u2018])")
_CLOSING_RE = re.compile(r"(?<=\S)[\"'\u201d\u2019](?!\w)")
_CLOSES = {'"': '"', "'": "'", "\u201c": "\u201d", "\u2018": "\u2019"}
_ARTICLES = {"a": "the", "an": "the"}


@dataclass(frozen=True)
class Piece:
    """A stretch of a sentence, as lowercase words, that asks (a question) or tells."""

    tokens: tuple[str, ...]
    asks: bool


@dataclass(frozen=True)
class Sentence:
    """One sentence's pieces, and the views of what it states that the checks read: `told` (its
    telling pieces' words joined, its questions left out), `bare` (each less its possessive),
    `stems` (each bare word less a plural or tense ending) and `folded` ("a" and "an" read as
    "the")."""

    pieces: tuple[Piece, ...]
    told: tuple[str, ...] = field(init=False)
    bare: tuple[str, ...] = field(init=False)
    stems: tuple[str, ...] = field(init=False)
    folded: tuple[str, ...] = field(init=False)

    def __post_init__(self):
        told = tuple(w for p in self.pieces if not p.asks for w in p.tokens)
        bare = tuple(map(bare_word, told))
        object.__setattr__(self, "told", told)
        object.__setattr__(self, "bare", bare)
        object.__setattr__(self, "stems", tuple(map(suffix_stem, bare)))
        object.__setattr__(self, "folded", fold_articles(told))


@dataclass(frozen=True)
class PassageSentences:
    """A passage as its sentences (line breaks end one), with the passage-wide views: `words`
    (every word in order, questions included), `stated_run` (its words in order with each
    question left out, a None where it stood, which no verbatim run crosses; a run may go on
    from one sentence into the next, over a break split wrongly: "Mrs. | Green"), `statements`
    (the sentences that tell something) and `questions` (each asking piece's words)."""

    sentences: tuple[Sentence, ...]

    @functools.cached_property
    def words(self) -> tuple[str, ...]:
        return tuple(w for s in self.sentences for p in s.pieces for w in p.tokens)

    @functools.cached_property
    def stated_run(self) -> tuple[str | None, ...]:
        out: list[str | None] = []
        for piece in (p for s in self.sentences for p in s.pieces):
            if piece.asks:
                out.append(None)
            else:
                out.extend(piece.tokens)
        return tuple(out)

    @functools.cached_property
    def statements(self) -> tuple[Sentence, ...]:
        return tuple(s for s in self.sentences if s.told)

    @functools.cached_property
    def questions(self) -> tuple[tuple[str, ...], ...]:
        return tuple(p.tokens for s in self.sentences for p in s.pieces if p.asks)


@functools.lru_cache(maxsize=64)
def passage_sentences(passage: str) -> PassageSentences:
    """The passage's sentence view, kept for the next candidate: the distractor attacks test up
    to 20 against one passage."""
    return PassageSentences(tuple(Sentence(pieces(s)) for s in split_sentences(passage, line_breaks=True)))


def pieces(text: str) -> tuple[Piece, ...]:
    """A text's pieces that ask and tell, in order (a candidate's as a passage sentence's)."""
    out = []
    for chunk in _QUESTION_PIECE_RE.findall(text):
        if not chunk.strip():
            continue
        if "?" not in chunk:
            out.append(Piece(tuple(lower_words(chunk)), False))
            continue
        start = _question_start(chunk)
        narration = tuple(lower_words(chunk[:start]))
        if narration:
            out.append(Piece(narration, False))
        out.append(Piece(tuple(lower_words(chunk[start:])), True))
    return tuple(out)


def _question_start(chunk: str) -> int:
    """Where the question of a piece that ends with one begins: at the last quotation mark that
    opens a quote still open at its question mark (an inner quote, "'Hamlet'", closes before
    it), else at the piece's start."""
    mark = chunk.index("?")
    for opening in reversed(list(_OPENING_RE.finditer(chunk, 0, mark))):
        closes = _CLOSES[opening.group()]
        inside = chunk[opening.end():mark]
        if not any(m.group() == closes for m in _CLOSING_RE.finditer(inside)):
            return opening.start()
    return 0


def fold_articles(tokens) -> tuple[str, ...]:
    """The words with "a" and "an" read as "the": a restatement may change an article."""
    return tuple(_ARTICLES.get(w, w) for w in tokens)
