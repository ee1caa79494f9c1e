"""Fake answers of the same type as the real one (Jia and Liang's AddSent, step 2).

An answer's type comes from the named entity it overlaps in the parsed context (refined: a
month, a year, a weekday), else from its form (an abbreviation, a number), else from the Penn tag
of its head word.

Fake answers come from a `FakePool`: the data's own phrases of each type, collected from the
parsed contexts of the examples an attack sees together (spaCy's entities, refined as above;
for a common-noun answer, noun phrases whose head shares the answer head's WordNet
lexicographer file, so that a belief is replaced by a theory and not by a tractor; for a verb,
verbs of the same tag and verb file). The pool is split in two by a stable hash of each phrase:
the first half for AddSent and AddOneSent, the second for AddSentMod, so that a model trained on
one set of fake answers can be tested on unseen ones. Each phrase serves at most `cap` times;
the fixed lists (FAKES, disjoint per set) serve only when the data has no phrase of the type
left, under the same cap. A fake answer never shares a word with an answer of its paragraph,
never appears in the context or the question. Where the type is unknown (`UNTYPED`), or the
question disagrees with it, the pool has no fake: Jia and Liang's remaining rules
(`answer_rules`) make one, typed as finely as each allows, so that every question gets a fake.
"""

from __future__ import annotations

import re
import zlib
from collections import Counter

from advrace.core.checks.sentences import asking_wh
from advrace.metrics import normalize_answer

from ..sentences.declarative_rules import in_name  # one test of a name's wh-word for both modules

MONTHS = ("january", "february", "march", "april", "may", "june", "july", "august", "september",
          "october", "november", "december")
WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")

ENTITY_TYPES = {
    "PERSON": "person", "NORP": "nationality", "FAC": "facility", "ORG": "organisation",
    "GPE": "country", "LOC": "location", "PRODUCT": "product", "EVENT": "event",
    "WORK_OF_ART": "work_of_art", "LAW": "law", "LANGUAGE": "language", "DATE": "date",
    "TIME": "time", "PERCENT": "percent", "MONEY": "money", "QUANTITY": "quantity",
    "ORDINAL": "ordinal", "CARDINAL": "number",
}

# type -> (AddSent / AddOneSent fakes, AddSentMod fakes)
FAKES: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    # a dozen each: the fallback rotates among them, so that no name recurs through a split
    "person": (("Jeff Dean", "Ada Lovelace", "Ingrid Holm", "Oscar Whitfield", "Lena Marchetti", "Victor Osei",
                "Helen Achterberg", "Paulo Ferreira", "Nadia Lindqvist", "Howard Brennan", "Teresa Quill",
                "Samuel Okoro"),
               ("Rufus Albee", "Mara Okafor", "Tomas Vrba", "Edith Galloway", "Jonas Pellegrini", "Ruth Hadley",
                "Martin Szabo", "Clara Ostrander", "Felix Amundsen", "Irene Castellano", "Walter Kimura",
                "Agnes Delacroix")),
    "nationality": (("Chilean", "Icelandic", "Kenyan"), ("Latvian", "Peruvian", "Maltese")),
    "facility": (("Stark Tower", "the Hoover Bridge"), ("Orwell Hall", "the Kessler Dam")),
    "organisation": (("Stark Industries", "the Acme Corporation"), ("Wayne Enterprises", "the Globex Company")),
    "country": (("Chicago", "Norway", "Nairobi"), ("Lima", "Portugal", "Osaka")),
    "location": (("the Pacific Ocean", "the Andes"), ("the Gobi Desert", "the Baltic Sea")),
    "product": (("the Tesla Roadster", "the Walkman"), ("the Polaroid camera", "the Game Boy")),
    "event": (("the Battle of Hastings", "the Summer Olympics"), ("the Boston Tea Party", "the World Expo")),
    "work_of_art": (("The Great Gatsby", "Starry Night"), ("Moby Dick", "The Scream")),
    "law": (("the Magna Carta", "the Clean Air Act"), ("the Treaty of Ghent", "the Homestead Act")),
    "language": (("Finnish", "Swahili"), ("Basque", "Tagalog")),
    "date": (("October 1, 1997", "March 3, 1911"), ("June 22, 1954", "August 9, 1932")),
    "month": (("July", "February"), ("November", "April")),
    "year": (("1997", "1911"), ("1954", "1932")),
    "weekday": (("Tuesday", "Sunday"), ("Thursday", "Saturday")),
    "time": (("7:30 a.m.", "noon"), ("11:45 p.m.", "midnight")),
    "percent": (("12 percent", "63 percent"), ("41 percent", "7 percent")),
    "money": (("$2.5 million", "$400"), ("$17 billion", "$85")),
    "quantity": (("40 kilometres", "300 tons"), ("12 miles", "90 kilograms")),
    "ordinal": (("fifth", "eleventh"), ("third", "ninth")),
    "number": (("17", "2,400"), ("36", "9,100")),
    "abbreviation": (("NAACP", "UNESCO"), ("NATO", "FIFA")),
    "proper_noun": (("Kolmogorov", "Zanzibar"), ("Calloway", "Tamsin")),
    "plural_noun": (("tractors", "violins"), ("lanterns", "bicycles")),
    "noun": (("a tractor", "a violin"), ("a lantern", "a bicycle")),
    "adjective": (("purple", "fragile"), ("ancient", "hollow")),
    "verb": (("juggle", "paint"), ("knit", "whistle")),
    "verb_past": (("juggled", "painted"), ("knitted", "whistled")),
    "verb_ing": (("juggling", "painting"), ("knitting", "whistling")),
    "adverb": (("slowly", "rarely"), ("loudly", "gently")),
    "other": (("Cheerios", "the purple lantern"), ("Pluto", "the hollow violin")),
}
TYPES = tuple(FAKES)
ABBREVIATION_RE = re.compile(r"^[A-Z][A-Z0-9&.]{1,}$")
NUMBER_RE = re.compile(r"^[\d.,]+$")


