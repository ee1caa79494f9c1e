"""Golden fixtures: every attack's release records on the first questions of the bundled sample.

A refactor must not change a release; these tests make any change to any record fail, with the
record and the field that moved. tests/golden/regenerate.py writes the goldens with the same
build (tests/golden/golden_build.py) after an intended change.

Computed floats are recorded to 4 significant digits (advrace.core.numbers), yet a value on a
rounding boundary can still move by one unit of its last digit when a library sums in another
order: a file whose only differences are such floats passes. Anything else fails.
"""

import json

import pytest

from advrace.attacks import attack_classes, canonical_name
from advrace.models.runtime.checkpoint_info import checkpoint_sha256
from advrace.core.numbers import agree
from golden.golden_build import (ENVIRONMENT, GOLDEN, build, environment, golden_file, golden_names, release_configs,
                                 split_name)

HINT = "if the change is intended, run python tests/golden/regenerate.py and review the diff"


@pytest.fixture(scope="module")
def built(tmp_path_factory):
    return build(tmp_path_factory.mktemp("golden"))


def _excerpt(text: str, at: int, width: int = 60) -> str:
    start = max(0, at - width)
    return ("..." if start else "") + text[start:at + width] + ("..." if at + width < len(text) else "")


def _field_diff(name: str, want, got) -> str:
    if isinstance(want, str) and isinstance(got, str):
        at = next((i for i, (a, b) in enumerate(zip(want, got)) if a != b), min(len(want), len(got)))
        want, got = _excerpt(want, at), _excerpt(got, at)
    return f"  {name}:\n    golden: {want!r}\n    built:  {got!r}"


def mismatch(path, want: bytes, got: bytes) -> str:
    """The first record that differs, the fields that differ in it (around the first differing
    character), and what else differs: record counts and the versions the goldens were made with."""
    old, new = want.decode("utf-8").splitlines(), got.decode("utf-8").splitlines()
    lines = [f"{path.relative_to(GOLDEN.parents[1])} differs from a fresh build "
             f"({len(old)} golden records, {len(new)} built)"]
    i = next((i for i, (a, b) in enumerate(zip(old, new)) if a != b), min(len(old), len(new)))
    if i < len(old) and i < len(new):
        a, b = json.loads(old[i]), json.loads(new[i])
        lines.append(f"first differing record: {a.get('id')!r} (line {i + 1})"
                     + (f", built {b.get('id')!r}" if a.get("id") != b.get("id") else ""))
        fields = [k for k in dict.fromkeys([*a, *b]) if a.get(k) != b.get(k)]
        lines += [_field_diff(k, a.get(k), b.get(k)) for k in fields[:4]]
        if not fields:
            lines.append(_field_diff("line", old[i], new[i]))
    else:
        extra = (old if i < len(old) else new)[i]
        lines.append(f"first record only in the {'golden' if i < len(old) else 'built'} file: "
                     f"{json.loads(extra).get('id')!r}")
    return "\n".join(lines)


def _agrees(want, got, key: str | None = None) -> bool:
    """Equal, but for floats that `agree` (one unit in the 4th significant digit). A record's
    provenance, a JSON string, is compared as what it encodes; key order must not change."""
    if key == "provenance" and isinstance(want, str) and isinstance(got, str) and want != got:
        try:
            want, got = json.loads(want), json.loads(got)
        except ValueError:
            return False
    if isinstance(want, float) or isinstance(got, float):
        return type(want) is type(got) and agree(want, got)
    if isinstance(want, dict) and isinstance(got, dict):
        return list(want) == list(got) and all(_agrees(want[k], got[k], k) for k in want)
    if isinstance(want, list) and isinstance(got, list):
        return len(want) == len(got) and all(_agrees(a, b) for a, b in zip(want, got))
    return type(want) is type(got) and want == got


def only_floats_moved(want: bytes, got: bytes) -> bool:
    """Whether two split files hold the same records but for floats within recorded precision."""
    old, new = want.decode("utf-8").splitlines(), got.decode("utf-8").splitlines()
    return len(old) == len(new) and all(_agrees(json.loads(a), json.loads(b)) for a, b in zip(old, new))


def _environment_note(built) -> str:
    recorded = json.loads(ENVIRONMENT.read_text(encoding="utf-8"))
    now = environment(built)
    moved = [f"{k}: golden {recorded.get(k)!r}, now {now[k]!r}" for k in now if recorded.get(k) != now[k]]
    return ("\nthe goldens were made with other versions (an upgrade may explain it):\n  "
            + "\n  ".join(moved)) if moved else ""


