"""The answer model's choice of AddOneSent's and AddSentMod's sentence: the fake by PMI, the
sentence by fluency.

Jia and Liang's crowd workers mended or threw out the sentences that were not English or whose
fake fitted no reading of the question; with an `answer_model` (SmolLM2 by default, the
closed-book model) AddOneSent and AddSentMod choose instead of drawing at random, in two steps,
each where its score tells what it can:
1. The fake: each rule's first fake is ranked by its pointwise mutual information with the
   question (closed_book.ClosedBook.pmi: log P(fake | question) - log P(fake | a content-free
   question)), highest first, Jia and Liang's rule order on a tie, and the fakes are tried in
   that order (then the rules' other fakes), the first whose sentences pass the checks kept.
   The `date` and `number` rules' fakes (the gold's numbers moved, of its kind by construction)
   go first and the catch-all last, unranked: read on XQuAD-en, PMI preferred a catch-all year
   to the number rule's age for "How old was ...?".
   PMI asks which fake the question calls for: read on XQuAD-en (with the closed-book shots;
   here the question alone, for cost) it chose a fake of the asked kind in 29 of 40 questions,
   the first rule in 27 (docs/results.md). Fluency cannot choose the
   fake: it would favour a common word over a rare name whatever the question asks.
2. The sentence: the chosen fake's sentences (each declarative rule's, over `mutations` draws
   of the question's mutation) are ranked by fluency (sentences/fluency.py: the mean token
   log-probability), the most fluent kept. The candidates state the same fake in the same
   question's words, so what differs between them is the English; PMI cannot see that, for it
   scores the fake alone. SmolLM2's margins are small (-7.34 against -7.18 for "Soulias Morris
   from is in Paris." and "Soulias Morris is from Paris."), so the score chooses among sentences
   the checks passed, never replaces them.
Both scores go in the sentence's provenance (`fake_pmi`, `fluency`). Every question of a prepared
chunk is scored in one batch per step: the fakes are offered in order first, each counting
against `fake_cap` when offered (as in AddSent, for the choice waits for the chunk's scores),
then scored, then each question's sentences written and scored together. The scores are compared
as recorded (4 significant digits), ties going to the first in order, and the fluency cache is
emptied per chunk: the chunks are the runner's fixed ones, so the release does not depend on the
number of workers. With `answer_model: ""` (Jia and Liang's rules alone) nothing is scored: the
first passing rule's fakes, one sentence drawn at random (seeded), as before.
"""

from __future__ import annotations

import dataclasses

from advrace.core.numbers import significant
from advrace.metrics import normalize_answer

from ..sentences.fluency import fluency, fluent_choice
from .answer_rules import FakeChoice
from .candidates import fake_choices, sentence_candidates
from .closed_book import closed_book
from .config import AddSentConfig
from .preparation import PreparedBatch

# answer rules the PMI does not rank: the gold with its numbers moved is of the gold's kind by
# construction, and the catch-all is what is left (read on XQuAD-en, PMI put a catch-all year
# before the number rule's age for "How old was ...?")
_UNRANKED_FIRST = frozenset({"date", "number"})
_UNRANKED_LAST = frozenset({"catch_all"})
_UNRANKED = _UNRANKED_FIRST | _UNRANKED_LAST


def prepared_key(example) -> tuple:
    """What a prepared choice was made for: a split built from another split sees other text."""
    return example.id, example.question, example.context


def choose_with_answer_model(examples, batch: PreparedBatch, resources, config: AddSentConfig, second_set: bool,
                             rng_for) -> dict:
    """Each example's (sentence or None, number of candidates, rejections), by `prepared_key`. In
    order: every fake offered to a question counts against the cap (as in AddSent), for the
    choice waits for the batch's scores. `rng_for(example)` is the attack's seeded generator."""
    offered = []
    for ex in examples:
        rng = rng_for(ex)
        offered.append((ex, rng, *_offer(ex, batch, resources, config, second_set, rng)))
    book = closed_book(config.answer_model, config.answer_batch_size, config.answer_bf16)
    pmis = iter(book.pmi([(ex.question, c.fakes[0]) for ex, _, firsts, _ in offered for c in firsts]))
    found = {}
    for ex, rng, firsts, rest in offered:
        ranked = _by_pmi([dataclasses.replace(c, pmi=significant(next(pmis))) for c in firsts]) + rest
        found[prepared_key(ex)] = sentence_candidates(ex, resources, config, second_set, rng, batch.pool,
                                                      choices=ranked, mutations=config.mutations)
    scorer = fluency(config.answer_model, config.answer_bf16)
    scorer.forget()
    return fluent_choice(found, scorer)


def _offer(example, batch: PreparedBatch, resources, config: AddSentConfig, second_set: bool, rng
           ) -> tuple[list[FakeChoice], list[FakeChoice]]:
    """(each rule's first fake, one choice per distinct fake, each used in the pool as offered;
    the rules' other fakes)."""
    choices = fake_choices(example, resources, config, second_set, rng, batch.pool,
                           batch.answers.get(example.context), batch.closed.get(example.id))
    firsts, seen = [], set()
    for choice in choices:
        norm = normalize_answer(choice.fakes[0]) if choice.fakes else ""
        if norm and norm not in seen:
            seen.add(norm)
            firsts.append(dataclasses.replace(choice, fakes=choice.fakes[:1]))
            batch.pool.use(choice.fakes[0])
    rest = [dataclasses.replace(c, fakes=c.fakes[1:]) for c in choices if c.fakes[1:]]
    return firsts, rest


def _by_pmi(firsts: list[FakeChoice]) -> list[FakeChoice]:
    """The gold's own numbers moved first (of its kind by construction), the catch-all last;
    between them the highest PMI first, Jia and Liang's rule order on a tie."""
    return ([c for c in firsts if c.rule in _UNRANKED_FIRST]
            + sorted((c for c in firsts if c.rule not in _UNRANKED), key=lambda c: -c.pmi)
            + [c for c in firsts if c.rule in _UNRANKED_LAST])