def _date_type(text: str) -> str:
    lower = text.lower().strip()
    if lower in MONTHS:
        return "month"
    if lower in WEEKDAYS:
        return "weekday"
    if re.fullmatch(r"(in )?\d{4}s?", lower):
        return "year"
    return "date"


def answer_type(context: str, start: int, end: int, resources) -> str:
    """One of TYPES for the answer at context[start:end]."""
    text = context[start:end].strip()
    doc = resources.parse(context)
    best, best_overlap = None, 0
    for ent in doc.ents:
        overlap = min(ent.end_char, end) - max(ent.start_char, start)
        if overlap > best_overlap:
            best, best_overlap = ent, overlap
    if best is not None and best_overlap >= 0.5 * max(1, len(text)):
        kind = ENTITY_TYPES.get(best.label_, "other")
        return _date_type(text) if kind == "date" else kind
    words = text.split()
    if len(words) == 1 and ABBREVIATION_RE.match(words[0]):
        return "abbreviation"
    if NUMBER_RE.match(text):
        return "year" if re.fullmatch(r"\d{4}", text) and 1000 <= int(text) <= 2100 else "number"
    span = doc.char_span(start, end, alignment_mode="expand")
    if span is None or not len(span):
        return "other"
    tag = span.root.tag_
    if tag in ("NNP", "NNPS"):
        return "proper_noun"
    if tag == "NNS":
        return "plural_noun"
    if tag == "NN":
        return "noun"
    if tag.startswith("JJ"):
        return "adjective"
    if tag in ("VBD", "VBN"):
        return "verb_past"
    if tag == "VBG":
        return "verb_ing"
    if tag.startswith("VB"):
        return "verb"
    if tag.startswith("RB"):
        return "adverb"
    return "other"


def fake_answers(kind: str, real: str, context: str, second_set: bool = False) -> list[str]:
    """The type's fake answers, in order, minus any equal to the real answer or found in the
    context."""
    pool = FAKES.get(kind, FAKES["other"])[1 if second_set else 0]
    real_norm = normalize_answer(real)
    context_norm = f" {normalize_answer(context)} "
    return [f for f in pool if normalize_answer(f) != real_norm
            and f" {normalize_answer(f)} " not in context_norm]


# types whose fake answer cannot be told to have the answer's kind: no fake for them
UNTYPED = frozenset({"other", "proper_noun", "adjective", "adverb", "abbreviation"})
NOUN_TYPES = frozenset({"noun", "plural_noun"})
VERB_TYPES = {"verb": ("VB", "VBP"), "verb_past": ("VBD", "VBN"), "verb_ing": ("VBG",)}
MAX_FAKE_WORDS = 5
_SKIP_FIRST = frozenset({"PRP", "PRP$", "WDT", "WP", "WP$", "EX"})


