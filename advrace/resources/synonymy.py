"""Whether a word put in place of another keeps the meaning: a synonym, a spelling variant or
an inflection of it.

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


def same_meaning(wordnet, word: str, new: str, pos: str | None = None) -> str | None:
    """Why `new` in place of `word` keeps the meaning ("spelling variant", "inflection",
    "synonym"), or None when it changes it.

    "synonym": the words share a WordNet sense, or their most frequent senses are one
    hypernym link apart (idea -> notion, scientists -> researchers, trip -> journey: WordNet
    files these near-synonyms one level apart). The link is looked for between first senses
    only: through rare senses nearly any two nouns are one link apart (people -> families).
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
    return None
