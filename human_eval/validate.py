"""A validated release: a study of every question the attacks of some splits changed (`human-eval
create --all-changed`) turned into a new release, as SWAG, Adversarial NLI and AdversarialQA
publish only what people validated.

Each judgement is a vote (`votes.vote`): valid only when the annotator chose the gold. Each
changed question takes the verdict of its votes (`votes.verdict`: the majority, a tie invalid).
A valid one stays, its votes appended to its provenance; an invalid one goes back to its source
split's question (unperturbed, the reason and votes in provenance), or out of the split with
`drop`, and with it the same question of every split built from it. The manifest records the
source release, the items' and annotations' sha256 and, per split, the valid rate (items) and
the correct rate (judgements) with their Wilson intervals and Fleiss' kappa of the vote.

Before anything is written the study is checked against the release and against itself
(`study_problems`), and `advrace verify --study` checks it again (`check_study_link`): what is
and is not detected is in docs/human-eval.md.
"""

from __future__ import annotations

import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from advrace.core.errors import ConfigError, VerifyError
from advrace.core.numbers import significant_floats
from advrace.core.provenance import INVALID, UNVALIDATED, VALID, Validated, Vote
from advrace.core.text import plural
from advrace.release import ORIGINAL, check_release, read_split
from advrace.release.build import WITH_SOURCE, Decision, derive_release

from . import controls, store
from .report import item_rates
from .study import (changed_items, check_covers_derived, item_payload, quality_item_problems, release_id,
                    study_queues)
from .votes import added_spans, verdict, vote

INVALID_REASON = "judged invalid by annotators"
UNJUDGED_REASON = "not judged: validated from an unfinished study (--partial)"
DECIDED_EARLY = "decided before all its judgements were in (--partial): the rest cannot change the majority"
PUT_BACK, DROPPED = "put_back", "dropped"


class TamperedStudy(VerifyError):
    """A study database that no longer holds what the app and `create` wrote."""


@dataclass
class Study:
    path: Path
    meta: dict
    items: list[dict]
    annotators: list
    queues: dict[int, list[int]]
    annotations: list[dict]

    @property
    def finished(self) -> set[str]:
        return {a["name"] for a in self.annotators if a["finished"]}

    def counted(self) -> list[dict]:
        """The judgements a validation rests on: those of annotators who pressed Finish (the app
        lets nobody else's answers be final)."""
        return [a for a in self.annotations if a["annotator"] in self.finished]

    @property
    def excluded(self) -> set[str]:
        """Annotators whose votes do not count: their accuracy on control items, over their
        counted answers, is below the study's `min_accuracy` (`controls`)."""
        return controls.excluded(self.meta, self.counted(), [a["name"] for a in self.annotators])

    def needed(self) -> dict[str, int]:
        """Each judge item's judgements that count, by record id: K, less those of the excluded
        annotators who had it (a verdict with excluded votes is over the votes that count)."""
        queues = {a["name"]: self.queues.get(a["id"], []) for a in self.annotators}
        left = controls.needed_judgements(self.items, queues, self.meta["judgements"], self.excluded)
        return {i["record_id"]: left[i["id"]] for i in self.items if i["kind"] in store.PRIMARY_KINDS}

    def annotations_sha256(self) -> str:
        return store.rows_sha256([store.answer_row(a) for a in self.counted()])

    def items_sha256(self) -> str:
        return store.items_sha256(self.items)


def read_study(db_path) -> Study:
    path = Path(db_path)
    if not path.is_file():
        raise ConfigError(f"{db_path}: no such study database; create one with "
                          "`advrace human-eval create RELEASE --all-changed --db ...`")
    try:
        conn = store.connect(path)
        try:
            return Study(path, store.meta(conn), store.all_items(conn), store.annotators(conn), store.queues(conn),
                         store.annotations(conn))
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{db_path}: not a study database ({exc}); give the database "
                          "`advrace human-eval create` wrote") from None


