"""Creating a study: a seeded sample of each split of a release, or every question its attack
changed (`all_changed`, the study `validate` turns into a validated release), annotator accounts,
and each annotator's queue with the splits interleaved (so nobody can tell which split an item is
from)."""

from __future__ import annotations

import hashlib
import re
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.seeding import seeded_rng
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.evaluation.report import split_kinds
from advrace.release import NO_ATTACK, check_release, read_split, split_records

from . import controls, mending, store

SUBSET_RE = re.compile(r"^(high|middle)\d")


def item_payload(example) -> dict:
    """What an annotator is shown (and what scoring needs), without split or attack; for a question
    given new distractors by DE or DG, how a judge may mend one (`mending.mend_kind`)."""
    if example.task == MULTIPLE_CHOICE:
        mend = mending.mend_kind(example)
        return {"passage": example.passage, "question": example.question,
                "options": list(example.options), "label": example.label, **({"mend": mend} if mend else {})}
    return {"title": example.title, "context": example.context, "question": example.question,
            "answers": [{"text": a.text, "answer_start": a.start} for a in example.answers]}


def sample_split(examples: list, n: int, seed: int, split: str) -> list:
    """`n` examples of a split (all when it has fewer), stratified by RACE's middle/high subsets
    (read from the id) so that a small sample keeps the split's mix."""
    strata: dict[str, list] = {}
    for ex in sorted(examples, key=lambda e: e.source_id):
        m = SUBSET_RE.match(ex.source_id)
        strata.setdefault(m.group(1) if m else "all", []).append(ex)
    rng = seeded_rng("advrace-human-eval", seed, split)
    if n >= len(examples):
        return sorted(examples, key=lambda e: e.source_id)
    chosen = []
    total = len(examples)
    shares = {k: n * len(v) / total for k, v in strata.items()}
    counts = {k: int(s) for k, s in shares.items()}
    for k in sorted(strata, key=lambda k: (-(shares[k] - counts[k]), k))[:n - sum(counts.values())]:
        counts[k] += 1
    for k in sorted(strata):
        chosen += rng.sample(strata[k], counts[k])
    return sorted(chosen, key=lambda e: e.source_id)


def default_splits(manifest: dict) -> tuple[list[str], list[str]]:
    """(splits a study takes by default, probe splits it leaves out). A probe tests how a model
    reads (option_only: no passage or question; diagnosis: the answer written into the passage)
    and poses no question for a person to validate. Probes are known by their attack in the
    manifest, as in the evaluation report, so a probe split under another name is known too."""
    probes = split_kinds(manifest, list(manifest["splits"]))[1]
    return [s for s in manifest["splits"] if s not in probes], probes


def changed_items(release_dir, split: str) -> list:
    """The examples of a split that its attack changed (`perturbed: true`), in file order."""
    return [ex for record, ex in split_records(release_dir, split) if record.get("perturbed")]


def uncovered_derived(manifest: dict, splits: list[str]) -> dict[str, str]:
    """The splits built (`from:`, directly or through others) from one of `splits` that `splits`
    leaves out, each with the studied split it comes from. Validating a split puts its invalid
    questions back, and with them the questions of every split built from them, whose other
    changes then go unjudged: a study of every changed question covers them too."""
    out: dict[str, str] = {}
    attacked = {s for s in splits if manifest["splits"].get(s, {}).get("attack", NO_ATTACK) != NO_ATTACK}
    for split, info in manifest["splits"].items():  # a split comes after the split it is built from
        source = info.get("source")
        root = source if source in attacked else out.get(source)
        if root and split not in splits:
            out[split] = root
    return out


def check_covers_derived(manifest: dict, splits: list[str], where) -> None:
    """Refuse a study of every changed question that leaves out a split built from a studied one."""
    missing = uncovered_derived(manifest, splits)
    if missing:
        built = ", ".join(f"{split} (from {root})" for split, root in missing.items())
        raise ConfigError(f"{where}: the splits {built} are built from a studied split, and validating it puts "
                          f"their questions back too; study them with it: --splits {','.join([*splits, *missing])}")


