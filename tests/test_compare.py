"""`advrace compare`: what keeps two reports' numbers from comparing (another release, other
weights under the same name, another precision, other question counts), said before any number;
`--strict` exits 1 on any of it; and a paired test of B against A per split."""

import json
import shutil
from pathlib import Path

import pytest

from advrace.cli import main as cli_main
from advrace.core.config import release_config_from_dict
from advrace.evaluation import evaluate_command
from advrace.evaluation.compare import caveats, read_report
from advrace.evaluation.statistics import bootstrap_interval, mcnemar_exact_p
from advrace.release import build_release, read_split
from conftest import race_passage
from test_scoring_protocol import tiny_lm, word_tokenizer


def _race(root: Path, files) -> Path:
    for sub, n, k in files:
        (root / sub).mkdir(parents=True, exist_ok=True)
        (root / sub / f"{n}.txt").write_text(json.dumps(race_passage(f"{sub}{n}.txt", k)), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    """Two releases of the same recipe (7 questions; 3 of them), and one tiny causal LM saved
    twice under the same run folder name (`runs/final`), once with other weights."""
    root = tmp_path_factory.mktemp("compare")
    releases = {}
    for name, files in (("full", [("high", 1, 3), ("middle", 2, 2), ("middle", 10, 2)]), ("small", [("high", 1, 3)])):
        race = _race(root / name / "RACE" / "test", files)
        build_release(release_config_from_dict({"data": {"path": str(race)}, "splits": ["charswap"], "workers": 1}),
                      root / name / "release")
        releases[name] = root / name / "release"
    tok = word_tokenizer(root / "tok", adds_bos=False)
    first = tiny_lm(root / "a" / "runs" / "final", tok)
    second = tiny_lm(root / "b" / "runs" / "final", tok, initializer_range=0.5)  # retrained: other weights
    return {"root": root, "releases": releases, "first": first, "second": second}


def _evaluate(setup, out: str, model: str, release: str = "full", **kwargs) -> Path:
    folder = setup["root"] / "reports" / out
    if not (folder / "results.json").is_file():
        evaluate_command(setup["releases"][release], [model], out=folder, progress=False,
                         **{"bf16": False, **kwargs})
    return folder


def _compare(capsys, a: Path, b: Path, *options) -> tuple[int, str]:
    status = cli_main(["compare", str(a), str(b), *options])
    return status, capsys.readouterr().out


def test_the_same_model_twice_compares_and_strict_passes(setup, capsys):
    a = _evaluate(setup, "a", setup["first"])
    again = _evaluate(setup, "a-again", setup["first"])
    assert read_report(a)["results"]["runs/final"]["source"]["identity"]["sha256"]
    status, out = _compare(capsys, a, again, "--strict")
    assert status == 0, out
    assert "do not compare directly" not in out and "Same release" in out
    assert "| runs/final | charswap | " in out


def test_other_weights_under_the_same_name_are_caught(setup, capsys):
    a = _evaluate(setup, "a", setup["first"])
    b = _evaluate(setup, "b", setup["second"])
    assert read_report(a)["models"] == read_report(b)["models"] == ["runs/final"]  # the same label
    assert _compare(capsys, a, b)[0] == 0  # without --strict, said but not failed
    status, out = _compare(capsys, a, b, "--strict")
    assert status == 1
    assert "**These numbers do not compare directly:**" in out
    assert "`runs/final` is not the same model in both: sha256:" in out


def test_another_precision_is_caught(setup, capsys):
    a = _evaluate(setup, "a", setup["first"])
    bf16 = _evaluate(setup, "a-bf16", setup["first"], bf16=True)
    status, out = _compare(capsys, a, bf16, "--strict")
    assert status == 1
    assert "`runs/final` was run differently: precision: fp32 vs bf16" in out
    assert "not the same model" not in out  # the same weights


def test_another_question_count_and_another_release_are_caught_but_no_protocol_difference(setup, capsys):
    """Only the release differs in the protocol record: that is said once, as another release,
    never as "scored under different protocols"."""
    a = _evaluate(setup, "a", setup["first"])
    small = _evaluate(setup, "a-small", setup["first"], release="small")
    status, out = _compare(capsys, a, small, "--strict")
    assert status == 1
    assert "different releases:" in out
    assert "`runs/final` was scored on other numbers of questions: original 7 vs 3, charswap 7 vs 3" in out
    assert "different protocols" not in out


def test_a_reader_without_a_protocol_is_checked_too(setup, capsys):
    """A built-in reader records no scoring protocol; two reports of it on different releases
    must still differ, not pass for want of a record."""
    one = _evaluate(setup, "sw", "sliding-window")
    two = _evaluate(setup, "sw-small", "sliding-window", release="small")
    lines = caveats(read_report(one), read_report(two))
    assert any(line.startswith("`sliding-window` was scored on other numbers of questions") for line in lines)
    assert _compare(capsys, one, two, "--strict")[0] == 1


def test_paired_test_per_split_by_hand(setup, tmp_path, capsys):
    """A's predictions right on every question, B's wrong on 3 charswap questions: B − A is
    −3/7 on charswap, McNemar's p is that of 3 discordant questions all one way (0.25), and the
    interval is the bootstrap's of the per-question differences."""
    release = setup["releases"]["full"]
    gold = {ex.id: ex.label for split in ("original", "charswap") for ex in read_split(release, split)}
    wrong = sorted(i for i in gold if i.startswith("charswap/"))[:3]
    preds = {"a": gold, "b": {i: (g + 1) % 4 if i in wrong else g for i, g in gold.items()}}
    reports = {}
    for name, given in preds.items():
        (tmp_path / name).mkdir()
        (tmp_path / name / "preds.json").write_text(json.dumps(given), encoding="utf-8")
        reports[name] = tmp_path / f"report-{name}"
        evaluate_command(release, predictions=[tmp_path / name / "preds.json"], out=reports[name], progress=False)
    status, out = _compare(capsys, reports["a"], reports["b"])
    assert status == 0
    low, high = bootstrap_interval([0.0] * 4 + [-1.0] * 3)
    row = next(line for line in out.splitlines() if line.startswith("| preds | charswap |"))
    assert row == (f"| preds | charswap | 100.00 | 57.14 | -42.86 | 7 | {100 * low:+.2f} to {100 * high:+.2f} | "
                   f"{mcnemar_exact_p(3, 0):.3f} |")
    assert mcnemar_exact_p(3, 0) == 0.25
    assert "| preds | original | 100.00 | 100.00 | +0.00 | 7 | +0.00 to +0.00 | 1.000 |" in out
    # two different predictions files are not the same thing scored
    assert "`preds` is not the same model in both: sha256:" in out
    # results.json copied alone: the numbers, and why there is no paired test
    alone = tmp_path / "alone"
    alone.mkdir()
    shutil.copy(reports["b"] / "results.json", alone / "results.json")
    out = _compare(capsys, reports["a"], alone / "results.json")[1]
    assert "| preds | charswap | 100.00 | 57.14 | -42.86 | – | – | – |" in out
    assert "No paired test for `preds`" in out


def test_another_adapter_or_tokenizer_at_the_same_path_is_another_identity(tmp_path):
    """lm-eval's `peft=` and `tokenizer=` change the scores as the weights do: retraining the adapter
    in place must not compare as the same model."""
    from advrace.evaluation.scoring import scored_identity
    from advrace.models.runtime.model_args import ModelArgs

    model, adapter, tokenizer = (tmp_path / n for n in ("model", "adapter", "tokenizer"))
    for folder in (model, adapter, tokenizer):
        folder.mkdir()
        (folder / "weights.bin").write_bytes(b"first")
    plain = scored_identity(str(model))
    with_both = scored_identity(str(model), ModelArgs(peft=str(adapter), tokenizer=str(tokenizer)))
    assert with_both["sha256"] == plain["sha256"] and "peft" not in plain
    (adapter / "weights.bin").write_bytes(b"retrained")
    retrained = scored_identity(str(model), ModelArgs(peft=str(adapter), tokenizer=str(tokenizer)))
    assert retrained["peft"]["sha256"] != with_both["peft"]["sha256"]
    assert retrained["tokenizer"] == with_both["tokenizer"]