def study_problems(study: Study, release_dir, changed: dict | None = None) -> list[str]:
    """How the database differs from what `create` and the app wrote: items that are not the
    release's changed questions (missing, added, or with another text), and what
    `answer_problems` finds. `changed`: the studied splits' changed questions, where the caller
    has read them already."""
    meta, problems, changed = study.meta, [], changed or {}
    expected = {ex.id: item_payload(ex) for split in meta["splits"]
                for ex in (changed[split] if split in changed else changed_items(release_dir, split))}
    found = {item["record_id"]: item for item in study.items if item["kind"] in store.PRIMARY_KINDS}
    for rid in sorted(expected.keys() - found.keys()):
        problems.append(f"item {rid} is missing")
    for rid in sorted(found.keys() - expected.keys()):
        problems.append(f"item {rid} is not a changed question of the release's studied splits")
    for rid in sorted(expected.keys() & found.keys()):
        if found[rid]["payload"] != expected[rid]:
            problems.append(f"item {rid}: its text differs from the release's")
    return problems + quality_item_problems(study.items, release_dir, meta["seed"]) + answer_problems(study)


def answer_problems(study: Study) -> list[str]:
    """What the database alone shows of a tampered study: queues that are not the seeded
    assignment, answers outside an annotator's queue, and answers of a finished annotator that
    differ from what they had when they pressed Finish."""
    meta, problems = study.meta, []
    names = [a["name"] for a in study.annotators]
    if names != meta.get("annotators"):
        problems.append(f"the annotators are {names}, the study was created with {meta.get('annotators')}")
    else:
        try:
            queues = study_queues(study.items, names, meta)[0]
        except ConfigError as exc:
            queues, problems = {}, [*problems, f"its queues cannot be assigned again: {exc}"]
        for a in study.annotators:
            if queues and study.queues.get(a["id"], []) != queues[a["name"]]:
                problems.append(f"{a['name']}'s queue is not the one the study assigned")
    queued = {(a["name"], iid) for a in study.annotators for iid in study.queues.get(a["id"], [])}
    for a in study.annotations:
        if (a["annotator"], a["item_id"]) not in queued:
            problems.append(f"{a['annotator']} answered {a['record_id']}, which is not in their queue")
    for name in sorted(study.finished):
        recorded = meta.get(store.FINISHED_KEY + name)
        mine = store.rows_sha256([store.answer_row(a) for a in study.annotations if a["annotator"] == name])
        if recorded is None:
            problems.append(f"{name} is marked finished, but the app did not record their answers at Finish")
        elif recorded != mine:
            problems.append(f"{name}'s answers changed after they pressed Finish")
    return problems


def _tampered(db, problems: list[str]) -> TamperedStudy:
    return TamperedStudy(f"{db}: the study database no longer holds what the study recorded, so no release "
                         "can rest on it:\n  " + "\n  ".join(problems[:20])
                         + "\nRestore the database from a backup, or create a new study.")


def votes_by_item(study: Study, added: dict[str, list] | None = None) -> dict[str, tuple[Vote, ...]]:
    """Each item's counted judgements as votes (`votes.vote`; `added`: where each record's added
    sentences stand, to name a vote for a fake answer), by record id, in annotator order."""
    out: dict[str, list[Vote]] = {item["record_id"]: [] for item in study.items if item["kind"] in store.PRIMARY_KINDS}
    excluded = study.excluded
    for a in sorted(study.counted(), key=lambda a: a["annotator"]):
        if a["kind"] in store.PRIMARY_KINDS and a["annotator"] not in excluded:
            out[a["record_id"]].append(vote(a, (added or {}).get(a["record_id"], ())))
    return {rid: tuple(v) for rid, v in out.items()}


