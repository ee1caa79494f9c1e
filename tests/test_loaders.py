"""Loaders on small hand-written inputs: good data, every malformed case, strict and lenient."""

from __future__ import annotations

import gzip
import json
import os
import shutil
from pathlib import Path

import pytest

from advrace import formats as loaders
from advrace.cli import main
from advrace.core.errors import AdvraceError, ConfigError, DataError
from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.formats import (REGISTRY, Format, LoadResult, detect_format, format_names, load,
                             register_format, unregister_format)
from advrace.training.config import data_from_dict

ARTICLE = "  Tom lives in Paris.\nHe likes cats — and café au lait.  "
SQUAD_CONTEXT = "The Eiffel Tower is in Paris. It was built in 1889."
BUILT_IN_FORMATS = ("race-dir", "race-jsonl", "advrace-json", "squad", "hub")  # in --format's order


# ---------------------------------------------------------------- fixture writers


def passage(pid: str | None = "high1.txt", n: int = 2, article: str = ARTICLE, **over) -> dict:
    obj = {"article": article,
           "questions": [f"Question {k} about Tom?" for k in range(n)],
           "options": [[f"opt {k}{c}" for c in "ABCD"] for k in range(n)],
           "answers": ["ABCD"[(k + 1) % 4] for k in range(n)]}
    if pid is not None:
        obj["id"] = pid
    obj.update(over)
    return obj


def without(obj: dict, key: str) -> dict:
    return {k: v for k, v in obj.items() if k != key}


def write(path: Path, content) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(content, bytes):
        path.write_bytes(content)
    elif isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_text(json.dumps(content, ensure_ascii=False), encoding="utf-8")
    return path


def write_jsonl(path: Path, rows, gz: bool = False) -> Path:
    lines = [r if isinstance(r, (str, bytes)) else json.dumps(r, ensure_ascii=False) for r in rows]
    data = b"\n".join(l if isinstance(l, bytes) else l.encode("utf-8") for l in lines) + b"\n"
    return write(path, gzip.compress(data) if gz else data)


def hub_row(eid: str = "high1.txt", question: str = "What does Tom like?", answer="A",
            options=("cats", "dogs", "fish", "birds"), article: str = ARTICLE, **over) -> dict:
    row = {"example_id": eid, "article": article, "question": question,
           "options": list(options), "answer": answer}
    row.update(over)
    return row


def adv_rec(question: str = "What does Tom like?", label=0, context: str = ARTICLE,
            options=("cats", "dogs", "fish", "birds"), **over) -> dict:
    rec = {"context": context, "question": question, "options": list(options), "label": label}
    rec.update(over)
    return rec


def qa(qid: str, question: str = "Where is the tower?", answers=(("Paris", 23),), **over) -> dict:
    q = {"id": qid, "question": question,
         "answers": [{"text": t, "answer_start": s} for t, s in answers]}
    q.update(over)
    return q


def squad_doc(qas=None, context: str = SQUAD_CONTEXT, title: str = "Eiffel_Tower") -> dict:
    qas = [qa("q1"), qa("q2", "When was it built?", (("1889", 46),))] if qas is None else qas
    return {"version": "1.1",
            "data": [{"title": title, "paragraphs": [{"context": context, "qas": qas}]}]}


def race_tree(root: Path) -> Path:
    """RACE/{test,dev}/{high,middle} with numbers that sort differently as text."""
    for split in ("test", "dev"):
        for level in ("high", "middle"):
            for num in (10, 2, 1):
                pid = f"{level}{num}.txt" if split == "test" else f"{split}{level}{num}.txt"
                write(root / "RACE" / split / level / f"{num}.txt", passage(pid))
    return root / "RACE"


def message_names(err: DataError, file: str, record: str | None, problem: str) -> None:
    text = str(err)
    assert err.file == file and file in text
    assert err.record == record
    if record is not None:
        assert record in text
    assert problem in err.problem and problem in text


# ---------------------------------------------------------------- race-dir


def test_race_dir_whole_tree_natural_order_and_texts(tmp_path):
    root = race_tree(tmp_path)
    res = loaders.load_race_dir(str(root))
    assert res.format == "race-dir" and res.source == str(root)
    assert res.read == res.kept == 24 and res.skipped == []
    ids = [ex.id for ex in res.examples]
    assert ids[:6] == ["devhigh1.txt-0", "devhigh1.txt-1", "devhigh2.txt-0", "devhigh2.txt-1",
                       "devhigh10.txt-0", "devhigh10.txt-1"]
    assert ids[-2:] == ["middle10.txt-0", "middle10.txt-1"]
    assert res.files == sorted(res.files) and "test/high/10.txt" in res.files and len(res.files) == 12
    ex = res.examples[0]
    assert isinstance(ex, MCExample) and ex.source_id == ex.id
    assert ex.passage == ARTICLE
    assert ex.question == "Question 0 about Tom?"
    assert ex.options == ("opt 0A", "opt 0B", "opt 0C", "opt 0D")
    assert ex.label == 1 and res.examples[1].label == 2


