"""Multiple-choice inputs for encoder models, shared by training and evaluation.

Each option becomes one sequence `[CLS] passage [SEP] question-with-option [SEP]` (AdvRACE
section 4.2); the model scores the first token of each. Training and evaluation must encode
identically, so both come here.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.core.text import BLANK_RE

# How a (passage, question-with-option) pair is tokenised: the passage is truncated first.
PAIR = {"truncation": "longest_first", "padding": False, "return_attention_mask": False}

def question_with_option(question: str, option: str) -> str:
    """Fill a RACE blank ("_") with the option; otherwise append the option to the question."""
    if BLANK_RE.search(question):
        return " ".join(BLANK_RE.sub(lambda _: option, question, count=1).split())
    return f"{question} {option}".strip()


@dataclass(frozen=True)
class MCFeature:
    """One encoded question: per-option token ids (unpadded), and the gold label."""

    id: str
    input_ids: tuple[tuple[int, ...], ...]
    token_type_ids: tuple[tuple[int, ...], ...] | None
    label: int

    @property
    def length(self) -> int:
        return max(len(ids) for ids in self.input_ids)


def encode_mc(tokenizer, examples, max_length: int = 512) -> list[MCFeature]:
    """Tokenise every option of every example, truncating the passage first."""
    firsts, seconds = [], []
    for ex in examples:
        for option in ex.options:
            firsts.append(ex.passage)
            seconds.append(question_with_option(ex.question, option))
    enc = tokenizer(firsts, seconds, max_length=max_length, **PAIR)
    types = enc.get("token_type_ids")
    features, k = [], 0
    for ex in examples:
        n = len(ex.options)
        ids = tuple(tuple(x) for x in enc["input_ids"][k:k + n])
        tt = tuple(tuple(x) for x in types[k:k + n]) if types is not None else None
        features.append(MCFeature(ex.id, ids, tt, ex.label))
        k += n
    return features


def encoding_key(max_length: int) -> dict:
    """What `encode_mc`'s features depend on besides the examples and the tokenizer: the key of
    cached multiple-choice features (advrace.models.runtime.feature_store), shared by training and scoring."""
    return {"encoder": "encode_mc", "max_length": max_length}


def encode_with_offsets(tokenizer, passage: str, second: str, max_length: int = 512):
    """One pair encoded as `encode_mc` encodes it, with each token's character span and sequence
    (0: the passage, 1: the question with the option, None: a special token), so that scores per
    token can be mapped back to words. None for a tokenizer that cannot give offsets (a slow one)."""
    if not getattr(tokenizer, "is_fast", False):
        return None
    enc = tokenizer(passage, second, max_length=max_length, return_offsets_mapping=True, **PAIR)
    return tuple(enc["input_ids"]), enc["offset_mapping"], enc.sequence_ids()


def collate_mc(features: list[MCFeature], pad_token_id: int = 0) -> dict:
    """Pad a batch to its own longest option (dynamic padding) as torch tensors."""
    import torch

    width = max(f.length for f in features)
    n_opt = max(len(f.input_ids) for f in features)
    shape = (len(features), n_opt, width)
    input_ids = torch.full(shape, pad_token_id, dtype=torch.long)
    attention = torch.zeros(shape, dtype=torch.long)
    token_types = torch.zeros(shape, dtype=torch.long) if features[0].token_type_ids is not None else None
    for b, f in enumerate(features):
        for o, ids in enumerate(f.input_ids):
            input_ids[b, o, :len(ids)] = torch.tensor(ids)
            attention[b, o, :len(ids)] = 1
            if token_types is not None:
                token_types[b, o, :len(ids)] = torch.tensor(f.token_type_ids[o])
    batch = {"input_ids": input_ids, "attention_mask": attention,
             "labels": torch.tensor([f.label for f in features], dtype=torch.long)}
    if token_types is not None:
        batch["token_type_ids"] = token_types
    return batch
