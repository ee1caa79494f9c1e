"""Jia and Liang's AddAny and AddCommon for SQuAD (EMNLP 2017, section 4.2): a sequence of `length`
words appended to the passage, searched to minimise a span model's expected F1 over its n-best
answer distribution. Model-dependent.

The search is coordinate descent: the words start at random; each epoch visits the positions in
random order and tries, at each, `candidates` random common words plus (AddAny) the question's
words, keeping the one that lowers the expected F1 most; it stops as soon as the model's top
answer has F1 0. After `restart_after` epochs without success, `restarts` random restarts are
searched beside it. AddCommon is AddAny with common words only.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field

from advrace.core.numbers import significant
from advrace.core.provenance import AdversarialSentence, AttackSummary, WordSearch, summary_of
from advrace.metrics import squad_em_f1
from advrace.models.encoders.span_scoring import answer_distribution
from advrace.models.runtime.sharding import map_sharded

from .base import CannotPerturb, Outcome, register
from .squad.placement import place
from .squad.span_model import SpanModelAttack


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
class AddAny(SpanModelAttack):
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
        contexts = [place(example, s, False).context for s in sentences]
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
            out.append(Outcome(place(ex, sentence, False).with_provenance(AttackSummary(
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
