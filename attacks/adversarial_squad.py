"""Jia and Liang's adversaries for SQuAD (EMNLP 2017): a distracting sentence added to the context.

- `addonesent`: mutate the question (question_mutation), give it a fake answer of the real
  answer's type (fake_answers), state it as a sentence (declarative_rules), append one
  candidate: chosen by the answer model (below), or at random with `answer_model: ""`.
  Model-independent (the answer model is a fixed part of the recipe, not the model attacked).
- `addsentmod`: the same with the second set of fake answers (another set for every answer rule,
  answer_rules), the sentence prepended: tests whether a model trained on AddSent learned more
  than "skip the last sentence".
- `addsent`: every candidate tried against a span model (a black box), the one with the lowest
  F1 kept. Model-dependent.
- `addany` / `addcommon`: a local search over `length` words appended to the context, minimising
  the model's expected F1 (over its n-best answer distribution); candidates per position are
  random common words plus (addany) the question's words. Model-dependent.

Every generated sentence passes readability checks: no gold answer in it, not the question
itself, ends with punctuation, has a verb, no word form that exists nowhere (rules that inflect
a non-verb write "inned", "withed"), no wh-word left from the question ("the what districts"),
no doubled word or article ("is is", "the a"). Every change of the mutated question must
survive into the sentence: a replacement inside the wh-phrase vanishes when the answer takes
its place ("In what century did Savery patent ..." -> "Savery patented ... in 1997"), and the
sentence then states a wrong answer about the very fact asked; the question is mutated again
without those words, else the example is left out ("change vanished"). Candidates that fail
are counted in the stats.

Fake answers have the gold answer's type and come from the split's own phrases (see
fake_answers.FakePool), each used at most `fake_cap` times among the passages an attack
prepares together (the runner's fixed chunks, so the release does not depend on the number of
workers); a question whose answer has no determinable type, or whose type has no fake left,
gets one from Jia and Liang's remaining answer rules (answer_rules: date, number, abbreviation,
wh-word, WordNet file, part of speech, catch-all), so that every question has a fake.

Fluency and PMI. Jia and Liang's crowd workers mended or threw out the sentences that were not
English or whose fake fitted no reading of the question; with an `answer_model` (SmolLM2 by
default, the closed-book model) AddOneSent and AddSentMod choose instead of drawing at random, in
two steps, each where its score tells what it can:
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
   of the question's mutation) are ranked by fluency (attacks.fluency: the mean token
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
import functools
import random
import re
from collections import Counter
from dataclasses import dataclass, field

from advrace.core.checks import REGISTRY as CHECKS, Subject, TextContext
from advrace.core.errors import ConfigError
from advrace.core.numbers import significant
from advrace.core.provenance import AdversarialSentence, AttackSummary, WordSearch, summary_of
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.metrics import normalize_answer, squad_em_f1
from advrace.models.encoders.span_scoring import answer_distribution, load_span_model
from advrace.models.runtime.sharding import map_sharded

from .base import Attack, CannotPerturb, Outcome, register
from .squad.answer_rules import FakeChoice, FallbackFakes
from .squad.closed_book import ClosedAnswer, closed_book, unlike_the_golds, usable
from .sentences.fluency import fluency, fluent_choice
from .sentences.readability import readability_problem
from .sentences.declarative_rules import declarative_candidates
from .squad.fake_answers import FakePool, answer_type, type_key, wh_noun
from .model_based import CheckpointAttack
from .sentences.question_mutation import mutate_question


@dataclass(frozen=True)
class AddSentConfig:
    neighbours: int = 100  # GloVe neighbours searched for a word of the same tag
    fakes: int = 2  # fake answers tried per question
    fake_cap: int = 3  # uses of one fake answer among the passages prepared together
    choices: int = 3  # GloVe neighbours of the right tag drawn among, per question
    attempts: int = field(default=3, metadata={"min": 1})  # mutations tried while no sentence passes
    # fakes for common-noun and verb answers, typed by WordNet's first senses: read on XQuAD, most
    # were of another kind ("the work" for a type of civil disobedience), so off by default
    common_word_fakes: bool = False
    # a causal LM asked each question without its passage (a folder, a Hub name, smollm2; "" for
    # Jia and Liang's rules alone): its answer is the fake where the question names no kind that
    # the rules can fill, for it is of the asked kind far more often than a rule's (closed_book)
    answer_model: str = "smollm2"
    answer_batch_size: int = field(default=32, metadata={"min": 1})
    answer_bf16: bool | None = False  # as the distractor attacks' bf16: fp32 unless asked
    # with answer_model: mutations of the question whose sentences compete on fluency (addonesent,
    # addsentmod; the model chooses, see "Fluency and PMI" in the module docstring)
    mutations: int = field(default=2, metadata={"min": 1})


VANISHED = CHECKS["change_vanished"]  # the audit's own checks
FAKE_TYPE = CHECKS["fake_type"]
GRAMMAR = CHECKS["grammar"]


def fake_problems(example, record, resources) -> list[str]:
    """What breaks a property every fake answer must have, for the sentence `record` (an
    AdversarialSentence) made for `example` (the question before the attack); empty when none.
    The fake differs from every gold and contains none; it occurs nowhere in the context; it is
    of the gold's group, or for the `date` and `number` rules the gold is a time or a number (by its
    type in context or by what the question asks): both the audit's `fake_type` check; for
    `asked_kind`, which that check trusts, the gold is a WordNet kind of the asked noun.
    The tests hold the validity corpus to it, and a real build is checked with it by hand
    (docs/results.md)."""
    fake, out = record.answer, []
    norm = normalize_answer(fake)
    for gold in (a.text for a in example.answers):
        g = normalize_answer(gold)
        if norm == g:
            out.append(f"the gold {gold!r} itself")
        elif g and f" {g} " in f" {norm} ":
            out.append(f"contains the gold {gold!r}")
    if not norm or f" {norm} " in f" {normalize_answer(example.context)} ":
        out.append("in the context")
    if record.fake_rule == "asked_kind":
        if not _of_asked_kind(example, resources):
            out.append("rule asked_kind for a gold of no kind of the asked noun")
    else:  # the audit's own check, which holds the date and number rules to a gold of their type
        typed = functools.partial(answer_type, resources=resources)
        ctx = TextContext(same_meaning_fn=resources.same_meaning, answer_type_fn=typed)
        why = FAKE_TYPE.refuse(Subject(example, record.sentence, record=record), ctx, {})
        if why:
            out.append(why)
    return out


def _of_asked_kind(example, resources) -> bool:
    """Whether a sense of the gold's head noun is a WordNet kind of the noun the question asks for."""
    noun = wh_noun(example.question, resources)[1]
    first = example.answers[0]
    span = resources.parse(example.context).char_span(first.start, first.end, alignment_mode="expand")
    if noun is None or span is None:
        return False
    head = resources.wordnet.morphy(span.root.text.lower(), "n") or span.root.text.lower()
    asked = set(resources.wordnet.synsets(noun, "n"))
    return any(asked & set(s.closure(lambda x: x.hypernyms() + x.instance_hypernyms()))
               for s in resources.wordnet.synsets(head, "n"))


