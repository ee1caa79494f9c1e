"""An answerability judge: refuses a new distractor that a model rates as good an answer as the gold.

No word or cosine check separates a second right answer in other words ("Beijing" for "China",
"at his friends house" for "at Peter's friend's house") from a wrong option; a reader can. The
judge scores the gold and each candidate as answers to the question given the passage, with the
project's own scorers (`advrace.models.encoders.mc_scoring.make_mc_scorer`: a multiple-choice
checkpoint's option logits, or a causal LM's per-option log-likelihood after lm-evaluation-harness's
RACE prompt, divided by the option's characters as `acc_norm` does), and refuses a candidate when

    score(candidate) >= score(gold) - margin

The gold restated (the candidate is the gold's own text, so the two scores are equal) is refused
only when margin >= 0: a judge whose margin is negative refuses nothing it rates at most as likely
as the gold, and judges nothing. The margin is on the model's own scale, so it is calibrated on the
questions being judged (`calibrate_on`): the largest margin at which the judge refuses at most
`judge_refusal_rate` (2%) of their own original distractors, which are wrong by construction. A
judge that rates more of them at least as likely as the gold calibrates below 0, and is refused as
too weak to judge (`JudgeTooWeak`). SmolLM2-135M and the built-in readers are that weak on RACE
(`bench/judge_calibration.py`, docs/results.md), and are refused by name before anything is loaded.

The judge is a check of the shared registry (advrace.core.checks): `AnswerabilityCheck`, named
`judge`, a batched check of new distractors that runs after the others, on where the settings name a
judge (`judge:` in a DE or DG config, `advrace audit --judge`), so the attacks and the audit run it
as they run every other check.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field

from advrace.core.checks import Refusal, register
from advrace.core.checks.options import OptionCheck
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.numbers import DIGITS, significant
from advrace.core.paths import looks_like_model_name
from advrace.models.decoders.llm_scoring import CausalLMScorer
from advrace.models.encoders.mc_scoring import make_mc_scorer
from advrace.models.encoders.readers import is_builtin_reader
from advrace.models.protocol.acc_norm import per_character
from advrace.models.runtime.loading import SMOLLM2, checkpoint_name
from advrace.models.runtime.sharding import map_sharded

# The judge check's flag, and the count key of what it refuses (provenance and stats.json).
JUDGED = "judged a right answer"
# The largest share of the judged questions' own distractors that the calibrated margin refuses.
REFUSAL_RATE = 0.02
# The share of RACE dev-middle's own distractors (400 seeded questions, 1,200 distractors) that each
# offline model rates at least as likely as the gold (bench/judge_calibration.py, docs/results.md):
# far above REFUSAL_RATE, so the margin that spares 98% of them is negative.
TOO_WEAK: dict[str, float] = {SMOLLM2: 0.355, "similarity": 0.337, "sliding-window": 0.49}
# One text scored twice (as the gold and as a candidate) differs in its last bits with its place in a
# batch and with torch's thread count (SmolLM2 in fp32: 1.7e-6 of the score): scores this close,
# relative to the larger of them and to the scale of the judge's scores, count as equal. In bf16 the
# last bits are 2^-8 of the value, hence the wider tolerance; the attacks' judge scores in fp32.
RELATIVE_TOLERANCE = 1e-4
BF16_RELATIVE_TOLERANCE = 2.0 ** -6

WHAT_WOULD_DO = ("a judge that answers these questions better than the models under test: a multiple-choice "
                 "checkpoint trained on RACE (`advrace train`) or a larger causal LM by Hub name (online); or "
                 "remove the judge and validate the split with `advrace human-eval` (docs/audit.md, "
                 "'The answerability judge')")


class JudgeTooWeak(ConfigError):
    """A judge whose margin cannot refuse the gold restated: it would judge nothing."""


def check_judge_config(judge: str | None, margin: float | None, where: str, folder: str | None = None,
                       refusal_rate: float = REFUSAL_RATE) -> None:
    """A clear error for a judge that cannot be used, before any model is loaded: a local folder
    that does not exist, a model known to be too weak, a margin that cannot refuse the gold
    restated, or a refusal rate that is not a share."""
    if judge is None:
        return
    if not isinstance(judge, str) or not judge.strip():
        raise ConfigError(f"{where}: judge must name a model (a multiple-choice checkpoint folder, a causal-LM "
                          "folder or a Hub name), or be null")
    weak = too_weak_by_name(judge)
    if weak:
        raise JudgeTooWeak(f"{where}: judge {judge}: {weak}; give {WHAT_WOULD_DO}")
    path = judge if folder is None or os.path.isabs(judge) else os.path.join(folder, judge)
    if not os.path.isdir(os.path.expanduser(path)) and not looks_like_model_name(judge, folder):
        raise ConfigError(f"{where}: judge {judge}: no such folder; give a multiple-choice checkpoint folder "
                          "(`advrace train`), a causal-LM folder (save_pretrained) or a Hub name, "
                          "or remove the judge key")
    if margin is not None and not (isinstance(margin, (int, float)) and math.isfinite(margin) and margin >= 0):
        raise JudgeTooWeak(f"{where}: judge_margin {margin!r}: a margin below 0 cannot refuse even the gold "
                           "restated (its score is the gold's), so the judge would judge nothing; give a margin of "
                           "0 or more, or none to calibrate it on the questions judged")
    if not (isinstance(refusal_rate, (int, float)) and 0 <= refusal_rate < 1):
        raise ConfigError(f"{where}: judge_refusal_rate {refusal_rate!r} must be a share from 0 up to (not "
                          f"including) 1; the default, {REFUSAL_RATE}, refuses at most 2% of the questions' own "
                          "distractors")


def too_weak_by_name(judge: str) -> str | None:
    """Why a built-in model cannot judge (None for any other): the bench's figure, or for a
    built-in reader that it matches the options to the passage and answers no question."""
    if judge in TOO_WEAK:
        return (f"too weak to judge: it rates {TOO_WEAK[judge]:.1%} of RACE dev-middle's own distractors at least as "
                "likely as the gold, so a margin that spares 98% of them is below 0, where it cannot refuse even "
                "the gold restated (docs/results.md, bench/judge_calibration.py)")
    if is_builtin_reader(judge):
        return ("too weak to judge: a built-in reader scores how well an option matches the passage, and RACE's "
                "distractors are written from the passage")
    return None


def floor_significant(x: float, digits: int = DIGITS) -> float:
    """`x` to `digits` significant digits, never above it: a calibrated margin as the manifest
    records it and the judge uses it (rounding down refuses no more than calibrated)."""
    s = significant(x, digits)
    if s > x:
        unit = 10.0 ** (math.floor(math.log10(abs(s))) - digits + 1)
        s = significant(s - unit, digits)
    return s


@dataclass(frozen=True)
class Calibration:
    """The margin a judge uses and what it refuses of the judged questions' own distractors:
    `calibrated` False when the margin was given (`judge_margin`)."""

    margin: float
    calibrated: bool
    target: float  # the largest share of the distractors to refuse (`judge_refusal_rate`)
    distractors: int
    refused: int

    @property
    def refusal_rate(self) -> float:
        return self.refused / self.distractors if self.distractors else 0.0

    @property
    def too_weak(self) -> bool:
        """The margin cannot refuse the gold restated."""
        return self.margin < 0

    def describe(self) -> dict:
        return {"margin": self.margin, "calibrated": self.calibrated, "target_refusal_rate": self.target,
                "distractors": self.distractors, "refused": self.refused,
                "refusal_rate": significant(self.refusal_rate)}

    def said(self) -> str:
        """The margin and what it refuses, as the audit's lines say it."""
        refused = (f"{self.refused} ({self.refusal_rate:.1%}) of the judged questions' {self.distractors} original "
                   "distractors")
        if self.calibrated:
            return f"margin {self.margin:g}, calibrated to refuse at most {self.target * 100:g}%: it refuses {refused}"
        return f"margin {self.margin:g}, given: it refuses {refused}"


