"""AddSent (AdvRACE, Si et al., Findings of ACL 2021, section 3.3): insert distracting sentences
built from a mutated question and a distractor.

For each question, `insertions` times (two in the paper), with other words and another distractor:
1. plan the question's changes (`sentences.question_swaps`): nouns, names and numbers to nearby
   GloVe words of the same kind, one adjective, adverb or verb to its WordNet antonym, the passage
   and its author to another text or person; "not" only with `negation_fallback`. A neighbour that
   keeps the word's meaning is never taken: the sentence would answer the question asked;
2. state the mutated question with one original distractor (`sentences.statements`): a blank takes
   it, a wh-question goes through the declarative rules; AdvRACE glued the distractor after the
   question, which is not English (`glued_fallback`);
3. where the options are statements about the passage (what it states, a negated question, a
   clause for a wh-question), say each of someone the passage never names instead
   (`sentences.other_referent`), so the gold stays the only answer;
4. refuse a sentence the audit's sentence checks refuse, or that states the gold
   (`sentences.refusals`), and insert the rest at random sentence boundaries.
Where no sentence passes, the question is left unchanged and the reason counted.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Literal

from advrace.core.checks import SENTENCE, TextContext, checks_for
from advrace.core.checks.sentences import OTHER_REFERENT
from advrace.core.errors import ConfigError
from advrace.core.provenance import AdversarialSentence, AttackSummary
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import fold_case_and_spaces
from advrace.core.checks.option_identity import option_key
from advrace.core.checks.question_kinds import asks_what_passage_states, negated_question
from advrace.models.decoders.loaded_lm import loaded_lm

from .base import Attack, CannotPerturb, register
from .sentences.fluency import fluency, fluent_choice
from .sentences.insertion_stats import sentence_stats
from .sentences.other_referent import MENTIONED_RE, moved_subject, name_used, other_names, said_of_others
from .sentences.question_swaps import GLOVE_POS, META_WORDS, QuestionSwaps, apply_edits
from .sentences.refusals import author_not_moved, search_failure, sentence_refusal, usable_variants
from .sentences.statement_frames import CLAUSE_OPTION, VERB_PHRASE_OPTION, YES_NO_RE, has_blank
from .sentences.statements import (GLUED, clean_question, declarative, named_in_passage, passage_case,
                                   statement)

PER_VARIANT = 2  # sentences one word choice puts in the fluency pool (with two distractors), so choices compete


@dataclass(frozen=True)
class AddSentConfig:
    """The ranges are checked with every config (`core.checking`); the relations between fields here."""
    neighbours: int = field(default=20, metadata={"min": 1, "max": 1000})
    number_mode: Literal["value", "glove"] = "value"
    insertions: int = field(default=2, metadata={"min": 1, "max": 3})
    # the fewest sentences a question keeps when no more pass the checks: AdvRACE inserted
    # `insertions` into every question (`insertions` here: all or none)
    min_insertions: int = field(default=1, metadata={"min": 1})
    keep_words: tuple[str, ...] = META_WORDS
    # Where nothing changes the question's meaning: negate it with "not" as AdvRACE did (True; never
    # a question about the passage), or leave it ("no change of meaning"). Off by default: a "not"
    # sentence says a distractor is NOT the answer, a hint (the audit flags it, `negation_hint`).
    negation_fallback: bool = False
    # A wh-question the declarative rules cannot state: skip it ("no statement: <why>"), or glue the
    # distractor after it as AdvRACE did ("What does Tom like the piano.", rule "glued", True).
    glued_fallback: bool = False
    # A causal LM ("smollm2", offline): up to `fluency_candidates` passing sentences compete for each
    # insertion, the most fluent kept. "": the first that passes (the LM read no better, 8x slower).
    fluency_model: str = ""
    fluency_candidates: int = field(default=4, metadata={"min": 1, "max": 16})

    def __post_init__(self):
        object.__setattr__(self, "keep_words", tuple(w.lower() for w in self.keep_words))
        if self.min_insertions > self.insertions:
            raise ConfigError(f"AddSent's config: min_insertions must be an integer from 1 to insertions "
                              f"({self.insertions}), not {self.min_insertions!r}")


@register
class AddSent(Attack):
    name = "mc_addsent"
    tasks = (MULTIPLE_CHOICE,)
    Config = AddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")
    # False only to measure the attack as it was before: without the synonym filter, attacking
    # negated questions, and "not" sentences about the passage (bench/addsent_validity.py)
    _same_meaning_filter = True
    _skip_negated = True
    _no_not_about_passage = True

    @functools.cached_property
    def swaps(self) -> QuestionSwaps:
        return QuestionSwaps(self.config, self.resources, self._same_meaning_filter)

    def prepare(self, examples: list) -> None:
        res = self.resources
        res.prepare_sentences([ex.passage for ex in examples])
        res.prepare_parses([ex.question for ex in examples])
        res.glove.prepare([tok.text.lower() for ex in examples for tok in res.parse(ex.question)
                           if tok.pos_ in GLOVE_POS or tok.pos_ == "NUM"], k=self.config.neighbours)

    def perturb(self, example, rng):
        question = clean_question(example.question)
        if not question:
            raise CannotPerturb("empty question")
        negated = self._skip_negated and negated_question(question)
        distractors = self._distractors(example, negated, rng)
        if negated:
            chosen = self._negated_question(example, question, distractors, rng)
        else:
            chosen = self._mutated_question(example, question, distractors, rng)
        starts = list(self.resources.sentence_starts(example.passage)) + [len(example.passage)]
        inserts = [(c.sentence, rng.choice(starts)) for c in chosen]
        return example.insert_sentences(inserts).with_provenance(AttackSummary(self.name, sentences=tuple(chosen)))

    def _distractors(self, example, negated: bool, rng) -> list[int]:
        """The options other than the gold with distinct texts, in rng order."""
        distractors, keys = [], {option_key(example.answer)}
        for i, option in enumerate(example.options):
            key = option_key(option)
            if i != example.label and key and key not in keys:
                keys.add(key)
                distractors.append(i)
        if len(distractors) < self.config.insertions and not negated:
            raise CannotPerturb("no distinct distractor")
        rng.shuffle(distractors)
        return distractors

    def _negated_question(self, example, question: str, distractors: list[int], rng) -> list:
        """"Which is NOT true?": the question made a statement would say that a distractor does not
        satisfy it, a hint. Options said of someone else instead, the gold first (false of the
        passage's own people, it stays false), but for "Which is NOT mentioned?" distractors only."""
        said = MENTIONED_RE.search(question)
        try:
            return self._other_referent(example, ([] if said else [example.label]) + distractors, rng)
        except CannotPerturb as exc:
            raise CannotPerturb(f"negated question: {exc}") from None

    def _mutated_question(self, example, question: str, distractors: list[int], rng) -> list:
        plan = self.swaps.plan(example, rng)
        # with a fluency model, more word choices compete (each variant takes the j-th GloVe
        # neighbour of each word and the j-th antonym target)
        variants = [self.swaps.variant(plan, j) for j in range(max(self.config.insertions, self._wanted))]
        content = any(record is not None and record.changes_meaning and record.kind != "reframe"
                      for edits, fallback in variants if not fallback for *_, record in edits)
        if asks_what_passage_states(question) and not (has_blank(question) and content):
            # "Which is true?": the options are statements about the passage; one said of the
            # passage's own people makes it true, one said of someone else only lures
            return self._other_referent(example, distractors, rng)
        if author_not_moved(self.resources.parse(example.question), plan.reframe):
            raise CannotPerturb("author not moved to another person")
        variants = usable_variants(question, self.resources.parse(example.question), variants,
                                   self.config.negation_fallback, self._no_not_about_passage)
        return self._search(example, question, distractors, variants, other_names(example, rng))

    @property
    def _wanted(self) -> int:
        """Sentences that compete for one insertion: several with a fluency model, else the first."""
        return self.config.fluency_candidates if self.config.fluency_model else 1

    def _search(self, example, question: str, distractors: list[int], variants: list, names: list[str]) -> list:
        """One sentence per insertion, each from a word choice and a distractor no earlier one
        took; with a fluency model several compete and the most fluent is kept."""
        cfg, wanted = self.config, self._wanted
        # each option as the sentences write it: in the passage's case, or kept a name
        cased = {i: passage_case(example.options[i], example.passage) for i in distractors}
        named = {i: named_in_passage(option, example.passage) for i, option in cased.items()}
        chosen, used_options, sentences, used_variants = [], set(), set(), set()
        original = fold_case_and_spaces(question)
        for j in range(cfg.insertions):
            pool, refused = [], Counter()
            k = j % len(variants)
            order = [k] + [v for v in range(len(variants)) if v != k]
            if wanted > 1:  # the word choices no earlier sentence took compete first, so the sentences differ
                order = [v for v in order if v not in used_variants] + [v for v in order if v in used_variants]
            for v in order:
                edits, fallback = variants[v]
                mutated = apply_edits(example.question, edits)
                if fold_case_and_spaces(clean_question(mutated)) == original:
                    continue
                taken = 0
                for i in (i for i in distractors if i not in used_options):
                    entry = self._sentence(example, question, mutated, edits, fallback, i, cased[i], named[i], names)
                    why = entry if isinstance(entry, str) else self._refusal(example, entry, sentences)
                    if why:
                        refused[why] += 1
                        continue
                    if any(fold_case_and_spaces(e.sentence) == fold_case_and_spaces(entry.sentence) for e, *_ in pool):
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
            name_used(entry, names)
            used_options.add(i)
            sentences.add(fold_case_and_spaces(entry.sentence))
            chosen.append(entry)
        return chosen

    def _sentence(self, example, question, mutated, edits, fallback, i, option, named, names):
        """The sentence stating distractor `i` for the mutated question, or why there is none."""
        sentence, rule = statement(mutated, option, self.resources, named)
        records = tuple(record for *_, record in sorted(edits, key=lambda e: e[0]) if record is not None)
        if rule in (CLAUSE_OPTION, VERB_PHRASE_OPTION):
            # "What did Tom do?" - "He was so scared that he fainted.": the option is a statement
            # of its own, said of someone else (AdvRACE appended it)
            made = moved_subject(example.options[i], names, example.question, self.resources, self.swaps.inflect)
            if isinstance(made, str):
                rule = f"{rule}, {made}"
            else:
                (sentence, records), rule = made, OTHER_REFERENT
        if not sentence and self.config.glued_fallback:
            sentence, rule = declarative(mutated, option, self.resources, named), GLUED
        if not sentence:
            return f"no statement: {rule}"
        if YES_NO_RE.match(sentence):  # "Yes, Alex Morgan and Jordan Lee do.": a reply
            return "no statement: a yes or no reply"
        return AdversarialSentence(sentence, question=clean_question(mutated if rule != OTHER_REFERENT else question),
                                   replacements=records, answer=example.options[i], option=i,
                                   negation_fallback=fallback, rule=rule)

    def _other_referent(self, example, options: list[int], rng) -> list[AdversarialSentence]:
        """Options said of someone the passage never names, until `insertions` pass the checks."""
        chosen, refused = said_of_others(example, options, other_names(example, rng), self.config.insertions,
                                         self._refusal, self.resources, self.swaps.inflect)
        if len(chosen) < self.config.min_insertions:
            raise CannotPerturb(search_failure(refused, len(chosen), self.config.insertions))
        return chosen

    def _refusal(self, example, entry: AdversarialSentence, sentences: set[str]) -> str | None:
        return sentence_refusal(example, entry, sentences, *self._sentence_checks)

    @functools.cached_property
    def _sentence_checks(self) -> tuple[list, TextContext]:
        """The audit's sentence checks (advrace.core.checks.sentences), refusing a sentence before
        it is inserted; with `negation_fallback` the "not" sentences it asks for are let in."""
        skip = {"negation_hint"} if self.config.negation_fallback else set()
        checks = [c for c in checks_for(self.own_name, SENTENCE) if c.name not in skip]
        return checks, TextContext(same_meaning_fn=self.resources.same_meaning, parse_fn=self.resources.parse_syntax)

    def _most_fluent(self, pool: list):
        """The pool's (sentence, option, variant) whose sentence the LM finds most fluent, chosen
        as the SQuAD attacks choose (`fluent_choice`), each pool scored on its own."""
        if len(pool) == 1:
            return pool[0]
        scorer = fluency(self.config.fluency_model)
        scorer.forget()
        entry = fluent_choice({0: ([e for e, *_ in pool], ())}, scorer)[0][0]
        _, i, v = next(p for p in pool if p[0].sentence == entry.sentence)
        return entry, i, v

    def preload(self) -> tuple:
        if not self.config.fluency_model:
            return ()
        loaded_lm(self.config.fluency_model)
        return ((self.config.fluency_model, False),)  # the key `fluency(...)` loads by

    def summarize(self, examples: list) -> dict:
        return sentence_stats(examples, self.name, self.config.insertions, self._skip_negated)
