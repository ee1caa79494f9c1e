"""The locked environment: the install is the lock's, `advrace env` says so, and `advrace verify`
names the packages whose running version differs from the one that built a release."""

import json
import os
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.environment import (LOCK_NAME, RELEASE_PACKAGES, check_lock, package_versions, read_lock,
                                      same_version, version_differences)
from advrace.core.errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]
LOCK = ROOT / LOCK_NAME


@pytest.mark.skipif(bool(os.environ.get("ADVRACE_UNLOCKED")),
                    reason="make test-latest runs on the newest versions on purpose")
def test_the_installed_environment_is_exactly_the_lock():
    check = check_lock(LOCK)
    assert check.ok, (f"this environment is not {LOCK_NAME}'s:\n  " + "\n  ".join(check.problems())
                      + "\nreinstall with `make clean && make test`, or upgrade on purpose with `make lock`")


def test_setuptools_vendored_copies_are_not_installed_packages():
    """Once setuptools is imported (torch.compile does), its `_vendor` folder is on sys.path and its
    copies (autocommand, jaraco.text, ...) look installed; the lock check must not count them."""
    import importlib.metadata
    import sys

    import setuptools  # noqa: F401 - puts setuptools/_vendor on sys.path
    from advrace.core.environment import installed_distributions, vendored

    vendor = [p for p in sys.path if Path(p).name == "_vendor"]
    seen = [d for d in importlib.metadata.distributions() if vendored(d)]
    assert vendor and seen, "setuptools no longer vendors packages on sys.path: this test checks nothing"
    copies = {d.metadata["Name"].lower().replace("_", "-").replace(".", "-") for d in seen}
    really = {d.metadata["Name"].lower().replace("_", "-").replace(".", "-")
              for d in importlib.metadata.distributions() if not vendored(d)}
    assert not (copies - really) & set(installed_distributions())


def test_the_lock_pins_every_package_that_decides_a_release():
    pins = read_lock(LOCK)
    assert not [p for p in RELEASE_PACKAGES if p not in pins]
    assert pins["torch"] == "2.13.0"  # the CPU wheel on the machines' disk, without its local label


def test_a_pin_without_a_local_label_accepts_a_local_build():
    assert same_version("2.13.0", "2.13.0+cpu") and same_version("2.13.0+cpu", "2.13.0+cpu")
    assert not same_version("2.13.0", "2.13.1") and not same_version("2.13.0+cu128", "2.13.0+cpu")
    assert not same_version("1.0", None)


def test_the_lock_check_names_wrong_missing_and_extra_packages(tmp_path):
    installed = package_versions(("numpy", "pyyaml"))
    lock = tmp_path / "lock.txt"
    lock.write_text(f"# a comment\n\nnumpy==0.0.1\nPyYAML=={installed['pyyaml']}\nno-such-package==1.0\n")
    check = check_lock(lock)
    assert not check.ok and check.pinned == 3
    assert check.wrong == (f"numpy: pinned 0.0.1, installed {installed['numpy']}",)
    assert check.missing == ("no-such-package",)
    assert any(e.startswith("torch ") for e in check.extra)  # installed, but this lock names it not


def test_a_lock_line_that_is_no_pin_is_refused(tmp_path):
    lock = tmp_path / "lock.txt"
    lock.write_text("numpy==2.0\ntorch>=2\n")
    with pytest.raises(ConfigError, match=r"lock.txt, line 2: expected NAME==VERSION, got 'torch>=2'"):
        read_lock(lock)


def test_env_prints_the_versions_and_checks_the_lock(tmp_path, capsys):
    assert main(["env", "--lock", str(LOCK)]) == 0
    out = capsys.readouterr().out
    assert f"transformers             {package_versions(['transformers'])['transformers']}" in out
    assert "bf16 on this CPU:" in out
    bad = tmp_path / "old.txt"
    bad.write_text(LOCK.read_text().replace("\ntransformers==", "\ntransformers==4.0.0\n#"))
    assert main(["env", "--lock", str(bad)]) == 0  # without --check it only reports
    assert "transformers: pinned 4.0.0, installed" in capsys.readouterr().out
    assert main(["env", "--check", "--lock", str(bad)]) == 1
    captured = capsys.readouterr()
    assert "transformers: pinned 4.0.0" in captured.out and "make clean && make test" in captured.err


def _release(race_dir, tmp_path) -> Path:
    out = tmp_path / "rel"
    assert main(["build", "--data", str(race_dir), "--attacks", "charswap", "--quiet", "--out", str(out)]) == 0
    return out


def test_verify_names_a_package_whose_version_differs(race_dir, tmp_path, capsys):
    out = _release(race_dir, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["environment"]["packages"]["torch"] == package_versions(["torch"])["torch"]
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert capsys.readouterr().err == ""  # built here, now: nothing to say about versions

    manifest["environment"]["packages"]["tokenizers"] = "0.0.1"
    (out / "manifest.json").write_text(json.dumps(manifest))
    assert main(["verify", str(out)]) == 0  # the files are intact; the note is about rebuilding
    err = capsys.readouterr().err
    running = package_versions(["tokenizers"])["tokenizers"]
    assert f"tokenizers: built with 0.0.1, running {running}" in err
    assert "torch" not in err and "transformers" not in err


def test_verify_says_when_a_manifest_records_no_versions(race_dir, tmp_path, capsys):
    out = _release(race_dir, tmp_path)
    manifest = json.loads((out / "manifest.json").read_text())
    del manifest["environment"]
    (out / "manifest.json").write_text(json.dumps(manifest))
    capsys.readouterr()
    assert main(["verify", str(out)]) == 0
    assert "records no package versions" in capsys.readouterr().err


def test_version_differences_include_python_and_packages_gone():
    record = {"python": "2.7.18", "packages": {"numpy": package_versions(["numpy"])["numpy"],
                                               "no-such-package": "1.0"}}
    moved = version_differences(record)
    assert any(m.startswith("python: built with 2.7.18") for m in moved)
    assert "no-such-package: built with 1.0, running none" in moved
    assert not any(m.startswith("numpy") for m in moved)
