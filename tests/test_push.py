"""`advrace push`: verify, then upload exactly the manifest's files; a dry run lists them offline,
a corrupted release is refused, and Hub failures end in a message that says what to do."""

import json
import os
import re
import socket
import subprocess
import sys
import types
from pathlib import Path

import pytest

from advrace.cli import main
from advrace.core.examples import MCExample
from advrace.release import split_file, write_release
from advrace.release.push import explain

ROOT = Path(__file__).resolve().parents[1]
REPO = "alice/advrace-test"


@pytest.fixture
def release(tmp_path):
    examples = [MCExample(f"q{i}", f"Passage {i}.", f"Question {i}?", ("a", "b", "c", "d"), i % 4)
                for i in range(3)]
    write_release({"original": examples, "other": examples[:2]}, tmp_path / "rel", name="t", source={"name": "t"})
    return tmp_path / "rel"


def manifest_files(release: Path) -> dict:
    manifest = json.loads((release / "manifest.json").read_text())
    files = {info["file"]: info["bytes"] for info in manifest["splits"].values()}
    files.update({rel: info["bytes"] for rel, info in manifest["files"].items()})
    files["manifest.json"] = (release / "manifest.json").stat().st_size
    return files


def listed(out: str) -> dict:
    return {m[1]: int(m[2].replace(",", "")) for m in re.finditer(r"^  (\S+)\s+([\d,]+) bytes\b", out, re.M)}


def corrupt(release: Path) -> None:
    path = release / split_file("other")
    data = bytearray(path.read_bytes())
    data[data.index(b"Passage")] = ord("p")
    path.write_bytes(bytes(data))


@pytest.fixture
def no_network(monkeypatch):
    """Any connection attempt, and any import of huggingface_hub, fails the test."""
    def refuse(*args, **kwargs):
        raise AssertionError("the dry run touched the network")

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(socket.socket, "connect", refuse)
    monkeypatch.setattr(socket, "create_connection", refuse)
    monkeypatch.setitem(sys.modules, "huggingface_hub", None)


def test_dry_run_lists_exactly_the_release_files_offline(release, no_network, capsys):
    assert main(["push", str(release), REPO, "--dry-run"]) == 0
    out = capsys.readouterr().out
    expected = manifest_files(release)
    assert listed(out) == {**expected, "total": sum(expected.values())}
    assert all((release / rel).stat().st_size == size for rel, size in expected.items())
    assert f"dataset repo {REPO}" in out and "nothing uploaded" in out and f"in {len(expected)} files" in out


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_corrupted_release_is_refused(release, no_network, capsys, dry_run):
    corrupt(release)
    assert main(["push", str(release), REPO] + (["--dry-run"] if dry_run else [])) == 1
    captured = capsys.readouterr()
    assert "refusing to push" in captured.err and split_file("other") in captured.err
    assert "advrace verify" in captured.err and captured.out == ""


def test_bad_repo_id_and_missing_release(release, tmp_path, capsys):
    assert main(["push", str(release), "advrace-test", "--dry-run"]) == 2
    assert "OWNER/NAME" in capsys.readouterr().err
    assert main(["push", str(tmp_path / "absent"), REPO, "--dry-run"]) == 2


def run_cli(args, **env):
    environ = {k: v for k, v in os.environ.items() if not k.startswith(("HF_", "HUGGING"))}
    return subprocess.run([sys.executable, "-m", "advrace", *args], capture_output=True, text=True, cwd=ROOT,
                          env={**environ, **env}, timeout=300)


@pytest.mark.parametrize("token", [{"HF_TOKEN": "hf_not_a_real_token"}, {}])
def test_offline_push_fails_with_what_to_do(release, tmp_path, token):
    """HF_HUB_OFFLINE=1 in a fresh process (huggingface_hub reads it on import): exit 4 and a
    message, no traceback, whether or not a token is set."""
    res = run_cli(["push", str(release), REPO], HF_HUB_OFFLINE="1", HF_HOME=str(tmp_path / "hf"), **token)
    assert res.returncode == 4, res.stderr
    assert "Traceback" not in res.stderr and res.stderr.count("\n") == 1
    assert f"cannot push to {REPO}" in res.stderr and "HF_HUB_OFFLINE" in res.stderr and "network" in res.stderr


