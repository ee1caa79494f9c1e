"""A validated release: a study of every question the attacks of some splits changed (`human-eval
create --all-changed`) turned into a new release, as SWAG, Adversarial NLI and AdversarialQA
publish only what people validated.

Each judgement is a vote (`votes.vote`): valid only when the annotator chose the gold. Each
changed question takes the verdict of its votes (`votes.verdict`: the majority, a tie invalid).
A valid one stays, its votes appended to its provenance; an invalid one keeps an approved mend
(a judge's own distractor), else goes back to its source split's question (unperturbed, the
reason and votes in provenance), or out of the split with `drop`, and with it the same question
of every split built from it. In an edit study every studied split's question takes an approved
edit of its pool instead (`selection`), else goes back. A rewrite is approved by a strict majority
of its verifiers' `verifying.verifier_vote` (`verifying.approvals`); edits and mends never sent to
verify, and verify items whose verifiers were all excluded, are refused, or left undecided with
--partial. Provenance keeps every edit and mend offered with its verifications. The manifest
records the source release, the items', annotations' and candidates' sha256 and, per split, the
valid rate (items) and the correct rate (judgements) with their Wilson intervals and Fleiss' kappa
of the vote, the share attacked after people, the share mended and the approval rate (over the
candidates with all their verifications in).

Before anything is written the study is checked against the release and against itself
(`study_problems`), and `advrace verify --study` checks it again (`check_study_link`): what is
and is not detected is in docs/human-eval.md.
"""

from __future__ import annotations

import dataclasses
import json
import sqlite3
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from advrace.core.errors import ConfigError, VerifyError
from advrace.core.numbers import significant_floats
from advrace.core.provenance import INVALID, UNVALIDATED, VALID, PeopleEdited, Validated, Vote
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.core.text import plural
from advrace.release import ORIGINAL, check_release, read_split
from advrace.release.build import WITH_SOURCE, Decision, attack_share_warnings, derive_release

from . import controls, selection, store, verifying
from .report import fleiss_kappa, item_rates, wilson
from .store import FINISHED_CANDIDATES_KEY
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
    candidates: list[dict] = dataclasses.field(default_factory=list)

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

    def needed(self, excluded=None) -> dict[str, int]:
        """Each judge item's judgements that count, by record id: K, less those of the excluded
        annotators who had it (a verdict with excluded votes is over the votes that count).
        `excluded`: those annotators (default: `self.excluded`)."""
        queues = {a["name"]: self.queues.get(a["id"], []) for a in self.annotators}
        left = controls.needed_judgements(self.items, queues, self.meta.get("judgements") or 0,
                                          self.excluded if excluded is None else set(excluded))
        return {i["record_id"]: left[i["id"]] for i in self.items if i["kind"] == store.JUDGE}

    def annotations_sha256(self) -> str:
        return store.rows_sha256([store.answer_row(a) for a in self.counted()])

    def items_sha256(self) -> str:
        return store.items_sha256(self.items)

    def candidates_sha256(self) -> str:
        return store.candidates_sha256([store.candidate_row(c) for c in self.candidates])

    def kinds(self) -> set[str]:
        return {item["kind"] for item in self.items}

    def expected(self, excluded=frozenset()) -> dict[int, int]:
        """How many answers each item is to get: the annotators whose queue holds it, less the
        excluded."""
        names = {a["id"]: a["name"] for a in self.annotators}
        out: dict[int, int] = {}
        for person, ids in self.queues.items():
            if names.get(person) not in excluded:
                for iid in ids:
                    out[iid] = out.get(iid, 0) + 1
        return out


def read_study(db_path) -> Study:
    path = Path(db_path)
    if not path.is_file():
        raise ConfigError(f"{db_path}: no such study database; create one with "
                          "`advrace human-eval create RELEASE --all-changed --db ...`")
    try:
        conn = store.connect(path)
        try:
            return Study(path, store.meta(conn), store.all_items(conn), store.annotators(conn), store.queues(conn),
                         store.annotations(conn), store.candidates(conn))
        finally:
            conn.close()
    except sqlite3.DatabaseError as exc:
        raise ConfigError(f"{db_path}: not a study database ({exc}); give the database "
                          "`advrace human-eval create` wrote") from None


