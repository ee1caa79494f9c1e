"""Building a release: run the attacks, then write the split files, SQuAD JSON, stats, card and
manifest into a hidden sibling folder that is renamed into place only when complete, so an
interrupted build leaves either the previous release or nothing."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from collections import Counter
from operator import attrgetter
from pathlib import Path

from advrace import __version__
from advrace.core.atomic import atomic_dir, check_replaceable
from advrace.core.config import SAMPLE_DIR, SAMPLE_PREFIX, ReleaseConfig
from advrace.core.environment import environment_record
from advrace.core.errors import ConfigError
from advrace.core.numbers import share_of
from advrace.core.numbers import significant_floats
from advrace.core.paths import MODEL, PATH, portable, setting_kind
from advrace.core.sampling import select
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.core.text import plural
from advrace.formats import LoadResult, get_format, load
from advrace.formats.base import race_level
from advrace.models.runtime.loading import checkpoint_name
from advrace.models.runtime.precision import HeldThreads, held_threads
from advrace.models.runtime.sharding import process_state
from advrace.release.audit import AuditContext, audit_split
from advrace.release.card import dataset_card
from advrace.release.licence import identify
from advrace.release.records import (FORMAT_VERSION, NO_ATTACK, dumps, in_split, split_file, split_records,
                                     squad_json, to_record)
from advrace.release.runner import ORIGINAL, SplitResult, check_splits, run_splits
from advrace.release.stats import split_stats
from advrace.release.verify import check_release
from advrace.resources import get_resources


# --------------------------------------------------------------------------- the manifest, portable


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
    if get_format(loaded.format).local:  # only the hub reads `split`; the source section says which was read
        config["data"].pop("split")
    config["data"]["format"] = loaded.format
    config["resources"] = {k: (Path(v).name if k.endswith(("_path", "_dir")) and isinstance(v, str) else v)
                           for k, v in config["resources"].items()}
    for split in config["splits"]:  # a checkpoint by its last two folder names, as its split records it
        split["config"] = {k: _portable_setting(v, setting_kind(k)) for k, v in split["config"].items()}
    return config


def _portable_setting(value, kind: str | None):
    if kind == MODEL:
        return portable(value, MODEL, checkpoint_name)
    if kind == PATH:
        return portable(value, PATH, lambda p: Path(p).name)
    return value


# --------------------------------------------------------------------------- writing


def _write(root: Path, rel: str, text: str) -> dict:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    data = text.encode("utf-8")
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    return {"sha256": hashlib.sha256(data).hexdigest(), "bytes": len(data)}


def _write_files(out: Path, cfg: ReleaseConfig, manifest: dict, splits: dict, split_examples: dict,
                 split_info: dict, stats: dict) -> None:
    """Split files, SQuAD JSON, stats, card and manifest, written atomically into `out`."""
    task = manifest["task"]
    stats = significant_floats(stats)  # every attack's summary too, third-party ones included
    with atomic_dir(out, "manifest.json", "release") as tmp:
        for split, records in splits.items():
            rel = split_file(split)
            digest = _write(tmp, rel, "".join(dumps(r) + "\n" for r in records))
            manifest["splits"][split] = {
                "file": rel, **split_info[split], "count": len(records),
                "perturbed": stats["splits"][split]["perturbed"], **digest}
        if task == EXTRACTIVE_QA:
            for split, exs in split_examples.items():
                squad = squad_json(exs)
                manifest["files"][f"squad/{split}.json"] = _write(tmp, f"squad/{split}.json", dumps(squad))
        manifest["files"]["stats.json"] = _write(tmp, "stats.json", json.dumps(stats, indent=2) + "\n")
        manifest["files"]["README.md"] = _write(tmp, "README.md", dataset_card(cfg, manifest, stats))
        _write(tmp, "manifest.json", json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")


# --------------------------------------------------------------------------- building


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
                           **identify(source.get("name", name), source.get("format", "examples"), first.task),
                           "fingerprint": fingerprint.hexdigest(), "files": 0, "read": count, "kept": count,
                           "skipped": []},
                "resources": {}, "environment": environment_record(), "splits": {}, "files": {}}
    splits, placed, info, stats = {}, {}, {}, {"splits": {}}
    for split, exs in split_examples.items():
        placed[split] = [in_split(ex, split) for ex in exs]
        splits[split] = [to_record(ex, split, NO_ATTACK, False) for ex in placed[split]]
        info[split] = {"attack": NO_ATTACK, "config": None, "seed": None}
        stats["splits"][split] = split_stats(exs, {ex.source_id: ex for ex in exs}, [False] * len(exs), Counter())
    _write_files(out, cfg, manifest, splits, placed, info, stats)
    return manifest


@dataclasses.dataclass(frozen=True)
class Decision:
    """What a derived release does with one question of a split (by `derive_release`): `record`
    (or a tuple of records) appended to its provenance and, unless `keep`, the question put back as its source split's
    question (unperturbed, `reason` in stats.json's `unperturbed_reasons`), or left out of the split
    when the release drops. `example`: a kept question's new form (people's edit of the machine's
    text, made with the example's own edit methods), which takes its place, `record` appended; the
    splits built from it then take it as their question, since they were made from the text it
    replaces."""

    record: object  # one provenance record, or a tuple of them
    keep: bool = True
    reason: str = ""
    example: object = None


WITH_SOURCE = "its source split's question was put back"


def _recorded(example, record):
    """The example with a decision's record (or tuple of records, in order) appended."""
    for r in record if isinstance(record, tuple) else (record,):
        example = example.with_provenance(r)
    return example


def derive_release(release_dir: str | Path, out_dir: str | Path, decisions: dict[str, dict[str, Decision]],
                   extra: dict, *, drop: bool = False, source_manifest: dict | None = None) -> dict:
    """A new release from an intact one, with `decisions` (by split, by record id) applied: a
    question not kept is put back as its source split's question (the split's `source` in the
    manifest, as the build's audit puts one back), or left out with `drop`. A split built from a
    split whose question was put back, left out or replaced (`Decision.example`) has that question
    put back (as the new source question) or left out too (`WITH_SOURCE`), since it was made from
    the text the decision refused. Every other split is
    rewritten from the source unchanged, and `extra` (`validation`, say) is added to the manifest
    and so to the card. The rewritten splits are audited again (where the source release was
    audited), so stats.json and the card describe the splits written; every split's sha256, stats
    and the card are made again, so `advrace verify` checks it as any release; the source's
    environment, source and configs are kept, since they made the bytes. `source_manifest`: what
    `check_release` returned for the source, where the caller has checked it already (it hashes
    every file)."""
    out, src = Path(out_dir), Path(release_dir)
    if out.resolve() == src.resolve():
        raise ConfigError(f"{out}: is the source release; write the new release to another --out")
    check_replaceable(out, "manifest.json", "release")
    source_manifest = source_manifest or check_release(src)
    stats = json.loads((src / "stats.json").read_text(encoding="utf-8"))
    manifest = {**source_manifest, "format_version": FORMAT_VERSION, "splits": {}, "files": {}, **extra}
    before: dict[str, dict] = {}  # the source release's questions by source id, of splits others are built from
    after: dict[str, dict] = {}  # the same in the new release
    undone: dict[str, set[str]] = {}  # the source ids each split put back or left out
    sources = {entry.get("source") or ORIGINAL for split, entry in source_manifest["splits"].items() if split != ORIGINAL}
    records, placed, info, ctx = {}, {}, {}, None
    for split, entry in source_manifest["splits"].items():
        info[split] = {k: v for k, v in entry.items() if k not in ("file", "count", "perturbed", "sha256", "bytes")}
        rows = list(split_records(src, split))
        source = entry.get("source") or ORIGINAL
        mine, inherited = decisions.get(split, {}), undone.get(source, set()) if split != ORIGINAL else set()
        undone[split] = set()
        if not mine and not inherited:
            records[split], placed[split] = [r for r, _ in rows], [ex for _, ex in rows]
            if source_manifest["format_version"] != FORMAT_VERSION:  # written again in this format
                records[split] = [to_record(ex, split, r["attack"], r["perturbed"]) for r, ex in rows]
        else:
            placed[split], flags, audit_sources, reasons = _decided(split, source, rows, mine, inherited, before, after,
                                                                    undone[split], drop=drop)
            records[split] = [to_record(ex, split, entry["attack"], flag) for ex, flag in zip(placed[split], flags)]
            old = stats["splits"][split]
            originals = after.get(ORIGINAL) or {ex.source_id: ex for _, ex in split_records(src, ORIGINAL)}
            stats["splits"][split] = {**old, **split_stats(placed[split], originals, flags,
                                                           Counter(old.get("unperturbed_reasons") or {}) + reasons)}
            if split in (stats.get("audit") or {}):
                ctx = ctx or AuditContext()
                audit = audit_split(entry["attack"], audit_sources, placed[split], ctx, entry.get("config")).counts()
                kept = {k: stats["audit"][split][k] for k in ("dropped",) if k in stats["audit"][split]}
                stats["audit"][split] = {**audit, **kept}
        if split in sources:
            before[split] = {ex.source_id: ex for _, ex in rows}
            after[split] = {ex.source_id: ex for ex in placed[split]}
    cfg = ReleaseConfig(name=source_manifest["name"], drop_flagged=bool(source_manifest["config"].get("drop_flagged")),
                        description=_card_description(src, source_manifest))
    _write_files(out, cfg, manifest, records, placed, info, stats)
    return manifest


def _decided(split: str, source: str, rows: list, mine: dict, inherited: set[str], before: dict, after: dict,
             undone: set[str], *, drop: bool) -> tuple[list, list[bool], list, Counter]:
    """One split's questions with its decisions (`mine`, by record id) applied, and with those
    whose source question was put back, left out or replaced (`inherited`, by source id) put back
    as the new source question (`after[source]`) or left out with `drop`: the split's examples,
    their perturbed flags, the source each is audited against (`before[source]`: the source split's
    questions as they were) and the count of each reason a question went back. The source ids
    this split put back, left out or replaced are added to `undone`."""
    exs, flags, audit_sources, reasons = [], [], [], Counter()
    for record, ex in rows:
        d, sid = mine.get(ex.id), ex.source_id
        if sid not in inherited and (d is None or d.keep):
            exs.append(ex if d is None else _recorded(_replacing(ex, d.example), d.record))
            flags.append(bool(record.get("perturbed")))
            audit_sources.append(before[source][sid] if split != ORIGINAL else ex)
            if d is not None and d.example is not None:
                undone.add(sid)
            continue
        undone.add(sid)
        if drop:
            continue
        back = after[source][sid]
        exs.append(in_split(back if d is None else _recorded(back, d.record), split))
        flags.append(False)
        audit_sources.append(back)
        reasons[d.reason if d is not None and not d.keep else WITH_SOURCE] += 1
    return [in_split(ex, split) for ex in exs], flags, audit_sources, reasons


def _replacing(example, new):
    """The example a decision keeps: its own, or `new` in its place (the same question)."""
    if new is None:
        return example
    if (new.id, new.source_id) != (example.id, example.source_id):
        raise ConfigError(f"a decision replaces {example.id} with {new.id} (source {new.source_id}); a replacement "
                          "keeps the question's id and source id")
    return new


def _card_description(release_dir: Path, manifest: dict) -> str:
    """The recipe's description as the source's card printed it: only when it did (the card leaves
    out a description of other data than the data read)."""
    text = (manifest["config"].get("description") or "").strip()
    return text if text and text in (release_dir / "README.md").read_text(encoding="utf-8") else ""


SOURCE_DROPPED = "source split flagged"


def _put_back(sources: list, res: SplitResult, why: dict[int, str]) -> SplitResult:
    """The split with the examples at `why`'s positions put back as their source, unperturbed,
    the audit's reason given."""
    return SplitResult(
        [sources[i] if i in why else ex for i, ex in enumerate(res.examples)],
        [False if i in why else p for i, p in enumerate(res.perturbed)],
        [f"audit: {why[i]}" if i in why else r for i, r in enumerate(res.reasons)])


def _audited(attack: str, sources: list, res: SplitResult, ctx: AuditContext, drop: bool,
             source_put_back: frozenset[int] = frozenset(), *,
             config: dict | None = None) -> tuple[SplitResult, dict, frozenset[int]]:
    """The split's audit by attack `attack` with its `config` (as `advrace audit` reads both
    from the manifest): its counts and, with `drop`, the split with each flagged example put back
    as its source (unperturbed, the audit's reason given), so every split keeps its questions;
    and the positions put back here or in a split this one was built from.

    Every split is attacked before any is audited, so where its source split put a question back
    (`source_put_back`), this split was made from the flagged question: it is put back too, to the
    kept question, else the release would ship the flagged text in a question that is no edit of
    its source's.
    """
    if source_put_back:
        res = _put_back(sources, res, dict.fromkeys(source_put_back, SOURCE_DROPPED))
    audit = audit_split(attack, sources, res.examples, ctx, config)
    counts = audit.counts()
    if not drop or not counts["flagged"]:
        return res, counts, source_put_back
    flagged = audit.flagged_indices
    return (_put_back(sources, res, flagged), {**counts, "dropped": len(flagged)},
            source_put_back | frozenset(flagged))


def _selected(cfg: ReleaseConfig, loaded: LoadResult) -> tuple[LoadResult, dict | None]:
    """The questions the release is built from: all read, the first `limit` (cut while reading),
    or a seeded sample of `sample` drawn from them, whole passages kept together and RACE's levels
    in their shares; and the manifest's record of which."""
    limit, n = cfg.data.limit, cfg.data.sample
    first = {"method": "first", "questions": limit} if limit is not None else None
    if n is None:
        return loaded, first
    available = len(loaded.examples)
    if n > available:
        raise ConfigError(f"--sample {n}: {loaded.source} has only {plural(available, 'question')}"
                          f"{' within the limit' if limit is not None else ''}; give at most {available}, "
                          "or drop --sample to use them all")
    chosen, drawn = select(loaded.examples, n, cfg.seed, key=attrgetter("passage_text"),
                           stratum=lambda ex: race_level(ex.id))
    selection = {"method": "sample", "questions": n, "seed": cfg.seed, "from": available,
                 "passages": drawn.passages, **({"by_level": drawn.by_stratum} if drawn.by_stratum else {}),
                 **({"after": first} if first else {})}
    return dataclasses.replace(loaded, examples=chosen), selection


def _process_state(cfg: ReleaseConfig, task: str):
    """Accelerate's process state when a model-based attack will run (its inference is sharded
    over the processes of `accelerate launch`), else None."""
    from advrace.attacks import get_attack  # deferred for start-up time: importing the attacks loads every attack module

    if not any(get_attack(spec.attack, task).batched for spec in cfg.splits):
        return None
    return process_state()


TOP_REASONS = 3


def attack_share_warnings(manifest: dict, stats: dict) -> list[str]:
    """One warning per attacked split whose attack changed fewer than half its questions: such a
    split is mostly copies of `original`, so its score says little of the attack (Jia and Liang
    attacked every SQuAD question). Each names the share and the commonest reasons the questions
    were left unchanged (stats.json's `unperturbed_reasons`). `original`, splits no attack made and
    probes (diagnosis, option_only: they ask how a model reads, not how robust it is) are exempt.
    The percent is rounded down, so a split under half never reads as 50%."""
    from advrace.attacks import attack_classes  # deferred for start-up time: importing the attacks loads every attack module

    probes = {cls.name for cls in attack_classes() if cls.probe}
    out = []
    for split, info in manifest["splits"].items():
        count, perturbed = info.get("count") or 0, info.get("perturbed") or 0
        if split == ORIGINAL or info.get("attack", NO_ATTACK) in (NO_ATTACK, *probes) or 2 * perturbed >= count:
            continue
        reasons = (stats.get("splits", {}).get(split) or {}).get("unperturbed_reasons") or {}
        top = sorted(reasons.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_REASONS]
        why = "; top reasons left unchanged: " + ", ".join(f"{r} ({n:,})" for r, n in top) if top else ""
        out.append(f"warning: {split} attacked {share_of(perturbed, count, 'questions')}{why}")
    return out


def build_release(cfg: ReleaseConfig, out_dir: str | Path, *, progress: bool = False,
                  loaded: LoadResult | None = None) -> dict:
    """Build a release directory from a config; returns the manifest. Every model of the build
    computes at one torch thread count, whatever the machine's load does meanwhile (a count fitted
    to the load could flip a beam's rank between two builds), recorded in the manifest."""
    with held_threads() as threads:
        return _build_release(cfg, out_dir, threads, progress=progress, loaded=loaded)


def _build_release(cfg: ReleaseConfig, out_dir: str | Path, threads: HeldThreads, *, progress: bool,
                   loaded: LoadResult | None) -> dict:
    out = Path(out_dir)
    _check_buildable(cfg, out)
    loaded, selection = _selected(cfg, loaded if loaded is not None else _read_data(cfg))
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
    if state is not None:  # a model will run: its count is chosen now, before any attack
        threads.hold()
    noted: dict = {}  # forked_model_fallbacks, for the manifest's environment record
    attacks, results = run_splits(cfg, examples, resources, workers=cfg.workers, progress=progress,
                                  state=state, record=noted)
    main = state is None or state.is_main_process
    ctx = AuditContext(resources) if cfg.audit and main else None
    put_back: dict[str, frozenset[int]] = {ORIGINAL: frozenset()}
    for spec, attack in zip(cfg.splits, attacks):
        split, res = spec.split, results[spec.split]
        sources = examples if spec.source == ORIGINAL else results[spec.source].examples
        split_info[split] = {**attack.describe(), "source": spec.source}
        if ctx is not None:
            # the split's own settings, as `advrace audit` reads them from the manifest
            res, stats.setdefault("audit", {})[split], put_back[split] = _audited(
                attack.name, sources, res, ctx, cfg.drop_flagged, put_back[spec.source],
                config=split_info[split]["config"])
            results[split] = res
        split_examples[split] = [in_split(ex, split) for ex in res.examples]
        splits[split] = [to_record(ex, split, attack.name, flag)
                         for ex, flag in zip(split_examples[split], res.perturbed)]
        stats["splits"][split] = _attacked_split_stats(attack, res, originals)

    versions = resources.versions({key for attack in attacks for key in attack.uses})
    manifest = _manifest(cfg, loaded, selection, task, versions, environment_record(threads.record(state)) | noted)
    if not main:
        return manifest  # under `accelerate launch`, the main process writes the release
    _write_files(out, cfg, manifest, splits, split_examples, split_info, stats)
    return manifest


def _check_buildable(cfg: ReleaseConfig, out: Path) -> None:
    """A config refused before any data is read: an --out that is not a release's, splits that
    do not resolve, drop_flagged without the audit."""
    check_replaceable(out, "manifest.json", "release")
    check_splits(cfg)
    if cfg.drop_flagged and not cfg.audit:
        raise ConfigError("drop_flagged needs the audit: remove `audit: false` from the config, "
                          "or drop_flagged")


def _read_data(cfg: ReleaseConfig) -> LoadResult:
    """The questions of the config's data (cut at `limit` while reading)."""
    if not cfg.data.path:
        raise ConfigError("no input data: give --data PATH or a config with data.path")
    return load(cfg.data.resolved_path(), cfg.data.format, lenient=cfg.data.lenient,
                limit=cfg.data.limit, part=cfg.data.part)


def _attacked_split_stats(attack, res: SplitResult, originals: dict) -> dict:
    """An attacked split's stats.json entry: its statistics against the source questions, the
    reasons its unperturbed questions were left alone, and the attack's own summary, if any."""
    reasons = Counter(r for r, flag in zip(res.reasons, res.perturbed) if not flag)
    stats = split_stats(res.examples, originals, res.perturbed, reasons)
    summary = attack.summarize(res.examples)
    if summary:
        stats["attack_stats"] = summary
    return stats


def _manifest(cfg: ReleaseConfig, loaded: LoadResult, selection: dict | None, task: str, versions: dict,
              environment: dict) -> dict:
    """manifest.json but its splits and files (filled as they are written): what was built, from
    which data (named without where it sat), with which resources and in which environment."""
    levels = loaded.levels
    return {
        "name": cfg.name,
        "advrace_version": __version__,
        "format_version": FORMAT_VERSION,
        "task": task,
        "seed": cfg.seed,
        "config": _portable_config(cfg, loaded),
        "source": {
            # a hub dataset by its whole name (`ehovy/race:all`), a local one without where it sat
            "name": (name := source_name(loaded.source) if get_format(loaded.format).local else loaded.source),
            "format": loaded.format,
            **identify(name, loaded.format, task, levels),  # what the data is, and its licence
            "fingerprint": loaded.fingerprint(),
            "files": len(loaded.files),
            "read": loaded.read,
            "kept": loaded.kept,
            "skipped": loaded.skipped,
            "split": loaded.part,
            "passages": loaded.passages,
            **({"levels": levels} if levels else {}),
            **({"selection": selection} if selection else {}),
        },
        "resources": dict(sorted(versions.items())),
        "environment": environment,
        "splits": {},
        "files": {},
    }
