import json
import subprocess
import sys

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