def study_problems(study: Study, release_dir, changed: dict | None = None) -> list[str]:
    """How the database differs from what `create` and the app wrote: judge and edit items that
    are not the release's changed questions (missing, added, or with another text), verify items
    whose candidate is of another question, and what `answer_problems` finds. `changed`: the
    studied splits' changed questions, where the caller has read them already. An edit study makes
    one edit item per distinct machine sentence of a question, so a changed question of a pooled
    split (`selection.POOLED`) may have none where another split's edit item shows its sentence."""
    meta, problems, changed = study.meta, [], changed or {}
    examples = {ex.id: ex for split in meta["splits"]
                for ex in (changed[split] if split in changed else changed_items(release_dir, split))}
    found = {item["record_id"]: item for item in study.items if item["kind"] in store.PRIMARY_KINDS}
    shown = {(item["source_id"], selection.machine_text(item)) for item in found.values() if item["kind"] == store.EDIT}
    for rid in sorted(examples.keys() - found.keys()):
        ex = examples[rid]
        if not (shown and any((ex.source_id, ex.passage_text[s:e]) in shown for s, e in added_spans(ex))):
            problems.append(f"item {rid} is missing")
    for rid in sorted(found.keys() - examples.keys()):
        problems.append(f"item {rid} is not a changed question of the release's studied splits")
    for rid in sorted(examples.keys() & found.keys()):
        expected, payload = item_payload(examples[rid]), found[rid]["payload"]
        if "mend" not in payload:  # a study created before mending existed offers none
            expected.pop("mend", None)
        if {k: payload.get(k) for k in expected} != expected:
            problems.append(f"item {rid}: its text differs from the release's")
    candidates, by_id = {c["id"]: c for c in study.candidates}, {i["id"]: i for i in study.items}
    for item in study.items:
        if item["kind"] == store.VERIFY:
            c = candidates.get(item["candidate_id"])
            if c is None or c["source_id"] != item["source_id"]:
                problems.append(f"verify item {item['id']} ({item['record_id']}) holds candidate {item['candidate_id']}, "
                                "which is no candidate of its question")
            elif item["payload"] != verifying.verify_payload(by_id[c["item_id"]], c):
                problems.append(f"verify item {item['id']} ({item['record_id']}) does not show what its candidate "
                                "makes of the question (its text, or the gold answers it is scored against)")
    return problems + quality_item_problems(study.items, release_dir, meta["seed"]) + answer_problems(study)


def answer_problems(study: Study) -> list[str]:
    """What the database alone shows of a tampered study: queues that are not the seeded
    assignment (`study.study_queues`; not for edit and verify studies, whose queues their steps
    build), answers outside an annotator's queue, a verifier who edited the question they verify,
    and answers of a finished annotator that differ from what they had when they pressed Finish."""
    meta, problems = study.meta, []
    names = [a["name"] for a in study.annotators]
    if study.kinds() & {store.EDIT, store.VERIFY}:
        pass  # the edit and verify steps build these queues (checked by answers, editors and Finish)
    elif names != meta.get("annotators"):
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
    for c in study.candidates:
        if (c["annotator"], c["item_id"]) not in queued:
            problems.append(f"{c['annotator']} rewrote {c['record_id']}, which is not in their queue")
    editors = {(c["source_id"], c["annotator"]) for c in study.candidates if c["item_kind"] == store.EDIT}
    for a in study.annotations:
        if a["kind"] == store.VERIFY and (a["source_id"], a["annotator"]) in editors:
            problems.append(f"{a['annotator']} verified an edit of {a['source_id']}, a question they edited")
    for name in sorted(study.finished):
        recorded = meta.get(store.FINISHED_KEY + name)
        mine = store.rows_sha256([store.answer_row(a) for a in study.annotations if a["annotator"] == name])
        if recorded is None:
            problems.append(f"{name} is marked finished, but the app did not record their answers at Finish")
        elif recorded != mine:
            problems.append(f"{name}'s answers changed after they pressed Finish")
        made = meta.get(FINISHED_CANDIDATES_KEY + name)
        if made is not None and made != store.candidates_sha256(
                [store.candidate_row(c) for c in study.candidates if c["annotator"] == name]):
            problems.append(f"{name}'s edits or mends changed after they pressed Finish")
    return problems


def _tampered(db, problems: list[str]) -> TamperedStudy:
    return TamperedStudy(f"{db}: the study database no longer holds what the study recorded, so no release "
                         "can rest on it:\n  " + "\n  ".join(problems[:20])
                         + "\nRestore the database from a backup, or create a new study.")


def votes_by_item(study: Study, added: dict[str, list] | None = None,
                  excluded=None) -> dict[str, tuple[Vote, ...]]:
    """Each judge item's counted judgements (not those of `excluded` annotators, default
    `study.excluded`: below the control accuracy) as votes (`votes.vote`; `added`: where each
    record's added sentences stand, to name a vote for a fake answer), by record id, in annotator
    order."""
    excluded = study.excluded if excluded is None else excluded
    out: dict[str, list[Vote]] = {item["record_id"]: [] for item in study.items if item["kind"] == store.JUDGE}
    for a in sorted(study.counted(), key=lambda a: a["annotator"]):
        if a["kind"] == store.JUDGE and a["annotator"] not in excluded:
            out[a["record_id"]].append(vote(a, (added or {}).get(a["record_id"], ())))
    return {rid: tuple(v) for rid, v in out.items()}


