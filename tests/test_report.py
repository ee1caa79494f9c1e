import json
import re
from pathlib import Path

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.models.runtime.precision import bf16_emulated
from advrace.release import build_release, read_split
from advrace.evaluation.report import (DROP_DEFINITION, METRIC_TITLES, MINUS, drop_text, relative_drop,
                                       render_markdown, summarize, write_report)
from conftest import race_passage, squad_doc

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


@pytest.fixture(scope="module")
def mc_release(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("mc")
    root = tmp / "RACE" / "test"
    for sub, n, k in [("high", 1, 3), ("middle", 2, 2), ("middle", 10, 2)]:
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / f"{n}.txt").write_text(json.dumps(race_passage(f"{sub}{n}.txt", k)), encoding="utf-8")
    cfg = release_config_from_dict({"data": {"path": str(root)}, "splits": ["charswap", "option_only"], "workers": 1})
    build_release(cfg, tmp / "release")
    return tmp / "release"


def manifest_of(*splits: tuple[str, str]) -> dict:
    return {"name": "toy", "task": "multiple_choice", "advrace_version": "0.1.0",
            "source": {"name": "race", "fingerprint": "ab" * 32},
            "splits": {name: {"attack": attack, "source": None if name == "original" else "original", "count": 10}
                       for name, attack in splits}}


def cell(accuracy: float) -> dict:
    return {"n": 10, "accuracy": accuracy, "records": []}


def scores_only(c: dict) -> dict:
    """A results.json cell without its interval, paired test and attacked-only scores
    (tests/test_report_statistics.py and tests/test_attacked_share.py check those)."""
    return {k: v for k, v in c.items() if not k.endswith(("_ci", "_p")) and k != "paired_n" and "attacked" not in k}


def test_summary_drops_and_averages_by_hand():
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"), ("addsent", "addsent"),
                           ("diagnosis", "diagnosis"))
    scores = {
        "a": {"original": cell(80.0), "charswap": cell(60.0), "addsent": cell(40.0), "diagnosis": cell(90.0)},
        "b": {"original": cell(50.0), "charswap": cell(45.0), "addsent": cell(25.0), "diagnosis": cell(40.0)},
    }
    s = summarize(manifest, scores)
    assert s["columns"] == ["original", "charswap", "addsent", "diagnosis"]
    assert s["adversarial_splits"] == ["charswap", "addsent"] and s["probe_splits"] == ["diagnosis"]
    a = s["results"]["a"]
    assert scores_only(a["splits"]["charswap"]) == {"n": 10, "accuracy": 60.0, "accuracy_drop": 25.0}
    assert a["splits"]["charswap"]["accuracy_ci"] == [31.27, 83.18]  # Wilson, 6 of 10
    assert a["splits"]["charswap"]["paired_n"] == 0 and a["splits"]["charswap"]["accuracy_p"] is None  # no records
    assert a["splits"]["addsent"]["accuracy_drop"] == 50.0
    assert a["splits"]["diagnosis"]["accuracy_drop"] == -12.5
    assert scores_only(a["average"]) == {"accuracy": 50.0, "accuracy_drop": 37.5}
    b = s["results"]["b"]
    assert scores_only(b["average"]) == {"accuracy": 35.0, "accuracy_drop": 30.0}
    avg = s["model_average"]
    assert avg["splits"]["original"] == {"accuracy": 65.0}
    assert scores_only(avg["splits"]["charswap"]) == {"accuracy": 52.5, "accuracy_drop": 17.5}
    assert scores_only(avg["average"]) == {"accuracy": 42.5, "accuracy_drop": 33.75}
    md = render_markdown(s)
    assert ("| a | 80.00 | 60.00 (drop 25.00%) | 40.00 (drop 50.00%) | 90.00 (drop −12.50%) | "
            "50.00 (drop 37.50%) |") in md
    assert "| diagnosis (probe) |" in md
    assert relative_drop(0.0, 10.0) is None and relative_drop(None, 1.0) is None


def test_rounding_is_to_two_decimals():
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    s = summarize(manifest, {"m": {"original": cell(100 * 6 / 7), "charswap": cell(100 * 4 / 7)}})
    assert s["results"]["m"]["splits"]["original"]["accuracy"] == 85.71
    assert scores_only(s["results"]["m"]["splits"]["charswap"]) == {"n": 10, "accuracy": 57.14, "accuracy_drop": 33.33}


