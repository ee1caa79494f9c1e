"""`advrace build`'s options beyond the config: a seeded sample (`--sample`), attack settings
(`--set splits.NAME.KEY=VALUE`), and what a build with no attack says."""

import json
from collections import Counter
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.sampling import quotas, sample_by_passage
from advrace.release import read_split


def _manifest(out: Path) -> dict:
    return json.loads((out / "manifest.json").read_text())


# --------------------------------------------------------------------------- the sampler


def test_quotas_share_n_in_proportion_and_add_up():
    assert quotas({"high": 30, "middle": 10}, 10) == {"high": 8, "middle": 2}  # 7.5 and 2.5: ties by name
    assert sum(quotas({"a": 7, "b": 5, "c": 1}, 6).values()) == 6


def test_the_sample_keeps_passages_whole_and_follows_the_seed():
    keys = [f"p{i // 3}" for i in range(30)] + [f"s{i}" for i in range(10)]  # 10 passages of 3, 10 of 1
    strata = [""] * 40
    a = sample_by_passage(keys, strata, 11, seed=1)
    assert len(a.indices) == 11  # passages of one question make the count exact
    chosen = Counter(keys[i] for i in a.indices)
    assert all(n == keys.count(k) for k, n in chosen.items())  # every chosen passage whole
    assert a.indices == tuple(sorted(a.indices))  # input order
    assert sample_by_passage(keys, strata, 11, seed=1) == a
    assert sample_by_passage(keys, strata, 11, seed=2) != a


def test_the_sample_gives_each_stratum_its_share():
    keys = [f"h{i}" for i in range(30)] + [f"m{i}" for i in range(10)]
    strata = ["high"] * 30 + ["middle"] * 10
    drawn = sample_by_passage(keys, strata, 8, seed=0)
    assert drawn.by_stratum == {"high": 6, "middle": 2}
    assert sum(strata[i] == "middle" for i in drawn.indices) == 2


def test_a_quota_no_passage_fits_comes_as_close_as_whole_passages_allow():
    keys = [f"p{i // 4}" for i in range(20)]  # five passages of four questions
    assert len(sample_by_passage(keys, [""] * 20, 5, seed=0).indices) == 4  # 4 is nearer 5 than 8
    assert len(sample_by_passage(keys, [""] * 20, 7, seed=0).indices) == 8


# --------------------------------------------------------------------------- --sample and --limit


def test_build_with_a_seeded_sample(tmp_path, capsys):
    args = ["build", "--data", "@sample/race", "--sample", "20", "--seed", "4", "--quiet"]
    assert main([*args, "--out", str(tmp_path / "a")]) == 0
    assert "a seeded sample (seed 4) of 77" in capsys.readouterr().out
    src = _manifest(tmp_path / "a")["source"]
    sel = src["selection"]
    assert (sel["method"], sel["questions"], sel["seed"], sel["from"]) == ("sample", 20, 4, 77)
    assert set(sel["by_level"]) == {"high", "middle"} and src["levels"] == ["high", "middle"]
    assert abs(src["kept"] - 20) <= 4  # within half a passage (of up to 5 questions) per level
    ids = [ex.id for ex in read_split(tmp_path / "a", "original")]
    passages = Counter(i.split("-")[0] for i in ids)
    everything = Counter(ex.id.split("-")[0] for ex in read_split(_full(tmp_path), "original"))
    assert all(everything[p] == n for p, n in passages.items())  # whole passages
    assert len(passages) < 20  # not the first N: not one question per passage either
    card = (tmp_path / "a" / "README.md").read_text()
    assert "a random sample, seed 4, of the 77 read" in card

    assert main([*args, "--out", str(tmp_path / "b")]) == 0
    for f in ("data/original-00000-of-00001.jsonl", "README.md"):
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes()
    assert main(["build", "--data", "@sample/race", "--sample", "20", "--seed", "5", "--quiet",
                 "--out", str(tmp_path / "c")]) == 0
    assert [ex.id for ex in read_split(tmp_path / "c", "original")] != ids


def _full(tmp_path: Path) -> Path:
    out = tmp_path / "full"
    if not out.exists():
        assert main(["build", "--data", "@sample/race", "--quiet", "--out", str(out)]) == 0
    return out


