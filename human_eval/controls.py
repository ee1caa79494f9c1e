"""Quality control as crowd studies run it.

- Control items: original questions, whose answer is known, mixed into every queue at a rate
  (`--controls`). An annotator's accuracy on them is their share of controls answered with the
  gold (`votes.chose_gold`); annotators below `--min-accuracy` are excluded from the votes
  (`excluded`), so that a careless or random annotator cannot decide an item.
- Baseline items: the originals of a seeded share of the studied questions (`--baseline`), so
  that the valid rate of what was attacked can be read beside that of what was not (about a third
  of the questions people put back in a RACE study had flaws that were in RACE already).

Neither ever goes to an annotator who has a version of the same question: the original shows
the gold of its attacked versions. Which items an annotator gets is a function of the study's
items, seed and meta alone (`plan_extras`), so that `validate` can recompute every queue from the
database, as it does the judge items' (`study.study_queues`).
"""

from __future__ import annotations

import hashlib

from advrace.core.errors import ConfigError
from advrace.core.seeding import seeded_rng
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.core.text import fold_case_and_spaces, plural, sentence_breaks
from advrace.release import NO_ATTACK, ORIGINAL

from . import store
from .votes import chose_gold

# Original questions are not all flawless (a truncated gold, two near-identical options: about a
# third of the questions people put back in a RACE study had such flaws already in RACE), and an
# honest annotator slips now and then, so the bar is well below 1; an annotator who clicks at
# random on 4 options scores about 0.25. With 4 controls, 3 right passes and 2 right does not.
DEFAULT_MIN_ACCURACY = 0.75
# What crowd studies use (CrowdFlower's test questions, Prolific's attention checks): about one
# item in ten a control. A study gives its own with --controls; the default is none.
SUGGESTED_RATE = 0.1


def check_rates(controls: float, baseline: float, min_accuracy: float | None) -> float | None:
    """Refuse rates out of range; returns the accuracy threshold the study records (the default
    when it has controls and gives none, None without controls)."""
    if not 0 <= controls < 1:
        raise ConfigError(f"--controls {controls}: the share of each queue that is control questions must be at "
                          f"least 0 and below 1 ({SUGGESTED_RATE} is what crowd studies use)")
    if not 0 <= baseline <= 1:
        raise ConfigError(f"--baseline {baseline}: the share of studied questions whose original is also judged "
                          "must be from 0 to 1")
    if min_accuracy is not None and not controls:
        raise ConfigError("--min-accuracy measures annotators on control questions; give --controls too "
                          f"(e.g. --controls {SUGGESTED_RATE})")
    if min_accuracy is not None and not 0 <= min_accuracy <= 1:
        raise ConfigError(f"--min-accuracy {min_accuracy}: an accuracy is from 0 to 1")
    if not controls:
        return None
    return DEFAULT_MIN_ACCURACY if min_accuracy is None else min_accuracy


def original_split(manifest: dict, splits: list[str], where) -> str:
    """The split whose questions serve as controls and baselines: the release's `original`, or,
    in a release without one, the unattacked split the studied splits are built from."""
    if ORIGINAL in manifest["splits"]:
        return ORIGINAL
    sources = {manifest["splits"][s].get("source") for s in splits} - {None}
    plain = sorted(s for s in sources if manifest["splits"].get(s, {}).get("attack", NO_ATTACK) == NO_ATTACK)
    if len(plain) != 1:
        raise ConfigError(f"{where}: --controls and --baseline take original questions, and the release has no "
                          f"`{ORIGINAL}` split (nor one unattacked split the studied splits are built from); "
                          "leave them out for this release")
    return plain[0]


def controls_for(queued: int, rate: float) -> int:
    """How many controls a queue of `queued` other items gets so that they make up about `rate`
    of it (at least one when the study has controls, so that every annotator is measured)."""
    if not rate:
        return 0
    return max(1, int(rate * queued / (1 - rate) + 0.5))


def _order_key(seed, name: str, record_id: str) -> str:
    """An annotator's own seeded order of the control questions, a function of each question
    alone, so that the order of any subset (the controls the study kept) is the same order."""
    return hashlib.sha256(f"advrace-controls\0{seed}\0{name}\0{record_id}".encode()).hexdigest()


def choose_controls(sizes: dict[str, int], seen: dict[str, set[str]], pool: list[dict], rate: float,
                    seed) -> dict[str, list[str]]:
    """Each annotator's control questions (record ids): the first `controls_for` of the pool
    (rows with record_id and source_id) in the annotator's own seeded order that are no version
    of a question in their queue (`seen`: its source ids). `sizes`: each queue's other items."""
    out = {}
    for name, size in sizes.items():
        want = controls_for(size, rate)
        mine = [c["record_id"] for c in sorted(pool, key=lambda c: _order_key(seed, name, c["record_id"]))
                if c["source_id"] not in seen[name]][:want]
        if len(mine) < want:
            raise ConfigError(
                f"--controls {rate}: {name} is to get {plural(want, 'control question')}, but only {len(mine)} of the "
                f"{plural(len(pool), 'original question')} are no version of a question in their queue (a control is "
                "never the original of a question its annotator judges); ask for a lower --controls, or give each "
                "annotator fewer items (more --annotators, fewer --judgements)")
        out[name] = mine
    return out


