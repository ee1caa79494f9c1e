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


# ---------------------------------------------------------------- model names that cannot load


def _release(race_dir, tmp_path) -> Path:
    out = tmp_path / "rel"
    assert main(["build", "--data", str(race_dir), "--quiet", "--out", str(out)]) == 0
    return out


def test_a_near_miss_of_a_built_in_name_is_refused_at_once(race_dir, tmp_path, capsys, monkeypatch):
    """`--model smolm2` tried the Hub for about 99 s; a typo of a built-in name gets "did you mean"
    and exit status 2 before any Hub call, online or not."""
    import time

    release = _release(race_dir, tmp_path)
    capsys.readouterr()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.chdir(tmp_path)
    for typo, meant in [("smolm2", "smollm2"), ("SmolLM2", "smollm2"), ("sliding_window", "sliding-window"),
                        ("similarty", "similarity"), ("minlm", "minilm")]:
        start = time.monotonic()
        code = main(["evaluate", str(release), "--model", typo, "--out", str(tmp_path / "r")])
        err = capsys.readouterr().err
        assert code == 2 and f"did you mean {meant}?" in err, err
        assert time.monotonic() - start < 10
    assert not (tmp_path / "r").exists()
    (tmp_path / "smolm2").mkdir()  # a folder of that name is what is meant: it is read, not corrected
    assert main(["evaluate", str(release), "--model", "smolm2", "--out", str(tmp_path / "r")]) == 3
    assert "did you mean" not in capsys.readouterr().err


def test_a_hub_name_offline_fails_fast_and_says_to_set_hf_hub_offline(race_dir, tmp_path, capsys, monkeypatch):
    """Offline with HF_HUB_OFFLINE unset, a Hub name cost the Hub client's retries (about 99 s);
    the Hub's address is tried once, and the message says what to do."""
    import time

    from advrace.models.runtime import loading

    release = _release(race_dir, tmp_path)
    capsys.readouterr()
    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("TRANSFORMERS_OFFLINE", raising=False)
    monkeypatch.setenv("HF_ENDPOINT", "http://127.0.0.1:9")  # nothing listens there: the Hub is unreachable
    for proxy in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(proxy, raising=False)
    assert loading.hub_unreachable().startswith("127.0.0.1: ")
    start = time.monotonic()
    code = main(["evaluate", str(release), "--model", "someone/no-such-model", "--out", str(tmp_path / "r")])
    took = time.monotonic() - start
    err = capsys.readouterr().err
    assert code == 3 and "HF_HUB_OFFLINE=1" in err and "local folder" in err, err
    assert "cannot be reached (127.0.0.1: " in err and took < 10, (took, err)
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")  # then Transformers reads the cache without trying
    assert loading.hub_unreachable() is None


def test_hub_ids_are_not_taken_for_typos():
    import advrace.models.encoders.readers  # noqa: F401  (adds the readers' names)
    from advrace.models.runtime.loading import near_built_in

    for hub_id in ("gpt2", "bert-base-uncased", "roberta-base", "albert-base-v2", "xlnet-base-cased", "t5-small",
                   "distilgpt2", "HuggingFaceTB/smolm2", "smollm2", "sliding-window", "similarity"):
        assert near_built_in(hub_id) is None, hub_id
    assert near_built_in("smollm") == "smollm2" and near_built_in("sliding-windw:distance") == "sliding-window:distance"
