"""The answerability judge (advrace.models.judge): its rule, its calibration on the judged questions'
own distractors, its refusal of a model too weak to judge, its check in the checks registry (which
the `judge` keys of the distractor attacks and `advrace audit --judge` switch on).

The strong judge is a tiny multiple-choice reader trained here to prefer the gold of these questions
(it does, by a wide gap); the weak one is a tiny random causal LM, which rates some original
distractors above the gold. Expected verdicts come from the scores the model gives, with margins set
between distinct scores, so no test depends on where float noise puts a tie; every test runs on one
thread, and the rule's tolerance covers the rest (the same text scored at two places in a batch)."""

from __future__ import annotations

import json
import math
import re

import pytest

from advrace.attacks import get_attack
from advrace.cli import main
from advrace.core.checks import OPTION, REGISTRY, Subject, TextContext, checks_for
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.formats import load
from advrace.models.decoders.llm_scoring import load_causal_scorer
from advrace.models.encoders.mc_scoring import make_mc_scorer
from advrace.models.judge import JUDGED as FLAG, REFUSAL_RATE, JudgeTooWeak, load_judge
from advrace.release import build_release, read_split
from conftest import tiny
from advrace.training import train

pytestmark = pytest.mark.usefixtures("one_thread")

# candidate distractors: the tiny reader rates some (the gold in other words, or of its kind) close to
# its gold and some far below; of them, the word checks leave each question a few of both kinds
CANDIDATES = ["In the small village", "In a small village near the mountains", "In a big village", "In a small town",
              "In a small house", "A small village", "Famous scientists", "Near the mountains", "At school",
              "With his sister Mary", "On the piano", "In a village", "Football players", "The violin", "Swimming"]
APART = 1e-2  # scores this far apart are far beyond float noise (1e-6 of a score)
EDGE = 1e-3  # a score this far from the margin is on one side of it at any thread count or batch


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_llama):
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same weights at any load
    root = tmp_path_factory.mktemp("judge")
    race, tok, llama = tiny_llama["race"], tiny_llama["tok_dir"], tiny_llama["lm"]
    de = train(tiny(tok, race, root / "de", objective="span_extraction", max_length=48, doc_stride=16,
                    epochs=2), progress=False)
    # a judge strong enough to refuse: it learns these seven questions' answers
    strong = train(tiny(tok, race, root / "strong", epochs=8, lr=3e-3, max_length=128,
                        model_config={"hidden_dropout_prob": 0.0, "attention_probs_dropout_prob": 0.0}),
                   progress=False)
    examples = load(str(race)).examples
    torch.set_num_threads(threads)
    return {"race": race, "llama": llama, "de": de["final"], "strong": strong["final"], "examples": examples}


def gaps_of(model: str, examples: list) -> list[float]:
    """score(distractor) - score(gold) of each original distractor, from the scorer itself."""
    rows = make_mc_scorer(model, batch_size=4, max_length=None, bf16=False).predict_mc(examples)
    return [row[k] - row[ex.label] for ex, row in zip(examples, rows) for k in range(len(ex.options)) if k != ex.label]


def between(values: list[float]) -> list[float]:
    """Margins halfway between distinct positive values, far apart: each splits them cleanly."""
    levels = sorted(v for v in values if v > APART)
    return [(a + b) / 2 for a, b in zip(levels, levels[1:]) if b - a > APART]


def test_the_gold_restated_is_refused_and_a_candidate_is_refused_iff_rated_within_the_margin(setup):
    where = setup["examples"][0]
    assert where.question == "Where does Tom live?" and where.label == 1  # the gold is not the first option
    judge = load_judge(setup["strong"], 0.0)
    assert not judge.per_char  # a multiple-choice head: its option logits
    (verdicts,) = judge.judge([(where, [where.answer, *CANDIDATES])])
    gold = verdicts[0].gold
    assert verdicts[0].refused  # the gold restated, at margin 0
    below = {c: gold - v.candidate for c, v in zip(CANDIDATES, verdicts[1:])}
    assert min(below.values()) < APART < max(below.values())  # some it rates near the gold, some far below
    assert not any(v.refused for c, v in zip(CANDIDATES, verdicts[1:]) if below[c] > APART)
    margins = between(list(below.values()))
    assert margins
    for judge.margin in margins:
        again = judge.judge([(where, CANDIDATES)])[0]
        assert {c for c, v in zip(CANDIDATES, again) if v.refused} == {c for c, b in below.items() if b < judge.margin}
    # the gold restated beside other options, at any batch size: the same text scored at other places
    for size in (1, 3):
        (at,) = load_judge(setup["strong"], 0.0, batch_size=size).judge([(where, [*CANDIDATES[:2], where.answer])])
        assert at[2].refused
    assert judge.judge([(where, [])]) == [[]]


