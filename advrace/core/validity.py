"""Whether an option or an inserted text keeps the gold answer the one right answer: the checks
that the distractor attacks apply before they choose and that `advrace audit` applies after.

Pure text logic (no model, no lexicon): the callers pass stopwords and, for paraphrase, a cosine
from an encoder of the model floor.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from statistics import median
from typing import Callable, Iterable, Iterator, Sequence

from advrace.core.text import fold_case_and_spaces, split_sentences, words

# A question that asks what the passage states or lets one infer: every sentence the passage
# states answers it, so such a sentence cannot be a distractor.
STATES_RE = re.compile(
    # "... is true (about/of/according ...)", not "the right way" or "turned right"
    r"\b(?:which|what)\b[^?]*(?:\b(?:is|are|was|were|be)|['\u2019]s)\s+(?:\w+\s+){0,2}(?:true|correct|right)\b"
    r"(?!\s+(?!about|of|in|according|to|for|from)\w)"
    r"|\bwe\s+(?:can|could|may|might)\s+(?:learn|know|infer|conclude|tell|see|find|understand|guess)\b"
    r"|\b(?:you\s+(?:can|could|may|might)|(?:can|could|may|might)\s+you)\s+(?:learn|infer|conclude|guess)\b"
    r"|\b(?:can|could|may|might)\s+(?:be\s+)?(?:learn(?:ed|t)?|inferr?ed|infer|conclud(?:ed|e)|known|seen|"
    r"told|found)\b"
    r"|\bwe\s+(?:learn|know|infer|conclude|guess)\b"
    r"|\b(?:infer|inferred|imply|implies|implied|suggest|suggests|suggested|conclude|concluded)\b"
    r"|\b(?:mentioned|stated|described|told|said)\s+in\s+the\s+(?:passage|text|article|story)\b"
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story)\s*,?\s*which\b"
    r"|\bwhat\s+does\s+the\s+(?:passage|text|article|story|writer|author)\s+(?:tell|show|say)\b"
    # "The passage indicates that _", "According to the passage, _": the blank is a whole statement
    r"|\b(?:passage|text|article|story|writer|author)\s+(?:also\s+|clearly\s+)?(?:indicates?|shows?|tells?\s+us|"
    r"says?|states?|reveals?|proves?)\s+(?:that\b|_)"
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story|writer|author)\s*,?\s*_"
    # "According to the story, Fleming _ .": the blank is all that is said of someone
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story|writer|author)\s*,\s*"
    r"(?:(?:the|a|an|this|that|these|those|his|her|their|our|my)\s+(?:[a-z]+\s+)?[a-z]+"
    r"|(?-i:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)|he|she|they|we|you|it|people)\s+_+[\s.]*$",
    re.IGNORECASE)

# A question whose right answer is the one option that does NOT satisfy it ("Which is NOT an
# advantage of Weibo?", "All are true EXCEPT _", "Which statement is false?", "Bob doesn't have _ in
# his bag.", "Which places has Helen not visited yet?", "What did the boy never do?"): every other
# option must then satisfy it, so a new distractor that does not (a place the passage never says
# she visited) is a second right answer. The asked thing is what the negated verb is (not) true
# of: which, what or who is its subject or object. "Why didn't Tom go?", "How many states don't
# have the law?" and "Tom is not happy because _" ask for a reason, a number or a cause of
# something negated, which a new distractor does not become by failing to fit; they are not matched.
_NEG = r"(?:n['\u2019]t|\s+not|\s+never|\s+no\s+longer)"
_AUX = r"(?:is|are|was|were|does|do|did|can|could|should|would|will|has|have|may|might|must|need)"
_CONTRACTED = r"(?:can['\u2019]t|cannot|won['\u2019]t|shan['\u2019]t)"
_CONNECTIVE = (r"(?:because|if|when|whenever|so|since|as|until|till|unless|while|but|and|after|before|though|"
               r"although|means?|meant)")
# "What did Tom not like?" asks for what he disliked, an attitude a new distractor does not get by
# failing to fit; "Who doesn't like sports?" (the asked one is the subject) still asks for the exception
_ATTITUDE = r"(?:like|love|enjoy|want|wish|agree|believe|trust|care|mind|approve|accept|support)\b"
_SUBJECT = r"(?:(?-i:[A-Z][\w'\u2019]*)|he|she|they|we|you|i|it|(?:the|his|her|their|our|my|your)\s+\w+)"
# which, what or who that asks (the question's start, or after a comma or a preposition), not one
# that opens a relative clause ("Which is true about the boys who didn't go?")
_ASKING = (r"(?:^[\s.]*|[,;:!?\"\u201c(]\s*|\b(?:in|on|at|for|from|of|with|to|by|about|among|during)\s+)"
           r"(?:which|what|who)")
INVERTED_RE = re.compile(
    r"\bNOT\b|\bEXCEPT\b|(?i:\bexcept\s*(?:_|\.|\?|$)|\b(?:false|untrue|incorrect|inaccurate)\b"
    r"|\b(?:which|what)\b[^?]*?\b(?:is|are|was|were|be)\s+(?:\w+\s+)?wrong\s*(?:[?._]|$|according\b|about\b|in\b)"
    # "Which of the following is not ...", "What can't robots do?"; not "What did Amy do when she could not ..."
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?(?:{_AUX}{_NEG}|{_CONTRACTED})\b"
    rf"(?!\s+{_SUBJECT}\s+{_ATTITUDE})"
    # ... the subject between the auxiliary and its negation: "Which places has Helen not visited?",
    # "What did the boy never do?"; "Who never came?", "Which is no longer used?"
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?{_AUX}\s+"
    rf"(?:(?!{_CONNECTIVE}\b|{_AUX}\b)[\w'\u2019]+\s+){{1,3}}?(?:not|never|no\s+longer)\b(?!\s+{_ATTITUDE})"
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?(?:never|no\s+longer)\b"
    r"|\bnot\s+about\s*\?"
    r"|\b(?:not|never|n['\u2019]t)\s+(?:\w+\s+)?(?:true|correct|right|mentioned|stated|included|"
    r"discussed|talked\s+about|referred\s+to|given|listed|shown|described|covered|inferred|learned|learnt|"
    r"concluded|known|found|told|said|implied|suggested)\b"
    r"|\b(?:cannot|can['\u2019]t|couldn['\u2019]t)\s+(?:we\s+|you\s+)?(?:be\s+)?"
    r"(?:learn|infer|conclude|know|tell|find|see)"
    # a blank completing a negated clause: "Bob doesn't have _", "_ is not a kind of fish"
    rf"|(?:\b(?:not|never)\b|n['\u2019]t\b|\b{_CONTRACTED})(?:(?!\b{_CONNECTIVE}\b)[^,;.?_])*_"
    r"|^[\s.]*_+\s+(?:is|are|was|were)\s+(?:not|never)\b)",
    re.MULTILINE)

MIN_STATED_WORDS = 4
STATED_SHARE = 0.8


def _tokens(text: str) -> list[str]:
    return [w.lower() for w in words(text)]


END_PUNCT_RE = re.compile(r"[\s.?!,;:]+$")


def option_key(text: str) -> str:
    """What tells options apart, insensitive to case, spaces and end punctuation: 'Tom.' and
    'tom' are one option."""
    return END_PUNCT_RE.sub("", fold_case_and_spaces(text))


def asks_what_passage_states(question: str) -> bool:
    """'What can we learn from the text?', 'Which is TRUE?', 'We can infer that _', 'According to
    the story, Fleming _.', unless it asks for the one that is not so (`negated_question`: then a
    stated sentence is the right distractor). A "not" elsewhere does not make it so: "Which is
    true about the boys who didn't go?" is answered by what the passage states."""
    return bool(STATES_RE.search(question)) and not negated_question(question)


