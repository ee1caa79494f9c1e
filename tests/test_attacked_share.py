"""How much of a split its attack changed (issue 36): an attack keeps the questions it cannot
change as copies (`perturbed: false`), so reports give the attacked share and the score on the
attacked questions alone, `advrace audit` prints the share and `advrace build` warns when an
attack changed fewer than half its questions. Numbers by hand."""

import json
import math

import pytest

from advrace.attacks import REGISTRY, Attack, CannotPerturb, register
from advrace.cli import main
from advrace.core.numbers import significant
from advrace.evaluation import evaluate_command
from advrace.evaluation.report import plot, render_markdown, summarize, write_report
from advrace.evaluation.statistics import bootstrap_interval, mcnemar_exact_p, paired_bootstrap_p
from advrace.release import attack_share_warnings, read_split

Z = 1.959963984540054


def wilson(k: int, n: int) -> list[float]:
    """The Wilson score interval in percent, written out (an independent computation)."""
    p = k / n
    centre = (p + Z * Z / (2 * n)) / (1 + Z * Z / n)
    half = Z / (1 + Z * Z / n) * math.sqrt(p * (1 - p) / n + Z * Z / (4 * n * n))
    return [round(100 * max(0.0, centre - half), 2), round(100 * min(1.0, centre + half), 2)]


def manifest_of(*splits, task: str = "multiple_choice", count: int = 10) -> dict:
    return {"name": "toy", "task": task, "advrace_version": "0.1.0",
            "source": {"name": "race", "fingerprint": "ab" * 32},
            "splits": {name: {"attack": attack, "source": None if name == "original" else "original",
                              "count": count, **({} if perturbed is None else {"perturbed": perturbed})}
                       for name, attack, perturbed in splits}}


def mc(split: str, right: dict, attacked=()) -> dict:
    """A split result as advrace's scoring makes it (advrace.evaluation.scoring.mc_split_result,
    then mark_perturbed): {source_id: correct}, the ids in `attacked` perturbed."""
    records = [{"id": f"{split}/{sid}", "source_id": sid, "prediction": 0 if ok else 1, "label": 0, "correct": ok,
                "perturbed": sid in attacked} for sid, ok in right.items()]
    return {"n": len(records), "accuracy": 100 * sum(right.values()) / len(records), "records": records}


IDS = [f"q{i}" for i in range(10)]
HALF = IDS[:5]  # the attack changed q0-q4; q5-q9 are copies of original's


def half_attacked() -> dict:
    """original: q0-q7 right (80%). addsent: of the attacked q0-q4, q3 and q4 right (2 of 5, 40%;
    the same questions scored 5 of 5 on original); the copies q5-q9 as on original (q5-q7 right).
    So 5 of 10 (50%) over all questions."""
    original = {sid: sid not in ("q8", "q9") for sid in IDS}
    split = {**original, "q0": False, "q1": False, "q2": False}
    return {"original": mc("original", original), "addsent": mc("addsent", split, attacked=HALF)}


def test_half_attacked_split_by_hand(tmp_path):
    manifest = manifest_of(("original", "none", 0), ("addsent", "addsent", 5))
    s = summarize(manifest, {"m": half_attacked()})
    cell = s["results"]["m"]["splits"]["addsent"]
    assert cell["accuracy"] == 50.0 and cell["accuracy_drop"] == 37.5  # 100 * (80 - 50) / 80: all questions
    assert cell["attacked_n"] == 5 and cell["attacked_share"] == 50.0
    assert cell["accuracy_attacked"] == 40.0 and cell["accuracy_attacked_original"] == 100.0
    assert cell["accuracy_attacked_drop"] == 60.0  # 100 * (100 - 40) / 100
    assert cell["accuracy_attacked_ci"] == wilson(2, 5) == [11.76, 76.93]
    assert cell["accuracy_ci"] == wilson(5, 10)  # the all-questions interval stays
    # the paired test on the 5 attacked questions: 3 right on original and wrong here, none the other way
    assert cell["paired_n"] == 5 and cell["accuracy_p"] == significant(mcnemar_exact_p(3, 0)) == 0.25
    assert "attacked_n" not in s["results"]["m"]["splits"]["original"]
    assert s["split_info"]["addsent"]["attacked"] == 5 and s["split_info"]["addsent"]["attacked_share"] == 50.0
    assert s["results"]["m"]["average"]["accuracy_attacked"] == 40.0
    assert s["results"]["m"]["average"]["accuracy_attacked_drop"] == 60.0
    md = render_markdown(s)
    header = md.split("## Accuracy")[0]
    assert "The drop is over all questions of the split, as AdvRACE reports it" in header
    assert "Questions attacked: addsent 5 of 10 (50.00%)." in header
    attacked = md.split("### Accuracy, attacked questions only")[1].split("\n\n")[1]
    assert "| model | addsent (5 of 10 attacked) | average |" in attacked
    assert "| m | 40.00 (original 100.00, drop 60.00%) | 40.00 (drop 60.00%) |" in attacked
    assert "| m | 80.00 | 50.00 (drop 37.50%) |" in md.split("## Accuracy")[1]  # the headline: all questions
    intervals = md.split("## 95% confidence intervals")[1].split("### Accuracy, attacked questions only")[1]
    assert "| m | 11.76–76.93 |" in intervals
    tests = md.split("## Paired tests against `original`")[1]
    assert "the questions the split's attack changed" in tests and "| model | addsent (n 5) |" in tests
    write_report(tmp_path / "report", manifest, {"m": half_attacked()})
    saved = json.loads((tmp_path / "report" / "results.json").read_text(encoding="utf-8"))
    assert saved["results"]["m"]["splits"]["addsent"] == cell
    assert "attacked_share" in saved["statistics"]["fields"]


