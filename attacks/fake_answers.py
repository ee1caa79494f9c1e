"""Fake answers of the same type as the real one (Jia and Liang's AddSent, step 2).

An answer's type comes from the named entity it overlaps in the parsed context (refined: a
month, a year, a weekday), else from its form (an abbreviation, a number), else from the Penn tag
of its head word. Each type has two disjoint lists of fake answers: the first for AddSent and
AddOneSent, the second for AddSentMod, so that a model trained on one set of fake answers can
be tested on unseen ones. A fake answer never equals the real answer or appears in the context.
"""

from __future__ import annotations

import re

from advrace.metrics import normalize_answer

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
    "person": (("Jeff Dean", "Ada Lovelace", "Ingrid Holm"), ("Rufus Albee", "Mara Okafor", "Tomas Vrba")),
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