def test_race_dir_sub_folder_and_plain_folder(tmp_path):
    root = race_tree(tmp_path)
    test = loaders.load_race_dir(str(root / "test"))
    assert test.kept == 12 and test.files[0] == "high/1.txt"
    high = loaders.load_race_dir(str(root / "test" / "high"))
    assert [e.id for e in high.examples][::2] == ["high1.txt-0", "high2.txt-0", "high10.txt-0"]
    assert high.files == ["1.txt", "10.txt", "2.txt"]

    plain = tmp_path / "few"
    write(plain / "b.txt", passage("b", n=1))
    write(plain / "a.txt", passage("a", n=1))
    write(plain / "notes.md", "not a passage")
    write(plain / ".hidden.txt", b"\xff\xfe junk")
    assert [e.id for e in loaders.load_race_dir(plain).examples] == ["a-0", "b-0"]


def test_race_dir_missing_id_uses_relative_path(tmp_path):
    write(tmp_path / "d" / "high" / "7.txt", passage(None, n=2))
    res = loaders.load_race_dir(str(tmp_path / "d"))
    assert [e.id for e in res.examples] == ["high/7.txt-0", "high/7.txt-1"]


def test_race_dir_limit_stops_reading(tmp_path):
    root = race_tree(tmp_path)
    res = loaders.load_race_dir(str(root / "test"), limit=3)
    assert [e.id for e in res.examples] == ["high1.txt-0", "high1.txt-1", "high2.txt-0"]
    assert res.read == 3 and res.files == ["high/1.txt", "high/2.txt"]
    assert loaders.load_race_dir(str(root / "test"), limit=0).read == 0


def test_race_dir_whole_path_problems_even_lenient(tmp_path):
    with pytest.raises(DataError, match="no such folder"):
        loaders.load_race_dir(str(tmp_path / "nope"), lenient=True)
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.txt files"):
        loaders.load_race_dir(str(tmp_path / "empty"), lenient=True)


def test_n_options_other_than_four(tmp_path):
    obj = passage("p", n=1, options=[["x", "y", "z", "w", "v"]], answers=["E"])
    write(tmp_path / "d" / "1.txt", obj)
    assert loaders.load_race_dir(tmp_path / "d", n_options=5).examples[0].label == 4
    with pytest.raises(DataError, match="expected 4 options, got 5"):
        loaders.load_race_dir(tmp_path / "d")


# ---------------------------------------------------------------- race-jsonl


@pytest.mark.parametrize("gz", [False, True])
def test_race_jsonl_hub_rows(tmp_path, gz):
    rows = [hub_row("high1.txt", "Q one?", "B"), "", hub_row("high1.txt", "Q two?", "D"),
            "   ", hub_row("middle5.txt", "Q three?", "A")]
    path = write_jsonl(tmp_path / ("race.jsonl.gz" if gz else "race.jsonl"), rows, gz=gz)
    res = loaders.load_race_jsonl(str(path))
    assert [e.id for e in res.examples] == ["high1.txt-0", "high1.txt-1", "middle5.txt-0"]
    assert [e.label for e in res.examples] == [1, 3, 0]
    assert res.examples[1].question == "Q two?" and res.examples[0].passage == ARTICLE
    assert res.read == 3 and res.files == [path.name] and res.format == "race-jsonl"


def test_race_jsonl_passage_rows(tmp_path):
    rows = [dict(passage("high1.txt"), split_path="test/high/1.txt"), passage("middle2.txt", n=1)]
    res = loaders.load_race_jsonl(write_jsonl(tmp_path / "p.jsonl", rows))
    assert [e.id for e in res.examples] == ["high1.txt-0", "high1.txt-1", "middle2.txt-0"]
    assert res.examples[2].options == ("opt 0A", "opt 0B", "opt 0C", "opt 0D")


def test_race_formats_agree_on_ids(tmp_path):
    obj = passage("high9.txt", n=3)
    from_dir = loaders.load_race_dir(write(tmp_path / "d" / "9.txt", obj).parent)
    hub_rows = [hub_row("high9.txt", q, a, o) for q, a, o in
                zip(obj["questions"], obj["answers"], obj["options"])]
    from_hub = loaders.load_race_jsonl(write_jsonl(tmp_path / "h.jsonl", hub_rows))
    assert from_dir.examples == from_hub.examples