def test_f1_on_the_attacked_questions_by_hand():
    """SQuAD: F1 on the attacked questions and its paired bootstrap on them alone."""
    f1_original = {"q0": 1.0, "q1": 0.5, "q2": 1.0, "q3": 0.0}
    f1_split = {"q0": 0.25, "q1": 0.5, "q2": 1.0, "q3": 0.0}  # q0, q1 attacked; q2, q3 copies

    def qa(split, f1, attacked):
        records = [{"id": f"{split}/{sid}", "source_id": sid, "prediction": "x", "answers": ["x"],
                    "exact_match": float(v == 1.0), "f1": v, "perturbed": sid in attacked} for sid, v in f1.items()]
        return {"n": 4, "exact_match": 100 * sum(r["exact_match"] for r in records) / 4,
                "f1": 100 * sum(f1.values()) / 4, "records": records}

    manifest = manifest_of(("original", "none", 0), ("addsent", "addsent", 2), task="extractive_qa", count=4)
    s = summarize(manifest, {"m": {"original": qa("original", f1_original, ()),
                                   "addsent": qa("addsent", f1_split, ("q0", "q1"))}})
    cell = s["results"]["m"]["splits"]["addsent"]
    assert cell["f1"] == 43.75 and cell["f1_drop"] == 30.0  # 100 * (62.5 - 43.75) / 62.5
    assert cell["attacked_n"] == 2 and cell["attacked_share"] == 50.0
    assert cell["f1_attacked"] == 37.5 and cell["f1_attacked_original"] == 75.0 and cell["f1_attacked_drop"] == 50.0
    assert cell["exact_match_attacked"] == 0.0 and cell["exact_match_attacked_original"] == 50.0
    assert cell["exact_match_attacked_drop"] == 100.0
    assert cell["f1_attacked_ci"] == [round(100 * v, 2) for v in bootstrap_interval([0.25, 0.5])]
    assert cell["paired_n"] == 2
    assert cell["f1_p"] == significant(paired_bootstrap_p([1.0, 0.5], [0.25, 0.5]))
    assert cell["exact_match_p"] == 1.0  # one discordant question (q0)


def test_no_question_attacked_gives_nulls_not_a_crash(tmp_path):
    manifest = manifest_of(("original", "none", 0), ("addsent", "addsent", 0))
    right = {sid: sid != "q9" for sid in IDS}
    scores = {"m": {"original": mc("original", right), "addsent": mc("addsent", right)}}
    s = write_report(tmp_path / "report", manifest, scores)
    cell = s["results"]["m"]["splits"]["addsent"]
    assert cell["attacked_n"] == 0 and cell["attacked_share"] == 0.0
    for key in ("accuracy_attacked", "accuracy_attacked_ci", "accuracy_attacked_original", "accuracy_attacked_drop",
                "accuracy_p"):
        assert cell[key] is None, key
    assert cell["paired_n"] == 0 and cell["accuracy"] == 90.0 and cell["accuracy_drop"] == 0.0
    assert s["results"]["m"]["average"]["accuracy_attacked"] is None
    md = (tmp_path / "report" / "results.md").read_text(encoding="utf-8")
    assert "addsent 0 of 10 (0.00%)" in md
    assert "| m | – | – |" in md.split("### Accuracy, attacked questions only")[1]
    assert (tmp_path / "report" / "results.png").stat().st_size > 0


