"""A RACE question and one option made one declarative sentence that states the option as the
answer: the option fills a blank (rule "blank"), or the declarative rules (`declarative_rules`)
state a wh-question with it, kept only where the option fits the slot the rule gives it. AdvRACE
glued the option after the question instead ("What does Tom like the piano."), which is not
English; `declarative` still makes that form for AddSent's `glued_fallback`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from advrace.core.text import BLANK_OR_PARENS_RE, WORD_RE, fold_case_and_spaces
from advrace.core.checks.option_identity import END_PUNCT_RE

from . import declarative_rules
from .readability import syntax, unknown_word_forms
from .statement_frames import (ABOUT_RE, ASKED_THEN_BLANK_RE, ASKED_THEN_FRAME_RE, BECAUSE_FRAME_RE, BROKEN_RE,
                               CLAUSE_OPENER_RE, CLAUSE_OPTION, DOUBLED_PREP_RE, FINITE_TAGS, FOLLOWING_RE,
                               FRAME_PRONOUN_RE, FUNCTION_WORDS, GLUED_ARTICLE_RE, LEADING_JUNK_RE,
                               OBJECT_TO_SUBJECT, SAYING_RE, SPACE_BEFORE_PUNCT_RE, THERE_RE, THINK_OF_RE,
                               TITLE_BLANK_RE, TITLE_QUOTE_RE, TITLE_RE, TRAILING_DOTS_RE, VERB_PHRASE_OPTION)

GLUED = "glued"  # rule of a sentence that is the question with a distractor after it (`declarative`): not English


def clean_question(question: str) -> str:
    """RACE questions sometimes start with a stray '.' or spaces left over from numbering, and
    glue a preposition to its article ("in-the story", which became "in-another story")."""
    return GLUED_ARTICLE_RE.sub(r"\1 ", LEADING_JUNK_RE.sub("", question)).strip()


def _keeps_capital(text: str, resources) -> bool:
    """Whether the option's first word must stay capitalised mid-sentence (a name, 'I', 'TV',
    a title such as 'Cooking Meals With the Sun')."""
    match = WORD_RE.search(text)
    if match is None or match.start() > 0:
        return True
    word = match.group()
    if word == "I" or word.startswith(("I'", "I’")) or any(c.isupper() for c in word[1:]):
        return True
    long_words = [w for w in WORD_RE.findall(text) if len(w) > 3]
    if len(long_words) >= 2 and all(w[0].isupper() for w in long_words):
        return True
    if resources is None:
        return False
    head = re.match(r"[^\W\d_]+", word)
    if head is None:
        return False
    # "English", "Monday": every WordNet lemma of the word is written with a capital
    names = [lem.name() for ss in resources.wordnet.synsets(head.group().lower()) for lem in ss.lemmas()
             if lem.name().lower() == head.group().lower()]
    if names and all(n == head.group().capitalize() for n in names):
        return True  # not "It": WordNet's "IT" is another word
    if any(n.islower() for n in names) and resources.wordnet.synsets(head.group().lower(), pos="a"):
        return False  # "Fun", "Great": an adjective, which the tagger alone takes for a name
    return resources.word_tags([head.group()])[0][0] == "PROPN"


def named_in_passage(option: str, passage: str) -> bool:
    """Whether the option's first word is one the passage writes with a capital after another
    word ("aunt Polly"): a name, kept capitalised mid-sentence where the tagger alone would not."""
    m = WORD_RE.match(option.lstrip())
    return m is not None and m.group()[:1].isupper() and m.group().lower() not in FUNCTION_WORDS and re.search(
        rf"[\w,;:]\s+{re.escape(m.group())}(?![\w'’-])", passage) is not None


def passage_case(option: str, passage: str) -> str:
    """A one-word option lowercased where the passage writes that word only in
    lowercase ("Knife." -> "knife.", "Fun" -> "fun": RACE capitalises options as answers on
    their own, and the tagger alone takes such a word for a name); a name the passage writes
    with its capital, or a word it writes both ways, is left as it is."""
    m = WORD_RE.match(option.lstrip())
    if m is None or not m.group()[:1].isupper() or not m.group()[1:].islower() \
            or WORD_RE.search(option.lstrip()[m.end():]):
        return option  # an option of several words ("The Life of Samuel Pepys") is left to the tagger
    word = m.group()
    lower = re.search(rf"(?<![\w'’-]){re.escape(word.lower())}(?![\w'’-])", passage)
    if lower is None or named_in_passage(option, passage):
        return option
    start = len(option) - len(option.lstrip())
    return option[:start] + word.lower() + option[start + len(word):]


def fit_option(option: str, at_start: bool, at_end: bool, resources, named: bool = False) -> str:
    """The option as a part of a sentence: no final '.' before more text, no capital mid-sentence
    unless it is a name (`named`: the passage writes it so) or a word that keeps one."""
    option = " ".join(option.split())
    if not at_end:
        option = option.rstrip(". ")
    if not at_start and option[:1].isupper() and not named and not _keeps_capital(option, resources):
        option = option[0].lower() + option[1:]
    return option


def finish_sentence(text: str) -> str:
    """One space between words, none before punctuation or inside a lone pair of quotes
    ('" Emperor Yang "' from a quoted blank), a capital first and one final '.'."""
    text = SPACE_BEFORE_PUNCT_RE.sub(r"\1", " ".join(text.split()))
    if text.count('"') == 2:
        text = re.sub(r'"\s*([^"]*?)\s*"', r'"\1"', text)
    text = END_PUNCT_RE.sub("", LEADING_JUNK_RE.sub("", text))
    if not text:
        return ""
    return text[0].upper() + text[1:] + "."


def declarative(question: str, option: str, resources=None, named: bool = False) -> str:
    """The question read as a statement whose answer is `option`: the option goes into the blank
    ('_' or a trailing '...'), or after a question without one ('What does Tom like the piano.').
    Several blanks take the option's ';'-separated parts when their number matches."""
    q = clean_question(question)
    option = " ".join(option.split())
    blanks = list(BLANK_OR_PARENS_RE.finditer(q))
    if blanks:
        parts = [p.strip() for p in option.split(";")] if len(blanks) > 1 else [option]
        if len(parts) != len(blanks) or not all(parts):
            parts = [option] + [""] * (len(blanks) - 1)
        pieces, last = [], 0
        for m, part in zip(blanks, parts):
            pieces.append(q[last:m.start()])
            at_start = not "".join(pieces).strip()
            at_end = not END_PUNCT_RE.sub("", q[m.end():])
            pieces.append(" " + fit_option(part, at_start, at_end, resources, named) + " " if part else " ")
            last = m.end()
        pieces.append(q[last:])
        return finish_sentence("".join(pieces))
    dots = TRAILING_DOTS_RE.search(q)
    stem = q[:dots.start()] if dots else END_PUNCT_RE.sub("", q)
    return finish_sentence(stem + " " + fit_option(option, not stem.strip(), True, resources, named))


