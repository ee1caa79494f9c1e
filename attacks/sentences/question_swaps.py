"""What AddSent may change in a question, and the edits of each sentence made from it (AdvRACE
section 3.3): nouns, names and numbers to a nearby GloVe word of the same part of speech and kind
(`word_swaps` says which swaps keep the question English), numbers in digits to another value,
one adjective, adverb or verb to a WordNet antonym, the passage and its author to another text or
person, and "not" where nothing else changes the meaning. A GloVe neighbour that keeps the word's
meaning (`Resources.same_meaning`: purpose -> intent, behavior -> behaviour, attitude -> stance)
is never taken: the sentence would answer the very question asked."""

from __future__ import annotations

import itertools
import random
import re
from dataclasses import dataclass

from advrace.core.provenance import Replacement
from advrace.core.text import WORD_RE
from advrace.resources.inflection import indefinite_article, inflect_verb, irregular_forms, match_case
from advrace.resources.wordnet import verb_exceptions

from .negation import negation_edits
from .number_swaps import NUMBER_RE, new_number
from .reframing import reframe_edits
from .statement_frames import blank_spans, in_blank
from .word_swaps import (HONORIFICS, common_word, counted_by_ordinal, frame_fits, hyphen_part, in_fixed_phrase,
                         entity_keepers, keeps_form, known, listed_whole, same_field, sense_antonyms, whole_name)

NUMERIC_RE = re.compile(r"[\d.,:/]*\d[\d.,:/]*")
NAME_ENTITIES = frozenset({"PERSON", "NORP", "FAC", "ORG", "GPE", "LOC", "PRODUCT", "EVENT",
                           "WORK_OF_ART", "LAW", "LANGUAGE"})
GLOVE_POS = frozenset({"NOUN", "PROPN", "NUM"})
ANTONYM_POS = frozenset({"ADJ", "ADV", "VERB"})
UNINFLECTABLE_TAGS = frozenset({"JJR", "JJS", "RBR", "RBS"})
NOMINAL_DEPS = frozenset({"dobj", "pobj", "nsubj", "nsubjpass", "dative", "appos", "compound"})
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
# verbs that frame a question rather than say what it asks ("What does the word mean?", "We can
# infer that _"), and light verbs whose meaning their object carries: never swapped by GloVe
FRAME_VERBS = frozenset({"mean", "know", "learn", "think", "say", "tell", "infer", "suggest", "show", "believe",
                         "refer", "mention", "happen", "be", "have", "do", "get", "make", "take", "go", "come",
                         "find", "see", "write", "want", "like", "need", "use", "call", "read", "conclude",
                         "expect", "describe", "explain", "talk", "discuss", "agree", "seem", "become"})
NUMBER_NOUNS = frozenset({"hundred", "thousand", "million", "billion", "dozen", "score"})


@dataclass
class SwapPlan:
    """What can change in one question: candidate words per token, antonym targets, negation."""

    substitutions: list  # (token, [(new, kind), ...]) best first
    antonyms: list  # (token, [new, ...]) in rng order
    negation: list  # [(start, end, new, record)], or [] where the question has no place for "not"
    reframe: list  # 'the writer' -> 'another writer' (see `reframe_edits`), in every sentence


