"""The evaluation report: results.json, results.md, results.png and per-example predictions.

The layout is AdvRACE's Table 3: models as rows, splits as columns, each cell a score with its
drop from the `original` split, an average column over the adversarial splits and an
average row over models; below it, the precision and device each model was scored with. Probe
splits (diagnosis, option_only) say how a model reads rather than how robust it is, so they are
shown but not averaged. Every number is rounded once, in the summary, and the Markdown is
rendered from that summary, so the two files always agree.

One convention for the drop everywhere (results.json's `<metric>_drop`, results.md, the chart,
docs/evaluation.md's "Reports"): the relative drop, DROP_DEFINITION, so a harder split has a
positive drop and an easier one (a probe such as diagnosis) a negative one.

Every score cell carries its 95% confidence interval (`<metric>_ci`), and every split but
`original` a paired test against `original` (`<metric>_p`, `paired_n`): a drop of a few points on
a few hundred questions can be chance alone. advrace.evaluation.statistics computes them;
results.json's `statistics` names the methods.

An attacked split keeps the questions its attack could not change, as copies (`perturbed: false`
in the release; each scored record carries the flag). So every split but `original` also says how
much of it was attacked (`attacked_n`, `attacked_share`) and what the model scores on the attacked
questions alone (`<metric>_attacked`, its interval `<metric>_attacked_ci`), against the same
questions' score on `original` (`<metric>_attacked_original`, `<metric>_attacked_drop`, the same
relative drop); the paired test is run on the attacked questions (the copies can only agree with
their originals). The headline drop stays over all questions of the split, as AdvRACE reports it.
A probe (diagnosis, option_only) gets the same fields: the questions it changed.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import NamedTuple

from advrace.core.atomic import atomic_dir
from advrace.core.numbers import significant
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.evaluation.naming import numbered
from advrace.release.card import DEMONSTRATION, split_models, validated_split_text
from advrace.release.records import NO_ATTACK
from advrace.models.protocol.scoring_protocol import differences, protocol_line
from advrace.evaluation.statistics import LEVEL, RESAMPLES, SEED, bootstrap_interval, paired_p, wilson_interval

ORIGINAL = "original"
TASK_METRICS = {MULTIPLE_CHOICE: ("accuracy",), EXTRACTIVE_QA: ("exact_match", "f1")}
# Metrics only some scorers give: a decoder LM scored by log-likelihood adds lm-evaluation-harness's
# acc_norm (the option with the best log-likelihood for its length) to its multiple-choice results.
OPTIONAL_METRICS = {MULTIPLE_CHOICE: ("accuracy_norm",), EXTRACTIVE_QA: ()}
METRIC_TITLES = {"accuracy": "Accuracy", "accuracy_norm": "Accuracy (length-normalized)",
                 "exact_match": "Exact match", "f1": "F1"}
# The per-question value of each metric in a split result's records (bool, or a number in [0, 1]).
RECORD_FIELDS = {"accuracy": "correct", "accuracy_norm": "correct_norm", "exact_match": "exact_match",
                 "f1": "f1"}
BINARY_METRICS = ("accuracy", "accuracy_norm", "exact_match")  # right or wrong per question
P_KEYS = frozenset(f"{m}_p" for m in METRIC_TITLES)  # p-values: significant digits, not 2 decimals
DEFAULT_CHANCE = 25.0  # one of RACE's 4 options, when no record says how many options there were
MINUS = "\u2212"
DROP_DEFINITION = (f"100 × ({ORIGINAL} − split) / {ORIGINAL}: positive when the split scores lower "
                   f"than {ORIGINAL} (harder), negative when it scores higher")


def _titles(metrics, kinds) -> str:
    names = {"accuracy": "accuracy", "accuracy_norm": "length-normalized accuracy",
             "exact_match": "exact match", "f1": "F1"}
    chosen = [names[m] for m in metrics if m in kinds]
    return chosen[0] if len(chosen) == 1 else ", ".join(chosen[:-1]) + " and " + chosen[-1]


def statistics_text(metrics) -> dict:
    """results.json's `statistics`: the interval and the paired test for `metrics`, in words."""
    level = round(100 * LEVEL)
    binary = [m for m in metrics if m in BINARY_METRICS]
    other = [m for m in metrics if m not in BINARY_METRICS]
    bootstrap = f"{RESAMPLES} resamples of the questions, numpy default_rng({SEED})"
    interval, paired = [], []
    if binary:
        interval.append(f"Wilson score interval for {_titles(binary, binary)}")
        paired.append(f"exact McNemar test (two-sided binomial test on the questions right on one "
                      f"split and wrong on the other) for {_titles(binary, binary)}")
    if other:
        interval.append(f"percentile bootstrap of the mean for {_titles(other, other)} ({bootstrap})")
        paired.append(f"paired bootstrap of the mean difference for {_titles(other, other)} ({bootstrap})")
    return {
        "level": level,
        "interval": "; ".join(interval),
        "paired_test": "; ".join(paired),
        "fields": f"`<metric>_ci`: the {level}% confidence interval of the score, [low, high] in percent; "
                  f"`<metric>_p`: the two-sided p-value of the split against `{ORIGINAL}` on the "
                  f"`paired_n` questions the split's attack changed and `{ORIGINAL}` holds (paired by "
                  f"source_id; all the questions both hold when the records carry no `perturbed` flag), "
                  f"not corrected for testing several splits; `attacked_n`, `attacked_share`: the questions "
                  f"the attack changed, and their percent of the split; `<metric>_attacked` (with "
                  f"`<metric>_attacked_ci`): the score on them alone; `<metric>_attacked_original`: the same "
                  f"questions' score on `{ORIGINAL}`; `<metric>_attacked_drop`: the relative drop between the "
                  f"two; null where the split has no attacked question",
    }