def is_clause(doc) -> bool:
    """Whether an option is a clause with its own subject and finite verb ('She was a movie
    star.'), which no noun-phrase slot of a question takes."""
    root = next((t for t in doc if t.dep_ == "ROOT"), None)  # not a relative clause's subject
    return root is not None and any(c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj") for c in root.children) \
        and any(a.tag_ in FINITE_TAGS for a in [root, *root.children])


def statement(question: str, option: str, resources, named: bool = False) -> tuple[str, str]:
    """(sentence, rule) stating `option` as the answer of `question`, or ("", why not).

    A blank takes the option (rule "blank"). Any other question goes through the declarative
    rules, and a candidate is kept only where the option fits its slot: a clause only after
    "because" ("Because they were given gifts." for "Why ...?"), an infinitive only where "to do"
    asked for it, and no verb phrase where a noun phrase goes ("Barbara wants to do give people
    advice")."""
    q = ASKED_THEN_BLANK_RE.sub("?", clean_question(question))  # "How often ...?  _": no blank to fill
    asked = ASKED_THEN_FRAME_RE.match(q)
    if asked:
        return _frame_after_question(asked.group(1), asked.group(2), option, resources, named)
    if BLANK_OR_PARENS_RE.search(q) or TRAILING_DOTS_RE.search(q):
        if TITLE_BLANK_RE.search(q) and not re.search(r"[\"“”]", option):
            option = f'"{END_PUNCT_RE.sub("", option.strip())}"'  # 'the best title is "How to keep calm"'
        return declarative(q, option, resources, named), "blank"
    return _wh_statement(q, option, resources, named)


def _frame_after_question(question: str, frame: str, option: str, resources, named: bool) -> tuple[str, str]:
    """"Why did X ...? Because _": the question states whole ("X did ... because A."), where the
    frame after it is a fragment; "What's Tom? He's a _": the frame is the statement."""
    if BECAUSE_FRAME_RE.match(frame):
        return statement(question, option, resources, named)
    filled = declarative(_frame_subject(question, frame, resources), option, resources, named)
    if not any(t.tag_ in FINITE_TAGS for t in syntax(resources, filled)):
        return "", "a fragment after the question"  # "How does X smell? Through two holes _"
    return filled, "blank"


def _frame_subject(question: str, frame: str, resources) -> str:
    """The frame after a question with its leading pronoun replaced by the question's subject
    that the pronoun stands for ("What do Jack and Mary have? They have _" -> "Jack and Mary have
    _"), so that the sentence names whom it is about and carries the question's change; the
    frame as it is where no subject of the pronoun's number is found."""
    m = FRAME_PRONOUN_RE.match(frame)
    if not m:
        return frame
    plural = m.group(1).lower() == "they"
    doc = syntax(resources, question)
    for tok in sorted(doc, key=lambda t: t.dep_ not in ("nsubj", "nsubjpass")):
        if tok.dep_ not in ("nsubj", "nsubjpass", "attr") or tok.pos_ == "PRON" or tok.tag_ in ("WP", "WDT"):
            continue
        many = tok.tag_ in ("NNS", "NNPS") or any(c.dep_ == "conj" for c in tok.children)
        if many != plural:
            continue
        end = next((c.left_edge.i for c in tok.children if c.i > tok.i and c.dep_ in ("acl", "relcl", "prep")),
                   tok.right_edge.i + 1)  # "the children | doing in the afternoon"
        span = doc[tok.left_edge.i:end]
        if any(t.tag_ in ("WP", "WDT", "WRB") for t in span):
            continue
        return span.text + frame[m.end(1):]
    return frame


@dataclass(frozen=True)
class _Slot:
    """The option as a wh-question's slot takes it: its text, and what kind of phrase it is."""

    text: str
    clause: bool
    infinitive: bool
    why: bool
    adjective: bool


def _wh_statement(q: str, option: str, resources, named: bool) -> tuple[str, str]:
    text = END_PUNCT_RE.sub("", " ".join(option.split())).rstrip(" ,;:")
    why = bool(re.match(r"\W*why\b", q, re.IGNORECASE))
    if why:
        text = CLAUSE_OPENER_RE.sub("", text)
    if not text:
        return "", "empty option"
    slot = _slot(q, text, why, resources, named)
    if isinstance(slot, str):
        return "", slot
    special = _special_form(q, slot, resources)
    if special is not None:
        return special
    return _by_declarative_rules(FOLLOWING_RE.sub(r"\1 ", q), option, slot, resources)


def _slot(q: str, text: str, why: bool, resources, named: bool) -> _Slot | str:
    """The option fitted to the question's slot, or why it fits none: a clause only after a verb
    of saying ("tells us that ..."), never a verb phrase; a title always in quotes."""
    fitted = fit_option(text, False, False, resources, named)
    doc = syntax(resources, fitted)
    clause = is_clause(doc)
    if TITLE_RE.search(q):  # a title is quoted whatever its form: 'the best title is "Shopping is fun"'
        fitted, clause = f'"{fit_option(text, True, False, resources)}"', False
    infinitive = doc[0].lower_ == "to" and len(doc) > 1 and doc[1].tag_ == "VB"
    verb_phrase = not clause and not infinitive and doc[0].pos_ in ("VERB", "AUX") and doc[0].tag_ != "VBG"
    if clause and not why:
        if not SAYING_RE.search(q):
            return CLAUSE_OPTION
        fitted = "that " + fitted  # "What does the passage mainly tell us?" - "that it's rude to ..."
    if verb_phrase:
        return VERB_PHRASE_OPTION
    return _Slot(fitted, clause, infinitive, why, len(doc) == 1 and doc[0].pos_ == "ADJ")


def _special_form(q: str, slot: _Slot, resources) -> tuple[str, str] | None:
    """The question shapes the declarative rules get wrong, stated here: "What is X about?",
    "What did X think of Y?", "How many N are there ...?"."""
    about = ABOUT_RE.match(q)
    if about:  # "What is the passage mainly about?": the rules strand the preposition
        return finish_sentence(f"{about.group(2)} {about.group(1)} {about.group(3)} {slot.text}"), "copula_about"
    think = THINK_OF_RE.match(q)
    if think and not slot.clause:  # "What did the writer think of the trip?" -> "The writer thought the trip was terrible."
        return _thought_of(think, slot.text, resources), "think_of"
    there = THERE_RE.match(q)
    if there:  # "How many people are there in the family?" -> "There are three people in the family."
        return finish_sentence(f"there {there.group(2)} {slot.text} {there.group(1)} {there.group(3)}"), "there_how_many"
    return None


def _thought_of(think, fitted: str, resources) -> str:
    aux, subj, obj = think.group(1).lower(), think.group(2), think.group(4)
    obj = OBJECT_TO_SUBJECT.get(obj.lower(), obj)
    parsed = syntax(resources, obj)
    cut = next((t.idx for t in parsed if t.i and t.tag_ in ("IN", "WRB") and t.lower_ != "of"), None)
    obj, after = (obj[:cut].strip(), obj[cut:]) if cut else (obj, "")  # "Hill | before the age of nine"
    plural = obj.lower() in ("they", "we", "you") or (obj.endswith("s") and not obj.endswith(("ss", "'s", "’s"))
                                                     and syntax(resources, obj)[-1].tag_ in ("NNS", "NNPS"))
    verb = {"did": "thought", "does": "thinks", "do": "think"}[aux]
    be = ("were" if plural else "was") if aux == "did" else ("are" if plural else "is")
    return finish_sentence(f"{subj} {verb} {obj} {be} {fitted} {after}")


def _by_declarative_rules(q: str, option: str, slot: _Slot, resources) -> tuple[str, str]:
    """The first candidate of the declarative rules that keeps the option whole in a slot of its
    kind and reads as English (no unknown word form, no quotation broken, nothing stranded)."""
    cands, reason = declarative_rules.declarative_form(q, slot.text, resources)
    key = fold_case_and_spaces(slot.text)
    known = {w.lower() for w in WORD_RE.findall(f"{q} {option}")}
    quoted = [m.group() for m in TITLE_QUOTE_RE.finditer(q)]  # a rule moved words into a quotation
    for cand in cands:
        sentence = _in_slot(cand.sentence, slot)
        if sentence is None:
            continue
        sentence = _mended(sentence, slot.text)
        if unknown_word_forms(sentence, known, resources):  # "Who cannot drive?" -> "Not candrive Tom."
            continue
        if any(part not in sentence for part in quoted):
            continue
        if key not in fold_case_and_spaces(sentence) or "?" in sentence or ".." in sentence \
                or BROKEN_RE.search(sentence) or (slot.adjective and not cand.rule.startswith(("copula", "how"))):
            continue
        return finish_sentence(sentence), cand.rule
    return "", reason or "no declarative rule fits the option"


def _in_slot(sentence: str, slot: _Slot) -> str | None:
    """A rule's sentence with a clause after "because" (why) and an infinitive where "to do" was
    asked, or None where the option did not land there."""
    fitted = slot.text
    if slot.why:
        if slot.clause or slot.infinitive:
            sentence = re.sub(r"\bbecause of\s+(?=" + re.escape(fitted) + ")",
                              "because " if slot.clause else "", sentence)
        if slot.clause and "because " + fitted not in sentence:
            return None
    elif slot.infinitive:
        sentence = re.sub(r"\b(to )?do\s+(?=" + re.escape(fitted) + ")", "", sentence)
        if not re.search(r"\bto\s+" + re.escape(fitted[3:]), sentence):
            return None
    return sentence


def _mended(sentence: str, fitted: str) -> str:
    """What the rules leave doubled or misplaced, put right."""
    # "The story happened in on a winter morning": the option brought its own preposition
    sentence = DOUBLED_PREP_RE.sub("", sentence)
    sentence = re.sub(r"\b(\d+) old\b", r"\1 years old", sentence)  # "Mike's wife is 10 old."
    sentence = re.sub(r"\b(\w+) \1(?=\W*$)", r"\1", sentence)  # "25,530 feet high high."
    # "tells that X us" -> "tells us that X": the rules put the option before the question's last word
    told = re.search(rf" ({re.escape(fitted)}) (us|you|me|them)(?=\W*$)", sentence)
    if told:
        sentence = sentence[:told.start()] + f" {told.group(2)} {told.group(1)}" + sentence[told.end():]
    return sentence
