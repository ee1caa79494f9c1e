"""Candidate adversarial sentences for one question, Jia and Liang's steps 1 to 4: mutate the
question (question_mutation), take a fake answer by the first answer rule that applies, state it
as a sentence (declarative_rules), and keep the sentences that read.

Fake answers have the gold answer's type and come from the split's own phrases (see
fake_answers.FakePool), each used at most `fake_cap` times among the passages an attack
prepares together (the runner's fixed chunks, so the release does not depend on the number of
workers); a question whose answer has no determinable type, or whose type has no fake left,
gets one from Jia and Liang's remaining answer rules (answer_rules.ANSWER_RULES: date, number,
abbreviation, wh-word, WordNet file, part of speech, catch-all), so that every question has a fake.

Every generated sentence passes readability checks (sentences/readability): no gold answer in
it, not the question itself, ends with punctuation, has a verb, no word form that exists nowhere
(rules that inflect a non-verb write "inned", "withed"), no wh-word left from the question ("the
what districts"), no doubled word or article ("is is", "the a"). Every change of the mutated
question must survive into the sentence: a replacement inside the wh-phrase vanishes when the
answer takes its place ("In what century did Savery patent ..." -> "Savery patented ... in
1997"), and the sentence then states a wrong answer about the very fact asked; the question is
mutated again without those words, else the example is left out ("change vanished"). The fake,
read in its sentence, must be of the gold's kind, and the audit's grammar check must pass.
Candidates that fail are counted, for the stats and for the reason an example gets no sentence.
"""

from __future__ import annotations

import functools
import random
from collections import Counter

from advrace.core.checks import REGISTRY as CHECKS, Subject, TextContext
from advrace.core.provenance import AdversarialSentence

from ..sentences.declarative_rules import declarative_candidates
from ..sentences.question_mutation import mutate_question
from ..sentences.readability import readability_problem
from .answer_rules import FakeChoice, FallbackFakes
from .closed_book import ClosedAnswer
from .config import AddSentConfig
from .fake_answers import FakePool, answer_type, type_key

VANISHED = CHECKS["change_vanished"]  # the audit's own checks
FAKE_TYPE = CHECKS["fake_type"]
GRAMMAR = CHECKS["grammar"]


def fake_choices(example, resources, config: AddSentConfig, second_set: bool, rng, pool: FakePool,
                 paragraph_answers=None, closed: ClosedAnswer | None = None) -> list[FakeChoice]:
    """Every answer rule's fakes for the example, in Jia and Liang's order (see _fake_choices)."""
    first = example.answers[0]
    kind = answer_type(example.context, first.start, first.end, resources)
    key = type_key(kind, example.context, first.start, first.end, resources, example.question,
                   config.common_word_fakes)
    avoid = list(paragraph_answers or ()) + [a.text for a in example.answers]
    return list(_fake_choices(example, kind, key, resources, config, second_set, rng, pool, avoid, closed))


def _fake_choices(example, kind, key, resources, config: AddSentConfig, second_set, rng, pool: FakePool,
                  avoid_answers, closed: ClosedAnswer | None = None):
    """The fake answers to try, rule by rule: the typed pool's first, then Jia and Liang's
    remaining rules (answer_rules), down to the catch-all."""
    first = example.answers[0]
    if key is not None:
        typed = pool.choose(key, avoid_answers, example.context, example.question, rng, config.fakes, second_set,
                            real=first.text)
        if typed:
            yield FakeChoice("typed", kind, tuple(typed))
    yield from FallbackFakes(pool, resources, second_set).choices(example, kind, avoid_answers, rng, config.fakes,
                                                                  closed)


def sentence_candidates(example, resources, config: AddSentConfig, second_set: bool = False,
                        rng: random.Random | None = None, pool: FakePool | None = None,
                        paragraph_answers=None, closed: ClosedAnswer | None = None,
                        choices: list[FakeChoice] | None = None, mutations: int = 1
                        ) -> tuple[list[AdversarialSentence], Counter]:
    """Candidate adversarial sentences (`AdversarialSentence` records) and why others were dropped.

    `pool` gives the typed fake answers (an empty pool: the fixed lists only); `paragraph_answers`
    are the answers of every question on the passage, none of which a fake may share a word with;
    `closed` is the example's closed-book answer (closed_book_fakes), if any.
    The fakes of the first answer rule whose sentences pass the checks are kept (see
    answer_rules): a typed fake where the data has one, else the fallbacks in Jia and Liang's order.
    `choices` replaces those rules' fakes (`fake_choices`), in the order to try (the PMI ranking);
    `mutations` > 1 adds the sentences of further mutations of the question to the first choice
    that passes, for the fluency to choose among.
    """
    kept = _Kept(example, resources)
    first = example.answers[0]
    kind = kept.typed(example.context, first.start, first.end)
    key = type_key(kind, example.context, first.start, first.end, resources, example.question,
                   config.common_word_fakes)
    rng = rng or random.Random(0)
    pool = pool if pool is not None else FakePool(cap=config.fake_cap, resources=resources)
    avoid = list(paragraph_answers or ()) + kept.golds
    if choices is None:
        choices = list(_fake_choices(example, kind, key, resources, config, second_set, rng, pool, avoid, closed))
    mutation = _Mutations(example.question, resources, config, rng)
    if not mutation(frozenset(), 0)[1]:
        kept.rejected["question not mutated"] += 1
        return [], kept.rejected
    for choice in choices:  # the first rule whose sentences pass: a later rule's fakes are less well typed
        skip = _try_rule(choice, mutation, kept, config.attempts)
        if kept.out:
            for extra in range(1, mutations):  # other mutations of the question, for the fluency to choose
                mutated, replacements = mutation(skip, config.attempts + extra)
                if replacements:
                    kept.add(choice, mutated, replacements)
            break
    if not kept.out and not kept.rejected:
        kept.rejected["no rule matched"] += 1
    return kept.out, kept.rejected


