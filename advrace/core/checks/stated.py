"""Whether a passage states a text (`stated_in_passage`, `nearly_stated`) or asks it
(`asked_in_passage`): for a question that asks what the passage states, a new distractor the
passage states is a second right answer, and one it asks is neither true nor false."""

from __future__ import annotations

import functools
import re
from collections import Counter
from typing import Iterable, Sequence

from advrace.core.text import split_sentences

from .word_forms import NUMBER_WORDS, bare_word, content_words, lower_words, suffix_stem

MIN_STATED_WORDS = 4
STATED_SHARE = 0.8


def _longest_common_run(a: Sequence[str], b: Sequence[str]) -> int:
    """The length of the longest run of words found in both, in order and unbroken."""
    best, prev = 0, [0] * (len(b) + 1)
    for x in a:
        cur = [0] * (len(b) + 1)
        for j, y in enumerate(b, 1):
            if x == y:
                cur[j] = prev[j - 1] + 1
                best = max(best, cur[j])
        prev = cur
    return best


def stated_in_passage(text: str, passage: str, *, min_words: int = MIN_STATED_WORDS,
                      share: float = STATED_SHARE) -> bool:
    """Whether the passage states the text: at least `min_words` words, of which a run of at least
    `share` of them (and `min_words`) occurs verbatim in its statements (`statements`; the run may
    go on from one into the next), by lowercase words; or the whole text is a statement's words in
    order but for articles ("a train" for "the train") and words left out that do not change what
    it says ("You can carry many things in a car." for "Also you can carry many things with you in
    a car."). A piece of a question the passage quotes ("Can Chinese be mixed with English?") is
    not stated, as for `nearly_stated`."""
    cand = lower_words(text)
    if len(cand) < min_words:
        return False
    if _longest_common_run(cand, _stated_tokens(passage)) >= max(min_words, share * len(cand)):
        return True
    if _tells_around_a_question(text, cand, passage, min_words, share):
        return True
    cand = [_ARTICLES.get(w, w) for w in cand]
    return any(_restates(cand, [_ARTICLES.get(w, w) for w in sent]) for sent in statements(passage))


def _tells_around_a_question(text: str, cand: Sequence[str], passage: str, min_words: int, share: float) -> bool:
    """A span that quotes a question inside what it tells ('She asks again, "Is your mother at
    home?" "Yes, she is." Xiao Ming answers.'): the passage holds it, the question included, and
    its words outside the question are at least `min_words`. The question breaks the run
    `stated_in_passage` looks for, yet the rest is a thing the passage says."""
    pieces = [(lower_words(piece), "?" in piece) for piece in _QUESTION_PIECE_RE.findall(text) if piece.strip()]
    told = sum(len(tokens) for tokens, asks in pieces if not asks)
    if not any(asks for _, asks in pieces) or told < min_words:
        return False
    whole = tuple(w for tokens, _ in _sentences(passage) for w in tokens)
    return _longest_common_run(cand, whole) >= share * len(cand)


def asked_in_passage(text: str, passage: str, *, min_words: int = MIN_STATED_WORDS,
                     share: float = STATED_SHARE) -> bool:
    """Whether the text is a question the passage asks or quotes ("Did you enjoy the evening?"):
    a run of its words as long as `stated_in_passage` asks for lies inside one of the passage's
    question pieces. Not stated, yet no statement either: for "Which is true?" such an option is
    neither true nor false, and gives itself away."""
    cand = lower_words(text)
    if len(cand) < min_words:
        return False
    need = max(min_words, share * len(cand))
    return any(asks and _longest_common_run(cand, tokens) >= need for tokens, asks in _sentences(passage))


_ARTICLES = {"a": "the", "an": "the"}
# what a restatement may leave out of the sentence it restates: no negation, number, name,
# "only" or "once", which change what it says
_OMISSIBLE = frozenset("the with you your he his she her they their it its them him us me my our we i of to for in "
                       "on at by from and also so then just really very too".split())


def _restates(cand: Sequence[str], sent: Sequence[str]) -> bool:
    """Whether `cand` is `sent`'s words from one place on, in order, with only omissible words
    skipped between them."""
    for start, word in enumerate(sent):
        if word != cand[0]:
            continue
        k = 1
        for other in sent[start + 1:]:
            if k == len(cand):
                break
            if other == cand[k]:
                k += 1
            elif other not in _OMISSIBLE:
                break
        if k == len(cand):
            return True
    return False


