"""Frozen releases: build, verify and export a directory of adversarial splits.

Layout (loadable with `datasets.load_dataset("json", data_dir=DIR)` and `load_dataset(DIR)`):

    DIR/data/<split>-00000-of-00001.jsonl   one file per split (the Hub's naming for named splits)
    DIR/squad/<split>.json                  SQuAD releases only: SQuAD v1.1 JSON per split
    DIR/stats.json                          lengths, words changed, unperturbed counts
    DIR/README.md                           the card
    DIR/manifest.json                       versions, fingerprints, configs, sha256 of every file

A release is built in a hidden sibling directory and renamed into place only when complete, so
an interrupted build leaves either the previous release or nothing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from pathlib import Path

from advrace import __version__
from advrace.core.atomic import atomic_dir, check_replaceable
from advrace.core.config import SAMPLE_DIR, SAMPLE_PREFIX, ReleaseConfig
from advrace.core.errors import ConfigError, VerifyError
from advrace.core.examples import MCExample, SpanExample, example_from_record
from advrace.formats import LoadResult, load
from advrace.resources import get_resources
from advrace.release.runner import ORIGINAL, check_splits, run_splits
from advrace.core.text import changed_words, count_words

FORMAT_VERSION = 1
NO_ATTACK = "none"


def split_file(split: str) -> str:
    return f"data/{split}-00000-of-00001.jsonl"


def dumps(obj) -> str:
    return json.dumps(obj, ensure_ascii=False, sort_keys=False)


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


# --------------------------------------------------------------------------- records


def in_split(example, split: str):
    """The example under its release-wide id `<split>/<source_id>`."""
    return dataclasses.replace(example, id=f"{split}/{example.source_id}")


def to_record(example, split: str, attack: str, perturbed: bool) -> dict:
    """A release record. Provenance is a JSON string so that every split has one schema, which
    `datasets` needs to load all splits of a release together."""
    rec = example.to_record()
    provenance = dumps(rec.pop("provenance"))
    return {"id": rec.pop("id"), "split": split, "attack": attack, "perturbed": perturbed,
            **rec, "provenance": provenance}


def from_record(record: dict):
    if isinstance(record.get("provenance"), str):
        record = {**record, "provenance": json.loads(record["provenance"])}
    return example_from_record(record)


def read_split(release_dir: str | Path, split: str) -> list:
    """The examples of one split of a release, in file order."""
    path = Path(release_dir) / split_file(split)
    if not path.is_file():
        raise ConfigError(f"{release_dir}: no split {split!r} (expected {path})")
    with open(path, encoding="utf-8") as f:
        return [from_record(json.loads(line)) for line in f if line.strip()]


def squad_json(examples: list[SpanExample]) -> dict:
    """SQuAD v1.1 JSON, grouping consecutive questions by title and context."""
    data: list[dict] = []
    for ex in examples:
        if not data or data[-1]["title"] != ex.title:
            data.append({"title": ex.title, "paragraphs": []})
        paragraphs = data[-1]["paragraphs"]
        if not paragraphs or paragraphs[-1]["context"] != ex.context:
            paragraphs.append({"context": ex.context, "qas": []})
        paragraphs[-1]["qas"].append({
            "id": ex.id, "question": ex.question,
            "answers": [{"text": a.text, "answer_start": a.start} for a in ex.answers]})
    return {"version": "1.1", "data": data}


# --------------------------------------------------------------------------- statistics


def _mean(values: list[float]) -> float:
    return round(sum(values) / len(values), 2) if values else 0.0


def split_stats(examples: list, originals: dict, perturbed: list[bool], reasons: Counter) -> dict:
    """AdvRACE Table 5 lengths, plus how much the attack changed relative to the original."""
    mc = bool(examples) and isinstance(examples[0], MCExample)
    body = "passage" if mc else "context"
    stats = {
        "count": len(examples),
        "perturbed": sum(perturbed),
        "unperturbed": len(examples) - sum(perturbed),
        "unperturbed_reasons": dict(sorted(reasons.items())),
        f"avg_{body}_words": _mean([count_words(getattr(e, body)) for e in examples]),
        "avg_question_words": _mean([count_words(e.question) for e in examples]),
    }
    if mc:
        stats["avg_option_words"] = _mean([count_words(o) for e in examples for o in e.options])
    else:
        stats["avg_answer_words"] = _mean([count_words(a.text) for e in examples for a in e.answers])
    changed = {"question": 0, body: 0}
    total = {"question": 0, body: 0}
    options_changed = 0
    for ex in examples:
        orig = originals[ex.source_id]
        for name in changed:
            before, after = getattr(orig, name), getattr(ex, name)
            total[name] += count_words(before)
            if before != after:
                changed[name] += changed_words(before, after)
        if mc and ex.options != orig.options:
            options_changed += 1
    all_total = sum(total.values())
    stats["words_changed"] = round(sum(changed.values()) / all_total, 4) if all_total else 0.0
    stats["words_changed_by_field"] = {k: round(changed[k] / total[k], 4) if total[k] else 0.0
                                       for k in changed}
    if mc:
        stats["examples_with_options_changed"] = options_changed
    return stats


# --------------------------------------------------------------------------- build


def _card(cfg: ReleaseConfig, manifest: dict, stats: dict) -> str:
    task = manifest["task"]
    lines = ["---", f"pretty_name: {cfg.name}", "configs:", "- config_name: default", "  data_files:"]
    for split, info in manifest["splits"].items():
        lines += [f"  - split: {split}", f"    path: {info['file']}"]
    lines += ["---", "", f"# {cfg.name}", ""]
    if cfg.description:
        lines += [cfg.description.strip(), ""]
    lines += [
        f"A frozen adversarial benchmark release for {'multiple-choice' if task == 'multiple_choice' else 'extractive'}"
        f" reading comprehension, built with advrace {manifest['advrace_version']} from "
        f"`{manifest['source']['name']}` ({manifest['source']['format']}, {manifest['source']['kept']} questions, "
        f"source fingerprint `{manifest['source']['fingerprint'][:16]}`).",
        "",
        "| split | attack | questions | perturbed | words changed | sha256 |",
        "|---|---|---:|---:|---:|---|",
    ]
    for split, info in manifest["splits"].items():
        s = stats["splits"][split]
        lines.append(f"| {split} | {info['attack']} | {info['count']} | {info['perturbed']} | "
                     f"{100 * s['words_changed']:.1f}% | `{info['sha256'][:16]}` |")
    dependent = [(split, info) for split, info in manifest["splits"].items() if "checkpoint_sha256" in info]
    if dependent:
        lines += [""]
        for split, info in dependent:
            kind = "model-dependent" if info.get("model_dependent") else "built with a model"
            sha, run = info.get("checkpoint_sha256"), info.get("inference")
            lines.append(f"- `{split}` is {kind}: made with the checkpoint `{info['config'].get('model', '')}`"
                         + (f" (sha256 `{sha[:16]}`)" if sha else "")
                         + (f", run in {run['precision']} on {run['device_type']} with torch {run['torch']}"
                            if run else "")
                         + "; its difficulty for other models is measured, not guaranteed.")
    lines += [
        "",
        "Load it with `datasets.load_dataset(\"json\", data_dir=\"<this folder>\")` or "
        "`datasets.load_dataset(\"<this folder>\")`; check it with `advrace verify <this folder>`.",
        "Every record keeps its `source_id` and a `provenance` list of what was changed and where.",
    ]
    if manifest["source"]["skipped"]:
        lines += ["", f"{len(manifest['source']['skipped'])} malformed source records were skipped "
                      "(`--lenient`); `manifest.json` lists them."]
    lines += ["", "Attacks follow AdvRACE (Si et al., Findings of ACL 2021) and Adversarial SQuAD "
                  "(Jia and Liang, EMNLP 2017). The source data keeps its own licence (RACE: "
                  "non-commercial research only).", ""]
    return "\n".join(lines)


def source_name(source: str) -> str:
    """A data set's name without where it sat: the folder or file name, or a hub name as given."""
    if source.startswith(str(SAMPLE_DIR)):
        return SAMPLE_PREFIX + Path(source).relative_to(SAMPLE_DIR).as_posix().split("/")[0]
    return Path(source.rstrip("/")).name or source