def short_items(study: Study, votes: dict, excluded=frozenset()) -> list[int]:
    """The ids of the items with fewer answers than they are to get: a judge item's judgements
    that count (`Study.needed`; none left counts as short: it needs others' judgements), an edit
    item's edits and a verify item's verifications from the annotators (not excluded) queued for
    them (a verify item with no such verifier is short too: it needs others' verifications); only
    annotators who pressed Finish count. Control and baseline items never change the
    release."""
    expected, finished = study.expected(excluded), study.finished - set(excluded)
    needed = study.needed(excluded)
    judged = [item["id"] for item in study.items if item["kind"] == store.JUDGE
              and (len(votes.get(item["record_id"], ())) < needed[item["record_id"]] or not needed[item["record_id"]])]
    got: Counter = Counter()
    for a in study.annotations:
        if a["annotator"] in finished:
            got[a["item_id"]] += 1
    for c in study.candidates:
        if c["item_kind"] == store.EDIT and c["annotator"] in finished:
            got[c["item_id"]] += 1
    return judged + [item["id"] for item in study.items if item["kind"] in (store.EDIT, store.VERIFY)
                     and (got[item["id"]] < expected.get(item["id"], 0)
                          or (item["kind"] == store.VERIFY and not expected.get(item["id"], 0)))]


def unverified(study: Study, excluded=frozenset()) -> list[dict]:
    """The finished, counted annotators' edits and mends that have no verify item
    (`verifying.to_verify`: not a mend that replaced the gold, never verified)."""
    conn = store.connect(study.path)
    try:
        todo = verifying.to_verify(conn)
    finally:
        conn.close()
    keep = study.finished - set(excluded)
    return [c for c in todo if c["annotator"] in keep]


def check_study(study: Study, release_dir, manifest: dict, partial: bool, changed: dict | None = None,
                votes: dict | None = None, excluded=None) -> list[int]:
    """Refuse a study that cannot validate this release; returns the ids of the items with fewer
    answers than the study asked for (allowed with `partial`). `excluded`: annotators whose
    answers do not count (default `study.excluded`)."""
    db, meta = study.path, study.meta
    excluded = study.excluded if excluded is None else excluded
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
    unjudged = short_items(study, votes if votes is not None else votes_by_item(study, excluded=excluded), excluded)
    if unjudged and not partial:
        answered = Counter(a["annotator"] for a in study.annotations)
        queued = {a["name"]: len(study.queues.get(a["id"], [])) for a in study.annotators}
        waiting = [f"{a['name']} ({answered[a['name']]} of {queued[a['name']]} answered)"
                   for a in study.annotators if not a["finished"] and a["name"] not in excluded]
        asked = (f"than {plural(meta['judgements'], 'judgement')}" if study.kinds() <= {store.JUDGE}
                 else "answers (judgements, edits, verifications) than annotators queued for them")
        orphans = _orphaned(study, unjudged, excluded)
        why = [f"not finished: {', '.join(waiting)}; finish the study"] if waiting else []
        if orphans:
            why.append(f"{plural(len(orphans), 'item')} ({', '.join(orphans[:10])}{', ...' if len(orphans) > 10 else ''}) "
                       f"lost every judge or verifier to the exclusion of {', '.join(sorted(excluded))}: they need a "
                       "new study with more annotators per item, or --partial leaves them undecided")
        raise ConfigError(f"{db}: unfinished study: {len(unjudged)} of {plural(len(study.items), 'item')} have fewer "
                          f"{asked} from annotators who pressed Finish ({'; '.join(why) or 'finish the study'}); "
                          "or pass --partial to write the release with "
                          "the items whose votes so far decide their verdict validated and the others left as they "
                          "were, marked unvalidated" + _excluded_note(study))
    todo = unverified(study, excluded)
    if todo and not partial:
        kinds = Counter("edit" if c["item_kind"] == store.EDIT else "mend" for c in todo)
        raise ConfigError(f"{db}: {' and '.join(plural(n, kind) for kind, n in sorted(kinds.items()))} "
                          f"({', '.join(sorted({c['record_id'] for c in todo})[:10])}) have no verify items: nobody "
                          "approved them, so no release can take or refuse them yet; run `advrace human-eval create "
                          f"--verify --db {db} --verifiers M --annotators N` and have them verified, or pass --partial "
                          "to leave their questions undecided (as the machine made them)")
    return unjudged + sorted({c["item_id"] for c in todo})


