"""Adversarial authoring of span questions (SQuAD), as Trick Me If You Can (Wallace et al., TACL
2019) did for question answering: the author writes a question about a paragraph and marks its
answer; the page shows the span model's best answers with their probabilities, highlights its
predicted span, and scores each question word by gradient x embedding of the predicted span's
start and end logits (importance.py).

The model reads the draft exactly as evaluation and the SQuAD attacks read a context (the
scorer's windows and n-best decoding, `SpanScorer.windows` and `window_spans`), so the page's
answer is the one `advrace evaluate` would score, in fp32 for the gradients. A submission fools
the model when the model's answer has SQuAD F1 below `fooled_below` against the marked answer.
"""

from __future__ import annotations

from advrace.core.tasks import EXTRACTIVE_QA
from advrace.metrics import squad_em_f1
from advrace.models.encoders.span_decoding import merge_windows
from advrace.models.encoders.span_encoding import collate_windows
from advrace.models.encoders.span_scoring import answer_distribution, load_span_model

from . import store
from .drafts import text_problem
from .importance import gradient_x_embedding, word_scores

N_BEST = 20  # spans decoded per draft, for the probabilities
SHOWN = 5  # of which the page lists the best


class SpanAuthoringModel:
    """A span-extraction checkpoint (a folder from `advrace train` with objective
    span_extraction, or a hub name online) for the span authoring page."""

    task = EXTRACTIVE_QA
    template = "author_span.html"

    def __init__(self, model: str, max_length: int | None = None, fooled_below: float = 0.5):
        if not 0 < fooled_below <= 1:
            raise ValueError(f"fooled_below must be in (0, 1], got {fooled_below}")
        self.scorer = load_span_model(str(model), what="authoring model", max_length=max_length, bf16=False)
        self.name = self.scorer.name
        self.max_length = self.scorer.max_length
        self.fooled_below = fooled_below

    def analyse(self, context: str, question: str) -> dict:
        """The model's best answers (text, offsets, probability), its predicted span, and word
        importance over the question and the paragraph (0 for paragraph words outside the
        window the prediction came from)."""
        scorer = self.scorer
        windows = scorer.windows([question], [context])
        batch = collate_windows(windows, scorer.tokenizer.pad_token_id or 0, labels=False)
        batch = {k: v.to(scorer.device) for k, v in batch.items()}
        found = {}

        def predicted_span(output):
            starts, ends = output.start_logits.detach().float().cpu(), output.end_logits.detach().float().cpu()
            per_window = [scorer.window_spans(starts[i], ends[i], w, context, N_BEST) for i, w in enumerate(windows)]
            found["spans"] = merge_windows(per_window, N_BEST)
            if not found["spans"]:
                return None
            best = found["spans"][0]
            found["at"] = w, s, e = _best_tokens(windows, starts, ends, best)
            return output.start_logits[w, s] + output.end_logits[w, e]

        _, token_scores = gradient_x_embedding(scorer.model, batch, predicted_span)
        spans = found["spans"]
        answers = [{"text": s.text, "start": s.start, "end": s.end, "probability": p}
                   for s, (_, p) in zip(spans, answer_distribution(spans))][:SHOWN]
        out = {"answers": answers, "prediction": None, "importance": None}
        if not spans:
            return out
        out["prediction"] = {k: answers[0][k] for k in ("text", "start", "end")}
        w, _, _ = found["at"]
        window, scores = windows[w], token_scores[w].tolist()
        importance = {"context": word_scores(context, context, window.offsets, window.sequence_ids, scores, 1),
                      "question": None}
        offsets = self._question_offsets(question, window)
        if offsets is not None:
            importance["question"] = word_scores(question, question, offsets, window.sequence_ids, scores, 0)
        out["importance"] = importance
        return out

    def _question_offsets(self, question: str, window) -> list | None:
        """Character offsets of the window's question tokens (the window keeps only the
        context's): the question tokenised alone, when its tokens are the window's (they are for
        the usual tokenizers; otherwise the page shows no question importance)."""
        enc = self.scorer.tokenizer(question, add_special_tokens=False, return_offsets_mapping=True)
        positions = [i for i, sid in enumerate(window.sequence_ids) if sid == 0]
        if [window.input_ids[i] for i in positions] != list(enc["input_ids"]):
            return None
        offsets = list(window.offsets)
        for i, o in zip(positions, enc["offset_mapping"]):
            offsets[i] = tuple(o)
        return offsets

    def analyse_draft(self, draft: dict) -> dict:
        out = self.analyse(draft["context"], draft["question"])
        if draft.get("answer_text") is not None:  # checked: the paragraph's text at its offset
            out.update(self._verdict(draft, out))
        return out

    def _verdict(self, draft: dict, out: dict) -> dict:
        answer = (out["prediction"] or {}).get("text", "")
        f1 = squad_em_f1(answer, [draft["answer_text"]])[1]
        return {"model_f1": f1, "fooled": f1 < self.fooled_below, "fooled_below": self.fooled_below}

    @staticmethod
    def check(draft, final: bool) -> str | None:
        """What is wrong with a posted draft (None: nothing). The marked answer must be the
        paragraph's text at its offset; a submission needs a question and an answer."""
        problem = text_problem(draft, "context", "paragraph")
        if problem:
            return problem
        if not isinstance(draft.get("title") or "", str):
            return "the title must be text"
        text, start = draft.get("answer_text"), draft.get("answer_start")
        if text is not None or start is not None:
            if not isinstance(text, str) or not text.strip() or not isinstance(start, int) or isinstance(start, bool):
                return "the answer is a non-empty text and its character offset in the paragraph"
            if start < 0 or draft["context"][start:start + len(text)] != text:
                return (f"the answer {text[:60]!r} is not the paragraph's text at character {start}: "
                        "mark it again in the paragraph")
        if final:
            if not draft["context"].strip() or not draft["question"].strip():
                return "write a paragraph and a question"
            if text is None:
                return "mark the answer in the paragraph"
        return None

    def judge(self, draft: dict, output: dict) -> tuple[dict, bool]:
        """The submitted SQuAD example, and whether the model's answer missed the marked one."""
        example = {"title": draft.get("title") or "", "context": draft["context"], "question": draft["question"],
                   "answers": [{"text": draft["answer_text"], "answer_start": draft["answer_start"]}],
                   "source": draft.get("source")}
        return example, output["fooled"]  # a submission has its answer marked, so a verdict

    @staticmethod
    def starting_point(db, source: str | None) -> dict:
        """An empty draft, or a SQuAD study item (by record id) to start from: its paragraph,
        question and first answer."""
        blank = {"title": "", "context": "", "question": "", "answer_text": "", "answer_start": "", "source": None}
        item = store.item_by_record_id(db, source) if source else None
        if item is None or item["task"] != EXTRACTIVE_QA:
            return blank
        p = item["payload"]
        first = p["answers"][0] if p["answers"] else {"text": "", "answer_start": ""}
        return {"title": p.get("title", ""), "context": p["context"], "question": p["question"],
                "answer_text": first["text"], "answer_start": first["answer_start"], "source": source}


def _best_tokens(windows, starts, ends, best) -> tuple[int, int, int]:
    """(window, start token, end token) of the best span: its highest-scoring token pair."""
    pairs = []
    for w, window in enumerate(windows):
        firsts = [i for i, o in enumerate(window.offsets) if o is not None and o[0] == best.start]
        lasts = [i for i, o in enumerate(window.offsets) if o is not None and o[1] == best.end]
        pairs += [(float(starts[w, s] + ends[w, e]), -w, s, e) for s in firsts for e in lasts if s <= e]
    _, w, s, e = max(pairs)
    return -w, s, e