def relative_drop(original: float | None, score: float | None) -> float | None:
    """100 * (original - score) / original: positive when the split is harder."""
    if original is None or score is None or original == 0:
        return None
    return 100.0 * (original - score) / original


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _rounded(obj, digits: int = 2):
    """Scores, drops and intervals to `digits` decimals; p-values (P_KEYS) to 4 significant
    digits, since 0.0004 and 0.004 differ as much as 0.04 and 0.4."""
    if isinstance(obj, float):
        return round(obj, digits) + 0.0 if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: significant(v) if k in P_KEYS and isinstance(v, float) else _rounded(v, digits)
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_rounded(v, digits) for v in obj]
    return obj


def probe_attacks() -> set[str]:
    """The attacks that declare themselves probes, plugins included."""
    from advrace.attacks import attack_classes  # deferred for start-up time: importing the attacks loads every attack module

    return {cls.name for cls in attack_classes() if cls.probe}


def split_kinds(manifest: dict, splits: list[str]) -> tuple[list[str], list[str]]:
    """(adversarial, probe) splits among `splits`: everything but `original` is one or the other."""
    adversarial, probes, probing = [], [], probe_attacks()
    for s in splits:
        if s == ORIGINAL:
            continue
        (probes if manifest["splits"][s].get("attack") in probing else adversarial).append(s)
    return adversarial, probes


def report_metrics(task: str, scores: dict) -> tuple[str, ...]:
    """The task's metrics, and an optional one (accuracy_norm) when any model's result has it."""
    extra = tuple(k for k in OPTIONAL_METRICS[task]
                  if any(k in res for by_split in scores.values() for res in by_split.values()))
    return TASK_METRICS[task] + extra


def _record_values(res: dict, metric: str) -> list[float] | None:
    """The per-question values of `metric` in a split result, or None when its records lack them."""
    field, records = RECORD_FIELDS[metric], res.get("records") or []
    if not records or any(rec.get(field) is None for rec in records):
        return None
    return [float(rec[field]) for rec in records]


def score_interval(res: dict, metric: str) -> list[float] | None:
    """The 95% interval, in percent, of a split result's `metric`: Wilson from the score and n for
    a right-or-wrong metric, the bootstrap over the records' values for F1."""
    n = int(res.get("n") or 0)
    if metric in BINARY_METRICS:
        interval = wilson_interval(float(res[metric]) / 100 * n, n)
    else:
        values = _record_values(res, metric)
        interval = bootstrap_interval(values) if values is not None and len(values) == n else None
    return None if interval is None else [100 * interval[0], 100 * interval[1]]


def _values_interval(values: list[float], metric: str) -> list[float] | None:
    """The 95% interval, in percent, of the mean of per-question `values` of `metric` (Wilson for
    a right-or-wrong metric, the bootstrap for F1, as `score_interval`)."""
    if metric in BINARY_METRICS:
        interval = wilson_interval(sum(values), len(values))
    else:
        interval = bootstrap_interval(values)
    return None if interval is None else [100 * interval[0], 100 * interval[1]]


def _by_source(res: dict) -> dict:
    """A split result's records by source question (the first record of each)."""
    out = {}
    for rec in res.get("records") or []:
        if rec.get("source_id") is not None:
            out.setdefault(rec["source_id"], rec)
    return out


def attacked_records(res: dict) -> list[dict] | None:
    """The records of the questions a split's attack changed (`perturbed: true`), or None when
    its records do not say (none given, or one without the flag: scores made outside advrace's
    scoring)."""
    records = res.get("records") or []
    if not records or any(rec.get("perturbed") is None for rec in records):
        return None
    return [rec for rec in records if rec["perturbed"]]


def attacked_scores(original: dict, res: dict, metrics) -> dict:
    """How much of a split its attack changed, and each metric on those questions alone against
    the same questions on `original`: `attacked_n`, `attacked_share` (percent of the split),
    `<metric>_attacked`, `<metric>_attacked_ci`, `<metric>_attacked_original` and
    `<metric>_attacked_drop` (the relative drop between the two). None for what cannot be told:
    every score when no question was attacked (never a division by zero), the share too when the
    records carry no `perturbed` flag, the original score and the drop when `original` lacks one
    of the questions."""
    attacked, n = attacked_records(res), int(res.get("n") or 0)
    out = {"attacked_n": None if attacked is None else len(attacked),
           "attacked_share": None if attacked is None or not n else 100.0 * len(attacked) / n}
    base = _by_source(original)
    for metric in metrics:
        field = RECORD_FIELDS[metric]
        values = [rec.get(field) for rec in attacked or ()]
        known = bool(values) and all(v is not None for v in values)
        score = 100.0 * sum(float(v) for v in values) / len(values) if known else None
        before = [base.get(rec.get("source_id"), {}).get(field) for rec in attacked or ()]
        paired = known and all(v is not None for v in before)
        before_score = 100.0 * sum(float(v) for v in before) / len(before) if paired else None
        out[f"{metric}_attacked"] = score
        out[f"{metric}_attacked_ci"] = _values_interval([float(v) for v in values], metric) if known else None
        out[f"{metric}_attacked_original"] = before_score
        out[f"{metric}_attacked_drop"] = relative_drop(before_score, score)
    return out


