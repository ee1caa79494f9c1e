"""One definition of what a judgement says, shared by `human-eval report` and `human-eval validate`.

A judgement is a *valid vote* only when the annotator chose the gold: the gold option, or a span
that is a gold answer (`chose_gold`). Choosing a new distractor ("Beijing" for "China") or the
added sentence's fake answer is the very failure validation exists to catch, so it is an invalid
vote, with its own reason ("chose option C"), as is "the question cannot be answered" with the
reason the annotator gave.

- correct rate: the share of judgements that chose the gold (AdvRACE's correctness);
- valid rate: the share of items whose verdict is valid: the majority of their judgements chose
  the gold, a tie being invalid (`verdict`);
- kappa: Fleiss' kappa of the vote (chose the gold or not), over the items with all their
  judgements.
"""

from __future__ import annotations

from advrace.core.provenance import INVALID, VALID, SentencesInserted, Vote
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import LETTERS
from advrace.metrics import normalize_answer, squad_em_f1

# A selected span chose the gold when, after SQuAD's official normalisation, it is a gold answer,
# or when it overlaps a gold answer where it stands in the paragraph and has F1 of at least this
# with it ("in 1990" for "1990"). The overlap keeps a fake answer that shares words with the gold
# ("Chicago Broncos" for "Denver Broncos", F1 0.5) in the added sentence from counting as the gold.
SPAN_F1 = 0.5
ADDED_SENTENCE = "selected the added sentence's answer"


def _golds(a: dict) -> list[dict]:
    return a["payload"]["answers"]


def _overlaps_gold(a: dict) -> bool:
    start = a["answer_start"]
    if start is None:
        return False
    end = start + len(a["answer_text"] or "")
    return any(start < g["answer_start"] + len(g["text"]) and g["answer_start"] < end for g in _golds(a))


def chose_gold(a: dict) -> bool:
    """Whether the annotation (a row of `store.annotations`) chose the gold answer."""
    if a["unanswerable"]:
        return False
    if a["task"] == MULTIPLE_CHOICE:
        return a["choice"] == a["payload"]["label"]
    text = a["answer_text"] or ""
    if normalize_answer(text) in {normalize_answer(g["text"]) for g in _golds(a)}:
        return True
    return _overlaps_gold(a) and squad_em_f1(text, [g["text"] for g in _golds(a)])[1] >= SPAN_F1


def added_spans(example) -> list[tuple[int, int]]:
    """Where the sentences an attack inserted into an example's passage or context stand in it
    (for naming a vote's reason: `vote`)."""
    text, spans = example.passage_text, []
    for rec in example.provenance:
        if isinstance(rec, SentencesInserted) and rec.field == example.passage_field:
            for s in rec.sentences:
                at = text.find(s.text)
                if at >= 0:
                    spans.append((at, at + len(s.text)))
    return spans


def vote(a: dict, added: list[tuple[int, int]] = ()) -> Vote:
    """The annotation as a vote: valid when it chose the gold, else invalid with why (the reason
    given for "cannot be answered", the option chosen, or the span selected; a span inside one of
    the `added` sentences is named as the added sentence's answer)."""
    if chose_gold(a):
        return Vote(a["annotator"], True)
    if a["unanswerable"]:
        return Vote(a["annotator"], False, a["reason"])
    if a["task"] == MULTIPLE_CHOICE:
        return Vote(a["annotator"], False, "gave no answer" if a["choice"] is None
                    else f"chose option {LETTERS[a['choice']]}")
    start = a["answer_start"]
    end = (start or 0) + len(a["answer_text"] or "")
    if start is not None and any(lo <= start and end <= hi for lo, hi in added):
        return Vote(a["annotator"], False, f"{ADDED_SENTENCE} “{a['answer_text']}”")
    return Vote(a["annotator"], False, f"selected “{a['answer_text']}”, not a gold answer")


def verdict(votes, judgements: int) -> str | None:
    """An item's verdict from its votes so far, of the `judgements` it is to get: valid when more
    than half of them are valid votes, invalid when at least half are invalid (a tie is invalid: a
    question half its judges could not answer with the gold is no benchmark item); None while the
    votes still to come could decide it either way, or when no judgement counts (every annotator
    it had was excluded: `controls`)."""
    if not judgements:
        return None
    valid = sum(v.valid for v in votes)
    if 2 * valid > judgements:
        return VALID
    if 2 * (len(votes) - valid) >= judgements:
        return INVALID
    return None


def category(a: dict) -> str:
    """What an annotation answered, for the list of items annotators disagree on."""
    if a["unanswerable"]:
        return "unanswerable"
    if a["task"] == MULTIPLE_CHOICE:
        return f"option {LETTERS[a['choice']]}" + (" (gold)" if chose_gold(a) else "")
    return "a gold answer" if chose_gold(a) else f"“{a['answer_text']}”"