def negated_question(question: str) -> str | None:
    """The words that make the question ask for the one option that does not satisfy it ("NOT",
    "EXCEPT", "false", "is not mentioned", "which is wrong"), or None."""
    found = INVERTED_RE.search(question)
    return " ".join(found.group().split()) if found else None


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
    cand = _tokens(text)
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
    pieces = [(_tokens(piece), "?" in piece) for piece in _QUESTION_PIECE_RE.findall(text) if piece.strip()]
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
    cand = _tokens(text)
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
    cand = _tokens(text)
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else frozenset(stopwords)
    content = [suffix_stem(w) for w in _content_words(text, stop)]
    if len(cand) < min_words or not content:
        return False
    needed = {suffix_stem(_bare(w)) for w in cand if w not in _REFERRING}
    marks, negations = _meaning_marks(cand), _negations(cand)
    for sent in statements(passage):
        bare = [_bare(w) for w in sent]
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
    return tuple((tuple(_tokens(piece)), "?" in piece) for s in split_sentences(passage, line_breaks=True)
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
    c_words, g_words = _tokens(candidate), _tokens(answer)
    padded_c, padded_g = f" {' '.join(c_words)} ", f" {' '.join(g_words)} "
    if len(gold) >= 2 and g_words and padded_g in padded_c:
        return "contains the answer"
    if len(cand) >= 2 and c_words and padded_c in padded_g:
        return "is contained in the answer"
    gold_content = {suffix_stem(w) for w in _content_words(answer, stopwords)} if stopwords else set()
    if len(gold) >= 2 and gold_content and gold_content <= {suffix_stem(w) for w in _content_words(candidate, stopwords)}:
        return "holds every content word of the answer"
    if word_overlap(candidate, answer) > max_overlap:
        return "shares most words with the answer"
    return None


NUMBER_WORDS = frozenset("one two three four five six seven eight nine ten eleven twelve twenty thirty forty "
                         "fifty sixty hundred thousand million first second third".split())


ARTICLES_RE = re.compile(r"\b(?:a|an|the)\b")
SUBJECT_RE = re.compile(r"^(?:i|you|he|she|it|we|they)\s+")


def option_core(text: str) -> str:
    """An option without its articles and leading subject pronoun: what two options share when
    they say the same thing ("at the school" and "at school"; "he doesn't write down a word" and
    "doesn't write down a word"). Quantifiers and negations stay: "I know none of these people"
    and "I know most of these people" differ."""
    return " ".join(SUBJECT_RE.sub("", ARTICLES_RE.sub(" ", " ".join(_tokens(text)))).split())


def same_option(a: str, b: str) -> bool:
    core_a, core_b = option_core(a), option_core(b)
    return core_a == core_b if core_a or core_b else option_key(a) == option_key(b)


def repeats_question(candidate: str, question: str, stopwords: Iterable[str]) -> bool:
    """Whether a new option only repeats the question's words ("it seems that the writer of the
    story works" for "It seems that the writer of the story works _ ."; "Bob" for "_ and Bob are
    in a family."): it answers nothing, so a reader drops it at once. Every content word is the
    question's; a number word counts as new ("Two people." answers "How many people ...?")."""
    stop = set(stopwords) - NUMBER_WORDS  # "Two people." answers "How many people ...?"
    content = [suffix_stem(w) for w in _content_words(candidate, stop)]
    if not content:
        return False
    asked = _stems(question)
    return all(w in asked for w in content)


def word_overlap(a: str, b: str) -> float:
    """Share of the smaller lowercase word set found in the other, up to a plural or tense ending
    ("doctors" is "doctor"); 0 when either has no words."""
    wa, wb = {suffix_stem(w) for w in _tokens(a)}, {suffix_stem(w) for w in _tokens(b)}
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


POSSESSIVE_RE = re.compile(r"['’]s$")


def _bare(word: str) -> str:
    """'tom's' -> 'tom': a possessive is the name's mention."""
    return POSSESSIVE_RE.sub("", word)


def _content_words(text: str, stopwords: Iterable[str]) -> list[str]:
    """Words and numbers that are not stopwords ('40' and "Tom's" count; "don't" does not)."""
    stop = stopwords if isinstance(stopwords, (set, frozenset)) else set(stopwords)
    return [b for b in map(_bare, _tokens(text)) if b.isalnum() and b not in stop]


def suffix_stem(word: str) -> str:
    """A word less one plural or tense ending ("patents", "patented" -> "patent")."""
    for suffix in ("ing", "ed", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            return word[:-len(suffix)]
    return word


def grounded_share(candidate: str, sources: Sequence[str], stopwords: Iterable[str]) -> float:
    """Share of the candidate's content words that occur (up to a plural or tense ending) in the
    sources (the passage and question): RACE's own distractors are written from the passage, so
    one about nothing in it gives itself away. 0 for a candidate without content words."""
    content = _content_words(candidate, stopwords)
    if not content:
        return 0.0
    known = set().union(*map(_stems, sources))
    return sum(suffix_stem(w) in known for w in content) / len(content)


@functools.lru_cache(maxsize=64)
def _stems(text: str) -> frozenset[str]:
    """A source's word stems, kept for the next candidate of the same question."""
    return frozenset(suffix_stem(_bare(w)) for w in _tokens(text))


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
# An answer that names other options ("both A and B", "All of the above"): replacing the
# distractors changes what it says.
OPTION_REFERENCE_RE = re.compile(
    r"\b(?:all|none|both|neither)\b(?:\s+of)?(?:\s+the)?\s+(?:above|[A-D]\b)"
    r"|\b[A-D]\s*(?:,|and|or|&)\s*[A-D]\b|^\s*[A-D]\s*[.)]?\s*$", re.IGNORECASE)


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
