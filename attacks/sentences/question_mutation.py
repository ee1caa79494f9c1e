"""Mutating a SQuAD question so that its answer is no longer in the context (Jia and Liang's
AddSent, step 1): nouns and adjectives go to a WordNet antonym of their dominant sense; named
entities and numbers go to a near GloVe word of the same form, and a multi-word name to a whole
name of its kind (the rules that keep a swap English are in `word_swaps`; a word with no
neighbour of its form stays). A neighbour that only restates the word (a synonym, spelling variant or
inflection: U.S. -> America, colour -> color) is never taken: the question would keep its
answer, and the added sentence would contradict the context about the very question. For a
common word (not a proper noun) any relation `resources.same_meaning` reports under the word's
POS refuses the neighbour (a hypernym or a near sibling: years -> decades); a proper noun is
refused only as a synonym, spelling variant or inflection, since Jia and Liang change names on
purpose (Chicago -> Boston).

With an `rng`, the GloVe word is drawn among the first `choices` neighbours that pass, so that
one substitution (Super Bowl 50 -> Super Bowl 60) does not repeat in every question of a
paragraph. `skip` names tokens (by their start offset) to leave alone: the caller retries
without the replacements that vanished from the declarative sentence."""

from __future__ import annotations

from advrace.core.provenance import Replacement
from advrace.resources.inflection import irregular_forms, match_case
from advrace.resources.wordnet import verb_exceptions

from .word_swaps import (NAME_LABELS, changed_texts, changes_referent, common_word, counted_by_ordinal, hyphen_part,
                         keeps_entity, keeps_form, name_candidates,
                         negated_antonym, one_sentence, sense_antonyms, whole_name)

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


def _glove_word(tok, resources, neighbours: int, avoid: set[str], rng=None, choices: int = 3,
                word_form: str | None = None) -> str | None:
    """A GloVe neighbour of the token that keeps its part of speech and inflection (its Penn tag,
    a verb's own form, an ordinal's form: `word_swaps.keeps_form`), drawn among the first
    `choices` that pass; with `word_form` ("n", "a", "v"), only words WordNet knows under that
    POS: a common word's neighbour, not a name lowercased ("chancellor" -> "schroeder"). None
    when no neighbour keeps the form: a word of another kind would not read."""
    glove, word = resources.glove, tok.text
    lower = word.lower()
    try:
        near = [w for w, _ in glove.nearest(lower, neighbours) if w not in avoid and w.isalnum()
                and (word_form is None or resources.wordnet.morphy(w, word_form))]
    except KeyError:
        return None
    stem = resources.stem(lower)
    near = [w for w in near if resources.stem(w) != stem and not _restates(word, w, tok.pos_, resources)]
    if not near:
        return None
    cased = [match_case(w, word) for w in near]
    irregular = _irregular(resources) if tok.tag_ in VERB_TAGS else None
    same = [w for w, (_, t) in zip(cased, resources.word_tags(cased))
            if keeps_form(tok, w, t, resources, irregular)]
    if tok.ent_type_ in NAME_LABELS:  # a name for a name of its kind, read in the question
        resources.prepare_entities(changed_texts(resources, tok, same), one_sentence(tok.doc))  # one spaCy batch
        same = [w for w in same if keeps_entity(resources, tok, w, tok.ent_type_)]
    elif tok.tag_ in ("NNP", "NNPS") and word[:1].isupper():  # a name the tagger gave no label
        same = [w for w in same if not common_word(resources, w)]
    if not same:
        return None
    return rng.choice(same[:choices]) if rng is not None else same[0]


def _irregular(resources) -> dict:
    """WordNet's irregular verb forms by base, once per process."""
    global _IRREGULAR
    if _IRREGULAR is None:
        _IRREGULAR = irregular_forms(verb_exceptions(resources.wordnet))
    return _IRREGULAR


_IRREGULAR: dict | None = None


# Labels whose whole names a single GloVe word can stand in for (a person's surname, a place);
# an organisation, work or event ("the General Conference on Weights and Measures", "The
# Babylonian Captivity") read on real builds as "Eu", "Guantanamo": without a name of the data
# they stay as they are.
GLOVE_NAME_LABELS = frozenset({"PERSON", "GPE", "LOC"})
# A single-word name of these kinds takes no article: "the United Kingdom" -> "Ireland", not "the
# Ireland"; a river or sea keeps it ("the Danube Delta" -> "the Nile"), and so does a name that
# modifies a noun ("the AFC Championship game").
ARTICLE_FREE = frozenset({"GPE", "PERSON"})