def assignment(item_ids: list[int], names: list[str], judgements: int, seed: int, *,
               apart: dict[int, str] | None = None, exclude: dict[int, set[str]] | None = None) -> dict[str, list[int]]:
    """Each annotator's queue. With as many judgements as annotators, everyone gets every item;
    with fewer, the items in a seeded order go round the annotators `judgements` at a time, so each
    item gets that many different annotators and everyone about the same number of items. Each
    queue is then shuffled by the annotator's own seeded order. `validate` recomputes it to check
    the database's queues.

    `apart` (item id -> the question it is a version of) keeps two versions of one question out of
    one queue: the option that DE and DG versions share is the gold, and one annotator seeing both
    deduces it. `exclude` (item id -> names) keeps an item from the people named (a verifier is
    never the sentence's editor). With either, each item goes to the `judgements` eligible
    annotators with the fewest items so far (ties by the seeded order); when fewer are eligible,
    a ConfigError says so."""
    if apart is None and exclude is None:
        mine = _round_robin(item_ids, names, judgements, seed)
    else:
        mine = _balanced(item_ids, names, judgements, seed, apart or {}, exclude or {})
    for name in names:
        seeded_rng("advrace-queue", seed, name).shuffle(mine[name])
    return mine


def _round_robin(item_ids, names, judgements, seed) -> dict[str, list[int]]:
    if judgements >= len(names):
        return {name: list(item_ids) for name in names}
    order = list(item_ids)
    seeded_rng("advrace-assign", seed).shuffle(order)
    mine = {name: [] for name in names}
    for p, iid in enumerate(order):
        for j in range(judgements):
            mine[names[(p * judgements + j) % len(names)]].append(iid)
    return {name: sorted(ids) for name, ids in mine.items()}


def _balanced(item_ids, names, judgements, seed, apart, exclude) -> dict[str, list[int]]:
    order = list(item_ids)
    seeded_rng("advrace-assign", seed).shuffle(order)
    # The most constrained items first, so that a feasible assignment is not spoilt by an early choice.
    sizes = {}
    for iid in order:
        sizes[apart.get(iid, iid)] = sizes.get(apart.get(iid, iid), 0) + 1
    order.sort(key=lambda iid: (-len(exclude.get(iid, ())) - sizes[apart.get(iid, iid)]))
    rng = seeded_rng("advrace-assign-ties", seed)
    mine = {name: [] for name in names}
    seen: dict[str, set] = {name: set() for name in names}
    for iid in order:
        group = apart.get(iid)
        eligible = [n for n in names if n not in exclude.get(iid, ()) and (group is None or group not in seen[n])]
        if len(eligible) < judgements:
            raise ConfigError(
                f"item {iid}: only {len(eligible)} of {plural(len(names), 'annotator')} may take it (not its "
                f"editors, and nobody who has another version of its question), fewer than the {judgements} "
                "judgements asked for; add annotators (--annotators) or ask for fewer judgements")
        ties = {n: rng.random() for n in names}
        eligible.sort(key=lambda n: (len(mine[n]), ties[n]))
        for n in eligible[:judgements]:
            mine[n].append(iid)
            if group is not None:
                seen[n].add(group)
    return {name: sorted(ids) for name, ids in mine.items()}