def raw_tables(md: str) -> dict:
    """{(section, subsection or None): {"head": {column: its header}, "rows": {row name: {column:
    cell text}}}} from results.md; a column is its split's name, without "(probe)" or "(n 7)"."""
    tables, key, header = {}, None, None
    for line in md.splitlines():
        if line.startswith("## "):
            key, header = (line[3:], None), None
        elif line.startswith("### "):
            key, header = (key[0], line[4:]), None
        elif line.startswith("|") and key and not line.startswith("|---"):
            parts = [p.strip() for p in line.strip("|").split("|")]
            if header is None:  # "charswap (probe)", "charswap (n 7)", "charswap (probe, n 7)": "charswap"
                header = [re.sub(r" \((probe)?(, )?(n \d+)?\)$", "", h) for h in parts[1:]]
                tables[key] = {"head": dict(zip(header, parts[1:])), "rows": {}}
                continue
            tables[key]["rows"][parts[0]] = dict(zip(header, parts[1:]))
    return tables


def parse_tables(md: str) -> dict:
    """{metric title: {row name: {column: (score, drop or None), or None for –}}} from the score
    tables of results.md."""
    tables = {}
    for (title, sub), table in raw_tables(md).items():
        rows = table["rows"]
        if sub is not None or title not in METRIC_TITLES.values():
            continue
        tables[title] = {}
        for name, cells in rows.items():
            row = {}
            for col, text in cells.items():
                if text == "–":
                    row[col] = None
                    continue
                m = re.fullmatch(r"(\d+\.\d\d)(?: \(drop (−?)(\d+\.\d\d)%\))?", text)
                assert m, text
                drop = None if m.group(3) is None else float(m.group(3)) * (-1 if m.group(2) == MINUS else 1)
                row[col] = (float(m.group(1)), drop)
            tables[title][name] = row
    return tables


def check_md_agrees_with_json(out: Path) -> None:
    """results.md's score, interval and p-value tables show what results.json holds."""
    summary = json.loads((out / "results.json").read_text(encoding="utf-8"))
    md = (out / "results.md").read_text(encoding="utf-8")
    tables = parse_tables(md)
    assert list(tables) == [METRIC_TITLES[m] for m in summary["metrics"]]
    for metric in summary["metrics"]:
        table = tables[METRIC_TITLES[metric]]
        assert list(table) == summary["models"] + ["average"]
        for name, row in table.items():
            source = summary["model_average"] if name == "average" else summary["results"][name]
            assert list(row) == summary["columns"] + ["average"]
            for col, parsed in row.items():
                want = source["average"] if col == "average" else source["splits"].get(col, {})
                if parsed is None:
                    assert want.get(metric) is None
                    continue
                score, shown = parsed
                assert score == want[metric]
                drop = want.get(f"{metric}_drop")
                assert (shown is None) == (drop is None)
                if drop is not None:
                    assert shown == pytest.approx(drop, abs=1e-9)  # the same sign as results.json
    raw = raw_tables(md)
    intervals_title = f"{summary['statistics']['level']}% confidence intervals"
    for metric in summary["metrics"]:
        shown = raw[(intervals_title, METRIC_TITLES[metric])]["rows"]
        tested = raw.get(("Paired tests against `original`", METRIC_TITLES[metric]), {"head": {}, "rows": {}})
        having = [m for m in summary["models"]  # a model without the metric (accuracy_norm) has no row
                  if any(metric in c for c in summary["results"][m]["splits"].values())]
        assert list(shown) == having
        paired = "original" in summary["columns"] and len(summary["columns"]) > 1
        assert list(tested["rows"]) == (having if paired else [])
        for name in having:
            for col in summary["columns"]:
                cell = summary["results"][name]["splits"].get(col, {})
                ci = cell.get(f"{metric}_ci")
                assert shown[name][col] == ("–" if ci is None else f"{ci[0]:.2f}–{ci[1]:.2f}")
                if col == "original":
                    continue
                p, text = cell.get(f"{metric}_p"), tested["rows"][name][col]
                assert re.sub(r" \(n \d+\)$", "", text) == ("–" if p is None else "< 0.001" if p < 1e-3
                                                              else f"{p:.3f}")
                if p is not None:  # n in the cell, or in the header when every model has the same
                    n = re.search(r"n (\d+)\)$", text) or re.search(r"n (\d+)\)$", tested["head"][col])
                    assert int(n.group(1)) == cell["paired_n"]


