"""Mutating a SQuAD question so that its answer is no longer in the context (Jia and Liang's
AddSent, step 1): nouns and adjectives go to a WordNet antonym; named entities and numbers go to
the nearest GloVe word with the same Penn tag (the closest word at all when none of the nearest
`neighbours` has it). A neighbour that only restates the word (a synonym, spelling variant or
inflection: U.S. -> America, colour -> color) is never taken: the question would keep its
answer, and the added sentence would contradict the context about the very question. For a
common word (not a proper noun) any relation `resources.same_meaning` reports under the word's
POS refuses the neighbour (a hypernym or a near sibling: years -> decades); a proper noun is
refused only as a synonym, spelling variant or inflection, since Jia and Liang change names on
purpose (Chicago -> Boston).

With an `rng`, the GloVe word is drawn among the first `choices` neighbours that pass, so that
one substitution (Super Bowl 50 -> Cup Acc 60) does not repeat in every question of a
paragraph. `skip` names tokens (by their start offset) to leave alone: the caller retries
without the replacements that vanished from the declarative sentence."""

from __future__ import annotations

from advrace.core.provenance import Replacement
from advrace.resources.inflection import match_case

NAMED = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT", "WORK_OF_ART",
                   "LAW", "LANGUAGE", "DATE", "TIME", "PERCENT", "MONEY", "QUANTITY", "ORDINAL",
                   "CARDINAL"})
# WordNet antonyms are base forms: only words in their base form take them
ANTONYM_TAGS = {"NN": "NOUN", "JJ": "ADJ"}


# reasons of `same_meaning` that refuse a proper noun's neighbour; any reason refuses a common word's
NAME_SAME_MEANING = frozenset({"synonym", "spelling variant", "inflection"})


def _restates(word: str, new: str, pos: str, resources) -> bool:
    reason = resources.same_meaning(word, new, pos or None)
    return reason is not None and (pos != "PROPN" or reason in NAME_SAME_MEANING)


def _glove_word(word: str, tag: str, resources, neighbours: int, avoid: set[str], pos: str = "",
                rng=None, choices: int = 3) -> tuple[str, str] | None:
    glove = resources.glove
    lower = word.lower()
    try:
        near = [w for w, _ in glove.nearest(lower, neighbours) if w not in avoid and w.isalnum()]
    except KeyError:
        return None
    if not near:
        return None
    stem = resources.stem(lower)
    near = [w for w in near if resources.stem(w) != stem] or near
    near = [w for w in near if not _restates(word, w, pos, resources)]
    if not near:
        return None
    tags = resources.word_tags([match_case(w, word) for w in near])
    same_tag = [w for w, (_, t) in zip(near, tags) if t == tag]
    if same_tag:
        return (rng.choice(same_tag[:choices]) if rng is not None else same_tag[0]), "glove"
    return near[0], "glove_nearest"


def mutate_question(question: str, resources, *, neighbours: int = 100, rng=None, choices: int = 3,
                    skip: frozenset[int] = frozenset()) -> tuple[str, list[Replacement]]:
    """The mutated question and what changed (an empty list when nothing could change)."""
    doc = resources.parse(question)
    stop = resources.stopwords
    avoid = {t.text.lower() for t in doc}
    edits: list[Replacement] = []
    for tok in doc:
        word = tok.text
        if not any(c.isalnum() for c in word) or word.lower() in stop or tok.idx in skip:
            continue
        new = None
        if tok.ent_type_ in NAMED or tok.tag_ == "CD":
            found = _glove_word(word, tok.tag_, resources, neighbours, avoid, tok.pos_, rng, choices)
            if found:
                new = (match_case(found[0], word), found[1])
        elif tok.tag_ in ANTONYM_TAGS:
            ants = resources.antonyms(word, ANTONYM_TAGS[tok.tag_])
            if ants:
                new = (match_case(ants[0], word), "antonym")
        if new and new[0].lower() != word.lower():
            avoid.add(new[0].lower())
            edits.append(Replacement(tok.idx, tok.idx + len(word), word, new[0], new[1]))
    text = question
    for r in reversed(edits):
        text = text[:r.start] + r.new + text[r.end:]
    return text, edits
