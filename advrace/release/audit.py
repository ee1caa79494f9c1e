"""The audit: does every example of a split keep its gold answer the one right answer?

Run on every split at the end of `advrace build` (counts in stats.json and the card) and on any
release with `advrace audit`. Two kinds of checks:

- generic, for every attack: replaying the example's provenance edits on its source example must
  give the example (by characters, whitespace aside: inserting at "you.It" changes nothing), and
  the gold answer must be the same text;
- by attack (`CHECKS`, extensible with `register_checks`): an inserted sentence that states a
  gold answer, a swap that moves a first or last letter or touches a gold span, SQuAD sentences
  with word forms no lexicon knows or a wh-word left in; and the validity checks the attacks
  themselves apply while building (`advrace.core.checks`: new distractors, negated questions,
  inserted sentences that only paraphrase or restate the question), with the split's own config.

A check returns `(index, check, detail)` for each flagged example of a split, where `index` is
the example's position; the cosine of distractor and answer is computed in one batch per split.
"""

from __future__ import annotations

import dataclasses
import re
import statistics
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterable

from advrace.core.checks import OPTION, QUESTION, REGISTRY, SENTENCE, Subject, checks_for
from advrace.core.checks.grammar import FLUENCY, KINDS as GRAMMAR_KINDS, grammar_problems
from advrace.core.errors import AdvraceError, ConfigError
from advrace.core.examples import MCExample
from advrace.core.numbers import share_of
from advrace.core.provenance import (AdversarialSentence, AttackSummary, FieldsRemoved, OptionsReplaced,
                                     SentencesInserted, TextReplaced)
from advrace.core.text import WORD_RE
from advrace.core.checks.option_identity import option_key
from advrace.models import judge as _judge  # noqa: F401  registers the `judge` check (`--judge`; a split's own judge)
from advrace.release.records import NO_ATTACK, read_split
from advrace.release.runner import ORIGINAL
from advrace.release.verify import load_manifest

GOLD_CHANGED = "gold answer changed"
TEXT_CHANGED = "text changed outside the edits"
GOLD_IN_INSERT = "inserted text contains a gold answer"
LETTER_MOVED = "first or last letter moved"
OPTION_CHANGED = "option changed"
SWAP_IN_GOLD = "swap inside a gold span"
# the shared checks' labels, by the names the tests and docs/audit.md use
PARAPHRASE = REGISTRY["near_meaning"].flag
EQUIVALENT = REGISTRY["answer_equivalent"].flag
STATED = REGISTRY["stated_in_passage"].flag
DUPLICATE = REGISTRY["same_as_option"].flag
GOLD_REFERS = REGISTRY["answer_names_options"].flag
FORM = REGISTRY["form"].flag
ECHO = REGISTRY["echoes_question"].flag
NEGATED = REGISTRY["negated_question"].flag
NEGATION_HINT = REGISTRY["negation_hint"].flag
UNGRAMMATICAL = REGISTRY["grammar"].flag
UNKNOWN_WORD = "word form not in the lexicon"
WH_LEFT = "wh-word left in a statement"

Flag = tuple[int, str, str]
Check = Callable[[list, list, object], Iterable[Flag]]


def _nows(text: str) -> str:
    return re.sub(r"\s+", "", text)


def _new_records(source, example) -> list:
    """The provenance records the attack added on top of its source example."""
    return list(example.provenance[len(source.provenance):])


# --------------------------------------------------------------------------- generic


def _replay(source, records: list) -> dict:
    """The source's fields after the recorded edits, as far as the records say; a record that
    does not fit the text it claims to edit is reported as the string under '_problem'."""
    mc = isinstance(source, MCExample)
    fields = {"question": source.question, source.passage_field: source.passage_text}
    options = list(source.options) if mc else None
    for rec in records:
        if isinstance(rec, TextReplaced) and rec.field in fields:
            text, out, last = fields[rec.field], [], 0
            for e in sorted(rec.replacements, key=lambda e: e.start):
                if text[e.start:e.end] != e.old:
                    return {"_problem": f"{rec.field}: the edit at {e.start} does not find {e.old!r}"}
                out += [text[last:e.start], e.new]
                last = e.end
            fields[rec.field] = "".join(out) + text[last:]
        elif isinstance(rec, SentencesInserted) and rec.field in fields:
            text, by_at = fields[rec.field], {}
            for s in rec.sentences:
                by_at.setdefault(s.at, []).append(s.text)
            for at in sorted(by_at, reverse=True):
                text = text[:at] + " " + " ".join(by_at[at]) + " " + text[at:]
            fields[rec.field] = text
        elif isinstance(rec, FieldsRemoved):
            for name in rec.fields:
                fields[name] = ""
        elif isinstance(rec, OptionsReplaced) and mc:
            options = list(rec.new)
    fields["options"] = options
    return fields