def _orphaned(study: Study, short: list[int], excluded) -> list[str]:
    """The record ids of short items that annotators were queued for but every one of them is
    excluded: no finishing makes them whole."""
    everyone, counted = study.expected(), study.expected(excluded)
    needed = study.needed(excluded)
    items = {item["id"]: item for item in study.items}
    return [items[i]["record_id"] + ("" if items[i]["kind"] == store.JUDGE else f" ({items[i]['kind']} item {i})")
            for i in short if everyone.get(i, 0) and not counted.get(i, 0)
            and (items[i]["kind"] != store.JUDGE or not needed[items[i]["record_id"]])]


def _excluded_note(study: Study) -> str:
    out = sorted(study.excluded)
    return (f" (the votes of {', '.join(out)}, below {study.meta['min_accuracy']} accuracy on control questions, do "
            "not count: their items need others' judgements)" if out else "")


def validate_release(db_path, release_dir, out_dir, *, drop: bool = False, partial: bool = False,
                     adversary: str | None = None, excluded=frozenset()) -> dict:
    """Write the validated release of `release_dir` to `out_dir` from a finished study (or, with
    `partial`, an unfinished one); returns its manifest's `validation`, with `warnings` (a
    studied split attacked below half, as `advrace build` warns).

    Judge items take their majority verdict; on a split of edit items each changed question takes
    an approved edit of its pool (`selection`), AddSent's the one `adversary` (a span checkpoint)
    does worst on; a judged-invalid RACE question takes an approved mend. `excluded`: annotators
    whose answers, edits and verifications are left out, besides those below the study's control
    accuracy (`controls`, always left out)."""
    manifest = check_release(release_dir)
    study = read_study(db_path)
    excluded = frozenset(excluded) | study.excluded
    studied = [split for split in manifest["splits"] if split in study.meta["splits"]]  # sources first
    attacks = selection.attacks_of(manifest, studied)
    edited = set(study.meta["splits"]) if store.EDIT in study.kinds() else set()  # every studied split of an edit study
    needs = _needs_adversary(db_path, manifest, studied, edited, attacks, adversary)
    changed = {split: changed_items(release_dir, split) for split in studied}
    votes = votes_by_item(study, {ex.id: added_spans(ex) for exs in changed.values() for ex in exs}, excluded)
    short = check_study(study, release_dir, manifest, partial, changed, votes, excluded)
    approved = {cid for cid, a in verifying.approvals(study, excluded).items() if a.approved}
    chooser = Chooser(study, approved, selection.verified(study, excluded), attacks, adversary, manifest, needs,
                      excluded)
    k = study.meta.get("judgements") or 0
    deciding = _Deciding(chooser, votes, study.needed(excluded), study.meta["seed"], partial)
    decisions, per_split, reasons = {}, {}, {}
    for split in studied:
        decisions[split], counts, gone, reasons[split] = deciding.split(
            split, changed[split], manifest["splits"][split].get("source") or ORIGINAL, split in edited)
        size = manifest["splits"][split]["count"] - (len(gone) if drop else 0)
        per_split[split] = (edit_validation(changed[split], counts, chooser, split, size) if split in edited else
                            split_validation(changed[split], votes, counts, k, size, chooser, deciding.ks))
    validation = _validation_record(manifest, release_dir, study, excluded, chooser, per_split, partial=bool(short),
                                    drop=drop)
    validation["warnings"] = share_warnings(manifest, release_dir, per_split, reasons)
    derive_release(release_dir, out_dir, decisions, {"validation": validation}, drop=drop, source_manifest=manifest)
    return validation


def _needs_adversary(db_path, manifest: dict, studied: list[str], edited: set[str], attacks: dict[str, str],
                     adversary: str | None) -> list[str]:
    """The edited splits whose approved sentence is the one a model does worst on (AddSent), which
    need `--adversary`."""
    needs = [split for split in studied if split in edited and attacks[split] == selection.ADVERSARIAL]
    if needs and not adversary:
        raise ConfigError(f"{db_path}: the split(s) {', '.join(needs)} take the approved sentence a model does worst "
                          "on (AddSent, as Jia and Liang chose it); pass --adversary MODEL, a span checkpoint (the "
                          f"release built {needs[0]} with {manifest['splits'][needs[0]]['config'].get('model')!r})")
    return needs


