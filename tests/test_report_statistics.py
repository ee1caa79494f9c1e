"""The report's statistics (intervals, paired tests), its optional accuracy_norm, its chart and
what it calls each model. All on hand-made split results: no release, no model."""

import dataclasses
import json
import math
from pathlib import Path

import pytest

from advrace.core.numbers import significant
from advrace.evaluation import naming
from advrace.evaluation.naming import report_label, report_labels
from advrace.evaluation.report import plot, render_markdown, summarize, write_report
from advrace.evaluation.statistics import (bootstrap_interval, mcnemar_exact_p, paired_bootstrap_p,
                                           wilson_interval)

# --------------------------------------------------------------------------- statistics


def test_wilson_interval_known_values():
    low, high = wilson_interval(50, 100)
    assert (100 * low, 100 * high) == (pytest.approx(40.383, abs=1e-3), pytest.approx(59.617, abs=1e-3))
    low, high = wilson_interval(0, 10)  # unlike Wald's [0, 0], the upper end is z²/(n + z²)
    assert low == 0.0 and high == pytest.approx(1.959964 ** 2 / (10 + 1.959964 ** 2), rel=1e-6)
    low, high = wilson_interval(10, 10)
    assert high == 1.0 and low == pytest.approx(1 - 0.277532, abs=1e-6)
    low, high = wilson_interval(81, 90)  # 0.9: the interval leans towards 0.5
    assert low == pytest.approx(0.82076, abs=1e-5) and high == pytest.approx(0.94649, abs=1e-5)
    assert wilson_interval(0, 0) is None


def binomial_p(b: int, c: int) -> float:
    """The exact two-sided McNemar p-value in log space (an independent computation)."""
    n, k = b + c, min(b, c)
    logs = [math.lgamma(n + 1) - math.lgamma(i + 1) - math.lgamma(n - i + 1) - n * math.log(2) for i in range(k + 1)]
    top = max(logs)
    return min(1.0, 2 * math.exp(top) * sum(math.exp(v - top) for v in logs))


def test_mcnemar_exact_p_by_hand():
    assert mcnemar_exact_p(1, 9) == pytest.approx(2 * (1 + 10) / 2 ** 10) == pytest.approx(0.021484375)
    assert mcnemar_exact_p(9, 1) == mcnemar_exact_p(1, 9)
    assert mcnemar_exact_p(0, 7) == pytest.approx(2 / 2 ** 7)
    assert mcnemar_exact_p(3, 3) == 1.0 and mcnemar_exact_p(0, 0) == 1.0  # no discordant pair: no evidence
    assert mcnemar_exact_p(12, 30) == pytest.approx(2 * sum(math.comb(42, i) for i in range(13)) / 2 ** 42, rel=1e-12)
    for b, c in [(3000, 3400), (40, 600), (1500, 1501)]:  # thousands of questions: no overflow or underflow
        assert mcnemar_exact_p(b, c) == pytest.approx(binomial_p(b, c), rel=1e-9)
    assert 0 < mcnemar_exact_p(40, 600) < 1e-100
    with pytest.raises(ValueError):
        mcnemar_exact_p(-1, 3)


def test_bootstrap_interval_is_deterministic_and_brackets_the_mean():
    values = [0.0, 0.25, 0.5, 1.0, 1.0, 0.8, 0.1, 0.0, 0.66, 1.0]
    first = bootstrap_interval(values)
    assert first == bootstrap_interval(list(values))  # the same resamples every run
    assert first != bootstrap_interval(values, seed=1)
    low, high = first
    assert low < sum(values) / len(values) < high and 0.0 <= low and high <= 1.0
    assert bootstrap_interval([0.4] * 30) == (pytest.approx(0.4), pytest.approx(0.4))
    assert bootstrap_interval([]) is None


