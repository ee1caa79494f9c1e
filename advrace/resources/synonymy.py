"""Whether a word put in place of another keeps the meaning: a synonym, a spelling variant or
an inflection of it, or a near sense (one hypernym link above or below, a near-synonym sibling).

An attack that replaces a question's words so that an inserted sentence answers a *different*
question must not take a replacement that leaves the question as it was: GloVe's nearest
neighbours of common nouns are often synonyms (purpose -> intent, story -> tale) or spellings
of the same word (behavior -> behaviour), and the sentence then answers the very question
with a distractor.
"""

from __future__ import annotations

import re

from .wordnet import UPOS_TO_WORDNET

WORDNET_POS = ("n", "v", "a", "r")

# British -> American endings, applied to both words before comparing them; each pattern's
# ending may carry an inflection (colours, centred, programmes, organised, travelling)
_SPELLING_RULES = (
    (re.compile(r"^(.*[aeiou].*[^aeiou]|.*[aeiou].*[aeiou])"
                r"our(s|ed|ing|ite|ites|able|ful|less|hood|hoods|ly)?$"),
     r"\1or\2"),  # colour, behaviour, favourite; not four, hour, your
    (re.compile(r"([^aeiou])re(s)?$"), r"\1er\2"),  # centre, theatres, metre
    (re.compile(r"([^aeiou])red$"), r"\1ered"),  # centred
    (re.compile(r"mme(s|d)?$"), r"m\1"),  # programme
    (re.compile(r"ogue(s)?$"), r"og\1"),  # catalogue, dialogue
    (re.compile(r"([^aeiou])is(e|es|ed|ing|ation|ations|er|ers)$"), r"\1iz\2"),  # organise
    (re.compile(r"ys(e|es|ed|ing)$"), r"yz\1"),  # analyse
    # travelled, dialled, counsellor; one vowel before is no variant (filled, called)
    (re.compile(r"([aeiou][^aeiou]*[aeiou])ll(ed|ing|er|ers|or|ors)$"), r"\1l\2"),
    (re.compile(r"([^aeiou])ence(s)?$"), r"\1ense\2"),  # defence, licence
    (re.compile(r"(?<=.)ae"), "e"),  # anaemia, encyclopaedia
    (re.compile(r"^grey"), "gray"),
)


def _plain(word: str) -> str:
    return word.lower().replace("-", "").replace("_", "").replace(" ", "")


def american_spelling(word: str) -> str:
    """The word lowercased, without hyphens, with British endings turned American."""
    out = _plain(word)
    for pattern, repl in _SPELLING_RULES:
        out = pattern.sub(repl, out)
    return out


def _wordnet_pos(pos: str | None) -> tuple[str, ...]:
    """WordNet POS letters for a universal POS or a WordNet letter; all four for None or a POS
    WordNet lacks (PROPN, NUM: names are in WordNet as nouns and adjectives)."""
    if pos in WORDNET_POS:
        return (pos,)
    if pos in UPOS_TO_WORDNET:
        return (UPOS_TO_WORDNET[pos],)
    return WORDNET_POS


def lemmas(wordnet, word: str, pos: str | None = None) -> set[str]:
    """Every WordNet base form of the word under the POS (any POS for None), lowercased."""
    lower = word.lower().replace(" ", "_")
    out: set[str] = set()
    for p in _wordnet_pos(pos):
        analyses = getattr(wordnet, "_morphy", None)
        if analyses is not None:
            out.update(analyses(lower, p, check_exceptions=True))
        else:
            base = wordnet.morphy(lower, p)
            if base:
                out.add(base)
    return {f.lower() for f in out}


def _synsets(wordnet, forms: set[str], pos: str | None) -> set:
    return {ss for f in forms for p in _wordnet_pos(pos) for ss in wordnet.synsets(f, pos=p)}