def _name_words(resources, span, avoid: set[str], neighbours: int) -> list[str]:
    """Single-word names of the span's entity label from GloVe, for a multi-word name the data
    offers no whole name for (a person, a place only: GLOVE_NAME_LABELS): neighbours of its last
    word, capitalised, tagged NNP, that WordNet knows only as a name (if at all: "Kingdom",
    "Metropolitan" are common words, "Lutheran" an adjective), none of the name's own words, and
    that spaCy reads in the question as a whole entity of the same label ("Los Angeles" ->
    "Houston", "United Kingdom" -> "Ireland")."""
    label, question = span.root.ent_type_, span.doc.text
    if label not in GLOVE_NAME_LABELS:
        return []
    own = {t.text.lower() for t in span}
    try:
        near = [w for w, _ in resources.glove.nearest(span[-1].text.lower(), neighbours)
                if w.isalpha() and w not in avoid and w not in own]
    except KeyError:
        return []
    cased = [w.capitalize() for w in near]
    texts = [(cand, question[:span.start_char] + cand + question[span.end_char:])
             for cand, (_, tag) in zip(cased, resources.word_tags(cased))
             if tag == "NNP" and len(cand) >= 3 and not common_word(resources, cand, adjectives=True)]
    alone = one_sentence(span.doc)
    resources.prepare_entities([text for _, text in texts], alone)  # one spaCy batch
    return [cand for cand, text in texts
            if any(e.start_char == span.start_char and e.end_char == span.start_char + len(cand)
                   and e.label_ == label for e in resources.entities(text, alone))]


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
                    skip: frozenset[int] = frozenset(), common_words: bool = False, verbs: bool = False,
                    names: dict[str, list[str]] | None = None) -> tuple[str, list[Replacement]]:
    """The mutated question and what changed (an empty list when nothing could change).

    Jia and Liang's high-confidence rules first: antonyms, and GloVe neighbours for names,
    numbers and proper nouns. `common_words` adds their remaining rules for a question none of
    those change: a common noun or adjective goes to a GloVe neighbour of the same tag (kind
    "glove_common"), refused where WordNet relates the two in any way (a synonym, a hypernym,
    a near sibling: years -> decades), and a name GloVe does not know goes to Jia and Liang's
    stand-in ("Dalek", "XKCD": kind "entity_type"). `verbs`, our own last resort where even those
    change nothing, gives a content verb a GloVe neighbour of the same form that WordNet knows as
    a verb and does not relate to it ("discovered" -> "invented"; kind "glove_verb").

    A multi-word name changes as a whole (kind "name"): to a whole name of its entity label from
    `names` (label -> names, e.g. `word_swaps.name_pool` of the passages prepared together),
    else to a single-word name of that label from GloVe, else not at all. Each swap keeps its
    word's form (`word_swaps`). A change that leaves the question about the same thing
    (`word_swaps.changes_referent`: a restating word, an antonym by negating prefix) is never
    made, so a question with only such changes gets none here, and the caller mutates further
    (`common_words`, then `verbs`) or skips it ("question not mutated")."""
    doc = resources.parse(question)
    edits = _edits(doc, resources, neighbours, rng, choices, skip, common_words, verbs, names)
    kept = [r for r in edits if changes_referent(r, resources)]
    text = question
    for r in reversed(kept):
        text = text[:r.start] + r.new + text[r.end:]
    return text, kept


def _edits(doc, resources, neighbours, rng, choices, skip, common_words, verbs, names) -> list[Replacement]:
    stop = resources.stopwords
    question_text = doc.text
    avoid = {t.text.lower() for t in doc}
    edits: list[Replacement] = []
    done: set[int] = set()
    for tok in doc:
        word = tok.text
        if tok.i in done or not any(c.isalnum() for c in word) or word.lower() in stop or tok.idx in skip:
            continue
        if hyphen_part(tok) or counted_by_ordinal(tok):
            continue
        span = whole_name(tok) if word[:1].isupper() else None
        if span is not None:
            done.update(t.i for t in span if not t.like_num)
            if span.start_char in skip:
                continue
            label = span.root.ent_type_
            found = name_candidates(span, label, names, rng, choices, avoid) or \
                _name_words(resources, span, avoid, neighbours)[:choices]
            if found:
                new = rng.choice(found) if rng is not None else found[0]
                avoid.update(w.lower() for w in new.split())
                start, old = span.start_char, span.text
                before = doc[span.start - 1] if span.start else None
                after = doc[span.end] if span.end < len(doc) else None
                if (before is not None and before.text == "the" and " " not in new and label in ARTICLE_FREE
                        and not (after is not None and after.pos_ in ("NOUN", "PROPN")
                                 and not any(c.dep_ == "aux" for c in after.children))):  # "did X sign"
                    start, old = before.idx, question_text[before.idx:span.end_char]  # "the Ireland"
                edits.append(Replacement(start, span.end_char, old, new, "name", pos="PROPN"))
            continue
        new = None
        if tok.ent_type_ in NAMED or tok.tag_ == "CD" or (tok.tag_ in ("NNP", "NNPS") and word[:1].isupper()):
            found = _glove_word(tok, resources, neighbours, avoid, rng, choices)
            if found:
                new = (found, "glove")
            elif (common_words and word[:1].isupper() and tok.tag_ in ENTITY_STAND_INS
                  and word.lower() not in resources.glove and ENTITY_STAND_INS[tok.tag_][word.isupper()].lower() not in avoid):
                # a name GloVe does not know ("NASUWT"): Jia and Liang's stand-in of its kind
                new = (ENTITY_STAND_INS[tok.tag_][word.isupper()], "entity_type")
        elif tok.tag_ in ANTONYM_TAGS and word.lower() not in DO_NOT_ALTER and (
                ants := [a for a in sense_antonyms(resources, word, ANTONYM_TAGS[tok.tag_])
                                                     if not negated_antonym(word, a)]):
            new = (match_case(ants[0], word), "antonym")
        elif common_words and tok.tag_ in COMMON_TAGS and word.lower() not in DO_NOT_ALTER and word.isalpha():
            found = _glove_word(tok, resources, neighbours, avoid, rng, choices,
                                word_form="n" if tok.tag_.startswith("NN") else "a")
            if found:
                new = (found, "glove_common")
        elif verbs and tok.tag_ in VERB_TAGS and tok.lemma_ not in ("be", "have", "do") and word.isalpha():
            found = _glove_word(tok, resources, neighbours, avoid, rng, choices, word_form="v")
            if found:
                new = (found, "glove_verb")
        if new and new[0].lower() != word.lower():
            avoid.add(new[0].lower())
            pos = tok.pos_ if new[1] != "entity_type" else None
            edits.append(Replacement(tok.idx, tok.idx + len(word), word, new[0], new[1], pos=pos))
    return edits
