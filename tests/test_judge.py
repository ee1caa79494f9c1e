"""The answerability judge (advrace.models.judge): its rule on a real (tiny, random) causal LM's
scores, the `judge` key of the distractor attacks, `advrace audit --judge`, and its errors.

Margins are set from the scores the model actually gives, so each test fails if the judge compared
anything but score(candidate) against score(gold) - margin."""

from __future__ import annotations

import json

import pytest

from advrace.attacks import get_attack
from advrace.cli import main
from advrace.core.checks import JUDGED as FLAG
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.models.decoders.llm_scoring import load_causal_scorer
from advrace.models.judge import TOLERANCE, load_judge
from advrace.release import build_release, read_split
from conftest import PASSAGE, make_race_dir, make_tokenizer, save_tiny_llama, tiny
from advrace.training import train

WHERE = MCExample(id="where", passage=PASSAGE, question="Where does Tom live?", label=1,
                  options=("In a big city", "In a small village", "By the sea", "In the desert"))
# each passes the word checks (grounded, unlike the answer in words, of the options' form)
CANDIDATES = ["Near the mountains", "With his sister Mary", "At school", "On the piano", "Famous scientists"]


@pytest.fixture(scope="module")
def setup(tmp_path_factory):
    from transformers import AutoTokenizer

    root = tmp_path_factory.mktemp("judge")
    race, tok = make_race_dir(root), make_tokenizer(root)
    llama = save_tiny_llama(AutoTokenizer.from_pretrained(tok), root / "llama")
    de = train(tiny(tok, race, root / "de", objective="span_extraction", max_length=48, doc_stride=16,
                    epochs=2), progress=False)
    mc = train(tiny(tok, race, root / "mc", epochs=1), progress=False)  # a multiple-choice checkpoint
    return {"race": race, "llama": llama, "de": de["final"], "mc": mc["final"], "root": root}


def test_the_rule_refuses_the_gold_itself_and_keeps_a_candidate_rated_far_below(setup):
    judge = load_judge(setup["llama"], 0.0)
    assert judge.per_char  # a causal LM: log-likelihood per character, acc_norm's scale
    raw = load_causal_scorer(setup["llama"], bf16=False).predict_mc([WHERE])[0]
    assert judge.option_scores([WHERE])[0] == pytest.approx([v / len(o) for v, o in zip(raw, WHERE.options)], rel=1e-3)
    (verdicts,) = judge.judge([(WHERE, [WHERE.answer, *CANDIDATES])])
    gold = verdicts[0].gold
    assert verdicts[0].candidate == pytest.approx(gold)
    low = min(verdicts[1:], key=lambda v: v.candidate)
    assert low.candidate < gold  # some candidate is rated below the gold by this model
    judge.margin = (gold - low.candidate) / 2
    again = judge.judge([(WHERE, [WHERE.answer, *CANDIDATES])])[0]
    assert again[0].refused  # rated as likely as the gold: refused at any margin >= 0
    kept = [c for c, v in zip(CANDIDATES, again[1:]) if not v.refused]
    assert CANDIDATES[verdicts[1:].index(low)] in kept
    assert [v.refused for v in again[1:]] == [v.candidate >= gold - judge.margin - TOLERANCE for v in verdicts[1:]]
    assert judge.judge([(WHERE, [])]) == [[]]
    assert again == judge.judge([(WHERE, [WHERE.answer, *CANDIDATES])])[0]  # deterministic


def planted(setup, **config):
    attack = get_attack("distractor_extraction")({"model": setup["de"], "max_answer_cosine": None, **config})
    attack.candidates = lambda shard, progress=False: [list(CANDIDATES) for _ in shard]
    return attack


def test_the_config_key_reaches_the_attack_and_refuses_what_the_judge_rates_above_the_gold(setup):
    passed = planted(setup).vet([WHERE])[0]["passed"]  # what the checks leave, before any judge
    assert len(passed) >= 2
    scores = load_judge(setup["llama"], 0.0).judge([(WHERE, CANDIDATES)])[0]
    by_text = dict(zip(CANDIDATES, scores))
    gold = scores[0].gold
    top = max(passed, key=lambda c: by_text[c].candidate)
    # refuse exactly what scores at least the top chosen one's score
    margin = gold - by_text[top].candidate
    attack = planted(setup, judge=setup["llama"], judge_margin=margin)
    out = attack.apply_batch([WHERE])[0]
    record = out.example.provenance[-1].distractors
    refused = [c for c in passed if by_text[c].candidate >= gold - margin - TOLERANCE]
    assert top in refused and top not in record.new
    assert record.rejected[FLAG] == len(refused)
    info = attack.describe()
    assert info["judge"]["margin"] == margin and info["model_dependent"]
    assert info["config"]["judge"] == info["judge"]["name"]
    # without a judge the manifest's config does not name the keys (goldens unchanged)
    assert "judge" not in planted(setup).describe()["config"]


def test_a_missing_judge_says_which_key_and_what_to_do(setup, tmp_path):
    with pytest.raises(ConfigError, match=r"judge .*nope: no such folder.*remove the judge key"):
        planted(setup, judge=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="judge_margin.*bench/judge_calibration.py"):
        planted(setup, judge=setup["llama"])  # no calibrated margin for this model
    with pytest.raises(ConfigError, match="judge must name a model"):
        planted(setup, judge=" ")
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "splits": [
        {"attack": "distractor_extraction", "config": {"model": setup["de"], "judge": "./runs/judge"}}]})
    with pytest.raises(ConfigError, match="judge"):
        build_release(cfg, tmp_path / "rel")
    assert main(["audit", str(tmp_path), "--judge", str(tmp_path / "nope")]) == 2


