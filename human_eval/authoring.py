"""Adversarial authoring (Wallace et al., TACL 2019): an author writes a question while the
model's answer and each word's importance (importance.py) update as they type.

Two kinds of model serve the page: a multiple-choice one (`AuthoringModel`: the author edits a
passage, question and options and sees each option's probability) and a span one
(`span_authoring.SpanAuthoringModel`: the author writes a question about a paragraph, marks its
answer and sees the model's best spans). Both take a draft (the JSON the page posts), check it,
analyse it and judge a submission; every call is kept as an edit with its model output, a
submission keeps the example, whether it fooled the model, and its edit history, and
`export_authored` writes the submissions as a release split.
"""

from __future__ import annotations

from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.numbers import argmax
from advrace.core.provenance import Authored
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import BLANK_RE
from advrace.models.runtime.checkpoint_info import checkpoint_objective
from advrace.models.runtime.loading import checkpoint_architectures, model_name, saved_architectures
from advrace.models.encoders.mc_encoding import (MCFeature, collate_mc, encode_mc, encode_with_offsets,
                                         question_with_option)
from advrace.models.encoders.mc_scoring import CheckpointScorer, make_mc_scorer
from advrace.models.encoders.readers import is_builtin_reader
from advrace.release import write_release

from . import store
from .drafts import text_problem
from .importance import gradient_x_embedding, softmax, word_scores
from .span_authoring import SpanAuthoringModel


class AuthoringModel:
    """A multiple-choice checkpoint (or a built-in reader, without importance) for the page.

    A checkpoint is loaded as evaluation loads it (`make_mc_scorer`, with its length limit), and
    its inputs are built by the one multiple-choice encoder (`encode_mc`, `collate_mc`), so the
    page shows the predictions that `advrace evaluate` scores. It runs in fp32, for gradients."""

    task = MULTIPLE_CHOICE
    template = "author.html"

    def __init__(self, model: str, max_length: int | None = None):
        self.name = model_name(model)
        scorer = make_mc_scorer(model, batch_size=1, max_length=max_length, bf16=False)
        checkpoint = isinstance(scorer, CheckpointScorer)
        self.builtin_reader = None if checkpoint else scorer
        self.scorer = scorer if checkpoint else None
        self.max_length = max_length
        if checkpoint:
            self.model, self.tokenizer = scorer.model, scorer.tokenizer
            self.max_length = self.scorer.max_length  # capped by the tokenizer's limit, as in evaluation

    def analyse(self, passage: str, question: str, options: list[str]) -> dict:
        example = MCExample("draft", passage, question, tuple(options), 0)
        if self.builtin_reader is not None:
            scores = self.builtin_reader.predict_mc([example])[0]
            return {"probabilities": softmax(scores), "prediction": argmax(scores), "importance": None}
        return self._gradients(example)

    def analyse_draft(self, draft: dict) -> dict:
        return self.analyse(draft["passage"], draft["question"], draft["options"])

    @staticmethod
    def check(draft, final: bool) -> str | None:
        """What is wrong with a posted draft (None: nothing); `final` for a submission."""
        problem = text_problem(draft, "passage", "passage")
        if problem:
            return problem
        options = draft.get("options")
        if not isinstance(options, list) or not 2 <= len(options) <= 8 or not all(isinstance(o, str) for o in options):
            return "give 2 to 8 options"
        if final:
            label = draft.get("label")
            if not isinstance(label, int) or isinstance(label, bool) or not 0 <= label < len(options):
                return "mark the correct option"
            if not draft["question"].strip() or not all(o.strip() for o in options):
                return "fill in the question and every option"
        return None

    @staticmethod
    def judge(draft: dict, output: dict) -> tuple[dict, bool]:
        """The submitted example, and whether the model missed its marked option."""
        example = {k: draft[k] for k in ("passage", "question", "options", "label")}
        return {**example, "source": draft.get("source")}, output["prediction"] != draft["label"]

    @staticmethod
    def starting_point(db, source: str | None) -> dict:
        """An empty draft, or a study item (by record id) to start from."""
        blank = {"passage": "", "question": "", "options": ["", "", "", ""], "label": 0, "source": None}
        item = store.item_by_record_id(db, source) if source else None
        if item is None or item["task"] != MULTIPLE_CHOICE:
            return blank
        p = item["payload"]
        return {"passage": p["passage"], "question": p["question"], "options": p["options"],
                "label": p["label"], "source": source}

    def encode(self, example: MCExample) -> MCFeature:
        """The model's input ids for a draft: exactly what evaluation and training feed it."""
        return encode_mc(self.tokenizer, [example], self.max_length)[0]

    def _gradients(self, example: MCExample) -> dict:
        feature = self.encode(example)
        batch = collate_mc([feature], self.scorer.pad_id)
        batch.pop("labels")
        batch = {k: v.to(self.scorer.device) for k, v in batch.items()}
        chosen = {}

        def predicted_option(output):
            logits = output.logits[0]
            chosen["pred"] = int(logits.argmax())
            return logits[chosen["pred"]]

        output, token_scores = gradient_x_embedding(self.model, batch, predicted_option)
        pred = chosen["pred"]
        # token_scores: [options, tokens] (the batch is one question)
        scores = token_scores.view(len(example.options), -1)[pred].tolist()
        passage, question = example.passage, example.question
        second = question_with_option(question, example.options[pred])
        out = {"probabilities": softmax(output.logits[0].detach().float().tolist()), "prediction": pred,
               "importance": None}
        spans = encode_with_offsets(self.tokenizer, passage, second, self.max_length)
        if spans is None or spans[0] != feature.input_ids[pred]:  # no offsets: probabilities only
            return out
        _, offsets, seq_ids = spans
        passage_words = word_scores(passage, passage, offsets, seq_ids, scores, 0)
        # the second sequence is the question with the option appended or in its blank: the
        # question's words before the blank come first, in order, whatever the spacing
        blank = BLANK_RE.search(question)
        question_words = word_scores(question, second, offsets, seq_ids, scores, 1,
                                      upto=blank.start() if blank else len(question))
        return {**out, "importance": {"passage": passage_words, "question": question_words}}