def paired_tests(original: dict, res: dict, metrics, attacked_only: bool = True) -> dict:
    """`paired_n` and, per metric, the p-value of the split against `original` on those questions
    (None when there are none, or their records lack the metric): the questions the split's attack
    changed (its records' `perturbed` flag) that `original` holds, paired by source_id, since a
    copy the attack left unchanged can only agree with its original; all the questions both hold
    when the records carry no flag, or without `attacked_only` (a split no attack made)."""
    base, split = _by_source(original), _by_source(res)
    attacked = attacked_records(res) if attacked_only else None
    if attacked is not None:
        changed = {rec.get("source_id") for rec in attacked}
        split = {sid: rec for sid, rec in split.items() if sid in changed}
    shared = [sid for sid in split if sid in base]
    out = {"paired_n": len(shared)}
    for metric in metrics:
        field = RECORD_FIELDS[metric]
        pairs = [(base[sid].get(field), split[sid].get(field)) for sid in shared]
        if not pairs or any(a is None or b is None for a, b in pairs):
            out[f"{metric}_p"] = None
        else:
            out[f"{metric}_p"] = paired_p([a for a, _ in pairs], [b for _, b in pairs], metric in BINARY_METRICS)
    return out


def chance_level(task: str, scores: dict) -> float | None:
    """The accuracy of a uniform guess, in percent: the mean of 100/options over the records that
    give per-option scores, else DEFAULT_CHANCE; None for extractive QA (no options to guess)."""
    if task != MULTIPLE_CHOICE:
        return None
    sizes = [len(rec["scores"]) for by_split in scores.values() for res in by_split.values()
             for rec in res.get("records") or () if rec.get("scores")]
    return sum(100.0 / k for k in sizes) / len(sizes) if sizes else DEFAULT_CHANCE


def _lineage(source: dict) -> tuple[set, set]:
    """(names, sha256s) a scored model answers to: its name, the model it was fine-tuned from
    and a reader's encoder; the digests of its files (results.json's source `identity`)."""
    ident = source.get("identity") or {"name": source.get("path")}
    return ({ident.get(k) for k in ("name", "trained_from", "encoder")} - {None},
            {ident.get(k) for k in ("sha256", "encoder_sha256")} - {None})


def shared_base(made_with: dict, source: dict) -> bool:
    """Whether a model a split was made with (card.split_models) and a scored model (its source)
    are one model or were fine-tuned from one: by the records (names and sha256s), never by a
    family name."""
    names, shas = _lineage(source)
    own = {made_with.get("name"), made_with.get("trained_from")} - {None}
    return bool(own & names) or made_with.get("checkpoint_sha256") in shas


def release_caveats(manifest: dict, splits: list[str], results: dict, chance: float | None) -> list[dict]:
    """What the release knows that changes how a number reads, per split and model, as results.json's
    `caveats` ({kind, split, model, text}) and results.md's "Caveats": people's validation of a
    split (or its absence, for a split a model made), a demonstration model that made a split, a
    generator, judge or reader that shares its base with a scored model (that model's score there
    is confounded), and a model below chance on `original` (its drops measure noise)."""
    out = []
    validation = manifest.get("validation") or {}
    for split in splits:
        info = manifest["splits"][split]
        made_with = split_models(info)
        if split in (validation.get("splits") or {}):
            out.append({"kind": "validation", "split": split, "model": None,
                        "text": validated_split_text(validation, split)})
        elif made_with or info.get("model_dependent"):
            out.append({"kind": "unvalidated", "split": split, "model": None,
                        "text": "made with a model and not validated by people: the audit does not see a new "
                                "distractor that is a second right answer in other words, so some gold answers "
                                "may not be the one right answer (`advrace human-eval`)"})
        if info.get("trained_on_sample"):
            out.append({"kind": "demonstration", "split": split, "model": None,
                        "text": f"made with a checkpoint trained on the bundled sample (`{info['trained_on_sample']}`): "
                                f"{DEMONSTRATION}"})
        for m, res in results.items():
            for made in made_with:
                if not shared_base(made, res.get("source") or {}):
                    continue
                base = f", fine-tuned from `{made['trained_from']}`" if made.get("trained_from") else ""
                how = ("its distractors were chosen as those the reader" if made["role"] == "reader"
                       else f"made with a {made['role']}")
                out.append({"kind": "shared_base", "split": split, "model": m,
                            "text": f"{how} (`{made['name']}`{base}) that shares its base with the scored model "
                                    f"`{m}`: `{m}`'s score and drop on it are confounded (the split was shaped by "
                                    "a model of its own kind), and do not compare with other models'"})
    for m, res in results.items():
        score = (res["splits"].get(ORIGINAL) or {}).get("accuracy")
        if chance is not None and score is not None and score < chance:
            out.append({"kind": "below_chance", "split": ORIGINAL, "model": m,
                        "text": f"`{m}` scores {score:.2f}% on `{ORIGINAL}`, below chance ({chance:.2f}%): it answers "
                                "no better than a guess, so its drops from it measure noise, not robustness"})
    return out


