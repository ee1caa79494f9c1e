"""Provenance records: each type survives JSON unchanged, a release of format 1 reads as the same
typed records (and verifies and audits as it did), and a release of an unknown format says which
file and to upgrade advrace."""

import json
import shutil
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.provenance import (AdversarialSentence, AttackSummary, Authored, FieldsRemoved, NewDistractors,
                                     OptionsReplaced, PlacedSentence, ProvenanceError, Replacement,
                                     SentencesInserted, Swaps, TextReplaced, WordSearch, from_json, summary_of,
                                     to_json, upgrade_v1)
from advrace.release import audit as A
from advrace.release import build_release, read_split, split_file
from advrace.release.records import FORMAT_VERSION, ReleaseFormatError

PREVIOUS = Path(__file__).parent / "previous_release" / "addsent-0.1.0-d7b608c"

GLOVE = Replacement(14, 18, "Fire", "Raid", "glove", pos="PROPN", same_meaning=None, changes_meaning=True)
RECORDS = [
    TextReplaced("question", (Replacement(6, 14, "European", "Euorpean"), Replacement(15, 20, "river", "rievr"))),
    SentencesInserted("passage", (PlacedSentence("A b.", 0, 0), PlacedSentence("C d.", 9, 14))),
    OptionsReplaced(("a", "b", "c"), ("b", "x", "y"), old_label=1, label=0),
    FieldsRemoved(("passage", "question")),
    AttackSummary("addsent", sentences=(
        AdversarialSentence("Where did the Great Raid end in the house.", question="Where did the Great Raid end?",
                            replacements=(GLOVE, Replacement(7, 7, "", "not", "negation", changes_meaning=True)),
                            answer="In the house.", option=3, negation_fallback=True),)),
    AttackSummary("addsent", sentences=(AdversarialSentence(
        "The Sava is 40 kilometres long.", question="How long is the Sava?", answer="40 kilometres",
        answer_type="quantity", rule="how_adj_copula", replacements=(Replacement(16, 22, "Danube", "Sava", "glove"),)),),
        position="end", candidates=2, model_f1=0.0, candidate_f1=(0.5, 0.0)),
    AttackSummary("addany", sentences=(AdversarialSentence("leave meeting video."),),
                  search=WordSearch(expected_f1=0.25, top_f1=0.0, success=True, epochs=1, queries=12, trace=(0.5, 0.25))),
    AttackSummary("charswap", swaps=Swaps(question=4, passage=6, words=147)),
    AttackSummary("distractor_generation", distractors=NewDistractors(
        original=("a", "b", "c"), new=("x", "y"), kept_original=1, candidates=("x", "y", "z"),
        rejected={"contains the answer": 1}, reader_scores=((0.5, 2.0), (0.25, 1.0)), gold_reader_scores=(0.75, 3.0))),
    AttackSummary("distractor_extraction", unchanged="negated question"),
    Authored(author="alice", model="sliding-window", fooled=True, source="q1",
             history=({"draft": {"question": "Why?"}, "output": {"label": 1}, "time": "2026-01-01"},),
             model_answer="the sea", model_f1=0.5),
]


@pytest.mark.parametrize("record", RECORDS, ids=lambda r: type(r).__name__)
def test_every_record_type_round_trips_through_json(record):
    data = to_json(record)
    assert json.loads(json.dumps(data)) == data  # plain JSON
    assert from_json(json.loads(json.dumps(data))) == record


def test_json_names_the_type_and_leaves_defaults_out():
    assert to_json(AttackSummary("option_only")) == {"type": "attack", "attack": "option_only"}
    data = to_json(RECORDS[0])  # a nested record has no type: its field says it
    assert data == {"type": "replace", "field": "question", "replacements": [
        {"start": 6, "end": 14, "old": "European", "new": "Euorpean"},
        {"start": 15, "end": 20, "old": "river", "new": "rievr"}]}


def test_a_record_this_version_does_not_know_says_to_upgrade():
    with pytest.raises(ProvenanceError, match="unknown provenance record type 'rewrite'.*upgrade advrace"):
        from_json({"type": "rewrite", "field": "question"}, "split.jsonl, line 3")
    with pytest.raises(ProvenanceError, match=r"line 3.*AttackSummary has no field 'mood'.*Upgrade advrace"):
        from_json({"type": "attack", "attack": "addsent", "mood": "cheerful"}, "split.jsonl, line 3")
    with pytest.raises(ProvenanceError, match="not a provenance record"):
        to_json({"attack": "addsent"})


# --------------------------------------------------------------------------- release format 1