# ---------------------------------------------------------------- advrace-json


def test_advrace_json_letter_and_int_labels_in_key_order(tmp_path):
    data = {"middle3.txt-1": adv_rec(label="C"), "high1.txt-0": adv_rec(label=3),
            "high1.txt-1": adv_rec(label=0)}
    res = loaders.load_advrace_json(write(tmp_path / "adv.json", data))
    assert [e.id for e in res.examples] == list(data)
    assert [e.label for e in res.examples] == [2, 3, 0]
    assert res.examples[0].passage == ARTICLE and res.examples[0].source_id == "middle3.txt-1"
    assert res.format == "advrace-json" and res.read == 3


# ---------------------------------------------------------------- squad


def test_squad_offsets_titles_and_dedup(tmp_path):
    doc = squad_doc([qa("q1", answers=(("Paris", 23), ("Paris", 23), ("in Paris", 20))),
                     qa("q2", "When?", (("1889", 46),))])
    res = loaders.load_squad(write(tmp_path / "dev-v1.1.json", doc))
    assert [e.id for e in res.examples] == ["q1", "q2"]
    q1 = res.examples[0]
    assert isinstance(q1, SpanExample) and q1.title == "Eiffel_Tower"
    assert q1.answers == (Answer("Paris", 23), Answer("in Paris", 20))
    assert all(SQUAD_CONTEXT[a.start:a.end] == a.text for e in res.examples for a in e.answers)
    assert res.format == "squad" and res.read == res.kept == 2


def test_squad_limit(tmp_path):
    res = loaders.load_squad(write(tmp_path / "s.json", squad_doc()), limit=1)
    assert [e.id for e in res.examples] == ["q1"] and res.read == 1


# ---------------------------------------------------------------- detection and dispatch


def test_detect_format_each(tmp_path):
    root = race_tree(tmp_path)
    assert detect_format(str(root)) == "race-dir"
    assert detect_format(str(write_jsonl(tmp_path / "a.jsonl", [hub_row()]))) == "race-jsonl"
    assert detect_format(str(write_jsonl(tmp_path / "a.jsonl.gz", [hub_row()], gz=True))) == "race-jsonl"
    assert detect_format(str(write(tmp_path / "s.json", squad_doc()))) == "squad"
    assert detect_format(str(write(tmp_path / "adv.json", {"x-0": adv_rec()}))) == "advrace-json"
    assert detect_format("ehovy/race") == "hub"
    assert detect_format("rajpurkar/squad") == "hub"
    assert detect_format("ehovy/race:middle") == "hub"


@pytest.mark.parametrize("name,content", [("odd.json", [1, 2]), ("odd.json", {"a": 1}),
                                          ("odd.csv", "a,b\n")])
def test_detect_format_unknown_says_pass_format(tmp_path, name, content):
    with pytest.raises(ConfigError, match="--format"):
        detect_format(str(write(tmp_path / name, content)))


def test_detect_format_missing_local_path(tmp_path):
    with pytest.raises(DataError, match="no such file"):
        detect_format(str(tmp_path / "missing.json"))


def test_load_dispatches(tmp_path):
    root = race_tree(tmp_path)
    assert load(str(root / "test")).format == "race-dir"
    adv = write(tmp_path / "adv.json", {"x-0": adv_rec()})
    assert load(str(adv)).format == "advrace-json"
    assert load(str(adv), "advrace-json", limit=0).kept == 0
    squad = write(tmp_path / "s.json", squad_doc())
    assert load(str(squad), "squad", lenient=True).kept == 2
    with pytest.raises(ConfigError, match="unknown format"):
        load(str(squad), "csv")
    assert format_names() == BUILT_IN_FORMATS


@pytest.mark.parametrize("kwargs", [{"limit": -1}, {"limit": "3"}, {"n_options": 1}])
def test_bad_arguments(tmp_path, kwargs):
    with pytest.raises(ConfigError):
        load(str(write(tmp_path / "adv.json", {"x-0": adv_rec()})), **kwargs)


# ---------------------------------------------------------------- fingerprint