def _portable_config(cfg: ReleaseConfig, loaded: LoadResult) -> dict:
    """The config as it decides the release: the data by format (the source section names and
    fingerprints it), never by the path it was read from, so copies elsewhere build the same
    manifest."""
    config = cfg.to_dict()
    config["data"].pop("path")
    config["data"]["format"] = loaded.format
    config["resources"] = {k: (Path(v).name if k.endswith(("_path", "_dir")) and isinstance(v, str) else v)
                           for k, v in config["resources"].items()}
    return config


def _portable_attack(info: dict) -> dict:
    """A model-based split names its checkpoint by folder name and sha256, not by local path."""
    model = (info.get("config") or {}).get("model")
    if info.get("checkpoint_sha256") and isinstance(model, str) and Path(model).expanduser().is_dir():
        path = Path(model).expanduser().resolve()
        info = {**info, "config": {**info["config"], "model": "/".join(path.parts[-2:])}}
    return info


def _write(root: Path, rel: str, text: str) -> dict:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _process_state(cfg: ReleaseConfig, task: str):
    """Accelerate's process state when a model-based attack will run (its inference is sharded
    over the processes of `accelerate launch`), else None."""
    from advrace.attacks import get_attack

    if not any(get_attack(spec.attack, task).batched for spec in cfg.splits):
        return None
    from advrace.models.sharding import process_state

    return process_state()