class Scorer:
    """Option 0 for even questions, the gold option for odd ones."""

    def __init__(self, name):
        self.name = name

    def predict_mc(self, examples):
        return [[1.0 if i == (ex.label if k % 2 else 0) else 0.0 for i in range(len(ex.options))]
                for k, ex in enumerate(examples)]


def test_report_files_exist_and_agree(mc_release, tmp_path):
    gold = {ex.id: ex.label for s in ("original", "charswap", "option_only") for ex in read_split(mc_release, s)}
    half = {rid: (label if rid.startswith("original/") else (label + 1) % 4) for rid, label in gold.items()}
    (tmp_path / "preds").mkdir()
    for name, data in [("gold", gold), ("half", half)]:
        (tmp_path / "preds" / f"{name}.json").write_text(json.dumps(data), encoding="utf-8")
    out = tmp_path / "report"
    summary = evaluate_command(mc_release, [Scorer("toy"), Scorer("toy")],
                               [tmp_path / "preds" / "gold.json", tmp_path / "preds" / "half.json"],
                               out, progress=False)
    assert summary["models"] == ["toy", "toy-2", "gold", "half"]
    assert summary["adversarial_splits"] == ["charswap"] and summary["probe_splits"] == ["option_only"]
    assert sorted(p.name for p in out.iterdir()) == ["predictions", "results.json", "results.md", "results.png"]
    assert sorted(p.name for p in (out / "predictions").iterdir()) == [
        "gold.jsonl", "half.jsonl", "toy-2.jsonl", "toy.jsonl"]
    lines = (out / "predictions" / "toy.jsonl").read_text(encoding="utf-8").splitlines()
    assert len(lines) == 21 and json.loads(lines[0])["id"] == "original/high1.txt-0"
    half_row = summary["results"]["half"]
    assert scores_only(half_row["splits"]["charswap"]) == {"n": 7, "accuracy": 0.0, "accuracy_drop": 100.0}
    # half answers all 7 original questions right and all 7 charswap ones wrong: McNemar b=7, c=0
    assert half_row["splits"]["charswap"]["paired_n"] == 7
    assert half_row["splits"]["charswap"]["accuracy_p"] == pytest.approx(2 / 2 ** 7, rel=1e-3)
    assert summary["results"]["gold"]["splits"]["charswap"]["accuracy_p"] == 1.0
    assert summary["results"]["toy-2"]["predictions"] == "predictions/toy-2.jsonl"
    assert scores_only(half_row["average"]) == {"accuracy": 0.0, "accuracy_drop": 100.0}
    assert summary["model_average"]["splits"]["original"]["accuracy"] == pytest.approx(
        (2 * summary["results"]["toy"]["splits"]["original"]["accuracy"] + 200) / 4, abs=0.01)
    check_md_agrees_with_json(out)
    png = (out / "results.png").read_bytes()
    assert png.startswith(PNG_SIGNATURE) and png[12:16] == b"IHDR"
    import matplotlib.image

    assert matplotlib.image.imread(out / "results.png").shape[2] in (3, 4)


def test_report_is_deterministic_and_replaces_an_old_report(mc_release, tmp_path):
    out = tmp_path / "report"
    first = {}
    for k in range(2):
        evaluate_command(mc_release, [Scorer("toy"), Scorer(f"other{k}")], [], out, progress=False)
        if k == 0:
            first = {p: (out / p).read_bytes() for p in ["results.json", "results.md", "results.png"]}
    assert sorted(p.name for p in (out / "predictions").iterdir()) == ["other1.jsonl", "toy.jsonl"]
    again = tmp_path / "again"
    evaluate_command(mc_release, [Scorer("toy"), Scorer("other0")], [], again, progress=False)
    for name, data in first.items():
        assert (again / name).read_bytes() == data