def test_fingerprint_stable_across_directories_and_sensitive_to_bytes(tmp_path):
    root = race_tree(tmp_path / "one")
    copy = tmp_path / "elsewhere" / "deeper" / "RACE"
    shutil.copytree(root, copy)
    fp = loaders.load_race_dir(str(root)).fingerprint()
    assert len(fp) == 64 and fp == loaders.load_race_dir(str(copy)).fingerprint()
    target = copy / "test" / "middle" / "10.txt"
    data = bytearray(target.read_bytes())
    data[data.index(b"Tom")] = ord("T") + 1
    target.write_bytes(bytes(data))
    assert loaders.load_race_dir(str(copy)).fingerprint() != fp


def test_fingerprint_single_files(tmp_path):
    one = write(tmp_path / "a" / "s.json", squad_doc())
    two = tmp_path / "b" / "s.json"
    two.parent.mkdir()
    shutil.copy(one, two)
    fp = load(str(one)).fingerprint()
    assert fp == load(str(two)).fingerprint()
    two.write_bytes(two.read_bytes().replace(b"1889", b"1899"))
    assert load(str(two), "squad", lenient=True).fingerprint() != fp
    assert LoadResult(examples=[], source="x", format="squad", files=[], read=0,
                      skipped=[]).fingerprint()


# ---------------------------------------------------------------- malformed inputs

# Each case writes one good unit and one bad one, and says where the loader must point:
# (builder, relative file or None for the given path, record, problem, kept, skipped) in lenient.


def _race_dir(bad, good_id="high1.txt"):
    def build(tmp):
        root = tmp / "RACE" / "test"
        write(root / "high" / "1.txt", passage(good_id))
        write(root / "high" / "2.txt", bad)
        return root, "race-dir"
    return build


def _jsonl(*rows):
    def build(tmp):
        return write_jsonl(tmp / "race.jsonl", [hub_row("high1.txt"), *rows]), "race-jsonl"
    return build


def _adv(*pairs):
    def build(tmp):
        text = "{" + ", ".join([f'"good-0": {json.dumps(adv_rec())}'] +
                               [f"{json.dumps(k)}: {json.dumps(v)}" for k, v in pairs]) + "}"
        return write(tmp / "adv.json", text), "advrace-json"
    return build


def _squad(*qas, context=SQUAD_CONTEXT):
    def build(tmp):
        doc = squad_doc([qa("good1")])
        doc["data"].append({"title": "Second", "paragraphs": [{"context": context, "qas": list(qas)}]})
        return write(tmp / "squad.json", doc), "squad"
    return build


