"""Adversarial authoring (Wallace et al., TACL 2019): an author edits a passage, question and
options while the model's option probabilities and each word's importance update as they type.

A word's importance is the gradient of the predicted option's score with respect to the input
embeddings, times the embeddings, summed over the hidden dimensions and over the word's
sub-tokens (Wallace et al., eq. 1), normalised by the largest magnitude in the text. Every call
is kept as an edit with its model output; a submission keeps the example, whether it fooled the
model, and its edit history, and `export_authored` writes the submissions as a release split.
"""

from __future__ import annotations

import json
import math
import re
import time
from pathlib import Path

from advrace.core.examples import MCExample
from advrace.models.mc_encoding import BLANK_RE, question_with_option

from . import store


class AuthoringModel:
    """A multiple-choice checkpoint (or a built-in reader, without importance) for the page."""

    def __init__(self, model: str, max_length: int = 384):
        from advrace.models.readers import is_baseline, make_baseline

        self.name = str(model).rstrip("/").split("/")[-1]
        self.max_length = max_length
        self.baseline = make_baseline(model) if is_baseline(model) else None
        if self.baseline is None:
            from advrace.evaluation import load_checkpoint

            scorer = load_checkpoint(model, max_length=max_length, bf16=False)
            self.model, self.tokenizer = scorer.model, scorer.tokenizer

    def analyse(self, passage: str, question: str, options: list[str]) -> dict:
        if self.baseline is not None:
            scores = self.baseline.predict_mc([MCExample("draft", passage, question, tuple(options), 0)])[0]
            return {"probabilities": _softmax(scores), "prediction": _argmax(scores), "importance": None}
        return self._gradients(passage, question, options)

    def _gradients(self, passage, question, options) -> dict:
        tok = self.tokenizer
        seconds = [question_with_option(question, o) for o in options]
        enc = tok([passage] * len(options), seconds, truncation="only_first", max_length=self.max_length,
                  padding=True, return_offsets_mapping=True, return_tensors="pt")
        offsets = enc.pop("offset_mapping")[:, :, :].tolist()
        seq_ids = [enc.sequence_ids(i) for i in range(len(options))]
        embeddings = self.model.get_input_embeddings()
        captured = {}

        def keep(_module, _inputs, output):
            output.retain_grad()
            captured["emb"] = output

        handle = embeddings.register_forward_hook(keep)
        try:
            self.model.zero_grad(set_to_none=True)
            logits = self.model(**{k: v.unsqueeze(0) for k, v in enc.items()}).logits[0]
            pred = int(logits.argmax())
            logits[pred].backward()
        finally:
            handle.remove()
        emb = captured["emb"]  # [options, tokens, hidden] (the batch is one question)
        scores = (emb.grad * emb).sum(-1).view(len(options), -1)[pred].detach().tolist()
        passage_words = _word_scores(passage, passage, offsets[pred], seq_ids[pred], scores, 0)
        # the second sequence is the question with the option appended or in its blank: the
        # question's words before the blank come first, in order, whatever the spacing
        blank = BLANK_RE.search(question)
        question_words = _word_scores(question, seconds[pred], offsets[pred], seq_ids[pred], scores, 1,
                                      upto=blank.start() if blank else len(question))
        return {"probabilities": _softmax(logits.detach().tolist()), "prediction": pred,
                "importance": {"passage": passage_words, "question": question_words}}


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


def record_edit(db, person_id: int, draft: dict, output: dict) -> None:
    db.execute("INSERT INTO edits(person_id, draft, output, created) VALUES (?, ?, ?, ?)",
               (person_id, json.dumps(draft, ensure_ascii=False), json.dumps(output), time.time()))


def submit(db, person_id: int, draft: dict, output: dict, model_name: str) -> tuple[int, bool]:
    """Store a submission; the edits since the author's last submission become its history."""
    fooled = output["prediction"] != draft["label"]
    example = {k: draft[k] for k in ("passage", "question", "options", "label")}
    example["source"] = draft.get("source")
    db.execute("BEGIN IMMEDIATE")
    try:
        cur = db.execute("INSERT INTO submissions(person_id, example, fooled, output, model, created) "
                         "VALUES (?, ?, ?, ?, ?, ?)",
                         (person_id, json.dumps(example, ensure_ascii=False), int(fooled), json.dumps(output),
                          model_name, time.time()))
        sid = cur.lastrowid
        record_edit(db, person_id, draft, output)
        db.execute("UPDATE edits SET submission_id = ? WHERE person_id = ? AND submission_id IS NULL",
                   (sid, person_id))
        db.execute("COMMIT")
    except BaseException:
        db.execute("ROLLBACK")
        raise
    return sid, fooled


def starting_point(db, source: str | None) -> dict:
    """An empty draft, or a study item (by record id) to start from."""
    blank = {"passage": "", "question": "", "options": ["", "", "", ""], "label": 0, "source": None}
    if not source:
        return blank
    row = db.execute("SELECT payload, task FROM items WHERE record_id = ?", (source,)).fetchone()
    if row is None or row["task"] != "multiple_choice":
        return blank
    p = json.loads(row["payload"])
    return {"passage": p["passage"], "question": p["question"], "options": p["options"],
            "label": p["label"], "source": source}


def export_authored(db_path, out_dir, name: str = "human-authored") -> dict:
    """The submissions as a release with one split, `human_authored` (each record keeps its
    author, whether it fooled the model, and its edit history in provenance)."""
    from advrace.release import write_release

    conn = store.connect(db_path)
    try:
        rows = conn.execute("SELECT s.*, p.name AS author FROM submissions s JOIN people p ON p.id = s.person_id "
                            "ORDER BY s.id").fetchall()
        examples = []
        for r in rows:
            ex = json.loads(r["example"])
            history = [{"draft": json.loads(h["draft"]), "output": json.loads(h["output"]), "time": h["created"]}
                       for h in conn.execute("SELECT * FROM edits WHERE submission_id = ? ORDER BY id", (r["id"],))]
            examples.append(MCExample(id=f"authored-{r['id']}", passage=ex["passage"], question=ex["question"],
                                      options=tuple(ex["options"]), label=ex["label"],
                                      provenance=({"op": "authored", "author": r["author"], "model": r["model"],
                                                   "fooled": bool(r["fooled"]), "source": ex.get("source"),
                                                   "history": history},)))
    finally:
        conn.close()
    if not examples:
        from advrace.core.errors import ConfigError

        raise ConfigError(f"{db_path}: no submissions to export yet")
    return write_release({"human_authored": examples}, Path(out_dir), name=name,
                         source={"name": Path(str(db_path)).name, "format": "human-eval study"})
