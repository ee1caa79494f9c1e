"""Candidate adversarial sentences for one question, Jia and Liang's steps 1 to 4: mutate the
question (question_mutation), take a fake answer by the first answer rule that applies (the typed
pool of fake_answers, then answer_rules), state it as a sentence (declarative_rules), and keep the
sentences that pass the readability checks and the audit's own (a change that vanished, a fake of
another type, a grammar flag). The rules are tried in order and the first whose sentences pass is
kept; the rejections are counted, for the stats and for the reason an example gets no sentence.
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
    rejected: Counter = Counter()

    @functools.cache
    def typed(text: str, start: int, end: int) -> str:  # the gold once, not once per candidate
        return answer_type(text, start, end, resources)

    ctx = TextContext(same_meaning_fn=resources.same_meaning, answer_type_fn=typed, parse_fn=resources.parse)
    first = example.answers[0]
    kind = typed(example.context, first.start, first.end)
    key = type_key(kind, example.context, first.start, first.end, resources, example.question,
                   config.common_word_fakes)
    golds = [a.text for a in example.answers]
    rng = rng or random.Random(0)
    pool = pool if pool is not None else FakePool(cap=config.fake_cap, resources=resources)
    avoid = list(paragraph_answers or ()) + golds
    if choices is None:
        choices = list(_fake_choices(example, kind, key, resources, config, second_set, rng, pool, avoid, closed))
    drawn: dict[tuple, tuple] = {}

    def mutation(skip: frozenset, attempt: int) -> tuple:  # drawn once, shared by the rules
        if (skip, attempt) not in drawn:
            mutated, replacements = mutate_question(example.question, resources, neighbours=config.neighbours,
                                                    rng=rng, choices=config.choices, skip=skip)
            if not replacements:  # none of the high-confidence rules applies: Jia and Liang's others
                mutated, replacements = mutate_question(example.question, resources, neighbours=config.neighbours,
                                                        rng=rng, choices=config.choices, skip=skip, common_words=True)
            if not replacements:  # nor those: a verb, our own last resort
                mutated, replacements = mutate_question(example.question, resources, neighbours=config.neighbours,
                                                        rng=rng, choices=config.choices, skip=skip, verbs=True)
            drawn[skip, attempt] = (mutated, replacements)
        return drawn[skip, attempt]

    out: list[AdversarialSentence] = []
    if not mutation(frozenset(), 0)[1]:
        rejected["question not mutated"] += 1
        return [], rejected
    # the best-typed rule first, each tried with up to `attempts` mutations (a change that vanished
    # in its sentences, standing in the wh-phrase the fake replaces, is left as it was in the next),
    # before a less well typed rule is tried
    seen: set[str] = set()

    def state(choice, mutated, replacements) -> set[int]:
        """Add the choice's passing sentences for one mutation to `out`; the starts of the
        replacements that vanished in its sentences."""
        vanished: set[int] = set()
        for fake in choice.fakes:
            for cand in declarative_candidates(mutated, fake, resources, choice.kind):
                if cand.rule.endswith("np_of") and fake.split()[-1].lower() in mutated.lower().split():
                    continue  # "the river of the Kolmogorov River": the fake names its kind already
                problem = readability_problem(cand.sentence, example.question, golds, resources,
                                              example.context)
                record = AdversarialSentence(cand.sentence, question=mutated, replacements=tuple(replacements),
                                             answer=fake, answer_type=choice.kind, rule=cand.rule,
                                             fake_rule=choice.rule, fake_cosine=choice.cosine, fake_pmi=choice.pmi)
                lost = [] if problem else VANISHED.lost(cand.sentence, record, ctx)
                if lost:
                    problem = "change vanished"
                    vanished.update(r.start for r in lost)
                elif not problem and FAKE_TYPE.refuse(Subject(example, cand.sentence, record=record), ctx, {}):
                    # read in its sentence, the fake is not of the gold's kind (the tagger's slip)
                    problem = "fake answer of another type"
                elif not problem and GRAMMAR.refuse(Subject(example, cand.sentence, record=record), ctx, {}):
                    problem = GRAMMAR.flag  # the audit's grammar check: a sentence it would flag is not kept
                if problem:
                    rejected[problem] += 1
                elif cand.sentence not in seen:
                    seen.add(cand.sentence)
                    out.append(record)
        return vanished

    for choice in choices:
        skip: frozenset[int] = frozenset()
        for attempt in range(config.attempts):
            mutated, replacements = mutation(skip, attempt)
            if not replacements:
                rejected["change vanished"] += 1
                break
            vanished = state(choice, mutated, replacements)
            if out:
                break
            # mutate again: leaving the words that vanished as they are, or drawing other neighbours
            skip = skip | frozenset(vanished)
        if out:
            for extra in range(1, mutations):  # other mutations of the question, for the fluency to choose
                mutated, replacements = mutation(skip, config.attempts + extra)
                if replacements:
                    state(choice, mutated, replacements)
            break  # the first rule whose sentences pass: a later rule's fakes are less well typed
    if not out and not rejected:
        rejected["no rule matched"] += 1
    return out, rejected


def no_sentence_reason(rejected: Counter) -> str:
    """The reason an example got no sentence: a vanished change when any candidate lost one,
    else the most frequent rejection (the first on a tie)."""
    if "change vanished" in rejected:
        return "change vanished"
    return max(rejected, key=lambda k: rejected[k]) if rejected else "no candidate"