def test_the_tolerance_is_relative_to_the_scores_scale(setup):
    judge = load_judge(setup["strong"], 0.0)
    for scale in (1e-3, 1.0, 1e3):
        gold = -2.0 * scale
        assert judge.refuses(gold * (1 + 1e-6), gold)  # the same score, moved in its last bits
        assert not judge.refuses(gold * (1 + 1e-2), gold)  # 1% below the gold: a different score


def test_calibration_refuses_at_most_the_target_share_of_the_questions_own_distractors(setup):
    examples = setup["examples"]
    gaps = gaps_of(setup["strong"], examples)
    assert len(gaps) == 21 and max(gaps) < -1.0  # the reader prefers every gold, by far
    ranked = sorted(gaps, reverse=True)
    for target in (0.0, REFUSAL_RATE, 0.1, 0.5):
        judge = load_judge(setup["strong"], refusal_rate=target)
        found = judge.calibrate_on(examples)
        allowed = math.floor(target * len(gaps))
        assert (found.calibrated, found.target, found.distractors) == (True, target, 21)
        assert judge.margin == found.margin >= 0
        # the largest such margin: the distractor next in line sits just beyond it
        assert 0 < -found.margin - ranked[allowed] < 5e-3
        assert not [g for g in gaps if abs(g + found.margin) < 1e-4]  # none on the edge, so the count is exact
        assert found.refused == sum(g >= -found.margin for g in gaps) <= allowed
        assert found.refusal_rate == found.refused / 21
    # a margin given is kept, and what it refuses of them measured
    margin = between([-g for g in gaps])[0]
    found = load_judge(setup["strong"], margin).calibrate_on(examples)
    assert not found.calibrated and found.margin == margin and found.refused == sum(-g < margin for g in gaps) > 0


def test_a_judge_too_weak_to_refuse_the_gold_restated_is_refused(setup, tmp_path):
    examples = setup["examples"]
    assert max(gaps_of(setup["llama"], examples)) > 0  # the random LM rates an original distractor above its gold
    with pytest.raises(JudgeTooWeak, match=r"judge \S+ is too weak to judge: it rates \d+ of the 21 original "
                                           r"distractors.*margin .* is -.*, below 0, where it cannot refuse even "
                                           r"the gold restated\. Give .*multiple-choice checkpoint trained on RACE"):
        load_judge(setup["llama"]).calibrate_on(examples)
    # as an attack's judge: refused before it judges anything
    attack = planted(setup, judge=setup["llama"])
    with pytest.raises(JudgeTooWeak, match="attack 'distractor_extraction': judge .* too weak to judge"):
        attack.apply_batch(examples)
    # the offline models the bench found too weak, refused by name before anything is loaded
    for name in ("smollm2", "similarity", "sliding-window", "sliding-window:distance"):
        with pytest.raises(JudgeTooWeak, match=f"judge {name}: too weak to judge"):
            load_judge(name)
        with pytest.raises(JudgeTooWeak, match="too weak to judge"):
            planted(setup, judge=name)
    # a margin below 0 never refuses the gold restated
    with pytest.raises(JudgeTooWeak, match="judge_margin -0.5: a margin below 0 cannot refuse even the gold restated"):
        planted(setup, judge=setup["strong"], judge_margin=-0.5)
    for rate in (1.0, -0.1):
        with pytest.raises(ConfigError, match="judge_refusal_rate"):
            planted(setup, judge=setup["strong"], judge_refusal_rate=rate)


def test_a_causal_lm_judges_by_log_likelihood_per_character(setup):
    where = setup["examples"][0]
    judge = load_judge(setup["llama"], 0.0)
    assert judge.per_char  # lm-eval's acc_norm scale
    raw = load_causal_scorer(setup["llama"], bf16=False).predict_mc([where])[0]
    assert judge.option_scores([where])[0] == pytest.approx([v / len(o) for v, o in zip(raw, where.options)],
                                                            rel=1e-5)
    (verdicts,) = judge.judge([(where, [where.answer, "By the sea"])])
    assert verdicts[0].refused and verdicts[0].candidate == pytest.approx(verdicts[0].gold, rel=1e-5)


def planted(setup, **config):
    """A DE attack whose model proposes CANDIDATES for every question (its own spans are not the subject)."""
    attack = get_attack("distractor_extraction")({"model": setup["de"], "max_answer_cosine": None, **config})
    attack.candidates = lambda shard, progress=False: [list(CANDIDATES) for _ in shard]
    return attack


def counting_judge_check(monkeypatch) -> list:
    """The sizes of the batches the registry's `judge` check is asked about, from now on."""
    check = REGISTRY["judge"]
    real, calls = type(check).refuse_many, []

    def counted(self, subjects, ctx, settings):
        calls.append(len(subjects))
        return real(self, subjects, ctx, settings)

    monkeypatch.setattr(type(check), "refuse_many", counted)
    return calls