@dataclass
class _Deciding:
    """The decision on each changed question, split by split in the manifest's order (sources
    first), so that a question whose source split's question went back, was dropped or was
    replaced goes with it. `ks`: the judgements each item needs (an excluded judge's item is
    decided by the others' votes)."""

    chooser: Chooser
    votes: dict
    ks: dict
    seed: int
    partial: bool
    undone: dict[str, set] = dataclasses.field(default_factory=dict)  # split -> source ids not kept as attacked

    def split(self, split: str, examples: list, source: str, edited: bool) -> tuple[dict, Counter, set, Counter]:
        """The split's decisions by record id, its counts, the source ids that leave its attacked
        form (what derive_release puts back or drops with the source's), and why they went."""
        decisions, counts, gone, undone, reasons = {}, Counter(), set(), set(), Counter()
        for ex in examples:
            follows = ex.source_id in self.undone.get(source, ())  # put back, dropped or replaced there
            d = decisions[ex.id] = self._decision(split, ex, edited, follows, counts)
            if not d.keep:
                gone.add(ex.source_id)
                reasons[d.reason] += 1
            elif d.example is not None:
                undone.add(ex.source_id)
        gone |= self.undone.get(source, set())
        self.undone[split] = undone | gone
        return decisions, counts, gone, reasons

    def _decision(self, split: str, ex, edited: bool, follows: bool, counts: Counter) -> Decision:
        """One changed question's decision, counted: its own, or its source's (`follows`)."""
        chooser = self.chooser
        if edited:
            d = chooser.edit_decision(split, ex, self.partial, choose=not follows)
        else:
            votes, k = self.votes[ex.id], self.ks[ex.id]
            d = chooser.judge_decision(ex, votes, k, self.seed, self.partial)
        if follows:
            counts["with_source"] += 1
            record = (dataclasses.replace(d.record, chosen=None, why=WITH_SOURCE) if edited else
                      Validated(verdict(votes, k) or UNVALIDATED, votes, WITH_SOURCE))
            return Decision(record, keep=False, reason=WITH_SOURCE)
        counts[outcome(d, ex.id in chooser.undecided)] += 1
        if ex.id in chooser.how:
            chooser.chosen_by.setdefault(split, Counter())[chooser.how[ex.id]] += 1
        if not edited:
            counts[verdict(votes, k) or UNVALIDATED] += 1
            counts[UNDECIDED_MEND] += ex.id in chooser.undecided
        return d


def _validation_record(manifest: dict, release_dir, study: Study, excluded: frozenset, chooser: Chooser,
                       per_split: dict, *, partial: bool, drop: bool) -> dict:
    """The manifest's `validation`: the source release, the study's fingerprints, what became of
    the invalid questions, and each split's numbers."""
    validation = {
        "source_release": {"name": manifest["name"], "manifest_sha256": release_id(release_dir)},
        "study": {"items_sha256": study.items_sha256(), "annotations_sha256": study.annotations_sha256(),
                  "candidates_sha256": study.candidates_sha256(),
                  "annotators": len(study.annotators), "judgements": study.meta.get("judgements") or 0,
                  "seed": study.meta["seed"], "partial": partial, "excluded": sorted(excluded),
                  **_versions_apart(study.meta)},
        "invalid": DROPPED if drop else PUT_BACK,
        **({"adversary": chooser.adversary_record} if chooser.adversary_record else {}),
        "splits": significant_floats(per_split),
    }
    checks = controls.exclusion_record(study.meta, study.counted(), [a["name"] for a in study.annotators])
    if checks:
        validation["controls"] = significant_floats(checks)
    return validation


def share_warnings(manifest: dict, release_dir, per_split: dict, reasons: dict) -> list[str]:
    """`advrace build`'s warning (`attack_share_warnings`, its wording) for each studied split that
    people's validation leaves attacked below half, with the reasons its questions went back."""
    stats = json.loads((Path(release_dir) / "stats.json").read_text(encoding="utf-8"))
    after = {"splits": {split: {"attack": manifest["splits"][split]["attack"], "count": v["size"],
                                "perturbed": v["kept"]} for split, v in per_split.items()}}
    why = {"splits": {split: {"unperturbed_reasons": dict(
        Counter((stats["splits"].get(split) or {}).get("unperturbed_reasons") or {}) + reasons.get(split, Counter()))}
        for split in per_split}}
    return [line + " after people's validation" if "; top reasons" not in line else
            line.replace("; top reasons", " after people's validation; top reasons", 1)
            for line in attack_share_warnings(after, why)]


MENDED_REASON = "judged invalid by annotators; kept with people's mend"
NO_EDIT_REASON = "no approved edit"
UNDECIDED_EDITS = "its edits' verification is not decided (--partial): left as the machine made it"
VALID_MENDS = "judged valid: the machine's question kept, no mend taken"
NO_MEND_REASON = "judged invalid by annotators, and no mend approved"
UNDECIDED_MENDS = "judged invalid, its mends' verification not decided (--partial): left as the machine made it"
KEPT, MENDED, UNDECIDED, BACK = "kept", "mended", "undecided", "back"  # what became of a changed question
UNDECIDED_MEND = "undecided_mend"  # judged invalid, its mends not all verified (--partial)