@dataclass
class Verdict:
    """One candidate's judgement: its score, the gold's, and whether the judge refuses it."""

    candidate: float
    gold: float
    refused: bool


@dataclass
class AnswerabilityJudge:
    """A scorer (anything with `predict_mc`) and the refusal rule; `per_char`: divide each
    option's score by its characters (a causal LM's log-likelihood, lm-eval's acc_norm).
    `margin` None: calibrate it (`calibrate_on`) before judging; `relative_tolerance`: scores this
    close, relative to their scale, count as equal."""

    scorer: object
    name: str
    margin: float | None
    per_char: bool = False
    relative_tolerance: float = RELATIVE_TOLERANCE
    given_margin: float | None = None  # `judge_margin`: used as it is, not calibrated
    target: float = REFUSAL_RATE  # `judge_refusal_rate`: what the calibrated margin may refuse
    scale: float = 0.0  # the mean magnitude of the scores calibrated on: the tolerance's floor
    calibration: Calibration | None = None
    judged: int = field(default=0, init=False)
    _calibrated_on: int | None = field(default=None, init=False, repr=False)

    def option_scores(self, examples: list[MCExample], progress: bool = False) -> list[list[float]]:
        """Each option's score on the judge's scale (the rule compares these)."""
        rows = self.scorer.predict_mc(examples, desc="judge", progress=progress)
        if self.per_char:
            rows = [per_character(row, ex.options) for row, ex in zip(rows, examples)]
        return rows

    def tolerance(self, candidate: float, gold: float) -> float:
        return self.relative_tolerance * max(abs(candidate), abs(gold), self.scale)

    def refuses(self, candidate: float, gold: float, margin: float | None = None) -> bool:
        """score(candidate) >= score(gold) - margin, scores within the tolerance counting as equal."""
        margin = self.margin if margin is None else margin
        if margin is None:
            raise ConfigError(f"judge {self.name}: no margin; calibrate it on the questions judged (calibrate_on) "
                              "or give one")
        return candidate - gold >= -margin - self.tolerance(candidate, gold)

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

    def distractor_scores(self, examples: list[MCExample], progress: bool = False) -> list[list[tuple[float, float]]]:
        """Per question, (score of the distractor, score of the gold) for each of its own distractors."""
        rows = self.option_scores(examples, progress)
        return [[(row[k], row[ex.label]) for k in range(len(ex.options)) if k != ex.label]
                for ex, row in zip(examples, rows)]

    def calibrate(self, pairs: list[tuple[float, float]], target: float = REFUSAL_RATE,
                  margin: float | None = None) -> Calibration:
        """The margin (`margin`, or the largest at which the judge refuses at most `target` of the
        distractors, 4 significant digits rounded down) and what it refuses of these
        (distractor, gold) scores; the judge keeps both. Never raises: `calibrate_on` does."""
        self.scale = sum(abs(s) for pair in pairs for s in pair) / (2 * len(pairs)) if pairs else 0.0
        calibrated = margin is None
        if calibrated:
            gaps = sorted((d - g for d, g in pairs), reverse=True)
            allowed = math.floor(target * len(gaps) + 1e-9)
            # above every pair's tolerance, so that the gap `allowed` and all below it are kept
            guard = 2 * self.relative_tolerance * max((abs(s) for pair in pairs for s in pair), default=0.0)
            margin = floor_significant(-(gaps[allowed] + guard)) if gaps else 0.0
        margin = float(margin)
        refused = sum(self.refuses(d, g, margin) for d, g in pairs)
        self.margin = margin
        self.calibration = Calibration(margin, calibrated, target, len(pairs), refused)
        return self.calibration

    def calibrate_on(self, examples: list[MCExample], *, where: str = "judge", state=None,
                     progress: bool = False) -> Calibration:
        """Calibrate on the questions' own distractors (scored across `state`'s processes, so every
        process comes to the same margin), or with a `given_margin` measure what it refuses of them;
        JudgeTooWeak when the calibrated margin cannot refuse the gold restated. The same questions
        again (a release's DE and DG splits, from one source) are not scored again."""
        key = hash(tuple((ex.id, ex.passage, ex.question, ex.options, ex.label) for ex in examples))
        if self.calibration is not None and key == self._calibrated_on:
            return self.calibration
        rows = map_sharded(lambda shard: self.distractor_scores(shard, progress), examples, state)
        pairs = [p for row in rows for p in row]
        if not pairs:
            raise ConfigError(f"{where}: judge {self.name}: no original distractors to calibrate on")
        found = self.calibrate(pairs, self.target, self.given_margin)
        if found.too_weak:
            above = sum(self.refuses(d, g, 0.0) for d, g in pairs)
            raise JudgeTooWeak(
                f"{where}: judge {self.name} is too weak to judge: it rates {above} of the {len(pairs)} original "
                f"distractors of the questions judged ({above / len(pairs):.1%}) at least as likely as the gold, so "
                f"the margin that refuses at most {self.target * 100:g}% of them is {found.margin:g}, below 0, where it "
                f"cannot refuse even the gold restated. Give {WHAT_WOULD_DO}")
        self._calibrated_on = key
        return found

    def describe(self) -> dict:
        return {"name": self.name, "margin": self.margin,
                "score": "log-likelihood per character" if self.per_char else "option score",
                **({"calibration": self.calibration.describe()} if self.calibration else {})}

    def note(self) -> str:
        """What the audit's `not checked:` line says of the judge: its name, margin and what that
        refuses of the judged questions' own distractors. Its recall on second right answers is
        measured only by the bench, on the validity corpus the tests ship."""
        said = self.calibration.said() if self.calibration else f"margin {self.margin:g}"
        return (f"judge {self.name} ({said}) refused; its recall on second right answers is not measured here: "
                f"`python bench/judge_calibration.py RACE/dev/middle --judge MODEL` (docs/results.md)")


