"""Adversarial authoring (Wallace et al., TACL 2019): an author edits a passage, question and
options while the model's option probabilities and each word's importance update as they type.

A word's importance is the gradient of the predicted option's score with respect to the input
embeddings, times the embeddings, summed over the hidden dimensions and over the word's
sub-tokens (Wallace et al., eq. 1), normalised by the largest magnitude in the text. Every call
is kept as an edit with its model output; a submission keeps the example, whether it fooled the
model, and its edit history, and `export_authored` writes the submissions as a release split.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import BLANK_RE
from advrace.models.mc_encoding import (MCFeature, collate_mc, encode_mc, encode_with_offsets,
                                         question_with_option)
from advrace.models.mc_scoring import CheckpointScorer, make_mc_scorer
from advrace.release import write_release

from . import store


class AuthoringModel:
    """A multiple-choice checkpoint (or a built-in reader, without importance) for the page.

    A checkpoint is loaded as evaluation loads it (`make_mc_scorer`, with its length limit), and
    its inputs are built by the one multiple-choice encoder (`encode_mc`, `collate_mc`), so the
    page shows the predictions that `advrace evaluate` scores. It runs in fp32, for gradients."""

    def __init__(self, model: str, max_length: int | None = None):
        self.name = str(model).rstrip("/").split("/")[-1]
        scorer = make_mc_scorer(model, batch_size=1, max_length=max_length, bf16=False)
        checkpoint = isinstance(scorer, CheckpointScorer)
        self.baseline = None if checkpoint else scorer
        self.scorer = scorer if checkpoint else None
        self.max_length = max_length
        if checkpoint:
            self.model, self.tokenizer = scorer.model, scorer.tokenizer
            self.max_length = self.scorer.max_length  # capped by the tokenizer's limit, as in evaluation

    def analyse(self, passage: str, question: str, options: list[str]) -> dict:
        example = MCExample("draft", passage, question, tuple(options), 0)
        if self.baseline is not None:
            scores = self.baseline.predict_mc([example])[0]
            return {"probabilities": _softmax(scores), "prediction": _argmax(scores), "importance": None}
        return self._gradients(example)

    def encode(self, example: MCExample) -> MCFeature:
        """The model's input ids for a draft: exactly what evaluation and training feed it."""
        return encode_mc(self.tokenizer, [example], self.max_length)[0]

    def _gradients(self, example: MCExample) -> dict:
        feature = self.encode(example)
        batch = collate_mc([feature], self.scorer.pad_id)
        batch.pop("labels")
        batch = {k: v.to(self.scorer.device) for k, v in batch.items()}
        embeddings = self.model.get_input_embeddings()
        captured = {}

        def keep(_module, _inputs, output):
            output.retain_grad()
            captured["emb"] = output

        handle = embeddings.register_forward_hook(keep)
        try:
            self.model.zero_grad(set_to_none=True)
            logits = self.model(**batch).logits[0]
            pred = int(logits.argmax())
            logits[pred].backward()
        finally:
            handle.remove()
        emb = captured["emb"]  # [options, tokens, hidden] (the batch is one question)
        scores = (emb.grad * emb).sum(-1).view(len(example.options), -1)[pred].detach().float().tolist()
        passage, question = example.passage, example.question
        second = question_with_option(question, example.options[pred])
        out = {"probabilities": _softmax(logits.detach().float().tolist()), "prediction": pred, "importance": None}
        spans = encode_with_offsets(self.tokenizer, passage, second, self.max_length)
        if spans is None or spans[0] != feature.input_ids[pred]:  # no offsets: probabilities only
            return out
        _, offsets, seq_ids = spans
        passage_words = _word_scores(passage, passage, offsets, seq_ids, scores, 0)
        # the second sequence is the question with the option appended or in its blank: the
        # question's words before the blank come first, in order, whatever the spacing
        blank = BLANK_RE.search(question)
        question_words = _word_scores(question, second, offsets, seq_ids, scores, 1,
                                      upto=blank.start() if blank else len(question))
        return {**out, "importance": {"passage": passage_words, "question": question_words}}


def _word_scores(text, seq_text, offsets, seq_ids, scores, which, upto=None) -> list[list]:
    """[start, end, score] per word of `text`, from the scores of the tokens of sequence `which`
    (whose characters are `seq_text`): sub-token scores summed, scaled to [-1, 1]. Words from
    `upto` on score 0 (they are not in the sequence as written)."""
    words = [(m.start(), m.end()) for m in re.finditer(r"\S+", text)]
    placed, cursor = [], 0
    for s, e in words:
        at = seq_text.find(text[s:e], cursor) if upto is None or s < upto else -1
        placed.append((at, at + e - s) if at >= 0 else None)
        if at >= 0:
            cursor = at + e - s
    total = [0.0] * len(words)
    for (s, e), sid, score in zip(offsets, seq_ids, scores):
        if sid != which or e <= s:
            continue
        for k, span in enumerate(placed):
            if span is not None and span[0] < e and s < span[1]:
                total[k] += score
                break
    top = max((abs(t) for t in total), default=0.0) or 1.0
    return [[s, e, round(t / top, 4)] for (s, e), t in zip(words, total)]


def _softmax(xs) -> list[float]:
    m = max(xs)
    ex = [math.exp(x - m) for x in xs]
    return [v / sum(ex) for v in ex]


def _argmax(xs) -> int:
    return max(range(len(xs)), key=lambda i: (xs[i], -i))


def submit(db, person_id: int, draft: dict, output: dict, model_name: str) -> tuple[int, bool]:
    """Store a submission; the edits since the author's last submission become its history."""
    fooled = output["prediction"] != draft["label"]
    example = {k: draft[k] for k in ("passage", "question", "options", "label")}
    example["source"] = draft.get("source")
    return store.add_submission(db, person_id, example, fooled, output, model_name, draft), fooled


def starting_point(db, source: str | None) -> dict:
    """An empty draft, or a study item (by record id) to start from."""
    blank = {"passage": "", "question": "", "options": ["", "", "", ""], "label": 0, "source": None}
    if not source:
        return blank
    item = store.item_by_record_id(db, source)
    if item is None or item["task"] != MULTIPLE_CHOICE:
        return blank
    p = item["payload"]
    return {"passage": p["passage"], "question": p["question"], "options": p["options"],
            "label": p["label"], "source": source}


def export_authored(db_path, out_dir, name: str = "human-authored") -> dict:
    """The submissions as a release with one split, `human_authored` (each record keeps its
    author, whether it fooled the model, and its edit history in provenance)."""
    conn = store.connect(db_path)
    try:
        rows = store.submissions(conn)
    finally:
        conn.close()
    examples = [MCExample(id=f"authored-{r['id']}", passage=r["example"]["passage"],
                          question=r["example"]["question"], options=tuple(r["example"]["options"]),
                          label=r["example"]["label"],
                          provenance=({"op": "authored", "author": r["author"], "model": r["model"],
                                       "fooled": r["fooled"], "source": r["example"].get("source"),
                                       "history": r["history"]},))
                for r in rows]
    if not examples:
        raise ConfigError(f"{db_path}: no submissions to export yet")
    return write_release({"human_authored": examples}, Path(out_dir), name=name,
                         source={"name": Path(str(db_path)).name, "format": "human-eval study"})