def check_study(study: Study, release_dir, manifest: dict, partial: bool, changed: dict | None = None,
                votes: dict | None = None) -> list[str]:
    """Refuse a study that cannot validate this release; returns the ids of the items with fewer
    judgements than the study asked for (allowed with `partial`)."""
    db, meta = study.path, study.meta
    if meta.get("manifest_sha256") != release_id(release_dir):
        raise ConfigError(
            f"{db}: the study was made from the release {meta.get('release_name')!r} (manifest sha256 "
            f"{str(meta.get('manifest_sha256'))[:16]}), not from {release_dir} ({manifest['name']!r}, manifest "
            f"sha256 {release_id(release_dir)[:16]}); validate it against the release it was made from")
    if not meta.get("all_changed"):
        raise ConfigError(f"{db}: a sampled study (--per-split) judges a sample, not every changed question; "
                          f"create one with `advrace human-eval create {release_dir} --all-changed --splits ...`")
    check_covers_derived(manifest, meta["splits"], db)
    problems = study_problems(study, release_dir, changed)
    if problems:
        raise _tampered(db, problems)
    k, needed = meta["judgements"], study.needed()
    unjudged = [rid for rid, mine in (votes if votes is not None else votes_by_item(study)).items()
                if len(mine) < needed[rid] or not needed[rid]]
    if unjudged and not partial:
        answered = Counter(a["annotator"] for a in study.annotations)
        queued = {a["name"]: len(study.queues.get(a["id"], [])) for a in study.annotators}
        waiting = [f"{a['name']} ({answered[a['name']]} of {queued[a['name']]} answered)"
                   for a in study.annotators if not a["finished"]]
        raise ConfigError(f"{db}: unfinished study: {len(unjudged)} of {plural(len(needed), 'item')} have fewer "
                          f"than {plural(k, 'judgement')} from annotators who pressed Finish (not finished: "
                          f"{', '.join(waiting)}); finish the study, or pass --partial to write the release with "
                          "the items whose votes so far decide their verdict validated and the others left as they "
                          "were, marked unvalidated" + _excluded_note(study))
    return unjudged


def _excluded_note(study: Study) -> str:
    out = sorted(study.excluded)
    return (f" (the votes of {', '.join(out)}, below {study.meta['min_accuracy']} accuracy on control questions, do "
            "not count: their items need others' judgements)" if out else "")


def validate_release(db_path, release_dir, out_dir, *, drop: bool = False, partial: bool = False) -> dict:
    """Write the validated release of `release_dir` to `out_dir` from a finished study (or, with
    `partial`, an unfinished one); returns its manifest's `validation`."""
    manifest = check_release(release_dir)
    study = read_study(db_path)
    studied = [split for split in manifest["splits"] if split in study.meta["splits"]]  # sources first
    changed = {split: changed_items(release_dir, split) for split in studied}
    votes = votes_by_item(study, {ex.id: added_spans(ex) for exs in changed.values() for ex in exs})
    short = check_study(study, release_dir, manifest, partial, changed, votes)
    k, needed = study.meta["judgements"], study.needed()
    decisions, undone, per_split = {}, {}, {}
    for split in studied:
        source = manifest["splits"][split].get("source") or ORIGINAL
        decisions[split], undone[split], counts = {}, set(), Counter()
        for ex in changed[split]:
            mine = votes[ex.id]
            said = verdict(mine, needed[ex.id])
            counts[said or UNVALIDATED] += ex.source_id not in undone.get(source, ())
            if ex.source_id in undone.get(source, ()):
                counts["with_source"] += 1
                d = Decision(Validated(said or UNVALIDATED, mine, WITH_SOURCE), keep=False,
                             reason=WITH_SOURCE)
            elif said is None:
                d = Decision(Validated(UNVALIDATED, mine, UNJUDGED_REASON))
            elif said == VALID:
                d = Decision(Validated(VALID, mine, DECIDED_EARLY if len(mine) < needed[ex.id] else None))
            else:
                d = Decision(Validated(INVALID, mine, INVALID_REASON), keep=False, reason=INVALID_REASON)
            decisions[split][ex.id] = d
            if not d.keep:
                undone[split].add(ex.source_id)
        per_split[split] = split_validation(changed[split], votes, counts, k, needed)
    validation = {
        "source_release": {"name": manifest["name"], "manifest_sha256": release_id(release_dir)},
        "study": {"items_sha256": study.items_sha256(), "annotations_sha256": study.annotations_sha256(),
                  "annotators": len(study.annotators), "judgements": k, "seed": study.meta["seed"],
                  "partial": bool(short), **_versions_apart(study.meta)},
        "invalid": DROPPED if drop else PUT_BACK,
        "splits": significant_floats(per_split),
    }
    excluded = controls.exclusion_record(study.meta, study.counted(), [a["name"] for a in study.annotators])
    if excluded:
        validation["controls"] = significant_floats(excluded)
    derive_release(release_dir, out_dir, decisions, {"validation": validation}, drop=drop, source_manifest=manifest)
    return validation