def _first_senses(wordnet, forms: set[str], pos: str | None) -> set:
    """Each form's most frequent sense per POS."""
    out = set()
    for f in forms:
        for p in _wordnet_pos(pos):
            senses = wordnet.synsets(f, pos=p)
            if senses:
                out.add(senses[0])
    return out


def _neighbours(synset) -> list:
    return (synset.hypernyms() + synset.instance_hypernyms() + synset.hyponyms()
            + synset.instance_hyponyms())


def _parents(synset) -> list:
    return synset.hypernyms() + synset.instance_hypernyms()


# How many senses of a word count as its common ones. WordNet lists a word's senses most
# frequent first (by their tagged occurrences in SemCor), and a RACE question uses a word in one
# of its first few: 3 reaches the sense a GloVe neighbour is near in every pair of
# `tests/test_synonymy.py` (debate's first sense is near discussion's second, theory's second
# near concept's first), while a fourth or later sense joins nearly any two nouns (people ->
# families through family's fourth sense).
COMMON_SENSES = 3
# Person nouns are judged on their first senses only (the "synonym" rule): in a passage the man
# and the boy are two characters, though WordNet's second sense of boy is "a grown man"
# (informal), and the secondary senses of person nouns are mostly such informal uses.
PERSON_LEXNAME = "noun.person"
# Siblings are judged only among abstract nouns of ideas, texts, aims and money. Co-hyponyms of
# concrete kinds form contrast sets that a question tells apart even when one's definition names
# the other: a month is "one of the twelve divisions of the calendar year", a mule "the offspring
# of a male donkey and a female horse", a town "smaller than a city"; measured on the GloVe
# neighbours AddSent weighs for 3,000 RACE train questions, every sibling outside these files
# was a change of meaning (year -> month, goose -> duck, leg -> thigh, breakfast -> brunch).
SIBLING_LEXNAMES = frozenset({"noun.cognition", "noun.communication", "noun.motive",
                              "noun.possession"})
# Plants and animals are filed many links deep (tree -> woody plant -> vascular plant -> plant;
# bird -> vertebrate -> chordate -> animal): their hypernyms are looked for this far up.
TAXONOMY_LEXNAMES = frozenset({"noun.plant", "noun.animal"})
TAXONOMY_DEPTH = 3
# Definitions that name a word only to contrast it ("an adult person who is male (as opposed
# to a woman)") do not make the words near in meaning.
_CONTRAST_RE = re.compile(r"\(?\s*(?:as )?opposed to [^;)]*\)?|\bunlike [^;)]*|\bother than [^;)]*")
_GLOSS_WORD_RE = re.compile(r"[a-z]+")
# A definition's genus is named within its first words ("a large and densely populated urban
# area"); a general word is looked for this many links above a word's first sense.
GENUS_WORDS = 7
GENERAL_DEPTH = 3
_THAN_RE = re.compile(r"\bthan\s+(?:an?\s+|the\s+)?([a-z]+)")
_GLOSS_HEAD_RE = re.compile(r"(?:an?|the)\s+([a-z]+)\b")


def _common_senses(wordnet, forms: set[str], pos: str | None) -> set:
    """Each form's first COMMON_SENSES senses per POS."""
    return {ss for f in forms for p in _wordnet_pos(pos) for ss in wordnet.synsets(f, pos=p)[:COMMON_SENSES]}


def _gloss_names(wordnet, synset, forms: set[str], pos: str) -> bool:
    """Whether the sense's definition uses one of the forms (or an inflection of it) as a
    word, outside a contrast ("as opposed to a woman")."""
    gloss = _CONTRAST_RE.sub(" ", synset.definition().lower())
    for w in _GLOSS_WORD_RE.findall(gloss):
        if w in forms or (wordnet.morphy(w, pos) or w) in forms:
            return True
    return False


