"""A validated release: a study of every question the attacks of some splits changed (`human-eval
create --all-changed`) turned into a new release, as SWAG, Adversarial NLI and AdversarialQA
publish only what people validated.

Each changed question takes the majority of its judgements ("one right answer?"; a tie is
invalid). A valid one stays, its votes appended to its provenance; an invalid one goes back to
its form in `original` (unperturbed, the reason and votes in provenance), or out of the split with
`drop`. The manifest records the source release, the annotations' sha256 and, per split, the
valid rate with its Wilson interval and Fleiss' kappa of the valid/invalid judgement.

Before anything is written the study is checked against the release and against itself
(`study_problems`): what is and is not detected is in docs/human-eval.md.
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
from advrace.release import ORIGINAL, check_release, read_split, split_records
from advrace.release.build import derive_release

from . import store
from .report import fleiss_kappa, wilson
from .study import assignment, changed_items, item_payload, release_id

INVALID_REASON = "judged invalid by annotators"
UNJUDGED_REASON = "not judged: validated from an unfinished study (--partial)"
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

    def annotations_sha256(self) -> str:
        return store.rows_sha256([store.answer_row(a) for a in self.counted()])


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


def study_problems(study: Study, release_dir) -> list[str]:
    """How the database differs from what `create` and the app wrote: items that are not the
    release's changed questions (missing, added, or with another text), queues that are not the
    seeded assignment, answers outside an annotator's queue, and answers of a finished annotator
    that differ from what they had when they pressed Finish."""
    meta, problems = study.meta, []
    expected = {ex.id: item_payload(ex) for split in meta["splits"] for ex in changed_items(release_dir, split)}
    found = {item["record_id"]: item for item in study.items}
    for rid in sorted(expected.keys() - found.keys()):
        problems.append(f"item {rid} is missing")
    for rid in sorted(found.keys() - expected.keys()):
        problems.append(f"item {rid} is not a changed question of the release's studied splits")
    for rid in sorted(expected.keys() & found.keys()):
        if found[rid]["payload"] != expected[rid]:
            problems.append(f"item {rid}: its text differs from the release's")
    names = [a["name"] for a in study.annotators]
    if names != meta.get("annotators"):
        problems.append(f"the annotators are {names}, the study was created with {meta.get('annotators')}")
    else:
        queues = assignment([item["id"] for item in study.items], names, meta["judgements"], meta["seed"])
        for a in study.annotators:
            if study.queues.get(a["id"], []) != queues[a["name"]]:
                problems.append(f"{a['name']}'s queue is not the one the study assigned")
    queued = {(a["name"], iid) for a in study.annotators for iid in study.queues.get(a["id"], [])}
    ids = {item["record_id"]: item["id"] for item in study.items}
    for a in study.annotations:
        if (a["annotator"], ids.get(a["record_id"])) not in queued:
            problems.append(f"{a['annotator']} answered {a['record_id']}, which is not in their queue")
    for name in sorted(study.finished):
        recorded = meta.get(store.FINISHED_KEY + name)
        mine = store.rows_sha256([store.answer_row(a) for a in study.annotations if a["annotator"] == name])
        if recorded is None:
            problems.append(f"{name} is marked finished, but the app did not record their answers at Finish")
        elif recorded != mine:
            problems.append(f"{name}'s answers changed after they pressed Finish")
    return problems


def votes_by_item(study: Study) -> dict[str, tuple[Vote, ...]]:
    """Each item's counted judgements, by record id, in annotator order."""
    out: dict[str, list[Vote]] = {item["record_id"]: [] for item in study.items}
    for a in sorted(study.counted(), key=lambda a: a["annotator"]):
        out[a["record_id"]].append(Vote(a["annotator"], not a["unanswerable"], a["reason"]))
    return {rid: tuple(v) for rid, v in out.items()}


def verdict(votes: tuple[Vote, ...]) -> str:
    """The majority of the votes; a tie is invalid (a question that half its judges could not answer
    is no benchmark item)."""
    return VALID if 2 * sum(v.valid for v in votes) > len(votes) else INVALID