def summarize(manifest: dict, scores: dict, sources: dict | None = None) -> dict:
    """The content of results.json from `{model: {split: split result}}` (rounded to 2 decimals,
    p-values to 4 significant digits)."""
    task = manifest["task"]
    metrics = report_metrics(task, scores)
    models = list(scores)
    splits = [s for s in manifest["splits"] if any(s in scores[m] for m in models)]
    adversarial, probes = split_kinds(manifest, splits)
    results, stems = {}, dict(zip(models, file_stems(models)))
    for m in models:
        original = scores[m].get(ORIGINAL)
        cells = {s: _cell(manifest, s, scores[m][s], original, metrics) for s in splits if s in scores[m]}
        results[m] = {"splits": cells, "average": _split_average(cells, adversarial, metrics),
                      "source": (sources or {}).get(m, {}), "predictions": f"predictions/{stems[m]}.jsonl"}
    src = manifest.get("source", {})
    chance = chance_level(task, scores)
    summary = {
        "drop": DROP_DEFINITION,
        "statistics": statistics_text(metrics),
        "chance": chance,
        "caveats": release_caveats(manifest, splits, results, chance),
        "release": {"name": manifest.get("name"), "task": task,
                    "advrace_version": manifest.get("advrace_version"),
                    "source": src.get("name"), "fingerprint": src.get("fingerprint"),
                    "manifest_sha256": manifest.get("manifest_sha256")},
        "metrics": list(metrics),
        "columns": splits,
        "adversarial_splits": adversarial,
        "probe_splits": probes,
        "split_info": {s: {"attack": manifest["splits"][s].get("attack"),
                           "source": manifest["splits"][s].get("source"),
                           "n": manifest["splits"][s].get("count"),
                           **({} if s == ORIGINAL or manifest["splits"][s].get("attack") == NO_ATTACK
                              else _split_attacked(manifest, s, results))}
                       for s in splits},
        "models": models,
        "results": results,
        "model_average": _model_average(results, models, splits, metrics),
    }
    return _rounded(summary)


def _cell(manifest: dict, split: str, res: dict, original: dict | None, metrics) -> dict:
    """One model's cell for one split: n, each metric it has with its interval and, but on
    `original`, its drop, its score on the attacked questions alone (for a split an attack made)
    and the paired test against `original`."""
    present = [k for k in metrics if res.get(k) is not None]
    cell = {"n": res["n"]}
    for k in present:
        cell[k] = float(res[k])
        cell[f"{k}_ci"] = score_interval(res, k)
        if split != ORIGINAL:
            cell[f"{k}_drop"] = relative_drop((original or {}).get(k), float(res[k]))
    if split != ORIGINAL:
        made = manifest["splits"][split].get("attack") != NO_ATTACK  # not human-authored, say
        if made:
            cell.update(attacked_scores(original or {}, res, present))
        cell.update(paired_tests(original or {}, res, present, attacked_only=made))
    return cell


def _averaged(metrics) -> list[str]:
    """The keys the average column and row report for `metrics`: scores and drops, over all and
    over the attacked questions."""
    return [key for k in metrics for key in (k, f"{k}_drop", f"{k}_attacked", f"{k}_attacked_drop")]


def _split_average(cells: dict, adversarial: list[str], metrics) -> dict:
    """One model's average column: the mean over the adversarial splits (probes left out)."""
    return {key: _mean(cells[s].get(key) for s in adversarial if s in cells) for key in _averaged(metrics)}


def _model_average(results: dict, models: list[str], splits: list[str], metrics) -> dict:
    """The average row: each split's (on `original`, the scores only) and the average column's
    mean over models."""
    over_models = {"splits": {}, "average": {}}
    averaged = _averaged(metrics)
    for s in splits:
        keys = [k for k in metrics] if s == ORIGINAL else averaged
        over_models["splits"][s] = {key: _mean(results[m]["splits"].get(s, {}).get(key) for m in models)
                                    for key in keys}
    for key in averaged if models else ():
        over_models["average"][key] = _mean(results[m]["average"][key] for m in models)
    return over_models


def _split_attacked(manifest: dict, split: str, results: dict) -> dict:
    """`attacked` (how many questions of `split` its attack changed: the manifest's count, else
    the models' records'; None when neither says) and `attacked_share` (percent of the split)."""
    info = manifest["splits"][split]
    count = info.get("perturbed")
    if count is None:
        count = next((r["splits"][split]["attacked_n"] for r in results.values()
                      if r["splits"].get(split, {}).get("attacked_n") is not None), None)
    n = info.get("count")
    return {"attacked": count, "attacked_share": 100.0 * count / n if count is not None and n else None}


def file_stems(models: list[str]) -> list[str]:
    """File-safe, unique names for the models' predictions/ files: a label may hold a slash
    (`dg-sample/final`, `owner/name`), a file name may not (`dg-sample_final`); a name of
    letters, digits and `._+-` (an ablation's `+charswap`) stays as it is."""
    return numbered([re.sub(r"[^A-Za-z0-9._+-]+", "_", name).strip("._") or "model" for name in models])


# --------------------------------------------------------------------------- rendering


def drop_text(drop: float, digits: int = 2) -> str:
    """A drop as it reads everywhere: 20 -> "drop 20.00%", -5 -> "drop −5.00%" (a gain)."""
    text = f"{abs(drop):.{digits}f}"
    return f"drop {MINUS if drop < 0 and float(text) else ''}{text}%"


def format_cell(cell: dict | None, metric: str) -> str:
    if not cell or cell.get(metric) is None:
        return "–"
    text = f"{cell[metric]:.2f}"
    drop = cell.get(f"{metric}_drop")
    return text if drop is None else f"{text} ({drop_text(drop)})"


