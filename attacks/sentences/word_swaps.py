"""Word swaps that keep a question English and change what it asks about, shared by SQuAD's
question mutation (question_mutation) and RACE's AddSent (question_swaps).

A swap is refused, rather than written, where it would break the sentence or leave its
referent as it was:
- a replacement must keep the word's part of speech and inflection (plural stays plural, VBD
  stays VBD), checked on the candidate at run time (`keeps_form`);
- a capitalised word inside a multi-word name is never swapped alone ("Habsburg Empire" ->
  "Habsburg Imperial", "Los Angeles" -> "San Houston"): the whole name goes for a whole name of
  the same spaCy entity label, or stays (`whole_name`, `name_candidates`);
- a noun an ordinal counts ("the 17th century") keeps its construction: only the ordinal moves,
  and to an ordinal of its own form ("14th", not "14th tradition" or "14th 17th");
- a part of a hyphenated word ("half-sister") is left alone, so no "second-sister" is made;
- a word the lexicon does not know (a scanning error: "rrmPrs") is never swapped;
- an antonym is taken only from the word's dominant sense (`sense_antonyms`), used as it stands
  (with or without an object) and read in the sense WordNet pairs it on: "find" in the sense of
  learn has no antonym "lose", "stopped the writer" no "started", "know" no "ignore";
- a word of a fixed phrase or of a compound WordNet lists whole stays (`in_fixed_phrase`: "take
  place", "railway station"), and RACE's neighbours must be of the word's kind (`same_field`:
  "lies" takes no "reaches") and a verb's used as the verb stands (`frame_fits`);
- a change whose new word restates the old one (`changes_referent`: a WordNet synonym, hypernym,
  hyponym or near sibling, `resources.same_meaning`; an antonym made by a negating prefix,
  original -> unoriginal) does not count as a change of the question.
"""

from __future__ import annotations

import itertools
import re

from advrace.resources.inflection import inflect_verb
from advrace.resources.wordnet import UPOS_TO_WORDNET

NAME_LABELS = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT",
                         "WORK_OF_ART", "LAW", "LANGUAGE"})
# An antonym made by one of these prefixes negates the same thing (original -> unoriginal): the
# question stays about the same entity.
NEGATING_PREFIXES = ("un", "non", "in", "im", "il", "ir", "dis")
ORDINAL_WORDS = ("first", "second", "third", "fourth", "fifth", "sixth", "seventh", "eighth", "ninth",
                 "tenth", "eleventh", "twelfth", "thirteenth", "fourteenth", "fifteenth", "sixteenth",
                 "seventeenth", "eighteenth", "nineteenth", "twentieth")
DIGIT_ORDINAL_RE = re.compile(r"(\d+)(st|nd|rd|th)", re.IGNORECASE)
# Senses WordNet lists first are the most frequent (SemCor counts): an antonym counts only on one
# of the first DOMINANT_SENSES senses, and only where that sense is at least this share as
# frequent as the first.
DOMINANT_SENSES = 2
DOMINANT_SHARE = 0.5
# an antonym paired on an uncounted sense of a word whose other senses are counted this often is
# read in those other senses (see `_read_in_sense`)
RARE_SENSE_COUNT = 5
# reasons of `same_meaning` that make a proper noun's replacement the same name (America -> USA)
NAME_RESTATES = frozenset({"synonym", "spelling variant", "inflection"})
VERB_TAGS = frozenset({"VB", "VBD", "VBG", "VBN", "VBP", "VBZ"})
# a title before a name is no part of it ("Mr Green" -> "Mr Brown")
HONORIFICS = frozenset({"mr", "mrs", "ms", "miss", "dr", "sir", "madam", "prof", "mister"})
TITLES = HONORIFICS | {"uncle", "aunt", "grandpa", "grandma"}
# places are one kind whichever label spaCy gives them ("America" GPE -> "Europe" LOC)
PLACE_LABELS = frozenset({"GPE", "LOC", "FAC"})
# verbs whose bare object makes a fixed phrase with them ("take place", "pay attention",
# "have fun", "make friends"): the noun carries the meaning and a neighbour in GloVe does not fit
LIGHT_VERBS = frozenset({"take", "make", "have", "do", "give", "pay", "catch"})
FIELD_SENSES = 3  # see same_field
_STRIP_DEPS = frozenset({"det", "case", "punct"})