def make_judge(model: str, margin: float | None = None, *, batch_size: int = 4, bf16: bool | None = False,
               refusal_rate: float = REFUSAL_RATE) -> AnswerabilityJudge:
    """An AnswerabilityJudge for any model `make_mc_scorer` scores, unchecked (the bench measures the
    weak ones with it); its tolerance follows the precision it scores in."""
    scorer = make_mc_scorer(model, batch_size=batch_size, max_length=None, bf16=bf16, place=True,
                            reader_batch_size=batch_size)
    per_char = isinstance(scorer, CausalLMScorer)
    tolerance = BF16_RELATIVE_TOLERANCE if getattr(scorer, "bf16", False) else RELATIVE_TOLERANCE
    margin = None if margin is None else float(margin)
    return AnswerabilityJudge(scorer, checkpoint_name(str(model)), margin, per_char, tolerance,
                              given_margin=margin, target=refusal_rate)


def load_judge(model: str, margin: float | None = None, *, batch_size: int = 4, bf16: bool | None = False,
               where: str = "judge", refusal_rate: float = REFUSAL_RATE) -> AnswerabilityJudge:
    """An AnswerabilityJudge for a multiple-choice checkpoint, a causal-LM folder or a Hub name,
    after `check_judge_config`; with no `margin`, calibrate it (`calibrate_on`) before judging.
    Scored in fp32 unless `bf16` says otherwise: the attacks' judge always is."""
    check_judge_config(model, margin, where, refusal_rate=refusal_rate)
    return make_judge(model, margin, batch_size=batch_size, bf16=bf16, refusal_rate=refusal_rate)


