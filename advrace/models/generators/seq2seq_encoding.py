"""Inputs of the distractor generator: source `[CLS] question [SEP] answer [SEP] passage [SEP]`,
target `distractor [SEP]`.

The passage comes last so that truncation cuts its end, never the question or the answer.
Training and generation build sources the same way, so both come here.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_QUESTION_TOKENS = 64
MAX_ANSWER_TOKENS = 48


@dataclass(frozen=True)
class Seq2SeqFeature:
    example: int
    source: tuple[int, ...]
    target: tuple[int, ...]  # ends with [SEP]; empty at generation time

    @property
    def length(self) -> int:
        return len(self.source) + len(self.target)


def special_ids(tokenizer) -> tuple[int, int]:
    cls = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    sep = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if cls is None or sep is None:
        raise ValueError("the distractor generator needs a tokenizer with [CLS] and [SEP] tokens")
    return cls, sep


def encode_sources(tokenizer, examples: list, max_source_length: int) -> list[tuple[int, ...]]:
    cls, sep = special_ids(tokenizer)
    tok = lambda texts: tokenizer(texts, add_special_tokens=False)["input_ids"]  # noqa: E731
    questions = tok([ex.question for ex in examples])
    answers = tok([ex.answer for ex in examples])
    passages = tok([ex.passage for ex in examples])
    sources = []
    for q, a, p in zip(questions, answers, passages):
        head = [cls, *q[:MAX_QUESTION_TOKENS], sep, *a[:MAX_ANSWER_TOKENS], sep]
        room = max(0, max_source_length - len(head) - 1)
        sources.append(tuple(head + p[:room] + [sep]))
    return sources


def training_features(tokenizer, examples: list, max_source_length: int,
                      max_target_length: int) -> list[Seq2SeqFeature]:
    """One feature per (question, original distractor): RACE's three distractors are three
    targets for the same source. Empty distractors are skipped."""
    _, sep = special_ids(tokenizer)
    sources = encode_sources(tokenizer, examples, max_source_length)
    targets = tokenizer([d for ex in examples for d in ex.distractors], add_special_tokens=False)["input_ids"]
    features, k = [], 0
    for i, (ex, source) in enumerate(zip(examples, sources)):
        for _ in ex.distractors:
            ids = targets[k][:max(1, max_target_length - 1)]
            k += 1
            if ids:
                features.append(Seq2SeqFeature(i, source, tuple(ids) + (sep,)))
    return features


def collate_seq2seq(features: list[Seq2SeqFeature], pad_token_id: int = 0) -> dict:
    import torch

    from advrace.models.generators.unilm import next_token_labels  # deferred: start-up time (torch, transformers)

    width = max(f.length for f in features)
    ids = torch.full((len(features), width), pad_token_id, dtype=torch.long)
    for i, f in enumerate(features):
        ids[i, :f.length] = torch.tensor(f.source + f.target)
    source_lengths = torch.tensor([len(f.source) for f in features])
    lengths = torch.tensor([f.length for f in features])
    return {"input_ids": ids, "source_lengths": source_lengths, "lengths": lengths,
            "labels": next_token_labels(ids, source_lengths, lengths)}