def study_queues(items: list[dict], names: list[str], meta: dict, control_pool: list[dict] | None = None
                 ) -> tuple[dict[str, list[int]], dict[str, list[str]]]:
    """Each annotator's queue, from the study's items (rows of `store.all_items`), annotators
    and meta alone, as `create` built it and `validate` checks it: the judge (or edit) items by
    `assignment` (two versions of one question apart when meta says `versions_apart`; a study
    made before that key existed by the old round robin), each baseline item to `judgements`
    annotators who have no version of its question, then control items, about `controls` of each
    queue, none the original of a question in it (`controls.choose_controls`); the whole queue in
    the annotator's seeded order. Returns (queues, each annotator's control record ids);
    `control_pool` (rows with record_id and source_id) draws the controls from it instead of
    the study's control items (`create`, before they exist)."""
    k, seed = meta["judgements"], meta["seed"]
    primary = [i for i in items if i["kind"] in store.PRIMARY_KINDS]
    apart = {i["id"]: i["source_id"] for i in primary} if meta.get("versions_apart") else None
    queues = assignment([i["id"] for i in primary], names, k, seed, apart=apart)
    baseline = [i for i in items if i["kind"] == store.BASELINE]
    pool = control_pool if control_pool is not None else [i for i in items if i["kind"] == store.CONTROL]
    if not baseline and not pool:
        return queues, {name: [] for name in names}
    source = {i["id"]: i["source_id"] for i in items}
    has = {name: {source[iid] for iid in queues[name]} for name in names}
    controls.check_baseline(baseline, has, names, k)
    extra = assignment([i["id"] for i in baseline], names, k, seed,
                       exclude={i["id"]: {n for n in names if i["source_id"] in has[n]} for i in baseline})
    for name in names:
        has[name] |= {source[iid] for iid in extra[name]}
    picked = controls.choose_controls({name: len(queues[name]) + len(extra[name]) for name in names}, has, pool,
                                      meta.get("controls") or 0, seed)
    control_ids = {i["record_id"]: i["id"] for i in items if i["kind"] == store.CONTROL}
    for name in names:
        mixed = sorted(queues[name] + extra[name] + [control_ids[r] for r in picked[name] if r in control_ids])
        seeded_rng("advrace-queue", seed, name).shuffle(mixed)
        queues[name] = mixed
    return queues, picked


def check_versions_apart(items: list[dict], names: list[str], judgements: int, where) -> None:
    """Refuse, saying what to do, a study in which two versions of one question cannot be kept
    out of one queue: each needs `judgements` annotators of its own."""
    versions: dict[str, list[str]] = {}
    for item in items:
        versions.setdefault(item["source_id"], []).append(item["split"])
    sid, splits = max(sorted(versions.items()), key=lambda kv: len(kv[1]))
    need = len(splits) * judgements
    if need > len(names):
        fewer = len(names) // len(splits)
        raise ConfigError(
            f"{where}: question {sid} has {len(splits)} versions in the study ({', '.join(splits)}), and two "
            "versions of one question never go to one annotator (what they share gives the gold away: in DE and "
            f"DG, the option both keep): with {plural(judgements, 'judgement')} each it needs {need} different "
            f"annotators, and the study has {len(names)}. Give --annotators {need} or more"
            + (f", or --judgements {fewer}" + (" or fewer" if fewer > 1 else "") if fewer else "")
            + ", or --same-annotator-versions to let one annotator judge several versions (the study records it)")