def format_attacked_cell(cell: dict | None, metric: str) -> str:
    """A cell's score on the attacked questions alone, as results.md shows it: "40.00 (original
    50.00, drop 20.00%)", the same questions' score on `original` and the drop from it (an average
    has no original score); "–" when no question was attacked or the records do not say."""
    score = (cell or {}).get(f"{metric}_attacked")
    if score is None:
        return "–"
    before, drop = cell.get(f"{metric}_attacked_original"), cell.get(f"{metric}_attacked_drop")
    said = ([] if before is None else [f"{ORIGINAL} {before:.2f}"]) + ([] if drop is None else [drop_text(drop)])
    return f"{score:.2f}" + (f" ({', '.join(said)})" if said else "")


def share_text(info: dict) -> str:
    """A split's attacked share as results.md shows it: "5 of 10 (50.00%)"; "–" when unknown."""
    if info.get("attacked") is None:
        return "–"
    share = info.get("attacked_share")
    return f"{info['attacked']} of {info.get('n')}" + ("" if share is None else f" ({share:.2f}%)")


def format_interval(cell: dict | None, metric: str, key: str = "ci") -> str:
    """A cell's interval as results.md shows it: "40.38–59.62"; "–" when there is none. `key`:
    "attacked_ci" for the interval of the score on the attacked questions."""
    interval = (cell or {}).get(f"{metric}_{key}")
    return "–" if not interval else f"{interval[0]:.2f}–{interval[1]:.2f}"


def format_p(cell: dict | None, metric: str, with_n: bool = True) -> str:
    """A cell's p-value against `original` as results.md shows it: three decimals, "< 0.001"
    below that (results.json keeps 4 significant digits), with its paired questions unless the
    column header gives them: "0.021 (n 100)"."""
    p = (cell or {}).get(f"{metric}_p")
    if p is None:
        return "–"
    text = "< 0.001" if p < 1e-3 else f"{p:.3f}"
    return f"{text} (n {cell.get('paired_n')})" if with_n else text


def _with_metric(summary: dict, metric: str) -> list[str]:
    """The models with a score for `metric` on some split (accuracy_norm: only some have it)."""
    return [m for m in summary["models"]
            if any(c.get(metric) is not None for c in summary["results"][m]["splits"].values())]


def _table(head: list[str], rows: list[tuple[str, list[str]]]) -> list[str]:
    return (["| model | " + " | ".join(head) + " |", "|---|" + "---:|" * len(head)]
            + [f"| {name} | " + " | ".join(cells) + " |" for name, cells in rows] + [""])


def _scored_how(m: str, source: dict) -> str | None:
    """One model's line of "How each model was scored", or None when its source says nothing."""
    info = source.get("inference") if isinstance(source.get("inference"), dict) else {}
    method = source.get("method") or info.get("method")
    parts = []
    if info:
        emulated = " (emulated: no native bf16)" if info.get("bf16_emulated") else ""
        weights = f", weights in {info['weights']}" if info.get("weights") else ""
        parts.append(f"{info.get('precision')}{emulated}{weights} on {info.get('device_type')}, torch {info.get('torch')}")
    if method:
        parts.append(f"method: {method}")
    if source.get("model_args"):
        parts.append("model args: " + ", ".join(f"{k}={json.dumps(v) if isinstance(v, (dict, bool)) else v}"
                                                for k, v in source["model_args"].items()))
    if not parts:
        return None
    line = f"- `{m}`: " + "; ".join(parts)
    if isinstance(source.get("protocol"), dict):
        line += f"\n  - {protocol_line(source['protocol'])}"
    decoding = source.get("decoding")
    if isinstance(decoding, dict):
        line += f"\n  - {decoding_summary(decoding)}"
    return line


def decoding_summary(decoding: dict) -> str:
    """One line: how a decoder LM's attention was masked, what shared its prompt's cache, what ran
    alone and at what cost, and how many prompts were cut."""
    text = (f"decoding: {decoding.get('attention')} attention, {decoding.get('mask')} 4D mask; "
            f"{decoding.get('shared')} shared their prompt's cache, {decoding.get('run_alone')} ran alone")
    if decoding.get("run_alone"):
        reasons = ", ".join(f"{n} for {r}" for r, n in (decoding.get("reasons") or {}).items())
        text += f" ({reasons}; {decoding.get('cost_ratio')}x the tokens)"
    return text + f"; {decoding.get('questions_cut', 0)} prompt(s) cut to the maximum length"


def protocol_differences(summary: dict) -> list[str]:
    """Lines saying where the models of one report were scored under different protocols."""
    scored = [(m, summary["results"][m].get("source", {}).get("protocol")) for m in summary["models"]]
    scored = [(m, p) for m, p in scored if isinstance(p, dict)]
    lines = []
    for (m, p), (n, q) in zip(scored, scored[1:]):
        diff = [d for d in differences(p, q) if not d.startswith("model:")]
        if diff:
            lines.append(f"- `{m}` and `{n}` were scored under different protocols: " + "; ".join(diff))
    return lines


class _Columns(NamedTuple):
    """results.md's columns: every split (`splits`, headed `heads`), those compared with
    `original` (`tested`, headed `attacked_heads` in the attacked-only tables), and those of them
    whose attacked questions the summary counts (`attacked`: no attacked-only table without)."""

    splits: list[str]
    heads: list[str]
    probes: set[str]
    tested: list[str]
    attacked: list[str]
    attacked_heads: list[str]


