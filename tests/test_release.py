import dataclasses
import json
from pathlib import Path

import pytest

from advrace.core.config import ReleaseConfig, load_config, release_config_from_dict
from advrace.core.errors import ConfigError, DataError, VerifyError
from advrace.release import (build_release, check_release, export_advrace, read_split, split_file,
                             verify_release)

REPO = Path(__file__).resolve().parents[1]


def cfg_for(path, **extra) -> ReleaseConfig:
    return release_config_from_dict({"name": "t", "data": {"path": str(path)}, "seed": 3,
                                     "splits": [{"attack": "charswap"}], **extra})


def tree_bytes(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_build_writes_a_complete_release(race_dir, tmp_path):
    out = tmp_path / "rel"
    manifest = build_release(cfg_for(race_dir), out)
    assert set(manifest["splits"]) == {"original", "charswap"}
    assert manifest["source"]["kept"] == 7 and manifest["source"]["read"] == 7
    assert manifest["resources"]  # the stopword list and stemmer are versioned
    for split, info in manifest["splits"].items():
        lines = (out / info["file"]).read_text(encoding="utf-8").splitlines()
        assert len(lines) == info["count"] == 7
        recs = [json.loads(line) for line in lines]
        assert all(r["id"] == f"{split}/{r['source_id']}" for r in recs)
    ids = [json.loads(line)["id"] for info in manifest["splits"].values()
           for line in (out / info["file"]).read_text().splitlines()]
    assert len(ids) == len(set(ids))  # unique across the whole release
    stats = json.loads((out / "stats.json").read_text())
    assert stats["splits"]["original"]["words_changed"] == 0
    assert 0 < stats["splits"]["charswap"]["words_changed"] < 0.5
    assert stats["splits"]["charswap"]["examples_with_options_changed"] == 0
    card = (out / "README.md").read_text()
    assert "path: data/charswap-00000-of-00001.jsonl" in card
    assert verify_release(out) == []


def test_options_never_change(race_dir, tmp_path):
    build_release(cfg_for(race_dir), tmp_path / "rel")
    orig = {e.source_id: e for e in read_split(tmp_path / "rel", "original")}
    for ex in read_split(tmp_path / "rel", "charswap"):
        assert ex.options == orig[ex.source_id].options and ex.label == orig[ex.source_id].label


def test_build_is_byte_identical(race_dir, tmp_path):
    build_release(cfg_for(race_dir), tmp_path / "a")
    build_release(cfg_for(race_dir), tmp_path / "b")
    assert tree_bytes(tmp_path / "a") == tree_bytes(tmp_path / "b")
    build_release(cfg_for(race_dir, seed=4), tmp_path / "c")
    assert tree_bytes(tmp_path / "a")[split_file("charswap")] != tree_bytes(tmp_path / "c")[split_file("charswap")]


def test_verify_catches_any_change(race_dir, tmp_path):
    out = tmp_path / "rel"
    build_release(cfg_for(race_dir), out)
    data = out / split_file("charswap")
    data.write_bytes(data.read_bytes().replace(b"village", b"villagE", 1))
    assert any("contents differ" in p for p in verify_release(out))
    with pytest.raises(VerifyError):
        check_release(out)
    data.unlink()
    assert any("missing" in p for p in verify_release(out))


def test_verify_catches_extra_files(race_dir, tmp_path):
    out = tmp_path / "rel"
    build_release(cfg_for(race_dir), out)
    (out / "data" / "sneaky-00000-of-00001.jsonl").write_text("{}\n")
    assert verify_release(out) == ["data/sneaky-00000-of-00001.jsonl: not listed in the manifest"]


def test_a_copy_from_the_hub_verifies(race_dir, tmp_path):
    """A Hub repo adds .gitattributes, and a download to a local_dir keeps a cache folder: neither
    is the release's, so both pass; anything else unlisted still fails."""
    out = tmp_path / "rel"
    build_release(cfg_for(race_dir), out)
    (out / ".gitattributes").write_text("*.jsonl filter=lfs\n")
    (out / ".cache" / "huggingface" / "download").mkdir(parents=True)
    (out / ".cache" / "huggingface" / "download" / "README.md.metadata").write_text("x\n")
    assert verify_release(out) == []
    (out / ".cache" / "other").write_text("x\n")
    (out / "data" / ".gitattributes").write_text("x\n")
    assert verify_release(out) == [".cache/other: not listed in the manifest",
                                   "data/.gitattributes: not listed in the manifest"]


def test_interrupted_build_leaves_previous_release(race_dir, tmp_path, monkeypatch):
    out = tmp_path / "rel"
    build_release(cfg_for(race_dir), out)
    before = tree_bytes(out)
    from advrace.attacks.charswap import CharSwap

    calls = {"n": 0}
    real = CharSwap.perturb

    def dying(self, example, rng):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return real(self, example, rng)

    monkeypatch.setattr(CharSwap, "perturb", dying)
    with pytest.raises(KeyboardInterrupt):
        build_release(cfg_for(race_dir, seed=99), out)
    assert tree_bytes(out) == before and verify_release(out) == []
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_interrupted_write_leaves_nothing(race_dir, tmp_path, monkeypatch):
    import advrace.release.build as build

    real = build._write

    def failing(root, rel, text):
        if rel == "stats.json":
            raise OSError("disk full")
        return real(root, rel, text)

    monkeypatch.setattr(build, "_write", failing)
    with pytest.raises(OSError):
        build_release(cfg_for(race_dir), tmp_path / "new")
    assert not (tmp_path / "new").exists()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


def test_refuses_to_overwrite_a_foreign_folder(race_dir, tmp_path):
    out = tmp_path / "mine"
    out.mkdir()
    (out / "thesis.tex").write_text("precious")
    with pytest.raises(ConfigError, match="not an advrace release"):
        build_release(cfg_for(race_dir), out)


def test_lenient_build_lists_skipped_records(race_dir, tmp_path):
    bad = race_dir / "middle" / "2.txt"
    doc = json.loads(bad.read_text())
    doc["answers"][1] = "F"
    bad.write_text(json.dumps(doc))
    with pytest.raises(DataError) as err:
        build_release(cfg_for(race_dir), tmp_path / "strict")
    assert "2.txt" in str(err.value)
    manifest = build_release(cfg_for(race_dir, data={"path": str(race_dir), "lenient": True}),
                             tmp_path / "lenient")
    src = manifest["source"]
    assert src["read"] == 7 and src["kept"] == 6 and len(src["skipped"]) == 1
    assert "2.txt" in src["skipped"][0]["file"]
    assert manifest["splits"]["charswap"]["count"] == 6


def test_squad_release_writes_v11_json_with_valid_offsets(squad_file, tmp_path):
    out = tmp_path / "sq"
    manifest = build_release(cfg_for(squad_file), out)
    assert manifest["task"] == "extractive_qa"
    for split in ("original", "charswap"):
        doc = json.loads((out / "squad" / f"{split}.json").read_text())
        qas = [(p["context"], qa) for a in doc["data"] for p in a["paragraphs"] for qa in p["qas"]]
        assert len(qas) == 3
        for ctx, qa in qas:
            assert qa["id"].startswith(f"{split}/")
            for a in qa["answers"]:
                assert ctx[a["answer_start"]:a["answer_start"] + len(a["text"])] == a["text"]
    assert verify_release(out) == []


def test_export_advrace_format(race_dir, tmp_path):
    out = tmp_path / "rel"
    build_release(cfg_for(race_dir), out)
    [one] = export_advrace(out, tmp_path / "cs.json", ["charswap"])
    data = json.loads(one.read_text())
    assert len(data) == 7
    entry = data["middle2.txt-1"]
    assert set(entry) == {"context", "question", "options", "label"} and entry["label"] == 0
    both = export_advrace(out, tmp_path / "all")
    assert sorted(p.name for p in both) == ["charswap.json", "original.json"]
    with pytest.raises(ConfigError, match="no split"):
        export_advrace(out, tmp_path / "x.json", ["addsent"])


def test_config_errors(tmp_path):
    with pytest.raises(ConfigError, match="unknown key"):
        release_config_from_dict({"splits": [{"attack": "charswap", "sed": 1}]})
    with pytest.raises(ConfigError, match="used twice"):
        release_config_from_dict({"splits": ["charswap", "charswap"]})
    bad = tmp_path / "bad.yaml"
    bad.write_text("name: [unclosed")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(str(bad))


def test_shipped_configs_parse():
    for path in sorted((REPO / "configs" / "release").glob("*.yaml")):
        cfg = load_config(str(path))
        assert cfg.splits and cfg.data.path, path


def test_sample_release_loads_with_datasets(tmp_path):
    datasets = pytest.importorskip("datasets")
    out = tmp_path / "sample"
    cfg = load_config(str(REPO / "configs" / "release" / "sample.yaml"))
    model_based = {"distractor_extraction", "distractor_generation"}
    assert model_based <= {s.attack for s in cfg.splits}
    # the model-based splits need the checkpoints `make demo` trains (tested elsewhere)
    cfg = dataclasses.replace(cfg, splits=tuple(s for s in cfg.splits if s.attack not in model_based))
    manifest = build_release(cfg, out)
    assert manifest["source"]["kept"] >= 60
    ds = datasets.load_dataset("json", data_dir=str(out), cache_dir=str(tmp_path / "hf"))
    assert set(ds) == set(manifest["splits"])
    for split, info in manifest["splits"].items():
        assert ds[split].num_rows == info["count"]
    row = ds["charswap"][0]
    assert row["id"].startswith("charswap/") and len(row["options"]) == 4
    by_card = datasets.load_dataset(str(out), cache_dir=str(tmp_path / "hf2"))
    assert set(by_card) == set(manifest["splits"])


# ---------------------------------------------------------------- the card says what was read


def race_dev_middle(root: Path) -> Path:
    """A tiny RACE dev set in the original layout: RACE/dev/middle/*.txt."""
    from conftest import race_passage

    for n, k in [(1, 2), (2, 3)]:
        path = root / "RACE" / "dev" / "middle" / f"{n}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(race_passage(f"middle{n}.txt", k)), encoding="utf-8")
    return root / "RACE" / "dev"


def test_a_test_recipe_on_dev_data_writes_a_dev_card(tmp_path):
    """race-test.yaml reused with --data RACE/dev: the card and manifest say dev, from the data."""
    from advrace.core.config import with_overrides

    data = race_dev_middle(tmp_path)
    cfg = with_overrides(load_config(str(REPO / "configs" / "release" / "race-test.yaml")), data=str(data),
                         workers=1)
    assert [s.attack for s in cfg.splits] == ["addsent", "charswap", "diagnosis", "option_only"]
    manifest = build_release(cfg, tmp_path / "rel")
    src = manifest["source"]
    assert (src["split"], src["levels"], src["kept"], src["passages"]) == ("dev", ["middle"], 5, 2)
    assert "split" not in manifest["config"]["data"]  # race-dir reads no `split`; the source says which
    card = (tmp_path / "rel" / "README.md").read_text(encoding="utf-8")
    assert "Source: `dev` (race-dir), the **dev** split, RACE middle school; 5 questions on 2 passages" in card
    assert "the **test** split" not in card and "test set" not in card
    assert ("The recipe's name (`advrace-race-test`) names the test split, but the data read is the "
            "**dev** split") in card

    dev = load_config(str(REPO / "configs" / "release" / "race-dev.yaml"))
    assert dev.data.path == str(REPO / "RACE" / "dev") and [s.attack for s in dev.splits] == [s.attack for s in cfg.splits]
    build_release(with_overrides(dev, data=str(data), attacks=["charswap"], workers=1), tmp_path / "dev")
    card = (tmp_path / "dev" / "README.md").read_text(encoding="utf-8")
    assert "# advrace-race-dev" in card and "the **dev** split" in card and "The recipe's" not in card
    # --data replaced the recipe's own data.path: its description (true or not of this data) is left out
    assert dev.description.strip() not in card and "\nAdversarial splits of RACE.\n" in card
    assert ("The recipe `advrace-race-dev` names its own data (`dev`); this release was built from data given "
            "in its place") in card
    recipe = tmp_path / "recipe.yaml"  # a recipe whose own data.path is this data: its description is kept
    recipe.write_text(f"name: mine\ndescription: {dev.description}\ndata:\n  path: {data}\nsplits: [charswap]\n",
                      encoding="utf-8")
    for given in (None, str(data)):  # --data naming the recipe's own data changes nothing
        build_release(with_overrides(load_config(str(recipe)), data=given, workers=1), tmp_path / "own")
        card = (tmp_path / "own" / "README.md").read_text(encoding="utf-8")
        assert dev.description.strip() in card and "names its own data" not in card


def test_a_description_that_names_another_split_is_left_out(race_dir, tmp_path):
    cfg = cfg_for(race_dir, name="my-release", description="Adversarial splits of the RACE dev set.")
    manifest = build_release(cfg, tmp_path / "rel")
    assert manifest["source"]["split"] == "test"  # conftest's race_dir is RACE/test
    card = (tmp_path / "rel" / "README.md").read_text(encoding="utf-8")
    assert "RACE dev set" not in card and "the **test** split" in card
    assert "The recipe's description names the dev split" in card
    plain = tmp_path / "plain"
    plain.mkdir()
    for f in race_dir.rglob("*.txt"):
        (plain / f.name).write_bytes(f.read_bytes())
    manifest = build_release(cfg_for(plain, description="Adversarial splits of the RACE dev set."),
                             tmp_path / "plain-rel")
    card = (tmp_path / "plain-rel" / "README.md").read_text(encoding="utf-8")
    assert manifest["source"]["split"] is None and "RACE dev set" in card  # nothing to contradict
    assert "a split its folder and file names do not name" in card


def test_stats_and_card_count_removed_words(race_dir, tmp_path):
    """option_only removes the passage and the question and changes no word: 0% changed, 100%
    removed, in stats.json and in the card."""
    from advrace.core.text import word_edits

    build_release(cfg_for(race_dir, splits=["charswap", "option_only"]), tmp_path / "rel")
    stats = json.loads((tmp_path / "rel" / "stats.json").read_text(encoding="utf-8"))["splits"]
    only = stats["option_only"]
    assert only["words_changed"] == 0.0 and only["words_removed"] == 1.0
    assert only["words_removed_by_field"] == {"question": 1.0, "passage": 1.0}
    assert stats["charswap"]["words_removed"] == 0.0 and stats["charswap"]["words_changed"] > 0
    assert stats["original"]["words_removed"] == 0.0
    card = (tmp_path / "rel" / "README.md").read_text(encoding="utf-8")
    assert "| split | attack | questions | perturbed | words changed | words removed | sha256 |" in card
    assert "| option_only | option_only | 7 | 7 | 0.0% | 100.0% |" in card
    cases = [("a b c d", "a x c d"), ("a b c d", "a b new words c d"), ("a b c d", ""), ("a b c d", "a c"),
             ("a b c d e", "a x y e"), ("one two", "one two three four five")]
    assert [word_edits(*c) for c in cases] == [(1, 0), (2, 0), (0, 4), (0, 2), (2, 1), (3, 0)]