def closed_book_fakes(examples, config: AddSentConfig, resources) -> dict[str, ClosedAnswer]:
    """Each example's closed-book answer that can serve as a fake, by id: short and new to the
    question (closed_book.usable), and no gold in other words (closed_book.unlike_the_golds)."""
    if not config.answer_model or not examples:
        return {}
    book = closed_book(config.answer_model, config.answer_batch_size, config.answer_bf16)
    raw = book.answers([ex.question for ex in examples])
    answers = {}
    for ex in examples:
        q = ex.question.strip()
        noun = wh_noun(q, resources)[1]
        answers[ex.id] = usable(raw[q], q, resources.stopwords, (noun, f"{noun}s") if noun else ())
    return unlike_the_golds(answers, {ex.id: [a.text for a in ex.answers] for ex in examples}, resources)


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


def _paragraph_answers(examples) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for ex in examples:
        out.setdefault(ex.context, set()).update(a.text for a in ex.answers)
    return out


def _key(example) -> tuple:
    """What a prepared choice was made for: a split built from another split sees other text."""
    return example.id, example.question, example.context


def _place(example, sentence: str, prepend: bool):
    return example.insert_sentence(sentence, 0 if prepend else len(example.context))


def _reason(rejected: Counter) -> str:
    """The reason an example got no sentence: a vanished change when any candidate lost one,
    else the most frequent rejection (the first on a tie)."""
    if "change vanished" in rejected:
        return "change vanished"
    return max(rejected, key=lambda k: rejected[k]) if rejected else "no candidate"


