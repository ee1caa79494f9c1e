"""One name per attack: `mc_addsent` (AdvRACE's AddSent) and `squad_addsent` (Jia and Liang's),
with `addsent`, the name both once had, an alias resolved by the task. Old configs and releases
must read as they did, and whatever reads a release's attack names must resolve the alias by the
release's own task: SQuAD's `addsent` audited as RACE's (or the reverse) is the bug to catch."""

from __future__ import annotations

import json

import pytest

from advrace.attacks import ALIASES, attacks_named, available_attacks, canonical_name, get_attack, register
from advrace.attacks.addsent import AddSent
from advrace.attacks.squad_addsent import AddSentAdversary
from advrace.attacks.base import Attack
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.provenance import AdversarialSentence, AttackSummary
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.release import audit as A
from advrace.release import build_release, split_file
from advrace.release.card import _method_lines
from human_eval import selection


def test_an_attack_under_its_alias_records_the_alias_and_checks_as_itself():
    """Built as `addsent`, AdvRACE's AddSent writes `addsent` into its records but refuses
    sentences with `mc_addsent`'s registered checks: looked up by the alias, it would find none."""
    aliased = get_attack("addsent", MULTIPLE_CHOICE)({})
    assert (aliased.name, aliased.own_name) == ("addsent", "mc_addsent")
    assert AddSent({}).own_name == "mc_addsent"
    checks, _ = aliased._sentence_checks
    assert checks and [c.name for c in checks] == [c.name for c in AddSent({})._sentence_checks[0]]


def test_the_alias_resolves_per_task():
    assert canonical_name("addsent", MULTIPLE_CHOICE) == "mc_addsent"
    assert canonical_name("addsent", EXTRACTIVE_QA) == "squad_addsent"
    assert canonical_name("charswap", None) == "charswap"  # not an alias: as it is
    race, squad = get_attack("addsent", MULTIPLE_CHOICE), get_attack("addsent", EXTRACTIVE_QA)
    assert issubclass(race, AddSent) and not issubclass(race, AddSentAdversary)
    assert issubclass(squad, AddSentAdversary) and not issubclass(squad, AddSent)
    assert race.name == squad.name == "addsent"  # a release built with the alias keeps its name
    assert get_attack("mc_addsent") is AddSent and get_attack("squad_addsent", EXTRACTIVE_QA) is AddSentAdversary
    assert get_attack("addsent", MULTIPLE_CHOICE) is race  # one class per alias and task
    assert [c.__mro__[1] for c in attacks_named("addsent")] == [AddSent, AddSentAdversary]


def test_an_alias_without_a_task_is_an_error_naming_both_attacks():
    with pytest.raises(ConfigError, match=r"'addsent' is an alias .*'mc_addsent' \(multiple_choice\) and "
                                          r"'squad_addsent' \(extractive_qa\)"):
        get_attack("addsent")
    with pytest.raises(ConfigError, match="does not apply to extractive_qa"):
        get_attack("mc_addsent", EXTRACTIVE_QA)


def test_the_attack_list_has_each_attack_once_by_its_own_name():
    names = available_attacks()
    assert {"mc_addsent", "squad_addsent"} <= set(names) and "addsent" not in names
    assert len(names) == len(set(names))
    assert set(ALIASES["addsent"].values()) <= set(names)


def test_an_alias_or_a_taken_name_cannot_be_registered():
    class Impostor(Attack):
        name = "addsent"

        def perturb(self, example, rng):
            return example

    with pytest.raises(ValueError, match="alias"):
        register(Impostor)
    Impostor.name = "mc_addsent"
    with pytest.raises(ValueError, match="two attacks named 'mc_addsent'"):
        register(Impostor)