def _ancestors(synset) -> set:
    """The sense's hypernyms, one link up; up to TAXONOMY_DEPTH links in the deep taxonomies of
    living things (a tree is a woody plant, a vascular plant, a plant)."""
    depth = TAXONOMY_DEPTH if synset.lexname() in TAXONOMY_LEXNAMES else 1
    out, level = set(), {synset}
    for _ in range(depth):
        level = {p for s in level for p in _parents(s)}
        out |= level
    return out


def _names(synset) -> bool:
    """A sense WordNet writes capitalised (French, Spanish: languages, peoples) is a name, and
    names are contrast sets however their definitions read ("the Romance language spoken ...")."""
    return any(lemma.name()[:1].isupper() for lemma in synset.lemmas())


def _gloss_head(synset) -> str:
    """The word a definition opens with after its article: "proposal" for "a proposal for an
    appropriate course of action" (a definition by genus first)."""
    found = _GLOSS_HEAD_RE.match(synset.definition().lower())
    return found.group(1) if found else ""


def _genus_shared(a, b, parents) -> bool:
    """Both definitions open with the same genus, a word of the shared hypernym or of its own
    hypernyms ("a large and densely populated urban area", "an urban area with a fixed boundary
    that is smaller than a city": both urban areas, under municipality)."""
    genus = {n.replace("_", " ") for p in parents for q in [p, *_parents(p)] for n in _lemma_names(q)}

    def opens(synset) -> bool:
        head = " ".join(_GLOSS_WORD_RE.findall(synset.definition().lower().split(";")[0])[:GENUS_WORDS])
        return any(re.search(rf"\b{re.escape(g)}\b", head) for g in genus)
    return opens(a) and opens(b)


def _compared(wordnet, synset, forms: set[str], pos: str) -> bool:
    """The definition sets the sense against one of the forms by degree ("smaller than a city");
    a unit ("a period of 10 years") is no comparison."""
    for w in _THAN_RE.findall(synset.definition().lower()):
        if w in forms or (wordnet.morphy(w, pos) or w) in forms:
            return True
    return False


def _general_word(old_first: set, new_senses: set) -> bool:
    """A common sense of the new word is a hypernym up to GENERAL_DEPTH links above the old
    word's first sense: purpose -> knowledge (purpose, goal, content, cognition). The old word's
    referent is one of the new's, so the new word still names it ("The writer's knowledge is to
    show ..." reads as the purpose)."""
    level = set(old_first)
    for _ in range(GENERAL_DEPTH):
        level = {p for s in level for p in _parents(s)}
        if level & new_senses:
            return True
    return False


def _lemma_names(synset) -> set[str]:
    return {lemma.name().lower() for lemma in synset.lemmas()}


