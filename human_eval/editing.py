"""Jia and Liang's edit step: people rewrite each machine-written SQuAD sentence into fluent English
(`human-eval create REL --edit`), and the checks their rewrite must pass, run live as they type and
again when it is saved.

One edit item is made per distinct machine sentence of each changed question (the sentence an
attack inserted, `SentencesInserted`, with the `AdversarialSentence` that wrote it): the same
sentence in two studied splits is edited once, and the item's payload names every record it
stands in (`records`). Each item goes to `editors` annotators, none twice (`study.assignment`).
An edit is a candidate (`store.save_candidate`); `verifying` then has other annotators verify it.
"""

from __future__ import annotations

import re
from pathlib import Path

from advrace.attacks.sentences.readability import contains_answer, same_as_question
from advrace.core.checks.sentences import SQUAD_SENTENCE_ATTACKS, TYPE_GROUPS, asked_group
from advrace.core.errors import ConfigError
from advrace.core.provenance import AttackSummary, SentencesInserted
from advrace.core.tasks import EXTRACTIVE_QA
from advrace.core.text import plural
from advrace.release import check_release, read_split

from . import controls, store
from .selection import attacks_of
from .study import (add_annotators, add_controls, changed_items, check_known_splits, item_payload, new_study,
                    release_id)

MAX_EDIT = 1000  # characters: a sentence, not a paragraph
EDIT_INSTRUCTIONS = ("Rewrite the highlighted sentence into fluent English that keeps a fake answer of the kind "
                     "the question asks, and does not answer the question.")


def machine_sentences(example) -> list[tuple[int, int, object]]:
    """(start, end, AdversarialSentence) of each sentence an attack inserted into the example's
    context, in the order the attack wrote them."""
    records = {s.sentence: s for r in example.provenance if isinstance(r, AttackSummary) for s in r.sentences}
    out = []
    for rec in example.provenance:
        if isinstance(rec, SentencesInserted) and rec.field == "context":
            for placed in rec.sentences:
                at = example.context.find(placed.text)
                if at >= 0 and placed.text in records:
                    out.append((at, at + len(placed.text), records[placed.text]))
    return out


def edit_payload(example, start: int, end: int, record, records: list[str]) -> dict:
    """What an editor is shown: the judge payload, the machine sentence's span in the context
    (`sentence`) and text (`machine`), its fake answer (`answer`, and `fake`, its span in the
    sentence in any case, when found there), the answer type group the question asks for (`asked`: name, time,
    number, word; from its wh-word, else the fake's own type, which the attack made the gold's),
    the mutated question the sentence states (`mutated`), and the record ids it stands in."""
    # "the Halloway Canal" opens its sentence as "The Halloway Canal"
    fake = re.compile(re.escape(record.answer), re.IGNORECASE).search(example.context, start, end) \
        if record.answer else None
    return {**item_payload(example), "sentence": [start, end], "machine": example.context[start:end],
            "answer": record.answer, "fake": list(fake.span()) if fake else None,
            "asked": asked_group(example.question) or TYPE_GROUPS.get(record.answer_type),
            "mutated": record.question, "records": records}


def edit_items(release_dir, splits: list[str]) -> list[tuple[str, object, dict]]:
    """(split, example, payload) of each distinct machine sentence of each changed question of the
    splits, keyed by (question, sentence): the first split that holds it gives the item."""
    found: dict[tuple[str, str], tuple[str, object, int, int, object, list]] = {}
    empty = []
    for split in splits:
        n = 0
        for ex in changed_items(release_dir, split):
            for start, end, record in machine_sentences(ex):
                n += 1
                key = (ex.source_id, record.sentence)
                if key in found:
                    found[key][5].append(ex.id)
                else:
                    found[key] = (split, ex, start, end, record, [ex.id])
        if not n:
            empty.append(split)
    if empty:
        raise ConfigError(f"{release_dir}: the split(s) {', '.join(empty)} hold no inserted sentences to edit "
                          f"(--edit rewrites the sentences of {', '.join(SQUAD_SENTENCE_ATTACKS)} splits); name those "
                          "with --splits")
    return [(split, ex, edit_payload(ex, s, e, rec, recs)) for split, ex, s, e, rec, recs in found.values()]