def test_paired_bootstrap_p():
    x = [0.9, 1.0, 0.8, 1.0, 0.7, 0.95, 1.0, 0.85] * 5
    y = [v - 0.5 for v in x]
    assert paired_bootstrap_p(x, x) == 1.0
    assert paired_bootstrap_p(x, y) == pytest.approx(1 / 1001)  # every resample keeps the difference
    noisy = [0.2, 0.9, 0.4, 0.6, 0.5, 0.1, 0.8, 0.3]
    shifted = [0.3, 0.7, 0.5, 0.5, 0.6, 0.0, 0.9, 0.2]
    p = paired_bootstrap_p(noisy, shifted)
    assert 0.2 < p <= 1.0 and p == paired_bootstrap_p(noisy, shifted)
    with pytest.raises(ValueError):
        paired_bootstrap_p([1.0], [1.0, 0.0])


# --------------------------------------------------------------------------- the report


def manifest_of(*splits: tuple[str, str], task: str = "multiple_choice") -> dict:
    return {"name": "toy", "task": task, "advrace_version": "0.1.0",
            "source": {"name": "race", "fingerprint": "ab" * 32},
            "splits": {name: {"attack": attack, "source": None if name == "original" else "original", "count": 10}
                       for name, attack in splits}}


def mc_result(split: str, right: dict, norm: dict | None = None, options: int = 4) -> dict:
    """A multiple-choice split result from {source_id: correct}; `norm` adds accuracy_norm."""
    records = []
    for sid, ok in right.items():
        rec = {"id": f"{split}/{sid}", "source_id": sid, "prediction": 0 if ok else 1, "label": 0,
               "correct": ok, "scores": [0.0] * options}
        if norm is not None:
            rec.update(correct_norm=norm[sid], prediction_norm=0 if norm[sid] else 1)
        records.append(rec)
    res = {"n": len(records), "accuracy": 100 * sum(right.values()) / len(records), "records": records}
    if norm is not None:
        res["accuracy_norm"] = 100 * sum(norm.values()) / len(records)
    return res


ORIGINAL_IDS = [f"q{i}" for i in range(10)]
SPLIT_IDS = [f"q{i}" for i in range(8)] + ["q99"]  # the attack failed on q8 and q9; q99 is not in original


def test_paired_test_on_the_questions_both_splits_hold():
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    scores = {
        # right on all of original, wrong on every charswap question: 8 discordant pairs, all one way
        "fragile": {"original": mc_result("original", dict.fromkeys(ORIGINAL_IDS, True)),
                    "charswap": mc_result("charswap", dict.fromkeys(SPLIT_IDS, False))},
        # the same answers on both: no discordant pair
        "steady": {"original": mc_result("original", {s: int(s[1:]) % 2 == 0 for s in ORIGINAL_IDS}),
                   "charswap": mc_result("charswap", {s: int(s[1:]) % 2 == 0 for s in SPLIT_IDS})},
    }
    s = summarize(manifest, scores)
    fragile, steady = s["results"]["fragile"]["splits"], s["results"]["steady"]["splits"]
    assert fragile["charswap"]["paired_n"] == 8 and steady["charswap"]["paired_n"] == 8
    assert fragile["charswap"]["accuracy_p"] == significant(mcnemar_exact_p(8, 0)) == 0.007812  # 4 digits
    assert steady["charswap"]["accuracy_p"] == 1.0
    assert "accuracy_p" not in fragile["original"] and "paired_n" not in fragile["original"]
    assert fragile["original"]["accuracy_ci"] == [72.25, 100.0]  # Wilson, 10 of 10
    assert fragile["charswap"]["accuracy_ci"] == [0.0, 29.91]  # 0 of 9
    assert s["statistics"]["level"] == 95 and "Wilson" in s["statistics"]["interval"]
    assert "McNemar" in s["statistics"]["paired_test"] and "bootstrap" not in s["statistics"]["paired_test"]
    assert s["chance"] == 25.0
    md = render_markdown(s)
    assert "| fragile | 72.25–100.00 | 0.00–29.91 |" in md
    assert "| model | charswap (n 8) |" in md and "| fragile | 0.008 |" in md and "| steady | 1.000 |" in md
    assert "Wilson score interval for accuracy" in md and "exact McNemar test" in md


