"""What a training run fits: a multiple-choice reader, a span extractor, or a distractor generator.

The loop in training/loop.py is the same for all three; an objective says which data it reads,
how examples become features and batches, which model class to build, and how the dev set is
scored. Every dev metric is higher-is-better, so "best checkpoint" means the same everywhere.
"""

from __future__ import annotations

from advrace.core.errors import ConfigError

MULTIPLE_CHOICE = "multiple_choice"
SPAN = "span_extraction"
SEQ2SEQ = "distractor_generation"
OBJECTIVES = (MULTIPLE_CHOICE, SPAN, SEQ2SEQ)


class Objective:
    name: str
    metric: str  # the key of the dev score that picks the best checkpoint
    label: str  # how messages name it
    tasks: tuple[str, ...] = ("multiple_choice",)
    architecture: str  # the class saved checkpoints are loaded with

    def __init__(self, cfg):
        self.cfg = cfg

    def model_class(self):
        raise NotImplementedError

    def features(self, tokenizer, examples: list, seed: int, dev: bool = False) -> list:
        raise NotImplementedError

    def collate(self, features: list, pad_token_id: int) -> dict:
        raise NotImplementedError

    def evaluate(self, model, loader, accelerator, features: list, examples: list) -> dict:
        raise NotImplementedError


class MultipleChoice(Objective):
    name, metric, label = MULTIPLE_CHOICE, "dev_accuracy", "dev accuracy"
    architecture = "AutoModelForMultipleChoice"

    def model_class(self):
        from transformers import AutoModelForMultipleChoice

        return AutoModelForMultipleChoice

    def features(self, tokenizer, examples, seed, dev=False):
        from advrace.models.mc_encoding import encode_mc

        return encode_mc(tokenizer, examples, max_length=self.cfg.max_length)

    def collate(self, features, pad_token_id):
        from advrace.models.mc_encoding import collate_mc

        return collate_mc(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        import torch

        right, seen = 0, set()
        with torch.no_grad():
            for batch in loader:
                index = batch.pop("index")
                preds = model(**batch).logits.argmax(dim=-1)
                index, preds, labels = accelerator.gather_for_metrics((index, preds, batch["labels"]))
                for i, p, y in zip(index.tolist(), preds.tolist(), labels.tolist()):
                    if i not in seen:
                        seen.add(i)
                        right += p == y
        return {"dev_accuracy": right / len(seen), "dev_questions": len(seen)}


class SpanExtraction(Objective):
    """A span extractor (AdvRACE's distractor extraction model, or a SQuAD reader): RACE
    questions get their answer inserted into the passage as the gold span."""

    name, metric, label = SPAN, "dev_f1", "dev F1"
    tasks = ("multiple_choice", "extractive_qa")
    architecture = "AutoModelForQuestionAnswering"

    def model_class(self):
        from transformers import AutoModelForQuestionAnswering

        return AutoModelForQuestionAnswering

    def features(self, tokenizer, examples, seed, dev=False):
        from advrace.models.span_encoding import encode_windows, span_training_examples

        questions, contexts, spans = span_training_examples(examples, seed)
        if dev:  # kept for `evaluate`
            self._dev_contexts = contexts
            self._dev_golds = [c[s:e] for c, (s, e) in zip(contexts, spans)]
        return encode_windows(tokenizer, questions, contexts, spans, max_length=self.cfg.max_length,
                              stride=self.cfg.doc_stride)

    def collate(self, features, pad_token_id):
        from advrace.models.span_encoding import collate_windows

        return collate_windows(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        """EM and F1 of the best span of each question (over its windows) against the gold span."""
        import torch
        from accelerate.utils import gather_object

        from advrace.metrics import squad_em_f1
        from advrace.models.span_decoding import best_spans, merge_windows

        contexts, golds = self._dev_contexts, self._dev_golds
        local = []
        with torch.no_grad():
            for batch in loader:
                index = batch.pop("index").tolist()
                batch.pop("start_positions")
                batch.pop("end_positions")
                out = model(**batch)
                for row, w in enumerate(index):
                    f = features[w]
                    spans = best_spans(out.start_logits[row], out.end_logits[row], f.offsets,
                                       f.sequence_ids, contexts[f.example], n_best=1,
                                       max_answer_tokens=self.cfg.max_answer_tokens)
                    local.append((w, spans))
        per_example: dict[int, dict[int, list]] = {}
        for w, spans in gather_object(local) if accelerator.num_processes > 1 else local:
            per_example.setdefault(features[w].example, {})[w] = spans
        em = f1 = 0.0
        for ex, windows in per_example.items():
            best = merge_windows(list(windows.values()), n_best=1)
            e, f = squad_em_f1(best[0].text if best else "", [golds[ex]])
            em, f1 = em + e, f1 + f
        n = len(per_example)
        return {"dev_f1": f1 / n, "dev_exact_match": em / n, "dev_questions": n}


class DistractorGeneration(Objective):
    """AdvRACE's distractor generator: a UniLM seq2seq model on passage + question + answer,
    with each of RACE's three distractors as a target."""

    name, metric, label = SEQ2SEQ, "dev_token_accuracy", "dev token accuracy"
    architecture = "UniLMSeq2Seq"

    def model_class(self):
        from advrace.models.unilm import UniLMSeq2Seq

        return UniLMSeq2Seq

    def features(self, tokenizer, examples, seed, dev=False):
        from advrace.models.seq2seq_encoding import training_features

        return training_features(tokenizer, examples, self.cfg.max_length, self.cfg.max_target_length)

    def collate(self, features, pad_token_id):
        from advrace.models.seq2seq_encoding import collate_seq2seq

        return collate_seq2seq(features, pad_token_id)

    def evaluate(self, model, loader, accelerator, features, examples):
        """Teacher-forced next-token accuracy and loss on the dev distractors."""
        import torch

        right = total = 0
        loss_sum = 0.0
        seen = set()
        with torch.no_grad():
            for batch in loader:
                index = batch.pop("index")
                out = model(**batch)
                labels = batch["labels"]
                rows = out.positions.nonzero()[:, 0]  # the question of each scored target token
                gold = labels[out.positions]
                zeros = torch.zeros(labels.shape[0], device=labels.device)
                hits = zeros.index_add(0, rows, (out.logits.argmax(-1) == gold).float())
                counts = zeros.index_add(0, rows, torch.ones_like(gold, dtype=torch.float))
                nll = zeros.index_add(0, rows, torch.nn.functional.cross_entropy(
                    out.logits.float(), gold, reduction="none"))
                index, hits, counts, nll = accelerator.gather_for_metrics((index, hits, counts, nll))
                for i, h, c, l in zip(index.tolist(), hits.tolist(), counts.tolist(), nll.tolist()):
                    if i not in seen:
                        seen.add(i)
                        right, total, loss_sum = right + h, total + c, loss_sum + l
        return {"dev_token_accuracy": right / max(total, 1), "dev_loss": loss_sum / max(total, 1),
                "dev_targets": len(seen)}


_CLASSES = {c.name: c for c in (MultipleChoice, SpanExtraction, DistractorGeneration)}


def get_objective(cfg) -> Objective:
    try:
        return _CLASSES[cfg.objective](cfg)
    except KeyError:
        raise ConfigError(f"unknown objective {cfg.objective!r}; known: {', '.join(OBJECTIVES)}") from None
