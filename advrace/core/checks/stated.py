"""Whether a passage states a text (`stated_in_passage`, `nearly_stated`) or asks it
(`asked_in_passage`): for a question that asks what the passage states, a new distractor the
passage states is a second right answer, and one it asks is neither true nor false."""

from __future__ import annotations

from collections import Counter
from typing import Iterable, Sequence

from .sentence_view import PassageSentences, fold_articles, passage_sentences, pieces
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
    `share` of them (and `min_words`) occurs verbatim in what it states (`stated_run`: the run may
    go on from one sentence into the next), by lowercase words; or the whole text is a statement's
    words in order but for articles ("a train" for "the train") and words left out that do not
    change what it says ("You can carry many things in a car." for "Also you can carry many things
    with you in a car."). A piece of a question the passage quotes ("Can Chinese be mixed with
    English?") is not stated, as for `nearly_stated`: both read `passage_sentences`."""
    cand = lower_words(text)
    if len(cand) < min_words:
        return False
    view = passage_sentences(passage)
    if _longest_common_run(cand, view.stated_run) >= max(min_words, share * len(cand)):
        return True
    told = _told_around_a_question(text, cand, view, share)
    if told is not None and told >= min_words:
        return True
    folded = fold_articles(cand)
    return any(_restates(folded, sent.folded) for sent in view.statements)


def _told_around_a_question(text: str, cand: Sequence[str], view: PassageSentences, share: float) -> int | None:
    """How many words a text that quotes a question of the passage tells around it, or None for a
    text that quotes none or that the passage does not hold (a run of `share` of its words, the
    question included). Told in at least `min_words` words ('She asks again, "Is your mother at
    home?" "Yes, she is." Xiao Ming answers.') it is a thing the passage says, though the question
    breaks the run `stated_in_passage` looks for; in fewer ('Mr Jones asked, "What price is the
    room?"') it is the question, which `asked_in_passage` refuses. The text is cut into pieces as
    the passage's sentences are."""
    own = pieces(text)
    if not any(p.asks for p in own) or _longest_common_run(cand, view.words) < share * len(cand):
        return None
    return sum(len(p.tokens) for p in own if not p.asks)


def asked_in_passage(text: str, passage: str, *, min_words: int = MIN_STATED_WORDS,
                     share: float = STATED_SHARE) -> bool:
    """Whether the text is a question the passage asks or quotes ("Did you enjoy the evening?"):
    a run of its words as long as `stated_in_passage` asks for lies inside one of the passage's
    question pieces, or it quotes one with fewer than `min_words` words around it ('Mr Jones
    asked, "What price is the room?"'). Not stated, yet no statement either: for "Which is true?"
    such an option is neither true nor false, and gives itself away."""
    cand = lower_words(text)
    if len(cand) < min_words:
        return False
    view = passage_sentences(passage)
    need = max(min_words, share * len(cand))
    if any(_longest_common_run(cand, tokens) >= need for tokens in view.questions):
        return True
    told = _told_around_a_question(text, cand, view, share)
    return told is not None and told < min_words


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
    for sent in passage_sentences(passage).statements:
        if not needed <= set(sent.stems):
            continue
        # the sentence's content words, by stem, with their positions in it
        keyed = [(i, sent.stems[i]) for i, b in enumerate(sent.bare) if b.isalnum() and b not in stop]
        stems = [k for _, k in keyed]
        told = sent.told
        for j in range(len(stems) - len(content) + 1):
            if stems[j:j + len(content)] != content:
                continue
            lo, hi = keyed[j][0], keyed[j + len(content) - 1][0]
            if _negations(told[:hi + 1]) == negations and \
                    _meaning_marks(told[max(0, lo - AROUND):hi + 1 + AROUND]) == marks:
                return True
    return False


def statements(passage: str) -> tuple[tuple[str, ...], ...]:
    """What the passage states, as lowercase tokens: each sentence's telling words, its questions
    left out (`passage_sentences`)."""
    return tuple(sent.told for sent in passage_sentences(passage).statements)