def test_every_question_attacked_gives_the_all_questions_score():
    manifest = manifest_of(("original", "none", 0), ("charswap", "charswap", 10))
    original = {sid: sid not in ("q8", "q9") for sid in IDS}
    split = {sid: sid in ("q0", "q1", "q2") for sid in IDS}
    s = summarize(manifest, {"m": {"original": mc("original", original),
                                   "charswap": mc("charswap", split, attacked=IDS)}})
    cell = s["results"]["m"]["splits"]["charswap"]
    assert cell["attacked_n"] == 10 and cell["attacked_share"] == 100.0
    assert cell["accuracy_attacked"] == cell["accuracy"] == 30.0
    assert cell["accuracy_attacked_ci"] == cell["accuracy_ci"]
    assert cell["accuracy_attacked_original"] == 80.0
    assert cell["accuracy_attacked_drop"] == cell["accuracy_drop"] == 62.5
    assert cell["paired_n"] == 10 and cell["accuracy_p"] == significant(mcnemar_exact_p(5, 0))


def test_records_without_flags_leave_the_share_unknown():
    """Scores made outside advrace's scoring, with no `perturbed` flag: the attacked fields are
    null, and the paired test falls back to every question both splits hold."""
    manifest = manifest_of(("original", "none", None), ("charswap", "charswap", None))
    original = {sid: True for sid in IDS}
    scores = {"m": {"original": mc("original", original), "charswap": mc("charswap", {s: False for s in IDS})}}
    for res in scores["m"].values():
        for rec in res["records"]:
            del rec["perturbed"]
    s = summarize(manifest, scores)
    cell = s["results"]["m"]["splits"]["charswap"]
    assert cell["attacked_n"] is None and cell["attacked_share"] is None and cell["accuracy_attacked"] is None
    assert cell["paired_n"] == 10 and s["split_info"]["charswap"]["attacked"] is None
    assert "attacked questions only" not in render_markdown(s)


def test_a_split_no_attack_made_has_no_attacked_share():
    """A split of questions people wrote (attack `none`, every record unperturbed) is not a split
    with nothing attacked: no attacked fields, and the paired test on every question both hold."""
    manifest = manifest_of(("original", "none", 0), ("authored", "none", 0))
    original = {sid: True for sid in IDS}
    s = summarize(manifest, {"m": {"original": mc("original", original),
                                   "authored": mc("authored", {sid: sid != "q0" for sid in IDS})}})
    cell = s["results"]["m"]["splits"]["authored"]
    assert not [k for k in cell if "attacked" in k] and "attacked" not in s["split_info"]["authored"]
    assert cell["paired_n"] == 10 and cell["accuracy_p"] == 1.0