def outcome(d: Decision, undecided: bool = False) -> str:
    """What a decision did to a changed question: kept the machine's text, took people's (an edit
    or a mend), left it undecided (--partial: `undecided`, or no verdict yet), or put it back
    (dropped with --drop)."""
    if not d.keep:
        return BACK
    if d.example is not None:
        return MENDED
    first = d.record[0] if isinstance(d.record, tuple) else d.record
    undecided = undecided or (isinstance(first, Validated) and first.verdict == UNVALIDATED)
    return UNDECIDED if undecided else KEPT


class Chooser:
    """Each changed question's decision from people's work: its judges' verdict and mends, or its
    pool's approved edits (`selection`)."""

    def __init__(self, study: Study, approved: set[int], said: dict, attacks: dict[str, str], adversary: str | None,
                 manifest: dict, adversarial_splits: list[str], excluded=frozenset()):
        self.study, self.approved, self.said, self.attacks = study, approved, said, attacks
        self.seed = study.meta["seed"]
        self.edits = selection.edits(study, excluded)
        self.pools = selection.pools(study, attacks, excluded)
        self.mends, self.gold_mends = selection.mends(study, excluded)
        self.chosen_by: dict[str, Counter] = {}
        self.how: dict[str, str] = {}  # example id -> how its edit was chosen
        self.undecided: set[str] = set()  # example ids left undecided (--partial)
        self.adversary_record, self._attack = None, None
        if adversary and adversarial_splits:
            self._attack = self._adversary(adversary, manifest["splits"][adversarial_splits[0]])

    def _adversary(self, model: str, info: dict):
        """AddSent's attack with `model` in place of the release's checkpoint, the split's other
        settings kept (batch size, length, precision), so its F1 is AddSent's."""
        from advrace.attacks import get_attack  # deferred for start-up time: importing the attacks loads every attack module

        cls = get_attack(selection.ADVERSARIAL, EXTRACTIVE_QA)
        fields = {f.name for f in dataclasses.fields(cls.Config)}
        config = {k: v for k, v in (info.get("config") or {}).items() if k in fields}
        attack = cls({**config, "model": model}, info.get("seed") or 0)
        described = attack.describe()
        self.adversary_record = {"model": described["config"]["model"],
                                 "checkpoint_sha256": described["checkpoint_sha256"]}
        return attack

    def _scores(self, example, texts: list[str]) -> list[float]:
        from advrace.attacks.squad.span_model import model_f1s  # deferred for start-up time: only --adversary scores

        contexts = [selection.with_sentence(example, t).context for t in texts]
        f1s = model_f1s(self._attack.scorer, [example] * len(texts), contexts)
        self.adversary_record["inference"] = self._attack.inference()
        return f1s

    def pending(self, c: dict) -> bool:
        """A candidate whose verification is not all in (or has no verifier left to give it)."""
        said = self.said.get(c["id"])
        return said is None or said.pending

    def pool(self, split: str, ex) -> list[dict]:
        return selection.pool_of(self.pools, self.edits, split, self.attacks[split], ex)

    def edit_decision(self, split: str, ex, partial: bool, choose: bool = True) -> Decision:
        """The question with a pool's approved sentence in place of the machine's (a seeded draw;
        on AddSent's split the one the adversary does worst on), else back as its source.
        Without `choose` (the question goes with its source's) nothing is chosen nor scored."""
        pool = self.pool(split, ex)
        spans = added_spans(ex)
        machine = ex.passage_text[spans[0][0]:spans[0][1]] if spans else ""
        approved = [c for c in pool if c["id"] in self.approved and c["text"]] if choose else []
        f1s: dict[int, float] = {}
        chosen, why = None, ""
        if len(approved) == 1:
            chosen, why, how = approved[0], "the only approved edit", selection.ONLY
        elif approved and self.attacks[split] == selection.ADVERSARIAL:
            from advrace.attacks.squad.span_model import worst  # deferred for start-up time: only --adversary scores

            scores = self._scores(ex, [c["text"] for c in approved])
            f1s = {c["id"]: f for c, f in zip(approved, scores)}
            chosen, how = approved[worst(scores)], selection.WORST
            why = (f"the approved edit {self.adversary_record['model']} does worst on (F1 {f1s[chosen['id']]:.4g} "
                   f"of {len(approved)} approved; the first of equally bad ones)")
        elif approved:
            chosen = approved[selection.random_choice(approved, self.seed, ex.id)]
            how, why = selection.RANDOM, f"a random draw (seed {self.seed}) among {len(approved)} approved edits"
        edits = tuple(selection.people_edit(c, c["machine"], c["id"] in self.approved, self.said.get(c["id"]),
                                            f1s.get(c["id"]))
                      for c in pool)
        index = pool.index(chosen) if chosen is not None else None
        if chosen is not None:
            self.how[ex.id] = how
            record = PeopleEdited(machine, edits, index, why, self.seed,
                                  self.adversary_record["model"] if how == selection.WORST else None)
            return Decision(record, example=selection.with_sentence(ex, chosen["text"]))
        if choose and partial and any(self.pending(c) for c in pool if not c["beyond_repair"]):
            self.undecided.add(ex.id)
            return Decision(PeopleEdited(machine, edits, None, UNDECIDED_EDITS, self.seed))
        return Decision(PeopleEdited(machine, edits, None, NO_EDIT_REASON, self.seed), keep=False,
                        reason=NO_EDIT_REASON)

    def judge_decision(self, ex, mine: tuple, k: int, seed: int, partial: bool = False) -> Decision:
        """Its judges' verdict (as before people could mend); a judged-invalid question with an
        approved mend keeps it, the option replaced; without one, while a mend's verification is
        not in (--partial), it is left undecided as the machine made it."""
        said = verdict(mine, k)
        offered = self.mends.get(ex.id, [])
        edits = tuple(selection.people_edit(c, ex.options[c["option"]], c["id"] in self.approved, self.said.get(c["id"]))
                      for c in offered)

        def kept(validated: Validated, why: str, **how) -> Decision:
            """The verdict, and the mends offered (none taken: `why`) after it in provenance."""
            if not offered:
                return Decision(validated, **how)
            return Decision((validated, PeopleEdited(ex.options[offered[0]["option"]], edits, None, why, seed)), **how)

        if said is None:
            return kept(Validated(UNVALIDATED, mine, UNJUDGED_REASON), UNJUDGED_REASON)
        if said == VALID:
            return kept(Validated(VALID, mine, DECIDED_EARLY if len(mine) < k else None), VALID_MENDS)
        approved = [(c, self.said[c["id"]]) for c in offered if c["id"] in self.approved]
        if not approved and partial and any(self.pending(c) for c in offered):
            self.undecided.add(ex.id)
            return kept(Validated(INVALID, mine, UNDECIDED_MENDS), UNDECIDED_MENDS)
        if not approved:
            return kept(Validated(INVALID, mine, INVALID_REASON), NO_MEND_REASON, keep=False, reason=INVALID_REASON)
        chosen = approved[selection.most_approved(approved, seed, ex.id)][0]
        why = ("the only approved mend" if len(approved) == 1 else
               f"the mend most verifiers approved, of {len(approved)} approved (a tie broken by a draw, seed {seed})")
        record = PeopleEdited(ex.options[chosen["option"]], edits, offered.index(chosen), why, seed)
        example = selection.with_option(ex, chosen["option"], chosen["text"]).with_provenance(
            Validated(INVALID, mine, MENDED_REASON))
        return Decision(record, example=example)

    def candidate_numbers(self, rows: list[dict]) -> dict:
        """Candidates made, beyond repair, verified (every verification in) and approved, the
        approval rate (of those verified) with its Wilson interval, and Fleiss' kappa of the
        verifiers' approve votes (`verifying.verifier_vote`)."""
        verified = [c["id"] for c in rows if not self.pending(c)]
        approved = sum(cid in self.approved for cid in verified)
        ratings = [["approve" if ok else "reject" for ok in self.said[cid].approves] for cid in verified]
        n = max((len(r) for r in ratings), default=0)
        return {"candidates": len(rows), "beyond_repair": sum(bool(c["beyond_repair"]) for c in rows),
                "verified": len(verified), "approved": approved,
                "approval_rate": approved / len(verified) if verified else None,
                "approval_ci": wilson(approved, len(verified)),
                "verify_kappa": fleiss_kappa([r for r in ratings if len(r) == n])}