def lexfile_of(word: str, resources, pos: str = "n") -> str | None:
    """The WordNet lexicographer file of the word's most frequent sense of `pos` (noun.cognition)."""
    senses = resources.wordnet.synsets(word.lower(), pos)
    return senses[0].lexname() if senses else None


# nouns of a wh-phrase that say nothing of the answer's kind ("what type of engine": engine)
GENERIC_WH_NOUNS = frozenset({"type", "kind", "sort", "form", "name", "part", "one", "state", "term",
                              "word", "title", "group", "thing", "example", "number", "amount", "variety"})
_NAMED_KINDS = frozenset({"person", "organisation", "country", "location", "facility", "nationality"})
# a wh-noun of these WordNet files asks for no person, group or place ("which sport": not the NBA)
_NOT_NAMED_FILES = frozenset({"noun.act", "noun.attribute", "noun.cognition", "noun.substance", "noun.quantity",
                              "noun.time", "noun.feeling", "noun.state", "noun.process", "noun.phenomenon",
                              "noun.relation", "noun.shape", "noun.body", "noun.plant", "noun.animal",
                              "noun.food", "noun.motive", "noun.possession"})


def wh_noun(question: str, resources) -> tuple[str, str | None]:
    """The question's wh-word and the noun its wh-phrase asks for ("What German poet" -> poet;
    "What type of engine" -> engine; "What is the busiest airport" -> airport; "What two bodies"
    -> body), as a lemma, or None. A wh-word inside a name or title ("Doctor Who", "The Who") is
    none that asks, and the name's words are no noun of the wh-phrase ("the first Doctor Who
    serial" -> serial)."""
    doc = resources.parse(question)
    toks = list(doc)
    names = {i for i in range(len(toks)) if in_name(doc, i)}
    for i in list(names):  # the capitalised words before it: "Doctor" of "Doctor Who"
        k = i - 1
        while k >= 0 and toks[k].text[:1].isupper() and toks[k].tag_ in ("NN", "NNS", "NNP", "NNPS"):
            names.add(k)
            k -= 1
    asking = asking_wh(question) or 0  # not a relative pronoun before it ("those persons who oppose what?")
    for i, t in enumerate(toks):
        if t.tag_ not in ("WDT", "WP", "WP$", "WRB") or t.idx < asking or i in names:
            continue
        noun = None
        start = i + 1
        if start + 1 < len(toks) and toks[start].lemma_ == "be" and toks[start + 1].tag_ in ("DT", "PRP$", "CD"):
            start += 2  # "What is the busiest airport": the noun the copula's complement names
        window = toks[start:start + 6 + len(names & set(range(start, start + 8)))]  # a name's words count not
        for k, u in enumerate(window):
            if start + k in names:
                continue
            if u.tag_ in ("NN", "NNS"):
                noun = (u.lemma_ or u.text).lower()
                following = window[k + 1] if k + 1 < len(window) else None
                if noun not in GENERIC_WH_NOUNS and not (following is not None and following.tag_ in ("NN", "NNS")
                                                         and start + k + 1 not in names):
                    break  # the last noun of a compound: "what welding process" -> process
            elif u.tag_ not in ("JJ", "JJR", "JJS", "DT", "IN", "HYPH", "NNP", "NNPS", "CC", "CD"):
                break  # a number stays in the phrase: "What two bodies"
        return t.lower_, (noun if noun not in GENERIC_WH_NOUNS else None)
    return "", None