def check_edits(sources: list, examples: list, ctx) -> Iterable[Flag]:
    """Every example is its source with exactly the recorded edits, and the same gold answer."""
    for i, (src, ex) in enumerate(zip(sources, examples)):
        mc = isinstance(ex, MCExample)
        if mc and " ".join(ex.answer.split()) != " ".join(src.answer.split()):
            yield i, GOLD_CHANGED, f"{src.answer!r} became {ex.answer!r}"
        if not mc:
            if sorted(a.text for a in ex.answers) != sorted(a.text for a in src.answers):
                yield i, GOLD_CHANGED, "the answer texts differ from the source's"
            bad = [a.text for a in ex.answers if ex.context[a.start:a.end] != a.text]
            if bad:
                yield i, GOLD_CHANGED, f"the context no longer holds {bad[0]!r} at its offset"
        replayed = _replay(src, _new_records(src, ex))
        if "_problem" in replayed:
            yield i, TEXT_CHANGED, replayed["_problem"]
            continue
        for name, text in replayed.items():
            if name == "options":
                if mc and list(ex.options) != text:
                    yield i, TEXT_CHANGED, "options differ from the recorded ones"
            elif _nows(getattr(ex, name)) != _nows(text):
                yield i, TEXT_CHANGED, f"{name} differs from the source with the recorded edits"


# --------------------------------------------------------------------------- inserted sentences


def _inserted(source, example) -> list[str]:
    return [s.text for rec in _new_records(source, example) if isinstance(rec, SentencesInserted)
            for s in rec.sentences]


def _gold_texts(example) -> list[str]:
    return [example.answer] if isinstance(example, MCExample) else [a.text for a in example.answers]


def check_gold_in_insert(sources: list, examples: list, ctx) -> Iterable[Flag]:
    from advrace.attacks.sentences.refusals import contains_gold  # deferred for start-up time: importing the attacks loads every attack module
    from advrace.attacks.sentences.readability import contains_answer

    for i, (src, ex) in enumerate(zip(sources, examples)):
        for sentence in _inserted(src, ex):
            for gold in _gold_texts(src):
                found = contains_gold(sentence, gold) if isinstance(ex, MCExample) else contains_answer(sentence, gold)
                if found:
                    yield i, GOLD_IN_INSERT, f"{sentence!r} contains {gold!r}"
                    break


def _adversarial_sentences(source, example) -> list[AdversarialSentence]:
    """The adversarial sentences the attack's summaries record."""
    return [s for rec in _new_records(source, example) if isinstance(rec, AttackSummary) for s in rec.sentences]


def check_sentences(sources: list, examples: list, ctx) -> Iterable[Flag]:
    """The shared sentence checks (advrace.core.checks.sentences) on every inserted sentence."""
    checks = [c for c in checks_for(ctx.attack, SENTENCE) if c.enabled(ctx.settings)]
    ctx.resources.prepare_parses([s.sentence for src, ex in zip(sources, examples)
                                  for s in _adversarial_sentences(src, ex)])  # one batch for the grammar check
    for i, (src, ex) in enumerate(zip(sources, examples)):
        for sentence in _adversarial_sentences(src, ex):
            subject = Subject(src, sentence.sentence, record=sentence)
            for check in checks:
                why = check.refuse(subject, ctx, ctx.settings)
                if why:
                    yield i, check.flag, f"{sentence.sentence!r}: {why}"


def check_lexicon(sources: list, examples: list, ctx) -> Iterable[Flag]:
    """Generated SQuAD sentences: every word form known, no wh-word left asking."""
    from advrace.attacks.sentences import readability  # deferred for start-up time: importing the attacks loads every attack module

    for i, (src, ex) in enumerate(zip(sources, examples)):
        if isinstance(ex, MCExample):
            continue
        known = {w.lower() for text in (src.context, src.question) for w in WORD_RE.findall(text)}
        for sentence in _inserted(src, ex):
            unknown = readability.unknown_word_forms(sentence, known, ctx.resources)
            if unknown:
                yield i, UNKNOWN_WORD, f"{', '.join(unknown)} in {sentence!r}"
            wh = readability.leftover_wh_words(sentence, ctx.resources)
            if wh:
                yield i, WH_LEFT, f"{wh[0]!r} in {sentence!r}"


