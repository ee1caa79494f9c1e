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
Negated questions ("Which is NOT true?", "All EXCEPT _", `validity.negated_question`) are
skipped ("negated question"): a sentence made from them says that a distractor does not satisfy
the question, which is again a hint.
"""

from __future__ import annotations

import functools
import random
import re
from collections import Counter
from dataclasses import dataclass

from advrace.core.checks import SENTENCE, Subject, TextContext, checks_for, first_refusal
from advrace.core.errors import ConfigError
from advrace.core.numbers import significant
from advrace.core.provenance import AdversarialSentence, AttackSummary, Replacement, summary_of
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import BLANK_OR_PARENS_RE, WORD_RE, count_words, fold_case_and_spaces
from advrace.core.validity import END_PUNCT_RE, asks_what_passage_states, negated_question, option_key
from advrace.resources.inflection import (indefinite_article, inflect_verb, irregular_forms,
                                          match_case)
from advrace.resources.wordnet import verb_exceptions

from .base import Attack, CannotPerturb, register
from .word_swaps import counted_by_ordinal, hyphen_part, keeps_entity, keeps_form, known, sense_antonyms, whole_name

TRAILING_DOTS_RE = re.compile(r"\s*(?:\.{3,}|…)\s*$")
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
# X" says that a distractor is false: a hint, not a distractor, so truth words never change.
META_WORDS = ("passage", "article", "text", "paragraph", "writer", "author", "title", "lot",
              "kind", "sort", "word", "words", "phrase", "phrases", "sentence", "sentences",
              "statement", "statements", "following", "true", "false", "correct", "incorrect",
              "untrue")
# A question that names the passage or its author is about the passage ("What is the passage
# mainly about?", "the best title for the passage", "The author wants to _"): negated, it becomes
# text about the passage that says a distractor is not the answer ("What is not the best title
# for the passage X"), so such a question never falls back to "not".
ABOUT_PASSAGE_RE = re.compile(r"\b(?:passage|article|text|paragraph|writer|author|title)s?\b", re.IGNORECASE)
NUMBER_NOUNS = frozenset({"hundred", "thousand", "million", "billion", "dozen", "score"})
HONORIFICS = frozenset({"mr", "mrs", "ms", "miss", "dr", "sir", "madam", "prof", "mister"})


@dataclass(frozen=True)
class AddSentConfig:
    neighbours: int = 20
    number_mode: str = "value"
    insertions: int = 2
    keep_words: tuple[str, ...] = META_WORDS
    # When no replacement can change the question's meaning, negate it with "not" (True, as
    # AdvRACE did) or leave the question unperturbed ("no change of meaning", False). Off by
    # default: a "not" sentence says that a distractor is NOT the answer, a hint to any reader
    # that understands negation (the audit flags each one, `negation_hint`), though the built-in
    # readers, which match words and ignore "not", found such questions far harder
    # (bench/addsent_validity.py --readers). Never for a question about the passage (what it
    # states, its title, its author), even when True.
    negation_fallback: bool = False

    def __post_init__(self):
        words = self.keep_words
        if isinstance(words, str) or not isinstance(words, (list, tuple)) or \
                not all(isinstance(w, str) for w in words):
            raise ConfigError(f"attack 'addsent': keep_words must be a list of words, not {words!r}")
        object.__setattr__(self, "keep_words", tuple(w.lower() for w in words))
        for key, low, high in (("neighbours", 1, 1000), ("insertions", 1, 3)):
            value = getattr(self, key)
            if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
                raise ConfigError(f"attack 'addsent': {key} must be an integer from {low} to {high}, "
                                  f"not {value!r}")
        if self.number_mode not in ("value", "glove"):
            raise ConfigError(f"attack 'addsent': number_mode must be 'value' or 'glove', "
                              f"not {self.number_mode!r}")


# declarative sentences


def clean_question(question: str) -> str:
    """RACE questions sometimes start with a stray '.' or spaces left over from numbering."""
    return LEADING_JUNK_RE.sub("", question).strip()


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
    return head is not None and resources.word_tags([head.group()])[0][0] == "PROPN"


def _fit(option: str, at_start: bool, at_end: bool, resources) -> str:
    option = " ".join(option.split())
    if not at_end:
        option = option.rstrip(". ")
    if not at_start and option[:1].isupper() and not _keeps_capital(option, resources):
        option = option[0].lower() + option[1:]
    return option


def finish_sentence(text: str) -> str:
    """One space between words, none before punctuation, a capital first and one final '.'."""
    text = SPACE_BEFORE_PUNCT_RE.sub(r"\1", " ".join(text.split()))
    text = END_PUNCT_RE.sub("", LEADING_JUNK_RE.sub("", text))
    if not text:
        return ""
    return text[0].upper() + text[1:] + "."


def declarative(question: str, option: str, resources=None) -> str:
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
            pieces.append(" " + _fit(part, at_start, at_end, resources) + " " if part else " ")
            last = m.end()
        pieces.append(q[last:])
        return finish_sentence("".join(pieces))
    dots = TRAILING_DOTS_RE.search(q)
    stem = q[:dots.start()] if dots else END_PUNCT_RE.sub("", q)
    return finish_sentence(stem + " " + _fit(option, not stem.strip(), True, resources))


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
        # ordinal counts ("the 17th century") or a word of a multi-word name of a place, a body or a
        # work ("Los Angeles" -> "San Houston") is never swapped alone (word_swaps); a person's
        # name is made of given names and surnames, each swapped for a name part that keeps the
        # whole a person's name ("Bill Gates" -> "Bill Powell", not "Senate House")
        name = whole_name(tok)
        if (not known(self.resources, tok.text) or hyphen_part(tok) or counted_by_ordinal(tok)
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
        if hyphen_part(tok):
            return []
        forms = []
        # antonyms of the word's dominant senses only: "find" (discover) has no antonym "lose"
        for ant in sense_antonyms(res, tok.lemma_.lower(), tok.pos_):
            if tok.pos_ == "VERB":
                form = self._inflect(ant.lower(), tok.tag_)
            else:
                form = ant.lower()
                if res.word_pos(match_case(form, tok.text)) != tok.pos_:
                    continue
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
            if (tok.i in changed or tok.pos_ not in ANTONYM_POS or not tok.text.isalpha()
                    or tok.lower_ in res.stopwords or tok.lower_ in cfg.keep_words
                    or self._blocked(tok, blanks)):
                continue
            forms = self._antonym_forms(tok)
            if forms:
                antonyms.append((tok, forms))
        rng.shuffle(antonyms)
        return _Plan(subs, antonyms, self._negation(doc, blanks))

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
        changed = any(record.changes_meaning for *_, record in edits)
        if not edits or (self._same_meaning_filter and not changed):
            return (list(plan.negation) if self.config.negation_fallback else []), True
        return edits + self._articles(plan, edits), False

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
                want = match_case(indefinite_article(new), article.text)
                if want != article.text:
                    fixes.append((article.idx, article.idx + len(article.text), want, None))
            after = doc[tok.i + 1] if tok.i + 1 < len(doc) else None
            if after is not None and after.text in ("'", "’") and after.tag_ == "POS" \
                    and not new.lower().endswith("s"):
                fixes.append((after.idx, after.idx + 1, after.text + "s", None))
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
        return checks, TextContext(same_meaning_fn=self.resources.same_meaning)

    def _refused(self, example, entry: AdversarialSentence) -> str | None:
        """The flag of the first shared check that refuses the sentence, or None."""
        checks, ctx = self._sentence_checks
        refused = first_refusal(checks, Subject(example, entry.sentence, record=entry), ctx, {})
        return refused[0].flag if refused else None

    def perturb(self, example, rng):
        cfg, res = self.config, self.resources
        question = clean_question(example.question)
        if not question:
            raise CannotPerturb("empty question")
        if self._skip_negated and negated_question(question):
            # "Which is NOT true?", "All are mentioned EXCEPT _": a sentence made from it says
            # that a distractor does not satisfy the question, which is a hint, not a distractor
            raise CannotPerturb("negated question")
        gold = example.answer
        gold_key = option_key(gold)
        distractors, keys = [], {gold_key}
        for i, option in enumerate(example.options):
            key = option_key(option)
            if i != example.label and key and key not in keys:
                keys.add(key)
                distractors.append(i)
        if len(distractors) < cfg.insertions:
            raise CannotPerturb("no distinct distractor")
        rng.shuffle(distractors)

        plan = self.plan(example, rng)
        variants = [self.variant(plan, j) for j in range(cfg.insertions)]
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
        variants = usable
        original = fold_case_and_spaces(question)
        starts = list(res.sentence_starts(example.passage)) + [len(example.passage)]

        chosen, used_options, sentences = [], set(), set()
        for j in range(cfg.insertions):
            found, refused = None, Counter()
            k = j % len(variants)
            for edits, fallback in [variants[k]] + variants[:k] + variants[k + 1:]:
                mutated = self.apply_edits(example.question, edits)
                if fold_case_and_spaces(clean_question(mutated)) == original:
                    continue
                for i in distractors:
                    if i in used_options:
                        continue
                    sentence = declarative(mutated, example.options[i], res)
                    if not sentence or fold_case_and_spaces(sentence) in sentences:
                        refused["no new sentence"] += 1
                        continue
                    if contains_gold(sentence, gold):
                        refused["gold answer in sentence"] += 1
                        continue
                    entry = AdversarialSentence(
                        sentence, question=clean_question(mutated),
                        replacements=tuple(record for *_, record in sorted(edits, key=lambda e: e[0])
                                           if record is not None),
                        answer=example.options[i], option=i, negation_fallback=fallback)
                    why = self._refused(example, entry)
                    if why:
                        refused[why] += 1
                        continue
                    found = entry, i
                    break
                if found:
                    break
            if found is None:
                raise CannotPerturb(search_failure(refused, j, cfg.insertions))
            entry, i = found
            used_options.add(i)
            sentences.add(fold_case_and_spaces(entry.sentence))
            chosen.append(entry)
        inserts = [(c.sentence, rng.choice(starts)) for c in chosen]
        return example.insert_sentences(inserts).with_provenance(AttackSummary(self.name, sentences=tuple(chosen)))

    def summarize(self, examples: list) -> dict:
        """Counts for stats.json, read back from each example's provenance."""
        perturbed, fallback_questions, fallback_sentences, negated, words = 0, 0, 0, 0, []
        by_kind: dict[str, int] = {}
        for example in examples:
            record = summary_of(example.provenance, self.name)
            if record is None or not record.sentences:
                # left unperturbed; a negated question is always skipped ("negated question")
                negated += self._skip_negated and bool(negated_question(clean_question(example.question)))
                continue
            perturbed += 1
            fallbacks = [s for s in record.sentences if s.negation_fallback]
            fallback_sentences += len(fallbacks)
            fallback_questions += bool(fallbacks)
            for s in record.sentences:
                words.append(count_words(s.sentence))
                for rep in s.replacements:
                    by_kind[rep.kind] = by_kind.get(rep.kind, 0) + 1
        return {
            "questions": len(examples),
            "perturbed": perturbed,
            "negation_fallback_share": significant(fallback_sentences / len(words)) if words else 0.0,
            "negation_fallback_questions": significant(fallback_questions / perturbed) if perturbed else 0.0,
            "negated_questions_skipped": negated,
            "replacements_by_kind": dict(sorted(by_kind.items())),
            "avg_inserted_words": significant(sum(words) / len(words)) if words else 0.0,
        }