def type_key(kind: str, context: str, start: int, end: int, resources, question: str = "",
             common_words: bool = True) -> tuple | None:
    """The pool key of an answer of type `kind`: the type itself, refined for common nouns and
    verbs by the WordNet file of the noun the question asks for ("what molecule") and of the
    answer's head, which must agree (`common_words`: False gives common nouns and verbs no fake
    at all); None where no fake answer can have its kind, or where the question and the
    type disagree (spaCy took "Dolby Digital" for a person: a person answers "who", "whose" or
    "what poet", not "what soundtracks")."""
    if kind in UNTYPED or (not common_words and (kind in NOUN_TYPES or kind in VERB_TYPES)):
        return None
    gold = context[start:end].strip()
    if kind == "person" and not _fits_gold_person(gold):
        return None  # "the Merkits": a tribe the tagger took for a person
    if kind in _CAPITALISED_KINDS - {"nationality", "language"} and not _reads_as_name(gold, resources):
        return None  # "Climate Change", "free India", "DTIME(f(n))": no organisation, no country
    if kind == "number" and re.fullmatch(r"\d{4}", gold) and 1000 <= int(gold) <= 2100:
        kind = "year"
    if kind == "quantity":
        return refined_key(kind, gold, resources)
    if kind == "person" and re.search(r"['’]s?$", gold):
        return None  # "Gandhi's": a possessive reads as no name in the sentence
    wh, noun = wh_noun(question, resources) if question else ("", None)
    noun_file = lexfile_of(noun, resources) if noun else None
    if kind == "person" and question and not (wh in ("who", "whom", "whose") or noun_file == "noun.person"):
        return None
    if kind in _NAMED_KINDS and noun_file in _NOT_NAMED_FILES:
        return None
    counted = wh == "how" and kind == "number"  # "How many players": the noun is what is counted, no person
    if noun_file == "noun.person" and not counted and kind not in NOUN_TYPES | {"person", "nationality"}:
        return None  # "Which Member of Parliament": a person, whatever NER said
    if wh in ("who", "whom") and kind not in ("person", "nationality", "organisation", "country"):
        return None
    if kind in NOUN_TYPES or kind in VERB_TYPES:
        # a long answer is a description or a clause, of no kind a phrase of the data shares
        if len(context[start:end].split()) > (4 if kind in NOUN_TYPES else 2):
            return None
        span = resources.parse(context).char_span(start, end, alignment_mode="expand")
        if span is None or not len(span):
            return None
        head = span.root
        found = lexfile_of(head.lemma_ or head.text, resources, "n" if kind in NOUN_TYPES else "v")
        # the noun the question asks for and the answer's head must agree: WordNet's first
        # senses are a rough guide, two of them agreeing a firmer one; a question that names no
        # noun ("What are associated with normal forces?") gives no second opinion
        if not found or (kind in NOUN_TYPES and noun_file != found):
            return None
        return kind, found
    key = refined_key(kind, gold, resources)
    if key is None or not question:
        return key
    return key if _question_agrees(key, wh, noun, noun_file, resources) else None


def _question_agrees(key: tuple, wh: str, noun: str | None, noun_file: str | None, resources) -> bool:
    """Whether the question asks for what the refined key is: a place for "where" or for its own
    class ("which county": a county), a named thing of the head it names ("which museum"), a
    nationality for "what nationality"."""
    if key[0] == "place":
        if noun is not None:
            return PLACE_NOUNS.get(noun) == key[1]
        return wh == "where" or (wh == "who" and key[1] == "country")
    if key[0] == "named":
        return noun is None and wh in ("who", "where") or noun == key[1] or (
            noun is not None and noun_file == lexfile_of(key[1], resources))  # "what agreement": a convention
    if key[0] == "nationality":
        return noun in NATIONALITY_NOUNS
    return True


def _entity_kind(ent) -> str | None:
    kind = ENTITY_TYPES.get(ent.label_)
    text = ent.text.strip()
    if kind == "date":
        kind = _date_type(text)
        if kind == "date" and not re.search(r"\d", text):
            return None  # "today", "each year", "the following decade"
    if kind in ("time", "quantity", "money", "percent", "number") and not re.search(r"\d", text):
        return None if kind != "number" else kind
    return kind


def _usable(text: str) -> bool:
    words = text.split()
    return (0 < len(words) <= MAX_FAKE_WORDS and any(c.isalnum() for c in text) and "\n" not in text
            and not re.search(r"[()\[\]\"“”;:]", text) and not re.search(r"['’]s?$", text))


_NAME_WORD = re.compile(r"^([A-Z][a-z]+(-[A-Z]?[a-z]+)?|[A-Z]\.)$")
_CAPITALISED_KINDS = frozenset({"organisation", "country", "location", "facility", "product", "event",
                                "work_of_art", "law", "nationality", "language"})
_TIDY_NUMBER = re.compile(r"^(\d{1,3}(,\d{3})*|\d+)(\.\d+)?$")


