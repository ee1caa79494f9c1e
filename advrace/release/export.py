"""Export to the AdvRACE release's own format, to compare results with the published sets."""

from __future__ import annotations

import json
import os
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.release.records import read_split
from advrace.release.verify import check_release


def advrace_record(ex) -> dict:
    """One question as the AdvRACE release files hold it, keyed there by its RACE id."""
    return {"context": ex.passage, "question": ex.question, "options": list(ex.options), "label": ex.label}


def selected_splits(release_dir, manifest: dict, splits: list[str] | None) -> list[str]:
    """The splits asked for (all of the release's by default; each once), each checked to be in it."""
    names = list(dict.fromkeys(splits or manifest["splits"]))
    unknown = [s for s in names if s not in manifest["splits"]]
    if unknown:
        raise ConfigError(f"{release_dir}: no split(s) {', '.join(unknown)}; "
                          f"available: {', '.join(manifest['splits'])}")
    return names


def _check_export_target(out: Path, names: list[str]) -> None:
    """Refuse, before writing anything, an --out that cannot take what was asked for."""
    several = len(names) > 1
    if several and out.suffix.lower() == ".json":
        raise ConfigError(f"--out {out} names one file, but {len(names)} splits were asked for "
                          f"({', '.join(names)}); give --split NAME for one split's file, or a folder "
                          "name for a <split>.json per split")
    if several and out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is an existing file; several splits are written into a folder "
                          "of <split>.json files: give a folder name, or --split NAME for one file")
    if not several and out.is_dir():
        raise ConfigError(f"--out {out} is a folder; one split is written to a file: give a file name "
                          f"such as {out / (names[0] + '.json')}")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--out {out}: {parent} is a file, not a folder")
            break


def export_advrace(release_dir: str | Path, out: str | Path, splits: list[str] | None = None) -> list[Path]:
    """AdvRACE's release format: one JSON dict `race_id -> {context, question, options, label}` per split.

    With one split, `out` is the file; with several, a folder of `<split>.json` files.
    """
    manifest = check_release(release_dir)
    if manifest["task"] != MULTIPLE_CHOICE:
        raise ConfigError(f"{release_dir}: the AdvRACE format holds multiple-choice releases only")
    names = selected_splits(release_dir, manifest, splits)
    out = Path(out)
    targets = [out] if len(names) == 1 else [out / f"{s}.json" for s in names]
    _check_export_target(out, names)
    for split, target in zip(names, targets):
        data = {ex.source_id: advrace_record(ex) for ex in read_split(release_dir, split)}
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return targets
