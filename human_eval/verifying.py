"""Jia and Liang's verify step: other annotators answer, blind, each question with one people-made
candidate in place (an edited SQuAD sentence, or a RACE option a judge replaced with their own
distractor) and, for a sentence, say whether it is grammatical; an edit is approved when a strict
majority of its verifiers chose the gold and (for a sentence) called it grammatical.

`add_verify_items` is the one way verify items enter a study (`human-eval create --verify`, and
the crowd-platform route, which only exports and imports them); `approvals` is the one reading of
their votes (`human-eval validate`).
"""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.examples import SpanExample
from advrace.core.provenance import VALID, Vote
from advrace.core.seeding import seeded_rng
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.release import check_release, read_split

from . import controls, store
from .study import assignment, item_payload, release_id
from .votes import verdict, vote

UNGRAMMATICAL = "called it ungrammatical"
STAGE = "verify"  # meta `stage` once verify items are added; `verify_rounds` lists each addition


def verify_payload(item: dict, candidate: dict) -> dict:
    """What a verifier is shown. A SQuAD edit: the question with the candidate sentence in place of
    the machine one (the gold answers moved with the text) and `highlight`, the candidate's span.
    A RACE mend: the judge payload with the mended option in place, answered like a judge item
    (no highlight, no mend controls)."""
    p = item["payload"]
    if item["task"] == MULTIPLE_CHOICE:
        options = list(p["options"])
        options[candidate["option"]] = candidate["text"]
        return {k: v for k, v in {**p, "options": options}.items() if k != "mend"}
    start, end = p["sentence"]
    text = candidate["text"].strip()
    example = SpanExample(id=item["record_id"], title=p.get("title", ""), context=p["context"],
                          question=p["question"], answers=[(a["text"], a["answer_start"]) for a in p["answers"]])
    edited = example.replace_spans("context", [(start, end, text)])
    return {**item_payload(edited), "highlight": [start, start + len(text)]}


def to_verify(conn) -> list[dict]:
    """The candidates that still need verify items: every edit (not beyond repair) and every RACE
    mend (a judge item's candidate with `option`, not of a control or baseline) that has no verify
    item yet, in order; but a mend that replaced the gold (`replaced_gold`)."""
    items = {i["id"]: i for i in store.all_items(conn)}
    verified = {i["candidate_id"] for i in items.values() if i["kind"] == store.VERIFY}
    return [c for c in store.candidates(conn) if c["id"] not in verified and not c["beyond_repair"] and c["text"]
            and (c["item_kind"] == store.EDIT or (c["item_kind"] == store.JUDGE and c["option"] is not None
                                                  and c["option"] != items[c["item_id"]]["payload"]["label"]))]


def replaced_gold(conn) -> list[dict]:
    """The mends that replaced a judge item's gold (the judge took it for a second right answer):
    set aside, never verified. The question keeps its gold, so such a mend has none to be verified
    against; the mend box cannot refuse it without telling the judge which option is right, but
    once every judge has pressed Finish (`add_verify_items` waits for that) setting it aside tells
    no one anything."""
    labels = {i["id"]: i["payload"].get("label") for i in store.all_items(conn) if i["kind"] == store.JUDGE}
    return [c for c in store.candidates(conn) if c["item_kind"] == store.JUDGE and c["option"] is not None
            and c["option"] == labels[c["item_id"]]]


def set_aside_line(db_path) -> str | None:
    """What `create --verify` says of the mends `replaced_gold` set aside (None when there are none)."""
    conn = store.connect(db_path)
    try:
        n = len(replaced_gold(conn))
    finally:
        conn.close()
    return (f"set aside {plural(n, 'mend')} that replaced the right answer (a question keeps its gold: only a "
            "mend of a wrong option is verified)") if n else None


def add_verify_items(db_path, *, verifiers: int = 3, annotators: int = 0, seed: int | None = None) -> dict:
    """Add a verify item for each candidate still to verify (`to_verify`), each going to
    `verifiers` annotators who never had its question in their queue (not its editors, nor
    anyone who judged or verified another version of it: `assignment`'s `exclude`), none given two
    mends of one RACE question (`apart` by source id: the options two mends share include the
    gold), from the annotators who have not pressed
    Finish and `annotators` new accounts. Refused while an editor or judge has not pressed Finish
    (their candidates could still change). Meta records `stage: "verify"`, the new names in
    `annotators`, and per call the round in `verify_rounds` (seed, verifiers, the eligible names,
    the items): the round's queues are `assignment(items, eligible, verifiers, seed, apart=source
    id of each mend, exclude=the names whose queue held that source id before the round)`, with
    control questions mixed in at the study's `controls` rate (`round_controls`; recorded per name
    in the round's `controls`). The edits of one SQuAD sentence may go to one verifier, as Jia and Liang's three filterers saw all
    five edits of a sentence: they share the fake answer and the paragraph, so seeing several
    tells nothing of the gold, and keeping them apart would need K x M verifiers per sentence. Returns
    {"annotators": {new name: token}, "items": n, "candidates": n, "controls": n (queued)}."""
    db_path = Path(db_path)
    if not db_path.is_file():
        raise ConfigError(f"{db_path}: no such study database; create the edit study first "
                          "(`advrace human-eval create REL --edit --db ...`)")
    if verifiers < 1 or annotators < 0:
        raise ConfigError("--verifiers must be at least 1 and --annotators at least 0")
    conn = store.connect(db_path)
    try:
        return _add_verify_items(conn, db_path, verifiers, annotators, seed)
    finally:
        conn.close()


