"""Jia and Liang's AddSent family for SQuAD (EMNLP 2017): a sentence that answers a mutated
question with a fake answer, added to the passage.

For every question, the candidates (attacks/squad/candidates.py):
1. mutate the question: antonyms and GloVe neighbours (sentences/question_mutation);
2. give it a fake answer of the real answer's type: the data's own typed phrases
   (squad/fake_answers), then Jia and Liang's remaining answer rules in their order, down to a
   catch-all (squad/answer_rules), and a small LM's closed-book answer (squad/closed_book);
3. state the mutated question with its fake answer as a sentence (sentences/declarative_rules);
4. keep the sentences that read as English and say what the question asked (sentences/readability
   and the audit's checks: every change of the question survives, the fake is of the gold's kind),
   from the first answer rule whose sentences pass.

Then one candidate is added:
- `addsent`: every candidate tried against a span model (a black box), the one with the lowest
  F1 appended. Model-dependent.
- `addonesent`: one candidate appended, chosen by the answer model (squad/answer_model_choice:
  the fake by PMI, the sentence by fluency), or at random with `answer_model: ""`.
  Model-independent (the answer model is a fixed part of the recipe, not the model attacked).
- `addsentmod`, AddOneSent's documented variant: the second set of fake answers (another set for
  every answer rule), the sentence prepended: tests whether a model trained on AddSent learned
  more than "skip the last sentence".

The questions an attack prepares together share one pool of fake answers, each used at most
`fake_cap` times (squad/preparation); candidates that fail a check are counted in the stats.
"""

from __future__ import annotations

from advrace.core.errors import ConfigError
from advrace.core.numbers import significant
from advrace.core.provenance import AttackSummary
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.models.runtime.sharding import map_sharded

from .base import Attack, CannotPerturb, Outcome, register
from .squad.answer_model_choice import choose_with_answer_model, prepared_key
from .squad.candidates import no_sentence_reason, sentence_candidates
from .squad.config import AddSentConfig, ModelAddSentConfig
from .squad.placement import place
from .squad.preparation import PreparedBatch
from .squad.sentence_stats import sentence_stats
from .squad.span_model import SpanModelAttack, worst


class _SentenceAttack(Attack):
    tasks = (EXTRACTIVE_QA,)
    Config = AddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")
    second_set = False
    prepend = False

    _batch: PreparedBatch | None = None
    _chosen: dict | None = None

    def prepare(self, examples):
        """The batch's fake answers (squad/preparation); with an answer model, every example's
        sentence chosen here, the model's scores in one batch (`_choose`)."""
        self._batch = PreparedBatch.of(examples, self.resources, self.config)
        self._chosen = self._choose(examples) if self.config.answer_model else None

    def _choose(self, examples) -> dict:
        return choose_with_answer_model(examples, self._batch, self.resources, self.config, self.second_set,
                                        self.rng_for)

    def candidates(self, example, rng):
        if self._batch is None:  # applied without prepare: the fixed lists only
            self._batch = PreparedBatch.unprepared(self.resources, self.config)
        return sentence_candidates(example, self.resources, self.config, self.second_set, rng, self._batch.pool,
                                   self._batch.answers.get(example.context), self._batch.closed.get(example.id))

    def summarize(self, examples):
        return sentence_stats(examples, self.name)


@register
class AddOneSent(_SentenceAttack):
    """Jia and Liang's AddOneSent: one random adversarial sentence appended (model-independent)."""

    name = "addonesent"

    def perturb(self, example, rng):
        if self.config.answer_model:  # the model chose (prepare); an example it has not seen, alone
            if self._chosen is None or prepared_key(example) not in self._chosen:
                if self._batch is None:
                    self.prepare([example])
                else:
                    self._chosen = {**(self._chosen or {}), **self._choose([example])}
            chosen, n, rejected = self._chosen[prepared_key(example)]
        else:  # Jia and Liang's rules alone: a random candidate
            cands, rejected = self.candidates(example, rng)
            chosen, n = (rng.choice(cands), len(cands)) if cands else (None, 0)
            if chosen is not None:
                self._batch.pool.use(chosen.answer)
        if chosen is None:
            raise CannotPerturb(no_sentence_reason(rejected))
        return place(example, chosen.sentence, self.prepend).with_provenance(AttackSummary(
            self.name, sentences=(chosen,), position="start" if self.prepend else "end", candidates=n))


@register
class AddSentMod(AddOneSent):
    """AddSentMod: other fake answers, the sentence prepended (model-independent)."""

    name = "addsentmod"
    second_set = True
    prepend = True


@register
class AddSentAdversary(SpanModelAttack):
    """Jia and Liang's AddSent: the candidate sentence on which a span model does worst (model-dependent)."""

    name = "squad_addsent"
    Config = ModelAddSentConfig
    uses = ("spacy_model", "glove", "wordnet", "stopwords", "stemmer")

    def apply_batch(self, examples, state=None, progress=False):
        if examples and examples[0].task != EXTRACTIVE_QA:
            raise ConfigError(f"attack {self.name!r} (Jia and Liang's) applies to SQuAD examples; "
                              "for multiple choice use AdvRACE's, mc_addsent")
        cands = self._candidates(examples)
        pairs = [(i, c) for i, (cs, _) in enumerate(cands) for c in cs]

        def score(shard):
            exs = [examples[i] for i, _ in shard]
            return self._f1(exs, [place(examples[i], c.sentence, False).context for i, c in shard])

        per: dict[int, list] = {}
        for (i, c), f1 in zip(pairs, map_sharded(score, pairs, state)):
            per.setdefault(i, []).append((f1, c))
        out = []
        for i, ex in enumerate(examples):
            if i not in per:
                out.append(Outcome(ex, False, no_sentence_reason(cands[i][1])))
                continue
            f1, chosen = per[i][worst([f for f, _ in per[i]])]
            out.append(Outcome(place(ex, chosen.sentence, False).with_provenance(AttackSummary(
                self.name, sentences=(chosen,), position="end", candidates=len(per[i]), model_f1=significant(f1),
                candidate_f1=tuple(significant(f) for f, _ in per[i]))), True))
        return out

    def _candidates(self, examples) -> list:
        """Every example's candidates and rejections, in order: a fake offered to one question
        counts against the cap."""
        batch = PreparedBatch.of(examples, self.resources, self.config)
        cands = []
        for ex in examples:
            found = sentence_candidates(ex, self.resources, self.config, False, self.rng_for(ex), batch.pool,
                                        batch.answers.get(ex.context), batch.closed.get(ex.id))
            for fake in dict.fromkeys(c.answer for c in found[0]):
                batch.pool.use(fake)
            cands.append(found)
        return cands

    def summarize(self, examples):
        return sentence_stats(examples, self.name)