def _fits_kind(kind: str, text: str) -> bool:
    """A cheap check of the tagger's label: a person has a first and a last name, all
    capitalised ("Antioch" alone is as often a place); a name ends in a capital."""
    words = text.split()
    if kind == "person":  # "Saturn IB" is no name
        return len(words) >= 2 and all(_NAME_WORD.match(w) for w in words)
    if kind in _CAPITALISED_KINDS and not (words[-1][:1].isupper() or words[-1][:1].isdigit()):
        return False  # "Arbeia in": the tagger's span ran past the name
    return True


_CLOCK = re.compile(r"\d:\d\d|\b[ap]\.?m\b|\bnoon\b|\bmidnight\b|o'clock", re.I)
_NAME_FUNCTION_WORDS = frozenset({"the", "of", "and", "for", "de", "in", "on", "at", "a", "an", "to", "&"})


def _reads_as_name(text: str, resources) -> bool:
    """A phrase that reads as a name: letters, digits and name punctuation only, every word
    capitalised but for a few function words, and not one or two common nouns only."""
    if re.search(r"[^\w\s.'’&,-]", text):
        return False
    words = [w for w in text.split() if w.lower() not in _NAME_FUNCTION_WORDS]
    if not words or any(not (w[:1].isupper() or w[:1].isdigit()) for w in words):
        return False
    # WordNet knows the whole phrase: a name when its first sense is an instance ("Black Sea"),
    # none when a common noun ("Climate Change")
    whole = "_".join(w for w in text.split() if w.lower() != "the")
    senses = resources.wordnet.synsets(whole.lower(), "n")
    if senses:
        return bool(senses[0].instance_hypernyms())
    # "Ward": a name of one or two common nouns is more often none
    return len(words) > 2 or not all(_common_noun(w.strip(".,"), resources) for w in words)


# what a quantity measures, by its unit: "40 kilometres" is no fake for a mass or a speed
_UNITS = (
    ("speed", r"mph|km/h|kph|knots?|miles per hour|kilometres per hour|kilometers per hour|m/s"),
    ("area", r"sq|square|km2|km²|acres?|hectares?|ha"),
    ("volume", r"cubic|litres?|liters?|gallons?|barrels?|m3|m³"),
    ("length", r"km|kilometres?|kilometers?|miles?|mi|metres?|meters?|m|feet|foot|ft|inches|inch|in|cm|mm|yards?"),
    ("mass", r"tons?|tonnes?|kg|kilograms?|grams?|g|pounds?|lbs?|lb|ounces?|oz"),
    ("power", r"horsepower|hp|watts?|kw|mw|gw|kilowatts?|megawatts?|gigawatts?"),
    ("temperature", r"degrees?|°[cf]?|celsius|fahrenheit"),
    ("energy", r"joules?|calories?|kwh|twh|gwh"),
)


def quantity_kind(text: str) -> str | None:
    """What a quantity measures (length, mass, area, ...), by its first unit, or None."""
    for kind, units in _UNITS:
        if re.search(rf"(?<![A-Za-z])({units})(?![A-Za-z])", text, re.I):
            return kind
    return None


def _fits_gold_person(text: str) -> bool:
    words = text.strip().split()
    return bool(words) and words[0][:1].isupper() and words[0].lower() != "the"


def _common_noun(word: str, resources) -> bool:
    """A word WordNet knows as a common noun (its first sense is no instance: "university",
    "town", not "Georgia" or "Charles")."""
    senses = resources.wordnet.synsets(word.lower(), "n")
    return bool(senses) and not senses[0].instance_hypernyms()


def _named(kind: str, text: str, resources) -> bool:
    """Whether a phrase the tagger labelled a name reads as one: a person's words, and a
    one-word name of another kind, are no common nouns ("Manakin Town", "Civil Disobedience"
    and "University" are no fakes)."""
    words = text.split()
    if kind == "person":
        return not any(_common_noun(w, resources) for w in words)
    if kind in _CAPITALISED_KINDS - {"nationality", "language"}:
        return _reads_as_name(text, resources)
    return True