def _build(tmp_path, attack: str):
    out = tmp_path / attack
    cfg = release_config_from_dict({"name": "names", "data": {"path": "@sample/race", "limit": 6}, "seed": 3,
                                    "splits": [attack]})
    manifest = build_release(cfg, out)
    return manifest, (out / split_file(attack)).read_text(encoding="utf-8"), json.loads((out / "stats.json").read_text())


def test_a_build_by_the_new_name_equals_one_by_the_alias_but_for_the_name(tmp_path):
    old_manifest, old, old_stats = _build(tmp_path, "addsent")
    new_manifest, new, new_stats = _build(tmp_path, "mc_addsent")
    assert '"addsent"' in old and "mc_addsent" not in old  # the split keeps the name its config used
    assert old_manifest["splits"]["addsent"]["attack"] == "addsent"
    assert new_manifest["splits"]["mc_addsent"]["attack"] == "mc_addsent"
    assert any(json.loads(line)["perturbed"] for line in new.splitlines())
    # the split's name (records, ids, provenance) is the only difference
    assert new.replace("mc_addsent", "addsent") == old
    assert json.loads(json.dumps(new_stats).replace("mc_addsent", "addsent")) == old_stats


def _sentence_record(attack: str, sentence: str) -> AttackSummary:
    """A "not" sentence: RACE's AddSent refuses one (a hint), Jia and Liang's have no such rule."""
    return AttackSummary(attack, sentences=(AdversarialSentence(sentence, negation_fallback=True),))


def _race_pair():
    src = MCExample(id="q1", passage="Tom lives in a small village. He walks to school.",
                    question="Where does Tom live?", options=("In a city.", "In a village.", "By the sea.", "Abroad."),
                    label=1)
    sentence = "Jim does not live by the sea."
    return src, src.insert_sentence(sentence, 0).with_provenance(_sentence_record("addsent", sentence))


def _squad_pair():
    context = "Tom lives in a small village. He walks to school."
    src = SpanExample(id="s1", title="t", context=context, question="Where does Tom live?",
                      answers=(Answer("a small village", context.index("a small village")),))
    sentence = "Jim does not live in the big city."
    return src, src.insert_sentence(sentence, len(context)).with_provenance(_sentence_record("addsent", sentence))


def test_an_old_addsent_split_is_audited_as_its_own_tasks_attack(ctx):
    src, ex = _race_pair()
    race = A.audit_split("addsent", [src], [ex], ctx)
    assert A.NEGATION_HINT in {name for *_, name, _ in race.flags}  # RACE's own check ran
    assert race.unchecked == A.UNCHECKED["mc_addsent"] and race.attack == "addsent"
    src, ex = _squad_pair()
    squad = A.audit_split("addsent", [src], [ex], ctx)
    assert A.NEGATION_HINT not in {name for *_, name, _ in squad.flags}  # not RACE's checks on SQuAD
    assert squad.unchecked == A.UNCHECKED["squad_addsent"] != A.UNCHECKED["mc_addsent"]


def test_an_old_addsent_split_cites_its_own_tasks_paper():
    manifest = {"splits": {"original": {"attack": "none"}, "addsent": {"attack": "addsent"}}}
    race, squad = " ".join(_method_lines(manifest, MULTIPLE_CHOICE)), " ".join(_method_lines(manifest, EXTRACTIVE_QA))
    assert "`addsent` follows AdvRACE" in race and "Jia and Liang" not in race
    assert "`addsent` follows Adversarial SQuAD" in squad and "AdvRACE" not in squad


def test_human_validation_reads_an_old_squad_addsent_split_as_jia_and_liangs():
    manifest = {"task": EXTRACTIVE_QA, "splits": {"addsent": {"attack": "addsent"}, "one": {"attack": "addonesent"}}}
    attacks = selection.attacks_of(manifest, ["addsent", "one"])
    assert attacks == {"addsent": selection.ADVERSARIAL, "one": "addonesent"}
    assert selection.pool_key("addsent", attacks["addsent"], "x") == selection.pool_key("one", "addonesent", "x")