def test_audit_judge_flags_the_distractor_it_rates_highest_and_names_itself(setup, tmp_path, capsys):
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "seed": 7, "splits": [
        {"attack": "distractor_extraction", "config": {"model": setup["de"], "batch_size": 3,
                                                       "max_answer_tokens": 8, "match_answer_format": False}}]})
    out = tmp_path / "rel"
    build_release(cfg, out)
    originals = {ex.source_id: ex for ex in read_split(out, "original")}
    new = [(originals[ex.source_id], d, ex.id) for ex in read_split(out, "distractor_extraction")
           if ex.provenance[-1].distractors for d in ex.provenance[-1].distractors.new]
    assert new
    judge = load_judge(setup["llama"], 0.0)
    verdicts = [v for (v,) in judge.judge([(src, [d]) for src, d, _ in new])]
    gaps = [v.gold - v.candidate for v in verdicts]
    margin = min(gaps)  # refuses the new distractor rated closest to (or above) its gold, and ties
    expected = sorted({i for (_, _, i), g in zip(new, gaps) if g <= margin + TOLERANCE})
    assert main(["audit", str(out)]) == 0
    capsys.readouterr()
    assert main(["audit", str(out), "--details", "--judge", setup["llama"], "--judge-margin", repr(margin)]) == 1
    printed = capsys.readouterr().out
    flagged = sorted({line.split(":")[0].strip() for line in printed.splitlines()
                      if line.startswith("    ") and f": {FLAG}:" in line})
    assert flagged == expected
    assert "not checked: a span that gives the answer's own evidence in other words" in printed
    assert f"judge {judge.name} (margin {margin:g})" in printed and "docs/results.md" in printed
    stats = json.loads((out / "stats.json").read_text())
    assert stats["audit"]["distractor_extraction"]["flagged"] == 0  # the build itself had no judge


def test_a_split_built_with_a_judge_names_it_on_the_not_checked_line(setup, tmp_path):
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "seed": 7, "splits": [
        {"attack": "distractor_extraction", "config": {"model": setup["de"], "batch_size": 3, "max_answer_tokens": 8,
                                                       "judge": setup["llama"], "judge_margin": 0.5}}]})
    manifest = build_release(cfg, tmp_path / "rel")
    info = manifest["splits"]["distractor_extraction"]
    assert info["judge"]["margin"] == 0.5 and info["model_dependent"]
    stats = json.loads((tmp_path / "rel" / "stats.json").read_text())
    (line,) = stats["audit"]["distractor_extraction"]["unchecked"]
    assert f"the attack's judge {info['judge']['name']} (margin 0.5) refused" in line


def test_a_built_in_reader_judges_on_its_own_scale_with_its_calibrated_margin():
    from advrace.models.judge import CALIBRATED

    judge = load_judge("sliding-window")
    assert judge.margin == CALIBRATED["sliding-window"] and not judge.per_char
    (verdicts,) = judge.judge([(WHERE, [WHERE.answer, "By the sea"])])
    assert verdicts[0].candidate == verdicts[0].gold
    assert [v.refused for v in verdicts] == [v.candidate >= v.gold - judge.margin - TOLERANCE for v in verdicts]
    assert judge.describe() == {"name": "sliding-window", "margin": judge.margin, "score": "option score"}


def test_a_multiple_choice_checkpoint_judges_by_its_option_logits_and_needs_a_margin(setup):
    with pytest.raises(ConfigError, match="judge_margin"):
        load_judge(setup["mc"])  # no calibrated default: its scale is its own
    judge = load_judge(setup["mc"], 0.0)
    assert not judge.per_char
    (verdicts,) = judge.judge([(WHERE, [WHERE.answer, *CANDIDATES])])
    assert len(verdicts) == 1 + len(CANDIDATES) and verdicts[0].refused  # the gold restated, at margin 0
    spread = max(abs(v.candidate - v.gold) for v in verdicts) + 1.0
    judge.margin = spread  # everything within the spread of the gold: all refused
    assert all(v.refused for v in judge.judge([(WHERE, CANDIDATES)])[0])
    judge.margin = -spread  # only what it rates far above the gold: none here
    assert not any(v.refused for v in judge.judge([(WHERE, [WHERE.answer, *CANDIDATES])])[0])


@pytest.mark.slow
def test_smollm2_at_its_calibrated_margin_refuses_only_what_it_rates_far_above_the_gold():
    """The real SmolLM2-135M: its calibrated margin is negative (it prefers a RACE distractor to the
    gold a third of the time), so even the gold restated passes; at margin 0 the gold restated is
    refused and an option the passage makes false is kept."""
    from advrace.models.judge import CALIBRATED

    judge = load_judge("smollm2")
    assert judge.margin == CALIBRATED["smollm2"] < 0 and judge.per_char
    (verdicts,) = judge.judge([(WHERE, [WHERE.answer, "By the sea"])])
    assert verdicts[0].candidate == pytest.approx(verdicts[0].gold) and not verdicts[0].refused
    judge.margin = 0.0
    (verdicts,) = judge.judge([(WHERE, [WHERE.answer, "By the sea"])])
    assert verdicts[0].refused and not verdicts[1].refused
