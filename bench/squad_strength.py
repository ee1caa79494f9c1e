"""Benchmark: how much Jia and Liang's model-independent SQuAD adversaries (AddOneSent,
AddSentMod) cost a trained span reader, beside the paper's figures.

There is no SQuAD train set offline; the only real SQuAD data is XQuAD's English file (240
paragraphs and 1,190 SQuAD v1.1 dev questions from 48 articles, CC BY-SA 4.0). So the file is
split by article, in file order: the first half of the articles (24: 632 questions) trains the
reader, the second half (24: 558 questions) is held out, attacked and scored. The reader is the
offline MiniLM-L6 fine-tuned with `configs/train/squad-cpu.yaml` on those ~600 questions, not on
SQuAD train's 87,599, so its F1 is far below the paper's models: compare the relative drops,
not the scores. Steps:

1. split PATH into WORK/train.json and WORK/heldout.json (SQuAD v1.1 JSON);
2. `advrace train configs/train/squad-cpu.yaml --set train.path=WORK/train.json
   --set dev.path=WORK/heldout.json --set epochs=N --output-dir WORK/run --quiet` (skipped with
   `--run DIR`, which reuses a trained run folder); the recipe's hyperparameters are kept, only
   the epochs are raised (default 8 instead of 2: 632 questions make 41 steps an epoch). The dev
   set is the held-out half, and `final` (not `best`) is scored, so no choice is made on it;
3. `advrace build --data WORK/heldout.json --attacks addonesent,addsentmod --seed 2017
   --out WORK/release --quiet`;
4. `advrace evaluate WORK/release --model RUN/final --out WORK/report --quiet`;
5. from the release's records (`perturbed`) and the report's per-question predictions
   (`predictions/<model>.jsonl`), paired with `original` by source question: EM and F1 over all
   questions and over the attacked questions only, the attacked share and the relative drops
   100 * (original - split) / original.

    python bench/squad_strength.py XQUAD_EN_JSON [--work runs/squad-strength] [--epochs 8]
        [--run DIR] [--seed 2017]

Re-running after the attacks change costs only the build and the evaluation:

    python bench/squad_strength.py XQUAD_EN_JSON --run runs/squad-strength/run

Reads real data: a benchmark, never a test.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)

CONFIG = ROOT / "configs" / "train" / "squad-cpu.yaml"
SPLITS = ("addonesent", "addsentmod")

# Jia and Liang (EMNLP 2017), Table 2: F1 of the single models on their 1,000 sampled SQuAD dev
# questions. Not checked against a stored copy of the table (none was found offline; the abstract's
# average over 16 models, 75% -> 36% F1, was): see docs/results.md.
PAPER = {
    "BiDAF (single)": {"original": 75.5, "addonesent": 45.7, "addsent": 34.3},
    "Match-LSTM (single)": {"original": 71.4, "addonesent": 39.0, "addsent": 27.3},
}


def advrace_cli() -> list[str]:
    """The advrace command of the interpreter running this bench (its venv's)."""
    exe = Path(sys.executable).with_name("advrace")
    return [str(exe)] if exe.exists() else [sys.executable, "-m", "advrace"]


def run(cmd: list[str]) -> float:
    """Run a command, its output passed through; returns its wall seconds; stops on failure."""
    print("+", " ".join(cmd), flush=True)
    t0 = time.perf_counter()
    done = subprocess.run(cmd, cwd=ROOT)
    if done.returncode:
        sys.exit(f"failed with exit status {done.returncode}: {' '.join(cmd)}")
    return time.perf_counter() - t0


def split_by_article(path: Path, work: Path) -> tuple[Path, Path, dict]:
    """First half of the articles (file order) to WORK/train.json, second half to WORK/heldout.json."""
    data = json.loads(path.read_text(encoding="utf-8"))
    articles = data["data"]
    half = len(articles) // 2
    out, counts = [], {}
    for name, part in (("train", articles[:half]), ("heldout", articles[half:])):
        target = work / f"{name}.json"
        target.write_text(json.dumps({"version": data.get("version", "1.1"), "data": part}, ensure_ascii=False),
                          encoding="utf-8")
        out.append(target)
        counts[name] = (len(part), sum(len(p["qas"]) for a in part for p in a["paragraphs"]))
    return out[0], out[1], counts


def read_jsonl(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_file(release: Path, split: str) -> Path:
    found = sorted((release / "data").glob(f"{split}-*.jsonl"))
    if len(found) != 1:
        sys.exit(f"{release}: expected one data file for split {split!r}, found {len(found)}")
    return found[0]


def mean(values) -> float:
    values = list(values)
    return 100 * sum(values) / len(values) if values else float("nan")


def drop(orig: float, score: float) -> float:
    return 100 * (orig - score) / orig if orig else float("nan")


def figures_of(release: Path, report: Path) -> dict:
    """Per split: EM/F1 over all questions and over the attacked ones, paired with `original`."""
    summary = json.loads((report / "results.json").read_text(encoding="utf-8"))
    (model,) = summary["models"]
    preds = read_jsonl(report / summary["results"][model]["predictions"])
    by_split: dict = {}
    for rec in preds:
        by_split.setdefault(rec["id"].split("/", 1)[0], {})[rec["source_id"]] = rec
    original = by_split["original"]
    out = {"model": model, "results_json": summary["results"][model]}
    n = len(original)
    out["original"] = {"n": n, "f1": mean(r["f1"] for r in original.values()),
                       "em": mean(r["exact_match"] for r in original.values())}
    for split in SPLITS:
        records = read_jsonl(split_file(release, split))
        attacked = [r["source_id"] for r in records if r["perturbed"]]
        scored = by_split[split]
        if set(scored) != set(original):
            sys.exit(f"{split}: its questions are not those of original")
        cell = {"n": len(scored), "attacked": len(attacked),
                "f1": mean(r["f1"] for r in scored.values()),
                "em": mean(r["exact_match"] for r in scored.values()),
                "attacked_f1_original": mean(original[s]["f1"] for s in attacked),
                "attacked_f1": mean(scored[s]["f1"] for s in attacked),
                "attacked_em_original": mean(original[s]["exact_match"] for s in attacked),
                "attacked_em": mean(scored[s]["exact_match"] for s in attacked)}
        for metric in ("f1", "em"):
            cell[f"{metric}_drop"] = drop(out["original"][metric], cell[metric])
            cell[f"attacked_{metric}_drop"] = drop(cell[f"attacked_{metric}_original"], cell[f"attacked_{metric}"])
        out[split] = cell
    return out


def check_against_report(fig: dict) -> None:
    """The all-questions scores recomputed here must be the report's own (results.json, rounded)."""
    cells = fig["results_json"]["splits"]
    for split in ("original", *SPLITS):
        for metric, key in (("f1", "f1"), ("em", "exact_match")):
            theirs = cells[split][key]
            if abs(theirs - fig[split][metric]) > 0.006:
                sys.exit(f"{split}: {key} {fig[split][metric]:.2f} here, {theirs:.2f} in the report")
    extra = sorted({k for s in SPLITS for k in cells[s] if "attacked" in k or "perturbed" in k})
    if extra:
        print(f"the report also has {', '.join(extra)}: compare them with the attacked-only figures below")


def attack_commit() -> str:
    """The last commit that changed attacks/ (and a mark when the work tree changes it)."""
    def git(*args):
        return subprocess.run(["git", *args], cwd=ROOT, capture_output=True, text=True).stdout.strip()
    commit = git("log", "-1", "--format=%h", "--", "attacks")
    dirty = git("status", "--porcelain", "--", "attacks")
    return (commit or "unknown") + (" (attacks/ modified)" if dirty else "")


def print_table(fig: dict, paper: dict) -> None:
    o = fig["original"]
    print(f"\nmodel {fig['model']}, {o['n']} held-out questions")
    print(f"{'':34}{'original':>10}" + "".join(f"{s:>26}" for s in SPLITS))
    print(f"{'F1, all questions':34}{o['f1']:10.2f}" + "".join(
        f"{fig[s]['f1']:12.2f} (drop {fig[s]['f1_drop']:5.1f}%)" for s in SPLITS))
    print(f"{'EM, all questions':34}{o['em']:10.2f}" + "".join(
        f"{fig[s]['em']:12.2f} (drop {fig[s]['em_drop']:5.1f}%)" for s in SPLITS))
    print(f"{'attacked share':34}{'':10}" + "".join(
        f"{fig[s]['attacked']:>9} / {fig[s]['n']} ({100 * fig[s]['attacked'] / fig[s]['n']:5.1f}%)" for s in SPLITS))
    print(f"{'F1, attacked only: orig -> split':34}{'':10}" + "".join(
        f"{fig[s]['attacked_f1_original']:7.2f} -> {fig[s]['attacked_f1']:5.2f} ({fig[s]['attacked_f1_drop']:5.1f}%)"
        for s in SPLITS))
    print(f"{'EM, attacked only: orig -> split':34}{'':10}" + "".join(
        f"{fig[s]['attacked_em_original']:7.2f} -> {fig[s]['attacked_em']:5.2f} ({fig[s]['attacked_em_drop']:5.1f}%)"
        for s in SPLITS))
    print("\nJia and Liang (2017), F1 on 1,000 SQuAD dev questions, every question attacked:")
    for name, p in paper.items():
        print(f"  {name:22} original {p['original']:.1f}, AddOneSent {p['addonesent']:.1f} "
              f"(drop {drop(p['original'], p['addonesent']):.1f}%), AddSent {p['addsent']:.1f} "
              f"(drop {drop(p['original'], p['addsent']):.1f}%)")


def record_figures(fig: dict, counts: dict, dev: dict, times: dict, epochs: str) -> dict:
    o = fig["original"]
    figures = {
        "questions train / held out": f"{counts['train'][1]} / {counts['heldout'][1]} "
                                      f"({counts['train'][0]} / {counts['heldout'][0]} articles)",
        "reader": f"MiniLM-L6, squad-cpu.yaml, epochs {epochs}; dev F1 {dev['dev_f1']}",
        "attacks at": attack_commit(),
        "original F1 / EM": f"{o['f1']:.2f} / {o['em']:.2f}",
    }
    for s in SPLITS:
        c = fig[s]
        figures[f"{s} F1 / EM, all"] = (f"{c['f1']:.2f} / {c['em']:.2f} "
                                        f"(drop {c['f1_drop']:.1f}% / {c['em_drop']:.1f}%)")
        figures[f"{s} attacked"] = f"{c['attacked']} of {c['n']} ({100 * c['attacked'] / c['n']:.1f}%)"
        figures[f"{s} F1, attacked only, original → split"] = (
            f"{c['attacked_f1_original']:.2f} → {c['attacked_f1']:.2f} (drop {c['attacked_f1_drop']:.1f}%)")
        figures[f"{s} EM, attacked only"] = (
            f"{c['attacked_em_original']:.2f} → {c['attacked_em']:.2f} (drop {c['attacked_em_drop']:.1f}%)")
    figures["Jia and Liang F1 (1,000 dev questions, all attacked)"] = "; ".join(
        f"{name} {p['original']} → AddOneSent {p['addonesent']} (drop {drop(p['original'], p['addonesent']):.1f}%), "
        f"AddSent {p['addsent']} (drop {drop(p['original'], p['addsent']):.1f}%)" for name, p in PAPER.items())
    figures["wall s, train / build / evaluate"] = " / ".join(
        f"{times[k]:.0f}" if k in times else "reused" for k in ("train", "build", "evaluate"))
    return figures


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", help="SQuAD v1.1 JSON to split by article (XQuAD's xquad.en.json)")
    ap.add_argument("--work", default="runs/squad-strength",
                    help="folder for the split files, the run, the release and the report "
                         "(default: runs/squad-strength, relative to the repository)")
    ap.add_argument("--run", help="an existing trained run folder (with final/): skip training")
    ap.add_argument("--epochs", type=int, default=8, help="training epochs (default 8; the recipe says 2)")
    ap.add_argument("--seed", type=int, default=2017, help="the build's seed (default 2017)")
    results.add_argument(ap)
    args = ap.parse_args(argv)

    work = Path(args.work)
    work = work if work.is_absolute() else ROOT / work
    work.mkdir(parents=True, exist_ok=True)
    train_json, heldout_json, counts = split_by_article(Path(args.path).resolve(), work)
    print(f"split {args.path} by article: train {counts['train'][1]} questions ({counts['train'][0]} articles) "
          f"-> {train_json}; held out {counts['heldout'][1]} ({counts['heldout'][0]}) -> {heldout_json}")

    cli, times = advrace_cli(), {}
    if args.run:
        run_dir = Path(args.run).resolve()
        if not (run_dir / "final").is_dir():
            sys.exit(f"{run_dir}: no final/ model in it")
        epochs = "as trained"
        info = run_dir / "config.yaml"
        if info.is_file():
            import yaml
            epochs = str(yaml.safe_load(info.read_text(encoding="utf-8")).get("epochs", epochs))
    else:
        run_dir, epochs = work / "run", str(args.epochs)
        times["train"] = run([*cli, "train", str(CONFIG), "--set", f"train.path={train_json}",
                              "--set", f"dev.path={heldout_json}", "--set", f"epochs={args.epochs}",
                              "--output-dir", str(run_dir), "--quiet"])
    dev = json.loads((run_dir / "metrics.json").read_text(encoding="utf-8"))
    dev = {"dev_f1": f"{100 * dev['dev_f1']:.2f}" if dev.get("dev_f1") is not None else "-"}

    release, report = work / "release", work / "report"
    times["build"] = run([*cli, "build", "--data", str(heldout_json), "--attacks", ",".join(SPLITS),
                          "--seed", str(args.seed), "--out", str(release), "--quiet"])
    times["evaluate"] = run([*cli, "evaluate", str(release), "--model", str(run_dir / "final"),
                             "--out", str(report), "--quiet"])

    fig = figures_of(release, report)
    check_against_report(fig)
    print_table(fig, PAPER)
    print(f"\nrun {run_dir} (dev F1 {dev['dev_f1']}), release {release}, report {report}")
    print("wall s: " + ", ".join(f"{k} {v:.0f}" for k, v in times.items()) + f"; attacks at {attack_commit()}")
    if args.record:
        results.record("squad_strength", record_figures(fig, counts, dev, times, epochs), argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
