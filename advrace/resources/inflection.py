"""English word forms for words an attack puts in place of others: verb inflection (third
person, past tense and participle, -ing), the case of the word replaced, and "a" or "an".

Jia and Liang's declarative rules and AdvRACE's AddSent share the regular suffix rules but not
everything, and a release must not change, so each keeps its own policy, named here:

- declarative rules (`past_tense`, `third_person`): a hand-written table of irregular forms,
  and a final consonant doubled only for verbs of at most four letters ending in one vowel and
  b, d, g, m, n, p, r or t (`doubles_short`: stop -> stopped, but strip -> striped);
- AddSent (`inflect_verb`): WordNet's irregular forms (refusing a verb whose past tense and
  participle differ, go: went or gone), and for any one-syllable verb ending in consonant,
  vowel, consonant (`doubles_one_syllable`) both the doubled and the plain form, the first
  that the word vectors know winning (strip -> stripped).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Container, Mapping, Sequence

VOWELS = "aeiou"
VERB_TAGS = frozenset({"VB", "VBP", "VBZ", "VBD", "VBN", "VBG"})

# Irregular past tenses, for do-support undone ("did Tesla go" -> "Tesla went").
IRREGULAR_PAST = dict(pair.split(":") for pair in """
be:was become:became begin:began bear:bore beat:beat bite:bit blow:blew break:broke bring:brought
build:built burn:burnt buy:bought catch:caught choose:chose come:came cost:cost cut:cut deal:dealt
dig:dug do:did draw:drew drink:drank drive:drove eat:ate fall:fell feed:fed feel:felt fight:fought
find:found fly:flew forbid:forbade forget:forgot forgive:forgave freeze:froze get:got give:gave go:went
grow:grew hang:hung have:had hear:heard hide:hid hit:hit hold:held hurt:hurt keep:kept know:knew
lay:laid lead:led leave:left lend:lent let:let lie:lay lose:lost make:made mean:meant meet:met pay:paid
put:put quit:quit read:read ride:rode ring:rang rise:rose run:ran say:said see:saw seek:sought sell:sold
send:sent set:set shake:shook shine:shone shoot:shot show:showed shut:shut sing:sang sink:sank sit:sat
sleep:slept slide:slid speak:spoke spend:spent split:split spread:spread stand:stood steal:stole
stick:stuck strike:struck swear:swore sweep:swept swim:swam take:took teach:taught tear:tore tell:told
think:thought throw:threw understand:understood wake:woke wear:wore win:won write:wrote withdraw:withdrew
overcome:overcame undergo:underwent undertake:undertook
occur:occurred prefer:preferred refer:referred confer:conferred defer:deferred transfer:transferred
admit:admitted commit:committed permit:permitted omit:omitted submit:submitted emit:emitted
control:controlled compel:compelled expel:expelled propel:propelled regret:regretted equip:equipped
""".split())  # and the stressed last syllables that double past the four letters of `doubles_short`
IRREGULAR_PRESENT = {"be": "is", "have": "has", "do": "does", "go": "goes"}


def match_case(word: str, like: str) -> str:
    """`word` cased like the word it replaces: all capitals (for more than one letter), a
    capital first, or as it is."""
    if len(like) > 1 and like.isupper():
        return word.upper()
    if like[:1].isupper():
        return word[:1].upper() + word[1:]
    return word


def indefinite_article(word: str) -> str:
    lower = word.lower()
    if lower.startswith(("hour", "honest", "honour", "honor", "heir")):
        return "an"
    if lower.startswith(("uni", "use", "usu", "eu", "one", "once")) or lower[:1] not in VOWELS:
        return "a"
    return "an"


def doubles_one_syllable(base: str) -> bool:
    """One-syllable consonant-vowel-consonant verbs double their last letter (stop, stopped);
    AddSent's rule."""
    groups = re.findall(r"[aeiouy]+", base[:-1])
    return (len(base) >= 3 and len(groups) == 1 and base[-1] not in VOWELS + "wxy"
            and base[-2] in VOWELS and base[-3] not in VOWELS)