BAD_Q = passage("high2.txt")
MALFORMED = {
    # race-dir: question-level problems point at "<passage id> question k"
    "race-dir bad letter": (_race_dir(dict(BAD_Q, answers=["A", "x"])), "high/2.txt",
                            "high2.txt question 1", "'x' is not a letter A-D", 3, 1),
    "race-dir letter out of range": (_race_dir(dict(BAD_Q, answers=["E", "A"])), "high/2.txt",
                                     "high2.txt question 0", "out of range for 4 options", 3, 1),
    "race-dir wrong option count": (_race_dir(dict(BAD_Q, options=[["a", "b", "c"], ["a", "b", "c", "d"]])),
                                    "high/2.txt", "high2.txt question 0",
                                    "expected 4 options, got 3", 3, 1),
    "race-dir empty question": (_race_dir(dict(BAD_Q, questions=["ok?", " \t"])), "high/2.txt",
                                "high2.txt question 1", "empty question", 3, 1),
    "race-dir duplicate id": (_race_dir(passage("high1.txt")), "high/2.txt",
                              "high1.txt question 0", "duplicate id 'high1.txt-0'", 2, 2),
    # race-dir: file-level problems have no record
    "race-dir missing article": (_race_dir(without(BAD_Q, "article")), "high/2.txt", None,
                                 "missing field 'article'", 2, 1),
    "race-dir missing answers": (_race_dir(without(BAD_Q, "answers")), "high/2.txt", None,
                                 "missing field 'answers'", 2, 1),
    "race-dir lengths disagree": (_race_dir(dict(BAD_Q, answers=["A"])), "high/2.txt", None,
                                  "lengths disagree", 2, 1),
    "race-dir empty article": (_race_dir(dict(BAD_Q, article="  \n ")), "high/2.txt", None,
                               "empty article", 2, 1),
    "race-dir invalid json": (_race_dir('{"article": "x",\n "questions": [}'), "high/2.txt", None,
                              "invalid JSON at line 2, column", 2, 1),
    "race-dir invalid utf-8": (_race_dir(b'{"article": "caf\xe9"}'), "high/2.txt", None,
                               "invalid UTF-8", 2, 1),
    # race-jsonl
    "jsonl missing field": (_jsonl(without(hub_row("high2.txt"), "answer")), None,
                            "line 2 (example_id=high2.txt)", "missing field 'answer'", 1, 1),
    "jsonl bad letter": (_jsonl(hub_row("high2.txt", answer="F")), None,
                         "line 2 (example_id=high2.txt)", "out of range", 1, 1),
    "jsonl wrong option count": (_jsonl(hub_row("high2.txt", options=["a", "b"])), None,
                                 "line 2 (example_id=high2.txt)", "expected 4 options, got 2", 1, 1),
    "jsonl empty article": (_jsonl(hub_row("high2.txt", article="")), None,
                            "line 2 (example_id=high2.txt)", "empty article", 1, 1),
    "jsonl empty question": (_jsonl(hub_row("high2.txt", question="")), None,
                             "line 2 (example_id=high2.txt)", "empty question", 1, 1),
    "jsonl invalid json": (_jsonl("", '{"example_id": "high2.txt",'), None, "line 3",
                           "invalid JSON at column", 1, 1),
    "jsonl invalid utf-8": (_jsonl(b'{"example_id": "caf\xe9"}'), None, "line 2",
                            "invalid UTF-8", 1, 1),
    "jsonl duplicate id": (_jsonl(passage("high1.txt", n=1)), None,
                           "line 2 (id=high1.txt) question 0", "duplicate id 'high1.txt-0'", 1, 1),
    "jsonl lengths disagree": (_jsonl(passage("high2.txt", questions=["q"])), None,
                               "line 2 (id=high2.txt)", "lengths disagree", 1, 1),
    "jsonl passage missing field": (_jsonl(without(passage("high2.txt"), "options")), None,
                                    "line 2 (id=high2.txt)", "missing field 'options'", 1, 1),
    "jsonl unknown row shape": (_jsonl({"text": "hello"}), None, "line 2", "neither 'question'", 1, 1),
    # advrace-json
    "advrace missing label": (_adv(("high2.txt-0", without(adv_rec(), "label"))), None,
                              "race_id high2.txt-0", "missing field 'label'", 1, 1),
    "advrace label out of range": (_adv(("high2.txt-0", adv_rec(label=4))), None,
                                   "race_id high2.txt-0", "label 4 is out of range", 1, 1),
    "advrace bad letter": (_adv(("high2.txt-0", adv_rec(label="a"))), None,
                           "race_id high2.txt-0", "is not a letter A-D", 1, 1),
    "advrace wrong option count": (_adv(("high2.txt-0", adv_rec(options=["a"] * 5))), None,
                                   "race_id high2.txt-0", "expected 4 options, got 5", 1, 1),
    "advrace empty context": (_adv(("high2.txt-0", adv_rec(context=" "))), None,
                              "race_id high2.txt-0", "empty context", 1, 1),
    "advrace empty question": (_adv(("high2.txt-0", adv_rec(question=""))), None,
                               "race_id high2.txt-0", "empty question", 1, 1),
    "advrace duplicate id": (_adv(("good-0", adv_rec())), None, "race_id good-0",
                             "duplicate id 'good-0'", 1, 1),
    "advrace record not an object": (_adv(("high2.txt-0", ["x"])), None, "race_id high2.txt-0",
                                     "expected a JSON object", 1, 1),
    # squad
    "squad answer not at offset": (_squad(qa("bad1", answers=(("Paris", 3),))), None, "qa bad1",
                                   "'Paris' is not found in the context at answer_start 3", 1, 1),
    "squad no answers": (_squad(qa("bad1", answers=())), None, "qa bad1", "no answers", 1, 1),
    "squad missing question": (_squad(without(qa("bad1"), "question")), None, "qa bad1",
                               "missing field 'question'", 1, 1),
    "squad missing answers": (_squad(without(qa("bad1"), "answers")), None, "qa bad1",
                              "missing field 'answers'", 1, 1),
    "squad empty question": (_squad(qa("bad1", question="  ")), None, "qa bad1", "empty question", 1, 1),
    "squad duplicate id": (_squad(qa("good1")), None, "qa good1", "duplicate id 'good1'", 1, 1),
    "squad empty context": (_squad(qa("bad1"), context="\n"), None, "article 1 (Second) paragraph 0",
                            "empty context", 1, 1),
}


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_strict_names_file_record_problem(tmp_path, case):
    build, rel, record, problem, _, _ = MALFORMED[case]
    path, fmt = build(tmp_path)
    with pytest.raises(DataError) as info:
        load(str(path), fmt)
    expected_file = os.path.join(str(path), rel) if rel else str(path)
    message_names(info.value, expected_file, record, problem)
    assert info.value.exit_code == 2


