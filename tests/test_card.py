"""The card tells the truth about its data: its source and licence come from what was read (never
from the recipe's free text), it mentions only the release's own splits in words that fit its task,
and it states each split's attacked share as stats.json counts it."""

import json
import re
from pathlib import Path

import pytest

from advrace.core.config import load_config, with_overrides, with_settings
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.release import build_release, check_release
from advrace.release.licence import identify
from conftest import make_race_dir, squad_doc

REPO = Path(__file__).resolve().parents[1]
RECIPES = REPO / "configs" / "release"

RACE_TERMS = "RACE is for non-commercial research only"
CC_BY_SA = "licensed CC BY-SA 4.0"
UNKNOWN = "the licence of the source data applies to this release; advrace adds none"
SAMPLE_TEXT = ("bundled sample", "CC0", "written for advrace")


def _build(recipe: str | None, data, out: Path, attacks: list[str]) -> tuple[str, dict, dict]:
    cfg = with_overrides(load_config(str(RECIPES / recipe) if recipe else None), data=str(data),
                         attacks=attacks, workers=1)
    build_release(cfg, out)
    check_release(out)  # the licence fields leave the release verifiable
    card = (out / "README.md").read_text(encoding="utf-8")
    return (card, json.loads((out / "manifest.json").read_text(encoding="utf-8")),
            json.loads((out / "stats.json").read_text(encoding="utf-8")))


def _section(card: str, title: str) -> str:
    return card.split(f"## {title}\n", 1)[1].split("\n## ", 1)[0]


def _header(card: str) -> str:
    return card.split("---\n", 2)[1]


def squad_file(folder: Path, name: str) -> Path:
    path = folder / name
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    return path


def test_a_sample_recipe_on_real_race_names_race_and_its_terms_only(tmp_path):
    """sample.yaml with --data RACE/test: RACE and its terms, not the sample's text or CC0."""
    card, manifest, _ = _build("sample.yaml", make_race_dir(tmp_path), tmp_path / "rel",
                               ["charswap", "option_only"])
    src = manifest["source"]
    assert (src["dataset"], src["licence"]) == ("RACE", "LicenseRef-RACE")
    assert RACE_TERMS in card and "keeps those terms; advrace adds none" in card
    for wrong in (*SAMPLE_TEXT, "CC BY-SA", "SQuAD", UNKNOWN):
        assert wrong not in card, wrong
    assert "license: other\nlicense_name: race-terms\n" in _header(card)
    # the recipe's description (of its own data, the sample) is left out, and the card says why
    assert "\nAdversarial splits of RACE.\n" in card
    assert "The recipe `advrace-sample` names its own data (`@sample/race`)" in card
    assert "`option_only` removes the passage and the question" in card  # it has that probe


def test_a_squad_card_names_squad_and_cc_by_sa_only(tmp_path):
    """A SQuAD v1.1 file (SQuAD's own name, not the sample), through the SQuAD sample's recipe and
    through no recipe: SQuAD v1.1 under CC BY-SA 4.0, nothing of RACE's terms or probes."""
    data = squad_file(tmp_path, "dev-v1.1.json")
    cards = {}
    for recipe, attacks in (("sample-squad.yaml", ["charswap", "addonesent"]), (None, ["charswap"])):
        card, manifest, _ = cards[recipe] = _build(recipe, data, tmp_path / f"rel-{recipe}", attacks)
        assert (manifest["source"]["dataset"], manifest["source"]["licence"]) == ("SQuAD v1.1", "CC-BY-SA-4.0")
        assert f"The data is SQuAD v1.1 (Rajpurkar et al., EMNLP 2016), {CC_BY_SA}" in card
        assert "license: cc-by-sa-4.0\n" in _header(card)
        for wrong in (*SAMPLE_TEXT, "non-commercial", "RACE terms", "option_only", "multiple-choice", "passage",
                      "probe", "options", UNKNOWN):
            assert wrong not in card, (recipe, wrong)
        assert "share of the source's context and question words" in card
        assert "`charswap` follows AdvRACE's CharSwap (Si et al., Findings of ACL 2021)." in card
    assert "`addonesent` follows Adversarial SQuAD (Jia and Liang, EMNLP 2017)." in cards["sample-squad.yaml"][0]
    assert "Adversarial SQuAD" not in cards[None][0]  # only the papers of its own splits


def test_data_advrace_does_not_know_states_no_licence_of_its_own(tmp_path):
    card, manifest, _ = _build(None, squad_file(tmp_path, "my-questions.json"), tmp_path / "rel", ["charswap"])
    assert (manifest["source"]["dataset"], manifest["source"]["licence"]) == (None, "NOASSERTION")
    assert "The data is `my-questions.json` (squad), which advrace does not know" in card and UNKNOWN in card
    assert "license: unknown\n" in _header(card)
    for wrong in (*SAMPLE_TEXT, "CC BY-SA", "non-commercial"):
        assert wrong not in card, wrong