# A sentence far less fluent than its split's others: below the median by more than FLUENCY_K
# median absolute deviations of the split's mean token log-probabilities (robust to the outliers it
# looks for). k = 3 was read on a 200-question XQuAD-en build (docs/audit.md, "Grammar"): at k = 2
# most sentences flagged were English with rare names in them. Only where the split has
# FLUENCY_MIN sentences, for a median and a deviation worth the name.
FLUENCY_K = 3.0
FLUENCY_MIN = 40


def fluency_outliers(scores: list[float], k: float = FLUENCY_K) -> tuple[float, float, float, list[int]]:
    """(median, median absolute deviation, threshold, positions below it) of a split's scores."""
    median = statistics.median(scores)
    mad = statistics.median(abs(v - median) for v in scores)
    floor = median - k * mad
    # no spread, no outlier: half the split scoring alike says nothing of the rest
    return median, mad, floor, [i for i, v in enumerate(scores) if v < floor] if mad > 0 else []


def fluency_model(settings: dict) -> str:
    """The causal LM that scores a split's fluency: the split's `fluency_model`, else its
    `answer_model` (the SQuAD attacks' own, which chose the sentences); "" for none."""
    return settings.get("fluency_model", settings.get("answer_model")) or ""


def _fluency_scores(sentences: list[str], ctx) -> tuple[list[float] | None, str]:
    """The sentences' fluency under the split's LM, and the model's name; or None and why not."""
    model = fluency_model(ctx.settings)
    if not model:
        return None, "no language model named (the split's config has no fluency_model or answer_model)"
    if len(sentences) < FLUENCY_MIN:
        return None, f"{len(sentences)} sentences, fewer than {FLUENCY_MIN}"
    from advrace.attacks.sentences.fluency import fluency  # deferred for start-up time (torch)

    try:
        return fluency(model, ctx.settings.get("answer_bf16", False)).scores(sentences), model
    except (AdvraceError, OSError, ImportError) as err:  # no LM here (offline, not installed): say so
        return None, f"{model} could not be loaded ({str(err).splitlines()[0]})"


def check_grammar(sources: list, examples: list, ctx) -> Iterable[Flag]:
    """The grammar check's rate per kind over the split's inserted sentences (its rule problems
    are flagged by `check_sentences`, as the attacks refuse them), and the sentences whose
    language-model fluency is an outlier against the split's own distribution, flagged here; the
    rates go to `ctx.notes["grammar"]` (stats.json, the card)."""
    found = [(i, s.sentence) for i, (src, ex) in enumerate(zip(sources, examples))
             for s in _adversarial_sentences(src, ex)]
    kinds: Counter = Counter()
    bad: set[int] = set()
    for k, (_, sentence) in enumerate(found):
        problems = grammar_problems(ctx.parse(sentence))
        kinds.update(problems)
        if problems:
            bad.add(k)
    scores, model = _fluency_scores([s for _, s in found], ctx)
    fluency = {"scored": False, "why": model}
    if scores is not None:
        median, mad, floor, low = fluency_outliers(scores)
        fluency = {"scored": True, "model": model, "median": median, "mad": mad, "k": FLUENCY_K, "threshold": floor}
        for k in low:
            (i, sentence), v = found[k], scores[k]
            kinds[FLUENCY] += 1
            bad.add(k)
            yield i, FLUENCY, (f"{sentence!r}: mean token log-probability {v:.3g} under {model}, below the "
                               f"split's median {median:.3g} - {FLUENCY_K:g} x its deviation {mad:.3g}")
    ctx.notes["grammar"] = {"sentences": len(found), "flagged": len(bad),
                            "rate": len(bad) / len(found) if found else None,
                            "by_kind": {kind: kinds[kind] for kind in GRAMMAR_KINDS
                                        if kind != FLUENCY or scores is not None},
                            "fluency": fluency}


# --------------------------------------------------------------------------- swaps


def _swap_problem(old: str, new: str) -> bool:
    return len(old) != len(new) or old[:1] != new[:1] or old[-1:] != new[-1:] or sorted(old) != sorted(new)