def _columns(summary: dict) -> _Columns:
    columns = summary["columns"]
    probes = set(summary["probe_splits"])
    tested = [s for s in columns if s != ORIGINAL] if ORIGINAL in columns else []
    info = summary["split_info"]
    return _Columns(
        splits=columns, heads=[f"{s} (probe)" if s in probes else s for s in columns], probes=probes, tested=tested,
        attacked=[s for s in tested if info[s].get("attacked") is not None],
        attacked_heads=[f"{s} ({'probe, ' if s in probes else ''}{info[s]['attacked']} of {info[s]['n']} attacked)"
                        if info[s].get("attacked") is not None else f"{s} (probe)" if s in probes else s
                        for s in tested])


def render_markdown(summary: dict) -> str:
    """results.md, from the summary alone (so it always agrees with results.json): the release,
    the caveats, a table per metric (and its attacked-only twin), how each model was scored, then
    the intervals and the paired tests."""
    cols = _columns(summary)
    lines = _introduction(summary, cols)
    rows = [(m, summary["results"][m]) for m in summary["models"]] + [("average", summary["model_average"])]
    for metric in summary["metrics"]:
        lines += _score_tables(metric, rows, cols)
    lines += _reading_notes(summary, cols)
    stats = summary.get("statistics")
    if stats:
        lines += _interval_tables(summary, cols, stats)
        if cols.tested:
            lines += _paired_tables(summary, cols, stats)
    return "\n".join(lines).rstrip("\n") + "\n"


def _introduction(summary: dict, cols: _Columns) -> list[str]:
    """The title, the release scored, what a cell holds, the caveats and, where the summary counts
    them, how many questions each attack changed."""
    rel, columns, chance = summary["release"], cols.splits, summary.get("chance")
    lines = [f"# Evaluation: {rel['name']}", "",
             f"Release `{rel['name']}` ({rel['task']}), built with advrace {rel['advrace_version']} from "
             f"`{rel['source']}` (source fingerprint `{(rel['fingerprint'] or '')[:16]}`; release manifest "
             f"sha256 `{(rel.get('manifest_sha256') or '')[:16]}`); questions per split: "
             + ", ".join(f"{s} {summary['split_info'][s]['n']}" for s in columns) + "."
             + (f" Chance (a uniform guess among the options): {chance:.2f}%." if chance is not None else ""), "",
             f"Each cell: the score and its drop from `{ORIGINAL}`, both in percent; drop = {DROP_DEFINITION}.",
             ""]
    if summary.get("caveats"):
        lines += ["## Caveats", "", "What the release records that changes how these numbers read:", ""]
        lines += [f"- `{c['split']}`: {c['text']}." if c.get("split") and c["kind"] != "below_chance"
                  else f"- {c['text']}." for c in summary["caveats"]] + [""]
    if cols.attacked:
        info = summary["split_info"]
        lines += [f"The drop is over all questions of the split, as AdvRACE reports it: a split keeps the "
                  f"questions its attack could not change, as copies of `{ORIGINAL}`'s. The attacked-only "
                  f"tables are over the questions the attack changed, against the same questions' score on "
                  f"`{ORIGINAL}`. Questions attacked: "
                  + ", ".join(f"{s}{' (probe)' if s in cols.probes else ''} {share_text(info[s])}" for s in cols.tested)
                  + ".", ""]
    return lines


def _score_tables(metric: str, rows: list, cols: _Columns) -> list[str]:
    """A metric's table of scores and drops, models and their average as rows, and its table over
    the attacked questions alone."""
    lines = [f"## {METRIC_TITLES[metric]}", "",
             "| model | " + " | ".join(cols.heads) + " | average |",
             "|---|" + "---:|" * (len(cols.splits) + 1)]
    for name, row in rows:
        cells = [format_cell(row["splits"].get(s), metric) for s in cols.splits]
        lines.append(f"| {name} | " + " | ".join(cells) + f" | {format_cell(row['average'], metric)} |")
    lines.append("")
    if cols.attacked:
        lines += [f"### {METRIC_TITLES[metric]}, attacked questions only", ""]
        lines += _table(cols.attacked_heads + ["average"],
                        [(name, [format_attacked_cell(row["splits"].get(s), metric) for s in cols.tested]
                          + [format_attacked_cell(row["average"], metric)]) for name, row in rows])
    return lines


def _reading_notes(summary: dict, cols: _Columns) -> list[str]:
    """What the averages are over, what acc_norm is, how each model was scored and where models
    were scored under different protocols."""
    adv = ", ".join(summary["adversarial_splits"]) or "none"
    note = f"**average** column: mean over the adversarial splits ({adv}), of scores and of drops"
    if cols.probes:
        note += f"; probe splits ({', '.join(s for s in cols.splits if s in cols.probes)}) are not averaged"
    lines = [note + ". **average** row: mean over models.", ""]
    if "accuracy_norm" in summary["metrics"]:
        lines += [f"{METRIC_TITLES['accuracy_norm']}: lm-evaluation-harness's acc_norm, the option whose "
                  "log-likelihood per unit of its length is highest; only models scored by log-likelihood "
                  "give it (– for the others).", ""]
    ran = [line for line in (_scored_how(m, summary["results"][m].get("source") or {}) for m in summary["models"])
           if line]
    if ran:
        lines += ["How each model was scored (bf16 and fp32 can give different predictions):", ""] + ran + [""]
    apart = protocol_differences(summary)
    if apart:
        lines += ["**Scored under different protocols**: their numbers do not compare directly.", ""] + apart + [""]
    return lines