def test_the_judge_is_a_batched_option_check_of_the_registry(setup):
    """Registered from advrace.models.judge, after the other option checks; on only where the
    settings name a judge; refusing through `refuse_many` what the judge refuses, with the scores
    for the audit's details."""
    check = REGISTRY["judge"]
    assert check.batched and check.flag == FLAG and check is checks_for("distractor_generation", OPTION)[-1]
    assert check.enabled({"judge": "./a-judge"}) and not check.enabled({"judge": None}) and not check.enabled({})
    where = setup["examples"][0]
    judge = load_judge(setup["strong"], 0.0)
    (verdicts,) = judge.judge([(where, CANDIDATES)])
    far = max(CANDIDATES, key=lambda c: verdicts[CANDIDATES.index(c)].gold - verdicts[CANDIDATES.index(c)].candidate)
    subjects = [Subject(where, where.answer), Subject(where, far)]  # the gold restated must be refused at margin 0
    said = check.refuse_many(subjects, TextContext(judge=judge), {"judge": setup["strong"]})
    assert said[0] == FLAG and said[1] is None
    assert said[0].detail.startswith(f"{where.answer!r} scored ") and "(margin 0)" in said[0].detail


def test_the_attack_runs_the_judge_through_the_registry_only_when_judge_is_set(setup, monkeypatch):
    calls = counting_judge_check(monkeypatch)
    examples = setup["examples"]
    planted(setup).apply_batch(examples)
    assert calls == []  # no `judge:`, no judge
    # a margin far above any score gap: the judge must refuse every candidate the other checks leave
    attack = planted(setup, judge=setup["strong"], judge_margin=1e6)
    outs = attack.apply_batch(examples)
    assert len(calls) == 1 and calls[0] > 0  # one batch: the shard's candidates
    assert attack._rejected_total[FLAG] == calls[0] and not any(out.perturbed for out in outs)


def test_the_attack_calibrates_on_the_questions_it_attacks_and_records_it(setup):
    examples = setup["examples"]
    passed = [v["passed"] for v in planted(setup).vet(examples)]  # what the checks leave, before any judge
    attack = planted(setup, judge=setup["strong"], bf16=True)
    assert attack.answer_judge.scorer.bf16 is False  # the judge scores in fp32 whatever the attack's precision
    outs = attack.apply_batch(examples)
    info = attack.describe()
    judge = info["judge"]
    assert judge["calibrated"] and judge["distractors"] == 21 and judge["target_refusal_rate"] == REFUSAL_RATE
    assert judge["refused"] == 0 and judge["refusal_rate"] == 0.0  # 2% of 21 distractors: none
    assert 0 < -judge["margin"] - max(gaps_of(setup["strong"], examples)) < 5e-3
    assert info["model_dependent"] and info["config"]["judge"] == judge["name"]
    assert info["config"]["judge_margin"] is None and info["config"]["judge_refusal_rate"] == REFUSAL_RATE
    # it refused exactly the candidates it rates within the margin of their gold
    scored = load_judge(setup["strong"], 0.0).judge([(ex, p) for ex, p in zip(examples, passed)])
    refused_any = False
    for ex, out, texts, verdicts in zip(examples, outs, passed, scored):
        below = {t: v.gold - v.candidate for t, v in zip(texts, verdicts)}
        assert not [b for b in below.values() if abs(b - judge["margin"]) < EDGE]
        refused = {t for t, b in below.items() if b < judge["margin"]}
        refused_any |= bool(refused)
        record = out.example.provenance[-1].distractors
        assert record.rejected.get(FLAG, 0) == len(refused) and not refused & set(record.new)
    assert refused_any
    # without a judge the manifest's config names none of its keys (goldens unchanged)
    assert not {"judge", "judge_margin", "judge_refusal_rate"} & set(planted(setup).describe()["config"])


def de_release(setup, out, **config) -> dict:
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "seed": 7, "splits": [
        {"attack": "distractor_extraction", "config": {"model": setup["de"], "batch_size": 3, "max_answer_tokens": 8,
                                                       "match_answer_format": False, **config}}]})
    return build_release(cfg, out)


def test_a_split_built_with_a_judge_records_its_calibration_and_names_it_on_the_not_checked_line(setup, tmp_path):
    manifest = de_release(setup, tmp_path / "rel", judge=setup["strong"])
    info = manifest["splits"]["distractor_extraction"]
    assert info["judge"]["calibrated"] and info["judge"]["distractors"] == 21 and info["judge"]["margin"] > 0
    stats = json.loads((tmp_path / "rel" / "stats.json").read_text())
    (line,) = stats["audit"]["distractor_extraction"]["unchecked"]
    assert (f"the attack's judge {info['judge']['name']} (its margin calibrated on the split's own distractors; "
            "the manifest's `judge` says what it refused of them) refused") in line
    # a judge too weak stops the build, and nothing is written
    with pytest.raises(JudgeTooWeak, match="too weak to judge"):
        de_release(setup, tmp_path / "weak", judge=setup["llama"])
    assert not (tmp_path / "weak" / "manifest.json").exists()


