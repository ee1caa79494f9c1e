"""A batch's candidate distractors through the shared validity checks (advrace.core.checks;
docs/attacks/distractors.md, "Distractor filters"), the same objects `advrace audit` asks of a
built split."""

from __future__ import annotations

import dataclasses
from collections import Counter
from dataclasses import dataclass

from advrace.core.checks import OPTION, QUESTION, Subject, TextContext, checks_for, first_refusal
from advrace.core.checks.option_identity import same_option
from advrace.core.distractors import match_format
from advrace.models.encoders.paraphrase import paraphrase_cosines


@dataclass(frozen=True)
class ChecksInUse:
    """The checks an attack's config turns on (question, single option, batched option), their
    context and the settings they read."""

    questions: list
    single: list
    batched: list
    ctx: TextContext
    settings: dict

    def showing_progress(self, progress: bool) -> "ChecksInUse":
        """The same checks, a model among them showing a progress bar while it scores, or not."""
        return dataclasses.replace(self, ctx=dataclasses.replace(self.ctx, progress=progress))


def checks_in_use(name: str, config, resources, judge=None) -> ChecksInUse:
    """The registered checks for the attack `name` that `config` turns on, asking `judge` (the
    loaded AnswerabilityJudge) where `judge:` turns its check on; a third-party distractor attack,
    which no check names, is checked as DG is."""
    settings = dataclasses.asdict(config)
    name = name if checks_for(name, OPTION) else "distractor_generation"
    on = lambda scope: [c for c in checks_for(name, scope) if c.enabled(settings)]  # noqa: E731
    options = on(OPTION)
    batched = [c for c in options if c.batched]
    ctx = TextContext(stopwords=frozenset(resources.stopwords), cosine_fn=paraphrase_cosines,
                      same_meaning_fn=resources.same_meaning, known_word_fn=resources.known_word, judge=judge)
    return ChecksInUse(on(QUESTION), [c for c in options if c not in batched], batched, ctx, settings)


def vet_candidates(examples: list, ranked: list[list[str]], checks: ChecksInUse,
                   match_answer_format: bool) -> list[dict]:
    """Per example the raw `candidates`, the `passed` ones (formatted) in the order to try, the
    `rejected` counts by reason and the reason a question keeps its options (`refused`). Each
    candidate is counted under the first check that refuses it, the word checks in their order
    first; the batched checks (the encoder's cosine, then the judge's) then run in one batch each
    over what they left."""
    vetted = []
    for ex, cands in zip(examples, ranked):
        refused = first_refusal(checks.questions, Subject(ex), checks.ctx, checks.settings)
        rejected: Counter = Counter()
        passed = [] if refused else word_checks(ex, cands, rejected, checks, match_answer_format)
        vetted.append({"candidates": list(cands), "rejected": rejected, "passed": passed,
                       "refused": refused[1] if refused else None})
    for check in checks.batched:
        subjects = [Subject(ex, t) for ex, v in zip(examples, vetted) for t in v["passed"]]
        verdicts = iter(check.refuse_many(subjects, checks.ctx, checks.settings))
        for v in vetted:
            whys = [next(verdicts) for _ in v["passed"]]
            v["rejected"].update(str(w) for w in whys if w)
            v["passed"] = [t for t, w in zip(v["passed"], whys) if not w]
    for v in vetted:
        v["rejected"] = {k: n for k, n in sorted(v["rejected"].items()) if n}
    return vetted


def word_checks(example, candidates: list[str], rejected: Counter, checks: ChecksInUse,
                match_answer_format: bool) -> list[str]:
    """The candidates (spaces normalised, formatted like the answer) that no unbatched check
    refuses beside the question's original distractors."""
    passed, others = [], tuple(example.distractors)
    for raw in candidates:
        text = " ".join(raw.split())
        if match_answer_format:
            text = match_format(text, example.answer, example.passage)
        refused = first_refusal(checks.single, Subject(example, text, others), checks.ctx, checks.settings)
        if refused:
            rejected[refused[1]] += 1
        else:
            passed.append(text)
    return passed


def distinct(candidates: list[str]) -> list[str]:
    """The candidates but for those that repeat an earlier one but for articles or a subject
    pronoun ("a millionaire" after "the millionaire"): the audit's `same_as_option` among the
    new distractors themselves."""
    kept: list[str] = []
    for cand in candidates:
        if not any(same_option(cand, k) for k in kept):
            kept.append(cand)
    return kept
