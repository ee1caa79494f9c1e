"""What the questions an attack prepares together share, made once per batch before any rule runs:
the typed fake answers of their passages, the answers of every question on a passage (a fake may
share no word with any), and the closed-book answers that may serve as fakes.

The batches are the runner's fixed chunks, so that the release does not depend on the number of
workers; a fake counts against `fake_cap` within its batch.
"""

from __future__ import annotations

from dataclasses import dataclass

from .closed_book import ClosedAnswer, closed_book, unlike_the_golds, usable
from .config import AddSentConfig
from .fake_answers import FakePool, wh_noun


@dataclass
class PreparedBatch:
    """The typed fake answers (`pool`, with its use counts), each passage's answers by its text,
    and each question's usable closed-book answer by example id."""

    pool: FakePool
    answers: dict[str, set[str]]
    closed: dict[str, ClosedAnswer]

    @classmethod
    def of(cls, examples, resources, config: AddSentConfig) -> PreparedBatch:
        """Parse the passages and questions in one batch, and collect their typed phrases as the
        fake answers of these passages (a fresh pool, with fresh use counts, per call)."""
        resources.prepare_parses([ex.context for ex in examples] + [ex.question for ex in examples])
        pool = FakePool.from_contexts([ex.context for ex in examples], resources, cap=config.fake_cap)
        return cls(pool, paragraph_answers(examples), closed_book_fakes(examples, config, resources))

    @classmethod
    def unprepared(cls, resources, config: AddSentConfig) -> PreparedBatch:
        """For an attack applied without `prepare`: the fixed lists only, no closed-book answers."""
        return cls(FakePool(cap=config.fake_cap, resources=resources), {}, {})


def paragraph_answers(examples) -> dict[str, set[str]]:
    """The answers of every question on each passage, by the passage's text."""
    out: dict[str, set[str]] = {}
    for ex in examples:
        out.setdefault(ex.context, set()).update(a.text for a in ex.answers)
    return out


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
