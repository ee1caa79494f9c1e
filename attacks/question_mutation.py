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
                rng=None, choices: int = 3, word_form: str | None = None) -> tuple[str, str] | None:
    """A GloVe neighbour of the same tag (kind "glove"), else the nearest at all ("glove_nearest");
    with `word_form` ("n", "a"), only words WordNet knows under that POS: a common word's
    neighbour, not a name lowercased ("chancellor" -> "schroeder")."""
    glove = resources.glove
    lower = word.lower()
    try:
        near = [w for w, _ in glove.nearest(lower, neighbours) if w not in avoid and w.isalnum()
                and (word_form is None or resources.wordnet.morphy(w, word_form))]
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


# Jia and Liang's words never altered (their DO_NOT_ALTER): they carry the question's frame
DO_NOT_ALTER = frozenset({"many", "such", "few", "much", "other", "same", "general", "type", "record", "kind",
                          "sort", "part", "form", "terms", "use", "place", "way", "old", "young", "bowl", "united",
                          "one", "likely", "different", "square", "war", "republic", "doctor", "color", "name",
                          "number", "year", "years", "called", "term", "word", "example"})
# Penn tag -> (stand-in, stand-in for an abbreviation), Jia and Liang's alter_entity_type
ENTITY_STAND_INS = {"NNP": ("Dalek", "XKCD"), "NNPS": ("Daleks", "XKCDs")}
COMMON_TAGS = frozenset({"NN", "NNS", "JJ", "JJR", "JJS"})
# a question none of Jia and Liang's rules change ("When was the plastome discovered?"): its verb
VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ"})


def mutate_question(question: str, resources, *, neighbours: int = 100, rng=None, choices: int = 3,
                    skip: frozenset[int] = frozenset(), common_words: bool = False, verbs: bool = False
                    ) -> tuple[str, list[Replacement]]:
    """The mutated question and what changed (an empty list when nothing could change).

    Jia and Liang's high-confidence rules first: antonyms, and GloVe neighbours for names,
    numbers and proper nouns. `common_words` adds their remaining rules for a question none of
    those change: a common noun or adjective goes to a GloVe neighbour of the same tag (kind
    "glove_common"), refused where WordNet relates the two in any way (a synonym, a hypernym,
    a near sibling: years -> decades), and a name GloVe does not know goes to Jia and Liang's
    stand-in ("Dalek", "XKCD": kind "entity_type"). `verbs`, our own last resort where even those
    change nothing, gives a content verb a GloVe neighbour of the same tag that WordNet knows as
    a verb and does not relate to it ("discovered" -> "invented"; kind "glove_verb")."""
    doc = resources.parse(question)
    stop = resources.stopwords
    avoid = {t.text.lower() for t in doc}
    edits: list[Replacement] = []
    for tok in doc:
        word = tok.text
        if not any(c.isalnum() for c in word) or word.lower() in stop or tok.idx in skip:
            continue
        new = None
        if tok.ent_type_ in NAMED or tok.tag_ == "CD" or (tok.tag_ in ("NNP", "NNPS") and word[:1].isupper()):
            found = _glove_word(word, tok.tag_, resources, neighbours, avoid, tok.pos_, rng, choices)
            if found:
                new = (match_case(found[0], word), found[1])
            elif (common_words and word[:1].isupper() and tok.tag_ in ENTITY_STAND_INS
                  and word.lower() not in resources.glove and ENTITY_STAND_INS[tok.tag_][word.isupper()].lower() not in avoid):
                # a name GloVe does not know ("NASUWT"): Jia and Liang's stand-in of its kind
                new = (ENTITY_STAND_INS[tok.tag_][word.isupper()], "entity_type")
        elif tok.tag_ in ANTONYM_TAGS and (ants := resources.antonyms(word, ANTONYM_TAGS[tok.tag_])):
            new = (match_case(ants[0], word), "antonym")
        elif common_words and tok.tag_ in COMMON_TAGS and word.lower() not in DO_NOT_ALTER and word.isalpha():
            found = _glove_word(word, tok.tag_, resources, neighbours, avoid, tok.pos_, rng, choices,
                                word_form="n" if tok.tag_.startswith("NN") else "a")
            if found and found[1] == "glove":
                new = (match_case(found[0], word), "glove_common")
        elif verbs and tok.tag_ in VERB_TAGS and tok.lemma_ not in ("be", "have", "do") and word.isalpha():
            found = _glove_word(word, tok.tag_, resources, neighbours, avoid, tok.pos_, rng, choices, word_form="v")
            if found and found[1] == "glove":
                new = (match_case(found[0], word), "glove_verb")
        if new and new[0].lower() != word.lower():
            avoid.add(new[0].lower())
            edits.append(Replacement(tok.idx, tok.idx + len(word), word, new[0], new[1]))
    text = question
    for r in reversed(edits):
        text = text[:r.start] + r.new + text[r.end:]
    return text, edits