def _interval_tables(summary: dict, cols: _Columns, stats: dict) -> list[str]:
    """Each metric's confidence intervals, over all questions and over the attacked ones alone."""
    lines = [f"## {stats['level']}% confidence intervals", "", f"In percent: {stats['interval']}.", ""]
    for metric in summary["metrics"]:
        shown = _with_metric(summary, metric)
        lines += [f"### {METRIC_TITLES[metric]}", ""]
        lines += _table(cols.heads, [(m, [format_interval(summary["results"][m]["splits"].get(s), metric)
                                          for s in cols.splits]) for m in shown])
        if cols.attacked:
            lines += [f"### {METRIC_TITLES[metric]}, attacked questions only", ""]
            lines += _table(cols.attacked_heads, [(m, [format_interval(summary["results"][m]["splits"].get(s), metric,
                                                                       "attacked_ci") for s in cols.tested])
                                                  for m in shown])
    return lines


def _paired_tables(summary: dict, cols: _Columns, stats: dict) -> list[str]:
    """Each metric's p-values against `original`, per split compared with it."""
    tested, probes = cols.tested, cols.probes
    among = ("the questions the split's attack changed, paired with the same source questions on "
             f"`{ORIGINAL}` (n: how many; a copy the attack left unchanged can only agree with its "
             "original)" if cols.attacked else "the questions both hold, paired by source question (n: how many)")
    lines = [f"## Paired tests against `{ORIGINAL}`", "",
             f"Each cell: the two-sided p-value of the split's score against `{ORIGINAL}`'s on "
             f"{among}: {stats['paired_test']}. A small p says the difference is unlikely to be chance "
             "alone; it is not corrected for testing several splits.", ""]
    for metric in summary["metrics"]:
        shown = _with_metric(summary, metric)
        # n in the header when every model was paired on as many questions (the usual case)
        counts = {s: {summary["results"][m]["splits"][s].get("paired_n") for m in shown
                      if s in summary["results"][m]["splits"]} for s in tested}
        one = {s: len(c) == 1 for s, c in counts.items()}
        head = [f"{s} ({'probe, ' if s in probes else ''}n {next(iter(counts[s]))})" if one[s]
                else f"{s} (probe)" if s in probes else s for s in tested]
        lines += [f"### {METRIC_TITLES[metric]}", ""]
        lines += _table(head, [(m, [format_p(summary["results"][m]["splits"].get(s), metric, not one[s])
                                    for s in tested]) for m in shown])
    return lines


def _bars(ax, xs, cells, metric: str, key: str, width: float, show_values: bool, **style):
    """One bar per cell at `xs`: its `metric` (or `metric`_attacked, `key` "attacked"), with the
    matching interval as an error bar and, with `show_values`, the score above it."""
    name = metric if not key else f"{metric}_{key}"
    heights = [c.get(name) or 0.0 for c in cells]
    intervals = [c.get(f"{name}_ci") or [h, h] for c, h in zip(cells, heights)]
    errors = [[max(h - lo, 0.0) for h, (lo, _) in zip(heights, intervals)],
              [max(hi - h, 0.0) for h, (_, hi) in zip(heights, intervals)]]
    narrowest = min(width) if isinstance(width, list) else width
    bars = ax.bar(xs, heights, width, yerr=errors,
                  error_kw={"elinewidth": 0.9, "capsize": min(3.0, 40 * narrowest), "ecolor": "0.2"}, **style)
    if show_values:  # above the interval, where the error bar does not cross the number
        for x, c, (_, hi) in zip(xs, cells, intervals):
            if c.get(name) is not None:
                ax.text(x, hi + 1, f"{c[name]:.1f}", ha="center", va="bottom", fontsize="x-small")
    return bars