def check_study(study: Study, release_dir, manifest: dict, partial: bool) -> list[str]:
    """Refuse a study that cannot validate this release; returns the ids of the items not yet
    judged (allowed with `partial`)."""
    db, meta = study.path, study.meta
    if meta.get("manifest_sha256") != release_id(release_dir):
        raise ConfigError(
            f"{db}: the study was made from the release {meta.get('release_name')!r} (manifest sha256 "
            f"{str(meta.get('manifest_sha256'))[:16]}), not from {release_dir} ({manifest['name']!r}, manifest "
            f"sha256 {release_id(release_dir)[:16]}); validate it against the release it was made from")
    if not meta.get("all_changed"):
        raise ConfigError(f"{db}: a sampled study (--per-split) judges a sample, not every changed question; "
                          f"create one with `advrace human-eval create {release_dir} --all-changed --splits ...`")
    problems = study_problems(study, release_dir)
    if problems:
        raise TamperedStudy(f"{db}: the study database no longer holds what the study recorded, so no release "
                            "can rest on it:\n  " + "\n  ".join(problems[:20])
                            + "\nRestore the database from a backup, or create a new study.")
    k = meta["judgements"]
    unjudged = [rid for rid, votes in votes_by_item(study).items() if len(votes) < k]
    if unjudged and not partial:
        answered = Counter(a["annotator"] for a in study.annotations)
        queued = {a["name"]: len(study.queues.get(a["id"], [])) for a in study.annotators}
        waiting = [f"{a['name']} ({answered[a['name']]} of {queued[a['name']]} answered)"
                   for a in study.annotators if not a["finished"]]
        raise ConfigError(f"{db}: unfinished study: {len(unjudged)} of {plural(len(study.items), 'item')} have fewer "
                          f"than {plural(k, 'judgement')} from annotators who pressed Finish (not finished: "
                          f"{', '.join(waiting)}); finish the study, or pass --partial to write the release with "
                          "those items left as they were and marked unvalidated")
    return unjudged


def validate_release(db_path, release_dir, out_dir, *, drop: bool = False, partial: bool = False) -> dict:
    """Write the validated release of `release_dir` to `out_dir` from a finished study; returns its
    manifest's `validation`."""
    manifest = check_release(release_dir)
    study = read_study(db_path)
    unjudged = set(check_study(study, release_dir, manifest, partial))
    votes = votes_by_item(study)
    originals = {ex.source_id: ex for ex in read_split(release_dir, ORIGINAL)}
    changed, per_split = {}, {}
    for split in study.meta["splits"]:
        flags = {}
        exs, kept_flags, verdicts = [], [], Counter()
        for record, ex in split_records(release_dir, split):
            flags[ex.id] = bool(record.get("perturbed"))
            if not flags[ex.id]:
                exs.append(ex)
                kept_flags.append(False)
                continue
            if ex.id in unjudged:
                verdicts[UNVALIDATED] += 1
                exs.append(ex.with_provenance(Validated(UNVALIDATED, votes[ex.id], UNJUDGED_REASON)))
                kept_flags.append(True)
            elif verdict(votes[ex.id]) == VALID:
                verdicts[VALID] += 1
                exs.append(ex.with_provenance(Validated(VALID, votes[ex.id])))
                kept_flags.append(True)
            else:
                verdicts[INVALID] += 1
                if not drop:
                    exs.append(originals[ex.source_id].with_provenance(Validated(INVALID, votes[ex.id], INVALID_REASON)))
                    kept_flags.append(False)
        changed[split] = (exs, kept_flags, Counter() if drop else Counter({INVALID_REASON: verdicts[INVALID]}))
        judged = verdicts[VALID] + verdicts[INVALID]
        ratings = [["valid" if v.valid else "invalid" for v in votes[rid]]
                   for rid, iv in flags.items() if iv and rid not in unjudged]
        per_split[split] = {"changed": sum(flags.values()), "judged": judged, "valid": verdicts[VALID],
                            "invalid": verdicts[INVALID], "unjudged": verdicts[UNVALIDATED],
                            "valid_rate": verdicts[VALID] / judged if judged else None,
                            "valid_ci": wilson(verdicts[VALID], judged), "fleiss_kappa": fleiss_kappa(ratings)}
    validation = {
        "source_release": {"name": manifest["name"], "manifest_sha256": release_id(release_dir)},
        "study": {"annotations_sha256": study.annotations_sha256(), "annotators": len(study.annotators),
                  "judgements": study.meta["judgements"], "seed": study.meta["seed"], "partial": bool(unjudged)},
        "invalid": DROPPED if drop else PUT_BACK,
        "splits": significant_floats(per_split),
    }
    derive_release(release_dir, out_dir, changed, {"validation": validation}, source_manifest=manifest)
    return validation


def check_study_link(manifest: dict, db_path, release_dir) -> str:
    """That a validated release's manifest names its source release and matches the study
    database it was validated from; returns a line saying so."""
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
    digest = study.annotations_sha256()
    recorded = validation["study"]["annotations_sha256"]
    if digest != recorded:
        raise VerifyError(f"{db_path}: its annotations (sha256 {digest[:16]}) are not those {release_dir} was "
                          f"validated from (sha256 {recorded[:16]}): the database changed since, or is another "
                          "study of the same release")
    return (f"{release_dir}: the study {db_path} is the one it was validated from "
            f"(annotations sha256 {digest[:16]}, release {source['name']!r})")