def _versions_apart(meta: dict) -> dict:
    """Whether two versions of one question were kept from one annotator (not said by a study
    made before advrace kept them apart)."""
    return {"versions_apart": meta["versions_apart"]} if "versions_apart" in meta else {}


def split_validation(examples: list, votes: dict, counts: Counter, k: int, needed: dict | None = None) -> dict:
    """One split's numbers (`report.item_rates`, the report's definitions), with how many of its
    changed questions were not yet judged and how many went back with their source split's
    (`needed`: each item's judgements that count, where annotators were excluded)."""
    return {"changed": len(examples), **item_rates([votes[ex.id] for ex in examples], k,
                                                   [needed[ex.id] for ex in examples] if needed else None),
            "unjudged": counts[UNVALIDATED], "with_source": counts["with_source"]}


def check_study_link(manifest: dict, db_path, release_dir) -> str:
    """That a validated release's manifest names its source release and matches the study
    database it was validated from: the study's own tamper checks run again (`answer_problems`),
    its items and annotations are those the release recorded, and every `validated` record's
    votes are the study's; returns a line saying so."""
    validation = manifest.get("validation")
    if not validation:
        raise ConfigError(f"{release_dir}: not a validated release (its manifest has no `validation`); "
                          "--study checks a release written by `advrace human-eval validate`")
    study = read_study(db_path)
    source = validation["source_release"]
    if study.meta.get("manifest_sha256") != source["manifest_sha256"]:
        raise VerifyError(f"{db_path}: this study was made from release {study.meta.get('release_name')!r} "
                          f"(manifest sha256 {str(study.meta.get('manifest_sha256'))[:16]}), but {release_dir} was "
                          f"validated from {source['name']!r} ({source['manifest_sha256'][:16]}); give the study it "
                          "was validated from")
    problems = answer_problems(study)
    items = validation["study"].get("items_sha256")
    if items is not None and items != study.items_sha256():
        problems.insert(0, f"its items (sha256 {study.items_sha256()[:16]}) are not those {release_dir} was "
                           f"validated from (sha256 {items[:16]})")
    if problems:
        raise _tampered(db_path, problems)
    digest = study.annotations_sha256()
    recorded = validation["study"]["annotations_sha256"]
    if digest != recorded:
        raise VerifyError(f"{db_path}: its annotations (sha256 {digest[:16]}) are not those {release_dir} was "
                          f"validated from (sha256 {recorded[:16]}): the database changed since, or is another "
                          "study of the same release")
    votes = votes_by_item(study)
    for split in validation["splits"]:
        for ex in read_split(release_dir, split):
            last = ex.provenance[-1] if ex.provenance else None
            if ex.id in votes and isinstance(last, Validated) and [(v.annotator, v.valid) for v in last.votes] != [
                    (v.annotator, v.valid) for v in votes.get(ex.id, ())]:
                raise VerifyError(f"{release_dir}: the votes of {ex.id} in its provenance are not the study's "
                                  f"({db_path}); the release was written from other judgements")
    return (f"{release_dir}: the study {db_path} is the one it was validated from (annotations sha256 "
            f"{digest[:16]}, release {source['name']!r}); its tamper checks pass"
            + ("" if items else "; its items are not checked (the manifest, written by an earlier advrace, "
                                "records no items_sha256)"))