# answer rules the PMI does not rank: the gold with its numbers moved is of the gold's kind by
# construction, and the catch-all is what is left (read on XQuAD-en, PMI put a catch-all year
# before the number rule's age for "How old was ...?")
_UNRANKED_FIRST = frozenset({"date", "number"})
_UNRANKED_LAST = frozenset({"catch_all"})
_UNRANKED = _UNRANKED_FIRST | _UNRANKED_LAST


class _SentenceAttack(Attack):
    tasks = (EXTRACTIVE_QA,)
    Config = AddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")
    second_set = False
    prepend = False

    _pool: FakePool | None = None
    _answers: dict | None = None
    _closed: dict | None = None
    _chosen: dict | None = None

    def prepare(self, examples):
        """Parse the passages and questions in one batch, and collect their typed phrases as the
        fake answers of these passages (a fresh pool, with fresh use counts, per call); with an
        answer model, choose every example's sentence here, the model's scores in one batch
        (`_choose`)."""
        self.resources.prepare_parses([ex.context for ex in examples] + [ex.question for ex in examples])
        self._pool = FakePool.from_contexts([ex.context for ex in examples], self.resources,
                                            cap=self.config.fake_cap)
        self._answers = _paragraph_answers(examples)
        self._closed = closed_book_fakes(examples, self.config, self.resources)
        self._chosen = self._choose(examples) if self.config.answer_model else None

    def _choose(self, examples) -> dict:
        """Each example's sentence (or its reasons for none) chosen by the answer model, by
        `_key`. In order: every fake offered to a question counts against the cap (as in AddSent),
        for the choice waits for the batch's scores. See "Fluency and PMI" in the module docstring."""
        cfg = self.config
        offered = []
        for ex in examples:
            rng = self.rng_for(ex)
            choices = fake_choices(ex, self.resources, cfg, self.second_set, rng, self._pool,
                                   (self._answers or {}).get(ex.context), (self._closed or {}).get(ex.id))
            firsts, seen = [], set()
            for choice in choices:  # each rule's first fake, one fake per choice
                norm = normalize_answer(choice.fakes[0]) if choice.fakes else ""
                if norm and norm not in seen:
                    seen.add(norm)
                    firsts.append(dataclasses.replace(choice, fakes=choice.fakes[:1]))
                    self._pool.use(choice.fakes[0])
            rest = [dataclasses.replace(c, fakes=c.fakes[1:]) for c in choices if c.fakes[1:]]
            offered.append((ex, rng, firsts, rest))
        book = closed_book(cfg.answer_model, cfg.answer_batch_size, cfg.answer_bf16)
        pairs = [(ex.question, c.fakes[0]) for ex, _, firsts, _ in offered for c in firsts]
        pmis = iter(book.pmi(pairs))
        found = {}
        for ex, rng, firsts, rest in offered:
            ranked = [dataclasses.replace(c, pmi=significant(next(pmis))) for c in firsts]
            # the gold's own numbers moved first (of its kind by construction), the catch-all last;
            # between them the highest PMI first, Jia and Liang's rule order on a tie; then the
            # rules' other fakes
            ranked = ([c for c in ranked if c.rule in _UNRANKED_FIRST]
                      + sorted((c for c in ranked if c.rule not in _UNRANKED), key=lambda c: -c.pmi)
                      + [c for c in ranked if c.rule in _UNRANKED_LAST] + rest)
            found[_key(ex)] = sentence_candidates(ex, self.resources, cfg, self.second_set, rng, self._pool,
                                                  choices=ranked, mutations=cfg.mutations)
        scorer = fluency(cfg.answer_model, cfg.answer_bf16)
        scorer.forget()
        return fluent_choice(found, scorer)

    def candidates(self, example, rng):
        if self._pool is None:  # applied without prepare: the fixed lists only
            self._pool, self._answers = FakePool(cap=self.config.fake_cap, resources=self.resources), {}
        return sentence_candidates(example, self.resources, self.config, self.second_set, rng,
                                   self._pool, (self._answers or {}).get(example.context),
                                   (self._closed or {}).get(example.id))

    def summarize(self, examples):
        """Counts of the split's sentences by declarative rule, answer type, fake-answer rule and
        replacement kind; `fake_answer_rule_shares`: each fake-answer rule's share of the attacked
        questions (one sentence each), so that a reader sees how much of a split the rules past the
        typed pool (the catch-all, the closed-book answers) made."""
        rules, types, kinds, fakes, fake_rules = Counter(), Counter(), Counter(), Counter(), Counter()
        attacked = 0
        for ex in examples:
            summary = summary_of(ex.provenance, self.name)
            attacked += bool(summary and summary.sentences)
            for s in summary.sentences if summary else ():
                rules[s.rule] += 1
                types[s.answer_type] += 1
                fake_rules[s.fake_rule] += 1
                kinds.update(x.kind for x in s.replacements)
                fakes[s.answer] += 1
        return {"rules": dict(sorted(rules.items())), "answer_types": dict(sorted(types.items())),
                "fake_answer_rules": dict(sorted(fake_rules.items())),
                "fake_answer_rule_shares": {rule: significant(n / attacked) for rule, n in sorted(fake_rules.items())},
                "replacements_by_kind": dict(sorted(kinds.items())),
                "fake_answers": {"distinct": len(fakes), "most_used": max(fakes.values(), default=0)}}