def _shares(kept: int, mended: int, size: int) -> dict:
    return {"kept": kept, "size": size, "attacked_share": kept / size if size else None, "mended": mended,
            "mended_share": mended / size if size else None}


def _versions_apart(meta: dict) -> dict:
    """Whether two versions of one question were kept from one annotator (not said by a study
    made before advrace kept them apart)."""
    return {"versions_apart": meta["versions_apart"]} if "versions_apart" in meta else {}


def split_validation(examples: list, votes: dict, counts: Counter, k: int, size: int | None = None,
                     chooser: Chooser | None = None, needed: dict | None = None) -> dict:
    """One split's numbers (`report.item_rates`, the report's definitions), with how many of its
    changed questions were not yet judged and how many went back with their source split's
    (`needed`: each item's judgements that count, where annotators were excluded); the share
    attacked after people (changed questions kept, of the split as written), the share mended and
    the mends' approval."""
    out = {"changed": len(examples), **item_rates([votes[ex.id] for ex in examples], k,
                                                   [needed[ex.id] for ex in examples] if needed else None),
           "unjudged": counts[UNVALIDATED], "with_source": counts["with_source"]}
    if size is None:
        return out
    mends = [c for ex in examples for c in chooser.mends.get(ex.id, [])]
    gold = sum(len(chooser.gold_mends.get(ex.id, [])) for ex in examples)
    return {**out, **({"replaced_gold": gold} if gold else {}), **({"undecided": counts[UNDECIDED_MEND]} if counts[UNDECIDED_MEND] else {}), **_shares(counts[KEPT] + counts[MENDED] + counts[UNDECIDED], counts[MENDED], size),
            "back": counts[BACK], **(chooser.candidate_numbers(mends) if mends else {})}