def near_senses(wordnet, word: str, new: str, pos: str) -> str | None:
    """"hypernym" or "hyponym" when a common sense of `new` is one hypernym link above or below
    a common sense of `word` (attitude -> stance, poem -> verse, story -> mystery), "sibling"
    when two common senses sit directly under one hypernym and are near-synonyms: they share a
    word (purpose and objective are both "aim"), one's definition uses the other word (a
    novel is "an extended fictional work in prose; usually in the form of a story"), or both
    definitions open with that hypernym (advice is "a proposal for an appropriate course of action",
    a suggestion "a proposal offered for acceptance or rejection"). Mere
    co-hyponyms are no sibling here: mother and father (both "parent"), car and truck (both
    "motor vehicle"), breakfast and lunch (both "meal") are different things, and siblings are
    looked for only among nouns of ideas, texts, aims and money (SIBLING_LEXNAMES); among other
    nouns, only siblings defined as variants of each other by degree: both definitions open with
    the shared hypernym's genus and one sets itself against the other ("an urban area ...
    smaller than a city": city -> town keeps the referent, while a village is a settlement and a
    mountain a land mass "higher than a hill", so those stay changes). A common sense of `new`
    up to GENERAL_DEPTH links above `word`'s first sense is a "hypernym" too: purpose ->
    knowledge (goal, content, cognition), a general word that still names the purpose.
    A hypernym or hyponym keeps the meaning for AddSent's purpose: the sentence about the
    narrower thing entails one about the broader ("the meat he likes is fish": a food he likes
    is fish), so it still answers the question with a distractor.

    Only for a WordNet POS: names (PROPN) and numbers are never judged this way, London ->
    Melbourne (both instances of city) is a change of meaning."""
    if pos not in WORDNET_POS and pos not in UPOS_TO_WORDNET:
        return None
    p = _wordnet_pos(pos)[0]
    old_forms, new_forms = lemmas(wordnet, word, pos), lemmas(wordnet, new, pos)
    old_senses = _common_senses(wordnet, old_forms, pos)
    new_senses = _common_senses(wordnet, new_forms, pos)
    if any(ss.lexname() == PERSON_LEXNAME for ss in _first_senses(wordnet, old_forms | new_forms, pos)):
        return None
    if not old_senses or not new_senses:
        return None
    for s in old_senses:
        if _ancestors(s) & new_senses:
            return "hypernym"
        if any(s in _ancestors(n) for n in new_senses):
            return "hyponym"
    if _general_word(_first_senses(wordnet, old_forms, pos), new_senses):
        return "hypernym"
    for s in old_senses:
        parents = set(_parents(s))
        for n in new_senses:
            if n.lexname() != s.lexname() or not parents & set(_parents(n)) or _names(s) or _names(n):
                continue
            if s.lexname() not in SIBLING_LEXNAMES:
                # a concrete kind: a sibling only where it is defined as the other's variant
                # (a town is "an urban area ... smaller than a city")
                if _genus_shared(s, n, parents & set(_parents(n))) and (
                        _compared(wordnet, n, old_forms, p) or _compared(wordnet, s, new_forms, p)):
                    return "sibling"
                continue
            shared = {name for parent in parents & set(_parents(n)) for name in _lemma_names(parent)}
            if (_lemma_names(s) & _lemma_names(n) or _gloss_names(wordnet, n, old_forms, p)
                    or _gloss_names(wordnet, s, new_forms, p)
                    or (_gloss_head(s) in shared and _gloss_head(n) in shared)):
                return "sibling"
    return None


def same_meaning(wordnet, word: str, new: str, pos: str | None = None) -> str | None:
    """Why `new` in place of `word` keeps the meaning ("spelling variant", "inflection",
    "synonym", "hypernym", "hyponym", "sibling"), or None when it changes it.

    "synonym": the words share a WordNet sense, or their most frequent senses are one
    hypernym link apart (idea -> notion, scientists -> researchers, trip -> journey: WordNet
    files these near-synonyms one level apart). "hypernym", "hyponym", "sibling": their common
    senses are near (see `near_senses`; judged only for a WordNet POS, never for names).
    Through rare senses nearly any two nouns are one link apart (people -> families), so only
    the first or common senses are compared.
    `pos` (a universal POS such as "NOUN", or a WordNet letter) restricts the senses compared:
    mother and father share only a verb sense (beget), so as nouns they differ.
    """
    if not word or not new:
        return None
    if _plain(word) == _plain(new) or american_spelling(word) == american_spelling(new):
        return "spelling variant"
    old_forms, new_forms = lemmas(wordnet, word, pos), lemmas(wordnet, new, pos)
    old_spelt = {american_spelling(f) for f in old_forms | {word}}
    new_spelt = {american_spelling(f) for f in new_forms | {new}}
    if old_forms & new_forms:
        return "inflection"
    if old_spelt & new_spelt:
        return "spelling variant"
    if _synsets(wordnet, old_forms, pos) & _synsets(wordnet, new_forms, pos):
        return "synonym"
    new_first = _first_senses(wordnet, new_forms, pos)
    if any(n in new_first for s in _first_senses(wordnet, old_forms, pos) for n in _neighbours(s)):
        return "synonym"
    return near_senses(wordnet, word, new, pos)