@register
class AddOneSent(_SentenceAttack):
    """Jia and Liang's AddOneSent: one random adversarial sentence appended (model-independent)."""

    name = "addonesent"

    def perturb(self, example, rng):
        if self.config.answer_model:  # the model chose (prepare); an example it has not seen, alone
            if self._chosen is None or _key(example) not in self._chosen:
                if self._pool is None:
                    self.prepare([example])
                else:
                    self._chosen = {**(self._chosen or {}), **self._choose([example])}
            chosen, n, rejected = self._chosen[_key(example)]
        else:  # Jia and Liang's rules alone: a random candidate
            cands, rejected = self.candidates(example, rng)
            chosen, n = (rng.choice(cands), len(cands)) if cands else (None, 0)
            if chosen is not None:
                self._pool.use(chosen.answer)
        if chosen is None:
            raise CannotPerturb(_reason(rejected))
        return _place(example, chosen.sentence, self.prepend).with_provenance(AttackSummary(
            self.name, sentences=(chosen,), position="start" if self.prepend else "end", candidates=n))


@register
class AddSentMod(AddOneSent):
    """AddSentMod: other fake answers, the sentence prepended (model-independent)."""

    name = "addsentmod"
    second_set = True
    prepend = True


# ---------------------------------------------------------------- model-dependent adversaries


@dataclass(frozen=True)
class ModelAddSentConfig(AddSentConfig):
    model: str = ""  # a span checkpoint (advrace train, objective span_extraction)
    batch_size: int = 32
    max_length: int = 384
    bf16: bool | None = False  # as DistractorAttackConfig.bf16: fp32 unless asked


class _ModelDependent(CheckpointAttack):
    tasks = (EXTRACTIVE_QA,)
    train_hint = "`advrace train configs/train/squad-cpu.yaml`"

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        if not self.config.model:
            raise ConfigError(f"attack {self.name!r} needs config.model: a span checkpoint made with "
                              "`advrace train` (objective span_extraction), queried as a black box")
        self._scorer = None

    @property
    def scorer(self):
        if self._scorer is None:
            self._scorer = load_span_model(self.config.model, batch_size=self.config.batch_size,
                                           max_length=self.config.max_length, bf16=self.config.bf16)
            self.loaded_on(self._scorer.device, self._scorer.bf16)
        return self._scorer

    def describe(self):
        return {**super().describe(), "model_dependent": True}

    def _f1(self, examples: list, contexts: list[str]) -> list[float]:
        return model_f1s(self.scorer, examples, contexts)


def model_f1s(scorer, examples: list, contexts: list[str]) -> list[float]:
    """A span model's F1 on each example read with `contexts[i]` as its context: what AddSent
    minimises (and `human-eval validate --adversary` too, over people's approved sentences)."""
    answers = scorer.answers([ex.question for ex in examples], contexts)
    return [squad_em_f1(a, [g.text for g in ex.answers])[1] for ex, a in zip(examples, answers)]