def _add_verify_items(conn, db_path, verifiers, annotators, seed) -> dict:
    meta = store.meta(conn)
    seed = meta.get("seed", 0) if seed is None else seed
    people = store.annotators(conn)
    queues = store.queues(conn)
    kinds = {i["id"]: i for i in store.all_items(conn)}
    waiting = [p["name"] for p in people if not p["finished"]
               and any(kinds[iid]["kind"] in store.PRIMARY_KINDS for iid in queues.get(p["id"], ()))]
    if waiting:
        raise ConfigError(f"{db_path}: {', '.join(waiting)} have not pressed Finish on their edits or judgements; "
                          "verify items are made from final candidates only: wait for them to finish")
    todo = to_verify(conn)
    if not todo:
        aside = len(replaced_gold(conn))
        raise ConfigError(f"{db_path}: no candidate to verify (every edit is verified already, beyond repair, or "
                          "none was written" + (f"; {plural(aside, 'mend')} replaced the right answer, set aside"
                                                if aside else "") + ")")
    taken = {p["name"] for p in people}
    new, k = [], len(people)
    while len(new) < annotators:
        k += 1
        if f"annotator{k}" not in taken:
            new.append(f"annotator{k}")
    pool = [p["name"] for p in people if not p["finished"]] + new
    seen: dict[str, set[str]] = {}  # source id -> names that had it in their queue
    names = {p["id"]: p["name"] for p in people}
    for pid, ids in queues.items():
        for iid in ids:
            seen.setdefault(kinds[iid]["source_id"], set()).add(names[pid])
    if not pool:
        raise ConfigError(f"{db_path}: every annotator has pressed Finish; add verifiers with --annotators N")
    tokens = {}
    with store.transaction(conn, immediate=True):
        item_ids = []
        for c in todo:
            item = kinds[c["item_id"]]
            item_ids.append(store.add_item(conn, item["split"], item["record_id"], item["source_id"], item["task"],
                                           verify_payload(item, c), kind=store.VERIFY, candidate_id=c["id"]))
        source = {iid: kinds[c["item_id"]]["source_id"] for iid, c in zip(item_ids, todo)}
        mends = {iid: s for iid, s, c in zip(item_ids, source.values(), todo) if c["option"] is not None}
        mine = assignment(item_ids, pool, verifiers, seed, apart=mends,
                          exclude={iid: seen.get(s, set()) for iid, s in source.items()})
        had = {name: {s for s, who in seen.items() if name in who} | {source[iid] for iid in mine[name]}
               for name in pool}
        picked = round_controls(conn, meta, {name: len(mine[name]) for name in pool if mine[name]}, had, seed)
        rounds = meta.get("verify_rounds", [])
        for name in new:
            tokens[name] = store.add_person(conn, name, store.ANNOTATOR)[1]
        ids = {p["name"]: p["id"] for p in store.annotators(conn)}
        for name in pool:
            if picked.get(name):
                mine[name] = mine[name] + picked[name]
                seeded_rng("advrace-verify-queue", seed, len(rounds), name).shuffle(mine[name])
            if mine[name]:
                store.append_queue(conn, ids[name], mine[name])
        rounds = rounds + [{"seed": seed, "verifiers": verifiers, "eligible": pool, "items": item_ids,
                            **({"controls": {n: c for n, c in picked.items() if c}} if picked else {})}]
        store.set_meta(conn, stage=STAGE, verify_rounds=rounds, annotators=meta.get("annotators", []) + new)
    return {"annotators": tokens, "items": len(item_ids), "candidates": len(todo),
            "controls": sum(len(c) for c in picked.values())}