def load_authoring_model(model: str, *, task: str | None = None, max_length: int | None = None,
                         fooled_below: float = 0.5):
    """The authoring model for a checkpoint, a hub name or a built-in reader. Its task is `task`
    when given, else what the checkpoint says it was trained for (`model_task`)."""
    task = task or model_task(model)
    if task == EXTRACTIVE_QA:
        return SpanAuthoringModel(model, max_length=max_length, fooled_below=fooled_below)
    return AuthoringModel(model, max_length=max_length)


def model_task(model: str) -> str:
    """extractive_qa for a span checkpoint (trained by `advrace train` with objective
    span_extraction, or any model whose config names a *ForQuestionAnswering architecture),
    multiple_choice for anything else, built-in readers included."""
    if is_builtin_reader(model):
        return MULTIPLE_CHOICE
    objective = checkpoint_objective(model)
    if objective is not None:
        return EXTRACTIVE_QA if objective == "span_extraction" else MULTIPLE_CHOICE
    return EXTRACTIVE_QA if any(a.endswith("ForQuestionAnswering") for a in _architectures(model)) else MULTIPLE_CHOICE


def _architectures(model: str) -> list[str]:
    """The architectures a model's config names: a folder's config.json, or a hub model's (online;
    offline, the cache's, read at once: advrace.models.runtime.loading.checkpoint_architectures)."""
    return checkpoint_architectures(str(model)) or []


def submit(db, person_id: int, draft: dict, output: dict, model) -> tuple[int, bool]:
    """Store a submission, judged by `model` (did it fool it?); the edits since the author's last
    submission become its history."""
    example, fooled = model.judge(draft, output)
    return store.add_submission(db, person_id, example, fooled, output, model.name, draft), fooled


def export_authored(db_path, out_dir, name: str = "human-authored",
                    task: str | None = None) -> tuple[dict, int]:
    """The submissions as a release with one split, `human_authored` (each record keeps its
    author, the model, whether it fooled the model, and its edit history in provenance): its
    manifest, and how many of its questions fooled the model. A release holds one task: span
    questions become a SQuAD release, multiple-choice ones a RACE one; a database with both
    needs `task`."""
    conn = store.connect(db_path)
    try:
        rows = store.submissions(conn)
    finally:
        conn.close()
    if not rows:
        raise ConfigError(f"{db_path}: no submissions to export yet")
    by_task: dict[str, list] = {}
    for r in rows:
        by_task.setdefault(EXTRACTIVE_QA if "context" in r["example"] else MULTIPLE_CHOICE, []).append(r)
    if task is None and len(by_task) > 1:
        raise ConfigError(f"{db_path}: the submissions are of two tasks ({', '.join(sorted(by_task))}: "
                          f"{', '.join(f'{len(v)} {k}' for k, v in sorted(by_task.items()))}); a release holds one, "
                          "so choose one with --task")
    task = task or next(iter(by_task))
    if task not in by_task:
        raise ConfigError(f"{db_path}: no {task} submissions to export (there are {', '.join(sorted(by_task))})")
    examples = [_authored_example(r) for r in by_task[task]]
    manifest = write_release({"human_authored": examples}, Path(out_dir), name=name,
                             source={"name": Path(str(db_path)).name, "format": "human-eval study"})
    return manifest, sum(1 for ex in examples if ex.provenance[0].fooled)


def _authored_example(row: dict):
    ex = row["example"]
    span = "context" in ex  # a span question also keeps the model's answer and F1
    record = Authored(author=row["author"], model=row["model"], fooled=row["fooled"], source=ex.get("source"),
                      history=tuple(row["history"] or ()),
                      model_answer=(row["output"].get("prediction") or {}).get("text") if span else None,
                      model_f1=row["output"].get("model_f1") if span else None)
    if span:
        return SpanExample(id=f"authored-{row['id']}", title=ex.get("title") or "authored", context=ex["context"],
                           question=ex["question"], answers=tuple(Answer(a["text"], a["answer_start"])
                                                                  for a in ex["answers"]),
                           provenance=(record,))
    return MCExample(id=f"authored-{row['id']}", passage=ex["passage"], question=ex["question"],
                     options=tuple(ex["options"]), label=ex["label"], provenance=(record,))