@pytest.mark.parametrize("task,split", golden_names(), ids=[f"{t}/{s}" for t, s in golden_names()])
def test_split_matches_its_golden_file(built, task, split):
    path = golden_file(task, split)
    assert path.is_file(), f"no golden file {path.name} for {task}; run python tests/golden/regenerate.py"
    inference = built.manifests[task]["splits"][split].get("inference")
    if inference and inference["device_type"] != "cpu":
        pytest.skip(f"the model ran on {inference['device_type']}; the goldens are the CPU's")
    want, got = path.read_bytes(), built.files[task, split]
    if want != got and not only_floats_moved(want, got):
        pytest.fail(f"{mismatch(path, want, got)}{_environment_note(built)}\n{HINT}", pytrace=False)


def _with_addany_record(**changes) -> bytes:
    """The golden AddAny file with its first record's search result changed as given."""
    lines = golden_file("extractive_qa", "addany").read_bytes().decode("utf-8").splitlines(keepends=True)
    record = json.loads(lines[0])
    provenance = json.loads(record["provenance"])
    provenance[-1].update(changes)
    record["provenance"] = json.dumps(provenance)
    return "".join([json.dumps(record, ensure_ascii=False) + "\n", *lines[1:]]).encode("utf-8")


def test_a_float_flipping_on_its_last_digit_passes():
    want = _with_addany_record(trace=[0.2495, 0.1234], expected_f1=0.1234)
    assert only_floats_moved(want, want)
    assert only_floats_moved(want, _with_addany_record(trace=[0.2496, 0.1234], expected_f1=0.1234))
    assert only_floats_moved(want, _with_addany_record(trace=[0.2495, 0.1233], expected_f1=0.1233))
    # a value on a rounding boundary: 0.99995 may be recorded as 0.9999 or as 1.0
    assert only_floats_moved(_with_addany_record(top_f1=0.9999), _with_addany_record(top_f1=1.0))


def test_a_real_change_still_fails():
    want = _with_addany_record(trace=[0.2495, 0.1234], expected_f1=0.1234)
    for got in [_with_addany_record(trace=[0.2505, 0.1234], expected_f1=0.1234),  # the 3rd digit
                _with_addany_record(trace=[0.2495, 0.1236], expected_f1=0.1234),  # two units of the 4th
                _with_addany_record(trace=[0.2495], expected_f1=0.1234),  # a step fewer
                _with_addany_record(trace=[0.2495, 0.1234], expected_f1=0.1234, queries=13),  # an int
                _with_addany_record(trace=[0.2495, 0.1234], expected_f1=0.1234,
                                    sentence="leave meeting audio.")]:  # another replacement word
        assert not only_floats_moved(want, got)
    lines = want.splitlines(keepends=True)
    assert not only_floats_moved(want, b"".join(lines[:-1]))  # a record fewer
    record = json.loads(lines[0])
    assert not only_floats_moved(want, json.dumps({**record, "question": record["question"] + " "},
                                                  ensure_ascii=False).encode() + b"\n" + b"".join(lines[1:]))
    # and the message says where, as before
    message = mismatch(golden_file("extractive_qa", "addany"), want,
                       _with_addany_record(trace=[0.2505, 0.1234], expected_f1=0.1234))
    assert "first differing record" in message and "provenance" in message


def test_every_attack_has_a_golden_file_for_each_of_its_tasks():
    """A new attack, or an old one on a new task, needs its fixture before it can ship."""
    # (attack name, task) pairs that cannot run on the bundled sample; none so far.
    skip: set[tuple[str, str]] = set()
    # a golden split may name its attack by an alias ("addsent" builds mc_addsent and squad_addsent)
    configs = release_configs({"qa": "", "unilm": "", "lm": ""})
    covered = {(canonical_name(s if isinstance(s, str) else s["attack"], task), task)
               for task, cfg in configs.items() for s in cfg["splits"] if golden_file(task, split_name(s)).is_file()}
    missing = [f"{task}/{cls.name}" for cls in attack_classes() for task in cls.tasks
               if (cls.name, task) not in skip | covered]
    assert not missing, f"attacks without a golden file: {', '.join(missing)}; add them to " \
                        f"tests/golden/golden_build.py and run python tests/golden/regenerate.py"


def test_no_stale_golden_files():
    expected = {golden_file(task, split) for task, split in golden_names()}
    stale = sorted(p.relative_to(GOLDEN).as_posix() for p in GOLDEN.glob("*/*.jsonl") if p not in expected)
    assert not stale, f"golden files of no split built: {', '.join(stale)}; {HINT}"


def test_tiny_models_are_the_same_at_every_build(built, tmp_path):
    """The goldens hold no weights: they rely on the same seed giving the same checkpoint files."""
    from golden.golden_build import make_models

    again = make_models(tmp_path / "models")
    assert {n: checkpoint_sha256(p) for n, p in again.items()} == \
           {n: checkpoint_sha256(p) for n, p in built.models.items()}


def test_rule_based_splits_do_not_depend_on_workers(built, tmp_path):
    forked = build(tmp_path, workers=2, rule_based_only=True)
    assert forked.files and all(forked.files[key] == built.files[key] for key in forked.files)
