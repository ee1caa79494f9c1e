"""Whether a generated sentence reads as a sentence for a person: a final stop, no doubled word, no
wh-word left asking, no unknown word form, not the question, not holding the gold answer. Jia and
Liang's generated sentences and AdvRACE's statements are both held to it."""

from __future__ import annotations

import re

from advrace.core.text import WORD_RE
from advrace.metrics import normalize_answer

WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
# a wh-word after these asks ("the what districts", "a what of"), it opens no clause
_BEFORE_ASKING_TAGS = frozenset({"DT", "PDT", "PRP$", "POS", "JJ", "JJR", "JJS"})


def syntax(resources, text: str):
    """`text` parsed for its tags, lemmas and dependencies, without the entities where the
    resources can leave them out (`Resources.parse_syntax`): none of the statement rules and
    readability checks reads an entity."""
    parse = getattr(resources, "parse_syntax", None)
    return parse(text) if parse is not None else resources.parse(text)


def _known_form(lower: str, wordnet) -> bool:
    return any(wordnet.morphy(lower, pos) for pos in ("n", "v", "a", "r"))


def _first_is_name(sentence: str, resources) -> bool:
    doc = syntax(resources, sentence)
    first = next((t for t in doc if t.is_alpha), None)
    return first is not None and (first.tag_ in ("NNP", "NNPS")
                                  or resources.word_pos(first.text) == "PROPN")


def unknown_word_forms(sentence: str, known_words, resources) -> list[str]:
    """Words of the sentence that are no English word form: in WordNet under no POS (through
    its inflection rules), not a stopword, not in `known_words` (lowercased words of the context
    and question), not a number, and not a capitalised name (the first word counts as one when
    the tagger takes it for a proper noun, in the sentence or alone)."""
    wordnet, stop = resources.wordnet, resources.stopwords
    out = []
    for m in WORD_RE.finditer(sentence):
        if re.search(r"n['’]t$", m.group(), re.I):  # shouldn't, can't, won't
            continue
        for word in re.split(r"['’]", m.group())[:1]:
            lower = word.lower()
            if (not word.isalpha() or len(word) < 2 or lower in stop or lower in known_words
                    or word.isupper()):
                continue
            if word[0].isupper() and (m.start() > 0 or _first_is_name(sentence, resources)):
                continue
            if not _known_form(lower, wordnet):
                out.append(word)
    return out


_QUESTION_ORDER_TAGS = frozenset({"VBZ", "VBD", "VBP", "MD"})


def leftover_wh_words(sentence: str, resources) -> list[str]:
    """Wh-words left asking in a statement: at its end ("oppose what."), after a determiner or
    an adjective ("the what districts"), or used as a determiner ("ignore which facts", "were
    how young"). A wh-word opening a clause stays: "the city where ...", "claimed what is now
    Tampa", "explained how the museum ...", "in which they are found". One opening the sentence
    or a clause before a finite verb ("Since 2006, what is ...") still asks."""
    doc = syntax(resources, sentence)
    words = [t for t in doc if not t.is_punct]
    out = []
    for k, t in enumerate(words):
        if t.lower_ not in WH_WORDS or (t.i > 0 and t.text[:1].isupper() and doc[t.i - 1].text[:1].isupper()):
            continue  # not asking: a name's word ("Doctor Who")
        opens = t.i == 0 or doc[t.i - 1].text in (",", ";", ":")
        if (opens and k + 1 < len(words) and words[k + 1].tag_ in _QUESTION_ORDER_TAGS
                and (t.i == 0 or t.lower_ not in ("which", "who", "whom", "whose"))):  # ", which gave": relative
            out.append(t.text)  # "Since 2006, what is the gender of ...": still a question
            continue
        before = words[k - 1].tag_ if k else ""
        after = words[k + 1].tag_ if k + 1 < len(words) else ""
        asks_for = ("NN", "JJ") if t.lower_ in ("what", "which", "whose") else \
            ("JJ", "RB") if t.lower_ == "how" else ()
        relative = before in ("IN", "TO") and t.lower_ in ("which", "whom", "whose")  # "to which individuals"
        # an embedded question after a preposition or a verb: "the estimate of how many physicians give"
        embedded = t.lower_ == "how" and (before == "IN" or before.startswith("VB")) and any(
            u.tag_.startswith("VB") or u.tag_ == "MD" for u in words[k + 2:])
        if not after or before in _BEFORE_ASKING_TAGS or (
                not relative and not embedded and after.startswith(asks_for or ("-",))):
            out.append(t.text)
    return out


def contains_answer(sentence: str, gold: str) -> bool:
    """Jia and Liang's test: the normalised answer as whole words of the normalised sentence."""
    g = normalize_answer(gold)
    return bool(g) and f" {g} " in f" {normalize_answer(sentence)} "


def same_as_question(sentence: str, question: str) -> bool:
    """Whether a sentence is the question itself, after SQuAD's normalisation (case, punctuation,
    articles): a question restated states no fake answer."""
    return normalize_answer(sentence) == normalize_answer(question)


_DOUBLED_WORD = re.compile(r"\b([^\W\d_]+)\s+\1\b", re.I)
_DOUBLED_ARTICLE = re.compile(r"\b(the|a|an)\s+(the|a|an|this|these|those|his|her|its|their|my|our|your)\b",
                              re.I)


def doubled_words(sentence: str) -> list[str]:
    """A word written twice in a row ("is is") or an article before another determiner ("the
    a tractor"): the marks of a rule that put the answer where a word of the question stayed."""
    return [m.group() for m in _DOUBLED_WORD.finditer(sentence)] + \
        [m.group() for m in _DOUBLED_ARTICLE.finditer(sentence)]


def readability_problem(sentence: str, question: str, golds, resources,
                        context: str = "") -> str | None:
    """Why a generated sentence is unfit for a human reader, or None. Words of the question and
    of `context` count as known, so names and rare words they contain pass."""
    if not sentence or sentence[-1] not in ".!?":
        return "no final punctuation"
    if set(doubled_words(sentence)) - set(doubled_words(question)):  # not the question's own slip ("the the")
        return "doubled word"
    if re.search(r"(^|\s)['’]s\b", sentence):  # "Hollow 's career": the possessor went with the wh-phrase
        return "detached possessive"
    if any(contains_answer(sentence, g) for g in golds):
        return "contains a gold answer"
    if same_as_question(sentence, question):
        return "same as the question"
    if not any(t.pos_ in ("VERB", "AUX") for t in syntax(resources, sentence)):
        return "no verb"
    if leftover_wh_words(sentence, resources):
        return "wh-word left"
    known = {part.lower() for w in WORD_RE.findall(f"{question} {context}")
             for part in re.split(r"['’]", w)}
    if unknown_word_forms(sentence, known, resources):
        return "unknown word form"
    return None
