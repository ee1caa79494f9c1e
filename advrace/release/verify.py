"""Verifying a release: re-hash every file against its manifest, and check each split file's
record count and ids."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from advrace.core.errors import ConfigError, VerifyError
from advrace.core.text import plural
from advrace.release.records import check_format, sha256_file


# What a copy of a release on the Hub carries besides the release: git's attributes file, and the
# download cache that huggingface_hub keeps in a local_dir. Neither can change what a split holds.
HUB_BOOKKEEPING = (".gitattributes",)
HUB_FOLDERS = (".git/", ".cache/huggingface/")


def load_manifest(release_dir: str | Path) -> dict:
    root = Path(release_dir)
    if not root.is_dir():
        raise ConfigError(f"{release_dir}: no such release folder" if not root.exists() else
                          f"{release_dir}: is a file; a release is a folder with manifest.json")
    path = root / "manifest.json"
    if not path.is_file():
        raise ConfigError(f"{release_dir}: no manifest.json; is this an advrace release? "
                          "(`advrace build ... --out DIR` writes one)")
    try:
        manifest = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise VerifyError(f"{path}: invalid JSON ({exc})") from None
    check_format(manifest, path)
    return manifest


def verify_release(release_dir: str | Path) -> list[str]:
    """Re-hash every file against the manifest; return the differences (empty when intact)."""
    return _verify(Path(release_dir))[1]


def _verify(root: Path) -> tuple[dict, list[str]]:
    manifest = load_manifest(root)
    problems = []
    splits = {info["file"]: info for info in manifest["splits"].values()}
    expected = {**splits, **manifest["files"]}
    for rel, info in sorted(expected.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
            continue
        digest, records = _read_split(path, info) if rel in splits else (sha256_file(path), [])
        if path.stat().st_size != info["bytes"] or digest != info["sha256"]:
            problems.append(f"{rel}: contents differ from the manifest (sha256 {info['sha256'][:16]}...)")
        else:
            problems += records
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if rel in HUB_BOOKKEEPING or rel.startswith(HUB_FOLDERS):
            continue
        if path.is_file() and rel != "manifest.json" and rel not in expected:
            problems.append(f"{rel}: not listed in the manifest")
    return manifest, problems + _validation_problems(manifest.get("validation"))


def _validation_problems(validation: dict | None) -> list[str]:
    """What a validated release's manifest must say of its study: the release it was made from and
    the annotations it rests on (`advrace verify --study` compares them with the database)."""
    if validation is None:
        return []
    source, study = validation.get("source_release") or {}, validation.get("study") or {}
    missing = [f"validation.source_release.{k}" for k in ("name", "manifest_sha256") if not source.get(k)]
    missing += [f"validation.study.{k}" for k in ("annotations_sha256", "annotators", "judgements") if not study.get(k)]
    return [f"manifest.json: a validated release, but it does not name {', '.join(missing)}"] if missing else []


def _read_split(path: Path, info: dict) -> tuple[str, list[str]]:
    """A split file's sha256 and, in the same pass, what a matching hash cannot catch in a split
    that was built wrong: its record count, and ids that repeat (one split written twice over)."""
    digest, problems, seen, lines = hashlib.sha256(), [], {}, 0
    with open(path, "rb") as f:
        for n, line in enumerate(f, start=1):
            digest.update(line)
            lines += 1
            try:
                rid = json.loads(line).get("id")
            except (ValueError, AttributeError):
                problems.append(f"{info['file']}: line {n} is not a JSON record")
                continue
            if rid in seen:
                problems.append(f"{info['file']}: id {rid!r} on line {n} repeats line {seen[rid]}")
            seen.setdefault(rid, n)
    if lines != info["count"]:
        problems.append(f"{info['file']}: {plural(lines, 'record')}, manifest says {info['count']:,}")
    more = [f"{info['file']}: {plural(len(problems) - 20, 'more problem')}"] if len(problems) > 20 else []
    return digest.hexdigest(), problems[:20] + more


def check_release(release_dir: str | Path) -> dict:
    """The manifest of an intact release; raises VerifyError listing what differs otherwise."""
    manifest, problems = _verify(Path(release_dir))
    if problems:
        raise VerifyError(f"{release_dir}: release does not match its manifest:\n  " + "\n  ".join(problems))
    return manifest