@pytest.mark.parametrize("case", list(MALFORMED), ids=list(MALFORMED))
def test_malformed_lenient_skips_and_lists(tmp_path, case):
    build, rel, record, problem, kept, skipped = MALFORMED[case]
    path, fmt = build(tmp_path)
    res = load(str(path), fmt, lenient=True)
    assert res.kept == kept and len(res.skipped) == skipped
    assert res.read == res.kept + len(res.skipped)
    first = res.skipped[0]
    assert set(first) == {"file", "record", "problem"}
    assert first["file"] == (os.path.join(str(path), rel) if rel else str(path))
    assert first["record"] == record and problem in first["problem"]
    assert all(isinstance(e, (MCExample, SpanExample)) for e in res.examples)


def test_lenient_limit_counts_only_records_looked_at(tmp_path):
    rows = [hub_row("a", answer="Z"), hub_row("b"), hub_row("c"), hub_row("d")]
    res = loaders.load_race_jsonl(write_jsonl(tmp_path / "r.jsonl", rows), lenient=True, limit=2)
    assert [e.id for e in res.examples] == ["b-0", "c-0"]
    assert res.read == 3 and len(res.skipped) == 1


@pytest.mark.parametrize("fmt,name,content,problem", [
    ("squad", "s.json", '{"version": "1.1", "data": [', "invalid JSON at line 1, column"),
    ("squad", "s.json", b'{"version": "1.1", "data": ["\xff"]}', "invalid UTF-8"),
    ("squad", "s.json", {"version": "1.1"}, "'data' list"),
    ("advrace-json", "a.json", '{"x": \n  {]', "invalid JSON at line 2, column"),
    ("advrace-json", "a.json", [adv_rec()], "expected a JSON object"),
    ("race-jsonl", "r.jsonl.gz", b"\x1f\x8b not really gzip", "not a valid gzip file"),
])
def test_unreadable_single_file_raises_even_lenient(tmp_path, fmt, name, content, problem):
    path = write(tmp_path / name, content)
    for lenient in (False, True):
        with pytest.raises(DataError) as info:
            load(str(path), fmt, lenient=lenient)
        message_names(info.value, str(path), None, problem)


@pytest.mark.parametrize("fmt", ["race-jsonl", "advrace-json", "squad"])
def test_single_file_formats_missing_path(tmp_path, fmt):
    with pytest.raises(DataError, match="no such file"):
        load(str(tmp_path / "missing.json"), fmt, lenient=True)


# ---------------------------------------------------------------- hub (conversion on local data)


class FakeHub:
    """Stands in for datasets.load_dataset so conversion is tested without a network."""

    def __init__(self, rows):
        self.rows, self.calls = rows, []

    def __call__(self, path, name=None, split=None, **kwargs):
        import datasets
        self.calls.append((path, name, split))
        return datasets.Dataset.from_list(self.rows)


