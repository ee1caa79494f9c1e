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
    REGISTRY.unregister("shout_test")


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


# ---------------------------------------------------------------- the one registry type

REGISTERED = textwrap.dedent('''
    from advrace.core.registry import Registry

    WIDGETS = Registry("widget", "advrace.widgets_test")


    @WIDGETS.register
    class Gear:
        name = "gear"
''')

PLUGIN_WIDGET = textwrap.dedent('''
    from widgets_test import WIDGETS


    @WIDGETS.register
    class Spring:
        name = "spring"
''')


@pytest.fixture
def widgets(install_plugin):
    install_plugin("widgets_test", REGISTERED, "unused_group_test")
    install_plugin("spring_plugin", PLUGIN_WIDGET, "advrace.widgets_test", "spring")
    import widgets_test

    return widgets_test.WIDGETS


def test_an_unknown_name_is_one_error_that_lists_the_known_names(widgets):
    from advrace.attacks import attacks_named
    from advrace.core.errors import ConfigError
    from advrace.core.registry import UnknownName
    from advrace.formats import get_format
    from advrace.training.objectives import objective_class

    with pytest.raises(UnknownName, match=r"^train.widget: unknown widget 'cog'; choose one of gear, spring$"):
        widgets.lookup("cog", "train.widget")
    with pytest.raises(UnknownName, match=r"unknown widget \['gear'\]"):
        widgets.lookup(["gear"])  # a YAML list where a name belongs
    for lookup, kind in [(attacks_named, "attack"), (get_format, "format"),
                         (objective_class, "training objective")]:
        with pytest.raises(UnknownName, match=f"^(objective: )?unknown {kind} 'nope'; choose one of "):
            lookup("nope")
    assert issubclass(UnknownName, ConfigError)


def test_entry_points_load_when_the_list_or_an_unknown_name_is_asked_for(widgets):
    assert list(widgets) == ["gear"]  # reading it as a mapping loads no plugin
    assert widgets.lookup("gear").__name__ == "Gear" and list(widgets) == ["gear"]
    assert widgets.lookup("spring").__module__ == "spring_plugin"
    assert widgets.names() == ("gear", "spring")
    widgets.unregister("spring")
    widgets.unregister("spring")  # an unknown name is ignored
    assert widgets.names() == ("gear",)  # entry points are imported once per process


def test_a_taken_name_is_refused_unless_it_is_the_same_class(widgets):
    gear = widgets["gear"]
    assert widgets.register(gear) is gear and widgets.names() == ("gear", "spring")

    class Impostor:
        name = "gear"

    with pytest.raises(ValueError, match=r"two widgets named 'gear': widgets_test.Gear and .*Impostor"):
        widgets.register(Impostor)
    assert widgets["gear"] is gear