def test_accuracy_norm_for_one_model_only(tmp_path):
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    lm_original = mc_result("original", dict.fromkeys(ORIGINAL_IDS, True), norm=dict.fromkeys(ORIGINAL_IDS, True))
    lm_split = mc_result("charswap", {s: s != "q0" for s in SPLIT_IDS}, norm={s: s == "q99" for s in SPLIT_IDS})
    plain = {"original": mc_result("original", dict.fromkeys(ORIGINAL_IDS, True)),
             "charswap": mc_result("charswap", dict.fromkeys(SPLIT_IDS, True))}
    assert summarize(manifest, {"plain": plain})["metrics"] == ["accuracy"]
    s = summarize(manifest, {"plain": plain, "lm": {"original": lm_original, "charswap": lm_split}},
                  {"lm": {"kind": "model", "path": "smollm2", "method": "loglikelihood"}})
    assert s["metrics"] == ["accuracy", "accuracy_norm"]
    lm = s["results"]["lm"]["splits"]["charswap"]
    assert lm["accuracy_norm"] == 11.11 and lm["accuracy_norm_drop"] == 88.89
    assert lm["accuracy_norm_ci"] == [1.99, 43.5]  # Wilson, 1 of 9
    assert lm["accuracy_norm_p"] == significant(mcnemar_exact_p(8, 0))  # q0..q7 right in original, wrong here
    assert lm["accuracy_p"] == 1.0  # one discordant question (q0)
    assert "accuracy_norm" not in s["results"]["plain"]["splits"]["charswap"]
    assert s["results"]["plain"]["average"]["accuracy_norm"] is None
    assert {k: v for k, v in s["results"]["lm"]["average"].items() if "attacked" not in k} == {"accuracy": 88.89, "accuracy_drop": 11.11,
                                             "accuracy_norm": 11.11, "accuracy_norm_drop": 88.89}
    assert s["model_average"]["splits"]["charswap"]["accuracy_norm"] == 11.11  # over the models that have it
    md = render_markdown(s)
    norm_table = md.split("## Accuracy (length-normalized)")[1].split("\n\n")[1]
    assert "| plain | – | – | – |" in norm_table and "| lm | 100.00 | 11.11 (drop 88.89%) |" in norm_table
    intervals = md.split("## 95% confidence intervals")[1].split("### Accuracy (length-normalized)")[1]
    assert "| lm |" in intervals.split("## ")[0] and "| plain |" not in intervals.split("## ")[0]
    assert "- `lm`: method: loglikelihood" in md.splitlines()
    write_report(tmp_path / "report", manifest, {"plain": plain, "lm": {"original": lm_original, "charswap": lm_split}})
    saved = json.loads((tmp_path / "report" / "results.json").read_text(encoding="utf-8"))
    assert saved["metrics"] == ["accuracy", "accuracy_norm"]


def qa_result(split: str, f1: dict, em: dict) -> dict:
    records = [{"id": f"{split}/{sid}", "source_id": sid, "prediction": "x", "answers": ["x"],
                "exact_match": em[sid], "f1": f1[sid]} for sid in f1]
    return {"n": len(records), "exact_match": 100 * sum(em.values()) / len(records),
            "f1": 100 * sum(f1.values()) / len(records), "records": records}