def worst(f1s) -> int:
    """AddSent's choice among candidates scored by `model_f1s`: the lowest F1, the first of
    equally bad ones."""
    return min(range(len(f1s)), key=lambda i: f1s[i])


@register
class AddSentAdversary(_ModelDependent):
    """Jia and Liang's AddSent: the candidate sentence on which a span model does worst (model-dependent)."""

    name = "squad_addsent"
    Config = ModelAddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")

    def apply_batch(self, examples, state=None, progress=False):
        if examples and examples[0].task != EXTRACTIVE_QA:
            raise ConfigError(f"attack {self.name!r} (Jia and Liang's) applies to SQuAD examples; "
                              "for RACE use the AdvRACE addsent")
        self.resources.prepare_parses([ex.context for ex in examples] + [ex.question for ex in examples])
        pool = FakePool.from_contexts([ex.context for ex in examples], self.resources, cap=self.config.fake_cap)
        answers = _paragraph_answers(examples)
        closed = closed_book_fakes(examples, self.config, self.resources)
        cands = []
        for ex in examples:  # in order: a fake offered to one question counts against the cap
            found = sentence_candidates(ex, self.resources, self.config, False, self.rng_for(ex), pool,
                                        answers.get(ex.context), closed.get(ex.id))
            for fake in dict.fromkeys(c.answer for c in found[0]):
                pool.use(fake)
            cands.append(found)
        pairs = [(i, c) for i, (cs, _) in enumerate(cands) for c in cs]

        def score(shard):
            exs = [examples[i] for i, _ in shard]
            return self._f1(exs, [_place(examples[i], c.sentence, False).context for i, c in shard])

        f1s = map_sharded(score, pairs, state)
        per: dict[int, list] = {}
        for (i, c), f1 in zip(pairs, f1s):
            per.setdefault(i, []).append((f1, c))
        out = []
        for i, ex in enumerate(examples):
            if i not in per:
                out.append(Outcome(ex, False, _reason(cands[i][1])))
                continue
            f1, chosen = per[i][worst([f for f, _ in per[i]])]
            out.append(Outcome(_place(ex, chosen.sentence, False).with_provenance(AttackSummary(
                self.name, sentences=(chosen,), position="end", candidates=len(per[i]), model_f1=significant(f1),
                candidate_f1=tuple(significant(f) for f, _ in per[i]))), True))
        return out

    summarize = _SentenceAttack.summarize


# wordfreq's most common English words include some that no annotator should be shown
OFFENSIVE = frozenset({"fuck", "fucking", "shit", "damn", "ass", "bitch", "sex", "porn", "gay", "hell",
                       "dick", "crap", "sexy", "nigga", "fucked", "bullshit"})


@dataclass(frozen=True)
class AddAnyConfig:
    model: str = ""
    length: int = field(default=10, metadata={"min": 1})  # words in the added sentence (d)
    epochs: int = field(default=6, metadata={"min": 1})
    candidates: int = field(default=20, metadata={"min": 1})  # random common words per position
    common_words: int = field(default=1000, metadata={"min": 1})
    # random restarts added after `restart_after` epochs without success
    restarts: int = field(default=4, metadata={"min": 0})
    restart_after: int = field(default=3, metadata={"min": 0})
    n_best: int = field(default=10, metadata={"min": 1})  # answers in the model's distribution for the expected F1
    batch_size: int = field(default=32, metadata={"min": 1})
    max_length: int = field(default=384, metadata={"min": 8})
    bf16: bool | None = False  # as DistractorAttackConfig.bf16: fp32 unless asked