def doubles_short(verb: str) -> bool:
    """Verbs of at most four letters ending in one vowel and b, d, g, m, n, p, r or t double it
    (stop, stopped); the declarative rules' rule."""
    return bool(re.fullmatch(r"[^aeiou]*[aeiou][bdgmnprt]", verb)) and len(verb) <= 4


def inflection_candidates(base: str, tag: str,
                          doubles: Callable[[str], bool] = doubles_one_syllable) -> list[str]:
    """Regular forms of a verb for a Penn tag, most likely first (the doubled form before the
    plain one where `doubles` says the last letter may double); [] for tags we do not handle.
    Suffixes follow the lowercased verb and keep the case of `base`."""
    lower = base.lower()
    if tag in ("VB", "VBP"):
        return [base]
    if tag == "VBZ":
        if re.search(r"(s|x|z|ch|sh|o)$", lower):
            return [base + "es"]
        if re.search(r"[^aeiou]y$", lower):
            return [base[:-1] + "ies"]
        return [base + "s"]
    if tag in ("VBD", "VBN"):
        if lower.endswith("e"):
            return [base + "d"]
        if re.search(r"[^aeiou]y$", lower):
            return [base[:-1] + "ied"]
        return [base + base[-1] + "ed", base + "ed"] if doubles(lower) else [base + "ed"]
    if tag == "VBG":
        if lower.endswith("ie"):
            return [base[:-2] + "ying"]
        if lower.endswith("e") and not lower.endswith(("ee", "ye", "oe")):
            return [base[:-1] + "ing"]
        return [base + base[-1] + "ing", base + "ing"] if doubles(lower) else [base + "ing"]
    return []


def past_tense(verb: str) -> str:
    """The past tense by the declarative rules' policy (see the module docstring)."""
    return IRREGULAR_PAST.get(verb.lower()) or inflection_candidates(verb, "VBD", doubles_short)[0]


def third_person(verb: str) -> str:
    """The third person singular present (be -> is, have -> has, watch -> watches)."""
    return IRREGULAR_PRESENT.get(verb.lower()) or inflection_candidates(verb, "VBZ")[0]


def is_base_verb(word: str, wordnet) -> bool:
    """Whether WordNet has the word as a verb in its base form (end, register: yes; in,
    victory, donated: no), so that rules inflect nothing the lexicon does not call a verb."""
    lower = word.lower()
    if not lower.isalpha():
        return False
    bases = wordnet._morphy(lower, "v") if hasattr(wordnet, "_morphy") else [wordnet.morphy(lower, "v")]
    return lower in bases


# irregular verbs whose participle is the base itself (come, came, come): WordNet's exception list
# names only their past tense, which would otherwise serve for both
PARTICIPLE_IS_BASE = frozenset({"come", "become", "overcome", "run", "outrun", "overrun"})


def irregular_forms(exceptions: Mapping[str, Sequence[str]]) -> dict[str, list[str]]:
    """Irregular forms by base (lose: lost; stop: stopped), from an exception list such as
    WordNet's verb.exc that maps each form to its bases."""
    forms: dict[str, list[str]] = {}
    for form, bases in exceptions.items():
        for base in bases:
            forms.setdefault(base, []).append(form)
    return forms


def inflect_verb(base: str, tag: str, irregular: Mapping[str, Sequence[str]],
                 vocabulary: Container[str]) -> str | None:
    """The verb in the form of a Penn tag by AddSent's policy (see the module docstring), or None
    where the rules would have to guess: a known irregular form, else the first regular
    candidate in `vocabulary`."""
    if tag not in VERB_TAGS or not base.isalpha():
        return None
    if tag in ("VB", "VBP"):
        return base if base in vocabulary else None
    if tag == "VBN" and base in PARTICIPLE_IS_BASE:
        return base  # "has come": verb.exc lists "came" alone, which is no participle
    known = irregular.get(base, [])
    if tag == "VBG":
        known = [f for f in known if f.endswith("ing")]
    elif tag == "VBZ":
        known = [f for f in known if f.endswith("s") and not f.endswith("ss")]
    else:
        known = [f for f in known if not f.endswith(("ing", "s"))]
        if len(known) > 1:
            return None
    if known:
        return known[0]
    for form in inflection_candidates(base, tag):
        if form in vocabulary:
            return form
    return None