def baseline_questions(source_ids: list[str], rate: float, seed) -> list[str]:
    """The seeded share `rate` of the studied questions (source ids) whose original is judged
    too (at least one when `rate` is above 0)."""
    distinct = sorted(set(source_ids))
    if not rate or not distinct:
        return []
    n = min(len(distinct), max(1, int(rate * len(distinct) + 0.5)))
    return sorted(seeded_rng("advrace-baseline", seed).sample(distinct, n))


def check_baseline(baseline: list[dict], has: dict[str, set[str]], names: list[str], k: int) -> None:
    """Refuse a baseline item that fewer than `k` annotators can take (those who have no version
    of its question; `has`: each annotator's source ids)."""
    for item in baseline:
        free = [n for n in names if item["source_id"] not in has[n]]
        if len(free) < k:
            raise ConfigError(
                f"--baseline: the original of question {item['source_id']} is to get {plural(k, 'judgement')} from "
                f"annotators who have no version of it, but only {len(free)} of {plural(len(names), 'annotator')} "
                "have none; add annotators (--annotators), ask for fewer --judgements, or leave out --baseline")


def sentence_without_gold(example, seed) -> list[int] | None:
    """[start, end] of a seeded one of a SQuAD paragraph's own sentences that holds no gold
    answer (neither where a gold stands nor its text), or None when every sentence holds one."""
    context = example.context
    spans, last = [], 0
    for m in sentence_breaks(context):
        spans.append((last, m.start()))
        last = m.end()
    spans.append((last, len(context.rstrip())))
    golds = [(a.start, a.start + len(a.text), fold_case_and_spaces(a.text)) for a in example.answers]
    free = [[s, e] for s, e in spans if e > s and not any(
        s < ge and gs < e or g in fold_case_and_spaces(context[s:e]) for gs, ge, g in golds)]
    return seeded_rng("advrace-control-highlight", seed, example.id).choice(free) if free else None


def wants_highlight(task: str, primary_kinds: set[str]) -> bool:
    """Whether a study's SQuAD controls are shown like verify items (a highlighted sentence, and
    "grammatical?"): in edit and verify queues; in a judge queue they look like judge items."""
    return task == EXTRACTIVE_QA and bool(primary_kinds - {store.JUDGE})


def control_payload(payload: dict, example, seed, highlight: bool, mend: str | None = None) -> dict | None:
    """A control or baseline item's payload (the original question's, `payload`), with a
    highlighted sentence when it is to look like a verify item, and the `mend` the judge items
    beside it offer (`mending.control_mend`); None when it cannot (no sentence free of the gold)."""
    payload = {**payload, "mend": mend} if mend else payload
    if not highlight:
        return payload
    span = sentence_without_gold(example, seed)
    return None if span is None else {**payload, "highlight": span}


# --------------------------------------------------------------------------- accuracy and exclusion


def accuracy(annotations: list[dict]) -> dict[str, dict]:
    """Each annotator's answers to control items: {"controls": answered, "correct": chose the
    gold, "accuracy": correct / answered, None when none}."""
    out: dict[str, dict] = {}
    for a in annotations:
        if a["kind"] == store.CONTROL:
            mine = out.setdefault(a["annotator"], {"controls": 0, "correct": 0})
            mine["controls"] += 1
            mine["correct"] += chose_gold(a)
    for mine in out.values():
        mine["accuracy"] = mine["correct"] / mine["controls"]
    return out


def annotator_quality(meta: dict, annotations: list[dict], names: list[str]) -> dict[str, dict]:
    """Each annotator's control accuracy and standing: excluded (accuracy below the study's
    `min_accuracy`), or flagged (the study has controls, and they answered none: nothing to
    judge them by, so not excluded). Empty for a study without controls."""
    threshold = meta.get("min_accuracy")
    if not meta.get("controls"):
        return {}
    measured = accuracy(annotations)
    out = {}
    for name in names:
        mine = measured.get(name, {"controls": 0, "correct": 0, "accuracy": None})
        out[name] = {**mine, "excluded": mine["accuracy"] is not None and mine["accuracy"] < threshold,
                     "flagged": mine["accuracy"] is None}
    return out


def excluded(meta: dict, annotations: list[dict], names: list[str]) -> set[str]:
    """The annotators whose votes do not count: accuracy on controls below `min_accuracy`."""
    return {name for name, q in annotator_quality(meta, annotations, names).items() if q["excluded"]}


def exclusion_record(meta: dict, annotations: list[dict], names: list[str]) -> dict | None:
    """What a validated release's manifest says of the controls: their rate, the threshold, who
    was excluded with their accuracy, and who answered none. None for a study without controls."""
    quality = annotator_quality(meta, annotations, names)
    if not quality:
        return None
    return {"rate": meta["controls"], "min_accuracy": meta["min_accuracy"],
            "excluded": [{"annotator": n, "accuracy": q["accuracy"], "controls": q["controls"]}
                         for n, q in quality.items() if q["excluded"]],
            "no_controls_answered": [n for n, q in quality.items() if q["flagged"]]}


def needed_judgements(items: list[dict], queues: dict[str, list[int]], k: int, out: set[str]) -> dict[int, int]:
    """The judgements each item is to get once the excluded annotators' (`out`) are taken away:
    its verdict is over the votes that count (K less the excluded annotators who had it)."""
    less = {item["id"]: 0 for item in items}
    for name in out:
        for iid in queues.get(name, ()):
            if iid in less:
                less[iid] += 1
    return {iid: max(k - n, 0) for iid, n in less.items()}