def test_squad_cells_get_a_bootstrap_interval_and_paired_bootstrap_p(tmp_path):
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"), task="extractive_qa")
    ids = [f"q{i}" for i in range(40)]
    f1 = {s: (i % 5) / 4 for i, s in enumerate(ids)}
    scores = {"m": {"original": qa_result("original", f1, {s: float(v == 1.0) for s, v in f1.items()}),
                    "charswap": qa_result("charswap", {s: v * 0.5 for s, v in f1.items()},
                                          {s: 0.0 for s in ids})}}
    s = summarize(manifest, scores)
    assert s == summarize(manifest, scores)  # the bootstrap is seeded
    assert s["chance"] is None and s["metrics"] == ["exact_match", "f1"]
    original, charswap = s["results"]["m"]["splits"]["original"], s["results"]["m"]["splits"]["charswap"]
    low, high = original["f1_ci"]
    assert low < original["f1"] == 50.0 < high and high - low < 40
    assert original["exact_match_ci"] == [10.5, 34.76]  # Wilson, 8 of 40
    assert charswap["paired_n"] == 40
    assert charswap["exact_match_p"] == significant(mcnemar_exact_p(8, 0))
    assert charswap["f1_p"] < 0.01  # every question lost half its F1 (or had none)
    assert "bootstrap" in s["statistics"]["interval"] and "paired bootstrap" in s["statistics"]["paired_test"]


# --------------------------------------------------------------------------- the chart


def record_calls(monkeypatch):
    import matplotlib.axes

    calls = {"bar": [], "axhline": []}
    for name in calls:
        original = getattr(matplotlib.axes.Axes, name)

        def recording(self, *args, _name=name, _original=original, **kwargs):
            calls[_name].append((args, kwargs))
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(matplotlib.axes.Axes, name, recording)
    return calls


def test_chart_has_a_chance_line_and_error_bars(tmp_path, monkeypatch):
    calls = record_calls(monkeypatch)
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    three = {"m": {"original": mc_result("original", dict.fromkeys(ORIGINAL_IDS, True), options=3),
                   "charswap": mc_result("charswap", {s: s < "q5" for s in SPLIT_IDS}, options=3)}}
    s = summarize(manifest, three)
    assert s["chance"] == pytest.approx(33.33)  # 3 options per question
    plot(s, tmp_path / "chart.png")
    assert (tmp_path / "chart.png").read_bytes().startswith(b"\x89PNG\r\n\x1a\n")
    [(args, kwargs)] = calls["axhline"]
    assert args[0] == pytest.approx(33.33) and kwargs["linestyle"] == "--" and "chance" in kwargs["label"]
    [(args, kwargs)] = calls["bar"]
    heights, (below, above) = args[1], kwargs["yerr"]
    cells = s["results"]["m"]["splits"]
    for h, lo, hi, split in zip(heights, below, above, ["original", "charswap"]):
        assert (h - lo, h + hi) == pytest.approx(tuple(cells[split]["accuracy_ci"]))
    assert above[0] == 0.0 and below[0] > 0  # 100%: the interval only goes down


def test_squad_chart_has_no_chance_line(tmp_path, monkeypatch):
    calls = record_calls(monkeypatch)
    manifest = manifest_of(("original", "none"), task="extractive_qa")
    f1 = {f"q{i}": i / 10 for i in range(10)}
    s = summarize(manifest, {"m": {"original": qa_result("original", f1, dict.fromkeys(f1, 0.0))}})
    plot(s, tmp_path / "chart.png")
    assert calls["axhline"] == [] and (tmp_path / "chart.png").stat().st_size > 0
    [(args, kwargs)] = calls["bar"]
    assert kwargs["yerr"][0][0] > 0 and kwargs["yerr"][1][0] > 0  # the F1 bootstrap interval


# --------------------------------------------------------------------------- model names


def checkpoint(folder: Path, run_name: str | None) -> Path:
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}", encoding="utf-8")
    if run_name is not None:
        info = {"config": {"name": run_name, "max_length": 128}, "objective": "multiple_choice"}
        (folder / "training_info.json").write_text(json.dumps(info), encoding="utf-8")
    return folder


class Named:
    def __init__(self, name):
        self.name = name


