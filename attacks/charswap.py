"""CharSwap (AdvRACE section 3.2): swap two adjacent inner letters of content words.

Follows the paper rather than the released script: passage words are written back (the
script computed them and dropped them), tokens are letters only so a trailing comma never
moves a last letter, and options are never touched. On SQuAD, words inside a gold answer span
stay as they are so that every answer is still found at its offsets.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from advrace.core.provenance import AttackSummary, Swaps
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import alpha_tokens, count_words

from .base import Attack, CannotPerturb, register


@dataclass(frozen=True)
class CharSwapConfig:
    min_length: int = 4
    attack_question: bool = True
    attack_passage: bool = True
    match_stems: bool = True


def swap_positions(word: str) -> list[int]:
    """Indices i such that swapping word[i] and word[i+1] keeps the first and last letter."""
    return [i for i in range(1, len(word) - 2)
            if word[i].isalpha() and word[i + 1].isalpha() and word[i].lower() != word[i + 1].lower()]


def swap(word: str, i: int) -> str:
    return word[:i] + word[i + 1] + word[i] + word[i + 2:]


@register
class CharSwap(Attack):
    name = "charswap"
    Config = CharSwapConfig
    uses = ("stopwords", "stemmer")

    def _eligible(self, word: str) -> bool:
        return len(word) >= self.config.min_length and word.lower() not in self.resources.stopwords

    def _swaps(self, text: str, rng: random.Random, keep=lambda m: True, protected=()) -> list:
        edits = []
        for m in alpha_tokens(text):
            word = m.group()
            if not keep(word) or any(s < m.end() and m.start() < e for s, e in protected):
                continue
            positions = swap_positions(word)
            if positions:
                edits.append((m.start(), m.end(), swap(word, rng.choice(positions))))
        return edits

    def perturb(self, example, rng):
        cfg, res = self.config, self.resources
        mc = example.task == MULTIPLE_CHOICE
        passage_field = example.passage_field
        protected = () if mc else example.answer_spans()

        question_edits = self._swaps(example.question, rng, self._eligible) if cfg.attack_question else []
        passage_edits = []
        if cfg.attack_passage:
            anchors = [m.group() for text in (example.question, *getattr(example, "options", ()))
                       for m in alpha_tokens(text)]
            lower = {w.lower() for w in anchors}
            stems = {res.stem(w) for w in anchors} if cfg.match_stems else set()

            def linked(word: str) -> bool:
                return self._eligible(word) and (word.lower() in lower or res.stem(word) in stems)

            passage_edits = self._swaps(example.passage_text, rng, linked, protected)

        if not question_edits and not passage_edits:
            raise CannotPerturb("no eligible word")
        new = example.replace_spans("question", question_edits).replace_spans(passage_field, passage_edits)
        total = count_words(example.question) + count_words(example.passage_text)
        swaps = Swaps(question=len(question_edits), passage=len(passage_edits), words=total)
        return new.with_provenance(AttackSummary(self.name, swaps=swaps))
