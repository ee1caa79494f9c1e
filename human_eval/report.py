"""The study report: per split, the valid rate (the share of judged items whose majority of
judgements chose the gold) and the correct rate (the share of judgements that chose the gold),
with 95% Wilson intervals (AdvRACE Table 3, right-hand side); human F1 for SQuAD; the reasons
given for "cannot be answered"; Fleiss' kappa of the vote; and the items on which annotators
disagree. The definitions are `votes`'s, the same as `human-eval validate`'s, so a finished study
gives the same numbers in both (the report counts every stored judgement, `validate` those of
annotators who pressed Finish; neither counts an annotator excluded for accuracy on control
questions). A split that nobody annotated has no rates: null in report.json, "n/a" in report.md,
no bar in report.png, never a measured-looking 0. Beside the splits: the baseline's rates (the
originals of studied questions), each annotator's accuracy on control questions and whether
their votes count, and the seconds per item per task and annotator.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from pathlib import Path
from types import SimpleNamespace

from advrace.core.provenance import INVALID, VALID
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.metrics import squad_em_f1
from advrace.metrics.human_rates import RATES, ci_text, kappa_text, percent_ci

from . import controls, store, verifying
from .votes import category, verdict, vote

Z95 = 1.959963984540054


def wilson(successes: int, n: int, z: float = Z95) -> tuple[float, float] | None:
    """The Wilson score interval of a proportion (better than the normal one near 0 and 1); None
    for no observations."""
    if n == 0:
        return None
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return (max(0.0, centre - half), min(1.0, centre + half))


def mean_interval(values: list[float], z: float = Z95) -> tuple[float, float, float] | None:
    """(mean, low, high) with a normal 95% interval; None for no values."""
    if not values:
        return None
    m = sum(values) / len(values)
    if len(values) < 2:
        return (m, m, m)
    sd = math.sqrt(sum((v - m) ** 2 for v in values) / (len(values) - 1))
    half = z * sd / math.sqrt(len(values))
    return (m, m - half, m + half)


def fleiss_kappa(ratings: list[list[str]]) -> float | None:
    """Fleiss' kappa for items each rated by the same number (>= 2) of raters; None when undefined."""
    ratings = [r for r in ratings if len(r) >= 2]
    if not ratings:
        return None
    n = len(ratings[0])
    ratings = [r for r in ratings if len(r) == n]
    categories = sorted({c for r in ratings for c in r})
    N = len(ratings)
    p_j = {c: sum(r.count(c) for r in ratings) / (N * n) for c in categories}
    P_i = [(sum(r.count(c) ** 2 for c in categories) - n) / (n * (n - 1)) for r in ratings]
    P_bar = sum(P_i) / N
    P_e = sum(p * p for p in p_j.values())
    if P_e == 1:
        return None
    return (P_bar - P_e) / (1 - P_e)


def _f1(a: dict) -> float:
    if a["unanswerable"] or a["task"] == MULTIPLE_CHOICE:
        return 0.0
    return squad_em_f1(a["answer_text"] or "", [g["text"] for g in a["payload"]["answers"]])[1]


def item_rates(item_votes: list[tuple], k: int, needed: list[int] | None = None) -> dict:
    """The numbers of a set of items from their votes (each item to get `k` judgements, or the
    `needed` of each where excluded annotators' votes were taken away): items judged (with a
    verdict) and valid or invalid, the valid rate over the judged items, the correct rate over the
    judgements, and Fleiss' kappa of the vote over the items with all `k`."""
    verdicts = Counter(verdict(v, n) for v, n in zip(item_votes, needed or [k] * len(item_votes)))
    judged = verdicts[VALID] + verdicts[INVALID]
    cast = [v for votes in item_votes for v in votes]
    correct = sum(v.valid for v in cast)
    return {"judged": judged, "valid": verdicts[VALID], "invalid": verdicts[INVALID],
            "valid_rate": verdicts[VALID] / judged if judged else None, "valid_ci": wilson(verdicts[VALID], judged),
            "judgements": len(cast), "correct": correct, "correct_rate": correct / len(cast) if cast else None,
            "correct_ci": wilson(correct, len(cast)),
            "fleiss_kappa": fleiss_kappa([["gold" if v.valid else "not gold" for v in votes]
                                          for votes in item_votes if len(votes) == k])}


