"""A user's package adds an attack without forking advrace: an entry point in the
`advrace.attacks` group, found by the registry like the built-in attacks."""

import json
import textwrap

import pytest

from advrace.attacks import REGISTRY, attack_classes, get_attack
from advrace.cli import main

PLUGIN = textwrap.dedent('''
    """A third-party attack: upper-cases the question."""
    from dataclasses import dataclass

    from advrace.attacks import Attack, CannotPerturb, register


    @dataclass(frozen=True)
    class ShoutConfig:
        exclaim: bool = False


    @register
    class Shout(Attack):
        name = "shout_test"
        tasks = ("multiple_choice",)
        Config = ShoutConfig

        def perturb(self, example, rng):
            if example.question.isupper():
                raise CannotPerturb("already upper case")
            new = example.question.upper() + ("!" if self.config.exclaim else "")
            return example.replace_spans("question", [(0, len(example.question), new)])
''')


@pytest.fixture
def plugin(install_plugin):
    install_plugin("shout_plugin", PLUGIN, "advrace.attacks", "shout_test")
    yield
    REGISTRY.pop("shout_test", None)


def test_an_entry_point_attack_is_found_and_built(plugin, race_dir, tmp_path):
    assert get_attack("shout_test").__module__ == "shout_plugin"
    assert "shout_test" in {cls.name for cls in attack_classes()}
    out = tmp_path / "rel"
    assert main(["build", "--data", str(race_dir), "--attacks", "shout_test", "--quiet", "--out", str(out)]) == 0
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["splits"]["shout_test"]["perturbed"] == manifest["splits"]["shout_test"]["count"] == 7
    first = json.loads((out / "data" / "shout_test-00000-of-00001.jsonl").read_text().splitlines()[0])
    assert first["question"] == first["question"].upper()


def test_a_broken_plugin_names_itself(install_plugin, capsys):
    install_plugin("broken_plugin", "raise ImportError('no_such_module_anywhere')\n", "advrace.attacks")
    assert main(["attacks"]) == 2
    assert "broken_plugin" in capsys.readouterr().err