def _try_rule(choice: FakeChoice, mutation: _Mutations, kept: _Kept, attempts: int) -> frozenset[int]:
    """One rule's fakes, tried with up to `attempts` mutations of the question: a change that
    vanished in its sentences (standing in the wh-phrase the fake replaces) is left as it was in
    the next. The starts of the words left as they were."""
    skip: frozenset[int] = frozenset()
    for attempt in range(attempts):
        mutated, replacements = mutation(skip, attempt)
        if not replacements:
            kept.rejected["change vanished"] += 1
            break
        vanished = kept.add(choice, mutated, replacements)
        if kept.out:
            break
        # mutate again: leaving the words that vanished as they are, or drawing other neighbours
        skip = skip | frozenset(vanished)
    return skip


class _Mutations:
    """The question's mutations by (starts of the words to leave, attempt), each drawn once and
    shared by the answer rules: Jia and Liang's high-confidence rules; where none applies, their
    others (common words); where none of those does, our own last resort (a verb)."""

    def __init__(self, question: str, resources, config: AddSentConfig, rng):
        self.question, self.resources, self.config, self.rng = question, resources, config, rng
        self.drawn: dict[tuple, tuple] = {}

    def __call__(self, skip: frozenset, attempt: int) -> tuple:
        if (skip, attempt) not in self.drawn:
            self.drawn[skip, attempt] = self._draw(skip)
        return self.drawn[skip, attempt]

    def _draw(self, skip: frozenset) -> tuple:
        for last_resort in ({}, {"common_words": True}, *([{"verbs": True}] if self.config.verb_swaps else [])):
            mutated, replacements = mutate_question(self.question, self.resources, neighbours=self.config.neighbours,
                                                    rng=self.rng, choices=self.config.choices, skip=skip,
                                                    **last_resort)
            if replacements:
                break
        return mutated, replacements


class _Kept:
    """One question's kept sentences (`out`, each once) and the counts of why others were not."""

    def __init__(self, example, resources):
        self.example, self.resources = example, resources
        self.golds = [a.text for a in example.answers]
        # the gold typed once, not once per candidate
        self.typed = functools.cache(lambda text, start, end: answer_type(text, start, end, resources))
        self.ctx = TextContext(same_meaning_fn=resources.same_meaning, answer_type_fn=self.typed,
                               parse_fn=resources.parse)
        self.out: list[AdversarialSentence] = []
        self.seen: set[str] = set()
        self.rejected: Counter = Counter()

    def add(self, choice: FakeChoice, mutated: str, replacements) -> set[int]:
        """Keep the choice's passing sentences for one mutation; the starts of the replacements
        that vanished in its sentences."""
        vanished: set[int] = set()
        for fake in choice.fakes:
            for cand in declarative_candidates(mutated, fake, self.resources, choice.kind):
                if cand.rule.endswith("np_of") and fake.split()[-1].lower() in mutated.lower().split():
                    continue  # "the river of the Kolmogorov River": the fake names its kind already
                record = AdversarialSentence(cand.sentence, question=mutated, replacements=tuple(replacements),
                                             answer=fake, answer_type=choice.kind, rule=cand.rule,
                                             fake_rule=choice.rule, fake_cosine=choice.cosine, fake_pmi=choice.pmi)
                problem, lost = self._problem(record)
                vanished.update(r.start for r in lost)
                if problem:
                    self.rejected[problem] += 1
                elif cand.sentence not in self.seen:
                    self.seen.add(cand.sentence)
                    self.out.append(record)
        return vanished

    def _problem(self, record: AdversarialSentence) -> tuple[str | None, list]:
        """Why a candidate is not kept (None: it is), and the replacements that vanished in it."""
        ex, sentence = self.example, record.sentence
        problem = readability_problem(sentence, ex.question, self.golds, self.resources, ex.context)
        if problem:
            return problem, []
        lost = VANISHED.lost(sentence, record, self.ctx)
        if lost:
            return "change vanished", lost
        if FAKE_TYPE.refuse(Subject(ex, sentence, record=record), self.ctx, {}):
            return "fake answer of another type", []  # read in its sentence, the fake is not of the gold's kind
        if GRAMMAR.refuse(Subject(ex, sentence, record=record), self.ctx, {}):
            return GRAMMAR.flag, []  # the audit's grammar check: a sentence it would flag is not kept
        return None, []


def no_sentence_reason(rejected: Counter) -> str:
    """The reason an example got no sentence: a vanished change when any candidate lost one,
    else the most frequent rejection (the first on a tie)."""
    if "change vanished" in rejected:
        return "change vanished"
    return max(rejected, key=lambda k: rejected[k]) if rejected else "no candidate"