def test_limit_stays_the_first_questions_and_is_recorded(tmp_path):
    assert main(["build", "--data", "@sample/race", "--limit", "5", "--quiet", "--out", str(tmp_path / "r")]) == 0
    src = _manifest(tmp_path / "r")["source"]
    assert src["selection"] == {"method": "first", "questions": 5}
    first = [ex.id for ex in read_split(_full(tmp_path), "original")][:5]
    assert [ex.id for ex in read_split(tmp_path / "r", "original")] == first
    assert "the source's first 5" in (tmp_path / "r" / "README.md").read_text()


def test_a_sample_larger_than_the_data_is_refused(tmp_path, capsys):
    assert main(["build", "--data", "@sample/squad", "--sample", "500", "--quiet", "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert "--sample 500" in err and "only 41 questions" in err
    assert main(["build", "--data", "@sample/race", "--sample", "0", "--quiet", "--out", str(tmp_path / "r")]) == 2


def test_a_sample_of_squad_keeps_paragraphs_whole(tmp_path):
    assert main(["build", "--data", "@sample/squad", "--sample", "10", "--quiet", "--out", str(tmp_path / "r")]) == 0
    sampled = read_split(tmp_path / "r", "original")
    every = Counter(ex.context for ex in read_split(_squad_full(tmp_path), "original"))
    assert all(every[c] == n for c, n in Counter(ex.context for ex in sampled).items())
    assert "by_level" not in _manifest(tmp_path / "r")["source"]["selection"]


def _squad_full(tmp_path: Path) -> Path:
    out = tmp_path / "squad-full"
    assert main(["build", "--data", "@sample/squad", "--quiet", "--out", str(out)]) == 0
    return out


# --------------------------------------------------------------------------- --set and no attacks


def test_set_gives_an_attack_its_settings_on_the_command_line(race_dir, tmp_path):
    out = tmp_path / "r"
    assert main(["build", "--data", str(race_dir), "--attacks", "charswap", "--quiet",
                 "--set", "splits.charswap.attack_passage=false", "--set", "seed=9",
                 "--out", str(out)]) == 0
    manifest = _manifest(out)
    assert manifest["seed"] == 9
    assert manifest["splits"]["charswap"]["config"]["attack_passage"] is False
    pairs = list(zip(read_split(out, "original"), read_split(out, "charswap")))
    assert pairs and all(a.passage == b.passage for a, b in pairs)
    assert any(a.question != b.question for a, b in pairs)


@pytest.mark.parametrize("setting, words", [
    ("splits.addsent.x=1", "no split named 'addsent'; the splits are charswap"),
    ("splits.charswap.no_such_key=1", "no_such_key"),
    ("splits.charswap.attack_passage=maybe", "attack_passage"),
    ("colour=red", "not a setting of a release config"),
    ("splits.charswap", "expected KEY=VALUE"),
])
def test_bad_settings_are_refused_before_data_is_read(tmp_path, capsys, setting, words):
    code = main(["build", "--data", str(tmp_path / "no-such-data"), "--attacks", "charswap", "--quiet",
                 "--set", setting, "--out", str(tmp_path / "r")])
    assert code == 2
    assert words in capsys.readouterr().err


def test_a_build_with_no_attack_says_so(race_dir, tmp_path, capsys):
    assert main(["build", "--data", str(race_dir), "--quiet", "--out", str(tmp_path / "r")]) == 0
    captured = capsys.readouterr()
    assert "no attacks named: wrote only `original`; see `advrace attacks`" in captured.err
    assert "7 questions" in captured.out and "1 record" not in captured.out
    assert list(_manifest(tmp_path / "r")["splits"]) == ["original"]


def test_counts_are_printed_in_the_right_number(race_dir, tmp_path, capsys):
    out = tmp_path / "r"
    assert main(["build", "--data", str(race_dir), "--attacks", "charswap", "--limit", "1", "--quiet",
                 "--out", str(out)]) == 0
    assert "wrote " + str(out) + ": 1 question from" in capsys.readouterr().out
    assert main(["audit", str(out)]) in (0, 1)
    assert "audited 1 split," in capsys.readouterr().out