def create_study(release_dir, db_path, *, per_split: int = 50, seed: int = 0, annotators: int = 3,
                 splits=None, names=None, all_changed: bool = False, judgements: int | None = None,
                 same_annotator_versions: bool = False, controls_rate: float = 0.0, baseline_rate: float = 0.0,
                 min_accuracy: float | None = None) -> dict:
    """Write a new study database of `splits` (default: every split but the probes): a sample of
    `per_split` questions of each, or with `all_changed` every question the split's attack
    changed; each item judged by `judgements` of the annotators (default: all of them), never two
    versions of one question by one annotator unless `same_annotator_versions`. `controls_rate`
    mixes control questions into every queue and `baseline_rate` judges the originals of that
    share of the studied questions too (`controls`); `min_accuracy` is the control accuracy below
    which an annotator's votes do not count. Returns {"annotators": {name: token}, "items": n,
    "splits": [...], "left_out": [probe splits], "controls": n, "baseline": n, "min_accuracy": A}."""
    db_path = Path(db_path)
    if db_path.exists():
        raise ConfigError(f"{db_path} already exists; a study database is created once (choose another --db)")
    if per_split < 1 or annotators < 1:
        raise ConfigError("--per-split and --annotators must be at least 1")
    names = list(names or [f"annotator{i + 1}" for i in range(annotators)])
    judgements = len(names) if judgements is None else judgements
    if not 1 <= judgements <= len(names):
        raise ConfigError(f"--judgements {judgements}: each item is judged by at least 1 and at most "
                          f"--annotators ({len(names)}) annotators, none of them twice")
    min_accuracy = controls.check_rates(controls_rate, baseline_rate, min_accuracy)
    manifest = check_release(release_dir)
    chosen_splits, chosen, left_out = studied_questions(release_dir, manifest, splits, all_changed=all_changed,
                                                        per_split=per_split, seed=seed)
    rows = [{"split": split, "source_id": ex.source_id} for split in chosen_splits for ex in chosen[split]]
    if not same_annotator_versions:
        check_versions_apart(rows, names, judgements, release_dir)
    originals, source_split = {}, None
    if controls_rate or baseline_rate:
        source_split = controls.original_split(manifest, chosen_splits, release_dir)
        originals = {ex.source_id: ex for ex in read_split(release_dir, source_split)}
    meta = dict(release=str(Path(release_dir).resolve()), release_name=manifest["name"], task=manifest["task"],
                seed=seed, per_split=None if all_changed else per_split, splits=chosen_splits,
                all_changed=all_changed, judgements=judgements, annotators=names,
                manifest_sha256=release_id(release_dir), versions_apart=not same_annotator_versions,
                **{mending.SETTINGS_KEY: mending.split_settings(manifest, chosen_splits)})
    if controls_rate or baseline_rate:
        meta.update(controls=controls_rate, baseline=baseline_rate, min_accuracy=min_accuracy)
    with new_study(db_path, meta) as conn:
        for split in chosen_splits:
            for ex in chosen[split]:
                store.add_item(conn, split, ex.id, ex.source_id, ex.task, item_payload(ex))
        baseline = add_baseline(conn, [ex.source_id for exs in chosen.values() for ex in exs], originals,
                                source_split, baseline_rate, seed)
        n_controls = add_controls(conn, names, meta, source_split, originals, controls_rate)
        tokens = add_annotators(conn, names, meta)
    return {"annotators": tokens, "items": sum(len(exs) for exs in chosen.values()), "splits": chosen_splits,
            "left_out": left_out, "controls": n_controls, "baseline": len(baseline), "min_accuracy": min_accuracy}


def studied_questions(release_dir, manifest: dict, splits, *, all_changed: bool, per_split: int, seed: int
                      ) -> tuple[list[str], dict[str, list], list[str]]:
    """The splits a study judges (default: every split but the probes, returned as left out) and
    their questions: a seeded sample of `per_split` of each, or with `all_changed` every question
    its attack changed."""
    chosen_splits, left_out = (list(splits), []) if splits else default_splits(manifest)
    check_known_splits(manifest, chosen_splits, release_dir)
    if not chosen_splits:
        raise ConfigError(f"{release_dir}: only probe splits ({', '.join(left_out)}); name them with --splits "
                          "to study them anyway")
    if all_changed:
        check_covers_derived(manifest, chosen_splits, release_dir)
    chosen = {split: changed_items(release_dir, split) if all_changed
              else sample_split(read_split(release_dir, split), per_split, seed, split) for split in chosen_splits}
    if all_changed and not any(chosen.values()):
        raise ConfigError(f"{release_dir}: no changed items (perturbed: true) in {', '.join(chosen_splits)}; "
                          "name the attacked splits with --splits")
    return chosen_splits, chosen, left_out


def add_baseline(conn, studied_sources: list[str], originals: dict, source_split: str | None, rate: float,
                 seed: int) -> list[str]:
    """Baseline items: the originals of a seeded `rate` of the studied questions (`studied_sources`,
    their source ids), each with a control's payload and the mend its judge items offer. Returns
    their source ids."""
    baseline = controls.baseline_questions(studied_sources, rate, seed)
    judged = store.all_items(conn)
    for sid in baseline:
        ex = originals[sid]
        payload = controls.control_payload(item_payload(ex), ex, seed, False, mending.control_mend(judged, ex.id, seed))
        store.add_item(conn, source_split, ex.id, sid, ex.task, payload, kind=store.BASELINE)
    return baseline