def check_swaps(sources: list, examples: list, ctx) -> Iterable[Flag]:
    for i, (src, ex) in enumerate(zip(sources, examples)):
        if isinstance(ex, MCExample) and list(ex.options) != list(src.options):
            yield i, OPTION_CHANGED, "the options differ from the source's"
        spans = [] if isinstance(ex, MCExample) else [(a.start, a.end) for a in src.answers]
        for rec in _new_records(src, ex):
            if not isinstance(rec, TextReplaced):
                continue
            for e in rec.replacements:
                if _swap_problem(e.old, e.new):
                    yield i, LETTER_MOVED, f"{e.old!r} -> {e.new!r}"
                if rec.field == "context" and any(e.start < end and start < e.end for start, end in spans):
                    yield i, SWAP_IN_GOLD, f"{e.old!r} -> {e.new!r} at {e.start}"


# --------------------------------------------------------------------------- new distractors


def _new_options(source, example) -> list[tuple[int, str]]:
    old = {option_key(o) for o in source.options}
    return [(i, o) for i, o in enumerate(example.options) if i != example.label and option_key(o) not in old]


def check_options(sources: list, examples: list, ctx) -> Iterable[Flag]:
    """The distractor attacks' own checks (advrace.core.checks.options), with the split's settings:
    each question given new distractors, then each new distractor beside the final options; the
    batched checks (the encoder's cosine, the judge's with `--judge`) run in one batch per split,
    after each has seen the split's source questions (`Check.prepare`)."""
    settings = ctx.settings
    questions = [c for c in checks_for(ctx.attack, QUESTION) if c.enabled(settings)]
    options = [c for c in checks_for(ctx.attack, OPTION) if c.enabled(settings)]
    for check in (*questions, *options):
        check.prepare(sources, ctx, settings, where=f"audit of {ctx.attack!r}")
    batched = [c for c in options if c.batched]
    single = [c for c in options if c not in batched]
    later: list[tuple[int, Subject]] = []
    for i, (src, ex) in enumerate(zip(sources, examples)):
        if not isinstance(ex, MCExample):
            continue
        new = _new_options(src, ex)
        if not new:
            continue
        for check in questions:
            why = check.refuse(Subject(src), ctx, settings)
            if why:
                yield i, check.flag, f"{ex.question!r}: {why}"
        for k, d in new:
            others = tuple(o for j, o in enumerate(ex.options) if j not in (k, ex.label))
            subject = Subject(src, d, others)
            for check in single:
                why = check.refuse(subject, ctx, settings)
                if why:
                    yield i, check.flag, f"{d!r} {why}"
            later.append((i, subject))
    for check in batched:
        for (i, subject), why in zip(later, check.refuse_many([s for _, s in later], ctx, settings)):
            if why:
                yield i, check.flag, getattr(why, "detail", "") or f"{subject.text!r} {why} {subject.example.answer!r}"


# --------------------------------------------------------------------------- the registry

CHECKS: dict[str, list[Check]] = {}


def register_checks(attack: str, *checks: Check) -> None:
    """Audit a (third-party) attack's splits with these checks besides the generic one."""
    CHECKS.setdefault(attack, [])
    CHECKS[attack] += [c for c in checks if c not in CHECKS[attack]]


# what no check of this version sees on an attack's splits: `advrace audit` and the card say so,
# so that a split the audit passes is not taken for a validated one
UNCHECKED: dict[str, tuple[str, ...]] = {}


def register_unchecked(attack: str, *kinds: str) -> None:
    """Name kinds of invalid item that the audit cannot flag on an attack's splits."""
    UNCHECKED[attack] = tuple(dict.fromkeys(UNCHECKED.get(attack, ()) + kinds))


register_checks("charswap", check_swaps)
register_checks("distractor_extraction", check_options)
register_checks("distractor_generation", check_options)
for _name in ("mc_addsent", "addonesent", "addsentmod", "squad_addsent"):
    register_checks(_name, check_gold_in_insert, check_sentences, check_lexicon, check_grammar)
for _name in ("addany", "addcommon"):
    register_checks(_name, check_gold_in_insert)
