"""Nothing a user types may silently build the wrong benchmark: every case here once built a
wrong release, passed `verify`, or ended in a traceback instead of a clear message."""

import hashlib
import json
import shutil

import pytest
import yaml

from advrace.cli import main
from advrace.release import split_file


def build(race_dir, out, *extra) -> int:
    return main(["build", "--data", str(race_dir), "--quiet", "--out", str(out), *extra])


def test_duplicate_attacks_are_refused_before_reading_data(tmp_path, capsys):
    code = build(tmp_path / "absent", tmp_path / "r", "--attacks", "charswap,charswap")
    err = capsys.readouterr().err
    assert code == 2 and "charswap" in err and "name:" in err and "absent" not in err
    assert not (tmp_path / "r").exists()


def test_duplicate_unnamed_splits_in_a_config(race_dir, tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"data": {"path": str(race_dir)},
                                   "splits": [{"attack": "charswap"}, {"attack": "charswap"}]}))
    assert main(["build", str(cfg), "--quiet", "--out", str(tmp_path / "r")]) == 2
    assert "used twice: charswap" in capsys.readouterr().err


def test_unknown_attack_is_reported_before_a_data_error(tmp_path, capsys):
    bad = tmp_path / "bad.jsonl"
    bad.write_text("{not json\n")
    assert build(bad, tmp_path / "r", "--attacks", "charswap,nosuch") == 2
    err = capsys.readouterr().err
    assert "unknown attack 'nosuch'" in err and "invalid JSON" not in err


def test_bad_attack_config_is_reported_before_data(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"data": {"path": str(tmp_path / "absent")},
                                   "splits": [{"attack": "charswap", "config": {"min_lenght": 4}}]}))
    assert main(["build", str(cfg), "--quiet", "--out", str(tmp_path / "r")]) == 2
    assert "min_lenght" in capsys.readouterr().err


def test_verify_catches_duplicate_ids_in_a_rehashed_split(race_dir, tmp_path, capsys):
    """A release written wrong (one split's records twice) but with matching hashes must fail."""
    out = tmp_path / "rel"
    assert build(race_dir, out, "--attacks", "charswap") == 0
    path = out / split_file("charswap")
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    path.write_text("".join(lines[:-1] + lines[:1]), encoding="utf-8")
    manifest = json.loads((out / "manifest.json").read_text())
    data = path.read_bytes()
    manifest["splits"]["charswap"].update(sha256=hashlib.sha256(data).hexdigest(), bytes=len(data))
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify", str(out)]) == 1
    assert "repeats line 1" in capsys.readouterr().err


@pytest.mark.parametrize("target", ["absent", "file"])
def test_verify_of_a_non_release_exits_2(tmp_path, capsys, target):
    path = tmp_path / target
    if target == "file":
        path.write_text("x")
    assert main(["verify", str(path)]) == 2
    assert str(path) in capsys.readouterr().err


def test_verify_of_a_folder_without_manifest_exits_2(tmp_path, capsys):
    assert main(["verify", str(tmp_path)]) == 2
    assert "no manifest.json" in capsys.readouterr().err


def test_export_refuses_targets_that_cannot_take_the_splits(race_dir, tmp_path, capsys):
    out = tmp_path / "rel"
    assert build(race_dir, out, "--attacks", "charswap") == 0
    afile = tmp_path / "afile"
    afile.write_text("keep")
    assert main(["export", str(out), "--out", str(afile)]) == 2
    assert "existing file" in capsys.readouterr().err and afile.read_text() == "keep"
    assert main(["export", str(out), "--split", "charswap", "--out", str(afile / "x.json")]) == 2
    assert "is a file, not a folder" in capsys.readouterr().err
    assert main(["export", str(out), "--out", str(tmp_path / "x.json")]) == 2
    assert "--split" in capsys.readouterr().err and not (tmp_path / "x.json").exists()
    assert main(["export", str(out), "--split", "charswap", "--out", str(tmp_path / "one.json")]) == 0
    assert len(json.loads((tmp_path / "one.json").read_text())) == 7
    assert main(["export", str(out), "--out", str(tmp_path / "all")]) == 0
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["charswap.json", "original.json"]
    assert main(["export", str(out), "--split", "charswap", "--out", str(tmp_path / "all")]) == 2


