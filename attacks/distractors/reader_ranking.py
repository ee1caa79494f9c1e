"""SWAG's adversarial filtering (Zellers et al., 2018), `select_with`: readers score the passed
candidates as options of their question, and the ones they like most are tried first."""

from __future__ import annotations

from advrace.core.examples import MCExample
from advrace.core.numbers import significant
from advrace.core.paths import models_named
from advrace.models.encoders.mc_scoring import make_mc_scorer


def make_readers(cfg) -> list:
    """The config's readers (`select_with`, several separated by commas), placed on the device
    the attack's own model uses."""
    return [make_mc_scorer(name, batch_size=cfg.batch_size, max_length=cfg.select_with_max_length, bf16=cfg.bf16,
                           place=True, reader_batch_size=cfg.batch_size)
            for name in models_named(cfg.select_with)]


def ensemble_rank(rows: list, j: int) -> float:
    """Option j's mean rank (0: the highest score) among the options of one question, over the
    readers' score rows: readers whose scores are on different scales weigh the same."""
    return sum(sum(other > row[j] for other in row) for row in rows) / len(rows)


def rank_by_readers(readers: list, examples: list, vetted: list[dict], pool: int, progress: bool,
                    desc: str) -> None:
    """The readers score the best `pool` passed candidates of each question, in one batched call
    over the shard; each `vetted` entry gets them in the readers' order, their `scores` and the
    gold's (`gold_score`)."""
    todo = [i for i, v in enumerate(vetted) if v["passed"]]
    # The gold first: every question has at least two options, as MCExample and the scorers want.
    items = [MCExample(id=f"{examples[i].id}/select_with", passage=examples[i].passage,
                       question=examples[i].question, label=0,
                       options=(examples[i].answer, *vetted[i]["passed"][:pool])) for i in todo]
    by_reader = [reader.predict_mc(items, progress=progress, desc=desc) if items else [] for reader in readers]
    for n, i in enumerate(todo):
        v = vetted[i]
        rows = [scores[n] for scores in by_reader]
        scored = v["passed"][:pool]
        order = sorted(range(len(scored)), key=lambda j: (ensemble_rank(rows, j + 1), j))
        v["passed"] = [scored[j] for j in order] + v["passed"][pool:]
        # each reader's score, in select_with's order
        v["scores"] = {scored[j]: tuple(significant(r[j + 1]) for r in rows) for j in order}
        v["gold_score"] = tuple(significant(r[0]) for r in rows)
