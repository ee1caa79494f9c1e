"""The settings the distractor attacks share, and the checks of a config before any model loads."""

from __future__ import annotations

from dataclasses import dataclass

from advrace.core.checks.options import DEFAULTS, NEGATED_MODES
from advrace.core.errors import ConfigError
from advrace.core.paths import models_named
from advrace.models.encoders.readers import READERS
from advrace.models.judge import REFUSAL_RATE, check_judge_config


@dataclass(frozen=True)
class DistractorAttackConfig:
    model: str = ""  # the checkpoint folder (or a Hub name, online)
    shuffle: bool = False  # True: options in a seeded random order; False: the answer keeps its slot
    max_overlap_answer: float = DEFAULTS["max_overlap_answer"]  # the largest share of a candidate's words in the answer
    batch_size: int = 16
    # False: fp32, the same candidates on any machine; True: bf16 autocast (faster on GPUs);
    # None: bf16 where the device computes it natively, so the split depends on the hardware
    bf16: bool | None = False
    match_answer_format: bool = True  # capitalise and end new distractors like the answer
    # The validity checks (advrace.core.checks.options; docs/attacks/distractors.md, "Distractor
    # filters"), applied to the candidates before choosing, in that order; these settings are the
    # audit's too.
    # The MiniLM cosine with the answer from which a candidate is a paraphrase of it (None: no test).
    max_answer_cosine: float | None = DEFAULTS["max_answer_cosine"]
    reject_stated_in_passage: bool = DEFAULTS["reject_stated_in_passage"]  # "which is true?": no passage sentence
    min_grounded_share: float = DEFAULTS["min_grounded_share"]  # of a candidate's content words in passage + question
    reject_form_giveaways: bool = DEFAULTS["reject_form_giveaways"]  # case, final stop or length unlike the options
    # A NOT/EXCEPT question ("Which is NOT an advantage of Weibo?"): "keep" its options (counted);
    # "stated": new distractors only where the passage states them (docs/attacks/distractors.md,
    # "Negated questions").
    negated_questions: str = DEFAULTS["negated_questions"]
    # A reader that re-ranks the candidates that passed (its highest-scoring first): a built-in
    # (`sliding-window`, `sliding-window:distance`, `similarity`) or a multiple-choice checkpoint.
    select_with: str | None = None
    select_with_pool: int = 20  # how many of the best-ranked passing candidates the reader scores
    select_with_max_length: int = 512  # tokens per option, for a checkpoint reader
    # An answerability judge (advrace.models.judge): a multiple-choice checkpoint or a causal LM (folder
    # or Hub name), scored in fp32, that refuses a candidate it rates at least as likely as the gold,
    # less its margin: `judge_margin` (on its own scale, 0 or more) or, when None, the largest margin
    # that refuses at most `judge_refusal_rate` of the attacked questions' own distractors.
    judge: str | None = None
    judge_margin: float | None = None
    judge_refusal_rate: float = REFUSAL_RATE


# Config keys that decide which candidates are kept, not which the model proposes.
SELECTION_FIELDS = frozenset({"shuffle", "max_overlap_answer", "match_answer_format", "max_answer_cosine",
                              "reject_stated_in_passage", "min_grounded_share", "reject_form_giveaways",
                              "negated_questions",
                              "select_with", "select_with_pool", "select_with_max_length", "judge", "judge_margin",
                              "judge_refusal_rate",
                              "max_overlap_each_other", "min_jaccard_distance"})


def check_filters(cfg: DistractorAttackConfig, what: str) -> None:
    """A clear error for a filter, reader or judge setting no attack can use (`what` names the attack)."""
    if cfg.max_answer_cosine is not None and not -1.0 <= cfg.max_answer_cosine <= 1.0:
        raise ConfigError(f"{what}: max_answer_cosine must be between -1 and 1, or null")
    if not 0.0 <= cfg.min_grounded_share <= 1.0:
        raise ConfigError(f"{what}: min_grounded_share must be between 0 and 1 (0: no grounding filter)")
    if cfg.select_with is not None and not all(models_named(cfg.select_with)):
        raise ConfigError(f"{what}: select_with must name a reader ({', '.join(READERS[:3])}) "
                          "or a multiple-choice checkpoint folder, or several separated by commas, "
                          "or be null")
    if cfg.negated_questions not in NEGATED_MODES:
        raise ConfigError(f"{what}: negated_questions must be one of {', '.join(NEGATED_MODES)}, "
                          f"not {cfg.negated_questions!r}")
    if cfg.select_with_pool < 1 or cfg.select_with_max_length < 8:
        raise ConfigError(f"{what}: select_with_pool must be at least 1 and select_with_max_length at least 8")
    check_judge_config(cfg.judge, cfg.judge_margin, what, refusal_rate=cfg.judge_refusal_rate)
