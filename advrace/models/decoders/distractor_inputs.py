"""Inputs of a causal-LM distractor generator: one prompt (passage cut to `max_passage_tokens`,
question, correct answer), then one distractor and the end token.

Training (objective `causal_lm`) and generation (attack `distractor_generation`, backend
`causal_lm`) must build the prompt the same way, token for token, so both come here. Batches are
padded on the left, so every row's distractor ends at the last position and the model need only
compute logits for the last few positions (`logits_to_keep`), not for the whole prompt.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

PROMPT = ("Read the passage and write one wrong answer to the question: a short option that "
          "sounds plausible but is not correct.\n\nPassage: {passage}\n\nQuestion: {question}\n"
          "Correct answer: {answer}\nWrong answer:")
IGNORE = -100  # the label of a position that is not scored


@dataclass(frozen=True)
class CausalFeature:
    example: int
    prompt: tuple[int, ...]
    target: tuple[int, ...]  # the distractor's tokens and the end token

    @property
    def length(self) -> int:
        return len(self.prompt) + len(self.target)


def end_id(tokenizer) -> int:
    """The token that ends a distractor: EOS, or [SEP] for a BERT-style tokenizer."""
    end = tokenizer.eos_token_id if tokenizer.eos_token_id is not None else tokenizer.sep_token_id
    if end is None:
        raise ValueError("a causal-LM distractor generator needs a tokenizer with an end token (EOS)")
    return end


def prompt_texts(tokenizer, examples: list, max_passage_tokens: int, template: str = PROMPT) -> list[str]:
    passages = tokenizer([ex.passage for ex in examples], add_special_tokens=False)["input_ids"]
    return [template.format(passage=tokenizer.decode(p[:max_passage_tokens], skip_special_tokens=True),
                            question=ex.question, answer=ex.answer)
            for ex, p in zip(examples, passages)]


def prompt_ids(tokenizer, examples: list, max_passage_tokens: int, template: str = PROMPT) -> list[list[int]]:
    """Token ids of each example's prompt, without special tokens (a BERT-style tokenizer would
    otherwise end the prompt with [SEP], the end token)."""
    texts = prompt_texts(tokenizer, examples, max_passage_tokens, template)
    return tokenizer(texts, add_special_tokens=False)["input_ids"]


def training_features(tokenizer, examples: list, max_passage_tokens: int, max_distractor_tokens: int,
                      per_question: int = 3, seed: int = 0) -> list[CausalFeature]:
    """One feature per (question, original distractor); with `per_question` below the number of
    distractors, that many drawn per question from (seed, question id), so that a CPU budget can
    buy more passages rather than more distractors of the same passage."""
    end = end_id(tokenizer)
    prompts = prompt_ids(tokenizer, examples, max_passage_tokens)
    features = []
    for i, (ex, prompt) in enumerate(zip(examples, prompts)):
        chosen = [d for d in ex.distractors if d.strip()]
        if len(chosen) > per_question:
            chosen = random.Random(f"{seed}:{ex.source_id}").sample(chosen, per_question)
        if not prompt or not chosen:
            continue
        # a leading space: the distractor follows "Wrong answer:" as it would in running text
        targets = tokenizer([" " + d.strip() for d in chosen], add_special_tokens=False)["input_ids"]
        for ids in targets:
            ids = ids[:max(1, max_distractor_tokens - 1)]
            if ids:
                features.append(CausalFeature(i, tuple(prompt), tuple(ids) + (end,)))
    return features


def collate_causal(features: list[CausalFeature], pad_token_id: int = 0) -> dict:
    """Left-padded prompt + target rows; `labels` covers only the last `logits_to_keep` positions,
    IGNORE except on the target tokens, so the loss is on the distractor alone."""
    import torch  # deferred for start-up time

    width = max(f.length for f in features)
    keep = max(len(f.target) for f in features) + 1  # the position before a target predicts its first token
    ids = torch.full((len(features), width), pad_token_id, dtype=torch.long)
    mask = torch.zeros((len(features), width), dtype=torch.long)
    labels = torch.full((len(features), keep), IGNORE, dtype=torch.long)
    for i, f in enumerate(features):
        ids[i, width - f.length:] = torch.tensor(f.prompt + f.target)
        mask[i, width - f.length:] = 1
        labels[i, keep - len(f.target):] = torch.tensor(f.target)
    positions = (mask.cumsum(-1) - 1).clamp(min=0)
    return {"input_ids": ids, "attention_mask": mask, "position_ids": positions, "labels": labels,
            "logits_to_keep": keep}