def test_refuses_to_overwrite_a_foreign_folder(tmp_path):
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "notes.txt").write_text("mine", encoding="utf-8")
    manifest = manifest_of(("original", "none"))
    with pytest.raises(ConfigError, match="not an advrace report"):
        write_report(tmp_path / "out", manifest, {"m": {"original": cell(50.0)}})
    assert (tmp_path / "out" / "notes.txt").read_text(encoding="utf-8") == "mine"


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_report_says_how_each_model_was_run(mc_release, tmp_path, bf16):
    """bf16 and fp32 scores of one checkpoint differ, so the report names the precision."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice

    from conftest import make_tokenizer

    torch.manual_seed(0)
    config = BertConfig(vocab_size=128, hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512)
    BertForMultipleChoice(config).save_pretrained(tmp_path / "tiny")
    AutoTokenizer.from_pretrained(make_tokenizer(tmp_path)).save_pretrained(tmp_path / "tiny")
    out = tmp_path / "report"
    summary = evaluate_command(mc_release, [str(tmp_path / "tiny"), Scorer("toy")], [], out, bf16=bf16,
                               progress=False)
    precision = "bf16" if bf16 else "fp32"
    emulated = bf16_emulated("cpu", bf16)  # bf16 on a CPU without native bf16 says so
    label = f"{tmp_path.name}/tiny"  # no training_info.json: its last two folder names
    assert summary["models"] == [label, "toy"]
    source = summary["results"][label]["source"]
    assert source["bf16"] is bf16
    assert source["inference"] == {"precision": precision, "device_type": "cpu", "torch": torch.__version__,
                                   **({"bf16_emulated": True} if emulated else {})}
    assert "inference" not in summary["results"]["toy"]["source"]  # a scorer object says nothing
    saved = json.loads((out / "results.json").read_text(encoding="utf-8"))
    assert saved["results"][label]["source"]["inference"] == source["inference"]
    assert saved["results"][label]["predictions"] == f"predictions/{tmp_path.name}_tiny.jsonl"  # file-safe
    assert (out / saved["results"][label]["predictions"]).is_file()
    md = (out / "results.md").read_text(encoding="utf-8")
    shown = f"{precision} (emulated: no native bf16)" if emulated else precision
    assert f"- `{label}`: {shown} on cpu, torch {torch.__version__}" in md.splitlines()
    assert "`toy`" not in md
    check_md_agrees_with_json(out)


def test_squad_report_has_em_and_f1_tables(tmp_path):
    (tmp_path / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    cfg = release_config_from_dict({"data": {"path": str(tmp_path / "squad.json")}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp_path / "release")
    preds = {}
    for split in ("original", "charswap"):
        for k, ex in enumerate(read_split(tmp_path / "release", split)):
            preds[ex.id] = ex.answers[0].text if split == "original" or k == 0 else "the " + ex.answers[0].text + " x"
    (tmp_path / "squad-model.json").write_text(json.dumps(preds), encoding="utf-8")
    summary = evaluate_command(tmp_path / "release", [], [tmp_path / "squad-model.json"], tmp_path / "report",
                               progress=False)
    assert summary["metrics"] == ["exact_match", "f1"]
    cs = summary["results"]["squad-model"]["splits"]["charswap"]
    # q0 exact; "the ten x" against "ten": F1 2/3; "the Vienna and Budapest x": 3/4 tokens, F1 6/7.
    assert cs["exact_match"] == 33.33 and cs["exact_match_drop"] == 66.67
    assert cs["f1"] == pytest.approx(round(100 * (1 + 2 / 3 + 6 / 7) / 3, 2))
    check_md_agrees_with_json(tmp_path / "report")
    assert "## Exact match" in (tmp_path / "report" / "results.md").read_text(encoding="utf-8")


def test_drop_has_one_convention_said_once():
    """results.json, results.md and the chart all give the relative drop, positive when a split
    is harder; results.md defines it once, in its header."""
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"), ("diagnosis", "diagnosis"))
    s = summarize(manifest, {"m": {"original": cell(80.0), "charswap": cell(20.0), "diagnosis": cell(88.0)}})
    assert s["drop"] == DROP_DEFINITION and "positive when the split scores lower" in DROP_DEFINITION
    assert s["results"]["m"]["splits"]["charswap"]["accuracy_drop"] == 75.0
    assert s["results"]["m"]["splits"]["diagnosis"]["accuracy_drop"] == -10.0
    md = render_markdown(s)
    assert md.count(DROP_DEFINITION) == 1
    assert md.index(DROP_DEFINITION) < md.index("## Accuracy")
    assert "| m | 80.00 | 20.00 (drop 75.00%) | 88.00 (drop −10.00%) | 20.00 (drop 75.00%) |" in md
    assert "+" not in md.split("## Accuracy")[1]  # no signed change anywhere in the tables
    assert drop_text(75.0) == "drop 75.00%" and drop_text(-10.0, 1) == "drop −10.0%"
    assert drop_text(-0.001) == "drop 0.00%"  # no minus on a rounded zero


def test_chart_legend_gives_the_average_drop(tmp_path, monkeypatch):
    import matplotlib.axes

    from advrace.evaluation import report

    labels, bar = [], matplotlib.axes.Axes.bar

    def recording_bar(self, *args, **kwargs):
        labels.append(kwargs.get("label"))
        return bar(self, *args, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "bar", recording_bar)
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    s = summarize(manifest, {"m": {"original": cell(80.0), "charswap": cell(20.0)}})
    report.plot(s, tmp_path / "results.png")
    assert labels == ["m (average drop 75.0%)"]


# --------------------------------------------------------------------------- what the release knows


def _checkpoint(folder: Path, objective: str, base: str, train_path: str) -> Path:
    """A checkpoint folder as `advrace train` leaves it, as far as a manifest reads it: the
    training record (objective, base model, training data) beside the weights."""
    folder.mkdir(parents=True)
    (folder / "model.safetensors").write_bytes(folder.name.encode())
    (folder / "training_info.json").write_text(json.dumps(
        {"objective": objective, "config": {"model": base, "train": {"path": train_path}}}), encoding="utf-8")
    return folder


def _mc_records(split: str, right: list[bool], perturbed: bool) -> dict:
    records = [{"id": f"{split}/q{i}", "source_id": f"q{i}", "prediction": 0 if ok else 1, "label": 0,
                "correct": ok, "scores": [0.0] * 4, "perturbed": perturbed} for i, ok in enumerate(right)]
    return {"n": len(records), "accuracy": 100 * sum(right) / len(records), "records": records}


def test_report_states_the_release_caveats(tmp_path):
    """A validated release whose DE split came from a demonstration model (trained on the bundled
    sample) and whose DG split came from a generator fine-tuned from SmolLM2, scored with SmolLM2
    and with a reader below chance: the report says each, from the records alone (the manifest's
    split entries are the attacks' own describe(); the scored models' identities are evaluate's)."""
    from advrace.attacks.distractor_extraction import DistractorExtraction
    from advrace.attacks.distractor_generation import DistractorGeneration
    from advrace.evaluation.scoring import scored_identity

    de = _checkpoint(tmp_path / "de-demo" / "final", "span_extraction", "minilm", "@sample/race")
    dg = _checkpoint(tmp_path / "dg-smollm2" / "final", "causal_lm", "smollm2", "RACE/train")
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"),
                           ("distractor_extraction", "distractor_extraction"),
                           ("distractor_generation", "distractor_generation"))
    for split, attack in (("distractor_extraction", DistractorExtraction({"model": str(de)})),
                          ("distractor_generation", DistractorGeneration({"model": str(dg)}))):
        manifest["splits"][split].update(attack.describe())
    assert manifest["splits"]["distractor_generation"]["trained_from"] == "smollm2"
    assert manifest["splits"]["distractor_extraction"]["trained_on_sample"] == "@sample/race"
    judged = {"judged": 21, "valid_rate": 19 / 21, "valid_ci": [0.711, 0.973], "fleiss_kappa": 0.62,
              "invalid": 2, "unjudged": 0}
    manifest["validation"] = {"source_release": {"name": "race-dev", "manifest_sha256": "cd" * 32},
                              "study": {"annotators": 3, "judgements": 3, "annotations_sha256": "ef" * 32},
                              "invalid": "restored", "splits": {"distractor_generation": judged}}
    splits = list(manifest["splits"])
    scores = {"smollm2": {s: _mc_records(s, [True] * 6 + [False] * 4, s != "original") for s in splits},
              "sliding-window": {s: _mc_records(s, [True] * 2 + [False] * 8, s != "original") for s in splits}}
    sources = {m: {"kind": "model" if m == "smollm2" else "built-in", "path": m, "identity": scored_identity(m)}
               for m in scores}
    summary = summarize(manifest, scores, sources)
    kinds = {(c["kind"], c["split"], c["model"]) for c in summary["caveats"]}
    assert kinds == {("validation", "distractor_generation", None),
                     ("unvalidated", "distractor_extraction", None),
                     ("demonstration", "distractor_extraction", None),
                     ("shared_base", "distractor_generation", "smollm2"),
                     # DG's default readers chose its distractors: adversarial to them by construction
                     ("shared_base", "distractor_generation", "sliding-window"),
                     ("below_chance", "original", "sliding-window")}
    md = render_markdown(summary)
    caveats = md.split("## Caveats", 1)[1].split("\n## ", 1)[0]
    assert ("- `distractor_generation`: validated by people: 21 items judged, 90.5% valid (95% CI 71.1–97.3), "
            "kappa 0.62; 2 judged invalid, put back as in its source split (unperturbed).") in caveats
    assert "- `distractor_extraction`: made with a model and not validated by people" in caveats
    assert ("- `distractor_extraction`: made with a checkpoint trained on the bundled sample (`@sample/race`): "
            "a demonstration model") in caveats
    assert ("- `distractor_generation`: made with a generator (`dg-smollm2/final`, fine-tuned from `smollm2`) that "
            "shares its base with the scored model `smollm2`") in caveats
    assert "- `sliding-window` scores 20.00% on `original`, below chance (25.00%)" in caveats
    assert ("- `distractor_generation`: its distractors were chosen as those the reader (`sliding-window`) that "
            "shares its base with the scored model `sliding-window`") in caveats
    # the caveats come before the first table, where a reader starts
    assert md.index("## Caveats") < md.index("## Accuracy")