def test_two_final_folders_are_named_by_their_runs(tmp_path):
    bert = checkpoint(tmp_path / "runs" / "a" / "final", "bert-race")
    roberta = checkpoint(tmp_path / "runs" / "b" / "final", "roberta-race")
    assert report_labels([str(bert), roberta]) == ["bert-race", "roberta-race"]
    # a run that kept the default name, and a folder that `advrace train` did not write
    default = checkpoint(tmp_path / "dg-sample" / "final", naming.DEFAULT_RUN_NAME)
    foreign = checkpoint(tmp_path / "downloads" / "final", None)
    assert report_labels([default, foreign]) == ["dg-sample/final", "downloads/final"]
    # best and final of one run share its name: each gets its folder too
    best = checkpoint(tmp_path / "runs" / "a" / "best", "bert-race")
    assert report_labels([bert, best, roberta]) == ["bert-race/final", "bert-race/best", "roberta-race"]
    assert report_labels([bert, bert]) == ["bert-race/final", "bert-race/final-2"]


def test_hub_builtin_and_scorer_names():
    assert report_label("someone/roberta-large-race") == "someone/roberta-large-race"  # not a folder here
    assert report_label("sliding-window") == "sliding-window" and report_label("smollm2") == "smollm2"
    assert report_label("similarity:/no/such/encoder") == "similarity:/no/such/encoder"
    assert report_label(Named("my | model")) == "my _ model"  # a pipe would split a table row
    assert report_labels([Named("toy"), Named("toy")], [Path("p/toy.json"), "p/gold.jsonl"]) == [
        "toy", "toy-2", "toy-3", "gold"]


def test_default_run_name_is_trains_default():
    from advrace.training.config import TrainConfig

    default = {f.name: f.default for f in dataclasses.fields(TrainConfig)}["name"]
    assert naming.DEFAULT_RUN_NAME == default


def test_labels_with_a_slash_get_file_safe_prediction_files(tmp_path):
    manifest = manifest_of(("original", "none"))
    scores = {name: {"original": mc_result("original", dict.fromkeys(ORIGINAL_IDS, True))}
              for name in ["owner/name", "owner_name", "dg-sample/final"]}
    s = write_report(tmp_path / "report", manifest, scores)
    assert s["models"] == ["owner/name", "owner_name", "dg-sample/final"]
    assert [s["results"][m]["predictions"] for m in s["models"]] == [
        "predictions/owner_name.jsonl", "predictions/owner_name-2.jsonl", "predictions/dg-sample_final.jsonl"]
    assert sorted(p.name for p in (tmp_path / "report" / "predictions").iterdir()) == [
        "dg-sample_final.jsonl", "owner_name-2.jsonl", "owner_name.jsonl"]
    assert "| owner/name | 100.00 | – |" in (tmp_path / "report" / "results.md").read_text(encoding="utf-8")


def test_paired_difference_by_hand():
    """B − A on paired questions: the mean difference, the bootstrap interval of the per-question
    differences, McNemar on right-or-wrong values and the paired bootstrap on F1."""
    from advrace.evaluation.statistics import paired_difference

    a, b = [1, 1, 1, 0, 1], [1, 0, 0, 0, 1]
    found = paired_difference(a, b, binary=True)
    assert found["n"] == 5 and found["difference"] == pytest.approx(-0.4)
    assert found["p"] == mcnemar_exact_p(2, 0) == 0.5
    assert found["ci"] == bootstrap_interval([0, -1, -1, 0, 0]) and found["ci"][0] < -0.4 < found["ci"][1] <= 0
    f1 = paired_difference([0.5, 1.0, 0.2], [0.5, 0.5, 0.2], binary=False)
    assert f1["difference"] == pytest.approx(-0.5 / 3) and f1["p"] == paired_bootstrap_p([0.5, 1.0, 0.2], [0.5, 0.5, 0.2])
    assert paired_difference([], [], binary=True) is None
    with pytest.raises(ValueError, match="equal lengths"):
        paired_difference([1], [1, 0], binary=True)
