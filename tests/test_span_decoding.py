import numpy as np
import pytest

from advrace.models.encoders.span_decoding import Span, best_spans, merge_windows

CONTEXT = "alpha beta gamma delta"
# [CLS] what is [SEP] alpha beta gamma delta [SEP]
OFFSETS = [(0, 0), (0, 4), (5, 7), (0, 0), (0, 5), (6, 10), (11, 16), (17, 22), (0, 0)]
SEQ_IDS = [None, 0, 0, None, 1, 1, 1, 1, None]


def logits(**at):
    values = np.full(len(OFFSETS), -10.0)
    for i, v in at.items():
        values[int(i[1:])] = v
    return values


def test_spans_stay_inside_the_context():
    start = logits(t0=100, t1=90, t2=80, t4=1, t5=2)
    end = logits(t0=100, t2=95, t3=90, t6=3, t8=50)
    spans = best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT)
    assert spans
    for span in spans:
        assert 0 <= span.start < span.end <= len(CONTEXT)
        assert span.text == CONTEXT[span.start:span.end]
    assert spans[0] == Span(6, 16, 5.0, "beta gamma")


def test_end_before_start_is_excluded():
    start = logits(t7=5)
    end = logits(t4=5, t7=1)
    assert best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT, top_k=1) == []
    spans = best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT, top_k=2)
    assert spans[0] == Span(17, 22, 6.0, "delta")
    assert (17, 5) not in {(s.start, s.end) for s in spans}


def test_length_limit():
    start = logits(t4=5)
    end = logits(t7=5, t5=1)
    spans = best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT, max_answer_tokens=2)
    assert spans[0].text == "alpha beta"
    assert all(len(s.text.split()) <= 2 for s in spans)
    long = best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT, max_answer_tokens=4)
    assert long[0].text == CONTEXT


def test_ordering_n_best_and_tie_break():
    zeros = np.zeros(len(OFFSETS))
    spans = best_spans(zeros, zeros, OFFSETS, SEQ_IDS, CONTEXT, n_best=4)
    assert [(s.start, s.end) for s in spans] == [(0, 5), (0, 10), (0, 16), (0, 22)]
    start = logits(t4=1, t5=3, t6=2, t7=0)
    end = logits(t4=0, t5=0, t6=0, t7=0)
    scores = [s.score for s in best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT)]
    assert scores == sorted(scores, reverse=True)
    assert best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT) == best_spans(
        list(start), list(end), OFFSETS, SEQ_IDS, CONTEXT)


def test_top_k_and_context_id():
    start = logits(t4=3, t5=2, t6=1, t7=0)
    end = logits(t4=0, t5=1, t6=2, t7=3)
    spans = best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT, top_k=1)
    assert [s.text for s in spans] == [CONTEXT]
    q_spans = best_spans(start, end, OFFSETS, SEQ_IDS, "what is", context_id=0)
    assert {s.text for s in q_spans} <= {"what", "is", "what is"}


def test_torch_tensors_are_accepted():
    torch = pytest.importorskip("torch")
    start = torch.tensor(logits(t5=4), dtype=torch.float32)
    end = torch.tensor(logits(t6=4), dtype=torch.float32)
    assert best_spans(start, end, OFFSETS, SEQ_IDS, CONTEXT)[0].text == "beta gamma"


def test_merge_keeps_max_score_and_dedupes_texts():
    w1 = [Span(0, 5, 1.0, "alpha"), Span(6, 10, 4.0, "beta")]
    w2 = [Span(0, 5, 3.0, "alpha"), Span(30, 34, 2.0, "beta"), Span(11, 16, 2.0, "gamma")]
    merged = merge_windows([w1, w2])
    assert merged == [Span(6, 10, 4.0, "beta"), Span(0, 5, 3.0, "alpha"), Span(11, 16, 2.0, "gamma")]
    assert merge_windows([w1, w2], n_best=1) == [Span(6, 10, 4.0, "beta")]
    assert merge_windows([]) == []
