"""Jia and Liang's answer rules: a fake answer for every SQuAD answer.

Their AddSent makes a fake answer by the first rule that applies, in order: a date (its numbers
and month moved), a number (its leading digit moved), a named-entity type, an abbreviation, the
question's wh-word (who, when, where, how many), the answer's part of speech (first or last
token, its determiner kept), and last a catch-all ("aliens"), so that some fake always exists.

Here the typed pool of `fake_answers` (the data's own phrases of the answer's refined type)
stands for their named-entity rules and goes first; where it has nothing, `FallbackFakes`
goes on through the rest, typed as finely as each rule allows, in the order of `ANSWER_RULES`
(one named rule object each; the two `lexfile` and two `pos` rules take turns, below):

- `date`, `number`: the gold itself with its years moved back 25, its days by 11, its months by
  six, its other numbers' leading digit by five (Jia and Liang's own arithmetic), so that "between
  1550 and 1580" becomes "between 1525 and 1555" and "about 21 stages" "about 71 stages"; only
  for a gold that is a time (`date`) or a number (`number`) by what the question asks ("How
  old", "When") or else by its type in its context, for the audit's `fake_type` check trusts
  these two rules; a month's name moves only where it names a month (not "the Salt
  March", "June Carter");
- `asked_name`: where the question names the kind it asks for and the gold reads as a name, a
  name of that kind ("Which canal": "the Halloway Canal");
- `closed_book`: a language model's answer to the question alone (attacks.closed_book), where
  the caller has one;
- `asked_kind`: where the question names its kind and the gold is a common noun, a WordNet
  hyponym of the asked noun, the gold head's kin first ("Which diseases": "cancers");
- `abbreviation`: an acronym for an all-capitals answer;
- `ner`: a name of the data of the kind the tagger gave the gold that GloVe puts near it (a team
  for "Broncos"), where the typed pool did not trust its refinement;
- `wh_who`, `wh_when`, `wh_where`, `wh_how_many`, `wh_how_much`, `wh_how_often`,
  `wh_what_happened`: a person, a year or date, a city, a number, an amount of money, a
  frequency, an event, for the question's wh-word;
- `lexfile`: GloVe's nearest nouns to the answer's head noun whose first WordNet sense is of the
  head's lexicographer file and which WordNet does not relate to it as a synonym, hypernym or
  hyponym ("the lamprey": "the tilapia"); after the `pos` rule's GloVe nouns, nouns of the file
  of the noun the question asks for ("what kinds of trees": noun.plant) or of the head's: the
  data's noun phrases whose head is a close WordNet relative, else the fixed list's, nearest
  first; a plural for a plural and the gold's determiner kept;
- `pos`: a word of the answer's part of speech and form (a past tense for a past tense, a
  comparative for a comparative): for a noun phrase's head, an adjective, adverb or verb GloVe's
  nearest words of its tag that WordNet does not relate to it first ("suburban": "rural"), then
  the fixed nouns of the head's file, then Jia and Liang's;
- `catch_all`: what is left, recorded as such: a name, a number or a year where the gold is one
  or the question's leading wh-word asks for one, else "aliens".

Every fake differs from the gold, occurs nowhere in the paragraph or the question, and shares
no word with an answer of the paragraph (a number rule's own words, "years" of "three years",
excepted). The fixed lists are disjoint between the two sets (AddSent/AddOneSent, AddSentMod)
and serve least-used first, past the pool's cap: a rotation, never a refusal.

AddSentMod's fakes are another set for every rule, as in Jia and Liang's AddSentMod: the data's
phrases and GloVe's neighbours (`ner`, `lexfile`, `asked_kind`, `pos_*`) by the pool's stable hash
(`FakePool.in_set`), the fixed lists by their second half, the `date` and `number` rules by a
second move (40 years back, five days, four months; a leading digit plus three, a year-like number
130 back), and the closed-book answer, which is one per question, not at all: the second set
takes another rule's fake where AddOneSent took the model's.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Callable

from advrace.core.checks.sentences import TYPE_GROUPS, asked_group, wanted_group
from advrace.metrics import normalize_answer

from .fake_answers import FAKES, MONTHS, FakePool, lexfile_of, wh_noun


@dataclass(frozen=True)
class FakeChoice:
    """Fake answers made by one rule: `kind` is their answer type (fake_answers.TYPES), for the
    declarative rules ("on" a date, "in" a year) and the record."""

    rule: str
    kind: str
    fakes: tuple[str, ...]
    cosine: float | None = None  # a closed-book fake's MiniLM cosine with the nearest gold
    pmi: float | None = None  # the fake's PMI with the question, where the LM ranked the fakes (closed_book.pmi)


# WordNet noun files -> ((singular, plural) of the first set, of the second set); each noun's first
# sense is of its file (tests/test_answer_rules.py checks it)
LEXFILE_FAKES: dict[str, tuple[tuple[tuple[str, str], ...], tuple[tuple[str, str], ...]]] = {
    "noun.act": ((("boycott", "boycotts"), ("pilgrimage", "pilgrimages"), ("hunger strike", "hunger strikes")),
                 (("blockade", "blockades"), ("expedition", "expeditions"), ("rehearsal", "rehearsals"))),
    "noun.animal": ((("hamster", "hamsters"), ("walrus", "walruses")), (("pelican", "pelicans"), ("hedgehog", "hedgehogs"))),
    "noun.artifact": ((("steam engine", "steam engines"), ("telescope", "telescopes"), ("lighthouse", "lighthouses")),
                      (("windmill", "windmills"), ("typewriter", "typewriters"), ("wheelbarrow", "wheelbarrows"))),
    "noun.attribute": ((("elasticity", "elasticities"), ("brightness", "brightnesses")),
                       (("viscosity", "viscosities"), ("agility", "agilities"))),
    "noun.body": ((("kidney", "kidneys"), ("elbow", "elbows")), (("spleen", "spleens"), ("ankle", "ankles"))),
    "noun.cognition": ((("geometry", "geometries"), ("astrology", "astrologies")),
                       (("phrenology", "phrenologies"), ("numerology", "numerologies"))),
    "noun.communication": ((("sonnet", "sonnets"), ("telegram", "telegrams")),
                           (("lullaby", "lullabies"), ("ballad", "ballads"))),
    "noun.event": ((("eclipse", "eclipses"), ("avalanche", "avalanches")),
                   (("earthquake", "earthquakes"), ("landslide", "landslides"))),
    "noun.feeling": ((("nostalgia", "nostalgias"), ("envy", "envies")), (("boredom", "boredoms"), ("gratitude", "gratitudes"))),
    "noun.food": ((("porridge", "porridges"), ("gingerbread", "gingerbreads")), (("marmalade", "marmalades"), ("pancake", "pancakes"))),
    "noun.group": ((("choir", "choirs"), ("orchestra", "orchestras")), (("militia", "militias"), ("brass band", "brass bands"))),
    "noun.location": ((("seaport", "seaports"), ("oasis", "oases")), (("suburb", "suburbs"), ("hinterland", "hinterlands"))),
    "noun.motive": ((("incentive", "incentives"),), (("conscience", "consciences"),)),
    "noun.object": ((("glacier", "glaciers"), ("meteorite", "meteorites")), (("canyon", "canyons"), ("sand dune", "sand dunes"))),
    "noun.person": ((("blacksmith", "blacksmiths"), ("astronomer", "astronomers"), ("shepherd", "shepherds")),
                    (("cartographer", "cartographers"), ("locksmith", "locksmiths"), ("beekeeper", "beekeepers"))),
    "noun.phenomenon": ((("magnetism", "magnetisms"), ("monsoon", "monsoons")), (("static electricity", "static electricity"),
                                                                                 ("thunderstorm", "thunderstorms"))),
    "noun.plant": ((("oak", "oaks"), ("fern", "ferns")), (("cactus", "cacti"), ("ivy", "ivies"))),
    "noun.possession": ((("pension", "pensions"), ("ransom", "ransoms")), (("dowry", "dowries"), ("bounty", "bounties"))),
    "noun.process": ((("erosion", "erosions"), ("photosynthesis", "photosyntheses")),
                     (("evaporation", "evaporations"), ("osmosis", "osmoses"))),
    "noun.quantity": ((("teaspoon", "teaspoons"), ("bushel", "bushels")), (("furlong", "furlongs"), ("kilowatt", "kilowatts"))),
    "noun.relation": ((("ratio", "ratios"),), (("proportion", "proportions"),)),
    "noun.shape": ((("spiral", "spirals"), ("triangle", "triangles")), (("hexagon", "hexagons"), ("crescent", "crescents"))),
    "noun.state": ((("drought", "droughts"), ("insomnia", "insomnias")), (("anarchy", "anarchies"), ("corrosion", "corrosions"))),
    "noun.substance": ((("copper", "copper"), ("granite", "granite")), (("sulfur", "sulfur"), ("limestone", "limestone"))),
    "noun.time": ((("twilight", "twilights"), ("winter", "winters")), (("dawn", "dawns"), ("midsummer", "midsummers"))),
}

# Penn tag -> (first set, second set): Jia and Liang's words, with company so that they rotate
POS_FAKES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "VB": (("learn", "juggle", "paint"), ("run", "knit", "whistle")),
    "VBP": (("learn", "juggle", "paint"), ("run", "knit", "whistle")),
    "VBZ": (("learns", "juggles", "paints"), ("runs", "knits", "whistles")),
    "VBD": (("learned", "juggled", "painted"), ("ran", "knitted", "whistled")),
    "VBN": (("learned", "juggled", "painted"), ("run", "knitted", "whistled")),
    "VBG": (("learning", "juggling", "painting"), ("running", "knitting", "whistling")),
    "NN": (("hamster", "violin", "tractor"), ("apple", "lantern", "bicycle")),
    "NNS": (("hamsters", "violins", "tractors"), ("apples", "lanterns", "bicycles")),
    "NNP": (("Central Park", "Kolmogorov", "Zanzibar"), ("Sears Tower", "Calloway", "Tamsin")),
    "NNPS": (("Kew Gardens", "Highlanders"), ("Hobbits", "Lowlanders")),
    "JJ": (("deep", "purple", "fragile"), ("blue", "ancient", "hollow")),
    "JJR": (("deeper", "purpler"), ("bluer", "hollower")),
    "JJS": (("deepest", "purplest"), ("bluest", "hollowest")),
    "RB": (("silently", "slowly", "rarely"), ("quickly", "loudly", "gently")),
}
NAME_STEMS = (("Kolmogorov", "Zanzibar", "Halloway"), ("Calloway", "Tamsin", "Ostrander"))
# tags whose GloVe neighbours serve before the fixed words: (WordNet letter, universal POS)
_NEIGHBOUR_POS = {"NN": ("n", "NOUN"), "NNS": ("n", "NOUN"), "JJ": ("a", "ADJ"), "JJR": ("a", "ADJ"),
                  "JJS": ("a", "ADJ"), "RB": ("r", "ADV"),
                  "VB": ("v", "VERB"), "VBD": ("v", "VERB"), "VBG": ("v", "VERB"), "VBN": ("v", "VERB"),
                  "VBP": ("v", "VERB"), "VBZ": ("v", "VERB")}
POS_KINDS = {"VB": "verb", "VBP": "verb", "VBZ": "verb", "VBD": "verb_past", "VBN": "verb_past",
             "VBG": "verb_ing", "NN": "noun", "NNS": "plural_noun", "NNP": "proper_noun",
             "NNPS": "proper_noun", "JJ": "adjective", "JJR": "adjective", "JJS": "adjective",
             "RB": "adverb"}
CATCH_ALL = (("aliens", "moonlight", "glass marbles", "seaweed"),
             ("cosmic rays", "sea foam", "paper lanterns", "stardust"))
ABBREVIATIONS = (("LSTM", "NAACP", "UNESCO", "OPEC"), ("PCFG", "NATO", "FIFA", "IUPAC"))
WH_CITIES = (("Chicago", "Nairobi", "Lisbon", "Winnipeg"), ("Stockholm", "Osaka", "Lima", "Adelaide"))
WH_NUMBERS = (("42", "17", "2,400", "9"), ("200", "36", "9,100", "13"))
WH_OFTEN = (("twice a year", "every decade", "once a month"), ("every winter", "three times a week", "hourly"))
WH_HAPPENED = (("a general strike", "an earthquake", "a flood"), ("a famine", "a mutiny", "a landslide"))
WH_MONEY = (("$2.5 million", "$400", "$75,000"), ("$17 billion", "$85", "$3,200"))

_NUMBER_WORDS = ("zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen "
                 "sixteen seventeen eighteen nineteen twenty").split()
_SCALE_SWAP = {"thousand": "million", "million": "thousand", "billion": "thousand", "trillion": "thousand"}
_NUMBER = re.compile(r"(?<![\w.])\d[\d,]*(\.\d+)?(?!\w)")
_ORDINAL = re.compile(r"(?<![\w.])(\d+)(st|nd|rd|th)\b")
_DECADE = re.compile(r"(?<!\d)(1[0-9]{2}0|20[0-9]0)s\b")
_YEAR = re.compile(r"(?<!\d)(1[0-9]{3}|20[0-9]{2})(?!\d|s\b)")
_MONTH = re.compile(r"\b(" + "|".join(m.title() for m in MONTHS) + r")\b")
_MONTH_NAMES = "|".join(m.title() for m in MONTHS)
_DAY = re.compile(rf"\b(?P<m1>{_MONTH_NAMES}) (?P<d1>\d{{1,2}})\b|\b(?P<d2>\d{{1,2}}) (?P<m2>{_MONTH_NAMES})\b")
_DETERMINERS = ("the", "a", "an")
DATE_KINDS = frozenset({"date", "year", "month", "weekday"})
NUMBER_KINDS = frozenset({"number", "quantity", "percent", "money", "ordinal"})
# words that may stand beside a month's name in a date ("early March", "in March and April")
_TIME_WORDS = frozenset({"in", "on", "of", "the", "early", "late", "mid", "middle", "end", "beginning", "start",
                         "during", "by", "until", "till", "since", "from", "to", "through", "and", "or",
                         "between", "around", "about", "before", "after", "each", "every", "last", "next",
                         "this", "that", "month", "months", "-", "–"})


_JOINING = frozenset({"of", "the", "and", "de", "for", "in", "on", "a", "an", "to", "at", "by", "with", "from"})


_PERSON_NOUNS = frozenset({"person", "people", "individual", "human", "man", "woman"})


def _asks_person(noun: str | None, noun_file: str | None) -> bool:
    """A noun the question asks for that is a person ("what person": noun.Tops, not noun.person)."""
    return noun_file == "noun.person" or noun in _PERSON_NOUNS


def _reads_as_name(text: str) -> bool:
    """Every word capitalised but a short joining one ("Museum of Manufactures", "St. Johns
    River"), and not a lone acronym (the abbreviation rule's)."""
    words = [w.strip("\"'“”‘’()") for w in text.split()]
    words = [w for w in words if w and w.lower() not in _JOINING]  # a quoted title too ('"A Machine to End War"')
    if not words or (len(text.split()) == 1 and text.isupper()):
        return False
    return all(w[:1].isupper() or w[:1].isdigit() for w in words) and any(w[:1].isupper() for w in words)


def _plural(noun: str) -> str:
    if re.search(r"[^aeiou]y$", noun):
        return noun[:-1] + "ies"
    return noun + ("es" if re.search(r"(s|x|ch|sh)$", noun) else "s")


def _ordinal(n: int) -> str:
    suffix = "th" if 10 <= n % 100 <= 20 else {1: "st", 2: "nd", 3: "rd"}.get(n % 10, "th")
    return f"{n}{suffix}"


# Jia and Liang's moves (AddSent, AddOneSent), then the second set's (AddSentMod): another
# fake for the same gold, never the first one
_YEAR_MOVE = (75, 130)  # a number read as a year, moved back
_DIGIT_MOVE = (5, 3)  # a leading digit moved on
_DATE_MOVES = ({"decade": 30, "year": 25, "day": 11, "month": 6}, {"decade": 60, "year": 40, "day": 5, "month": 4})
_WORD_MOVE = (5, 3)
_SCALE_SWAPS = (_SCALE_SWAP, {"thousand": "billion", "million": "billion", "billion": "million",
                              "trillion": "million"})


def _lead_digit(number: str, second: bool = False) -> str:
    """Jia and Liang's change of a number: 1000-2500 minus 75 (a year), else the first digit plus
    five (modulo ten, never 0); the second set's: minus 130, plus three."""
    value = float(number.replace(",", ""))
    if 1000 < value < 2500 and "." not in number:
        moved = int(value) - _YEAR_MOVE[second]
        return f"{moved:,}" if "," in number else str(moved)
    chars = list(number)
    for i, c in enumerate(chars):
        if c.isdigit():
            chars[i] = str(max((int(c) + _DIGIT_MOVE[second]) % 10, 1))
            break
    return "".join(chars)


def names_a_month(text: str) -> bool:
    """Whether a month's name in the text is a month: beside a day or a year ("March 15", "3
    March", "March 1990", "March of 1990"), or with nothing but words of time around it ("early
    March", "in March and April"). "the Salt March" and "June Carter" name none."""
    if not _MONTH.search(text):
        return False
    if _DAY.search(text) or re.search(rf"\b({_MONTH_NAMES}),? (of )?\d{{4}}\b", text):
        return True
    rest = _MONTH.sub(" ", text)
    return all(w.lower() in _TIME_WORDS for w in re.findall(r"[\w'’-]+", rest))


_WORD_VALUES = {**{w: i for i, w in enumerate(_NUMBER_WORDS)},
                **{w: 10 * i for i, w in enumerate("thirty forty fifty sixty seventy eighty ninety".split(), 3)},
                "hundred": 100, "thousand": 10 ** 3, "million": 10 ** 6, "billion": 10 ** 9, "trillion": 10 ** 12,
                **{w: i for i, w in enumerate(("first second third fourth fifth sixth seventh eighth ninth tenth "
                                               "eleventh twelfth thirteenth fourteenth fifteenth sixteenth "
                                               "seventeenth eighteenth nineteenth twentieth").split(), 1)}}


def number_values(text: str) -> tuple[float, ...]:
    """The numbers a text states, in digits or words, sorted ("ten years": (10,), "the 19th
    century" and "nineteenth": (19,)): two answers with the same numbers state one value."""
    found = [float(m.group().replace(",", "")) for m in re.finditer(r"\d[\d,]*(?:\.\d+)?", text)]
    found += [float(_WORD_VALUES[w]) for w in re.findall(r"[a-z]+", text.lower()) if w in _WORD_VALUES]
    return tuple(sorted(found))


def shift_date(text: str, second: bool = False) -> str | None:
    """The date with its years 25 earlier, its day moved by 11 and its month by six (a month's
    name only where it names a month: `names_a_month`); None when nothing in it is a year, a day
    or a month. `second`: AddSentMod's other date (40 years, five days, four months)."""
    move = _DATE_MOVES[second]
    out = _DECADE.sub(lambda m: f"{int(m.group(1)) - move['decade']}s", text)  # the 1990s: the 1960s, a decade
    out = _YEAR.sub(lambda m: str(int(m.group()) - move["year"]), out)
    if names_a_month(text):
        def day(m):
            d = int(m.group("d1") or m.group("d2"))
            d = str(d - move["day"] if d > 15 else d + move["day"])
            return f"{m.group('m1')} {d}" if m.group("m1") else f"{d} {m.group('m2')}"
        out = _DAY.sub(day, out)
        out = _MONTH.sub(lambda m: MONTHS[(MONTHS.index(m.group().lower()) + move["month"]) % 12].title(), out)
    return out if out != text else None


def shift_number(text: str, second: bool = False) -> str | None:
    """Every number of the answer changed: its digits where it has some, else its number words
    and scale words ("three years": "eight years"); None when it has none, and for a date, whose
    day and year are `shift_date`'s ("March 15, 1990" is no "March 65, 1915"). `second`:
    AddSentMod's other number (`_lead_digit`'s second move; "three years": "six years")."""
    if names_a_month(text):
        return None
    out = _NUMBER.sub(lambda m: _lead_digit(m.group(), second), text)
    out = _ORDINAL.sub(lambda m: _ordinal(int(_lead_digit(m.group(1), second))), out)  # "12th": "62nd"
    if out != text:
        return out  # "$5 million": the digits moved, the scale kept

    def word(m):
        lower = m.group().lower()
        if lower in _SCALE_SWAP:
            new = _SCALE_SWAPS[second][lower]
        else:
            new = _NUMBER_WORDS[(_NUMBER_WORDS.index(lower) + _WORD_MOVE[second]) % len(_NUMBER_WORDS)] \
                if lower != "zero" else ("seven", "four")[second]
        return new.title() if m.group()[0].isupper() else new
    out = re.sub(r"\b(" + "|".join(_NUMBER_WORDS + list(_SCALE_SWAP)) + r")\b", word, out, flags=re.I)
    return out if out != text else None


class _Question:
    """What the answer rules read of one question: its gold, what a fake must avoid (`seen`: the
    normalised passage and question; `banned`: the words of the passage's answers), and what the
    question asks; each read once, when a rule first needs it."""

    def __init__(self, fallback: FallbackFakes, example, kind: str, avoid_answers, rng, k: int, closed):
        self.fallback, self.example, self.kind, self.avoid_answers = fallback, example, kind, avoid_answers
        self.rng, self.k, self.closed = rng, k, closed
        self.gold = example.answers[0].text.strip()
        self.gold_norm = normalize_answer(self.gold)
        self.seen = f" {normalize_answer(example.context)} {normalize_answer(example.question)} "
        self.banned = (set().union(*(set(normalize_answer(a).split()) for a in avoid_answers)) if avoid_answers
                       else set())
        self.golds = [normalize_answer(a.text) for a in example.answers]

    def fits_keeping_gold_words(self, text: str | None) -> bool:
        """`FallbackFakes._fits` for a number rule's fake, which keeps the gold's other words
        ("years" of "three years"): only new to the passage and question, and no gold."""
        if text is None:
            return False
        norm = normalize_answer(text)
        return f" {norm} " not in self.seen and not any(g == norm or f" {g} " in f" {norm} " for g in self.golds)

    @functools.cached_property
    def numeric_group(self) -> str | None:
        """The gold's group for the date and number rules: what the question asks ("How old": a
        number though the tagger reads "39" as a date), else the gold's type in its context."""
        group = asked_group(self.example.question)
        if group not in ("time", "number"):
            group = wanted_group(self.example, lambda *_: self.kind)
        return group

    @functools.cached_property
    def wh_and_noun(self) -> tuple:
        return wh_noun(self.example.question, self.fallback.resources)

    @property
    def wh(self) -> str | None:
        return self.wh_and_noun[0]

    @property
    def noun(self) -> str | None:
        """The noun the question asks for ("Which river": river), if it names one."""
        return self.wh_and_noun[1]

    @functools.cached_property
    def span(self):
        return self.fallback._answer_span(self.example)

    @property
    def head(self):
        return self.span.root if self.span is not None else None

    @property
    def nominal(self) -> bool:
        """Whether the gold's head is a common noun."""
        return self.head is not None and self.head.tag_ in ("NN", "NNS")

    @functools.cached_property
    def noun_file(self) -> str | None:
        return lexfile_of(self.noun, self.fallback.resources) if self.noun else None

    @functools.cached_property
    def asked(self) -> FakeChoice | None:
        """The fake of the kind the question names (`FallbackFakes._asked`), once: the kind comes
        before the gold's own form ("Which sport": not an acronym)."""
        if self.wh in ("what", "which") and self.noun is not None and not _asks_person(self.noun, self.noun_file):
            return self.fallback._asked(self.noun, self.head, self.gold, self.seen, self.banned, self.gold_norm,
                                        self.rng, self.k)
        return None

    @functools.cached_property
    def pos_word(self) -> tuple[str | None, str]:
        """(tag, word) of the gold's part of speech: a noun phrase's head (not its last word or a
        participle, "increased settlement"), else by Jia and Liang's order (`_pos_tag`)."""
        if self.nominal:
            return self.head.tag_, self.head.text
        return FallbackFakes._pos_tag(self.span) if self.head is not None else (None, "")


@dataclass(frozen=True)
class AnswerRule:
    """One answer rule past the typed pool: its `name`; what it records as the fake's rule
    (`records`: its name, or a name per wh-word or tag); `make(fallback, question)`, its fakes
    for a question (a FakeChoice, possibly of no fakes), or None where it does not apply."""

    name: str
    records: str
    make: Callable[[FallbackFakes, _Question], FakeChoice | None]


class FallbackFakes:
    """The rules past the typed pool, for one question: see the module docstring and
    `ANSWER_RULES`. `uses` is shared with the pool, so that a fixed word rotates through the
    questions prepared together."""

    def __init__(self, pool: FakePool, resources, second_set: bool = False):
        self.pool, self.resources, self.second_set = pool, resources, second_set
        self.fake_set = int(second_set)  # the fixed lists' set: 0 for AddSent and AddOneSent, 1 for AddSentMod

    def choices(self, example, kind: str, avoid_answers, rng, k: int = 2, closed=None):
        """Each applying rule's FakeChoice, in Jia and Liang's order (`ANSWER_RULES`): a caller
        takes the first whose sentences pass its checks. `closed` is the example's closed-book
        answer (a closed_book.ClosedAnswer), if any."""
        question = _Question(self, example, kind, avoid_answers, rng, k, closed)
        for rule in ANSWER_RULES:
            choice = rule.make(self, question)
            if choice is not None:
                yield choice

    # ------------------------------------------------------------------ filters
    def _fits(self, text: str, seen: str, banned: set[str], gold_norm: str) -> bool:
        norm = normalize_answer(text)
        return bool(norm) and norm != gold_norm and f" {norm} " not in seen and not (set(norm.split()) & banned)

    def _rotate(self, items, seen, banned, gold_norm, k, rng) -> tuple[str, ...]:
        fit = [t for t in dict.fromkeys(items) if self._fits(t, seen, banned, gold_norm)]
        rng.shuffle(fit)
        fit.sort(key=lambda t: self.pool.uses[t])
        return tuple(fit[:k])

    def _rotated(self, q: _Question, items) -> tuple[str, ...]:
        return self._rotate(items, q.seen, q.banned, q.gold_norm, q.k, q.rng)

    # ------------------------------------------------------------------ the rules, in ANSWER_RULES' order
    # the gold's numbers moved, only where the gold is a time or a number: the fake_type check
    # trusts these two rules
    def _date_rule(self, q: _Question) -> FakeChoice | None:
        if q.numeric_group != "time":
            return None
        date = shift_date(q.gold, self.second_set) or shift_number(q.gold, self.second_set)  # "the 18th century"
        if not q.fits_keeping_gold_words(date):
            return None
        return FakeChoice("date", q.kind if q.kind in DATE_KINDS else "date", (date,))

    def _number_rule(self, q: _Question) -> FakeChoice | None:
        if q.numeric_group != "number":
            return None
        number = shift_number(q.gold, self.second_set)
        if not q.fits_keeping_gold_words(number):
            return None
        return FakeChoice("number", q.kind if q.kind in NUMBER_KINDS else "number", (number,))

    def _asked_name_rule(self, q: _Question) -> FakeChoice | None:
        return q.asked if q.asked is not None and q.asked.rule == "asked_name" else None

    def _closed_book_rule(self, q: _Question) -> FakeChoice | None:
        """A language model's answer to the question alone: of the asked kind where no rule knows
        it (closed_book); AddSentMod's second set takes another rule's fake, for the model's
        answer is AddOneSent's."""
        closed = q.closed
        if closed is None or self.second_set or not self._fits(closed.text, q.seen, q.banned, q.gold_norm):
            return None
        return FakeChoice("closed_book", q.kind, (closed.text,), closed.gold_cosine)

    def _asked_kind_rule(self, q: _Question) -> FakeChoice | None:
        return q.asked if q.asked is not None and q.asked.rule == "asked_kind" else None

    def _abbreviation_rule(self, q: _Question) -> FakeChoice | None:
        if not (len(q.gold.split()) == 1 and q.gold.isupper() and any(c.isalpha() for c in q.gold)):
            return None
        return FakeChoice("abbreviation", "abbreviation", self._rotated(q, ABBREVIATIONS[self.fake_set]))

    def _ner_rule(self, q: _Question) -> FakeChoice | None:
        """A name of the tagger's kind, its refinement untrusted, where the question names no kind
        of its own ("What channel": a channel, not any organisation). The tagger's kinds are
        coarse and slip ("the Huguenot Memorial Bridge" a person): only names GloVe puts near the
        gold, nearest first (a team for a team)."""
        kind = q.kind
        if kind not in self.pool.by_kind or q.noun is not None or (
                q.wh in ("who", "whom") and kind not in ("person", "organisation", "country", "nationality")):
            return None
        names = [p for p in self.pool.by_kind[kind] if self.pool.in_set(p, self.second_set)
                 and self._fits(p, q.seen, q.banned, q.gold_norm)]
        names = self._nearest(names, q.gold, floor=self._NEAR)[:4 * q.k]
        return FakeChoice("ner", kind, self._rotated(q, names)) if names else None

    def _wh_rule(self, q: _Question) -> FakeChoice | None:
        if q.wh in ("who", "whom", "where") and q.head is not None and q.head.pos_ in ("ADJ", "ADV", "VERB", "AUX"):
            return None  # "Where does it rank?" "low": no city
        return self._wh(q)

    def _lexfile_neighbours_rule(self, q: _Question) -> FakeChoice | None:
        """GloVe's neighbours of the answer's head in its WordNet file ("lamprey": eels)."""
        if not q.nominal:
            return None
        return self._neighbours((q.head.lemma_ or q.head.text).lower(), q.head.tag_ == "NNS", q.gold, q.seen,
                                q.banned, q.gold_norm, q.k)

    def _pos_neighbours_rule(self, q: _Question) -> FakeChoice | None:
        """GloVe's words of the gold's tag ("suburban": "rural"; "firms": "banks")."""
        tag, word = q.pos_word
        if tag not in _NEIGHBOUR_POS:
            return None
        near = self._word_neighbours(word, tag, q.seen, q.banned, q.gold_norm, q.k)
        if not near:
            return None
        return FakeChoice(f"pos_{tag.lower()}", POS_KINDS[tag],
                          tuple(self._with_determiner(w, q.gold, tag) for w in near))

    def _lexfile_nouns_rule(self, q: _Question) -> FakeChoice | None:
        """Nouns of the file of the noun the question asks for ("what kinds of trees"), or, where
        it names none, of the answer head's."""
        if not q.nominal:
            return None
        return self._file_fakes(q.noun or (q.head.lemma_ or q.head.text).lower(), q.head.tag_ == "NNS", q.gold,
                                q.seen, q.banned, q.gold_norm, q.rng, q.k)

    def _pos_words_rule(self, q: _Question) -> FakeChoice | None:
        """Jia and Liang's own words of the gold's tag, last of the part-of-speech rules."""
        tag = q.pos_word[0]
        if not tag:
            return None
        words = tuple(self._with_determiner(w, q.gold, tag) for w in POS_FAKES[tag][self.fake_set])
        return FakeChoice(f"pos_{tag.lower()}", POS_KINDS[tag], self._rotated(q, words))

    def _catch_all_rule(self, q: _Question) -> FakeChoice:
        group = self._asked_group(q.example, q.kind)
        fixed, kind = {"name": (POS_FAKES["NNP"], "proper_noun"), "number": (WH_NUMBERS, "number"),
                       "time": (FAKES["year"], "year")}.get(group, (CATCH_ALL, "other"))
        return FakeChoice("catch_all", kind, self._rotated(q, fixed[self.fake_set]))

    def _asked(self, noun, head, gold, seen, banned, gold_norm, rng, k) -> FakeChoice | None:
        """A fake of the kind the question names ("Which river", "What type of engine"): for a
        name, a name of that kind ("the Kolmogorov River"); for a common noun, one of the kinds
        WordNet files under the asked noun, GloVe's nearest to the gold's head first ("Which
        diseases": typhus -> cancers). Before the gold's own part of speech, which knows nothing
        of the question ("hamsters" for a disease)."""
        if _reads_as_name(gold):
            det = "the " if self._determiner(gold) == "the" else ""
            names = tuple(f"{det}{name} {noun.title()}" for name in NAME_STEMS[self.fake_set])
            banned_but_the_kind = banned - {noun, _plural(noun)}  # the kind's own word may recur ("Canal")
            fakes = self._rotate(names, seen, banned_but_the_kind, gold_norm, k, rng)
            return FakeChoice("asked_name", "proper_noun", fakes) if fakes else None
        lemma = (head.lemma_ or head.text).lower() if head is not None and head.tag_ in ("NN", "NNS") else None
        if lemma is None and len(gold.split()) == 1:  # a lone noun the tagger missed ("feared typhus above all")
            lemma = self.resources.wordnet.morphy(gold.lower(), "n")
        if lemma == noun:
            return None  # "What conjecture": "the twin prime conjecture"; other ones are the head's kin (lexfile)
        plural = head is not None and head.tag_ == "NNS"
        kinds = self._kinds_of(noun, lemma)
        if plural:  # a plural GloVe knows: "cancers", not "tuberculosises"
            kinds = [_plural(w) for w in kinds if _plural(w) in self.resources.glove]
        out = [self._with_determiner(w, gold, "NNS" if plural else "NN") for w in kinds]
        out = [t for t in out if self._fits(t, seen, banned, gold_norm) and self.pool.in_set(t, self.second_set)]
        out = sorted(out[:2 * k], key=lambda t: self.pool.uses[t])[:k]
        return FakeChoice("asked_kind", "plural_noun" if plural else "noun", tuple(out)) if out else None

    def _kinds_of(self, noun: str, lemma: str | None) -> list[str]:
        """Single-word hyponyms (to three levels) of the sense of the asked `noun` above the gold's
        head `lemma`, the head's closest WordNet kin first (welding: soldering before
        sterilisation), then GloVe's nearest; less the head's synonyms, hypernyms and hyponyms.
        Nothing where no sense of `noun` is above the head: the sense is then unknown, and GloVe's
        pick among every sense's kinds was read to miss ("What branch of computer science":
        bifurcation; "What principle": continuation)."""
        wordnet, glove = self.resources.wordnet, self.resources.glove
        senses = wordnet.synsets(noun, "n")
        gold_sense, sense = None, None
        for g in wordnet.synsets(lemma, "n") if lemma else ():
            above = set(g.closure(lambda x: x.hypernyms() + x.instance_hypernyms()))
            sense = next((x for x in senses if x in above), None)
            if sense is not None:
                gold_sense = g
                break
        if sense is None:
            return []
        found: dict[str, object] = {}
        for hypo in sense.closure(lambda x: x.hyponyms(), depth=3):
            for name in hypo.lemma_names():
                if name.isalpha() and name.islower() and name in glove and name not in (noun, lemma):
                    found.setdefault(name, hypo)
        near = self._nearest(list(found), lemma if lemma in glove else noun)
        near.sort(key=lambda w: -round(gold_sense.wup_similarity(found[w]) or 0.0, 1))  # stable: GloVe within
        return [w for w in near[:40] if self.resources.same_meaning(lemma, w, "NOUN") not in self._RESTATES]

    # GloVe cosine to the gold from which a fake of an unsure rule counts as of the gold's kind
    _NEAR = 0.3

    def _nearest(self, phrases, gold: str, floor: float | None = None) -> list[str]:
        """`phrases` nearest `gold` first, by the mean GloVe vector of their content words; with
        `floor`, only those at least that near (none where GloVe knows no word of the gold)."""
        at = self._phrase_vector(gold)
        if at is None:
            return [] if floor is not None else list(phrases)
        scored = []
        for p in phrases:
            v = self._phrase_vector(p)
            cos = float(v @ at) if v is not None else -1.0
            if floor is None or cos >= floor:
                scored.append((-cos, p))
        return [p for _, p in sorted(scored, key=lambda cp: cp[0])]

    def _phrase_vector(self, text: str):
        glove, stop = self.resources.glove, self.resources.stopwords
        vectors = [glove.vector(w) for w in re.findall(r"[a-z]+", text.lower()) if w in glove and w not in stop]
        if not vectors:
            return None
        mean = sum(vectors) / len(vectors)
        norm = float((mean @ mean) ** 0.5)
        return mean / norm if norm else None

    @staticmethod
    def _asked_group(example, kind: str) -> str | None:
        """The group the catch-all keeps: the gold's own (name, time, number), else what the
        question's asking wh-word asks for (the audit's `asked_group`)."""
        group = TYPE_GROUPS.get(kind)
        return group if group in ("name", "time", "number") else asked_group(example.question)

    def _wh(self, q: _Question) -> FakeChoice | None:
        """A fake for the question's wh-word: a person, a year or date, a city, a number, an
        amount of money, a frequency, an event; the data's of the type where the pool has one."""
        wh, noun, gold, lower = q.wh, q.noun, q.gold, q.example.question.lower()

        def typed(rule, kind, key, fixed):
            data = self.pool.choose(key, q.avoid_answers, q.example.context, q.example.question, q.rng, q.k,
                                    self.second_set, real=gold) if key else []
            return FakeChoice(rule, kind, tuple(data) or self._rotated(q, fixed))

        if wh in ("who", "whom", "whose") or (wh in ("what", "which") and _asks_person(noun, q.noun_file)):
            return typed("wh_who", "person", ("person",), FAKES["person"][self.fake_set])
        if wh == "when" or (wh in ("what", "which") and noun in ("year", "date", "day", "month")):
            if _YEAR.search(gold) or noun == "year" or not names_a_month(gold):
                return typed("wh_when", "year", ("year",), FAKES["year"][self.fake_set])
            return typed("wh_when", "date", None, FAKES["date"][self.fake_set])
        if wh == "where":
            return typed("wh_where", "country", ("place", "city"), WH_CITIES[self.fake_set])
        if re.search(r"\bhow many\b", lower):
            return typed("wh_how_many", "number", ("number", "integer"), WH_NUMBERS[self.fake_set])
        if re.search(r"\bhow much\b", lower):
            if re.search(r"[$£€¥]|\b(dollars?|pounds?|euros?)\b", gold, re.I):
                return typed("wh_how_much", "money", ("money",), WH_MONEY[self.fake_set])
            if re.search(r"\d", gold):
                return typed("wh_how_much", "number", ("number", "integer"), WH_NUMBERS[self.fake_set])
            return None
        if re.search(r"\bhow often\b", lower):
            return typed("wh_how_often", "other", None, WH_OFTEN[self.fake_set])
        if re.match(r"\W*what (has |had )?(happened|happens)\b", lower):
            return typed("wh_what_happened", "event", None, WH_HAPPENED[self.fake_set])
        return None

    def _answer_span(self, example):
        """The parsed tokens of the first answer in its context, or None."""
        first = example.answers[0]
        span = self.resources.parse(example.context).char_span(first.start, first.end, alignment_mode="expand")
        return span if span is not None and len(span) else None

    @staticmethod
    def _pos_tag(span) -> tuple[str | None, str]:
        """(tag, word) by Jia and Liang's order: a verb by the answer's first token, else a noun,
        adjective or adverb by its last."""
        toks = [t for t in span if not t.is_punct] if span is not None else []
        if not toks:
            return None, ""
        if toks[0].tag_ in POS_FAKES and toks[0].tag_.startswith("VB"):
            return toks[0].tag_, toks[0].text
        last = toks[-1]
        ok = last.tag_ in POS_FAKES and not last.tag_.startswith("VB") or last.tag_ == "VBG"
        return (last.tag_, last.text) if ok else (None, "")

    def _word_neighbours(self, word: str, tag: str, seen, banned, gold_norm, k) -> tuple[str, ...]:
        """GloVe's nearest words to the answer's word that the tagger gives its tag on their own,
        WordNet knows under its part of speech, and WordNet does not relate to it as a synonym,
        hypernym or hyponym: another adjective, verb or adverb of its kind, in its form."""
        lower = word.lower()
        if not lower.isalpha() or lower not in self.resources.glove:
            return ()
        letter, pos = _NEIGHBOUR_POS[tag]
        near = [w for w, _ in self.resources.glove.nearest(lower, 60) if w.isalpha() and w != lower]
        out = []
        for w, (_, t) in zip(near, self.resources.word_tags(near)):
            if t != tag or not self.resources.wordnet.morphy(w, letter):
                continue
            if self.resources.same_meaning(lower, w, pos) in self._RESTATES:
                continue
            if self._fits(w, seen, banned, gold_norm) and self.pool.in_set(w, self.second_set):
                out.append(w.title() if word[:1].isupper() else w)  # "Pictish": "Slavic", a name's form
        return tuple(sorted(out[:2 * k], key=lambda t: self.pool.uses[t])[:k])

    @staticmethod
    def _determiner(gold: str) -> str:
        lead = gold.split()[0].lower() if gold.split() else ""
        return lead if lead in _DETERMINERS else ""

    def _with_determiner(self, noun: str, gold: str, tag: str) -> str:
        det = self._determiner(gold)
        if not det or tag not in ("NN", "NNS"):  # "the Zanzibar": a name takes none
            return noun
        if det in ("a", "an"):
            if tag != "NN":
                return noun
            det = "an" if noun[0].lower() in "aeiou" else "a"
        return f"{det} {noun}"

    def _file_fakes(self, lemma, plural, gold, seen, banned, gold_norm, rng, k) -> FakeChoice | None:
        """Nouns of `lemma`'s WordNet file (the question's noun or the gold's head): the data's
        own noun phrases whose head is a close relative of it, else the fixed list's, nearest
        first."""
        senses = self.resources.wordnet.synsets(lemma, "n")
        if not senses:
            return None
        sense, lexfile = senses[0], senses[0].lexname()
        kind = "plural_noun" if plural else "noun"
        data = [p for p in self.pool.phrases.get((kind, lexfile), ())
                if self.pool.in_set(p, self.second_set) and self.pool.uses[p] < self.pool.cap
                and self._close(p, sense) and self._fits(p, seen, banned, gold_norm)]
        rng.shuffle(data)
        data.sort(key=lambda p: (-self._similarity(p.split()[-1], sense), self.pool.uses[p]))
        if data:
            return FakeChoice("lexfile", kind, tuple(data[:k]))
        fixed = LEXFILE_FAKES.get(lexfile)
        if not fixed:
            return None
        nouns = [self._with_determiner(pair[int(plural)], gold, "NNS" if plural else "NN")
                 for pair in fixed[self.fake_set]]
        fit = [n for n in nouns if self._fits(n, seen, banned, gold_norm)]
        rng.shuffle(fit)
        fit.sort(key=lambda n: (-self._similarity(n.split()[-1], sense), self.pool.uses[n]))
        return FakeChoice("lexfile", kind, tuple(fit[:k])) if fit else None

    # relations under which a neighbour would be the answer again, or a vaguer one that holds
    _RESTATES = frozenset({"synonym", "spelling variant", "inflection", "hypernym", "hyponym"})

    def _neighbours(self, lemma, plural, gold, seen, banned, gold_norm, k) -> FakeChoice | None:
        """GloVe's nearest nouns to the answer's head whose first WordNet sense is of the head's
        file, and which WordNet does not relate to it as a synonym, hypernym or hyponym (a
        sibling is welcome: another thing of the same kind), least used first."""
        wordnet, glove = self.resources.wordnet, self.resources.glove
        senses = wordnet.synsets(lemma, "n")
        if not senses or lemma not in glove:
            return None
        lexfile = senses[0].lexname()
        out = []
        for word, _ in glove.nearest(lemma, 60):
            if not word.isalpha() or wordnet.morphy(word, "n") != word or self.resources.word_pos(word) != "NOUN":
                continue  # a noun's lemma ("latest", "saying" are other words first; plurals are made here)
            first = wordnet.synsets(word, "n")
            if not first or first[0].lexname() != lexfile or first[0].instance_hypernyms():
                continue
            if self.resources.same_meaning(lemma, word, "NOUN") in self._RESTATES:
                continue
            if plural and _plural(word) not in glove:
                continue  # a plural English uses: "cancers", not "tuberculosises"
            text = self._with_determiner(_plural(word) if plural else word, gold, "NNS" if plural else "NN")
            if self._fits(text, seen, banned, gold_norm) and self.pool.in_set(word, self.second_set):
                out.append(text)
        out = sorted(out[:2 * k], key=lambda t: self.pool.uses[t])  # the nearest, rotated by use
        return FakeChoice("lexfile", "plural_noun" if plural else "noun", tuple(out[:k])) if out else None

    def _similarity(self, word: str, sense) -> float:
        senses = self.resources.wordnet.synsets(self.resources.wordnet.morphy(word.lower(), "n") or word.lower(), "n")
        return (sense.wup_similarity(senses[0]) or 0.0) if senses else 0.0

    def _close(self, phrase: str, sense) -> bool:
        """A noun whose first sense shares a hypernym with the gold's at depth 5 or more (bridge and
        aqueduct: structure), not the file's root alone (both artifacts)."""
        head = phrase.split()[-1].lower()
        senses = self.resources.wordnet.synsets(self.resources.wordnet.morphy(head, "n") or head, "n")
        if not senses or senses[0] == sense:
            return False
        common = sense.lowest_common_hypernyms(senses[0])
        return bool(common) and max(c.min_depth() for c in common) >= 5

# Jia and Liang's order past the typed pool (the module docstring): a caller takes the first rule
# whose sentences pass its checks. The kind the question names (asked_name, asked_kind) and the
# closed-book answer are ours, before the gold's own form; two rules record `lexfile`, and the
# part-of-speech rules, GloVe's words of the tag before Jia and Liang's fixed ones, `pos_<tag>`.
ANSWER_RULES: tuple[AnswerRule, ...] = (
    AnswerRule("date", "date", FallbackFakes._date_rule),
    AnswerRule("number", "number", FallbackFakes._number_rule),
    AnswerRule("asked_name", "asked_name", FallbackFakes._asked_name_rule),
    AnswerRule("closed_book", "closed_book", FallbackFakes._closed_book_rule),
    AnswerRule("asked_kind", "asked_kind", FallbackFakes._asked_kind_rule),
    AnswerRule("abbreviation", "abbreviation", FallbackFakes._abbreviation_rule),
    AnswerRule("ner", "ner", FallbackFakes._ner_rule),
    AnswerRule("wh", "wh_<word>", FallbackFakes._wh_rule),
    AnswerRule("lexfile_neighbours", "lexfile", FallbackFakes._lexfile_neighbours_rule),
    AnswerRule("pos_neighbours", "pos_<tag>", FallbackFakes._pos_neighbours_rule),
    AnswerRule("lexfile_nouns", "lexfile", FallbackFakes._lexfile_nouns_rule),
    AnswerRule("pos_words", "pos_<tag>", FallbackFakes._pos_words_rule),
    AnswerRule("catch_all", "catch_all", FallbackFakes._catch_all_rule),
)