def test_chart_draws_the_attacked_bars_hatched(tmp_path, monkeypatch):
    import matplotlib.axes

    calls, bar = [], matplotlib.axes.Axes.bar

    def recording_bar(self, *args, **kwargs):
        calls.append((list(args[0]), list(args[1]), kwargs.get("hatch"), kwargs.get("label")))
        return bar(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", recording_bar)
    manifest = manifest_of(("original", "none", 0), ("addsent", "addsent", 5))
    plot(summarize(manifest, {"m": half_attacked()}), tmp_path / "results.png")
    (xs, heights, hatch, label), (axs, attacked, ahatch, alabel) = calls
    assert heights == [80.0, 50.0] and hatch is None and label == "m (average drop 37.5%)"
    assert attacked == [40.0] and ahatch == "///" and alabel is None and axs[0] > xs[1]


# --------------------------------------------------------------------------- build, audit, evaluate


class FirstOnly(Attack):
    """Upper-cases the first question of each passage only (3 of the 7 in tests' race_dir)."""

    name = "first_only_test"
    tasks = ("multiple_choice",)

    def perturb(self, example, rng):
        if not example.source_id.endswith("-0"):
            raise CannotPerturb("not a first question")
        return example.replace_spans("question", [(0, len(example.question), example.question.upper())])


class AllButLast(FirstOnly):
    """Upper-cases every question but the third of high1.txt (6 of 7)."""

    name = "all_but_last_test"

    def perturb(self, example, rng):
        if example.source_id.endswith("-2"):
            raise CannotPerturb("a third question")
        return example.replace_spans("question", [(0, len(example.question), example.question.upper())])


class ProbeFirstOnly(FirstOnly):
    name = "probe_first_only_test"
    probe = True


@pytest.fixture(scope="module")
def test_attacks():
    """The three attacks above, registered for this module's tests only."""
    for cls in (FirstOnly, AllButLast, ProbeFirstOnly):
        register(cls)
    yield
    for cls in (FirstOnly, AllButLast, ProbeFirstOnly):
        REGISTRY.unregister(cls.name)


@pytest.fixture(scope="module")
def weak_release(test_attacks, tmp_path_factory):
    from conftest import make_race_dir

    tmp = tmp_path_factory.mktemp("weak")
    out = tmp / "rel"
    code = main(["build", "--data", str(make_race_dir(tmp)), "--attacks",
                 "first_only_test,all_but_last_test,probe_first_only_test", "--workers", "1", "--quiet",
                 "--out", str(out)])
    return code, out


def test_build_warns_when_fewer_than_half_were_attacked(weak_release, capfd):
    code, out = weak_release
    assert code == 0 and (out / "manifest.json").is_file()  # written all the same
    manifest = json.loads((out / "manifest.json").read_text(encoding="utf-8"))
    assert [manifest["splits"][s]["perturbed"] for s in ("first_only_test", "all_but_last_test")] == [3, 6]
    stats = json.loads((out / "stats.json").read_text(encoding="utf-8"))
    assert attack_share_warnings(manifest, stats) == [
        "warning: first_only_test attacked 3 of 7 questions (42%); top reasons left unchanged: "
        "not a first question (4)"]  # 6 of 7 and the probe are not warned about


def test_build_warning_goes_to_stderr_after_the_summary(test_attacks, tmp_path, capsys):
    from conftest import make_race_dir

    assert main(["build", "--data", str(make_race_dir(tmp_path)), "--attacks", "first_only_test", "--workers",
                 "1", "--quiet", "--out", str(tmp_path / "rel")]) == 0
    printed = capsys.readouterr()
    assert "first_only_test" in printed.out and "warning:" not in printed.out
    assert printed.err.strip().splitlines()[-1] == ("warning: first_only_test attacked 3 of 7 questions (42%); "
                                                    "top reasons left unchanged: not a first question (4)")


def test_warning_names_the_top_reasons_and_skips_probes_and_originals():
    manifest = {"splits": {"original": {"attack": "none", "count": 1190, "perturbed": 0},
                           "addonesent": {"attack": "addonesent", "count": 1190, "perturbed": 203},
                           "charswap": {"attack": "charswap", "count": 1190, "perturbed": 595},  # exactly half
                           "diagnosis": {"attack": "diagnosis", "count": 1190, "perturbed": 3},
                           "empty": {"attack": "charswap", "count": 0, "perturbed": 0}}}
    stats = {"splits": {"addonesent": {"unperturbed_reasons": {
        "answer type undetermined": 874, "no typed fake answer": 53, "question not mutated": 33, "other": 27}}}}
    assert attack_share_warnings(manifest, stats) == [
        "warning: addonesent attacked 203 of 1,190 questions (17%); top reasons left unchanged: "
        "answer type undetermined (874), no typed fake answer (53), question not mutated (33)"]


def test_audit_prints_each_splits_attacked_share(weak_release, capsys):
    _, out = weak_release
    capsys.readouterr()
    assert main(["audit", str(out)]) == 0
    lines = capsys.readouterr().out.splitlines()
    line = {ln.split()[0]: ln for ln in lines[1:]}
    assert "attacked 3 of 7 (42%)" in line["first_only_test"]
    assert "attacked 6 of 7 (85%)" in line["all_but_last_test"]
    assert "attacked 3 of 7 (42%)" in line["probe_first_only_test"]


def test_evaluate_reports_the_attacked_share_of_a_built_release(weak_release, tmp_path):
    """Predictions wrong on high1.txt-0 and middle2.txt-1 of first_only_test, right elsewhere:
    over all 7 questions 5 right (drop 28.57%); of the 3 attacked (the first of each passage)
    1 wrong, 2 of 3 right (66.67%, drop 33.33% from 3 of 3)."""
    _, out = weak_release
    preds = {}
    for split in ("original", "first_only_test"):
        for ex in read_split(out, split):
            wrong = split != "original" and ex.source_id in ("high1.txt-0", "middle2.txt-1")
            preds[ex.id] = (ex.label + 1) % 4 if wrong else ex.label
    (tmp_path / "p.json").write_text(json.dumps(preds), encoding="utf-8")
    s = evaluate_command(out, [], [tmp_path / "p.json"], tmp_path / "report", splits=["original", "first_only_test"],
                         progress=False)
    cell = s["results"]["p"]["splits"]["first_only_test"]
    assert cell["accuracy"] == 71.43 and cell["accuracy_drop"] == 28.57
    assert cell["attacked_n"] == 3 and cell["attacked_share"] == 42.86
    assert cell["accuracy_attacked"] == 66.67 and cell["accuracy_attacked_original"] == 100.0
    assert cell["accuracy_attacked_drop"] == 33.33
    assert cell["paired_n"] == 3 and cell["accuracy_p"] == 1.0  # one discordant question
    written = [json.loads(line) for line in
               (tmp_path / "report" / "predictions" / "p.jsonl").read_text(encoding="utf-8").splitlines()]
    assert sum(r["perturbed"] for r in written if r["id"].startswith("first_only_test/")) == 3