def _write_files(out: Path, cfg: ReleaseConfig, manifest: dict, splits: dict, split_examples: dict,
                 split_info: dict, stats: dict) -> None:
    """Split files, SQuAD JSON, stats, card and manifest, written atomically into `out`."""
    task = manifest["task"]
    with atomic_dir(out, "manifest.json", "release") as tmp:
        for split, records in splits.items():
            rel = split_file(split)
            digest = _write(tmp, rel, "".join(dumps(r) + "\n" for r in records))
            manifest["splits"][split] = {
                "file": rel, **split_info[split], "count": len(records),
                "perturbed": stats["splits"][split]["perturbed"], **digest}
        if task == "extractive_qa":
            for split, exs in split_examples.items():
                squad = squad_json(exs)
                manifest["files"][f"squad/{split}.json"] = _write(tmp, f"squad/{split}.json", dumps(squad))
        manifest["files"]["stats.json"] = _write(tmp, "stats.json", json.dumps(stats, indent=2) + "\n")
        manifest["files"]["README.md"] = _write(tmp, "README.md", _card(cfg, manifest, stats))
        _write(tmp, "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


def write_release(split_examples: dict[str, list], out_dir: str | Path, *, name: str, source: dict,
                  description: str = "") -> dict:
    """A release of examples that no attack made (human-authored questions, say): every split
    as given, with its own manifest, stats and card, checkable with `advrace verify`."""
    out = Path(out_dir)
    check_replaceable(out, "manifest.json", "release")
    first = next((exs[0] for exs in split_examples.values() if exs), None)
    if first is None:
        raise ConfigError(f"{out}: nothing to write")
    cfg = ReleaseConfig(name=name, description=description)
    fingerprint = hashlib.sha256()
    for split, exs in split_examples.items():
        for ex in exs:
            fingerprint.update(dumps(ex.to_record()).encode("utf-8"))
    count = sum(len(v) for v in split_examples.values())
    manifest = {"name": name, "advrace_version": __version__, "format_version": FORMAT_VERSION,
                "task": first.task, "seed": None, "config": cfg.to_dict(),
                "source": {"name": source.get("name", name), "format": source.get("format", "examples"),
                           "fingerprint": fingerprint.hexdigest(), "files": 0, "read": count, "kept": count,
                           "skipped": []},
                "resources": {}, "splits": {}, "files": {}}
    splits, placed, info, stats = {}, {}, {}, {"splits": {}}
    for split, exs in split_examples.items():
        placed[split] = [in_split(ex, split) for ex in exs]
        splits[split] = [to_record(ex, split, NO_ATTACK, False) for ex in placed[split]]
        info[split] = {"attack": NO_ATTACK, "config": None, "seed": None}
        stats["splits"][split] = split_stats(exs, {ex.source_id: ex for ex in exs}, [False] * len(exs), Counter())
    _write_files(out, cfg, manifest, splits, placed, info, stats)
    return manifest


def build_release(cfg: ReleaseConfig, out_dir: str | Path, *, progress: bool = False,
                  loaded: LoadResult | None = None) -> dict:
    """Build a release directory from a config; returns the manifest."""
    out = Path(out_dir)
    check_replaceable(out, "manifest.json", "release")
    check_splits(cfg)
    if loaded is None:
        if not cfg.data.path:
            raise ConfigError("no input data: give --data PATH or a config with data.path")
        loaded = load(cfg.data.resolved_path(), cfg.data.format, lenient=cfg.data.lenient,
                      limit=cfg.data.limit, split=cfg.data.split)
    examples = loaded.examples
    if not examples:
        raise ConfigError(f"{loaded.source}: no usable examples to build a release from")
    task = examples[0].task
    originals = {ex.source_id: ex for ex in examples}

    split_examples = {ORIGINAL: [in_split(ex, ORIGINAL) for ex in examples]}
    splits: dict[str, list[dict]] = {ORIGINAL: [to_record(ex, ORIGINAL, NO_ATTACK, False)
                                                for ex in split_examples[ORIGINAL]]}
    split_info: dict[str, dict] = {ORIGINAL: {"attack": NO_ATTACK, "config": None, "seed": None}}
    stats = {"splits": {ORIGINAL: split_stats(examples, originals, [False] * len(examples), Counter())}}
    resources = get_resources(cfg.resources)
    state = _process_state(cfg, task)
    attacks, results = run_splits(cfg, examples, resources, workers=cfg.workers, progress=progress,
                                  state=state)
    for spec, attack in zip(cfg.splits, attacks):
        split, res = spec.split, results[spec.split]
        split_examples[split] = [in_split(ex, split) for ex in res.examples]
        splits[split] = [to_record(ex, split, attack.name, flag)
                         for ex, flag in zip(split_examples[split], res.perturbed)]
        split_info[split] = {**_portable_attack(attack.describe()), "source": spec.source}
        reasons = Counter(r for r, flag in zip(res.reasons, res.perturbed) if not flag)
        stats["splits"][split] = split_stats(res.examples, originals, res.perturbed, reasons)
        summary = attack.summarize(res.examples)
        if summary:
            stats["splits"][split]["attack_stats"] = summary

    versions = resources.versions()
    manifest = {
        "name": cfg.name,
        "advrace_version": __version__,
        "format_version": FORMAT_VERSION,
        "task": task,
        "seed": cfg.seed,
        "config": _portable_config(cfg, loaded),
        "source": {
            "name": source_name(loaded.source),
            "format": loaded.format,
            "fingerprint": loaded.fingerprint(),
            "files": len(loaded.files),
            "read": loaded.read,
            "kept": loaded.kept,
            "skipped": loaded.skipped,
        },
        "resources": {k: v for k, v in sorted(versions.items())
                      if any(k in attack.uses for attack in attacks)},
        "splits": {},
        "files": {},
    }

    if state is not None and not state.is_main_process:
        return manifest  # under `accelerate launch`, the main process writes the release
    _write_files(out, cfg, manifest, splits, split_examples, split_info, stats)
    return manifest


# --------------------------------------------------------------------------- verify / export


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
        return json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise VerifyError(f"{path}: invalid JSON ({exc})") from None


def verify_release(release_dir: str | Path) -> list[str]:
    """Re-hash every file against the manifest; return the differences (empty when intact)."""
    root = Path(release_dir)
    manifest = load_manifest(root)
    problems = []
    expected = {info["file"]: info for info in manifest["splits"].values()}
    expected.update(manifest["files"])
    for rel, info in sorted(expected.items()):
        path = root / rel
        if not path.is_file():
            problems.append(f"{rel}: missing")
        elif path.stat().st_size != info["bytes"] or sha256_file(path) != info["sha256"]:
            problems.append(f"{rel}: contents differ from the manifest (sha256 {info['sha256'][:16]}...)")
    for split, info in manifest["splits"].items():
        path = root / info["file"]
        if path.is_file() and not any(p.startswith(info["file"]) for p in problems):
            problems += _split_problems(path, info)
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root).as_posix()
        if path.is_file() and rel != "manifest.json" and rel not in expected:
            problems.append(f"{rel}: not listed in the manifest")
    return problems


