"""The study report: per split, how many answers judged the question answerable (valid rate) and
how many were right (correct rate), with 95% Wilson intervals (AdvRACE Table 3, right-hand side);
human F1 for SQuAD; the unanswerable reasons; Fleiss' kappa between annotators; and the items on
which they disagree. Rates are over annotations (an item answered by three annotators counts
three times); an "unanswerable" answer counts as valid = no and correct = no. A split that nobody
annotated has no rates: null in report.json, "n/a" in report.md, no bar in report.png, never a
measured-looking 0.
"""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.metrics import squad_em_f1

from . import store

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


def _category(a: dict) -> str:
    """What an annotation says, as a category for agreement."""
    if a["unanswerable"]:
        return "unanswerable"
    if a["task"] == MULTIPLE_CHOICE:
        return f"option {a['choice']}"
    golds = [g["text"] for g in a["payload"]["answers"]]
    return "correct" if squad_em_f1(a["answer_text"] or "", golds)[1] >= 0.5 else "incorrect"


def _correct(a: dict) -> bool:
    if a["unanswerable"]:
        return False
    if a["task"] == MULTIPLE_CHOICE:
        return a["choice"] == a["payload"]["label"]
    return squad_em_f1(a["answer_text"] or "", [g["text"] for g in a["payload"]["answers"]])[0] == 1.0


def _f1(a: dict) -> float:
    if a["unanswerable"] or a["task"] == MULTIPLE_CHOICE:
        return 0.0
    return squad_em_f1(a["answer_text"] or "", [g["text"] for g in a["payload"]["answers"]])[1]


def compute(db_path) -> dict:
    conn = store.connect(db_path)
    try:
        info = store.meta(conn)
        rows = store.annotations(conn)
        annotators = store.annotator_names(conn)
        total_items = store.items_per_split(conn)
    finally:
        conn.close()
    splits = info.get("splits") or sorted(total_items)
    result = {"study": {k: info.get(k) for k in ("release_name", "task", "seed", "per_split")},
              "annotators": annotators, "splits": {}, "disagreements": []}
    for split in splits:
        mine = [a for a in rows if a["split"] == split]
        n = len(mine)
        valid = sum(1 for a in mine if not a["unanswerable"])
        correct = sum(1 for a in mine if _correct(a))
        entry = {"items": total_items.get(split, 0), "annotations": n,
                 "valid_rate": valid / n if n else None, "valid_ci": wilson(valid, n),
                 "correct_rate": correct / n if n else None, "correct_ci": wilson(correct, n),
                 "unanswerable_reasons": dict(Counter(a["reason"] for a in mine if a["unanswerable"]))}
        if info.get("task") == EXTRACTIVE_QA:
            f1 = mean_interval([_f1(a) for a in mine])
            entry.update(human_f1=f1[0] if f1 else None, human_f1_ci=f1[1:] if f1 else None)
        by_item: dict[int, list] = {}
        for a in mine:
            by_item.setdefault(a["item_id"], []).append(a)
        entry["fleiss_kappa"] = fleiss_kappa([[_category(a) for a in v] for v in by_item.values()])
        result["splits"][split] = entry
        for v in by_item.values():
            cats = {_category(a) for a in v}
            if len(v) >= 2 and len(cats) > 1:
                result["disagreements"].append({
                    "split": split, "record_id": v[0]["record_id"],
                    "answers": {a["annotator"]: _category(a) + (f" ({a['reason']})" if a["unanswerable"] else "")
                                for a in v}})
    everyone = {}
    for a in rows:
        everyone.setdefault(a["item_id"], []).append(a)
    result["fleiss_kappa"] = fleiss_kappa([[_category(a) for a in v] for v in everyone.values()])
    return result


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _rate(rate: float | None, ci) -> str:
    """A rate with its interval, or n/a when nobody annotated the split."""
    return "n/a" if rate is None else f"{_pct(rate)} [{_pct(ci[0])}, {_pct(ci[1])}]"


def write(db_path, out_dir) -> dict:
    """report.json, report.md and report.png in `out_dir`."""
    result = compute(db_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "report.json").write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    squad = result["study"]["task"] == EXTRACTIVE_QA
    lines = [f"# Human evaluation of {result['study']['release_name']}", "",
             f"{plural(len(result['annotators']), 'annotator')}; rates over annotations with 95% Wilson intervals.", "",
             "| split | items | annotations | valid % | correct % |" + (" human F1 |" if squad else "") + " kappa |",
             "|---|---:|---:|---:|---:|" + ("---:|" if squad else "") + "---:|"]
    for split, e in result["splits"].items():
        row = (f"| {split} | {e['items']} | {e['annotations']} | {_rate(e['valid_rate'], e['valid_ci'])} | "
               f"{_rate(e['correct_rate'], e['correct_ci'])} |")
        if squad:
            row += f" {_rate(e['human_f1'], e['human_f1_ci'])} |"
        kappa = e["fleiss_kappa"]
        lines.append(row + (f" {kappa:.3f} |" if kappa is not None else " n/a |"))
    unannotated = [split for split, e in result["splits"].items() if not e["annotations"]]
    if unannotated:
        lines += ["", f"No annotations yet, so no rates (n/a): {', '.join(unannotated)}."]
    lines += ["", "## Unanswerable reasons", ""]
    for split, e in result["splits"].items():
        reasons = ", ".join(f"{r}: {c}" for r, c in sorted(e["unanswerable_reasons"].items())) or (
            "none" if e["annotations"] else "n/a")
        lines.append(f"- {split}: {reasons}")
    lines += ["", f"## Disagreements ({len(result['disagreements'])})", ""]
    for d in result["disagreements"]:
        lines.append(f"- {d['split']} `{d['record_id']}`: " + "; ".join(f"{k}: {v}" for k, v in d["answers"].items()))
    (out / "report.md").write_text("\n".join(lines) + "\n", encoding="utf-8")
    _chart(result, out / "report.png")
    return result


def _chart(result: dict, path: Path) -> None:
    import matplotlib  # third-party and slow to import: only when a chart is drawn

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    splits = list(result["splits"])
    measured = [i for i, s in enumerate(splits) if result["splits"][s]["annotations"]]
    fig, ax = plt.subplots(figsize=(max(4, 1.2 * len(splits) + 2), 3.5))
    width = 0.38
    for k, key in enumerate(("valid", "correct")):
        entries = [result["splits"][splits[i]] for i in measured]
        values = [100 * e[f"{key}_rate"] for e in entries]
        lo = [v - 100 * e[f"{key}_ci"][0] for v, e in zip(values, entries)]
        hi = [100 * e[f"{key}_ci"][1] - v for v, e in zip(values, entries)]
        ax.bar([i + (k - 0.5) * width for i in measured], values, width, yerr=[lo, hi], capsize=3,
               color=f"C{k}")
    for i in sorted(set(range(len(splits))) - set(measured)):
        ax.text(i, 2, "n/a", ha="center", va="bottom", color="grey")
    ax.set_xticks(range(len(splits)), splits, rotation=20)
    ax.set_xlim(-0.6, len(splits) - 0.4)
    ax.set_ylim(0, 105)
    ax.set_ylabel("% of annotations")
    # drawn from patches, since bars with no split measured would give the legend no colour
    ax.legend(handles=[Patch(color=f"C{k}", label=key) for k, key in enumerate(("valid", "correct"))],
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