def built_judge_note(judge: str, margin: float | None) -> str:
    """What the `not checked:` line says of the judge a split was built with (its config's `judge`)."""
    if too_weak_by_name(judge) or (margin is not None and margin < 0):
        return (f"; the attack's judge {judge} was too weak to refuse any: at its margin it could not refuse even "
                "the gold restated (docs/audit.md, 'The answerability judge'), so the split is not judged")
    said = "its margin calibrated on the split's own distractors" if margin is None else f"margin {margin:g}"
    return (f", beyond what the attack's judge {judge} ({said}; the manifest's `judge` says what it refused of "
            "them) refused")


def as_judged_items(subjects: list) -> list[list]:
    """Subjects grouped into the multiple-choice items the judge scores beside the gold: consecutive
    subjects of one question beside the same options (an attack's candidates for it) as one item; a
    built distractor, which sits beside options of its own, alone with the gold."""
    items: list[list] = []
    for subject in subjects:
        if items and items[-1][0].example is subject.example and items[-1][0].others == subject.others:
            items[-1].append(subject)
        else:
            items.append([subject])
    return items


@register
class AnswerabilityCheck(OptionCheck):
    """The judge as a check of new distractors: batched, and registered after the word and encoder
    checks, so it judges what they left. On where the settings name a judge (an attack's `judge:`,
    the audit's `--judge`); it asks the judge the caller loaded, `ctx.judge`."""

    name, flag = "judge", JUDGED

    def enabled(self, settings):
        return bool(settings) and settings.get("judge") is not None

    def prepare(self, examples, ctx, settings, *, where, state=None):
        """The margin, from the split's questions' own distractors, before it judges any candidate."""
        ctx.judge.calibrate_on(examples, where=where, state=state, progress=getattr(ctx, "progress", False))

    def refuse_many(self, subjects, ctx, settings):
        judge, items = ctx.judge, as_judged_items(list(subjects))
        said = judge.judge([(item[0].example, [s.text for s in item]) for item in items],
                           getattr(ctx, "progress", False))
        return [Refusal(JUDGED, f"{s.text!r} scored {v.candidate:.4g} against the gold {s.example.answer!r}'s "
                                f"{v.gold:.4g} by {judge.name} (margin {judge.margin:g})") if v.refused else None
                for item, verdicts in zip(items, said) for s, v in zip(item, verdicts)]

    def refuse(self, subject, ctx, settings):
        return self.refuse_many([subject], ctx, settings)[0]

    def not_checked_note(self, settings, built, ctx):
        """With the audit's judge: its name, margin and what that refuses; else the split's own
        judge, which refused some while the split was built."""
        if self.enabled(settings):
            return f", beyond what {ctx.judge.note()}"
        if (built or {}).get("judge"):
            return built_judge_note(built["judge"], built.get("judge_margin"))
        return ""
