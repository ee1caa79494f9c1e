"""Pure logic of distractor extraction (DE, AdvRACE section 3.1).

A RACE question is turned into span format by inserting its answer into the passage; a span
QA model then proposes answer spans, and the best ones that are neither the answer nor each
other's near-copies replace the original distractors.
"""

from __future__ import annotations

import random
import re
from typing import Sequence

from advrace.core.examples import MCExample
from advrace.core.text import fold_case_and_spaces, sentence_breaks, words


def sentence_starts(text: str) -> list[int]:
    """Positions where a sentence may be inserted: 0, each sentence start, and the end.

    Sentences end at punctuation only (`sentence_breaks` without line breaks), unlike the
    similarity reader's sentences, which also end at newlines, and AddSent's, which come from
    spaCy: changing either would move every inserted answer and so change the trained
    extractor's data."""
    return sorted({0, len(text), *(m.end() for m in sentence_breaks(text))})


def insert_answer_span(example: MCExample, rng: random.Random) -> tuple[MCExample, int, int]:
    """Insert the answer text as a sentence at a random boundary; return it with its char span.

    The offsets come from the example's provenance record, so they are right however the
    insertion padded the text with spaces. An empty answer raises EditError.
    """
    at = rng.choice(sentence_starts(example.passage))
    new = example.insert_sentence(example.answer.strip(), at)
    placed = new.provenance[-1].sentences[0]
    return new, placed.start, placed.start + len(placed.text)


def token_overlap(a: str, b: str) -> float:
    """Share of the smaller lowercase word set found in the other; 0 when either has no words."""
    wa = {w.lower() for w in words(a)}
    wb = {w.lower() for w in words(b)}
    if not wa or not wb:
        return 0.0
    return len(wa & wb) / min(len(wa), len(wb))


def jaccard_distance(a: str, b: str) -> float:
    """1 - |A & B| / |A | B| over lowercase word sets; 1 when both have no words."""
    wa = {w.lower() for w in words(a)}
    wb = {w.lower() for w in words(b)}
    union = wa | wb
    return 1.0 - len(wa & wb) / len(union) if union else 1.0


def select_distractors(candidates: Sequence[str], answer: str, *, k: int = 3,
                       max_overlap_answer: float = 0.5, max_overlap_each_other: float = 0.5,
                       min_jaccard_distance: float | None = None) -> list[str]:
    """Up to `k` candidates, tried in the order given (a model's rank, or a reader's when the
    attack re-ranks them), that cannot be mistaken for the answer or each other.

    A candidate is skipped when it contains or equals the answer (or the answer contains it),
    when more than `max_overlap_answer` of its words are the answer's, and when it is too close
    to one already chosen: by word overlap (`max_overlap_each_other`, distractor extraction) or,
    when `min_jaccard_distance` is given, by a Jaccard distance not above it (distractor
    generation). Candidates without any word count as empty. Returned texts are stripped.
    """
    norm_answer = fold_case_and_spaces(answer)
    chosen: list[str] = []

    def too_close(candidate: str, other: str) -> bool:
        if fold_case_and_spaces(candidate) == fold_case_and_spaces(other):
            return True
        if min_jaccard_distance is not None:
            return jaccard_distance(candidate, other) <= min_jaccard_distance
        return token_overlap(candidate, other) > max_overlap_each_other

    for candidate in candidates:
        if len(chosen) >= k:
            break
        candidate = candidate.strip()
        norm = fold_case_and_spaces(candidate)
        if not words(candidate):
            continue
        if norm_answer and (norm_answer in norm or norm in norm_answer):
            continue
        if token_overlap(candidate, answer) > max_overlap_answer:
            continue
        if any(too_close(candidate, c) for c in chosen):
            continue
        chosen.append(candidate)
    return chosen


def match_format(text: str, answer: str, passage: str = "") -> str:
    """`text` dressed like the answer: the same case of the first letter and the same closing
    full stop. A generator trained uncased, or a span cut from mid-sentence, would otherwise
    give its distractors away by their form alone. A first word is lowered only when the
    passage also writes it in lower case ("The" -> "the"), never a name or "I"."""
    text = text.strip()
    if not text or not answer.strip():
        return text
    answer = answer.strip()
    if answer[0].isupper() and text[0].islower():
        text = text[0].upper() + text[1:]
    elif answer[0].islower() and text[0].isupper() and _written_lower(text, passage):
        text = text[0].lower() + text[1:]
    if answer.endswith(".") and not text.endswith((".", "!", "?")):
        text = text.rstrip(",;:") + "."
    elif not answer.endswith((".", "!", "?")) and text.endswith("."):
        text = text[:-1].rstrip()
    return text


def _written_lower(text: str, passage: str) -> bool:
    first = re.match(r"[A-Za-z]+", text)
    if first is None or first.group() == "I" or not first.group()[1:].islower() and len(first.group()) > 1:
        return False
    return re.search(rf"(?<![\w'’]){first.group().lower()}(?![\w'’])", passage) is not None


def replace_distractors(example: MCExample, new: Sequence[str],
                        order: Sequence[int] | None = None) -> tuple[MCExample, int]:
    """Fill the distractor slots, in option order, with `new`; return the example and the number
    of original distractors kept because `new` ran short. Extra new ones are ignored.

    `order` optionally rearranges the options afterwards (new position i holds old option
    order[i]); the label follows the correct option. One provenance record covers both.
    """
    slots = [i for i in range(len(example.options)) if i != example.label]
    options = list(example.options)
    for slot, text in zip(slots, new):
        options[slot] = text
    kept = max(0, len(slots) - len(new))
    label = example.label
    if order is not None:
        if sorted(order) != list(range(len(options))):
            raise ValueError(f"order {list(order)} is not a permutation of {len(options)} options")
        options = [options[i] for i in order]
        label = list(order).index(example.label)
    return example.replace_options(options, label), kept