class QuestionSwaps:
    """The swap plan of a question under one AddSent config (`neighbours`, `number_mode`,
    `keep_words`, `insertions`, `negation_fallback`); `same_meaning_filter` False only to measure
    what the filter prevents (bench/addsent_validity.py)."""

    def __init__(self, config, resources, same_meaning_filter: bool = True):
        self.config = config
        self.resources = resources
        self.same_meaning_filter = same_meaning_filter

    def glove_candidates(self, tok, taken: set[str], gold_words: set[str], want: int) -> list[str]:
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
        fitting = ((cand, cased_cand) for cand, cased_cand, (pos, tag) in zip(plausible, cased, res.word_tags(cased))
                   if self._fits(tok, cand, cased_cand, pos, tag))
        if label:
            return entity_keepers(res, tok, fitting, label, want)
        return [cand for cand, _ in itertools.islice(fitting, want)]

    def _fits(self, tok, cand: str, cased_cand: str, pos: str, tag: str) -> bool:
        """Whether a GloVe neighbour (tagged `pos`, `tag` on its own) can replace the token,
        every check but the entity one (`entity_keepers`)."""
        res, word, numeric = self.resources, tok.text, tok.pos_ == "NUM"
        if pos != tok.pos_:
            return False
        # the word's form: 'children' is not replaced by 'child', nor a name by a common word
        if not numeric and (not keeps_form(tok, cased_cand, tag, res, self.irregular())
                            or not known(res, cased_cand)):
            return False
        if self.same_meaning_filter and self.same_meaning(tok, cand):
            return False
        if tok.pos_ in ("NOUN", "VERB") and not same_field(res.wordnet, tok.text, cand, tok.pos_[0].lower()):
            return False  # "telling lies" -> "telling reaches": a neighbour of another sense
        if tok.pos_ == "VERB" and (not frame_fits(res.wordnet, tok, cand) or tok.tag_ in ("VBD", "VBN") and
                                   self.inflect(res.wordnet.morphy(cand, "v") or cand, tok.tag_) != cand):
            return False  # "was started" -> "was came": a past tense for a participle
        # "Why does Denial go": a name the tagger took for a noun takes no "Objection"
        return not (tok.pos_ == "NOUN" and word[:1].isupper() and not tok.is_sent_start and common_word(res, cand))

    def same_meaning(self, tok, new: str) -> str | None:
        """Why `new` would leave the token's meaning (see `Resources.same_meaning`), or None; a
        noun is compared on its noun senses only (mother and father share a verb sense)."""
        pos = tok.pos_ if tok.pos_ in ("NOUN", "VERB", "ADJ", "ADV") else None
        return self.resources.same_meaning(tok.text, new, pos)

    def glove_eligible(self, tok, blanks) -> bool:
        pos, lower = tok.pos_, tok.text.lower()
        if in_blank(tok, blanks) or lower in self.config.keep_words or lower in HONORIFICS:
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

    def antonym_forms(self, tok) -> list[str]:
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
                form = self.inflect(ant.lower(), tok.tag_)
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

    def irregular(self) -> dict[str, list[str]]:
        """WordNet's irregular and doubled verb forms by base (lose: lost; stop: stopped)."""
        cached = getattr(self, "_irregular_forms", None)
        if cached is None:
            cached = self._irregular_forms = irregular_forms(verb_exceptions(self.resources.wordnet))
        return cached

    def inflect(self, base: str, tag: str) -> str | None:
        """The antonym verb in the original's form, or None when regular rules would guess."""
        return inflect_verb(base, tag, self.irregular(), self.resources.glove)


    def plan(self, example, rng: random.Random) -> SwapPlan:
        """Every change the question allows, with enough alternatives for each insertion."""
        question = example.question
        doc = self.resources.parse(question)
        blanks = blank_spans(question)
        taken = {w.lower() for w in WORD_RE.findall(question)}
        gold_words = {w.lower() for w in WORD_RE.findall(example.answer)}
        want = self.config.insertions + 2
        subs = self._substitutions(doc, blanks, rng, taken, gold_words, want)
        antonyms = self._antonym_targets(doc, blanks, {tok.i for tok, _ in subs})
        if not subs and not antonyms:
            subs = self._verb_swaps(doc, blanks, taken, gold_words, want)
        rng.shuffle(antonyms)
        reframe = [e for e in reframe_edits(doc) if not any(s < e[1] and e[0] < t for s, t in blanks)]
        return SwapPlan(subs, antonyms, negation_edits(doc, blanks), reframe)

    def _substitutions(self, doc, blanks, rng, taken: set[str], gold_words: set[str], want: int) -> list:
        """(token, [(new, kind), ...]) for each noun, name and number with somewhere to go: another
        value for a number in digits (`number_mode: value`), else GloVe neighbours."""
        subs, seen = [], {}
        for tok in doc:
            if not self.glove_eligible(tok, blanks):
                continue
            key = tok.text.lower()
            if key not in seen:
                if self.config.number_mode == "value" and tok.pos_ == "NUM" and NUMBER_RE.fullmatch(tok.text):
                    day = tok.ent_type_ == "DATE"
                    cands = [(v, "number") for v in new_number(tok.text, rng, taken | gold_words, want, day)]
                else:
                    cands = [(c, "glove") for c in self.glove_candidates(tok, taken, gold_words, want)]
                seen[key] = cands
            if seen[key]:
                subs.append((tok, seen[key]))
        return subs

    def _antonym_targets(self, doc, blanks, changed: set[int]) -> list:
        """(token, antonyms) for each adjective, adverb or verb not already swapped."""
        antonyms = []
        for tok in doc:
            # "How old is Dave's sister?" -> "Mike's wife is 10 young.": the adjective of "how" stays
            if (tok.i in changed or tok.pos_ not in ANTONYM_POS or not tok.text.isalpha()
                    or tok.i > 0 and doc[tok.i - 1].lower_ == "how"
                    or tok.lower_ in self.resources.stopwords or tok.lower_ in self.config.keep_words
                    or in_blank(tok, blanks)):
                continue
            forms = self.antonym_forms(tok)
            if forms:
                antonyms.append((tok, forms))
        return antonyms

    def _verb_swaps(self, doc, blanks, taken: set[str], gold_words: set[str], want: int) -> list:
        """"Who can drive?": no noun, name or number to swap and no antonym; the verb goes to a
        GloVe neighbour of its field and form ("Jack can swim."), so the question is attacked."""
        subs = []
        for tok in doc:
            if (tok.pos_ == "VERB" and tok.text.isalpha() and tok.lemma_.lower() not in FRAME_VERBS
                    and tok.lower_ not in self.config.keep_words and not in_blank(tok, blanks)
                    and not any(c.dep_ == "prt" for c in tok.children) and not hyphen_part(tok)):
                cands = self.glove_candidates(tok, taken, gold_words, want)
                if cands:
                    subs.append((tok, [(c, "glove") for c in cands]))
        return subs

    def variant(self, plan: SwapPlan, j: int) -> tuple[list, bool]:
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
            same = self.same_meaning(tok, new) if glove else None  # asked of GloVe's near words only
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
        if not edits or (self.same_meaning_filter and not changed):
            return (list(plan.negation) if self.config.negation_fallback else []), True
        return edits + self._articles(plan, [e for e in edits if e[3].kind != "reframe"]), False

    @staticmethod
    def _articles(plan: SwapPlan, edits: list) -> list:
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


def apply_edits(text: str, edits: list) -> str:
    """`text` with each (start, end, new, record) edit made, right to left so offsets hold."""
    for start, end, new, _ in sorted(edits, key=lambda e: e[0], reverse=True):
        text = text[:start] + new + text[end:]
    return text
