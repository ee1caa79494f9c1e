"""An answerability judge: refuses a new distractor that a model rates as good an answer as the gold.

No word or cosine check separates a second right answer in other words ("Beijing" for "China",
"at his friends house" for "at Peter's friend's house") from a wrong option; a reader can. The
judge scores the gold and each candidate as answers to the question given the passage, with the
project's own scorers (`advrace.models.encoders.mc_scoring.make_mc_scorer`: a multiple-choice
checkpoint's option logits, a built-in reader's scores, or a causal LM's per-option
log-likelihood after lm-evaluation-harness's RACE prompt, divided by the option's characters as
`acc_norm` does), and refuses a candidate when

    score(candidate) >= score(gold) - margin

The margin is on the model's own scale, so it is calibrated per model on RACE's own distractors
(`bench/judge_calibration.py`: the margin at which the judge refuses at most 2% of them); only
`smollm2` and the built-in readers have a calibrated default (`CALIBRATED`). A judge weaker than
the models under test refuses hard-but-valid distractors too: see docs/audit.md, "The
answerability judge".

The distractor attacks (`judge:` in their config) and `advrace audit --judge` both call this.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.paths import looks_like_model_name
from advrace.models.decoders.llm_scoring import CausalLMScorer
from advrace.models.encoders.mc_scoring import make_mc_scorer
from advrace.models.runtime.loading import checkpoint_name

# Margins measured by bench/judge_calibration.py on RACE dev-middle (400 questions, seed 0;
# docs/results.md), at which the judge refuses at most 2% of RACE's own distractors; a model not
# named here needs `judge_margin` (each model scores on its own scale). SmolLM2 rates a RACE
# distractor above the gold a third of the time, so its margin is negative: it refuses only what it
# rates far above the gold.
CALIBRATED: dict[str, float] = {"smollm2": -1.45, "similarity": -0.175, "sliding-window": -1.561}
# The same bench's recall at that margin on tests/validity's second_right_answer items: what the audit's
# `not checked:` line says of the judge (refused invalid items, of all; refused valid twins, of all).
RECALL: dict[str, tuple[int, int, int, int]] = {"smollm2": (0, 14, 0, 14), "similarity": (0, 14, 0, 14),
                                                 "sliding-window": (1, 14, 0, 14)}
# One text scored twice (as the gold and as a candidate) differs in its last float bits with its place
# in a packed batch (SmolLM2: 3e-7): scores this close count as equal, so the gold restated is refused
# at margin 0 on any batch shape.
TOLERANCE = 1e-5


def check_judge_config(judge: str | None, margin: float | None, where: str, folder: str | None = None) -> None:
    """A clear error for a judge that cannot be used, before any model is loaded: a local folder
    that does not exist, or a model with no calibrated margin and none given."""
    if judge is None:
        return
    if not isinstance(judge, str) or not judge.strip():
        raise ConfigError(f"{where}: judge must name a model (a multiple-choice checkpoint folder, a causal-LM "
                          "folder, `smollm2`, or a Hub name), or be null")
    path = judge if folder is None or os.path.isabs(judge) else os.path.join(folder, judge)
    if not os.path.isdir(os.path.expanduser(path)) and not looks_like_model_name(judge, folder):
        raise ConfigError(f"{where}: judge {judge}: no such folder; give a multiple-choice checkpoint folder "
                          "(`advrace train`), a causal-LM folder (save_pretrained), `smollm2`, or a Hub name, "
                          "or remove the judge key")
    if margin is None and judge not in CALIBRATED:
        raise ConfigError(f"{where}: judge {judge} has no calibrated margin; give judge_margin (`--judge-margin` "
                          "on the command line; on the model's own score scale), measured with `python bench/judge_calibration.py RACE/dev/middle "
                          f"--judge {judge}`")


def margin_for(judge: str, margin: float | None) -> float:
    return CALIBRATED[judge] if margin is None else float(margin)


@dataclass
class Verdict:
    """One candidate's judgement: its score, the gold's, and whether the judge refuses it."""

    candidate: float
    gold: float
    refused: bool


@dataclass
class AnswerabilityJudge:
    """A scorer (anything with `predict_mc`) and the refusal rule; `per_char`: divide each
    option's score by its characters (a causal LM's log-likelihood, lm-eval's acc_norm)."""

    scorer: object
    name: str
    margin: float
    per_char: bool = False
    judged: int = field(default=0, init=False)

    def option_scores(self, examples: list[MCExample], progress: bool = False) -> list[list[float]]:
        """Each option's score on the judge's scale (the rule compares these)."""
        rows = self.scorer.predict_mc(examples, desc="judge", progress=progress)
        if self.per_char:
            rows = [[v / max(len(o), 1) for v, o in zip(row, ex.options)] for row, ex in zip(rows, examples)]
        return rows

    def refuses(self, candidate: float, gold: float) -> bool:
        """score(candidate) >= score(gold) - margin, up to float noise (`TOLERANCE`)."""
        return candidate >= gold - self.margin - TOLERANCE

    def judge(self, items: list[tuple[MCExample, list[str]]], progress: bool = False) -> list[list[Verdict]]:
        """Per (question, candidates): a Verdict for each candidate, scored as an option of the
        question beside the gold (the gold first; the scores of each option do not depend on the
        others for lm-eval's RACE prompt and for a multiple-choice head, which reads each option
        alone). A question with no candidate costs nothing."""
        todo = [(n, ex, cands) for n, (ex, cands) in enumerate(items) if cands]
        asked = [MCExample(id=f"{ex.id}/judge", passage=ex.passage, question=ex.question, label=0,
                           options=(ex.answer, *cands)) for _, ex, cands in todo]
        rows = self.option_scores(asked, progress) if asked else []
        out: list[list[Verdict]] = [[] for _ in items]
        for (n, _, _), row in zip(todo, rows):
            gold = row[0]
            out[n] = [Verdict(c, gold, self.refuses(c, gold)) for c in row[1:]]
            self.judged += len(row) - 1
        return out

    def describe(self) -> dict:
        return {"name": self.name, "margin": self.margin,
                "score": "log-likelihood per character" if self.per_char else "option score"}

    def note(self) -> str:
        """What the audit's `not checked:` line says of the judge: its name, margin and, where
        measured at this margin, its recall on the validity corpus (docs/results.md)."""
        said = f"judge {self.name} (margin {self.margin:g}) refused"
        known = RECALL.get(self.name)
        if known and CALIBRATED.get(self.name) == self.margin:
            caught, invalid, wrong, valid = known
            return (f"{said}: at this margin it refused {caught} of the validity corpus's {invalid} second right "
                    f"answers and {wrong} of their {valid} valid twins (docs/results.md)")
        return (f"{said}: its recall at this margin is not measured; measure it with "
                f"`python bench/judge_calibration.py RACE/dev/middle --judge {self.name}` (docs/results.md)")


def load_judge(model: str, margin: float | None = None, *, batch_size: int = 4, bf16: bool | None = False,
               where: str = "judge") -> AnswerabilityJudge:
    """An AnswerabilityJudge for a multiple-choice checkpoint, a built-in reader, a causal-LM folder,
    `smollm2` or a Hub name (`make_mc_scorer` tells them apart by their config)."""
    check_judge_config(model, margin, where)
    scorer = make_mc_scorer(model, batch_size=batch_size, max_length=None, bf16=bf16, place=True,
                            reader_batch_size=batch_size)
    per_char = isinstance(scorer, CausalLMScorer)
    return AnswerabilityJudge(scorer, checkpoint_name(str(model)), margin_for(model, margin), per_char)