# the classes a place name is judged by, nearest first on its WordNet hypernym path
_PLACE_SYNSETS = {
    "country.n.02": "country", "kingdom.n.02": "country", "empire.n.01": "country",
    "state.n.01": "state", "province.n.01": "state", "county.n.02": "county",
    "city.n.01": "city", "town.n.01": "city", "capital.n.03": "city", "municipality.n.01": "city",
    "continent.n.01": "continent", "sea.n.01": "sea", "ocean.n.01": "sea", "gulf.n.01": "sea",
    "bay.n.01": "sea", "river.n.01": "river", "stream.n.01": "river", "lake.n.01": "lake",
    "mountain.n.01": "mountain", "range.n.04": "mountain", "island.n.01": "island",
    "peninsula.n.01": "peninsula", "desert.n.01": "desert", "geographical_area.n.01": "region",
}
# a name WordNet does not know, by its last word ("Duval County", "the St. Johns River")
_PLACE_WORDS = {"county": "county", "river": "river", "sea": "sea", "ocean": "sea", "gulf": "sea",
                "bay": "sea", "lake": "lake", "island": "island", "islands": "island", "mountains": "mountain",
                "mountain": "mountain", "peninsula": "peninsula", "desert": "desert", "city": "city",
                "province": "state", "region": "region"}
# the noun of a question that asks for a place of one class ("which nation")
PLACE_NOUNS = {**{w: c for w, c in _PLACE_WORDS.items() if not w.endswith("s") or w == "islands"},
               "nation": "country", "country": "country", "state": "state", "town": "city",
               "capital": "city", "continent": "continent", "area": "region", "tributary": "river"}
NATIONALITY_NOUNS = frozenset({"nationality", "ethnicity", "descent", "origin", "ancestry", "heritage"})
_RANGE = re.compile(r"\b(to|and|between|from|up|over|under|about|around|nearly|almost|approximately|more|less|"
                    r"than|at|least|most|some|late|early|mid|ago|circa|c\.|bp)\b|[–—]|\d-\d", re.I)
_SPAN = re.compile(r"\b(to|between)\b|[–—]|\d-\d", re.I)
_NUMBER_WORDS = frozenset(("one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
                           "fifteen sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy "
                           "eighty ninety hundred").split())
_CURRENCY = re.compile(r"[$£€¥]|\b(dollars?|pounds?|euros?|yen|yuan|rupees?|francs?|marks?)\b", re.I)
_MONTH = "(" + "|".join(MONTHS) + ")"


def place_class(text: str, resources) -> str | None:
    """The class of a place name (country, city, river, ...): the nearest class on the WordNet
    hypernym path of its first sense when that sense is a place ("Brazil": country, "Edinburgh":
    city), else its last word's ("Duval County": county); None when neither tells."""
    words = [w for w in text.split() if w.lower() != "the"]
    senses = resources.wordnet.synsets("_".join(words).lower(), "n") if words else []
    if senses:
        first = senses[0]
        if not first.instance_hypernyms() or first.lexname() not in ("noun.location", "noun.object"):
            return None  # "Newton", "Lavoisier": WordNet's first sense is a person, not a place
        frontier, seen = list(first.instance_hypernyms()), set()
        while frontier:
            for syn in frontier:
                if syn.name() in _PLACE_SYNSETS:
                    return _PLACE_SYNSETS[syn.name()]
            seen.update(frontier)
            frontier = [h for syn in frontier for h in syn.hypernyms() if h not in seen]
        return None
    return _PLACE_WORDS.get(words[-1].lower()) if len(words) > 1 else None


def name_head(text: str, resources) -> str | None:
    """The common noun a name is built on ("Van Nuys Airport": airport, "University of Paris":
    university), as a lemma; None for a name of names only ("Pittsburgh Steelers")."""
    words = [w for w in text.split() if w.lower() != "the"]
    while words and re.fullmatch(r"\d+|[IVXLC]+", words[-1]):
        words = words[:-1]  # "State Route 99", "Super Bowl XXXIII"
    if "of" in words[1:]:
        words = words[:words.index("of", 1)]  # "University of Paris"
    elif len(words) < 2:
        return None  # one word: the name itself, no head
    head = words[-1].strip(".,").lower()
    lemma = resources.wordnet.morphy(head, "n") or head
    return lemma if _common_noun(lemma, resources) else None