def test_the_bundled_sample_keeps_its_own_description_and_cc0(tmp_path):
    cfg = with_overrides(load_config(str(RECIPES / "sample-squad.yaml")), attacks=["charswap"], limit=6, workers=1)
    build_release(cfg, tmp_path / "rel")
    card = (tmp_path / "rel" / "README.md").read_text(encoding="utf-8")
    assert cfg.description in card and "names its own data" not in card
    assert "dedicated to the public domain under CC0 1.0" in card and "license: cc0-1.0\n" in _header(card)
    assert "CC BY-SA" not in card and "non-commercial" not in card


def test_set_data_path_counts_as_other_data(tmp_path):
    cfg = load_config(str(RECIPES / "sample-squad.yaml"))
    assert cfg.reads_recipe_data and with_overrides(cfg, data="@sample/squad").reads_recipe_data
    moved = with_settings(cfg, [f"data.path={squad_file(tmp_path, 'dev-v1.1.json')}"])
    assert not moved.reads_recipe_data and not with_overrides(cfg, data="elsewhere.json").reads_recipe_data
    assert "recipe_data" not in cfg.to_dict()  # not a setting: the manifest's config has no such key


def test_the_card_states_each_splits_attacked_share_as_stats_counts_it(tmp_path):
    card, manifest, stats = _build(None, squad_file(tmp_path, "dev-v1.1.json"), tmp_path / "rel",
                                   ["charswap", "addonesent", "addsentmod"])
    share = _section(card, "Attacked share")
    found = {m[0]: (int(m[1]), int(m[2]), m[3]) for m in
             re.findall(r"- `(\w+)`: attacked: (\d+) of (\d+) questions? \((\d+\.\d)%\)", share)}
    assert set(found) == {"charswap", "addonesent", "addsentmod"}  # every attacked split, not `original`
    for split, (n, m, pct) in found.items():
        s = stats["splits"][split]
        assert (n, m) == (s["perturbed"], s["count"]) == (manifest["splits"][split]["perturbed"],
                                                          manifest["splits"][split]["count"])
        assert pct == f"{100 * n / m:.1f}"
    assert "unchanged copy of the original" in share and "`advrace evaluate` reports the score on the attacked" in share


@pytest.mark.parametrize("name, fmt, task, levels, want", [
    ("ehovy/race:all", "hub", MULTIPLE_CHOICE, ["high", "middle"], ("RACE", "LicenseRef-RACE")),
    ("rajpurkar/squad", "hub", EXTRACTIVE_QA, [], ("SQuAD v1.1", "CC-BY-SA-4.0")),
    ("someone/quiz:v2", "hub", MULTIPLE_CHOICE, [], ("someone/quiz", "NOASSERTION")),
    ("@sample/race", "race-dir", MULTIPLE_CHOICE, ["high", "middle"], ("the bundled sample", "CC0-1.0")),
    ("train.jsonl.gz", "race-jsonl", MULTIPLE_CHOICE, ["high"], ("RACE", "LicenseRef-RACE")),
    ("my-quiz.jsonl", "race-jsonl", MULTIPLE_CHOICE, [], (None, "NOASSERTION")),
    ("xquad.de.json", "squad", EXTRACTIVE_QA, [], ("XQuAD", "CC-BY-SA-4.0")),
    ("train-v1.1.json", "squad", EXTRACTIVE_QA, [], ("SQuAD v1.1", "CC-BY-SA-4.0")),
    ("dev-v2.0.json", "squad", EXTRACTIVE_QA, [], (None, "NOASSERTION")),
])
def test_sources_are_identified_by_name_format_and_ids(name, fmt, task, levels, want):
    assert tuple(identify(name, fmt, task, levels).values()) == want


def test_a_hub_card_names_the_dataset_and_points_at_its_card():
    from advrace.release.licence import licence_lines

    text = " ".join(licence_lines({"name": "someone/quiz:v2", "format": "hub", **identify(
        "someone/quiz:v2", "hub", MULTIPLE_CHOICE)}))
    assert "`someone/quiz`" in text and "see the dataset's own card (https://huggingface.co/datasets/someone/quiz)" in text
    race = " ".join(licence_lines({"name": "ehovy/race:all", "format": "hub", **identify(
        "ehovy/race:all", "hub", MULTIPLE_CHOICE, ["high"])}))
    assert "RACE (the Hub's `ehovy/race:all`)" in race and RACE_TERMS in race