def plot(summary: dict, path: Path) -> None:
    """Grouped bars: one group per split, one bar per model (accuracy, or F1 for SQuAD), each with
    its 95% interval as an error bar; beside it, hatched, the score on the questions the split's
    attack changed (with its interval), where the report knows them; for multiple choice a dashed
    line at chance. The legend gives each model's average drop over the adversarial splits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = "f1" if "f1" in summary["metrics"] else summary["metrics"][0]
    columns, models = summary["columns"], summary["models"]
    # the splits whose attacked questions some model has a score on get a second, hatched bar
    attacked = [s for s in columns if s != ORIGINAL
                and any((summary["results"][m]["splits"].get(s) or {}).get(f"{metric}_attacked") is not None
                        for m in models)]
    wide = 1.2 * len(columns) * max(1, len(models)) ** 0.5 * (1.4 if attacked else 1.0) + 2
    fig, ax = plt.subplots(figsize=(min(max(6.0, wide), 14.0), 5.0))  # wider reads as a strip
    show_values = len(models) * (len(columns) + len(attacked)) <= 24
    palette = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for k, m in enumerate(models):
        _model_bars(ax, summary, m, k, metric, attacked, palette[k % len(palette)], show_values)
    chance = summary.get("chance")
    if chance is not None:  # over the bars, so a bar below chance shows it
        ax.axhline(chance, color="0.15", linestyle="--", linewidth=1.2, alpha=0.8, zorder=3,
                   label=f"chance ({chance:.3g}%)")
    _label_axes(ax, summary, metric)
    _legend(ax, summary, metric, attacked)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


def _model_bars(ax, summary: dict, m: str, k: int, metric: str, attacked: list[str], color, show_values: bool):
    """Model `m`'s bars (the `k`th of each group): all questions of each split and, for the
    splits in `attacked`, beside it the attacked questions alone, hatched, with a black line at
    the same questions' score on `original`."""
    import matplotlib.colors

    columns, models = summary["columns"], summary["models"]
    width = 0.8 / max(len(models), 1)
    cells = [summary["results"][m]["splits"].get(s) or {} for s in columns]
    xs = [i - 0.4 + width * (k + 0.5) for i in range(len(columns))]
    # a split with attacked-only scores: all questions on the left half, attacked on the right
    half = [columns[i] in attacked for i in range(len(columns))]
    color = matplotlib.colors.to_rgba(color)
    drop = summary["results"][m]["average"].get(f"{metric}_drop")
    _bars(ax, [x - width / 4 if h else x for x, h in zip(xs, half)], cells, metric, "",
          [width / 2 if h else width for h in half], show_values, color=color,
          label=m if drop is None else f"{m} (average {drop_text(drop, 1)})")
    if attacked:
        right = [(x + width / 4, c) for x, c, h in zip(xs, cells, half) if h]
        _bars(ax, [x for x, _ in right], [c for _, c in right], metric, "attacked", width / 2, show_values,
              facecolor=(*color[:3], 0.3), edgecolor=color, hatch="///", linewidth=0.8)
        # the same questions on `original`: a hatched bar is read against this, not the left bar
        marks = [(x, c[f"{metric}_attacked_original"]) for x, c in right
                 if c.get(f"{metric}_attacked_original") is not None]
        if marks:
            ax.hlines([y for _, y in marks], [x - width / 4 for x, _ in marks], [x + width / 4 for x, _ in marks],
                      colors="black", linewidth=2.2, zorder=4)


def _label_axes(ax, summary: dict, metric: str) -> None:
    """The split names (probes marked), the metric with its interval level, the title and grid."""
    columns, probes = summary["columns"], set(summary["probe_splits"])
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([f"{s}\n(probe)" if s in probes else s for s in columns],
                       rotation=20 if len(columns) > 4 else 0, ha="right" if len(columns) > 4 else "center")
    level = (summary.get("statistics") or {}).get("level", 95)
    ax.set_ylabel(f"{METRIC_TITLES[metric]} (%), {level}% interval")
    ax.set_ylim(0, 108)
    ax.set_yticks(range(0, 101, 20))
    what = METRIC_TITLES[metric] if metric == "f1" else METRIC_TITLES[metric].lower()
    ax.set_title(f"{summary['release']['name']}: {what} per split")
    ax.grid(axis="y", alpha=0.3)


def _legend(ax, summary: dict, metric: str, attacked: list[str]) -> None:
    """The legend under the chart: the models (with their average drop) and chance, then what the
    hatched bars and the black lines are, where drawn."""
    import matplotlib.lines
    import matplotlib.patches

    columns, models = summary["columns"], summary["models"]
    handles, names = ax.get_legend_handles_labels()
    if attacked:
        handles.append(matplotlib.patches.Patch(facecolor="white", edgecolor="0.3", hatch="///"))
        names.append("hatched: only the questions the attack changed")
        if any((summary["results"][m]["splits"].get(s) or {}).get(f"{metric}_attacked_original") is not None
               for m in models for s in attacked):
            handles.append(matplotlib.lines.Line2D([], [], color="black", linewidth=2.2))
            names.append(f"black line: those questions on {ORIGINAL}")
    order = sorted(range(len(names)), key=lambda i: isinstance(handles[i], matplotlib.lines.Line2D))
    ax.legend([handles[i] for i in order], [names[i] for i in order], fontsize="small", loc="upper center",
              bbox_to_anchor=(0.5, -0.14 if len(columns) <= 4 else -0.22), ncol=min(len(names), 3),
              frameon=False)


def _prediction_lines(scores_by_split: dict, columns: list[str]) -> str:
    out = []
    for split in columns:
        for rec in scores_by_split.get(split, {}).get("records", []):
            rec = dict(rec)
            if "scores" in rec:
                rec["scores"] = [round(float(s), 4) for s in rec["scores"]]
            if "f1" in rec:
                rec["f1"] = round(float(rec["f1"]), 4)
            out.append(json.dumps(rec, ensure_ascii=False, sort_keys=True) + "\n")
    return "".join(out)


def write_report(out_dir, manifest: dict, scores: dict, *, sources: dict | None = None) -> dict:
    """Write the report folder (replacing an earlier report there); returns the summary. A
    model's predictions go to its results.json `predictions` path (a file-safe name)."""
    summary = summarize(manifest, scores, sources)
    with atomic_dir(out_dir, "results.json", "report") as tmp:
        (tmp / "predictions").mkdir()
        (tmp / "results.json").write_text(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False)
                                          + "\n", encoding="utf-8")
        (tmp / "results.md").write_text(render_markdown(summary), encoding="utf-8")
        plot(summary, tmp / "results.png")
        for model in summary["models"]:
            (tmp / summary["results"][model]["predictions"]).write_text(
                _prediction_lines(scores[model], summary["columns"]), encoding="utf-8")
    return summary