def _date_shape(text: str) -> str | None:
    if _RANGE.search(text):
        return None  # "between 1550 and 1580", "late 1961", "22,000 years ago": no date of one shape
    body = re.sub(r"^(the|in|on)\s+", "", text.strip(), flags=re.I)
    for shape, pattern in (("decade", r"\d{3}0s"), ("day month year", rf"\d{{1,2}} {_MONTH},? \d{{4}}"),
                           ("day month year", rf"{_MONTH} \d{{1,2}},? \d{{4}}"), ("month year", rf"{_MONTH},? \d{{4}}"),
                           ("day month", rf"(\d{{1,2}} {_MONTH}|{_MONTH} \d{{1,2}})")):
        if re.fullmatch(pattern, body, re.I):
            return shape
    return None


def _number_shape(text: str) -> str | None:
    if text.lower() in _NUMBER_WORDS:
        return "word"
    if _TIDY_NUMBER.match(text):
        return "decimal" if "." in text else "integer"
    return None  # "almost a third", "23–16", "3:08", "hundreds"


def refined_key(kind: str, text: str, resources) -> tuple | None:
    """The pool key of a phrase of an entity kind, for a gold answer and a fake alike, so that
    the two share more than the tagger's label: a place's class, a name's head noun, a number's
    and a date's written form; None where the label is not to be trusted."""
    text = text.strip()
    if kind in ("country", "location") and (cls := place_class(text, resources)):
        return "place", cls
    if kind in ("country", "location", "organisation", "facility", "event", "law", "product", "work_of_art"):
        head = name_head(text, resources)  # the tagger's kinds overlap ("Long Beach Airport" a GPE)
        return ("named", head) if head else None
    if kind == "nationality":
        return ("nationality",) if _nationality(text, resources) else None
    if kind in ("number", "year"):
        shape = "decade" if re.fullmatch(r"\d{3}0s", text) else _number_shape(text)
        if kind == "year":
            return ("year", "decade") if shape == "decade" else (("year",) if shape == "integer" else None)
        return ("number", shape) if shape else None
    if kind == "date":
        shape = _date_shape(text)
        return ("date", shape) if shape else None
    if kind in ("percent", "money") and _RANGE.search(text):
        return None
    if kind == "quantity":  # "about 2,850 km" has a measure; "415,000 to 587,000 km" two
        measure = None if _SPAN.search(text) else quantity_kind(text)
        return ("quantity", measure) if measure else None
    if kind == "time" and not _CLOCK.search(text):
        return None  # "17 seconds": a duration, no time of day
    if kind == "money" and not _CURRENCY.search(text):
        return None  # "515 million years": no money
    return (kind,)


def _nationality(text: str, resources) -> bool:
    """One word that WordNet relates to a country ("Korean": Korea), not a faith or a party."""
    if " " in text:
        return False
    for syn in resources.wordnet.synsets(text.lower(), "a")[:2]:
        for lemma in syn.lemmas():
            for p in lemma.pertainyms():
                if p.synset().instance_hypernyms() and p.synset().lexname() == "noun.location":
                    return True
    return False


def _magnitude_gap(text: str, real: str) -> int:
    """How many digits two numbers differ by (24 interceptions: 17 before 2,818)."""
    return abs(len(re.sub(r"\D", "", text.split(".")[0])) - len(re.sub(r"\D", "", real.split(".")[0])))


# the entity kinds whose fixed lists serve a refined key's kind
_FIXED_KINDS = {"place": ("country", "location"),
                "named": ("organisation", "facility", "event", "law", "product", "work_of_art")}


def _words(text: str) -> set[str]:
    return set(normalize_answer(text).split())