def create_edit_study(release_dir, db_path, *, splits=None, editors: int = 5, annotators: int = 5, seed: int = 0,
                      names=None, controls_rate: float = 0.0, min_accuracy: float | None = None) -> dict:
    """Write a new study database of edit items (one per distinct machine sentence of each changed
    question of `splits`, default: the release's sentence-inserting splits), each going to
    `editors` of the `annotators` (capped at their number). `controls_rate` mixes control
    questions (original questions, a sentence without the gold highlighted so that they look like
    verify items, `controls.control_payload`) into every queue, as `create_study` does, and every
    verify round later takes them at the same rate; `min_accuracy` is the accuracy on them below
    which an annotator's edits still stand but their verifications do not count. Meta records
    `stage: "edit"` and `editors`. Returns {"annotators": {name: token}, "items": n, "splits":
    [...], "editors": k, "controls": n, "min_accuracy": A}."""
    db_path = Path(db_path)
    if db_path.exists():
        raise ConfigError(f"{db_path} already exists; a study database is created once (choose another --db)")
    if annotators < 1 or editors < 1:
        raise ConfigError("--annotators and --editors must be at least 1")
    min_accuracy = controls.check_rates(controls_rate, 0.0, min_accuracy)
    manifest = check_release(release_dir)
    if manifest["task"] != EXTRACTIVE_QA:
        raise ConfigError(f"{release_dir}: a {manifest['task']} release; --edit rewrites the sentences SQuAD "
                          "adversaries insert. For RACE, study the DE or DG split: judges there can mend a "
                          "distractor")
    splits = list(splits or [s for s, attack in attacks_of(manifest, manifest["splits"]).items()
                             if attack in SQUAD_SENTENCE_ATTACKS])
    check_known_splits(manifest, splits, release_dir)
    if not splits:
        raise ConfigError(f"{release_dir}: no split inserts sentences ({', '.join(SQUAD_SENTENCE_ATTACKS)}); --edit has "
                          "nothing to rewrite")
    names = list(names or [f"annotator{i + 1}" for i in range(annotators)])
    editors = min(editors, len(names))
    items = edit_items(release_dir, splits)
    meta = dict(release=str(Path(release_dir).resolve()), release_name=manifest["name"], task=manifest["task"],
                seed=seed, per_split=None, splits=splits, all_changed=True, judgements=editors, annotators=names,
                manifest_sha256=release_id(release_dir), stage=store.EDIT, editors=editors)
    source_split, originals = None, {}
    if controls_rate:
        meta.update(controls=controls_rate, baseline=0.0, min_accuracy=min_accuracy)
        source_split = controls.original_split(manifest, splits, release_dir)
        originals = {ex.source_id: ex for ex in read_split(release_dir, source_split)}
    with new_study(db_path, meta) as conn:
        for split, ex, payload in items:
            store.add_item(conn, split, ex.id, ex.source_id, ex.task, payload, kind=store.EDIT)
        n_controls = add_controls(conn, names, meta, source_split, originals, controls_rate)
        tokens = add_annotators(conn, names, meta)
    return {"annotators": tokens, "items": len(items), "splits": splits, "editors": editors, "controls": n_controls,
            "min_accuracy": min_accuracy}


def edit_problem(payload: dict, text: str, beyond_repair: bool = False) -> str | None:
    """Why an edit of an edit item's machine sentence cannot be kept, or None. The sentence must
    not hold a gold answer and must keep the fake (both as whole words after SQuAD's
    normalisation, Jia and Liang's test, `contains_answer`), and must not be the question
    restated (the asked or the mutated one, `same_as_question`, the attacks' own readability
    check). Empty is allowed only for a sentence marked beyond repair."""
    text = text.strip()
    if beyond_repair:
        return None
    if not text:
        return "write the sentence, or mark it beyond repair"
    if len(text) > MAX_EDIT:
        return f"the sentence is {len(text)} characters long; write one sentence (at most {MAX_EDIT})"
    for gold in payload["answers"]:
        if contains_answer(text, gold["text"]):
            return (f"it contains “{gold['text']}”, an answer to the question: the sentence must not answer it; "
                    "state the fake answer instead")
    for question in (payload["question"], payload.get("mutated") or ""):
        if question and same_as_question(text, question):
            return "it is the question restated: write a statement that gives the fake answer"
    fake = payload.get("answer") or ""
    if fake and not contains_answer(text, fake):
        return f"it drops the fake answer “{fake}”: keep it, so that the sentence still misleads"
    return None


def describe(out: dict) -> str:
    """The line `create --edit` prints."""
    return (f"{plural(out['items'], 'sentence')} to edit from {', '.join(out['splits'])}, each by "
            f"{plural(out['editors'], 'editor')}")