for _name in ("addonesent", "addsentmod", "squad_addsent"):
    register_unchecked(_name, "a fake answer of the gold's group but of no kind the question takes (a park's name, or "
                       "the answer model's landmark, for a newspaper), and a question whose only change is a verb (or a verb "
                       "the tagger read as a noun) to a near-synonym WordNet does not relate (the asked fact restated with "
                       "another answer)", "a mutation whose only change is a near-synonym WordNet does not relate (flaw -> "
                       "malfunction, city -> town, proclamation -> decree) or a negated antonym of the same referent "
                       "(original -> unoriginal): the asked fact restated with the fake", "broken English the grammar "
                       "rules do not see (a verb the tagger read as a noun, a subject and verb that do not agree, an "
                       "inversion parsed as a copula), and its language-model fluency outliers where the split's config "
                       "names no model or the split has fewer than 40 sentences")
register_unchecked("mc_addsent", "(on RACE) a sentence that answers the question with a distractor: about the passage's own "
                   "author or writer (never replaced, or the same book by its title), with a stand-in that keeps the "
                   "meaning (purpose -> knowledge), an antonym of the word's other sense (find -> lose), a multi-word "
                   "name swapped word by word (\"Canada India\"), or a scanning-error fragment replaced by a word; and "
                   "broken English the grammar rules do not see (no language model scores its fluency unless the "
                   "split's config names a fluency_model)")
register_unchecked("distractor_extraction", "a span that gives the answer's own evidence in other words (a second right answer)")
register_unchecked("distractor_generation", "a new distractor that is a right answer too: the answer in other words "
                   "below the paraphrase threshold, or what the passage says in answer to the question; and one that "
                   "does not fit the question's blank (a clause where it takes a noun phrase)")


# --------------------------------------------------------------------------- running


@dataclass
class AuditContext:
    """What checks share (a `CheckContext`): resources (stopwords, WordNet), the paraphrase
    encoder, and, while one split is audited, its attack's name and settings: the split's own
    config over the attacks' defaults, then `overrides` (for a stricter or looser audit of every
    split, e.g. `{"max_answer_cosine": None}` without the encoder)."""

    resources: object = None
    overrides: dict = field(default_factory=dict)
    attack: str = ""
    settings: dict = field(default_factory=dict)
    _cosines: Callable | None = None
    # an answerability judge (advrace.models.judge.AnswerabilityJudge) that the `judge` check asks of
    # DE and DG splits (`advrace audit --judge`), or None
    judge: object = None
    # what a check reports of the split beyond its flags (check_grammar's rates), for stats.json
    notes: dict = field(default_factory=dict)

    @property
    def stopwords(self):
        return self.resources.stopwords

    def same_meaning(self, word: str, new: str, pos: str | None = None) -> str | None:
        return self.resources.same_meaning(word, new, pos)

    def known_word(self, word: str) -> bool:
        return self.resources.known_word(word)

    def parse(self, text: str):
        return self.resources.parse(text)

    def answer_type(self, text: str, start: int, end: int) -> str:
        from advrace.attacks.squad.fake_answers import answer_type  # deferred for start-up time: it loads every attack

        return answer_type(text, start, end, self.resources)

    def cosines(self, pairs):
        if self._cosines is None:
            from advrace.models.encoders.paraphrase import paraphrase_cosines  # deferred: start-up time (torch)

            self._cosines = paraphrase_cosines
        return self._cosines(pairs)

    def for_split(self, attack: str, config: dict | None) -> "AuditContext":
        """This context for one split: its attack and its config's settings, but the judge that
        `judge` names is this context's (`--judge`), or none: the split's own judged it while it was
        built, and its `not checked:` line names it."""
        settings = {**(config or {}), **self.overrides, "judge": None if self.judge is None else self.judge.name}
        return dataclasses.replace(self, attack=attack, settings=settings, notes={})

    def __post_init__(self):
        if self.resources is None:
            from advrace.resources import get_resources  # deferred: start-up time (spaCy, WordNet)

            self.resources = get_resources()


@dataclass
class SplitAudit:
    attack: str
    checked: int = 0
    flags: list = field(default_factory=list)  # (index, id, check, detail)
    unchecked: tuple[str, ...] = ()
    # how many questions the split's attack changed (the manifest's `perturbed`), of `count`;
    # None when not known (a split audited while building). Not part of `counts()` (stats.json).
    perturbed: int | None = None
    count: int | None = None
    # the grammar check's rates over the split's inserted sentences (check_grammar), or None
    grammar: dict | None = None

    def share(self) -> str:
        """The attacked share as `advrace audit` prints it: "34 of 40 (85%)"; "?" when unknown.
        The percent is rounded down, so a split under half never reads as 50%."""
        if self.perturbed is None or not self.count:
            return "?"
        return share_of(self.perturbed, self.count)

    @property
    def flagged_indices(self) -> dict[int, str]:
        """The first check that flagged each flagged example, by position."""
        out: dict[int, str] = {}
        for index, _, check, _ in self.flags:
            out.setdefault(index, check)
        return out

    def counts(self) -> dict:
        by_check = Counter()
        for check in {(index, check) for index, _, check, _ in self.flags}:
            by_check[check[1]] += 1
        return {"checked": self.checked, "flagged": len(self.flagged_indices),
                "by_check": dict(sorted(by_check.items())), "unchecked": list(self.unchecked),
                **({"grammar": self.grammar} if self.grammar is not None else {})}