def edit_validation(examples: list, counts: Counter, chooser: Chooser, split: str, size: int) -> dict:
    """A split of edited sentences: its changed questions kept with an approved edit (the share
    attacked after people: all of them are people's), put back or dropped for want of one, left
    undecided (--partial) or gone with their source split's; how each edit was chosen; and its own
    edit items' candidates (made, beyond repair, verified, approved)."""
    rows = list({c["id"]: c for ex in examples for c in chooser.pool(split, ex)}.values())
    return {"kind": "edit", "changed": len(examples), **_shares(counts[MENDED] + counts[UNDECIDED], counts[MENDED], size),
            "back": counts[BACK], "unvalidated": counts[UNDECIDED], "with_source": counts["with_source"],
            "chosen": {how: chooser.chosen_by.get(split, Counter())[how]
                       for how in (selection.RANDOM, selection.WORST, selection.ONLY)},
            **chooser.candidate_numbers(rows)}


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
    candidates = validation["study"].get("candidates_sha256")
    if candidates is not None and candidates != study.candidates_sha256():
        problems.insert(0, f"its candidates (people's edits and mends, sha256 {study.candidates_sha256()[:16]}) are "
                           f"not those {release_dir} was validated from (sha256 {candidates[:16]})")
    if problems:
        raise _tampered(db_path, problems)
    digest = study.annotations_sha256()
    recorded = validation["study"]["annotations_sha256"]
    if digest != recorded:
        raise VerifyError(f"{db_path}: its annotations (sha256 {digest[:16]}) are not those {release_dir} was "
                          f"validated from (sha256 {recorded[:16]}): the database changed since, or is another "
                          "study of the same release")
    recorded_out = validation["study"].get("excluded")  # a release validated before it was recorded: the controls'
    excluded = frozenset(recorded_out) if recorded_out is not None else study.excluded
    votes = votes_by_item(study, excluded=excluded)
    said = selection.verified(study, excluded)
    made = {(c["record_id"], c["annotator"]): c for c in study.candidates}
    for split in validation["splits"]:
        for ex in read_split(release_dir, split):
            judged = next((r for r in reversed(ex.provenance) if isinstance(r, Validated)), None)
            if ex.id in votes and judged is not None and [(v.annotator, v.valid) for v in judged.votes] != [
                    (v.annotator, v.valid) for v in votes.get(ex.id, ())]:
                raise VerifyError(f"{release_dir}: the votes of {ex.id} in its provenance are not the study's "
                                  f"({db_path}); the release was written from other judgements")
            edited = ex.provenance[-1] if ex.provenance and isinstance(ex.provenance[-1], PeopleEdited) else None
            for e in edited.edits if edited else ():
                c = made.get((e.item, e.editor))
                mine = said.get(c["id"]) if c else None
                if c is None or (e.text, e.option, e.beyond_repair) != (c["text"], c["option"], bool(c["beyond_repair"])) \
                        or e.verifications != (mine.verifications if mine else ()):
                    raise VerifyError(f"{release_dir}: {e.editor}'s edit of {ex.id} in its provenance, or its "
                                      f"verification, is not the study's ({db_path}); the release was written from "
                                      "other edits or votes")
    return (f"{release_dir}: the study {db_path} is the one it was validated from (annotations sha256 "
            f"{digest[:16]}, release {source['name']!r}); its tamper checks pass"
            + ("" if items else "; its items are not checked (the manifest, written by an earlier advrace, "
                                "records no items_sha256)"))