def test_format_1_layouts_read_as_one_vocabulary():
    """AddSent's {word, position} and the SQuAD mutation's {old, start, end} are one Replacement;
    a reader's score, a number in format 1 for one reader and a list for an ensemble, is a list."""
    race = upgrade_v1({"attack": "addsent", "sentences": [{
        "sentence": "Where did the Great Raid end in the house.", "question": "Where did the Great Raid end?",
        "replacements": [{"word": "Fire", "new": "Raid", "kind": "glove", "position": 14, "pos": "PROPN",
                          "same_meaning": None, "changes_meaning": True}],
        "distractor": {"text": "In the house.", "index": 3}, "fallback_not": False}]})
    squad = upgrade_v1({"attack": "addonesent", "candidates": 1, "position": "end", "sentence": "The Sava is long.",
                        "rule": "how_adj_copula", "fake_answer": "40 kilometres", "answer_type": "quantity",
                        "mutated_question": "How long is the Sava?",
                        "replacements": [{"start": 16, "end": 22, "old": "Danube", "new": "Sava", "kind": "glove"}]})
    assert race.sentences[0].replacements[0] == GLOVE
    assert (race.sentences[0].answer, race.sentences[0].option) == ("In the house.", 3)
    assert squad.sentences[0].replacements[0] == Replacement(16, 22, "Danube", "Sava", "glove")
    assert (squad.sentences[0].answer, squad.sentences[0].question, squad.candidates) == \
        ("40 kilometres", "How long is the Sava?", 1)
    one = upgrade_v1({"attack": "distractor_generation", "original_distractors": ["a", "b"], "new_distractors": ["x"],
                      "kept_original": 1, "reader_scores": [0.5], "gold_reader_score": 0.75})
    ensemble = upgrade_v1({"attack": "distractor_generation", "original_distractors": ["a"], "new_distractors": ["x"],
                           "reader_scores": [[0.5, 2.0]], "gold_reader_score": [0.75, 3.0]})
    assert one.distractors.reader_scores == ((0.5,),) and one.distractors.gold_reader_scores == (0.75,)
    assert ensemble.distractors.reader_scores == ((0.5, 2.0),) and ensemble.distractors.gold_reader_scores == (0.75, 3.0)
    addany = upgrade_v1({"attack": "addany", "sentence": "leave video.", "expected_f1": 0.0, "top_f1": 0.0,
                         "success": True, "epochs": 1, "queries": 12, "trace": [0.0]})
    assert addany.sentences == (AdversarialSentence("leave video."),) and addany.search.queries == 12
    charswap = upgrade_v1({"attack": "charswap", "question_swaps": 4, "passage_swaps": 6, "words": 147})
    assert charswap.swaps == Swaps(4, 6, 147)
    edit = upgrade_v1({"op": "replace", "field": "question",
                       "edits": [{"start": 6, "end": 14, "old": "European", "new": "Euorpean"}]})
    assert edit == TextReplaced("question", (Replacement(6, 14, "European", "Euorpean"),))


def test_a_release_is_written_in_format_2_and_read_back_as_built(tmp_path):
    cfg = release_config_from_dict({"name": "p", "data": {"path": "@sample/race", "format": "race-dir", "limit": 3},
                            "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp_path / "r")
    assert json.loads((tmp_path / "r" / "manifest.json").read_text())["format_version"] == FORMAT_VERSION == 2
    line = json.loads((tmp_path / "r" / split_file("charswap")).read_text().splitlines()[0])
    assert [r["type"] for r in json.loads(line["provenance"])] == ["replace", "replace", "attack"]
    [ex, *_] = read_split(tmp_path / "r", "charswap")
    assert [type(r) for r in ex.provenance] == [TextReplaced, TextReplaced, AttackSummary]
    assert ex.provenance[-1].swaps.words > 0


def test_a_format_1_release_reads_verifies_and_audits_as_before(capsys, ctx):
    manifest = json.loads((PREVIOUS / "manifest.json").read_text())
    assert manifest["format_version"] == 1 < FORMAT_VERSION
    examples = read_split(PREVIOUS, "addsent")
    summaries = [summary_of(ex.provenance, "addsent") for ex in examples]
    perturbed = [(ex, s) for ex, s in zip(examples, summaries) if not s.unchanged]
    assert perturbed and all(len(s.sentences) == 2 for _, s in perturbed)
    for ex, s in perturbed:
        inserted = next(r for r in ex.provenance if isinstance(r, SentencesInserted))
        assert [p.text for p in inserted.sentences] == [e.sentence for e in s.sentences]
        for entry in s.sentences:
            assert ex.options[entry.option] == entry.answer
    assert main(["verify", str(PREVIOUS)]) == 0
    # the audit's results on this release before format 2 (advrace at d715cbf, the same context)
    # and since issue 46 the grammar check's on its glued questions ("What ... ? <option>"), which
    # today's audit judges old releases by too
    audit = A.audit_release(PREVIOUS, ctx=ctx)["addsent"]
    counts = audit.counts()
    assert (counts["checked"], counts["flagged"], counts["unchecked"] == list(A.UNCHECKED["mc_addsent"])) == (77, 62, True)
    assert counts["by_check"] == {
        "a 'not' sentence rules out an option": 6, "sentence only paraphrases the question": 3,
        "sentence restates a negated question": 5, "sentence talks about the passage": 2,
        "ungrammatical sentence": 58}
    assert (counts["grammar"]["sentences"], counts["grammar"]["by_kind"]["question form"]) == (154, 113)
    capsys.readouterr()
    assert main(["audit", str(PREVIOUS)]) == 1
    assert "62 questions flagged" in capsys.readouterr().out


def test_an_unknown_format_version_names_the_manifest_and_says_to_upgrade(tmp_path, capsys):
    future = tmp_path / "future"
    shutil.copytree(PREVIOUS, future)
    manifest = json.loads((future / "manifest.json").read_text())
    (future / "manifest.json").write_text(json.dumps({**manifest, "format_version": 99}))
    with pytest.raises(ReleaseFormatError, match=r"future/manifest.json: release format version 99.*upgrade advrace"):
        read_split(future, "addsent")
    for command in ("verify", "audit"):
        assert main([command, str(future)]) == ReleaseFormatError.exit_code
        err = capsys.readouterr().err
        assert "manifest.json: release format version 99" in err and "upgrade advrace" in err
        assert "Traceback" not in err