def test_an_unrelated_generator_and_readers_above_chance_give_no_such_caveat(tmp_path):
    """The same release scored by a model the generator does not descend from, above chance."""
    from advrace.attacks.distractor_generation import DistractorGeneration
    from advrace.evaluation.scoring import scored_identity

    dg = _checkpoint(tmp_path / "dg-other" / "final", "causal_lm", "HuggingFaceTB/SmolLM2-360M", "RACE/train")
    manifest = manifest_of(("original", "none"), ("distractor_generation", "distractor_generation"))
    manifest["splits"]["distractor_generation"].update(DistractorGeneration({"model": str(dg)}).describe())
    scores = {"smollm2": {s: _mc_records(s, [True] * 3 + [False] * 7, s != "original") for s in manifest["splits"]}}
    summary = summarize(manifest, scores, {"smollm2": {"kind": "model", "path": "smollm2",
                                                       "identity": scored_identity("smollm2")}})
    assert [c["kind"] for c in summary["caveats"]] == ["unvalidated"]
    # scoring the generator itself, copied elsewhere and with no training record, is the same
    # model by its sha256 alone
    import shutil

    from advrace.attacks.distractor_extraction import DistractorExtraction

    bare = tmp_path / "de-bare" / "final"
    bare.mkdir(parents=True)
    (bare / "model.safetensors").write_bytes(b"weights")
    manifest["splits"]["distractor_generation"] = {"attack": "distractor_extraction", "source": "original",
                                                   "count": 10, **DistractorExtraction({"model": str(bare)}).describe()}
    copy = shutil.copytree(bare, tmp_path / "elsewhere" / "copy")
    same = {"gen": {"kind": "model", "path": str(copy), "identity": scored_identity(str(copy))}}
    summary = summarize(manifest, {"gen": scores["smollm2"]}, same)
    assert ("shared_base", "gen") in {(c["kind"], c["model"]) for c in summary["caveats"]}