def compute(db_path) -> dict:
    db = _read(db_path)
    info, everything, people, items = db.meta, db.annotations, db.annotators, db.items
    total_items = Counter(i["split"] for i in items if i["kind"] in store.PRIMARY_KINDS)
    splits = info.get("splits") or sorted(total_items)
    judgements = info.get("judgements") or len(people)  # a study created before --judgements: everyone judged all
    names = [p["name"] for p in people]
    finished = {p["name"] for p in people if p["finished"]}
    quality = controls.annotator_quality(info, everything, names)
    out_of = {name for name, q in quality.items() if q["excluded"]}
    needed = controls.needed_judgements(items, {p["name"]: db.queues.get(p["id"], []) for p in people}, judgements,
                                        out_of)
    counted = [a for a in everything if a["annotator"] not in out_of]
    rows = [a for a in counted if a["kind"] == store.JUDGE]
    result = {"study": {**{key: info.get(key) for key in ("release_name", "task", "seed", "per_split")},
                        "judgements": judgements, "versions_apart": info.get("versions_apart")},
              "annotators": sorted(names), "definitions": RATES,
              "unfinished_judgements": sum(a["annotator"] not in finished for a in rows),
              "splits": {}, "disagreements": []}
    everyone = []
    for split in splits:
        by_item: dict[int, list] = {}
        for a in rows:
            if a["split"] == split:
                by_item.setdefault(a["item_id"], []).append(a)
        item_votes = [tuple(vote(a) for a in v) for v in by_item.values()]
        everyone += item_votes
        result["splits"][split] = {"items": total_items.get(split, 0),
                                   **split_numbers(by_item, item_votes, judgements, needed, info.get("task"))}
        result["disagreements"] += disagreements(split, by_item)
    result["fleiss_kappa"] = item_rates(everyone, judgements)["fleiss_kappa"]
    approval = verifying.approvals(SimpleNamespace(annotators=people, queues=db.queues, items=items,
                                                   annotations=everything), out_of)
    for split, numbers in verify_numbers(items, counted, approval).items():
        result["splits"][split]["verify"] = numbers
    result["baseline"] = _baseline(items, counted, judgements, needed)
    result["quality"] = {"controls": info.get("controls") or 0, "min_accuracy": info.get("min_accuracy"),
                         "annotators": {name: {**q, "accuracy_ci": wilson(q["correct"], q["controls"])}
                                        for name, q in quality.items()}}
    result["time_per_item"] = time_per_item(db.views, everything, db.candidates)
    return result


def _read(db_path) -> SimpleNamespace:
    """Everything the report counts, read from the study database at once."""
    conn = store.connect(db_path)
    try:
        return SimpleNamespace(meta=store.meta(conn), annotations=store.annotations(conn),
                               annotators=store.annotators(conn), items=store.all_items(conn),
                               queues=store.queues(conn), views=store.views(conn), candidates=store.candidates(conn))
    finally:
        conn.close()


def split_numbers(by_item: dict[int, list], item_votes: list[tuple], judgements: int, needed: dict[int, int],
                  task: str | None) -> dict:
    """One split's numbers from its judgements by item (`by_item`, their votes `item_votes`): the
    rates, the reasons given for "cannot be answered", how many chose another answer, and for
    SQuAD the human F1."""
    mine = [a for v in by_item.values() for a in v]
    entry = {**item_rates(item_votes, judgements, [needed[iid] for iid in by_item]),
             "unanswerable_reasons": dict(Counter(a["reason"] for a in mine if a["unanswerable"])),
             "other_answers": sum(1 for v in item_votes for x in v if not x.valid) - sum(
                 1 for a in mine if a["unanswerable"])}
    if task == EXTRACTIVE_QA:
        f1 = mean_interval([_f1(a) for a in mine])
        entry.update(human_f1=f1[0] if f1 else None, human_f1_ci=f1[1:] if f1 else None)
    return entry