def test_data_without_format_redetects_instead_of_using_the_configs(race_dir, tmp_path, capsys):
    """A config for a RACE folder reused on a JSONL file: the config's format described other data."""
    jsonl = tmp_path / "q.jsonl"
    with open(jsonl, "w") as f:
        for p in sorted(race_dir.rglob("*.txt")):
            f.write(json.dumps(json.loads(p.read_text())) + "\n")
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"data": {"path": str(race_dir), "format": "race-dir"},
                                   "splits": ["charswap"]}))
    assert main(["build", str(cfg), "--data", str(jsonl), "--quiet", "--out", str(tmp_path / "r")]) == 0
    manifest = json.loads((tmp_path / "r" / "manifest.json").read_text())
    assert manifest["source"]["format"] == "race-jsonl" and manifest["source"]["kept"] == 7


def test_format_mismatch_names_the_right_format(squad_file, race_dir, tmp_path, capsys):
    assert build(squad_file, tmp_path / "r", "--format", "race-jsonl") == 2
    err = capsys.readouterr().err
    assert "looks like SQuAD" in err and "--format squad" in err
    assert build(race_dir, tmp_path / "r", "--format", "squad") == 2
    assert "--format race-dir" in capsys.readouterr().err
    assert build(squad_file, tmp_path / "r", "--format", "race-jsonl", "--lenient") == 2
    assert "--format squad" in capsys.readouterr().err


@pytest.mark.parametrize("limit, words", [("0", "leaves no questions"), ("-5", "positive number")])
def test_limit_messages(race_dir, tmp_path, capsys, limit, words):
    assert build(race_dir, tmp_path / "r", "--limit", limit) == 2
    err = capsys.readouterr().err
    assert words in err and "None" not in err


def test_manifest_holds_no_machine_path(race_dir, tmp_path):
    """The same data read from two folders gives the same release, byte for byte."""
    other = tmp_path / "elsewhere" / "deeper" / race_dir.name
    shutil.copytree(race_dir, other)
    assert build(race_dir, tmp_path / "a", "--attacks", "charswap,addsent") == 0
    assert build(other, tmp_path / "b", "--attacks", "charswap,addsent") == 0
    a, b = (tmp_path / "a" / "manifest.json").read_bytes(), (tmp_path / "b" / "manifest.json").read_bytes()
    assert a == b
    assert str(tmp_path).encode() not in a and b"/usr/" not in a  # nor where WordNet was read from
    assert json.loads(a)["resources"]["wordnet"].endswith("Debian wordnet-base)")


def test_set_train_path_without_format_redetects(tmp_path):
    from advrace.training.config import load_config

    cfg = tmp_path / "t.yaml"
    cfg.write_text(yaml.safe_dump({"train": {"path": "RACE/train", "format": "race-dir"}}))
    assert load_config(cfg, ["train.path=q.jsonl"]).train.format is None
    assert load_config(cfg, ["train.path=q.jsonl", "train.format=race-jsonl"]).train.format == "race-jsonl"
    assert load_config(cfg, ["lr=1e-5"]).train.format == "race-dir"


@pytest.mark.parametrize("splits, words", [([5], "splits[0] must be an attack name"),
                                           ("abc", "splits must be a list")])
def test_malformed_split_lists(tmp_path, capsys, splits, words):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(yaml.safe_dump({"splits": splits}))
    assert main(["build", str(cfg), "--quiet", "--out", str(tmp_path / "r")]) == 2
    assert words in capsys.readouterr().err
