from pathlib import Path

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.provenance import FieldsRemoved, TextReplaced
from advrace.release import build_release, read_split, runner
from advrace.release.runner import passage_groups


def tree_bytes(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def cfg(path, splits, **extra):
    return release_config_from_dict({"data": {"path": str(path)}, "seed": 11, "splits": splits, **extra})


SPLITS = ["addsent", "charswap", "diagnosis", {"attack": "option_only"},
          {"attack": "option_only", "name": "option_only_charswap", "from": "charswap"}]


def test_results_do_not_depend_on_workers(race_dir, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "CHUNK_PASSAGES", 1)  # three chunks, so that workers fork
    build_release(cfg(race_dir, SPLITS, workers=1), tmp_path / "one")
    build_release(cfg(race_dir, SPLITS, workers=2), tmp_path / "two")
    build_release(cfg(race_dir, SPLITS, workers=3), tmp_path / "three")
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two") == tree_bytes(tmp_path / "three")


def test_option_only_splits_from_any_split(race_dir, tmp_path):
    out = tmp_path / "rel"
    manifest = build_release(cfg(race_dir, SPLITS, workers=1), out)
    assert manifest["splits"]["option_only_charswap"]["source"] == "charswap"
    orig = {e.source_id: e for e in read_split(out, "original")}
    for split in ("option_only", "option_only_charswap"):
        for ex in read_split(out, split):
            assert ex.passage == "" and ex.question == ""
            assert ex.options == orig[ex.source_id].options and ex.label == orig[ex.source_id].label
    chained = read_split(out, "option_only_charswap")[0].provenance
    assert any(isinstance(r, TextReplaced) for r in chained)  # the charswap edits come first
    assert chained[-2] == FieldsRemoved(("passage", "question"))


def test_from_must_name_an_earlier_split(race_dir, tmp_path):
    with pytest.raises(ConfigError, match="not an earlier split"):
        build_release(cfg(race_dir, [{"attack": "option_only", "from": "charswap"}, "charswap"]),
                      tmp_path / "x")


def test_a_failing_worker_leaves_no_release(race_dir, tmp_path, monkeypatch):
    from advrace.attacks.charswap import CharSwap

    def broken(self, example, rng):
        raise RuntimeError("boom")

    monkeypatch.setattr(CharSwap, "perturb", broken)
    monkeypatch.setattr(runner, "CHUNK_PASSAGES", 1)
    with pytest.raises(RuntimeError, match="boom"):
        build_release(cfg(race_dir, ["charswap"], workers=2), tmp_path / "rel")
    assert list(tmp_path.glob("*rel*")) == []


def test_workers_preload_only_what_the_attacks_use(race_dir, tmp_path, monkeypatch):
    from advrace.resources import Resources

    preloaded = []
    monkeypatch.setattr(Resources, "preload", lambda self, keys: preloaded.append(set(keys)))
    monkeypatch.setattr(runner, "CHUNK_PASSAGES", 1)
    build_release(cfg(race_dir, ["charswap", "option_only"], workers=2), tmp_path / "rel")
    assert preloaded == [{"stopwords", "stemmer"}]  # once, the union: no spaCy, GloVe or WordNet


def test_a_build_of_one_chunk_forks_no_workers(race_dir, tmp_path, monkeypatch):
    def no_pool(*args, **kwargs):
        raise AssertionError("a worker pool for a single chunk")

    monkeypatch.setattr(runner, "ProcessPoolExecutor", no_pool)
    manifest = build_release(cfg(race_dir, ["charswap"], workers=4), tmp_path / "rel")
    assert manifest["splits"]["charswap"]["count"] == 7


def test_passage_groups_keep_first_appearance_order():
    from advrace.core.examples import MCExample

    exs = [MCExample(id=str(i), passage=p, question="q", options=("a", "b"), label=0)
           for i, p in enumerate("ABAC")]
    assert passage_groups(exs) == [[0, 2], [1], [3]]


def test_each_passage_and_question_is_analysed_once(race_dir):
    from collections import Counter

    from advrace.formats import load
    from advrace.resources import Resources, get_resources
    from advrace.release.runner import run_splits

    shared = get_resources()
    res = Resources(shared.config)
    res.__dict__.update({k: getattr(shared, k) for k in ("nlp", "sentencizer", "tagger", "glove",
                                                          "wordnet", "stopwords")})
    seen = Counter()
    batch_sentences, batch_parse = res._sentence_starts_batch, res._parse_batch

    def count_sentences(texts):
        seen.update(("sentences", t) for t in texts)
        return batch_sentences(texts)

    def count_parses(texts):
        seen.update(("parse", t) for t in texts)
        return batch_parse(texts)

    res._sentences._compute, res._parses._compute = count_sentences, count_parses
    examples = load(str(race_dir)).examples
    config = cfg(race_dir, ["addsent", "diagnosis", {"attack": "addsent", "name": "addsent_2", "seed": 5}])
    run_splits(config, examples, res, workers=1)
    passages = {ex.passage for ex in examples}
    assert {t for kind, t in seen if kind == "sentences"} == passages
    assert all(n == 1 for n in seen.values()), seen.most_common(3)
    assert {ex.question for ex in examples} <= {t for kind, t in seen if kind == "parse"}


def test_word_tags_persist_between_processes(tmp_path):
    from advrace.resources import Resources, ResourceConfig, get_resources

    shared = get_resources()
    first = Resources(ResourceConfig(cache_dir=str(tmp_path)))
    first.__dict__["tagger"] = shared.tagger
    tags = first.word_tags(["Tom", "river", "quickly"])
    assert tags[0][0] == "PROPN" and tags[1] == ("NOUN", "NN")
    first.save_word_tags()
    second = Resources(ResourceConfig(cache_dir=str(tmp_path)))
    second.__dict__["tagger"] = None  # would fail if it had to tag anything
    assert second.word_tags(["river", "Tom", "quickly"]) == [tags[1], tags[0], tags[2]]


def test_forked_workers_get_their_own_wordnet_files():
    from advrace.resources import get_resources

    res = get_resources()
    assert res.antonyms("happy", "ADJ")
    assert res.wordnet._data_file_map  # the parent has its files open
    res.after_fork()
    assert res.wordnet._data_file_map == {}
    synsets = res.wordnet.synsets("good", "a")
    assert synsets and all(s is not None for s in synsets)  # reopened on demand