def _split_problems(path: Path, info: dict) -> list[str]:
    """A split file whose hash matches can still be wrong if it was built wrong: its record count
    must match and every id must be unique (one split written twice over would repeat ids)."""
    problems, seen, lines = [], {}, 0
    with open(path, encoding="utf-8") as f:
        for n, line in enumerate(f, start=1):
            lines += 1
            try:
                rid = json.loads(line).get("id")
            except (json.JSONDecodeError, AttributeError):
                problems.append(f"{info['file']}: line {n} is not a JSON record")
                continue
            if rid in seen:
                problems.append(f"{info['file']}: id {rid!r} on line {n} repeats line {seen[rid]}")
            seen.setdefault(rid, n)
    if lines != info["count"]:
        problems.append(f"{info['file']}: {lines} records, manifest says {info['count']}")
    return problems[:20] + ([f"{info['file']}: {len(problems) - 20} more problems"] if len(problems) > 20 else [])


def check_release(release_dir: str | Path) -> dict:
    problems = verify_release(release_dir)
    if problems:
        raise VerifyError(f"{release_dir}: release does not match its manifest:\n  " + "\n  ".join(problems))
    return load_manifest(release_dir)


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
    if manifest["task"] != "multiple_choice":
        raise ConfigError(f"{release_dir}: the AdvRACE format holds multiple-choice releases only")
    names = splits or list(manifest["splits"])
    unknown = [s for s in names if s not in manifest["splits"]]
    if unknown:
        raise ConfigError(f"{release_dir}: no split(s) {', '.join(unknown)}; "
                          f"available: {', '.join(manifest['splits'])}")
    out = Path(out)
    targets = [out] if len(names) == 1 else [out / f"{s}.json" for s in names]
    _check_export_target(out, names)
    for split, target in zip(names, targets):
        data = {ex.source_id: {"context": ex.passage, "question": ex.question,
                               "options": list(ex.options), "label": ex.label}
                for ex in read_split(release_dir, split)}
        tmp = target.with_name(f".{target.name}.tmp")
        try:
            target.parent.mkdir(parents=True, exist_ok=True)
            tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1) + "\n", encoding="utf-8")
            os.replace(tmp, target)
        except OSError as exc:
            raise ConfigError(f"cannot write {target}: {exc.strerror or exc}") from None
    return targets