def test_chart_marks_the_attacked_questions_on_original(tmp_path, monkeypatch):
    """A hatched (attacked-only) bar is read against the same questions on `original`, not the
    all-questions bar beside it: a black line at that height marks it."""
    import matplotlib.axes

    from advrace.evaluation.report import plot

    drawn = []
    original_hlines = matplotlib.axes.Axes.hlines

    def hlines(self, y, xmin, xmax, **kwargs):
        drawn.append((list(y), list(xmin), list(xmax)))
        return original_hlines(self, y, xmin, xmax, **kwargs)

    monkeypatch.setattr(matplotlib.axes.Axes, "hlines", hlines)
    manifest = manifest_of(("original", "none"), ("charswap", "charswap"))
    # original: q0-q3 right of 10 (40%); charswap attacked q0-q4 (q0 still right), q5-q9 copies
    original = _mc_records("original", [True] * 4 + [False] * 6, False)
    charswap = _mc_records("charswap", [True] + [False] * 9, False)
    for rec in charswap["records"][:5]:
        rec["perturbed"] = True
    summary = summarize(manifest, {"m": {"original": original, "charswap": charswap}})
    cell = summary["results"]["m"]["splits"]["charswap"]
    assert cell["accuracy_attacked"] == 20.0 and cell["accuracy_attacked_original"] == 80.0
    plot(summary, tmp_path / "chart.png")
    [(heights, lows, highs)] = drawn
    assert heights == [80.0] and highs[0] - lows[0] == pytest.approx(0.8 / 2)  # across the hatched half-bar
