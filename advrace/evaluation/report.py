"""The evaluation report: results.json, results.md, results.png and per-example predictions.

The layout is AdvRACE's Table 3: models as rows, splits as columns, each cell a score with its
drop from the `original` split, an average column over the adversarial splits and an
average row over models; below it, the precision and device each model was scored with. Probe
splits (diagnosis, option_only) say how a model reads rather than how robust it is, so they are
shown but not averaged. Every number is rounded once, in the summary, and the Markdown is
rendered from that summary, so the two files always agree.

One convention for the drop everywhere (results.json's `<metric>_drop`, results.md, the chart,
the README): the relative drop, DROP_DEFINITION, so a harder split has a positive drop and an
easier one (a probe such as diagnosis) a negative one.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

from advrace.core.atomic import atomic_dir
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE

ORIGINAL = "original"
TASK_METRICS = {MULTIPLE_CHOICE: ("accuracy",), EXTRACTIVE_QA: ("exact_match", "f1")}
METRIC_TITLES = {"accuracy": "Accuracy", "exact_match": "Exact match", "f1": "F1"}
MINUS = "\u2212"
DROP_DEFINITION = (f"100 × ({ORIGINAL} − split) / {ORIGINAL}: positive when the split scores lower "
                   f"than {ORIGINAL} (harder), negative when it scores higher")


def relative_drop(original: float | None, score: float | None) -> float | None:
    """100 * (original - score) / original: positive when the split is harder."""
    if original is None or score is None or original == 0:
        return None
    return 100.0 * (original - score) / original


def _mean(values) -> float | None:
    values = [v for v in values if v is not None]
    return sum(values) / len(values) if values else None


def _rounded(obj, digits: int = 2):
    if isinstance(obj, float):
        return round(obj, digits) + 0.0 if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: _rounded(v, digits) for k, v in obj.items()}
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


def summarize(manifest: dict, scores: dict, sources: dict | None = None) -> dict:
    """The content of results.json from `{model: {split: split result}}` (rounded to 2 decimals)."""
    task = manifest["task"]
    metrics = TASK_METRICS[task]
    models = list(scores)
    splits = [s for s in manifest["splits"] if any(s in scores[m] for m in models)]
    adversarial, probes = split_kinds(manifest, splits)
    results = {}
    for m in models:
        cells = {}
        for s in splits:
            if s not in scores[m]:
                continue
            res = scores[m][s]
            cell = {"n": res["n"]}
            for k in metrics:
                cell[k] = float(res[k])
                if s != ORIGINAL:
                    cell[f"{k}_drop"] = relative_drop(scores[m].get(ORIGINAL, {}).get(k), float(res[k]))
            cells[s] = cell
        average = {}
        for k in metrics:
            average[k] = _mean(cells[s][k] for s in adversarial if s in cells)
            average[f"{k}_drop"] = _mean(cells[s][f"{k}_drop"] for s in adversarial if s in cells)
        results[m] = {"splits": cells, "average": average, "source": (sources or {}).get(m, {})}
    over_models = {"splits": {}, "average": {}}
    for s in splits:
        keys = [key for k in metrics for key in ((k,) if s == ORIGINAL else (k, f"{k}_drop"))]
        over_models["splits"][s] = {key: _mean(results[m]["splits"].get(s, {}).get(key) for m in models)
                                    for key in keys}
    for key in results[models[0]]["average"] if models else ():
        over_models["average"][key] = _mean(results[m]["average"][key] for m in models)
    src = manifest.get("source", {})
    summary = {
        "drop": DROP_DEFINITION,
        "release": {"name": manifest.get("name"), "task": task,
                    "advrace_version": manifest.get("advrace_version"),
                    "source": src.get("name"), "fingerprint": src.get("fingerprint")},
        "metrics": list(metrics),
        "columns": splits,
        "adversarial_splits": adversarial,
        "probe_splits": probes,
        "split_info": {s: {"attack": manifest["splits"][s].get("attack"),
                           "source": manifest["splits"][s].get("source"),
                           "n": manifest["splits"][s].get("count")} for s in splits},
        "models": models,
        "results": results,
        "model_average": over_models,
    }
    return _rounded(summary)


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


def render_markdown(summary: dict) -> str:
    rel = summary["release"]
    columns = summary["columns"]
    probes = set(summary["probe_splits"])
    heads = [f"{s} (probe)" if s in probes else s for s in columns]
    lines = [f"# Evaluation: {rel['name']}", "",
             f"Release `{rel['name']}` ({rel['task']}), built with advrace {rel['advrace_version']} from "
             f"`{rel['source']}` (fingerprint `{(rel['fingerprint'] or '')[:16]}`); questions per split: "
             + ", ".join(f"{s} {summary['split_info'][s]['n']}" for s in columns) + ".", "",
             f"Each cell: the score and its drop from `{ORIGINAL}`, both in percent; drop = {DROP_DEFINITION}.",
             ""]
    rows = [(m, summary["results"][m]) for m in summary["models"]] + [("average", summary["model_average"])]
    for metric in summary["metrics"]:
        lines += [f"## {METRIC_TITLES[metric]}", "",
                  "| model | " + " | ".join(heads) + " | average |",
                  "|---|" + "---:|" * (len(columns) + 1)]
        for name, row in rows:
            cells = [format_cell(row["splits"].get(s), metric) for s in columns]
            lines.append(f"| {name} | " + " | ".join(cells) + f" | {format_cell(row['average'], metric)} |")
        lines.append("")
    adv = ", ".join(summary["adversarial_splits"]) or "none"
    note = f"**average** column: mean over the adversarial splits ({adv}), of scores and of drops"
    if probes:
        note += f"; probe splits ({', '.join(s for s in columns if s in probes)}) are not averaged"
    lines += [note + ". **average** row: mean over models.", ""]
    ran = [(m, summary["results"][m].get("source", {}).get("inference")) for m in summary["models"]]
    ran = [(m, info) for m, info in ran if info]
    if ran:
        lines += ["How each model was scored (bf16 and fp32 can give different predictions):", ""]
        emulated = " (emulated: no native bf16)"
        lines += [f"- `{m}`: {info.get('precision')}{emulated if info.get('bf16_emulated') else ''}"
                  f" on {info.get('device_type')}, torch {info.get('torch')}" for m, info in ran]
        lines.append("")
    return "\n".join(lines)


def plot(summary: dict, path: Path) -> None:
    """Grouped bars: one group per split, one bar per model (accuracy, or F1 for SQuAD); the
    legend gives each model's average drop over the adversarial splits."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metric = summary["metrics"][-1]
    columns, models = summary["columns"], summary["models"]
    width = 0.8 / max(len(models), 1)
    fig, ax = plt.subplots(figsize=(max(6.0, 1.2 * len(columns) * max(1, len(models)) ** 0.5 + 2), 4.5))
    for k, m in enumerate(models):
        cells = summary["results"][m]["splits"]
        heights = [(cells.get(s) or {}).get(metric) or 0.0 for s in columns]
        xs = [i - 0.4 + width * (k + 0.5) for i in range(len(columns))]
        drop = summary["results"][m]["average"].get(f"{metric}_drop")
        bars = ax.bar(xs, heights, width, label=m if drop is None else f"{m} (average {drop_text(drop, 1)})")
        if len(models) * len(columns) <= 24:
            ax.bar_label(bars, fmt="%.1f", fontsize="x-small", padding=1)
    probes = set(summary["probe_splits"])
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels([f"{s}\n(probe)" if s in probes else s for s in columns],
                       rotation=20 if len(columns) > 4 else 0, ha="right" if len(columns) > 4 else "center")
    ax.set_ylabel(f"{METRIC_TITLES[metric]} (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{summary['release']['name']}: {METRIC_TITLES[metric].lower()} per split")
    ax.grid(axis="y", alpha=0.3)
    ax.legend(fontsize="small", loc="upper center", bbox_to_anchor=(0.5, -0.14 if len(columns) <= 4 else -0.22),
              ncol=min(len(models), 4), frameon=False)
    fig.tight_layout()
    fig.savefig(path, dpi=120, metadata={"Software": None})
    plt.close(fig)


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
    """Write the report folder (replacing an earlier report there); returns the summary."""
    summary = summarize(manifest, scores, sources)
    with atomic_dir(out_dir, "results.json", "report") as tmp:
        (tmp / "predictions").mkdir()
        (tmp / "results.json").write_text(json.dumps(summary, indent=2, sort_keys=True, ensure_ascii=False)
                                          + "\n", encoding="utf-8")
        (tmp / "results.md").write_text(render_markdown(summary), encoding="utf-8")
        plot(summary, tmp / "results.png")
        for model in summary["models"]:
            (tmp / "predictions" / f"{model}.jsonl").write_text(
                _prediction_lines(scores[model], summary["columns"]), encoding="utf-8")
    return summary
