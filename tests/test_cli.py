import json
import os
import subprocess
import sys
from pathlib import Path

from advrace.cli import main
from advrace.release import split_file


def test_build_verify_export(race_dir, tmp_path, capsys):
    out = tmp_path / "rel"
    assert main(["build", "--data", str(race_dir), "--attacks", "charswap", "--seed", "5",
                 "--quiet", "--out", str(out)]) == 0
    assert "charswap" in capsys.readouterr().out
    assert main(["verify", str(out)]) == 0
    assert "OK" in capsys.readouterr().out
    assert main(["export", str(out), "--split", "charswap", "--out", str(tmp_path / "a.json")]) == 0
    assert len(json.loads((tmp_path / "a.json").read_text())) == 7
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["seed"] == 5 and manifest["source"]["format"] == "race-dir"


def test_limit(race_dir, tmp_path):
    out = tmp_path / "rel"
    assert main(["build", "--data", str(race_dir), "--limit", "3", "--quiet", "--out", str(out)]) == 0
    assert json.loads((out / "manifest.json").read_text())["splits"]["original"]["count"] == 3


def test_malformed_input_exits_2_and_names_the_record(race_dir, tmp_path, capsys):
    bad = race_dir / "high" / "1.txt"
    doc = json.loads(bad.read_text())
    doc["options"][2] = doc["options"][2][:3]
    bad.write_text(json.dumps(doc))
    code = main(["build", "--data", str(race_dir), "--quiet", "--out", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2
    assert "1.txt" in err and "option" in err and "--lenient" in err
    assert not (tmp_path / "r").exists()
    assert main(["build", "--data", str(race_dir), "--lenient", "--quiet", "--out", str(tmp_path / "r")]) == 0
    assert "skipped" in capsys.readouterr().err


def test_verify_fails_with_exit_1(race_dir, tmp_path, capsys):
    out = tmp_path / "rel"
    main(["build", "--data", str(race_dir), "--quiet", "--out", str(out)])
    (out / split_file("original")).write_text("")
    assert main(["verify", str(out)]) == 1
    assert "contents differ" in capsys.readouterr().err


def test_unknown_attack_and_missing_data(race_dir, tmp_path, capsys):
    assert main(["build", "--data", str(race_dir), "--attacks", "nope", "--out", str(tmp_path / "x")]) == 2
    assert "unknown attack 'nope'" in capsys.readouterr().err
    assert main(["build", "--data", str(tmp_path / "absent"), "--out", str(tmp_path / "y")]) == 2


def test_console_entry_point_help():
    res = subprocess.run([sys.executable, "-m", "advrace", "build", "--help"], capture_output=True, text=True)
    assert res.returncode == 0 and "--lenient" in res.stdout and "examples:" in res.stdout


def test_quiet_build_draws_no_bar_of_any_library(tmp_path):
    """--quiet silences Transformers' "Loading weights" bar too, not only advrace's own bars."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from golden.golden_build import make_models

    model = make_models(tmp_path / "models")["qa"]
    config = tmp_path / "de.yaml"
    config.write_text(json.dumps({"name": "quiet", "data": {"path": "@sample/race", "limit": 4},
                                  "splits": [{"attack": "distractor_extraction",
                                              "config": {"model": model, "max_length": 96, "doc_stride": 32}}]}))
    runs = {}
    for flag in ([], ["--quiet"]):
        run = subprocess.run([sys.executable, "-m", "advrace", "build", str(config), "--out",
                              str(tmp_path / f"rel{len(flag)}"), *flag], capture_output=True, text=True,
                             env={**os.environ, "ACCELERATE_USE_CPU": "true"})
        assert run.returncode == 0, run.stderr
        runs[bool(flag)] = run.stderr
    assert "Loading weights" in runs[False] and "distractor_extraction" in runs[False]
    assert runs[True] == ""


def test_quiet_puts_the_library_bars_back(race_dir, tmp_path):
    """An in-process caller of main() gets Transformers' bars and the environment as they were."""
    from transformers.utils import logging as hf_logging

    assert hf_logging.is_progress_bar_enabled()
    before = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    assert main(["build", "--data", str(race_dir), "--attacks", "charswap", "--out", str(tmp_path / "r"),
                 "--quiet"]) == 0
    assert hf_logging.is_progress_bar_enabled()
    assert os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS") == before