class FakePool:
    """Typed fake answers drawn from the data: see the module docstring."""

    def __init__(self, cap: int, resources):
        self.cap = cap
        self.resources = resources  # for the fixed lists' refined keys
        self.phrases: dict[tuple, list[str]] = {}
        self.spread: Counter = Counter()  # contexts a phrase occurs in
        self.uses: Counter = Counter()
        self.by_kind: dict[str, list[str]] = {}  # named phrases by the tagger's kind alone, for answer_rules' `ner`

    @classmethod
    def from_contexts(cls, contexts, resources, cap: int = 3) -> "FakePool":
        pool = cls(cap, resources)
        found: dict[tuple, set[str]] = {}
        labels: dict[str, set[str]] = {}  # the entity kinds a phrase got anywhere
        keys: dict[tuple[str, str], tuple | None] = {}
        for context in dict.fromkeys(contexts):
            doc = resources.parse(context)
            here: set[str] = set()

            def add(key: tuple, text: str) -> None:
                found.setdefault(key, set()).add(text)
                here.add(text)
            for ent in doc.ents:
                kind = _entity_kind(ent)
                text = ent.text.strip()
                labels.setdefault(text, set()).add(ent.label_)
                if kind and _usable(text) and _fits_kind(kind, text) and _named(kind, text, resources):
                    if (kind, text) not in keys:  # a phrase of many passages is keyed once
                        keys[kind, text] = refined_key(kind, text, resources)
                    if keys[kind, text] is not None:
                        add(keys[kind, text], text)
                    if kind in _CAPITALISED_KINDS | {"person"}:
                        found.setdefault(("kind", kind), set()).add(text)
            in_entity = {t.i for ent in doc.ents for t in ent}
            for chunk in doc.noun_chunks:
                root = chunk.root
                if (root.tag_ not in ("NN", "NNS") or chunk[0].tag_ in _SKIP_FIRST
                        or any(t.i in in_entity for t in chunk) or not chunk.text.isascii()):
                    continue
                lexfile = lexfile_of(root.lemma_ or root.text, resources)
                kind = "noun" if root.tag_ == "NN" else "plural_noun"
                if lexfile and _usable(chunk.text):
                    add((kind, lexfile), chunk.text)
            for t in doc:
                for kind, tags in VERB_TYPES.items():
                    if t.tag_ in tags and t.pos_ == "VERB" and t.is_alpha and t.lemma_ not in ("be", "have", "do"):
                        lexfile = lexfile_of(t.lemma_, resources, "v")
                        if lexfile:
                            add((kind, lexfile), t.text.lower())
            pool.spread.update(here)
        # a phrase the tagger labelled two ways ("Lublin" a person here, a place there) is trusted
        # as neither
        pool.phrases = {key: sorted(p for p in v if len(labels.get(p, ())) <= 1) for key, v in found.items()
                        if key[0] != "kind"}
        pool.by_kind = {key[1]: sorted(p for p in v if len(labels.get(p, ())) <= 1) for key, v in found.items()
                        if key[0] == "kind"}
        return pool

    @staticmethod
    def in_set(text: str, second_set: bool) -> bool:
        return zlib.crc32(normalize_answer(text).encode()) % 2 == int(second_set)

    def choose(self, key: tuple | None, avoid_answers, context: str, question: str, rng,
               k: int = 2, second_set: bool = False, real: str = "") -> list[str]:
        """Up to k fake answers of the type `key`: (a number) those of the `real` answer's
        magnitude first, then the least used, then those found in fewest passages (a phrase of one passage,
        not "two" or "France", which every part of a split has: the cap counts per prepared
        batch), ties broken by `rng`; none used `cap` times yet; the fixed lists only when the
        data has none left."""
        if key is None:
            return []
        seen_norm = f" {normalize_answer(context)} {normalize_answer(question)} "
        banned = set().union(*(_words(a) for a in avoid_answers)) if avoid_answers else set()
        if key[0] in ("quantity", "percent", "money"):  # a unit ("kilometres", "percent") may recur
            banned = {w for w in banned if any(c.isdigit() for c in w)}
        elif key[0] in ("named", "place"):  # so may the head a name is built on ("Airport")
            banned -= {key[1], key[1] + "s", key[1] + "es"}

        def fits(text: str) -> bool:
            norm = normalize_answer(text)
            return (bool(norm) and self.uses[text] < self.cap and f" {norm} " not in seen_norm
                    and not (_words(text) & banned))

        data = [p for p in self.phrases.get(key, ()) if self.in_set(p, second_set) and fits(p)]
        rng.shuffle(data)
        data.sort(key=lambda p: (_magnitude_gap(p, real) if key[0] == "number" else 0, self.uses[p], self.spread[p]))
        if data:
            return data[:k]
        if key[0] in NOUN_TYPES or key[0] in VERB_TYPES:
            return []
        # a fake of the fixed lists must have the refined key (a country of the list for a country, not its "Chicago")
        fixed = [f for kind in _FIXED_KINDS.get(key[0], (key[0],)) for f in FAKES.get(kind, ((), ()))[int(second_set)]
                 if fits(f) and refined_key(kind, f, self.resources) == key]
        rng.shuffle(fixed)  # each prepared batch starts the list elsewhere
        fixed.sort(key=lambda f: self.uses[f])
        return fixed[:k]

    def use(self, text: str) -> None:
        self.uses[text] += 1