@pytest.fixture
def fake_hub(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def install(rows):
        hub = FakeHub(rows)
        monkeypatch.setattr(datasets, "load_dataset", hub)
        return hub
    return install


def test_hub_race_rows(fake_hub):
    hub = fake_hub([hub_row("high1.txt", "Q1?", "C"), hub_row("high1.txt", "Q2?", "A"),
                    hub_row("middle4.txt", "Q3?", "D")])
    res = loaders.load_hub("ehovy/race")
    assert hub.calls == [("ehovy/race", "all", "test")]
    assert [e.id for e in res.examples] == ["high1.txt-0", "high1.txt-1", "middle4.txt-0"]
    assert [e.label for e in res.examples] == [2, 0, 3]
    assert res.examples[0].passage == ARTICLE and res.examples[0].options == ("cats", "dogs", "fish", "birds")
    assert res.format == "hub" and res.files == [] and res.read == 3
    assert res.source == "ehovy/race:all"
    assert res.fingerprint() == loaders.load_hub("ehovy/race:all").fingerprint()
    assert res.fingerprint() != loaders.load_hub("ehovy/race", part="validation").fingerprint()


def test_hub_config_split_and_load_dispatch(fake_hub):
    hub = fake_hub([hub_row("m1.txt")])
    loaders.load_hub("ehovy/race:middle", part="validation")
    res = load("ehovy/race", part="train", limit=1)
    assert hub.calls == [("ehovy/race", "middle", "validation"), ("ehovy/race", "all", "train")]
    assert res.kept == 1 and res.format == "hub"


def test_hub_bad_row_strict_and_lenient(fake_hub):
    fake_hub([hub_row("h1.txt"), hub_row("h2.txt", answer="E")])
    with pytest.raises(DataError) as info:
        loaders.load_hub("ehovy/race")
    assert info.value.record == "row 1 (example_id=h2.txt)" and "ehovy/race" in info.value.file
    res = loaders.load_hub("ehovy/race", lenient=True)
    assert res.kept == 1 and res.read == 2 and res.skipped[0]["record"] == "row 1 (example_id=h2.txt)"


def test_hub_squad_rows(fake_hub):
    hub = fake_hub([
        {"id": "s1", "title": "Eiffel", "context": SQUAD_CONTEXT, "question": "Where?",
         "answers": {"text": ["Paris", "Paris", "1889"], "answer_start": [23, 23, 46]}},
        {"id": "s2", "title": "Eiffel", "context": SQUAD_CONTEXT, "question": "When?",
         "answers": {"text": ["1889"], "answer_start": [46]}},
    ])
    res = loaders.load_hub("rajpurkar/squad", part="validation")
    assert hub.calls == [("rajpurkar/squad", None, "validation")]
    assert [e.id for e in res.examples] == ["s1", "s2"]
    assert res.examples[0].answers == (Answer("Paris", 23), Answer("1889", 46))
    assert res.examples[0].title == "Eiffel" and isinstance(res.examples[1], SpanExample)


def test_hub_unknown_columns(fake_hub):
    fake_hub([{"text": "hello", "label": 1}])
    with pytest.raises(ConfigError, match="columns"):
        loaders.load_hub("someone/sentiment")


def test_hub_unreachable_says_so(monkeypatch):
    datasets = pytest.importorskip("datasets")

    def offline(*args, **kwargs):
        raise ConnectionError("Couldn't reach 'ehovy/race' on the Hub (LocalEntryNotFoundError)")
    monkeypatch.setattr(datasets, "load_dataset", offline)
    with pytest.raises(AdvraceError) as info:
        load("ehovy/race")
    text = str(info.value)
    assert "unreachable" in text and "local path" in text and "ehovy/race" in text
    assert info.value.exit_code == 2


# ---------------------------------------------------------------- registering a format


class TsvTest(Format):
    """One question per line: id, passage, question, the options, the answer letter."""

    name = "tsv-test"
    tasks = (MULTIPLE_CHOICE,)
    description = "tab-separated questions"

    def load(self, path, *, lenient=False, limit=None, n_options=4, part="test"):
        examples = []
        for line in Path(path).read_text(encoding="utf-8").splitlines()[:limit]:
            ex_id, passage, question, *options, answer = line.split("\t")
            examples.append(MCExample(id=ex_id, passage=passage, question=question, options=tuple(options),
                                      label="ABCD".index(answer), source_id=ex_id))
        return LoadResult(examples=examples, source=str(path), format=self.name,
                          files=[os.path.basename(path)], read=len(examples))

    def detect(self, probe):
        return probe.suffix(".tsv")


@pytest.fixture
def tsv_format():
    register_format(TsvTest)
    yield TsvTest
    unregister_format(TsvTest.name)


def test_a_registered_format_is_loaded_detected_and_accepted_everywhere(tsv_format, tmp_path):
    text = "Tom lives in Paris. He likes cats."
    rows = [["t1", text, "What does Tom like?", "cats", "dogs", "fish", "birds", "A"],
            ["t2", text, "Where does Tom live?", "Rome", "Paris", "Oslo", "Bern", "B"]]
    path = write(tmp_path / "qs.tsv", "\n".join("\t".join(r) for r in rows) + "\n")
    assert format_names() == BUILT_IN_FORMATS + ("tsv-test",)
    assert detect_format(str(path)) == "tsv-test"
    res = load(str(path), "tsv-test")
    assert [e.id for e in res.examples] == ["t1", "t2"] and [e.label for e in res.examples] == [0, 1]
    assert res.format == "tsv-test" and load(str(path)).examples == res.examples
    assert data_from_dict({"path": str(path), "format": "tsv-test"}, "train.data").format == "tsv-test"

    out = tmp_path / "rel"
    assert main(["build", "--data", str(path), "--format", "tsv-test", "--attacks", "option_only",
                 "--quiet", "--out", str(out)]) == 0
    source = json.loads((out / "manifest.json").read_text())["source"]
    assert source["format"] == "tsv-test" and source["kept"] == 2

    unregister_format("tsv-test")
    assert format_names() == BUILT_IN_FORMATS
    with pytest.raises(ConfigError, match="unknown format 'tsv-test'"):
        load(str(path), "tsv-test")
    with pytest.raises(ConfigError, match="cannot tell the format"):
        detect_format(str(path))
    with pytest.raises(SystemExit):
        main(["build", "--data", str(path), "--format", "tsv-test", "--out", str(tmp_path / "r2")])


def test_a_second_format_of_a_taken_name_is_refused():
    class Impostor(TsvTest):
        name = "squad"

    with pytest.raises(ValueError, match="two formats named 'squad'"):
        register_format(Impostor)
    assert type(REGISTRY["squad"]).__module__ == "advrace.formats.squad"


PLUGIN = """
from advrace.formats import Format, register_format


@register_format
class Lines(Format):
    name = "lines-plugin-test"
    tasks = ("multiple_choice",)
    description = "a plugin's format"
"""


def test_an_entry_point_format_is_imported_when_first_asked_for(install_plugin):
    install_plugin("lines_format_plugin", PLUGIN, "advrace.formats", "lines")
    try:
        assert "lines-plugin-test" not in REGISTRY
        assert format_names() == BUILT_IN_FORMATS + ("lines-plugin-test",)
    finally:
        unregister_format("lines-plugin-test")


# ---------------------------------------------------------------- what was read: split, passages, levels


def test_readers_report_the_part_their_folders_and_files_name(tmp_path):
    root = race_tree(tmp_path / "one")
    assert loaders.load_race_dir(str(root / "dev" / "middle")).part == "dev"
    assert loaders.load_race_dir(str(root / "test")).part == "test"
    assert loaders.load_race_dir(str(root)).part == "dev+test"  # RACE/ holds both
    plain = tmp_path / "test_like_pytest0" / "mine"  # only exact folder names count
    write(plain / "1.txt", passage("high1.txt"))
    assert loaders.load_race_dir(str(plain)).part is None
    squad = write(tmp_path / "data" / "dev-v1.1.json", squad_doc([qa("q1")]))
    assert loaders.load_squad(str(squad)).part == "dev"
    assert loaders.load_squad(str(write(tmp_path / "xquad.en.json", squad_doc([qa("q1")])))).part is None
    rows = write_jsonl(tmp_path / "train.jsonl.gz", [hub_row("high1.txt")], gz=True)
    assert loaders.load_race_jsonl(str(rows)).part == "train"
    adv = write(tmp_path / "sets" / "test" / "dis.json", {"high1.txt-0": adv_rec()})
    assert loaders.load_advrace_json(str(adv)).part == "test"
    copy = tmp_path / "elsewhere" / "deeper" / "dev"
    shutil.copytree(root / "dev", copy)
    assert loaders.load_race_dir(str(copy)).part == "dev"


def test_readers_count_passages_and_race_levels(tmp_path):
    write(tmp_path / "RACE" / "dev" / "high" / "1.txt", passage("high1.txt", n=2))
    write(tmp_path / "RACE" / "dev" / "middle" / "3.txt", passage("middle3.txt", n=2, article="Other text."))
    res = loaders.load_race_dir(str(tmp_path / "RACE" / "dev"))
    assert (res.kept, res.passages, res.levels) == (4, 2, ["high", "middle"])
    squad = loaders.load_squad(str(write(tmp_path / "s.json", squad_doc([qa("q1"), qa("q2")]))))
    assert (squad.kept, squad.passages, squad.levels) == (2, 1, [])


def test_hub_reports_the_part_it_asked_for(fake_hub):
    fake_hub([hub_row("middle1.txt")])
    res = loaders.load_hub("ehovy/race:middle", part="validation")
    assert res.part == "validation" and res.levels == ["middle"]


def test_part_words_are_whole_words_and_validation_is_dev():
    from advrace.formats.base import canonical_part, part_words
    assert part_words("dev-v1.1.json") == ["dev"]
    assert part_words("The RACE Validation and test sets") == ["validation", "test"]
    assert part_words("devtools contest") == []
    assert [canonical_part(s) for s in ("train", "dev", "validation", "test", "dev+test")] == [
        "train", "dev", "dev", "test", "dev+test"]


def test_squad_checks_n_options_though_it_has_none(tmp_path):
    squad = write(tmp_path / "s.json", squad_doc([qa("q1")]))
    with pytest.raises(ConfigError, match="n_options"):
        load(str(squad), "squad", n_options=1)
    with pytest.raises(ConfigError, match="limit"):  # limit is checked first, as before
        load(str(squad), "squad", limit=-1, n_options=1)
    assert loaders.load_squad(str(squad), n_options=None).kept == 1