# Words that change what a statement says: an option and the part of a sentence it restates must
# hold the same ones ("It can climb the stairs" does not restate "it cannot climb the stairs").
MEANING_WORDS = frozenset("without only once always all every each both either any some most more less least few "
                          "many much several often sometimes seldom rarely usually ever already still yet again "
                          "before after than too enough hardly".split())
NEGATIONS = frozenset("not cannot no never nor neither none nobody nothing nowhere".split())
AROUND = 3  # words either side of the restated part where its "only", "always" or number may stand
# what an option may say in other words than its sentence: who or which thing it is about
_REFERRING = frozenset("the a an he she it they we you i his her its their our your my him them us me this that "
                       "these those there".split())


def _negations(tokens: Sequence[str]) -> int:
    return sum(w in NEGATIONS or w.endswith(("n't", "n’t")) for w in tokens)


def _meaning_marks(tokens: Sequence[str]) -> Counter:
    """The meaning words and numbers among the tokens."""
    return Counter(w for w in tokens if w in MEANING_WORDS or w in NUMBER_WORDS or w.isdigit())


def nearly_stated(text: str, passage: str, stopwords: Iterable[str], *, min_words: int = MIN_STATED_WORDS) -> bool:
    """Whether the text says what one passage sentence (not a question) says in nearly its words:
    of at least `min_words` words, each of them but a pronoun or article is the sentence's (up to a
    plural or tense ending), its content words are a run of the sentence's content words, in
    order, it holds as many negations as the sentence up to that run, and the same quantifiers and
    numbers as the run and the few words around it. "They can even be deadly." for "Bad teeth can
    be painful and even be deadly."; not "It can climb the stairs." for "... but it cannot climb
    the stairs", nor "Tom went to Beijing." for "Tom's father went to Beijing."."""
    cand = lower_words(text)
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
    content = [suffix_stem(w) for w in content_words(text, stop)]
    if len(cand) < min_words or not content:
        return False
    needed = {suffix_stem(bare_word(w)) for w in cand if w not in _REFERRING}
    marks, negations = _meaning_marks(cand), _negations(cand)
    for sent in statements(passage):
        bare = [bare_word(w) for w in sent]
        stemmed = [suffix_stem(b) for b in bare]
        if not needed <= set(stemmed):
            continue
        # the sentence's content words, by stem, with their positions in it
        keyed = [(i, stemmed[i]) for i, b in enumerate(bare) if b.isalnum() and b not in stop]
        stems = [k for _, k in keyed]
        for j in range(len(stems) - len(content) + 1):
            if stems[j:j + len(content)] != content:
                continue
            lo, hi = keyed[j][0], keyed[j + len(content) - 1][0]
            if _negations(sent[:hi + 1]) == negations and \
                    _meaning_marks(sent[max(0, lo - AROUND):hi + 1 + AROUND]) == marks:
                return True
    return False


@functools.lru_cache(maxsize=64)
def _sentences(passage: str) -> tuple[tuple[tuple[str, ...], bool], ...]:
    """The passage's sentences (line breaks end one), each cut after a question mark, as lowercase
    tokens with whether the piece asks (a question states nothing: '"Why can't Chinese be mixed
    with English?"' of '"Why can't ...?" Liu said.');
    kept for the next candidate, as the distractor attacks test up to 20 against one passage."""
    return tuple((tuple(lower_words(piece)), "?" in piece) for s in split_sentences(passage, line_breaks=True)
                 for piece in _QUESTION_PIECE_RE.findall(s) if piece.strip())


# a question up to its "?" and closing quotes, or the text between questions: RACE's passages often
# glue sentences ("How quickly can you count?Many people think that ..."), which no break splits
_QUESTION_PIECE_RE = re.compile(r"[^?]*\?+[\"'\u201d\u2019)]*|[^?]+")


def statements(passage: str) -> tuple[tuple[str, ...], ...]:
    """What the passage states, the one sentence view of `stated_in_passage` and `nearly_stated`:
    its sentences but those that ask, as lowercase tokens."""
    return tuple(tokens for tokens, asks in _sentences(passage) if not asks)


@functools.lru_cache(maxsize=64)
def _stated_tokens(passage: str) -> tuple[str | None, ...]:
    """The passage's tokens in order with each question left out (a None where it stood, which
    no run crosses): a verbatim run may cross a sentence break split wrongly ("Mrs. | Green")."""
    out: list[str | None] = []
    for tokens, asks in _sentences(passage):
        if asks:
            out.append(None)
        else:
            out.extend(tokens)
    return tuple(out)