class FakeApi:
    """Stands in for huggingface_hub.HfApi: records calls, or fails as the Hub would."""

    calls: list = []
    fail: BaseException | None = None
    private_repo = False

    def __init__(self, token=None):
        self.calls.append(("init", {"token": token}))

    def _call(self, name, **kwargs):
        self.calls.append((name, kwargs))
        if self.fail is not None:
            raise self.fail

    def create_repo(self, repo_id, **kwargs):
        self._call("create_repo", repo_id=repo_id, **kwargs)

    def repo_info(self, repo_id, **kwargs):
        return types.SimpleNamespace(private=self.private_repo)

    def create_branch(self, repo_id, **kwargs):
        self._call("create_branch", repo_id=repo_id, **kwargs)

    def upload_folder(self, **kwargs):
        self._call("upload_folder", **kwargs)
        return types.SimpleNamespace(commit_url=f"https://huggingface.co/datasets/{kwargs['repo_id']}/commit/abc")


@pytest.fixture
def fake_hub(monkeypatch):
    FakeApi.calls, FakeApi.fail, FakeApi.private_repo = [], None, False
    hub = types.ModuleType("huggingface_hub")
    hub.HfApi = FakeApi
    hub.get_token = lambda: "hf_cached"
    hub.constants = types.SimpleNamespace(HF_HUB_OFFLINE=False, ENDPOINT="https://huggingface.co")
    monkeypatch.setitem(sys.modules, "huggingface_hub", hub)
    return hub


def test_push_creates_the_repo_and_uploads_the_manifest_files(release, fake_hub, capsys):
    FakeApi.private_repo = True
    assert main(["push", str(release), REPO, "--branch", "v1", "--message", "first", "--private",
                 "--token", "hf_given"]) == 0
    assert "commit/abc" in capsys.readouterr().out
    calls = dict(FakeApi.calls)
    assert calls["init"] == {"token": "hf_given"}
    assert calls["create_repo"] == {"repo_id": REPO, "repo_type": "dataset", "private": True, "exist_ok": True}
    assert calls["create_branch"] == {"repo_id": REPO, "branch": "v1", "repo_type": "dataset", "exist_ok": True}
    upload = calls["upload_folder"]
    assert (upload["repo_id"], upload["repo_type"], upload["folder_path"]) == (REPO, "dataset", str(release))
    assert (upload["revision"], upload["commit_message"]) == ("v1", "first")
    assert sorted(upload["allow_patterns"]) == sorted(manifest_files(release))


def test_private_is_refused_for_an_existing_public_repo(release, fake_hub, capsys):
    assert main(["push", str(release), REPO, "--private"]) == 4
    assert "public" in capsys.readouterr().err
    assert "upload_folder" not in dict(FakeApi.calls)


class HubHTTPError(OSError):
    def __init__(self, status):
        super().__init__(f"{status} Client Error")
        self.response = types.SimpleNamespace(status_code=status)


@pytest.mark.parametrize("failure, hint", [
    (HubHTTPError(401), "hf auth login"), (HubHTTPError(403), "HF_TOKEN"),
    (ConnectionError("Name or service not known"), "check the network"),
    (TimeoutError("timed out"), "check the network")])
def test_hub_failures_say_what_to_do(release, fake_hub, capsys, failure, hint):
    FakeApi.fail = failure
    assert main(["push", str(release), REPO]) == 4
    err = capsys.readouterr().err
    assert f"cannot push to {REPO}" in err and hint in err
    assert "login" in explain(HubHTTPError(401), REPO) and "network" in explain(OSError("boom"), REPO)


def test_no_login_is_caught_before_any_call(release, fake_hub, capsys):
    fake_hub.get_token = lambda: None
    assert main(["push", str(release), REPO]) == 4
    err = capsys.readouterr().err
    assert "not logged in" in err and "hf auth login" in err and "HF_TOKEN" in err
    assert [name for name, _ in FakeApi.calls] == []


def test_the_plan_names_the_manifest_by_its_size_and_sha256(release):
    import hashlib

    from advrace.release.push import upload_plan

    plan = upload_plan(release, REPO)
    data = (release / "manifest.json").read_bytes()
    assert ("manifest.json", len(data)) in plan["files"]
    assert f"manifest sha256 {hashlib.sha256(data).hexdigest()[:16]}" in plan["message"]