def round_controls(conn, meta: dict, sizes: dict[str, int], had: dict[str, set[str]], seed) -> dict[str, list[int]]:
    """The control items (ids) mixed into each verifier's share of a verify round, at the study's
    `controls` rate (`controls.choose_controls` over the original questions of the study's
    release; none when the study has no controls): never the original of a question in the
    verifier's queue (`had`: their source ids, this round's included), so never one they had
    before either. A SQuAD control is shown like a verify item (`controls.control_payload` with a
    highlighted sentence); a control item already in the study that shows the same is reused,
    so that one original question is one item however many queues hold it (a RACE judge queue's
    control offers a mend, which a verify item does not: a verify round gets its own)."""
    rate = meta.get("controls") or 0
    if not rate or not sizes:
        return {}
    release = meta["release"]
    if not (Path(release) / "manifest.json").is_file() or release_id(release) != meta.get("manifest_sha256"):
        raise ConfigError(f"{release}: the release this study was made from is not there (or changed since); the "
                          "verify round draws its control questions from it: put it back where it was")
    split = controls.original_split(check_release(release), meta["splits"], release)
    highlight = controls.wants_highlight(meta["task"], {store.VERIFY})
    pool = {}
    for ex in sorted(read_split(release, split), key=lambda ex: ex.id):
        payload = controls.control_payload(item_payload(ex), ex, meta["seed"], highlight)
        if payload is not None:
            pool[ex.id] = (ex, payload)
    picked = controls.choose_controls(sizes, had, [{"record_id": rid, "source_id": ex.source_id}
                                                   for rid, (ex, _) in pool.items()], rate, seed)
    ids = {i["record_id"]: i["id"] for i in store.all_items(conn) if i["kind"] == store.CONTROL
           and i["record_id"] in pool and i["payload"] == pool[i["record_id"]][1]}  # not a judge's, with its mend box
    for rid in sorted({rid for mine in picked.values() for rid in mine} - ids.keys()):
        ex, payload = pool[rid]
        ids[rid] = store.add_item(conn, split, ex.id, ex.source_id, ex.task, payload, kind=store.CONTROL)
    return {name: [ids[rid] for rid in mine] for name, mine in picked.items()}


@dataclass(frozen=True)
class Approval:
    """People's verdict on one candidate: `approved` when a strict majority of its verifiers (those
    not excluded) approved it; `votes`, one per verifier who answered, in name order."""

    approved: bool
    votes: tuple[Vote, ...]


def verifier_vote(a: dict) -> Vote:
    """A verify answer (a row of `store.annotations`) as a vote: it approves when the verifier
    chose the gold (`votes.chose_gold`, the judges' rule) and, for a sentence (a payload with a
    `highlight`), called it grammatical; else the reason (the answer's, as `votes.vote` names it,
    the candidate sentence being the added one; or "called it ungrammatical")."""
    highlight = a["payload"].get("highlight")
    said = vote(a, [tuple(highlight)] if highlight else ())
    if said.valid and highlight and not a["grammatical"]:
        return Vote(a["annotator"], False, UNGRAMMATICAL)
    return said


def approvals(study_or_conn, exclude_annotators=()) -> dict[int, Approval]:
    """{candidate id: Approval} for every candidate that has a verify item.

    `study_or_conn`: an open study database connection, or a study as `validate.read_study` reads
    it (its `annotators`, `queues`, `items`, `annotations`). Only answers of verifiers who pressed
    Finish count, as for judgements. Each verifier's vote is `verifier_vote`; a candidate is
    approved when more than half of the verifiers its verify item was queued to, leaving out
    `exclude_annotators` (names, e.g. those below the control accuracy threshold), approved
    (`votes.verdict`: a tie is not approved; an item with no verifier left is not approved).
    Several verify items of one candidate (not made by `add_verify_items`) pool their votes."""
    if isinstance(study_or_conn, sqlite3.Connection):
        conn = study_or_conn
        people, queues, items, answers = (store.annotators(conn), store.queues(conn), store.all_items(conn),
                                          store.annotations(conn))
    else:
        s = study_or_conn
        people, queues, items, answers = s.annotators, s.queues, s.items, s.annotations
    excluded = set(exclude_annotators)
    finished = {p["name"] for p in people if p["finished"]} - excluded
    names = {p["id"]: p["name"] for p in people}
    candidate_of = {i["id"]: i["candidate_id"] for i in items if i["kind"] == store.VERIFY}
    verifiers: dict[int, set[str]] = {c: set() for c in candidate_of.values()}
    for pid, ids in queues.items():
        for iid in ids:
            if iid in candidate_of and names[pid] not in excluded:
                verifiers[candidate_of[iid]].add(names[pid])
    votes: dict[int, list[Vote]] = {c: [] for c in verifiers}
    for a in sorted(answers, key=lambda a: a["annotator"]):
        if a["item_id"] in candidate_of and a["annotator"] in finished:
            votes[candidate_of[a["item_id"]]].append(verifier_vote(a))
    return {c: Approval(bool(verifiers[c]) and verdict(v, len(verifiers[c])) == VALID, tuple(v))
            for c, v in votes.items()}


def describe(out: dict, verifiers: int) -> str:
    """The line `create --verify` prints."""
    return (f"{plural(out['items'], 'verify item')} for {plural(out['candidates'], 'candidate')}, each to "
            f"{plural(verifiers, 'verifier')}"
            + (f", with {plural(out['controls'], 'control question')} mixed into their queues" if out.get("controls")
               else ""))
