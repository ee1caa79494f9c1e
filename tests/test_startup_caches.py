"""What start-up skips or keeps must not change what a build reads: WordNet's parsed index comes
from a cache keyed by the files' content (a changed file is parsed again, never read stale), and
the packages imported without their unused extras still work, as do the extras afterwards."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("nltk", reason="nltk is not installed")

from advrace.resources import wordnet as wordnet_mod  # noqa: E402
from advrace.resources.wordnet import INDEX_CACHE, index_cache_key, load_wordnet  # noqa: E402

# A tiny WordNet in Debian's layout: enough lines for the reader's start-up (lexnames is
# generated), with one adjective satellite. Offsets are not real; the index is all that is read.
INDEX = {
    "noun": "  1 license\ndog n 2 1 @ 2 1 00000010 00000020  \ncat n 1 0 1 0 00000030  \n",
    "verb": "run v 1 0 1 0 00000040  \n",
    "adj": "big a 2 1 ! 2 0 00000050 00000060  \nhot a 1 0 1 0 00000070  \n",
    "adv": "fast r 1 0 1 0 00000080  \n",
}
DATA_ADJ = "  1 license\n00000050 00 a 01 big 0 000 | large\n00000060 00 s 01 big 0 000 | great\n"


@pytest.fixture
def tiny_wordnet(tmp_path):
    src = tmp_path / "wordnet-src"
    src.mkdir()
    for pos, text in INDEX.items():
        (src / f"index.{pos}").write_text(text, encoding="utf-8")
        (src / f"data.{pos}").write_text(DATA_ADJ if pos == "adj" else "  1 license\n", encoding="utf-8")
        (src / f"{pos}.exc").write_text("", encoding="utf-8")
    return src


def index_of(reader) -> tuple[dict, set]:
    return {k: dict(v) for k, v in reader._lemma_pos_offset_map.items()}, set(reader.satellite_offsets)


def test_the_index_cache_gives_the_parse_it_was_made_from(tiny_wordnet, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cold, _ = load_wordnet(str(tiny_wordnet), cache)
    entries = list((cache / INDEX_CACHE).iterdir())
    assert len(entries) == 1
    writes = []
    write = wordnet_mod._write_index_cache
    monkeypatch.setattr(wordnet_mod, "_write_index_cache", lambda *a: writes.append(a) or write(*a))
    warm, _ = load_wordnet(str(tiny_wordnet), cache)
    assert writes == [], "a warm start reads the cache instead of parsing (and writing) again"
    assert index_of(warm) == index_of(cold)
    assert index_of(cold) == ({"dog": {"n": [10, 20]}, "cat": {"n": [30]}, "run": {"v": [40]},
                              "big": {"a": [50, 60], "s": [60]}, "hot": {"a": [70], "s": []},
                              "fast": {"r": [80]}}, {60})


def test_a_changed_parser_does_not_read_the_old_parse(tiny_wordnet, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    cold, _ = load_wordnet(str(tiny_wordnet), cache)
    parsed = []
    monkeypatch.setattr(wordnet_mod, "_index_lines", lambda fileid, *a: parsed.append(fileid) or iter(()))
    changed, _ = load_wordnet(str(tiny_wordnet), cache)
    assert sorted(parsed) == ["index.adj", "index.adv", "index.noun", "index.verb"]
    assert not changed._lemma_pos_offset_map and cold._lemma_pos_offset_map


def test_a_changed_index_file_is_parsed_again_not_read_stale(tiny_wordnet, tmp_path):
    cache = tmp_path / "cache"
    load_wordnet(str(tiny_wordnet), cache)
    index = tiny_wordnet / "index.noun"
    stat = index.stat()
    # the same size and modification time: only the content tells the files apart
    index.write_text(INDEX["noun"].replace("cat n", "cot n"), encoding="utf-8")
    os.utime(index, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    (cache / "nltk_data").rename(tmp_path / "old-copy")  # the copy's own stamp is by size and time
    changed, _ = load_wordnet(str(tiny_wordnet), cache)
    assert "cot" in changed._lemma_pos_offset_map and "cat" not in changed._lemma_pos_offset_map
    assert len(list((cache / INDEX_CACHE).iterdir())) == 2


def test_the_key_covers_every_parsed_file_and_the_parser():
    raw = {"data.adj": b"a", "index.noun": b"b"}
    key = index_cache_key(raw)
    assert index_cache_key(dict(raw)) == key
    assert index_cache_key({**raw, "data.adj": b"A"}) != key
    assert index_cache_key({"data.adj": b"ab", "index.noun": b""}) != key, "file boundaries count"
    # the parser's code is in the key, so a changed parser cannot read an old parse; nested code
    # (a comprehension) is hashed by content, whose repr holds an address that changes per process
    code = "from advrace.resources.wordnet import index_cache_key as k; print(k({'data.adj': b'a', 'index.noun': b'b'}))"
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert other.stdout.strip() == key


def test_an_unreadable_cache_entry_is_parsed_again(tiny_wordnet, tmp_path):
    cache = tmp_path / "cache"
    cold, _ = load_wordnet(str(tiny_wordnet), cache)
    (entry,) = (cache / INDEX_CACHE).iterdir()
    entry.write_text("{not json", encoding="utf-8")
    again, _ = load_wordnet(str(tiny_wordnet), cache)
    assert index_of(again) == index_of(cold)
    assert json.loads(entry.read_text(encoding="utf-8"))["satellites"] == [60]


LEAN = """
import json, sys
from advrace.resources.packages import lean_import
lean_import(sys.argv[1])
hidden = [m for m in ("torch", "scipy", "sklearn") if m in sys.modules]
import importlib
extras = {m: importlib.util.find_spec(m) is not None and bool(importlib.import_module(m)) for m in sys.argv[2:]}
print(json.dumps({"hidden_loaded": hidden, "extras_import": extras}))
"""


@pytest.mark.parametrize("package, extras", [("nltk", ["scipy", "sklearn"]), ("spacy", ["torch"])])
def test_lean_import_skips_unused_extras_which_still_import_afterwards(package, extras):
    pytest.importorskip(package)
    done = subprocess.run([sys.executable, "-c", LEAN, package, *extras], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["hidden_loaded"] == []
    assert all(found["extras_import"].values()), "an extra hidden during the import is importable later"


def test_lean_import_of_a_package_already_imported_returns_it():
    from advrace.resources.packages import lean_import

    assert lean_import("json") is json
    assert sys.modules.get("torch", 0) is not None, "nothing is left hidden in this process"


# A pipeline folder saved by spaCy, loaded by advrace in a fresh process: whether thinc can then
# use torch (lean_import hides torch while spaCy first imports, which a transformer pipeline needs)
TORCH_SEEN = r"""
import sys
from advrace.resources.spacy_pipeline import load_pipeline
load_pipeline(sys.argv[1])
import thinc.compat
print(thinc.compat.has_torch)
"""


@pytest.mark.parametrize("requirements, has_torch", [([], "False"), (["spacy-transformers>=1.3.4,<1.4.0"], "True")])
def test_a_pipeline_that_needs_torch_gets_spacy_with_torch(tmp_path, requirements, has_torch):
    import spacy

    folder = tmp_path / "pipeline"
    spacy.blank("en").to_disk(folder)
    meta = json.loads((folder / "meta.json").read_text(encoding="utf-8"))
    (folder / "meta.json").write_text(json.dumps({**meta, "requirements": requirements}), encoding="utf-8")
    script = tmp_path / "seen.py"
    script.write_text(TORCH_SEEN, encoding="utf-8")
    out = subprocess.run([sys.executable, str(script), str(folder)], capture_output=True, text=True,
                         check=True, timeout=300).stdout.split()
    assert out[-1] == has_torch