def audit_split(attack: str, sources: list, examples: list, ctx: AuditContext,
                config: dict | None = None) -> SplitAudit:
    """Every check that applies to the attack's examples, with the split's attack `config`;
    `sources[i]` is what `examples[i]` was made from (the same source id)."""
    if len(sources) != len(examples):
        raise ConfigError(f"audit of {attack!r}: {len(examples)} examples but {len(sources)} sources")
    for src, ex in zip(sources, examples):
        if src.source_id != ex.source_id:
            raise ConfigError(f"audit of {attack!r}: {ex.id} was not made from {src.id}")
    kind = _own_name(attack, examples)
    result = SplitAudit(attack, checked=len(examples))
    ctx = ctx.for_split(kind, config)
    for check in [check_edits, *CHECKS.get(kind, ())]:
        for index, name, detail in check(sources, examples, ctx):
            result.flags.append((index, examples[index].id, name, detail))
    result.unchecked = _unchecked(kind, ctx, config or {})
    result.grammar = ctx.notes.get("grammar")
    result.flags.sort(key=lambda f: (f[0], f[2]))
    return result


def _own_name(attack: str, examples: list) -> str:
    """The attack's own name, which checks are registered under: a split's name may be an alias
    ("addsent" in an older release or config), resolved by the task of the split's examples."""
    if not examples:
        return attack
    from advrace.attacks import canonical_name  # deferred for start-up time: importing the attacks loads every attack module

    return canonical_name(attack, examples[0].task)


def _unchecked(attack: str, ctx: AuditContext, built: dict) -> tuple[str, ...]:
    """The kinds of invalid item no check flags on the attack's splits, each with what the checks
    say of their own reach (`Check.not_checked_note`: the judge, whose opinion refused what)."""
    notes = "".join(c.not_checked_note(ctx.settings, built, ctx) for c in REGISTRY.values() if attack in c.attacks)
    return tuple(kind + notes for kind in UNCHECKED.get(attack, ()))


def audit_release(release_dir: str | Path, splits: list[str] | None = None,
                  ctx: AuditContext | None = None) -> dict[str, SplitAudit]:
    """The audit of every attacked split (or those named) of a release folder."""
    manifest = load_manifest(release_dir)
    known = [s for s in manifest["splits"] if s != ORIGINAL]
    for s in splits or ():
        if s not in manifest["splits"]:
            raise ConfigError(f"{release_dir}: no split {s!r}; it has {', '.join(manifest['splits'])}")
    ctx = ctx or AuditContext()
    todo = [s for s in splits or known
            if s != ORIGINAL and manifest["splits"][s].get("attack", NO_ATTACK) != NO_ATTACK]
    sources = {manifest["splits"][s].get("source") or ORIGINAL for s in todo}
    cache: dict[str, tuple[list, dict]] = {}

    def read(split: str) -> tuple[list, dict]:
        """A split's examples and the same by source id, read once; only source splits are kept,
        so that a release's audited splits are not all held in memory at once."""
        if split in cache:
            return cache[split]
        examples = read_split(release_dir, split)
        found = examples, {ex.source_id: ex for ex in examples}
        if split in sources:
            cache[split] = found
        return found

    out = {}
    for split in todo:
        info = manifest["splits"][split]
        attack = info["attack"]
        examples = read(split)[0]
        origin = read(info.get("source") or ORIGINAL)[1]
        missing = [ex.id for ex in examples if ex.source_id not in origin]
        if missing:
            raise ConfigError(f"{release_dir}: {missing[0]} has no source question in split "
                              f"{info.get('source') or ORIGINAL!r}")
        out[split] = audit_split(attack, [origin[ex.source_id] for ex in examples], examples, ctx,
                                 info.get("config"))
        out[split].perturbed, out[split].count = info.get("perturbed"), info.get("count", len(examples))
    return out