def disagreements(split: str, by_item: dict[int, list]) -> list[dict]:
    """The split's items on which annotators gave different answers, each annotator's answer named."""
    return [{"split": split, "record_id": v[0]["record_id"],
             "answers": {a["annotator"]: category(a) + (f" ({a['reason']})" if a["unanswerable"] else "") for a in v}}
            for v in by_item.values() if len(v) >= 2 and len({category(a) for a in v}) > 1]


def verify_numbers(items: list[dict], counted: list[dict], approval: dict) -> dict[str, dict]:
    """Each split's verify answers as what they are, approvals of people's edits and mends (never
    judgements of the split's questions): verify items, verifications, the share of
    verifications that approve (`verifying.verifier_vote`: the gold, and grammatical for a
    sentence), the share that called the sentence grammatical (where asked), and the candidates
    approved (`verifying.approvals`: a strict majority of the finished verifiers)."""
    out: dict[str, dict] = {}
    for split in sorted({i["split"] for i in items if i["kind"] == store.VERIFY}):
        mine = {i["id"]: i["candidate_id"] for i in items if i["kind"] == store.VERIFY and i["split"] == split}
        answers = [a for a in counted if a["item_id"] in mine]
        approving = sum(verifying.verifier_vote(a).valid for a in answers)
        asked = [a["grammatical"] for a in answers if a["grammatical"] is not None]
        candidates = set(mine.values())
        out[split] = {"verify_items": len(mine), "verifications": len(answers), "approving": approving,
                      "approve_rate": approving / len(answers) if answers else None,
                      "approve_ci": wilson(approving, len(answers)), "grammatical": sum(asked),
                      "grammatical_asked": len(asked), "grammatical_rate": sum(asked) / len(asked) if asked else None,
                      "grammatical_ci": wilson(sum(asked), len(asked)), "candidates": len(candidates),
                      "candidates_approved": sum(approval[c].approved for c in candidates if c in approval)}
    return out


def _baseline(items: list[dict], counted: list[dict], k: int, needed: dict[int, int]) -> dict | None:
    """The rates of the baseline items (the originals of studied questions), by the same
    definitions as a split's; None for a study without them."""
    ids = [i["id"] for i in items if i["kind"] == store.BASELINE]
    if not ids:
        return None
    by_item: dict[int, list] = {iid: [] for iid in ids}
    for a in counted:
        if a["item_id"] in by_item:
            by_item[a["item_id"]].append(vote(a))
    split = next(i["split"] for i in items if i["kind"] == store.BASELINE)
    return {"split": split, "items": len(ids), **item_rates([tuple(v) for v in by_item.values()], k,
                                                              [needed[iid] for iid in by_item])}


def time_per_item(views: list[dict], annotations: list[dict], candidates: list[dict]) -> dict:
    """Seconds from an item's page first shown to the person's first save of it (an answer, or
    for an edit item their edit), per task kind, overall and per annotator: the median and how
    many items. Items answered without a view (read in from a platform's file) are not timed."""
    saved: dict[tuple, float] = {}
    for row in [*annotations, *candidates]:
        key = (row["person_id"], row["item_id"])
        saved[key] = min(saved.get(key, row["created"]), row["created"])
    spent: dict[str, dict[str, list[float]]] = {}
    for v in views:
        done = saved.get((v["person_id"], v["item_id"]))
        if done is not None and done >= v["first_shown"]:
            spent.setdefault(v["kind"], {}).setdefault(v["annotator"], []).append(done - v["first_shown"])

    def summary(seconds: list[float]) -> dict:
        return {"items": len(seconds), "median_seconds": statistics.median(seconds)}

    return {kind: {"all": summary([s for mine in by.values() for s in mine]),
                   "annotators": {name: summary(mine) for name, mine in sorted(by.items())}}
            for kind, by in sorted(spent.items())}