@register
class AddAny(_ModelDependent):
    """AddAny: a 10-word sentence searched to minimise a span model's expected F1 (model-dependent)."""

    name = "addany"
    Config = AddAnyConfig
    uses = ("common_words",)
    use_question_words = True

    def _words(self, example) -> tuple[list[str], list[str]]:
        common = [w for w in self.resources.common_words(self.config.common_words)
                  if w.isalpha() and w not in OFFENSIVE]
        question = [t for t in dict.fromkeys(w.strip("?.,!;:\"'()").lower() for w in example.question.split())
                    if t and any(c.isalnum() for c in t)]
        return common, question if self.use_question_words else []

    def expected_f1(self, example, sentences: list[str]) -> list[tuple[float, float]]:
        """(expected F1 over the n-best distribution, F1 of the top answer) per sentence."""
        contexts = [_place(example, s, False).context for s in sentences]
        spans = self.scorer.n_best([example.question] * len(contexts), contexts, self.config.n_best)
        golds = [a.text for a in example.answers]
        out = []
        for ranked in spans:
            dist = answer_distribution(ranked)
            exp = sum(p * squad_em_f1(text, golds)[1] for text, p in dist)
            top = squad_em_f1(ranked[0].text, golds)[1] if ranked else 0.0
            out.append((exp, top))
        return out

    def search(self, example, rng: random.Random) -> tuple[list[str], WordSearch]:
        """Coordinate descent over the words of the sentence (Jia and Liang, section 4.2).

        `trace` is the expected F1 of the returned sentence from its random start to its last
        accepted move, and `expected_f1` its last value: both as recorded (`significant`, 4
        significant digits), so the record never claims a value its trace does not show. The
        moves are chosen on the values as computed; two accepted moves may record the same value.
        """
        cfg = self.config
        common, question = self._words(example)
        if not common:
            raise CannotPerturb("no words to search over")
        particles = [[rng.choice(common) for _ in range(cfg.length)]]
        scores = [self.expected_f1(example, [" ".join(particles[0]) + "."])[0]]
        traces = [[significant(scores[0][0])]]
        queries = 1

        def result(k: int, success: bool, epochs: int) -> tuple[list[str], WordSearch]:
            return particles[k], WordSearch(expected_f1=traces[k][-1], top_f1=significant(scores[k][1]),
                                            success=success, epochs=epochs, queries=queries,
                                            trace=tuple(traces[k]))

        for epoch in range(cfg.epochs):
            if epoch == cfg.restart_after and len(particles) == 1:
                fresh = [[rng.choice(common) for _ in range(cfg.length)] for _ in range(cfg.restarts)]
                found = self.expected_f1(example, [" ".join(p) + "." for p in fresh])
                particles += fresh
                scores += found
                traces += [[significant(f[0])] for f in found]
                queries += len(fresh)
            for k in range(len(particles)):
                for pos in rng.sample(range(cfg.length), cfg.length):
                    words = particles[k]  # with the moves accepted at earlier positions
                    pool = list(dict.fromkeys(rng.sample(common, min(cfg.candidates, len(common))) + question))
                    pool = [w for w in pool if w != words[pos]]
                    trials = [words[:pos] + [w] + words[pos + 1:] for w in pool]
                    results = self.expected_f1(example, [" ".join(t) + "." for t in trials])
                    queries += len(trials)
                    best = min(range(len(trials)), key=lambda j: (results[j][0], j))
                    if results[best][0] < scores[k][0]:
                        particles[k], scores[k] = trials[best], results[best]
                        traces[k].append(significant(scores[k][0]))
                    if scores[k][1] == 0.0:
                        return result(k, True, epoch + 1)
        k = min(range(len(particles)), key=lambda j: (scores[j][0], j))
        return result(k, False, cfg.epochs)

    def apply_batch(self, examples, state=None, progress=False):
        from tqdm.auto import tqdm

        def search_or_reason(ex):
            try:
                return self.search(ex, self.rng_for(ex))
            except CannotPerturb as exc:  # left unchanged, its reason counted, as other failures are
                return exc.reason

        def run(shard):
            return [search_or_reason(ex) for ex in
                    tqdm(shard, desc=self.name, unit="q", disable=not progress, leave=False)]

        results = map_sharded(run, examples, state)
        out = []
        for ex, r in zip(examples, results):
            if isinstance(r, str):
                out.append(Outcome(ex, False, r))
                continue
            words, search = r
            sentence = " ".join(words) + "."
            out.append(Outcome(_place(ex, sentence, False).with_provenance(AttackSummary(
                self.name, sentences=(AdversarialSentence(sentence),), search=search)), True))
        return out

    def summarize(self, examples):
        runs = [s.search for ex in examples if (s := summary_of(ex.provenance, self.name)) and s.search]
        return {"searched": len(runs), "succeeded": sum(r.success for r in runs),
                "avg_queries": significant(sum(r.queries for r in runs) / len(runs)) if runs else 0.0}


@register
class AddCommon(AddAny):
    """AddCommon: AddAny with common words only (model-dependent)."""

    name = "addcommon"
    use_question_words = False