def ordinal_suffix(n: int) -> str:
    if n % 100 in (11, 12, 13):
        return "th"
    return {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")


def ordinal_form(word: str) -> str | None:
    """"digits" for 17th (with its right suffix), "word" for second, else None."""
    found = DIGIT_ORDINAL_RE.fullmatch(word)
    if found:
        return "digits" if found.group(2).lower() == ordinal_suffix(int(found.group(1))) else None
    return "word" if word.lower() in ORDINAL_WORDS else None


def same_ordinal_form(old: str, new: str) -> bool:
    """An ordinal goes only to an ordinal of its form (17th -> 14th, second -> third)."""
    form = ordinal_form(old)
    return form is None or ordinal_form(new) == form


def counted_by_ordinal(tok) -> bool:
    """A noun an ordinal modifies ("the 17th century", "the second half"): it keeps its word, so
    the construction stays ("in the 14th century", not "in the 14th tradition")."""
    return any(ordinal_form(c.text) and c.i < tok.i for c in tok.children) or \
        (tok.i > 0 and ordinal_form(tok.doc[tok.i - 1].text) is not None and tok.pos_ in ("NOUN", "PROPN"))


def hyphen_part(tok) -> bool:
    """Part of a hyphenated word ("half" or "sister" of "half-sister"), or a hyphenated token."""
    doc = tok.doc
    return "-" in tok.text or \
        (tok.i > 0 and doc[tok.i - 1].text in ("-", "–") and not doc[tok.i - 1].whitespace_) or \
        (tok.i + 1 < len(doc) and doc[tok.i + 1].text in ("-", "–") and not tok.whitespace_)


def in_fixed_phrase(tok, wordnet) -> bool:
    """A word of a fixed phrase, which a swap would break ("take place" -> "take way", "shop on
    line" -> "on point", "railway station" -> "junction radio"): with the verb or preposition that
    governs it, or the noun it compounds with, the word makes a WordNet multi-word lemma
    ("take_place", "on_line" as "online", "railway_station"), or it is
    the bare object (no determiner or modifier) of a light verb, whose meaning the noun carries."""
    lemma, head = tok.lemma_.lower(), tok.head
    pairs = []
    if head is not tok and head.i < tok.i and (head.pos_ == "ADP" or head.pos_ == "VERB" and head.lemma_ != "be"):
        pairs = [(head.lemma_.lower(), lemma), (head.lower_, tok.lower_)]
    # a compound noun WordNet lists whole ("railway station", "pocket money"): neither word alone
    if tok.dep_ == "compound" and head.pos_ == "NOUN" and head.i == tok.i + 1:
        pairs.append((tok.lower_, head.lemma_.lower()))
    pairs += [(c.lower_, lemma) for c in tok.children
              if c.dep_ == "compound" and c.i == tok.i - 1 and c.pos_ == "NOUN"]
    if any(listed_whole(wordnet, a, b) for a, b in pairs):
        return True
    bare = not any(c.dep_ in ("det", "poss", "amod", "nummod", "compound") for c in tok.children)
    return bool(tok.dep_ == "dobj" and bare and head.lemma_.lower() in LIGHT_VERBS and tok.pos_ == "NOUN")


def listed_whole(wordnet, first: str, second: str) -> bool:
    """Whether WordNet lists the two words as one lemma: "take_place", "railway_station", "common
    cold", or written as one word ("on line" as "online") or hyphenated."""
    if not (first.isalpha() and second.isalpha()):
        return False
    return any(wordnet.synsets(form) for form in (f"{first}_{second}", f"{first}{second}", f"{first}-{second}"))


def same_field(wordnet, word: str, new: str, pos: str = "n") -> bool:
    """Whether a common noun's replacement names a thing of the word's kind: the lexicographer
    file of one of the word's first two noun senses (noun.person, noun.communication, ...; a top
    word such as "person" matches any) is one of the first FIELD_SENSES senses' of the
    replacement, and the replacement is no name WordNet knows only as one ("harrison"). GloVe
    ranks neighbours of the surface form, senses mixed: "lies" (falsehoods) has "reaches" and
    "stretches" (of land) beside it, and "students" has "schools". A replacement WordNet has in
    no sense of the kind ("drank" for "drink") fails; a word it has none for itself passes. A verb
    (pos "v") is held to its field likewise (verb.motion, ...)."""
    old_senses = wordnet.synsets(word.lower(), pos=pos)
    new_senses = wordnet.synsets(new.lower(), pos=pos)
    if not old_senses or old_senses[0].instance_hypernyms():
        return True  # a name first ("Fleming"): a name for a name is the name rules' business
    if not new_senses:
        return False  # "drink" -> "drank", "rain" -> "torrential": no word of the kind at all
    if all(ss.instance_hypernyms() for ss in new_senses):
        return False  # "porter" -> "harrison": a name, lowercased, for a common noun
    fields = {ss.lexname() for ss in old_senses[:2]}
    return "noun.Tops" in fields or bool(fields & {ss.lexname() for ss in new_senses[:FIELD_SENSES]})


def whole_name(tok):
    """The multi-word name the token is part of (a spaCy entity of a name label with two or more
    capitalised words, its article and possessive left out; else a run of two or more
    capitalised proper nouns the tagger gave no such entity: "AFC Championship Game"), or None."""
    ent = next((e for e in tok.doc.ents if e.start <= tok.i < e.end), None)
    if ent is None or ent.label_ not in NAME_LABELS:
        return _proper_run(tok)
    start, end = ent.start, ent.end
    doc = tok.doc
    while start < end and (doc[start].dep_ in _STRIP_DEPS or doc[start].tag_ == "POS" or not doc[start].text[:1].isupper()):
        start += 1
    while end > start and (doc[end - 1].tag_ == "POS" or doc[end - 1].is_punct):
        end -= 1
    if not start <= tok.i < end or sum(t.text[:1].isupper() for t in doc[start:end]) < 2:
        return None
    return doc[start:end]


def common_word(resources, word: str, adjectives: bool = False) -> bool:
    """WordNet files the word under a lowercase lemma of some POS (a common word, not a name:
    "senate", "bush"), or with `adjectives`, as an adjective at all ("Lutheran",
    "Mediterranean": a kind, not a whole name)."""
    lower = word.lower()
    return any(lem.name() == lem.name().lower() or (adjectives and ss.pos() in ("a", "s"))
               for ss in resources.wordnet.synsets(lower) for lem in ss.lemmas()
               if lem.name().lower() == lower)


def changed_text(tok, new: str) -> str:
    """The token's sentence with `new` in its place."""
    text = tok.doc.text
    return text[:tok.idx] + new + text[tok.idx + len(tok.text):]


def one_sentence(doc) -> bool:
    """Whether the parser reads the (fully parsed) question as one sentence: the entities of a
    question made from it by a word swap may then be found by the recogniser alone
    (`resources.entities`), which differs from the full parse only across the parser's
    sentence starts."""
    return not any(t.is_sent_start for t in doc[1:])


def changed_texts(resources, tok, words) -> list[str]:
    """The texts `keeps_entity` reads the entities of for `words` (a common word is refused
    unread), to analyse them in one batch ahead (`resources.prepare_entities`)."""
    return [changed_text(tok, w) for w in words if not common_word(resources, w)]


def entity_keepers(resources, tok, pairs, label: str, want: int) -> list[str]:
    """The first `want` (word, cased word) pairs, taken lazily in order, whose cased word
    `keeps_entity`: the same words the one-by-one loop keeps, with the changed questions that
    loop would parse (never one more) parsed a round at a time, in one batch."""
    pairs, out = iter(pairs), []
    while len(out) < want:
        batch = list(itertools.islice(pairs, want - len(out)))
        if not batch:
            break
        resources.prepare_entities(changed_texts(resources, tok, [cased for _, cased in batch]), one_sentence(tok.doc))
        out += [word for word, cased in batch if keeps_entity(resources, tok, cased, label)]
    return out


def keeps_entity(resources, tok, new: str, label: str) -> bool:
    """Whether `new` in place of a name word keeps a name of the same kind: no common word, even
    for a name that is one too ("Turing machine" -> "Reasoning machine"; "Bill" -> "Senate",
    "Bush"), and spaCy reads
    the changed question with `new` inside an entity of `label` ("in Polish" -> "in Hungarian",
    not "in Poland"; "Bill Gates" -> "Bill Powell", not "Senate Gates"). Only the entities are
    read (`resources.entities`: the recogniser alone where the question is one sentence)."""
    if common_word(resources, new):
        return False
    changed = changed_text(tok, new)
    kinds = PLACE_LABELS if label in PLACE_LABELS else {label}
    return any(e.label_ in kinds and e.start_char <= tok.idx and tok.idx + len(new) <= e.end_char
               for e in resources.entities(changed, one_sentence(tok.doc)))


def _proper_run(tok):
    doc = tok.doc

    def proper(t) -> bool:
        return (t.tag_ in ("NNP", "NNPS") and t.text[:1].isupper() and t.ent_type_ not in NAME_LABELS
                and t.text.lower().rstrip(".") not in TITLES)
    if not proper(tok):
        return None
    start, end = tok.i, tok.i + 1
    while start > 0 and proper(doc[start - 1]):
        start -= 1
    while end < len(doc) and proper(doc[end]):
        end += 1
    return doc[start:end] if end - start >= 2 else None


def name_candidates(span, label: str, pool, rng=None, choices: int = 3, avoid=frozenset()) -> list[str]:
    """Whole names of the label from `pool` (label -> names, in a fixed order) for a whole name:
    none that shares a capitalised word with it (it may be the same entity: "Panthers" ->
    "Carolina Panthers") or that is in `avoid`; up to `choices`, drawn with `rng` when given."""
    words = {w.lower() for w in span.text.split() if w[:1].isupper()}
    names = [n for n in (pool or {}).get(label, ()) if n.lower() not in avoid
             and not words & {w.lower() for w in n.split()} and n != span.text]
    if rng is not None and len(names) > choices:
        return rng.sample(names, choices)
    return names[:choices]


def name_pool(docs) -> dict[str, list[str]]:
    """The whole names in parsed texts by entity label, first-seen order (deterministic)."""
    pool: dict[str, dict[str, None]] = {}
    for doc in docs:
        for ent in doc.ents:
            if ent.label_ not in NAME_LABELS:
                continue
            span = whole_name(ent[-1]) or (ent if len(ent) == 1 and ent.text[:1].isupper() else None)
            if span is not None and span.text.replace(" ", "").replace(".", "").isalpha():
                pool.setdefault(ent.label_, {})[span.text] = None
    return {label: list(names) for label, names in pool.items()}


def known(resources, word: str) -> bool:
    """A word of the language, or a name GloVe knows: a scanning error ("rrmPrs", "e") is neither."""
    lower = word.lower()
    if len(lower) < 2 or not lower.isalpha():
        return bool(re.fullmatch(r"[\d.,:/]*\d[\d.,:/]*", lower)) or (lower.isalpha() and lower in ("a", "i"))
    if resources.known_word(lower):
        return True
    return word[:1].isupper() and word[1:].islower() and lower in resources.glove


def keeps_form(tok, new: str, new_tag: str, resources, irregular=None) -> bool:
    """Whether `new` (tagged `new_tag` on its own) has the token's part of speech and inflection:
    the same Penn tag for nouns, adjectives, adverbs and names, a verb in the token's own form
    (its base inflected for the tag) for verbs, an ordinal of the same form for an ordinal."""
    tag = tok.tag_
    if ordinal_form(tok.text) or ordinal_form(new):  # an ordinal for an ordinal of its form only
        return ordinal_form(tok.text) == ordinal_form(new)
    if tag in VERB_TAGS:
        lower = new.lower()
        bases = resources.wordnet._morphy(lower, "v") if hasattr(resources.wordnet, "_morphy") \
            else [resources.wordnet.morphy(lower, "v")]
        forms = {inflect_verb(b, tag, irregular or {}, resources.glove) for b in bases if b}
        return lower in forms
    if tag == "CD":
        return new_tag == "CD"
    return new_tag == tag


def sense_antonyms(resources, lemma: str, pos: str, transitive: bool | None = None) -> list[str]:
    """`resources.antonyms` of the lemma (a universal POS) that WordNet gives on its dominant
    senses only (the first DOMINANT_SENSES, each at least DOMINANT_SHARE as frequent as the
    first): "find" (come upon, discover) has its antonym "lose" only on its third sense, so
    none; "like" -> "dislike" is on its second, as frequent as the first. With `transitive`
    (whether the verb has a direct object where it stands), only senses used that way count.
    Antonyms read in another sense than the pairing's are left out (`_read_in_sense`)."""
    found = resources.antonyms(lemma, pos)
    if not found or pos not in UPOS_TO_WORDNET:
        return []
    senses = resources.wordnet.synsets(lemma.lower(), pos=UPOS_TO_WORDNET[pos])
    transitive = transitive if pos == "VERB" else None
    if not senses:
        return []

    def count(ss) -> int:
        return sum(lem.count() for lem in ss.lemmas() if lem.name().lower() == lemma.lower())

    top, dominant = count(senses[0]), set()
    for i, ss in enumerate(senses[:DOMINANT_SENSES]):
        if i and (top == 0 or count(ss) < DOMINANT_SHARE * top):
            continue
        dominant.update(ant.name().lower() for lem in ss.lemmas() if lem.name().lower() == lemma.lower()
                        and (transitive is None or _takes_object(lem, transitive))
                        for ant in lem.antonyms() if _read_in_sense(resources, ant))
    return [a for a in found if a.lower() in dominant]


def _takes_object(lem, transitive: bool) -> bool:
    """Whether a verb sense is used with (`transitive`) or without a direct object, by its
    WordNet frames ("Somebody stop something", "Something stop"): "stopped the writer" is not
    stop's first sense (come to a halt), whose antonym "start" would read "started the writer";
    "Where did the fire begin?" is begin's first sense, which has both."""
    name = lem.name().replace("_", " ")
    frames = lem.frame_strings()
    if transitive:
        return any(f"{name} some" in frame for frame in frames)
    return _without_object(frames, name)


def _without_object(frames, name: str) -> bool:
    """Whether WordNet frames of a verb include a use with no object ("Somebody die", "Somebody
    walk PP", "Something is beginning PP")."""
    return any(f.endswith((f" {name}", f" {name} PP")) or f"{name}ing PP" in f for f in frames)


def frame_fits(wordnet, tok, new: str) -> bool:
    """Whether a verb's replacement is used as the verb stands, by the WordNet frames of its
    first two senses: with a direct object, a clause ("noticed something was wrong"), an
    infinitive, an adjective ("feel better"), or none ("died", "walked"). GloVe's neighbours of
    a verb mix its uses: "died" -> "killed" ("The Prime Minister killed because ..."), "walked"
    -> "pulled", "noticed" -> "looked"."""
    deps = {c.dep_ for c in tok.children}
    base = wordnet.morphy(new.lower(), "v") or new.lower()
    if "dobj" in deps:
        wants = f"{base} some"  # "participate in something" takes no direct object
    elif "ccomp" in deps:
        wants = "CLAUSE"
    elif "xcomp" in deps and any(c.dep_ == "xcomp" and c.tag_ == "VB" for c in tok.children):
        wants = "INFINITIVE"
    elif "acomp" in deps:
        wants = f"{base} Adjective"
    else:
        wants = ""
    frames = [f for ss in wordnet.synsets(base, pos="v")[:2] for lem in ss.lemmas()
              if lem.name() == base for f in lem.frame_strings()]
    if not frames:
        return False
    if wants:
        return any(wants in f for f in frames)
    return _without_object(frames, base)


def _read_in_sense(resources, ant) -> bool:
    """Whether a reader takes the antonym in the sense WordNet pairs it on: "know" -> "ignore" is
    paired on ignore's fifth sense (be ignorant of), never counted in SemCor, while its first
    (disregard) is; "we ignore that ..." reads as the wrong word. A sense counted at least once,
    or a word none of whose senses is counted often (RARE_SENSE_COUNT), passes."""
    if ant.count():
        return True
    senses = resources.wordnet.synsets(ant.name(), pos=ant.synset().pos())
    top = max((sum(lem.count() for lem in ss.lemmas() if lem.name() == ant.name()) for ss in senses), default=0)
    return top < RARE_SENSE_COUNT


def negated_antonym(word: str, new: str) -> bool:
    """The antonym is the word with a negating prefix, or the word is the antonym with one
    (original -> unoriginal, unusual -> usual): it negates the same thing."""
    old, new = word.lower().replace("-", ""), new.lower().replace("-", "")
    return any(new == p + old or old == p + new for p in NEGATING_PREFIXES)


def changes_referent(rep, resources) -> bool:
    """Whether a replacement (a provenance `Replacement`) changes what the question is about:
    a number, a negation or a stand-in always does; an antonym unless it only negates the word
    (original -> unoriginal); a name unless it is the same name (a WordNet synonym or spelling:
    America -> USA); any other word unless `resources.same_meaning` relates the two (a synonym,
    hypernym, hyponym or near sibling: flaw -> defect, city -> town)."""
    if rep.kind in ("number", "negation", "entity_type"):
        return True
    if rep.kind == "antonym":
        return not negated_antonym(rep.old, rep.new)
    if rep.kind == "name":
        return True
    pos = rep.pos if rep.pos in ("NOUN", "VERB", "ADJ", "ADV", "PROPN") else None
    reason = resources.same_meaning(rep.old, rep.new, pos)
    if pos == "PROPN" or (pos is None and rep.old[:1].isupper()):
        return reason not in NAME_RESTATES
    return reason is None