@contextmanager
def new_study(db_path, meta: dict) -> Iterator[sqlite3.Connection]:
    """A new study database with its `meta`, filled in one transaction by the block; nothing is
    left behind if the block fails."""
    conn = store.connect(db_path)
    try:
        store.init(conn)
        with store.transaction(conn):
            store.set_meta(conn, **meta)
            yield conn
    except BaseException:
        conn.close()
        Path(db_path).unlink(missing_ok=True)
        raise
    conn.close()


def add_annotators(conn, names: list[str], meta: dict) -> dict[str, str]:
    """The annotator accounts, each with their queue of the study's items (`study_queues`);
    returns {name: token}."""
    queues, tokens = study_queues(store.all_items(conn), names, meta)[0], {}
    for name in names:
        person_id, tokens[name] = store.add_person(conn, name, store.ANNOTATOR)
        store.set_queue(conn, person_id, queues[name])
    return tokens


def add_controls(conn, names: list[str], meta: dict, split: str, originals: dict, rate: float) -> int:
    """Store the control items the annotators draw (`study_queues` over the original questions,
    each with a known answer), each once however many annotators draw it; returns how many."""
    if not rate:
        return 0
    items = store.all_items(conn)
    highlight = controls.wants_highlight(meta["task"], {i["kind"] for i in items if i["kind"] in store.PRIMARY_KINDS})
    pool = {}
    for sid, ex in sorted(originals.items()):
        payload = controls.control_payload(item_payload(ex), ex, meta["seed"], highlight,
                                           mending.control_mend(items, ex.id, meta["seed"]))
        if payload is not None:
            pool[ex.id] = (ex, payload)
    picked = study_queues(items, names, meta, [{"record_id": rid, "source_id": ex.source_id}
                                               for rid, (ex, _) in pool.items()])[1]
    drawn = sorted({rid for mine in picked.values() for rid in mine})
    for rid in drawn:
        ex, payload = pool[rid]
        store.add_item(conn, split, ex.id, ex.source_id, ex.task, payload, kind=store.CONTROL)
    return len(drawn)


def quality_item_problems(items: list[dict], release_dir, seed) -> list[str]:
    """How the study's control and baseline items differ from the release's original questions
    (a control's gold changed would change whom it excludes)."""
    problems, splits = [], {}
    for item in items:
        if item["kind"] not in (store.CONTROL, store.BASELINE):
            continue
        if item["split"] not in splits:
            try:
                splits[item["split"]] = {ex.id: ex for ex in read_split(release_dir, item["split"])}
            except ConfigError:
                splits[item["split"]] = {}
        ex = splits[item["split"]].get(item["record_id"])
        # a study created before controls offered mends has none (nor has a verify round's control)
        mend = mending.control_mend(items, item["record_id"], seed) if "mend" in item["payload"] else None
        expected = None if ex is None else controls.control_payload(
            item_payload(ex), ex, seed, item["kind"] == store.CONTROL and "highlight" in item["payload"], mend)
        if ex is None or ex.source_id != item["source_id"]:
            problems.append(f"{item['kind']} item {item['id']} ({item['record_id']}) is not a question of the release")
        elif item["payload"] != expected:
            problems.append(f"{item['kind']} item {item['id']} ({item['record_id']}): its text differs from the "
                            "release's")
    return problems


def check_known_splits(manifest: dict, splits: list[str], where) -> None:
    """Refuse splits the release does not have, named."""
    unknown = [s for s in splits if s not in manifest["splits"]]
    if unknown:
        raise ConfigError(f"{where}: no split(s) {', '.join(unknown)}")


def release_id(release_dir) -> str:
    """A release's identity: the sha256 of its manifest, which holds every file's sha256."""
    return hashlib.sha256((Path(release_dir) / "manifest.json").read_bytes()).hexdigest()


def add_authors(db_path, names) -> dict:
    """Author accounts (the database is created if missing); returns {name: token}."""
    conn = store.connect(db_path)
    store.init(conn)
    try:
        return {name: store.add_person(conn, name, store.AUTHOR)[1] for name in names}
    except sqlite3.IntegrityError:
        raise ConfigError(f"{db_path}: an account named {names} exists already; choose another --name") from None
    finally:
        conn.close()