def test_an_old_release_built_with_a_judge_too_weak_says_it_is_not_judged(setup, tmp_path, capsys, monkeypatch):
    de_release(setup, tmp_path / "rel")
    calls = counting_judge_check(monkeypatch)
    manifest_path = tmp_path / "rel" / "manifest.json"
    manifest = json.loads(manifest_path.read_text())
    manifest["splits"]["distractor_extraction"]["config"].update(judge="smollm2", judge_margin=None)
    manifest_path.write_text(json.dumps(manifest))
    main(["audit", str(tmp_path / "rel")])
    out = capsys.readouterr().out
    assert "the attack's judge smollm2 was too weak to refuse any" in out and "the split is not judged" in out
    assert calls == []  # the split's own judge is named, not run: the audit's is `--judge`


def test_audit_judge_calibrates_on_the_source_questions_and_flags_what_it_rates_within_the_margin(
        setup, tmp_path, capsys):
    out = tmp_path / "rel"
    de_release(setup, out)
    originals = {ex.source_id: ex for ex in read_split(out, "original")}
    new = [(originals[ex.source_id], d, ex.id) for ex in read_split(out, "distractor_extraction")
           if ex.provenance[-1].distractors for d in ex.provenance[-1].distractors.new]
    assert new
    verdicts = [v for (v,) in load_judge(setup["strong"], 0.0).judge([(src, [d]) for src, d, _ in new])]
    below = [v.gold - v.candidate for v in verdicts]
    margins = between(below) or [max(below) + 1.0]
    margin = margins[len(margins) // 2]
    expected = sorted({i for (_, _, i), b in zip(new, below) if b < margin})
    assert main(["audit", str(out)]) == 0
    capsys.readouterr()
    code = main(["audit", str(out), "--details", "--judge", setup["strong"], "--judge-margin", repr(margin)])
    printed = capsys.readouterr().out
    flagged = sorted({line.split(":")[0].strip() for line in printed.splitlines()
                      if line.startswith("    ") and f": {FLAG}:" in line})
    assert flagged == expected and code == (1 if expected else 0)
    assert f"(margin {margin:g}, given: it refuses" in printed
    # no margin: calibrated on the split's 7 source questions' own distractors, not on its new ones
    main(["audit", str(out), "--judge", setup["strong"]])
    printed = capsys.readouterr().out
    assert ("calibrated to refuse at most 2%: it refuses 0 (0.0%) of the judged questions' 21 original distractors"
            in printed)
    calibrated = float(re.search(r"margin (\S+), calibrated", printed).group(1))
    assert 0 < -calibrated - max(gaps_of(setup["strong"], list(originals.values()))) < 5e-3
    # too weak: the audit stops and says so
    assert main(["audit", str(out), "--judge", setup["llama"]]) == 2
    assert "too weak to judge" in capsys.readouterr().err
    assert main(["audit", str(out), "--judge-margin", "0.5"]) == 2


def test_a_missing_judge_says_which_key_and_what_to_do(setup, tmp_path):
    with pytest.raises(ConfigError, match=r"judge .*nope: no such folder.*remove the judge key"):
        planted(setup, judge=str(tmp_path / "nope"))
    with pytest.raises(ConfigError, match="judge must name a model"):
        planted(setup, judge=" ")
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "splits": [
        {"attack": "distractor_extraction", "config": {"model": setup["de"], "judge": "./runs/judge"}}]})
    with pytest.raises(ConfigError, match="judge"):
        build_release(cfg, tmp_path / "rel")
    assert main(["audit", str(tmp_path), "--judge", str(tmp_path / "nope")]) == 2


@pytest.mark.slow
def test_smollm2_is_too_weak_to_judge_the_bundled_sample():
    """What refuses `smollm2` by name (advrace.models.judge.TOO_WEAK), measured: on 12 questions of the
    bundled RACE sample, the margin that spares 98% of their own distractors cannot refuse the gold
    restated."""
    from advrace.core.config import DataSpec
    from advrace.models.judge import make_judge

    examples = load(DataSpec(path="@sample/race").resolved_path()).examples[:12]
    with pytest.raises(JudgeTooWeak, match=r"judge smollm2 is too weak to judge: it rates \d+ of the 36 original"):
        make_judge("smollm2").calibrate_on(examples)
