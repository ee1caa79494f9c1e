"""AddSent (AdvRACE section 3.3): insert distracting sentences built from a mutated question.

Each inserted sentence is the question with its nouns, names and numbers moved to nearby GloVe
words and one adjective, adverb or verb turned into its WordNet antonym, made declarative with one
original distractor. The sentence looks like the question's answer but states a wrong one about
different things, so a model that only matches words against the question is pulled towards it
while the gold answer stays right.

That holds only if the question really changed: a GloVe neighbour that keeps the word's meaning
(`Resources.same_meaning`: a synonym, spelling variant or inflection, purpose -> intent,
behavior -> behaviour, or a near sense: a hypernym, hyponym or near-synonym sibling on the
common senses, attitude -> stance, plants -> trees, purpose -> objective) is never taken, and
every sentence passes the audit's sentence checks (advrace.core.checks.sentences) before it is
inserted. When nothing in the question can change
its meaning, the question is left unperturbed ("no change of meaning"). With
`negation_fallback: true` it is negated with "not" instead, as AdvRACE did, except a question
about the passage, what it states, its title or its author: "We cannot infer from the passage
that X", "What is not the best title for the passage X" are text about the passage. A "not"
sentence says that a distractor is NOT the answer, a hint to a reader that understands negation
(the built-in readers, which match words, found such questions far harder all the same).
A question without a blank is stated by the declarative rules (`statement`), never glued to the
distractor as AdvRACE did unless `glued_fallback` asks for it; the passage and its author always
move to another text or person ("Another writer urges ..."); and where the options are statements
about the passage (what it states, negated questions, a clause for a wh-question) each is said of
someone the passage never names (`_other_referent`), so the gold stays the only answer. Negated
questions ("Which is NOT true?", `validity.negated_question`) never get their own words back: that
would say a distractor does not satisfy the question, a hint.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from dataclasses import dataclass

from advrace.core.checks import SENTENCE, Subject, TextContext, checks_for, first_refusal
from advrace.core.checks.sentences import OTHER_REFERENT
from advrace.core.errors import ConfigError
from advrace.core.numbers import significant
from advrace.core.provenance import AdversarialSentence, AttackSummary, Replacement, summary_of
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import BLANK_OR_PARENS_RE, WORD_RE, count_words, fold_case_and_spaces
from advrace.core.checks.option_identity import END_PUNCT_RE, option_key
from advrace.core.checks.question_kinds import asks_what_passage_states, negated_question
from advrace.resources.inflection import (indefinite_article, inflect_verb, irregular_forms,
                                          match_case)
from advrace.resources.wordnet import verb_exceptions

from .sentences import declarative_rules
from .sentences.fluency import fluent_choice
from .sentences.readability import unknown_word_forms
from .base import Attack, CannotPerturb, register
from .sentences.fluency import fluency
from .sentences.word_swaps import (HONORIFICS, common_word, counted_by_ordinal, frame_fits, hyphen_part, in_fixed_phrase,
                         keeps_entity, keeps_form, known, listed_whole, same_field, sense_antonyms, whole_name)

TRAILING_DOTS_RE = re.compile(r"\s*(?:\.{3,}|…)\s*$")
# words that start sentences and names alike: never taken for a name by their case in the passage
FUNCTION_WORDS = frozenset({"it", "he", "she", "they", "we", "you", "i", "the", "a", "an", "this", "that", "these",
                            "those", "there", "his", "her", "their", "its", "our", "my", "your", "some", "many",
                            "most", "all", "no", "not", "because", "to", "in", "on", "at", "by", "for", "with"})
GLUED_ARTICLE_RE = re.compile(r"\b(in|on|at|of|to|for|from|with|by|about)-(?=(?:the|a|an|this|that|another)\b)",
                              re.IGNORECASE)
LEADING_JUNK_RE = re.compile(r"^[\s.]+")
SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([.,;:!?])")
NUMBER_RE = re.compile(r"\d{1,3}(?:,\d{3})+(?:\.\d+)?|\d+(?:\.\d+)?")
NUMERIC_RE = re.compile(r"[\d.,:/]*\d[\d.,:/]*")

NAME_ENTITIES = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT",
                           "WORK_OF_ART", "LAW", "LANGUAGE"})
GLOVE_POS = frozenset({"NOUN", "PROPN", "NUM"})
ANTONYM_POS = frozenset({"ADJ", "ADV", "VERB"})
UNINFLECTABLE_TAGS = frozenset({"JJR", "JJS", "RBR", "RBS"})
NOUN_PHRASE_POS = frozenset({"DET", "ADJ", "NUM", "PROPN", "NOUN", "PRON"})
NOMINAL_DEPS = frozenset({"dobj", "pobj", "nsubj", "nsubjpass", "dative", "appos", "compound"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl", "csubj"})
CONTRACTED_AUX = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}
DO_SUPPORT = {"VBZ": "does", "VBD": "did", "VBP": "do", "VB": "do"}
# Words that frame a RACE question rather than carry its content: "the best title for this
# passage" turned into "the best championship for this path" misleads nobody, and "a lot of"
# breaks as "a plenty of".
# "Which of the following statements is true" and "the underlined words" are framing too:
# "statements" -> "claims" or "words" -> "phrases" asks the same question, and "Which of the
# preceding is NOT right" the same as "Which of the following": no antonym for them either.
# "Which is TRUE according to the passage?" turned into "Which is FALSE according to the passage
# X" says that a distractor is false: a hint, not a distractor, so truth words never change, nor
# the hedges of "most likely" ("Most unlikely another writer's son is 82 years old.").
META_WORDS = ("passage", "article", "text", "paragraph", "writer", "author", "story", "poem", "title", "lot",
              "kind", "sort", "word", "words", "phrase", "phrases", "sentence", "sentences",
              "statement", "statements", "following", "true", "false", "correct", "incorrect",
              "untrue", "likely", "unlikely", "probably", "possibly")
# A question that names the passage or its author is about the passage ("What is the passage
# mainly about?", "the best title for the passage", "The author wants to _"): negated, it becomes
# text about the passage that says a distractor is not the answer ("What is not the best title
# for the passage X"), so such a question never falls back to "not".
ABOUT_PASSAGE_RE = re.compile(r"\b(?:passage|article|text|paragraph|writer|author|title)s?\b", re.IGNORECASE)
# verbs that frame a question rather than say what it asks ("What does the word mean?", "We can
# infer that _"), and light verbs whose meaning their object carries: never swapped by GloVe
FRAME_VERBS = frozenset({"mean", "know", "learn", "think", "say", "tell", "infer", "suggest", "show", "believe",
                         "refer", "mention", "happen", "be", "have", "do", "get", "make", "take", "go", "come",
                         "find", "see", "write", "want", "like", "need", "use", "call", "read", "conclude",
                         "expect", "describe", "explain", "talk", "discuss", "agree", "seem", "become"})
NUMBER_NOUNS = frozenset({"hundred", "thousand", "million", "billion", "dozen", "score"})
PER_VARIANT = 2  # sentences one word choice puts in the fluency pool (with two distractors), so choices compete
GLUED = "glued"  # rule of a sentence that is the question with a distractor after it: not English


@dataclass(frozen=True)
class AddSentConfig:
    neighbours: int = 20
    number_mode: str = "value"
    insertions: int = 2
    # the fewest sentences a question keeps when no more pass the checks: AdvRACE inserted
    # `insertions` into every question; one that passes attacks a question the checks would
    # otherwise leave unchanged (`insertions` here: all or none)
    min_insertions: int = 1
    keep_words: tuple[str, ...] = META_WORDS
    # When no replacement can change the question's meaning, negate it with "not" (True, as
    # AdvRACE did) or leave the question unperturbed ("no change of meaning", False). Off by
    # default: a "not" sentence says that a distractor is NOT the answer, a hint to any reader
    # that understands negation (the audit flags each one, `negation_hint`), though the built-in
    # readers, which match words and ignore "not", found such questions far harder
    # (bench/addsent_validity.py --readers). Never for a question about the passage (what it
    # states, its title, its author), even when True.
    negation_fallback: bool = False
    # A question that is no fill-in-the-blank and that the declarative rules cannot state with a
    # distractor: skip it, counted "no statement: <why>" (False), or glue the distractor after the
    # question as AdvRACE did ("What does Tom like the piano."), recorded with rule "glued" (True).
    glued_fallback: bool = False
    # With a causal LM named ("smollm2", offline): up to `fluency_candidates` sentences that pass
    # every check compete for each insertion (other word choices, other distractors), the most
    # fluent (mean token log-probability, attacks.fluency) is kept and its score recorded, and
    # the audit scores the split's fluency outliers. "" (the default) keeps the first that
    # passes: on dev-middle the LM's choice read no better and built 8x slower (docs/results.md).
    fluency_model: str = ""
    fluency_candidates: int = 4

    def __post_init__(self):
        words = self.keep_words
        if isinstance(words, str) or not isinstance(words, (list, tuple)) or \
                not all(isinstance(w, str) for w in words):
            raise ConfigError(f"attack 'addsent': keep_words must be a list of words, not {words!r}")
        object.__setattr__(self, "keep_words", tuple(w.lower() for w in words))
        if not isinstance(self.fluency_model, str):
            raise ConfigError(f"attack 'addsent': fluency_model must be a model name or \"\", not {self.fluency_model!r}")
        for key, low, high in (("neighbours", 1, 1000), ("insertions", 1, 3), ("fluency_candidates", 1, 16)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"attack 'addsent': {key} must be an integer from {low} to {high}, "
                                  f"not {value!r}")
        if isinstance(self.min_insertions, bool) or not isinstance(self.min_insertions, int) \
                or not 1 <= self.min_insertions <= self.insertions:
            raise ConfigError(f"attack 'addsent': min_insertions must be an integer from 1 to insertions "
                              f"({self.insertions}), not {self.min_insertions!r}")
        if self.number_mode not in ("value", "glove"):
            raise ConfigError(f"attack 'addsent': number_mode must be 'value' or 'glove', "
                              f"not {self.number_mode!r}")


# declarative sentences


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


def _fit(option: str, at_start: bool, at_end: bool, resources, named: bool = False) -> str:
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
            pieces.append(" " + _fit(part, at_start, at_end, resources, named) + " " if part else " ")
            last = m.end()
        pieces.append(q[last:])
        return finish_sentence("".join(pieces))
    dots = TRAILING_DOTS_RE.search(q)
    stem = q[:dots.start()] if dots else END_PUNCT_RE.sub("", q)
    return finish_sentence(stem + " " + _fit(option, not stem.strip(), True, resources, named))


def _frame_subject(question: str, frame: str, resources) -> str:
    """The frame after a question with its leading pronoun replaced by the question's subject
    that the pronoun stands for ("What do Jack and Mary have? They have _" -> "Jack and Mary have
    _"), so that the sentence names whom it is about and carries the question's change; the
    frame as it is where no subject of the pronoun's number is found."""
    m = FRAME_PRONOUN_RE.match(frame)
    if not m:
        return frame
    plural = m.group(1).lower() == "they"
    doc = resources.parse(question)
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


def statement(question: str, option: str, resources, named: bool = False) -> tuple[str, str]:
    """(sentence, rule) stating `option` as the answer of `question`, or ("", why not).

    A blank takes the option (rule "blank"). Any other question goes through the declarative
    rules, and a candidate is kept only where the option fits its slot: a clause only after
    "because" ("Because they were given gifts." for "Why ...?"), an infinitive only where "to do"
    asked for it, and no verb phrase where a noun phrase goes ("Barbara wants to do give people
    advice"). AdvRACE glued the option after the question instead ("What does Tom like the
    piano."), which is not English."""
    q = ASKED_THEN_BLANK_RE.sub("?", clean_question(question))  # "How often ...?  _": no blank to fill
    asked = ASKED_THEN_FRAME_RE.match(q)
    if asked:
        # "Why did X ...? Because _": the question states whole ("X did ... because A."), where the
        # frame after it is a fragment; "What's Tom? He's a _": the frame is the statement
        if BECAUSE_FRAME_RE.match(asked.group(2)):
            return statement(asked.group(1), option, resources, named)
        q = _frame_subject(asked.group(1), asked.group(2), resources)
        filled = declarative(q, option, resources, named)
        if not any(t.tag_ in FINITE_TAGS for t in resources.parse(filled)):
            return "", "a fragment after the question"  # "How does X smell? Through two holes _"
        return filled, "blank"
    if BLANK_OR_PARENS_RE.search(q) or TRAILING_DOTS_RE.search(q):
        if TITLE_BLANK_RE.search(q) and not re.search(r"[\"“”]", option):
            option = f'"{END_PUNCT_RE.sub("", option.strip())}"'  # 'the best title is "How to keep calm"'
        return declarative(q, option, resources, named), "blank"
    text = END_PUNCT_RE.sub("", " ".join(option.split())).rstrip(" ,;:")
    why = bool(re.match(r"\W*why\b", q, re.IGNORECASE))
    if why:
        text = CLAUSE_OPENER_RE.sub("", text)
    if not text:
        return "", "empty option"
    fitted = _fit(text, False, False, resources, named)
    doc = resources.parse(fitted)
    clause = is_clause(doc)
    if TITLE_RE.search(q):  # a title is quoted whatever its form: 'the best title is "Shopping is fun"'
        fitted, clause = f'"{_fit(text, True, False, resources)}"', False
    infinitive = doc[0].lower_ == "to" and len(doc) > 1 and doc[1].tag_ == "VB"
    verb_phrase = not clause and not infinitive and doc[0].pos_ in ("VERB", "AUX") and doc[0].tag_ != "VBG"
    if clause and not why:
        if not SAYING_RE.search(q):
            return "", CLAUSE_OPTION
        fitted = "that " + fitted  # "What does the passage mainly tell us?" - "that it's rude to ..."
    if verb_phrase:
        return "", VERB_PHRASE_OPTION
    about = ABOUT_RE.match(q)
    if about:  # "What is the passage mainly about?": the rules strand the preposition
        return finish_sentence(f"{about.group(2)} {about.group(1)} {about.group(3)} {fitted}"), "copula_about"
    think = THINK_OF_RE.match(q)
    if think and not clause:  # "What did the writer think of the trip?" -> "The writer thought the trip was terrible."
        aux, subj, obj = think.group(1).lower(), think.group(2), think.group(4)
        obj = OBJECT_TO_SUBJECT.get(obj.lower(), obj)
        parsed = resources.parse(obj)
        cut = next((t.idx for t in parsed if t.i and t.tag_ in ("IN", "WRB") and t.lower_ != "of"), None)
        obj, after = (obj[:cut].strip(), obj[cut:]) if cut else (obj, "")  # "Hill | before the age of nine"
        plural = obj.lower() in ("they", "we", "you") or (obj.endswith("s") and not obj.endswith(("ss", "'s", "’s"))
                                                         and resources.parse(obj)[-1].tag_ in ("NNS", "NNPS"))
        verb = {"did": "thought", "does": "thinks", "do": "think"}[aux]
        be = ("were" if plural else "was") if aux == "did" else ("are" if plural else "is")
        return finish_sentence(f"{subj} {verb} {obj} {be} {fitted} {after}"), "think_of"
    there = THERE_RE.match(q)
    if there:  # "How many people are there in the family?" -> "There are three people in the family."
        return finish_sentence(f"there {there.group(2)} {fitted} {there.group(1)} {there.group(3)}"), "there_how_many"
    q = FOLLOWING_RE.sub(r"\1 ", q)  # "Which of the following can be the title ...?" -> "Which can be ..."
    adjective = len(doc) == 1 and doc[0].pos_ == "ADJ"
    cands, reason = declarative_rules.declarative_form(q, fitted, resources)
    key = fold_case_and_spaces(fitted)
    known = {w.lower() for w in WORD_RE.findall(f"{q} {option}")}
    for cand in cands:
        sentence = cand.sentence
        if why:
            if clause or infinitive:
                sentence = re.sub(r"\bbecause of\s+(?=" + re.escape(fitted) + ")",
                                  "because " if clause else "", sentence)
            if clause and "because " + fitted not in sentence:
                continue
        elif infinitive:
            sentence = re.sub(r"\b(to )?do\s+(?=" + re.escape(fitted) + ")", "", sentence)
            if not re.search(r"\bto\s+" + re.escape(fitted[3:]), sentence):
                continue
        # "The story happened in on a winter morning": the option brought its own preposition
        sentence = DOUBLED_PREP_RE.sub("", sentence)
        sentence = re.sub(r"\b(\d+) old\b", r"\1 years old", sentence)  # "Mike's wife is 10 old."
        sentence = re.sub(r"\b(\w+) \1(?=\W*$)", r"\1", sentence)  # "25,530 feet high high."
        # "tells that X us" -> "tells us that X": the rules put the option before the question's last word
        told = re.search(rf" ({re.escape(fitted)}) (us|you|me|them)(?=\W*$)", sentence)
        if told:
            sentence = sentence[:told.start()] + f" {told.group(2)} {told.group(1)}" + sentence[told.end():]
        if unknown_word_forms(sentence, known, resources):  # "Who cannot drive?" -> "Not candrive Tom."
            continue
        quoted = [m.group() for m in TITLE_QUOTE_RE.finditer(q)]  # a rule moved words into a quotation
        if any(part not in sentence for part in quoted):
            continue
        if key not in fold_case_and_spaces(sentence) or "?" in sentence or ".." in sentence \
                or BROKEN_RE.search(sentence) or (adjective and not cand.rule.startswith(("copula", "how"))):
            continue
        return finish_sentence(sentence), cand.rule
    return "", reason or "no declarative rule fits the option"


def contains_gold(sentence: str, gold: str) -> bool:
    """Whether the sentence states the gold option's text; a one-character gold ('A', '3') would
    match nearly any sentence, so it is not checked."""
    key = option_key(gold)
    return len(key) >= 2 and key in fold_case_and_spaces(sentence)


def search_failure(refused: Counter, found: int, wanted: int) -> str:
    """Why the search for sentence `found` + 1 failed: the most frequent refusal of its candidates
    (the first met on a tie), and how many sentences were found before it when any were."""
    why = max(refused, key=refused.get) if refused else "edits leave the question unchanged"
    return f"only {found} of {wanted} sentences: {why}" if found else why


# another text, another person

# The words that name this passage or its author. A sentence that keeps them is about this very
# passage: "The writer urges the listeners to obey their parents." answers "The writer urges the
# readers to _" with a distractor, whatever else changed. So they always move to another text or
# person ("Another writer urges ..."), which no reader takes for this passage's author.
REFRAME_NOUNS = frozenset({"passage", "article", "text", "paragraph", "writer", "author", "story", "poem"})
REFRAME_DETS = frozenset({"the", "this"})
AUTHOR_RE = re.compile(r"\b(?:writer|author)s?\b", re.IGNORECASE)
TITLE_QUOTE_RE = re.compile(r"\"[^\"]+\"|“[^”]+”|'[A-Z][^']*'")
# Names for a sentence moved to another person: given names that are no one's gender, so a
# pronoun later in the sentence ("He lost his bag" -> "Jordan Lee lost his bag") still reads.
OTHER_PEOPLE = ("Jordan Lee", "Alex Morgan", "Sam Taylor", "Robin Clarke", "Casey Brown",
                "Jamie Wilson", "Taylor Reed", "Morgan Hill", "Chris Parker", "Kim Evans",
                "Drew Foster", "Jesse Grant")
THIRD_PERSON = frozenset({"he", "she"})
MENTIONED_RE = re.compile(r"\b(?:mention(?:ed)?|stated?|talk(?:ed)?|discuss(?:ed)?|referr?(?:ed)?|includ(?:ed|e)|"
                          r"list(?:ed)?|describ(?:ed|e)|cover(?:ed)?|given|shown|told|said)\b", re.IGNORECASE)
OPINION_RE = re.compile(r"\b(?:opinions?|facts?|believes?|thinks?)\b", re.IGNORECASE)
POSSESSIVE_PRONOUNS = frozenset({"his", "her", "their", "its"})
FINITE_TAGS = frozenset({"VBD", "VBZ", "VBP", "MD"})
CLAUSE_OPENER_RE = re.compile(r"^\s*because(?:\s+of)?\s+", re.IGNORECASE)


CLAUSE_OPTION = "clause option for a wh-question"
ASKED_THEN_BLANK_RE = re.compile(r"\?\s*_+\s*$")
FRAME_PRONOUN_RE = re.compile(r"^\s*(he|she|it|they)(?=['’\s])", re.IGNORECASE)
BECAUSE_FRAME_RE = re.compile(r"^\W*because\W*_+\W*$", re.IGNORECASE)
ASKED_THEN_FRAME_RE = re.compile(r"^([^?]*\?)\s*(.*_.*)$", re.DOTALL)  # a question, then a frame with a blank
THERE_RE = re.compile(r"^how\s+many\s+(.+?)\s+(is|are|was|were)\s+there\b\s*(.*?)\s*\?*$", re.IGNORECASE)
FOLLOWING_RE = re.compile(r"\b(which|what)(?:\s+one)?\s+of\s+the\s+following\s+(?=(?:is|are|was|were|can|could|may|"
                          r"might|would|will|should|must|does|do|did|has|have|had|best|most)\b)", re.IGNORECASE)
VERB_PHRASE_OPTION = "verb-phrase option for a wh-question"
DOUBLED_PREP_RE = re.compile(r"\b(?:in|at|on|by|because of)\s+(?=(?:in|on|at|by|during|before|after|from|because|"
                             r"anytime|every|last|next|today|tomorrow|yesterday|tonight|once|twice|always|never|"
                             r"until|till|since|within|through)\b)", re.IGNORECASE)
TITLE_RE = re.compile(r"\btitles?\b", re.IGNORECASE)
# a question whose verb takes a that-clause: the clause option follows it ("... tells us that X")
SAYING_RE = re.compile(r"\b(?:tell|say|think|believe|show|suggest|mean|know|learn|hope|feel|want to tell)\s*"
                       r"(?:us|you|me|them)?\s*\?*\s*$", re.IGNORECASE)
YES_NO_RE = re.compile(r"^\W*(?:yes|no)\b\s*[,.!]", re.IGNORECASE)
TITLE_BLANK_RE = re.compile(r"\btitles?\b[^_\"“]*\b(?:is|be)\s*_", re.IGNORECASE)  # a title asked, unquoted
THINK_OF_RE = re.compile(r"^what\s+(do|does|did)\s+(.+?)\s+think\s+(of|about)\s+(.+?)\s*\?*$", re.IGNORECASE)
OBJECT_TO_SUBJECT = {"him": "he", "her": "she", "them": "they", "me": "I", "us": "we", "it": "it"}
ABOUT_RE = re.compile(r"^what\s+(is|are|was|were)\s+(.+?)\s+((?:\w+ly\s+)?(?:about|like|for|from))\s*\?*$",
                      re.IGNORECASE)
# what the declarative rules leave broken: a stranded preposition at the end ("give his mother
# the drink to."), a sentence opening on a clitic ("N't have ..."), "because of" before a verb
BROKEN_RE = re.compile(r"\b(?:to|of|for|with|from|about|at|in|on|by)\.?$|^\W*n['’]t\b|\bbecause of (?:to|like)\b"
                       r"|\b(?:is|are|was|were) there\b|\bnot\s+\w+\s+(?:is|are|was|were)\s+because\b"
                       r"|\bof the following\b|\b(?:in|of|on|at|for|to|with) (?:is|are|was|were)\b",
                       re.IGNORECASE)


def reframed_det(tok):
    """The 'the'/'this' of 'the writer', 'this reading passage' that `reframe_edits` moves, or None."""
    doc = tok.doc
    if tok.i == 0:
        return None
    det = next((c for c in tok.children if c.dep_ == "det" and c.i < tok.i), doc[tok.i - 1])
    if det.lower_ not in REFRAME_DETS or any(t.pos_ not in ("ADJ", "NOUN", "DET") for t in doc[det.i + 1:tok.i]):
        return None
    return det


def reframe_edits(doc) -> list:
    """Edits that move 'the/this passage', 'the writer' (and article, text, paragraph, author) to
    'another ...'; a later mention of the same noun becomes 'that ...' so it stays the other one."""
    out, seen = [], set()
    for tok in doc:
        lower = tok.lower_
        if lower not in REFRAME_NOUNS or tok.dep_ == "compound" or tok.i == 0:
            continue
        det = reframed_det(tok)
        if det is None:
            continue
        new = match_case("that" if lower in seen else "another", det.text)
        seen.add(lower)
        record = Replacement(det.idx, det.idx + len(det.text), det.text, new, "reframe",
                             changes_meaning=True)
        out.append((det.idx, det.idx + len(det.text), new, record))
    return out


def title_spans(doc) -> list[tuple[int, int]]:
    """Character spans of the titles a question names: quoted text, a work of art, or a run of two
    or more capitalised words after the first ('the story The Magic of Thinking Big')."""
    text = doc.text
    spans = [m.span() for m in TITLE_QUOTE_RE.finditer(text)]
    spans += [(e.start_char, e.end_char) for e in doc.ents if e.label_ == "WORK_OF_ART"]
    run = []
    for tok in list(doc) + [None]:
        title_word = tok is not None and tok.i > 0 and (tok.text[:1].isupper() or (
            run and tok.lower_ in ("of", "the", "a", "an", "and", "in", "on", "to", "for")))
        if title_word and tok.pos_ == "PROPN" and tok.ent_type_ == "PERSON":
            title_word = False
        if title_word:
            run.append(tok)
            continue
        while run and not run[-1].text[:1].isupper():
            run.pop()
        if sum(t.text[:1].isupper() for t in run) >= 2 and run[0].pos_ != "PROPN" or \
                sum(t.text[:1].isupper() for t in run) >= 3:
            spans.append((run[0].idx, run[-1].idx + len(run[-1].text)))
        run = []
    return spans


def is_clause(doc) -> bool:
    """Whether an option is a clause with its own subject and finite verb ('She was a movie
    star.'), which no noun-phrase slot of a question takes."""
    root = next((t for t in doc if t.dep_ == "ROOT"), None)  # not a relative clause's subject
    return root is not None and any(c.dep_ in ("nsubj", "nsubjpass", "expl", "csubj") for c in root.children) \
        and any(a.tag_ in FINITE_TAGS for a in [root, *root.children])


# numbers


def new_number(text: str, rng: random.Random, avoid: set[str], count: int,
               day: bool = False) -> list[str]:
    """Up to `count` different values for a number in digits: years move by 1-10, other numbers
    land in [n/2, 2n+1] (a day of the month stays in 1-28), keeping commas and decimals."""
    if not NUMBER_RE.fullmatch(text):
        return []
    commas = "," in text
    places = len(text.split(".")[1]) if "." in text else 0
    n = int(text.replace(",", "").replace(".", ""))

    def fmt(value: int) -> str:
        whole, frac = divmod(value, 10 ** places)
        head = f"{whole:,}" if commas else str(whole)
        return f"{head}.{str(frac).zfill(places)}" if places else head

    if not commas and not places and len(text) == 4 and 1000 <= n <= 2100:
        pool = [n + d for d in range(-10, 11) if d]
        rng.shuffle(pool)
    else:
        low, high = (1, 28) if day and not places and n <= 31 else (n // 2, 2 * n + 1)
        if high - low <= 64:
            pool = [v for v in range(low, high + 1) if v != n]
            rng.shuffle(pool)
        else:
            pool = [rng.randint(low, high) for _ in range(64)]
    out = []
    for value in pool:
        s = fmt(value)
        if value != n and s not in out and s.lower() not in avoid:
            out.append(s)
            if len(out) == count:
                break
    return out


# the attack


def _negation_record(word: str, new: str, position: int) -> Replacement:
    return Replacement(position, position + len(word), word, new, "negation", changes_meaning=True)


@dataclass
class _Plan:
    """What can change in one question: candidate words per token, antonym targets, negation."""

    substitutions: list  # (token, [(new, kind), ...]) best first
    antonyms: list  # (token, [new, ...]) in rng order
    negation: list  # [(start, end, new, record)], or [] where the question has no place for "not"
    reframe: list  # 'the writer' -> 'another writer' (see `reframe_edits`), in every sentence


@register
class AddSent(Attack):
    name = "addsent"
    tasks = (MULTIPLE_CHOICE,)
    Config = AddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")
    # False only to measure what the synonym filter prevents (bench/addsent_validity.py)
    _same_meaning_filter = True
    # False only to measure the attack as it was before negated questions were skipped and
    # questions about the passage kept from "not" sentences (bench/addsent_validity.py)
    _skip_negated = True
    _no_not_about_passage = True

    # question analysis

    def _blocked(self, tok, blanks) -> bool:
        start, end = tok.idx, tok.idx + len(tok.text)
        return "_" in tok.text or any(s < end and start < e for s, e in blanks)

    def _glove_candidates(self, tok, taken: set[str], gold_words: set[str], want: int) -> list[str]:
        res = self.resources
        word, lower, numeric = tok.text, tok.text.lower(), tok.pos_ == "NUM"
        # a name (a person's name part included) for a name of its kind: "Bill" -> "Jim", not "Senate"
        label = tok.ent_type_ if tok.ent_type_ in NAME_ENTITIES and tok.pos_ == "PROPN" else None
        stem = res.stem(lower)
        plausible: list[str] = []
        for cand, _ in res.glove.nearest(lower, k=self.config.neighbours):
            if numeric and any(c.isdigit() for c in word):
                if not NUMERIC_RE.fullmatch(cand):
                    continue
            elif not cand.isalpha():
                continue
            if cand in taken or cand in gold_words or res.stem(cand) == stem:
                continue
            if not numeric and (cand.startswith(lower) or lower.startswith(cand)
                                or cand.endswith(lower) or lower.endswith(cand)
                                or cand.rstrip("s") in NUMBER_NOUNS):
                continue
            if not numeric and cand in res.stopwords:
                continue
            plausible.append(cand)
        cased = [match_case(cand, word) for cand in plausible]
        out: list[str] = []
        for cand, cased_cand, (pos, tag) in zip(plausible, cased, res.word_tags(cased)):
            if pos != tok.pos_:
                continue
            # the word's form: 'children' is not replaced by 'child', nor a name by a common word
            if not numeric and (not keeps_form(tok, cased_cand, tag, res, self._irregular())
                                or not known(res, cased_cand)):
                continue
            if self._same_meaning_filter and self._same_meaning(tok, cand):
                continue
            if tok.pos_ in ("NOUN", "VERB") and not same_field(res.wordnet, tok.text, cand, tok.pos_[0].lower()):
                continue  # "telling lies" -> "telling reaches": a neighbour of another sense
            if tok.pos_ == "VERB" and (not frame_fits(res.wordnet, tok, cand) or tok.tag_ in ("VBD", "VBN") and
                                       self._inflect(res.wordnet.morphy(cand, "v") or cand, tok.tag_) != cand):
                continue  # "was started" -> "was came": a past tense for a participle
            if tok.pos_ == "NOUN" and word[:1].isupper() and not tok.is_sent_start and common_word(res, cand):
                continue  # "Why does Denial go": a name the tagger took for a noun takes no "Objection"
            if label and not keeps_entity(res, tok, cased_cand, label):
                continue
            out.append(cand)
            if len(out) >= want:
                break
        return out

    def _same_meaning(self, tok, new: str) -> str | None:
        """Why `new` would leave the token's meaning (see `Resources.same_meaning`), or None; a
        noun is compared on its noun senses only (mother and father share a verb sense)."""
        pos = tok.pos_ if tok.pos_ in ("NOUN", "VERB", "ADJ", "ADV") else None
        return self.resources.same_meaning(tok.text, new, pos)

    def _glove_eligible(self, tok, blanks) -> bool:
        pos, lower = tok.pos_, tok.text.lower()
        if self._blocked(tok, blanks) or lower in self.config.keep_words or lower in HONORIFICS:
            return False
        if pos == "NUM":
            return lower != "one" and (lower.isalpha() or bool(NUMERIC_RE.fullmatch(lower)))
        # a scanning error ("rrmPrs"), a part of a hyphenated word ("half-sister"), a noun an
        # ordinal counts ("the 17th century"), a word of a fixed phrase ("take place", "railway
        # station") or a word of a multi-word name of a place, a body or a
        # work ("Los Angeles" -> "San Houston") is never swapped alone (word_swaps); a person's
        # name is made of given names and surnames, each swapped for a name part that keeps the
        # whole a person's name ("Bill Gates" -> "Bill Powell", not "Senate House")
        name = whole_name(tok)
        if (not known(self.resources, tok.text) or hyphen_part(tok) or counted_by_ordinal(tok)
                or (pos == "NOUN" and in_fixed_phrase(tok, self.resources.wordnet))
                or (name is not None and name.root.ent_type_ != "PERSON")):
            return False
        in_name = tok.ent_type_ in NAME_ENTITIES and pos == "ADJ"
        return ((pos in GLOVE_POS or in_name) and tok.text.isalpha() and len(tok.text) > 1
                and lower not in self.resources.stopwords)

    def _antonym_forms(self, tok) -> list[str]:
        """Antonyms in the token's form; none for comparatives, parts of hyphenated words
        ('dark-colored') and phrasal verbs ('turn down'), whose antonym would not read."""
        res = self.resources
        if tok.tag_ in UNINFLECTABLE_TAGS or any(c.dep_ == "prt" for c in tok.children):
            return []
        if tok.pos_ == "ADJ" and tok.dep_ in NOMINAL_DEPS:
            return []  # "If people have a cold" -> "have a hot": an adjective's form used as a noun
        if tok.dep_ == "amod" and tok.head.pos_ == "NOUN" and \
                listed_whole(res.wordnet, tok.lower_, tok.head.lemma_.lower()):
            return []  # "a common cold" -> "an individual cold": a compound WordNet lists whole
        if hyphen_part(tok):
            return []
        forms = []
        # antonyms of the word's dominant senses only: "find" (discover) has no antonym "lose"
        transitive = any(c.dep_ == "dobj" for c in tok.children) if tok.pos_ == "VERB" else None
        for ant in sense_antonyms(res, tok.lemma_.lower(), tok.pos_, transitive):
            if tok.pos_ == "VERB":
                form = self._inflect(ant.lower(), tok.tag_)
            else:
                form = ant.lower()
                if res.word_pos(match_case(form, tok.text)) != tok.pos_ and not (
                        tok.pos_ == "ADJ" and res.wordnet.synsets(form, pos="a")):
                    continue  # the tagger alone calls "untidy" a verb; WordNet has it as an adjective
            if form is None or form not in res.glove:
                continue
            if form != tok.text.lower():
                forms.append(match_case(form, tok.text))
        return forms

    def _irregular(self) -> dict[str, list[str]]:
        """WordNet's irregular and doubled verb forms by base (lose: lost; stop: stopped)."""
        cached = getattr(self, "_irregular_forms", None)
        if cached is None:
            cached = self._irregular_forms = irregular_forms(verb_exceptions(self.resources.wordnet))
        return cached

    def _inflect(self, base: str, tag: str) -> str | None:
        """The antonym verb in the original's form, or None when regular rules would guess."""
        return inflect_verb(base, tag, self._irregular(), self.resources.glove)

    def _negation(self, doc, blanks) -> list:
        """Edits that negate the question: 'not' after the first auxiliary (after an inverted
        subject: 'What does Tom not like?'), do-support before the main verb, or removing an
        existing 'not' so negations never stack."""
        toks = [t for t in doc if not self._blocked(t, blanks)]
        aux = next((t for t in toks if t.pos_ == "AUX" or t.tag_ == "MD"), None)
        if aux is not None:
            after = doc[aux.i + 1] if aux.i + 1 < len(doc) else None
            if after is not None and after.lower_ in ("not", "n't", "n’t"):
                if after.lower_ == "not":
                    return [(aux.idx + len(aux.text), after.idx + len(after.text), "",
                             _negation_record(after.text, "", after.idx))]
                full = match_case(CONTRACTED_AUX.get(aux.lower_, aux.lower_), aux.text)
                return [(aux.idx, after.idx + len(after.text), full,
                         _negation_record(aux.text + after.text, full, aux.idx))]
            neg = next((t for t in toks if t.lower_ == "not" and t.dep_ == "neg" and t.i > aux.i), None)
            if neg is not None:  # 'What did Tom not like?': the "not" after the subject goes
                gap = doc[neg.i - 1].idx + len(doc[neg.i - 1].text)
                return [(gap, neg.idx + len(neg.text), "", _negation_record(neg.text, "", neg.idx))]
            head = aux if aux.head == aux or aux.dep_ == "ROOT" else aux.head
            subj = next((c for c in head.children if c.dep_ in SUBJECT_DEPS and c.i > aux.i), None)
            anchor = aux
            if subj is not None:
                edge = subj.right_edge
                participle = next((t for t in subj.subtree if t.dep_ == "acl" and t.tag_ in ("VBN", "VBG")
                                   and t.i > subj.i), None)
                if participle is not None:  # 'Where was the writer born?' parsed as 'writer born'
                    edge = doc[participle.i - 1]
                rest = [t for t in doc[edge.i + 1:] if not t.is_punct]
                if head is not aux or rest or subj.pos_ == "PRON":
                    anchor = edge
            elif head is not aux:
                anchor = self._inverted_subject(doc, aux) or aux
            if anchor is aux and aux.lower_ == "can":
                new = match_case("cannot", aux.text)
                return [(aux.idx, aux.idx + len(aux.text), new, _negation_record(aux.text, new, aux.idx))]
            at = anchor.idx + len(anchor.text)
            return [(at, at, " not", _negation_record("", "not", at))]
        roots = [t for t in toks if t.dep_ == "ROOT" and t.pos_ == "VERB" and t.tag_ in DO_SUPPORT]
        verbs = roots or [t for t in toks if t.pos_ == "VERB" and t.tag_ in ("VBZ", "VBD", "VBP")]
        if not verbs:
            return []
        verb = verbs[0]
        lemma = verb.lemma_.lower() if verb.lemma_.isalpha() else verb.text.lower()
        new = match_case(f"{DO_SUPPORT[verb.tag_]} not {lemma}", verb.text)
        return [(verb.idx, verb.idx + len(verb.text), new, _negation_record(verb.text, new, verb.idx))]

    @staticmethod
    def _inverted_subject(doc, aux):
        """Last token of a noun phrase right after an auxiliary with more words after it, for
        parses that miss the subject of 'What does Tom like?'."""
        last = None
        for tok in doc[aux.i + 1:]:
            if tok.pos_ not in NOUN_PHRASE_POS and tok.tag_ != "POS":
                break
            last = tok
        if last is None or last.pos_ not in ("NOUN", "PROPN", "PRON"):
            return None
        rest = [t for t in doc[last.i + 1:] if not t.is_punct and not t.is_space]
        return last if rest else None

    def plan(self, example, rng: random.Random) -> _Plan:
        """Every change the question allows, with enough alternatives for each insertion."""
        cfg, res = self.config, self.resources
        question = example.question
        doc = res.parse(question)
        blanks = [m.span() for m in BLANK_OR_PARENS_RE.finditer(question)]
        taken = {w.lower() for w in WORD_RE.findall(question)}
        gold_words = {w.lower() for w in WORD_RE.findall(example.answer)}
        want = cfg.insertions + 2
        subs, seen = [], {}
        for tok in doc:
            if not self._glove_eligible(tok, blanks):
                continue
            key = tok.text.lower()
            if key not in seen:
                if cfg.number_mode == "value" and tok.pos_ == "NUM" and NUMBER_RE.fullmatch(tok.text):
                    day = tok.ent_type_ == "DATE"
                    cands = [(v, "number") for v in new_number(tok.text, rng, taken | gold_words, want, day)]
                else:
                    cands = [(c, "glove") for c in self._glove_candidates(tok, taken, gold_words, want)]
                seen[key] = cands
            if seen[key]:
                subs.append((tok, seen[key]))
        changed = {tok.i for tok, _ in subs}
        antonyms = []
        for tok in doc:
            # "How old is Dave's sister?" -> "Mike's wife is 10 young.": the adjective of "how" stays
            if (tok.i in changed or tok.pos_ not in ANTONYM_POS or not tok.text.isalpha()
                    or tok.i > 0 and doc[tok.i - 1].lower_ == "how"
                    or tok.lower_ in res.stopwords or tok.lower_ in cfg.keep_words
                    or self._blocked(tok, blanks)):
                continue
            forms = self._antonym_forms(tok)
            if forms:
                antonyms.append((tok, forms))
        if not subs and not antonyms:
            # "Who can drive?": no noun, name or number to swap and no antonym; the verb goes to a
            # GloVe neighbour of its field and form ("Jack can swim."), so the question is attacked
            for tok in doc:
                if (tok.pos_ == "VERB" and tok.text.isalpha() and tok.lemma_.lower() not in FRAME_VERBS
                        and tok.lower_ not in cfg.keep_words and not self._blocked(tok, blanks)
                        and not any(c.dep_ == "prt" for c in tok.children) and not hyphen_part(tok)):
                    cands = self._glove_candidates(tok, taken, gold_words, want)
                    if cands:
                        subs.append((tok, [(c, "glove") for c in cands]))
        rng.shuffle(antonyms)
        reframe = [e for e in reframe_edits(doc) if not any(s < e[1] and e[0] < t for s, t in blanks)]
        return _Plan(subs, antonyms, self._negation(doc, blanks), reframe)

    def variant(self, plan: _Plan, j: int) -> tuple[list, bool]:
        """Edits for the j-th sentence: the j-th choice of each word and the j-th antonym target,
        so that different sentences use different words where the question allows it."""
        edits, used = [], {}
        for tok, cands in plan.substitutions:
            key = tok.text.lower()
            if key not in used:
                order = list(range(min(j, len(cands) - 1), len(cands))) + list(range(min(j, len(cands) - 1)))
                pick = next((cands[i] for i in order if cands[i][0].lower() not in
                             {new.lower() for new, _ in used.values()}), cands[order[0]])
                used[key] = pick
            new = match_case(used[key][0], tok.text)
            glove = used[key][1] == "glove"
            same = self._same_meaning(tok, new) if glove else None  # asked of GloVe's near words only
            record = Replacement(tok.idx, tok.idx + len(tok.text), tok.text, new, used[key][1],
                                 pos=tok.pos_ if glove else None, same_meaning=same, changes_meaning=same is None)
            edits.append((tok.idx, tok.idx + len(tok.text), new, record))
        if plan.antonyms:
            tok, forms = plan.antonyms[j % len(plan.antonyms)]
            new = forms[(j // len(plan.antonyms)) % len(forms)]
            edits.append((tok.idx, tok.idx + len(tok.text), new,
                          Replacement(tok.idx, tok.idx + len(tok.text), tok.text, new, "antonym",
                                      changes_meaning=True)))
        edits += plan.reframe
        changed = any(record.changes_meaning for *_, record in edits)
        if not edits or (self._same_meaning_filter and not changed):
            return (list(plan.negation) if self.config.negation_fallback else []), True
        return edits + self._articles(plan, [e for e in edits if e[3].kind != "reframe"]), False

    @staticmethod
    def _articles(plan: _Plan, edits: list) -> list:
        """'a'/'an' before a replaced word and a bare possessive apostrophe after it, fixed to the
        new word ('an English' -> 'a Scottish', "Jones' son" -> "Smith's son")."""
        toks = [t for t, _ in plan.substitutions] + [t for t, _ in plan.antonyms]
        if not toks:
            return []
        doc, edited = toks[0].doc, {e[0] for e in edits}
        fixes = []
        for start, _, new, _ in edits:
            tok = next(t for t in toks if t.idx == start)
            k = tok.i - 1
            while k >= 0 and doc[k].is_quote:
                k -= 1
            if k < 0:
                continue
            article = doc[k]
            if article.lower_ in ("a", "an") and article.idx not in edited:
                # "a different man" -> "the same man": "same" takes the definite article
                want = match_case("the" if new.lower() == "same" else indefinite_article(new), article.text)
                if want != article.text:
                    fixes.append((article.idx, article.idx + len(article.text), want, None))
            after = doc[tok.i + 1] if tok.i + 1 < len(doc) else None
            if after is not None and after.text in ("'", "’") and after.tag_ == "POS" \
                    and not new.lower().endswith("s"):
                fixes.append((after.idx, after.idx + 1, after.text + "s", None))
            if after is not None and after.lower_ in ("'s", "’s") and new.lower().endswith("s") \
                    and tok.tag_ in ("NN", "NNS") and new.lower() != tok.lower_ + "s":
                fixes.append((after.idx, after.idx + len(after.text), after.text[0], None))  # "people's" -> "families'"
        return fixes

    @staticmethod
    def apply_edits(text: str, edits: list) -> str:
        for start, end, new, _ in sorted(edits, key=lambda e: e[0], reverse=True):
            text = text[:start] + new + text[end:]
        return text

    def prepare(self, examples: list) -> None:
        self.resources.prepare_sentences([ex.passage for ex in examples])
        res = self.resources
        res.prepare_parses([ex.question for ex in examples])
        res.glove.prepare([tok.text.lower() for ex in examples for tok in res.parse(ex.question)
                           if tok.pos_ in GLOVE_POS or tok.pos_ == "NUM"], k=self.config.neighbours)

    @functools.cached_property
    def _sentence_checks(self) -> tuple[list, TextContext]:
        """The audit's sentence checks (advrace.core.checks.sentences), refusing a sentence before
        it is inserted; with `negation_fallback` the "not" sentences it asks for are let in."""
        skip = {"negation_hint"} if self.config.negation_fallback else set()
        checks = [c for c in checks_for(self.name, SENTENCE) if c.name not in skip]
        return checks, TextContext(same_meaning_fn=self.resources.same_meaning, parse_fn=self.resources.parse)

    def _refused(self, example, entry: AdversarialSentence) -> str | None:
        """The flag of the first shared check that refuses the sentence, or None."""
        checks, ctx = self._sentence_checks
        if entry.rule == GLUED:  # AdvRACE's form, asked for by glued_fallback: the audit still flags it
            checks = [c for c in checks if c.name != "grammar"]
        refused = first_refusal(checks, Subject(example, entry.sentence, record=entry), ctx, {})
        return refused[0].flag if refused else None

    def perturb(self, example, rng):
        cfg, res = self.config, self.resources
        question = clean_question(example.question)
        if not question:
            raise CannotPerturb("empty question")
        gold = example.answer
        gold_key = option_key(gold)
        distractors, keys = [], {gold_key}
        for i, option in enumerate(example.options):
            key = option_key(option)
            if i != example.label and key and key not in keys:
                keys.add(key)
                distractors.append(i)
        negated = self._skip_negated and negated_question(question)
        if len(distractors) < cfg.insertions and not negated:
            raise CannotPerturb("no distinct distractor")
        rng.shuffle(distractors)
        if negated:
            # "Which is NOT true?", "All are mentioned EXCEPT _": the question made a statement
            # says that a distractor does not satisfy it, a hint. An option said of someone else
            # is safe: the gold ("He went by bus", false of the passage) stated of another
            # person stays false of the passage's own, and lures a reader to take it as stated
            # the gold said of someone else is still said in the passage: not for "Which is NOT
            # mentioned?", only for "Which is NOT true?"
            said = MENTIONED_RE.search(question)
            try:
                chosen = self._other_referent(example, ([] if said else [example.label]) + distractors, rng)
            except CannotPerturb as exc:
                raise CannotPerturb(f"negated question: {exc}") from None
            starts = list(res.sentence_starts(example.passage)) + [len(example.passage)]
            inserts = [(c.sentence, rng.choice(starts)) for c in chosen]
            return example.insert_sentences(inserts).with_provenance(AttackSummary(self.name, sentences=tuple(chosen)))

        plan = self.plan(example, rng)
        # with a fluency model, more word choices compete (each variant takes the j-th GloVe
        # neighbour of each word and the j-th antonym target)
        wanted = cfg.fluency_candidates if cfg.fluency_model else 1
        variants = [self.variant(plan, j) for j in range(max(cfg.insertions, wanted if wanted > 1 else 0))]
        starts = list(res.sentence_starts(example.passage)) + [len(example.passage)]
        blank = bool(BLANK_OR_PARENS_RE.search(question) or TRAILING_DOTS_RE.search(question))
        content = any(record is not None and record.changes_meaning and record.kind != "reframe"
                      for edits, fallback in variants if not fallback for *_, record in edits)
        if asks_what_passage_states(question) and not (blank and content):
            # "Which is true?", "What can we infer?": the options are statements about the
            # passage, so a sentence stating one about the passage's own people makes it true;
            # one about someone else lures a word matcher and leaves the gold the only answer
            chosen = self._other_referent(example, distractors, rng)
            inserts = [(c.sentence, rng.choice(starts)) for c in chosen]
            return example.insert_sentences(inserts).with_provenance(AttackSummary(self.name, sentences=tuple(chosen)))
        self._author_moved(res.parse(example.question), plan)
        # a "not" sentence made from "What can we learn from the passage?" or "What is the best
        # title for the passage?" is text about the passage ("We cannot learn from the passage
        # that X", "What is not the best title for the passage X") and a hint: never written
        about_passage = self._no_not_about_passage and (asks_what_passage_states(question)
                                                        or bool(ABOUT_PASSAGE_RE.search(question)))
        usable = [v for v in variants if v[0] and not (v[1] and about_passage)]
        if not usable:
            if any(not fallback for _, fallback in variants):
                raise CannotPerturb("no edit")
            if not cfg.negation_fallback:
                raise CannotPerturb("no change of meaning")
            raise CannotPerturb("no change of meaning (question about the passage)" if about_passage
                                else "no negation point")
        titled = self._titles_kept(res.parse(example.question), usable)
        variants = [v for v, kept in zip(usable, titled) if not kept]
        if not variants:
            raise CannotPerturb("title kept in a question about the author")
        original = fold_case_and_spaces(question)
        names = self._other_names(example, rng)

        # each option as the sentences write it: in the passage's case, or kept a name
        cased = {i: passage_case(example.options[i], example.passage) for i in distractors}
        named = {i: named_in_passage(option, example.passage) for i, option in cased.items()}
        chosen, used_options, sentences, used_variants = [], set(), set(), set()
        for j in range(cfg.insertions):
            pool, refused = [], Counter()
            k = j % len(variants)
            order = [k] + [v for v in range(len(variants)) if v != k]
            if wanted > 1:  # the word choices no earlier sentence took compete first, so the sentences differ
                order = [v for v in order if v not in used_variants] + [v for v in order if v in used_variants]
            for v in order:
                edits, fallback = variants[v]
                taken = 0
                mutated = self.apply_edits(example.question, edits)
                if fold_case_and_spaces(clean_question(mutated)) == original:
                    continue
                for i in distractors:
                    if i in used_options:
                        continue
                    option = cased[i]
                    sentence, rule = statement(mutated, option, res, named[i])
                    records = tuple(record for *_, record in sorted(edits, key=lambda e: e[0]) if record is not None)
                    if rule in (CLAUSE_OPTION, VERB_PHRASE_OPTION):
                        # "What did Tom do?" - "He was so scared that he fainted.": the option is
                        # a statement of its own, said of someone else (AdvRACE appended it)
                        made = self._moved_subject(example.options[i], names, example)
                        if isinstance(made, str):
                            rule = f"{rule}, {made}"
                        else:
                            (sentence, records), rule = made, OTHER_REFERENT
                    if not sentence and cfg.glued_fallback:
                        sentence, rule = declarative(mutated, option, res, named[i]), GLUED
                    if not sentence:
                        refused[f"no statement: {rule}"] += 1
                        continue
                    if YES_NO_RE.match(sentence):  # "Yes, Alex Morgan and Jordan Lee do.": a reply
                        refused["no statement: a yes or no reply"] += 1
                        continue
                    if fold_case_and_spaces(sentence) in sentences:
                        refused["no new sentence"] += 1
                        continue
                    if contains_gold(sentence, gold):
                        refused["gold answer in sentence"] += 1
                        continue
                    entry = AdversarialSentence(
                        sentence, question=clean_question(mutated if rule != OTHER_REFERENT else question),
                        replacements=records, answer=example.options[i], option=i,
                        negation_fallback=fallback, rule=rule)
                    why = self._refused(example, entry)
                    if why:
                        refused[why] += 1
                        continue
                    if any(fold_case_and_spaces(e.sentence) == fold_case_and_spaces(sentence) for e, *_ in pool):
                        continue
                    pool.append((entry, i, v))
                    taken += 1
                    if len(pool) >= wanted or taken >= PER_VARIANT:
                        break
                if len(pool) >= wanted:
                    break
            if not pool:
                if j >= cfg.min_insertions:
                    break
                raise CannotPerturb(search_failure(refused, j, cfg.insertions))
            entry, i, v = self._most_fluent(pool)
            used_variants.add(v)
            self._name_used(entry, names)
            used_options.add(i)
            sentences.add(fold_case_and_spaces(entry.sentence))
            chosen.append(entry)
        inserts = [(c.sentence, rng.choice(starts)) for c in chosen]
        return example.insert_sentences(inserts).with_provenance(AttackSummary(self.name, sentences=tuple(chosen)))

    def _most_fluent(self, pool: list):
        """The pool's (sentence, option, variant) whose sentence the LM finds most fluent, chosen
        and recorded as the SQuAD attacks choose (`fluent_choice`); the only one where nothing
        competes. Each pool is scored on its own (the cache forgotten first), so a choice never
        depends on which questions came before."""
        if len(pool) == 1:
            return pool[0]
        scorer = fluency(self.config.fluency_model)
        scorer.forget()
        entry = fluent_choice({0: ([e for e, *_ in pool], ())}, scorer)[0][0]
        _, i, v = next(p for p in pool if p[0].sentence == entry.sentence)
        return entry, i, v

    @staticmethod
    def _author_moved(doc, plan: _Plan) -> None:
        """Refuse a question that names the author or writer where no edit moves it to another
        one ('a writer', 'writers'): its sentence would still be about this passage's author."""
        moved = {e[0] for e in plan.reframe}
        for tok in doc:
            det = reframed_det(tok)
            if tok.lower_ in ("writer", "author", "writers", "authors") and (det is None or det.idx not in moved):
                raise CannotPerturb("author not moved to another person")

    @staticmethod
    def _titles_kept(doc, variants: list) -> list[bool]:
        """Per variant, whether a question about the author keeps a title it names unchanged:
        'Another writer mentioned the story The Magic of Thinking Big because _' is still about
        the very book the question asks of."""
        if not AUTHOR_RE.search(doc.text):
            return [False] * len(variants)
        spans = title_spans(doc)
        out = []
        for edits, _ in variants:
            changed = [(s, e) for s, e, _, record in edits
                       if record is not None and record.changes_meaning and record.kind != "reframe"]
            out.append(any(not any(s < te and ts < e for s, e in changed) for ts, te in spans))
        return out

    def _other_referent(self, example, distractors: list[int], rng) -> list[AdversarialSentence]:
        """Sentences for a question that asks what the passage states: a distractor whose subject
        moved to another person or thing ('He went to Beijing.' -> 'Jordan Lee went to
        Beijing.', 'The boy was sad.' -> 'Another boy was sad.'), so it says nothing about the
        passage's own people and cannot make a distractor true or the gold false."""
        question = clean_question(example.question)
        names = self._other_names(example, rng)
        chosen, refused, sentences = [], Counter(), set()
        for i in distractors:
            if len(chosen) == self.config.insertions:
                break
            made = self._moved_subject(example.options[i], names, example)
            if isinstance(made, str):
                refused[made] += 1
                continue
            sentence, records = made
            if fold_case_and_spaces(sentence) in sentences:
                refused["no new sentence"] += 1
                continue
            if contains_gold(sentence, example.answer):  # the gold must move too, not be believed
                refused["gold answer in sentence"] += 1
                continue
            entry = AdversarialSentence(sentence, question=question, replacements=records,
                                        answer=example.options[i], option=i, rule=OTHER_REFERENT)
            why = self._refused(example, entry)
            if why:
                refused[why] += 1
                continue
            self._name_used(entry, names)
            sentences.add(fold_case_and_spaces(sentence))
            chosen.append(entry)
        if len(chosen) < self.config.min_insertions:
            raise CannotPerturb(search_failure(refused, len(chosen), self.config.insertions))
        return chosen

    @staticmethod
    def _other_names(example, rng) -> list[str]:
        """OTHER_PEOPLE less any whose words the passage, question or options use, in rng order."""
        seen = {w.lower() for w in WORD_RE.findall(" ".join([example.passage, example.question, *example.options]))}
        names = [n for n in OTHER_PEOPLE if not any(w.lower() in seen for w in n.split())]
        rng.shuffle(names)
        return names

    @staticmethod
    def _name_used(entry: AdversarialSentence, names: list[str]) -> None:
        """Take a name out of `names` once a sentence uses it, so two sentences name two people."""
        for rep in entry.replacements:
            if rep.kind == OTHER_REFERENT:
                names[:] = [n for n in names if n not in rep.new]

    def _moved_subject(self, option: str, names: list[str], example):
        """(sentence, replacements) with the option's subject moved to another referent, or why
        not: a name or he/she becomes a name from OTHER_PEOPLE (they: two names), a possessive
        his/her/Tom's the name's, 'the N' becomes 'another N' ('other Ns'), a verb phrase gets a
        name as its subject. A claim about a kind ('Teenagers need less sleep.') is never made:
        inserted in the passage it is the writer's own."""
        text = END_PUNCT_RE.sub("", " ".join(option.split())).rstrip(" ,;:")
        doc = self.resources.parse(text)
        root = next((t for t in doc if t.dep_ == "ROOT"), None)
        subj = root and next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
        if subj is None and doc[0].tag_ == "VB" and doc[0].pos_ == "VERB" and names:
            # "Try to make the man laugh." -> "Jordan Lee tried to make the man laugh."
            past = self._inflect(doc[0].lemma_.lower(), "VBD")
            if past is None or any(t.lower_ in ("you", "your", "yourself") for t in doc):
                return "no subject to move to another referent"
            new = f"{names[0]} {past}"
            edits = reframe_edits(doc) + [(0, len(doc[0].text), new, Replacement(
                0, len(doc[0].text), doc[0].text, new, OTHER_REFERENT, changes_meaning=True))]
            return finish_sentence(self.apply_edits(text, edits)), tuple(e[3] for e in sorted(edits, key=lambda e: e[0]))
        if subj is None:
            subj = next((c for c in root.children if c.dep_ == "csubj"), None) if root else None
            return self._believed(text, doc, subj, names, example) if subj is not None else \
                "no subject to move to another referent"
        edits = reframe_edits(doc)
        det = reframed_det(subj)
        if det is None or not any(e[0] == det.idx for e in edits):
            edits += self._subject_edit(doc, subj, names, example)
            if not any(e[3].kind != "reframe" for e in edits):
                return self._believed(text, doc, subj, names, example)
        sentence = finish_sentence(self.apply_edits(text, edits))
        return sentence, tuple(e[3] for e in sorted(edits, key=lambda e: e[0]))

    def _believed(self, text: str, doc, subj, names: list[str], example):
        """A claim about a kind ('Teenagers need less sleep than adults.') as another person's
        belief ('Jordan Lee believes that teenagers need ...'): in the passage, the writer reports
        it without stating it. Not for a subject that points back into the passage (it, this,
        there, the N): 'Jordan Lee believes that it is in a big city' speaks of its city."""
        det = next((c for c in subj.children if c.dep_ == "det"), None)
        generic = subj.pos_ == "NOUN" and (det is None or det.lower_ in ("a", "an", "some", "many", "most", "all", "every"))
        if doc[0].tag_ in ("WRB", "WP", "WDT"):  # "Why disasters are dangerous.": no statement to believe
            return "no subject to move to another referent"
        if OPINION_RE.search(example.question):  # "Which is an opinion?": a fact believed is one
            return "a belief for a question about opinions"
        if not names or not (generic or subj.dep_ == "csubj" or subj.tag_ == "VBG") \
                or any(c.dep_ == "poss" for c in subj.children):
            return "no subject to move to another referent"
        new = f"{names[0]} believes that"
        record = Replacement(0, 0, "", new, OTHER_REFERENT, changes_meaning=True)
        return finish_sentence(f"{new} {_fit(text, False, True, self.resources)}"), (record,)

    def _subject_edit(self, doc, subj, names: list[str], example) -> list:
        def edit(first, last, new, kind=OTHER_REFERENT):
            start, end = doc[first].idx, doc[last].idx + len(doc[last].text)
            old = doc.text[start:end]
            return [(start, end, new, Replacement(start, end, old, new, kind, changes_meaning=True))]

        def name_run(tok):
            first = tok.i
            while first > 0 and (doc[first - 1].pos_ == "PROPN" or
                                 doc[first - 1].lower_.rstrip(".") in HONORIFICS):
                first -= 1
            return first

        if subj.lower_ in ("they", "we") and len(names) >= 2 and (subj.lower_ == "they" or not any(
                t.lower_ in ("us", "our", "ours", "ourselves") for t in doc)):
            return edit(subj.i, subj.i, f"{names[0]} and {names[1]}")
        person = {"i": {"i", "me", "my", "mine", "myself"}, "you": {"you", "your", "yours", "yourself"}}
        if subj.lower_ in person and names and not any(t.lower_ in person[subj.lower_] for t in doc if t.i != subj.i) and any(
                a.tag_ == "MD" or a.tag_ == "VBD" and a.lower_ != "were" for a in [subj.head, *subj.head.children]):
            return edit(subj.i, subj.i, names[0])  # "You can open the windows." - no agreement to mend
        if subj.lower_ in THIRD_PERSON or subj.pos_ == "PROPN":
            if not names or (subj.pos_ == "PROPN" and any(c.dep_ == "det" for c in subj.children)):
                return []
            return edit(subj.i if subj.pos_ != "PROPN" else name_run(subj), subj.i, names[0])
        if subj.pos_ != "NOUN":
            return []
        poss = next((c for c in subj.children if c.dep_ == "poss"), None)
        if poss is not None:
            if poss.lower_ in POSSESSIVE_PRONOUNS and poss.lower_ != "its" and names:
                return edit(poss.i, poss.i, names[0] + "'s")
            if poss.pos_ == "PROPN" and names:
                return edit(name_run(poss), poss.i, names[0])
            return []
        det = next((c for c in subj.children if c.dep_ == "det" and c.i < subj.i), None)
        if det is not None and det.lower_ in ("the", "this", "that", "these", "those"):
            return edit(det.i, det.i, "other" if subj.tag_ == "NNS" else "another")
        # a bare or indefinite noun ("Teenagers need less sleep.", "A hobby can make you
        # outstanding.") says something of a kind, not of someone: moved to a neighbour
        # ("Youngsters need less sleep.") the passage's writer would state the distractor itself
        return []

    def summarize(self, examples: list) -> dict:
        """Counts for stats.json, read back from each example's provenance."""
        perturbed, fallback_questions, fallback_sentences, negated, words = 0, 0, 0, 0, []
        negated_attacked, fewer = 0, 0
        by_kind: dict[str, int] = {}
        by_rule: dict[str, int] = {}
        for example in examples:
            record = summary_of(example.provenance, self.name)
            if record is None or not record.sentences:
                # left unperturbed; a negated question is always skipped ("negated question")
                negated += self._skip_negated and bool(negated_question(clean_question(example.question)))
                continue
            perturbed += 1
            fewer += len(record.sentences) < self.config.insertions
            negated_attacked += bool(negated_question(clean_question(example.question)))
            fallbacks = [s for s in record.sentences if s.negation_fallback]
            fallback_sentences += len(fallbacks)
            fallback_questions += bool(fallbacks)
            for s in record.sentences:
                words.append(count_words(s.sentence))
                by_rule[s.rule or "blank"] = by_rule.get(s.rule or "blank", 0) + 1
                for rep in s.replacements:
                    by_kind[rep.kind] = by_kind.get(rep.kind, 0) + 1
        return {
            "questions": len(examples),
            "perturbed": perturbed,
            # attacked with fewer sentences than `insertions` (down to min_insertions): no more passed
            "fewer_sentences": fewer,
            "negation_fallback_share": significant(fallback_sentences / len(words)) if words else 0.0,
            "negation_fallback_questions": significant(fallback_questions / perturbed) if perturbed else 0.0,
            "negated_questions_skipped": negated,
            # each said of another person or thing (rule other_referent), see `_other_referent`
            "negated_questions_attacked": negated_attacked,
            # how each sentence was stated: "blank", a declarative rule, "other_referent", or
            # "glued" (the question with the distractor after it: not English, glued_fallback)
            "sentences_by_rule": dict(sorted(by_rule.items())),
            "glued_share": significant(by_rule.get(GLUED, 0) / len(words)) if words else 0.0,
            "replacements_by_kind": dict(sorted(by_kind.items())),
            "avg_inserted_words": significant(sum(words) / len(words)) if words else 0.0,
        }