def write(db_path, out_dir) -> dict:
    """report.json, report.md and report.png in `out_dir`."""
    result = compute(db_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    squad = result["study"]["task"] == EXTRACTIVE_QA
    lines = [f"# Human evaluation of {result['study']['release_name']}", "",
             f"{plural(len(result['annotators']), 'annotator')}, {plural(result['study']['judgements'], 'judgement')} "
             f"per item; rates with 95% Wilson intervals. {RATES}", "",
             "| split | items | judged | judgements | valid (items) | correct (judgements) |"
             + (" human F1 |" if squad else "") + " kappa |",
             "|---|---:|---:|---:|---:|---:|" + ("---:|" if squad else "") + "---:|"]
    for split, e in result["splits"].items():
        row = (f"| {split} | {e['items']} | {e['judged']} | {e['judgements']} | {percent_ci(e['valid_rate'], e['valid_ci'])} | "
               f"{percent_ci(e['correct_rate'], e['correct_ci'])} |")
        if squad:
            row += f" {_f1_text(e['human_f1'], e['human_f1_ci'])} |"
        lines.append(row + f" {kappa_text(e['fleiss_kappa'])} |")
    base = result["baseline"]
    if base:
        lines.append(f"| baseline: {base['split']} | {base['items']} | {base['judged']} | {base['judgements']} | "
                     f"{percent_ci(base['valid_rate'], base['valid_ci'])} | "
                     f"{percent_ci(base['correct_rate'], base['correct_ci'])} |" + (" |" if squad else "")
                     + f" {kappa_text(base['fleiss_kappa'])} |")
        lines += ["", "Baseline: the original questions of a seeded share of the studied ones, each judged by "
                      "annotators who had no version of it, so that the valid rate of what was not attacked "
                      "stands beside the attacked splits'."]
    unannotated = [split for split, e in result["splits"].items() if not e["judgements"]]
    if unannotated:
        lines += ["", f"No judgements yet, so no rates (n/a): {', '.join(unannotated)}."]
    if result["unfinished_judgements"]:
        lines += ["", f"{plural(result['unfinished_judgements'], 'judgement')} of annotators who have not pressed "
                      "Finish are counted here; `advrace human-eval validate` counts only finished annotators'."]
    lines += ["", *verify_lines(result), *quality_lines(result), "## Other answers than the gold", ""]
    for split, e in result["splits"].items():
        reasons = ", ".join(f"{r}: {c}" for r, c in sorted(e["unanswerable_reasons"].items())) or "none"
        lines.append(f"- {split}: " + (f"another answer: {e['other_answers']}; cannot be answered: {reasons}"
                                       if e["judgements"] else "n/a"))
    lines += ["", f"## Disagreements ({len(result['disagreements'])})", ""]
    for d in result["disagreements"]:
        lines.append(f"- {d['split']} `{d['record_id']}`: " + "; ".join(f"{k}: {v}" for k, v in d["answers"].items()))
    lines += ["", "## Time per item", "", *time_lines(result["time_per_item"])]
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _chart(result, out / "report.png")
    return result


def verify_lines(result: dict) -> list[str]:
    """The verify answers per split: approvals of people's edits and mends, not judgements."""
    rows = {split: e["verify"] for split, e in result["splits"].items() if "verify" in e}
    if not rows:
        return []
    lines = ["## Verification of people's edits and mends", "",
             "Verify answers are not judgements of a split's questions: each approves an edit or mend when it "
             "chose the gold (and, for a sentence, called it grammatical); a candidate is approved when more than "
             "half of its verifiers (those who pressed Finish) approved it.", "",
             "| split | verify items | verifications | approving | grammatical | candidates approved |",
             "|---|---:|---:|---:|---:|---:|"]
    for split, v in rows.items():
        lines.append(f"| {split} | {v['verify_items']} | {v['verifications']} | "
                     f"{percent_ci(v['approve_rate'], v['approve_ci'])} | "
                     f"{percent_ci(v['grammatical_rate'], v['grammatical_ci']) if v['grammatical_asked'] else 'not asked'} "
                     f"| {v['candidates_approved']} of {v['candidates']} |")
    return lines + [""]


def quality_lines(result: dict) -> list[str]:
    """Whether versions of a question were kept apart, and each annotator's accuracy on the
    control questions and whether their votes count."""
    apart = result["study"]["versions_apart"]
    lines = ["## Quality control", "",
             {True: "Two versions of one question never went to one annotator.",
              False: "One annotator could judge several versions of one question (--same-annotator-versions).",
              None: "The study predates keeping versions apart: one annotator may have judged several versions "
                    "of one question."}[apart], ""]
    q = result["quality"]
    if not q["controls"]:
        return lines + ["No control questions (create --controls RATE mixes them in).", ""]
    lines += [f"Control questions (original questions with a known answer) made up about {q['controls']:.0%} of each "
              f"queue. An annotator below {q['min_accuracy']} accuracy on them is excluded: their judgements count "
              "nowhere above, and an item they judged takes its verdict over the judgements that count.", "",
              "| annotator | controls answered | accuracy | votes |", "|---|---:|---:|---|"]
    for name, a in q["annotators"].items():
        standing = ("excluded" if a["excluded"] else
                    "counted; flagged: answered no control question" if a["flagged"] else "counted")
        lines.append(f"| {name} | {a['controls']} | {percent_ci(a['accuracy'], a['accuracy_ci'])} | {standing} |")
    return lines + [""]


def time_lines(times: dict) -> list[str]:
    """Median seconds per item, from the page first shown to the first save, per task and annotator."""
    if not times:
        return ["No timed items (an item is timed from its page first shown in the app to its first save)."]
    lines = ["From an item's page first shown in the app to its first save.", "",
             "| task | annotator | items | median seconds |", "|---|---|---:|---:|"]
    for kind, t in times.items():
        lines.append(f"| {kind} | all | {t['all']['items']} | {t['all']['median_seconds']:.1f} |")
        lines += [f"| {kind} | {name} | {a['items']} | {a['median_seconds']:.1f} |"
                  for name, a in t["annotators"].items()]
    return lines


def _f1_text(f1: float | None, ci) -> str:
    return "n/a" if f1 is None else f"{100 * f1:.1f} ({ci_text(ci)})"


def _chart(result: dict, path: Path) -> None:
    import matplotlib  # third-party and slow to import: only when a chart is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    entries = {**result["splits"], **({"baseline": result["baseline"]} if result["baseline"] else {})}
    splits = list(entries)
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(splits) + 2), 3.5))
    width = 0.38
    for k, key in enumerate(("valid", "correct")):
        measured = [i for i, s in enumerate(splits) if entries[s][f"{key}_rate"] is not None]
        shown = [entries[splits[i]] for i in measured]
        values = [100 * e[f"{key}_rate"] for e in shown]
        # at 0 or 1 the interval's end can be a rounding error past the rate: no negative bar
        lo = [max(0.0, v - 100 * e[f"{key}_ci"][0]) for v, e in zip(values, shown)]
        hi = [max(0.0, 100 * e[f"{key}_ci"][1] - v) for v, e in zip(values, shown)]
        ax.bar([i + (k - 0.5) * width for i in measured], values, width, yerr=[lo, hi], capsize=3,
               color=f"C{k}")
    for i in [i for i, s in enumerate(splits) if not entries[s]["judgements"]]:
        ax.text(i, 2, "n/a", ha="center", va="bottom", color="grey")
    ax.set_xticks(range(len(splits)), splits, rotation=20)
    ax.set_xlim(-0.6, len(splits) - 0.4)
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of items (valid), of judgements (correct)", fontsize=8)
    # drawn from patches, since bars with no split measured would give the legend no colour
    ax.legend(handles=[Patch(color=f"C{k}", label=key) for k, key in enumerate(("valid items", "correct judgements"))],
              loc="lower center", bbox_to_anchor=(0.5, 1.0), ncol=2, frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def export_jsonl(db_path, out_file) -> int:
    """Every annotation as one JSON line; returns how many."""
    conn = store.connect(db_path)
    try:
        rows = store.annotations(conn)
    finally:
        conn.close()
    Path(out_file).parent.mkdir(parents=True, exist_ok=True)
    with open(out_file, "w", encoding="utf-8") as f:
        for a in rows:
            f.write(json.dumps({k: a[k] for k in ("annotator", "split", "record_id", "source_id", "choice",
                                                  "answer_text", "answer_start", "unanswerable", "reason",
                                                  "comment", "created", "updated", "revisions")},
                               ensure_ascii=False) + "\n")
    return len(rows)
