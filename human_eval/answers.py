"""What an annotator's answer form means: checked and stored in one place, for the web app and
for answers read back from a crowd platform's file alike."""

from __future__ import annotations

from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE

from . import mending, store
from .editing import edit_problem


EDIT_PAGE, VERIFY_PAGE, JUDGE_PAGE = "edit", "verify", "judge"


def page_of(item: dict) -> str:
    """Which answer form shows the item, the one rule for the app's pages and a crowd platform's
    tasks: an edit item's edit form; a SQuAD item whose payload highlights a sentence (a verify
    item, or a control shown like one) the verify form; every other item the judge form (RACE
    verify items too: answered blind, like a judge item)."""
    if item["kind"] == store.EDIT:
        return EDIT_PAGE
    if item["task"] == EXTRACTIVE_QA and "highlight" in item["payload"]:
        return VERIFY_PAGE
    return JUDGE_PAGE


def prior_answer(row) -> dict:
    """What the form shows of the person's earlier answer (empty when there is none)."""
    unanswerable = bool(row and row["unanswerable"])
    answered = row is not None and not unanswerable
    return {"unanswerable": unanswerable, "choice": row["choice"] if answered else None,
            "answer_text": (row["answer_text"] or "") if answered else "",
            "answer_start": str(row["answer_start"]) if answered else "",
            "reason": row["reason"] if row is not None else None,
            "comment": row["comment"] if row is not None and row["comment"] else ""}


def submitted_answer(form: dict) -> dict:
    """What the form shows again after a refused save: what was sent, not what is stored, so that
    a missing reason does not clear the "cannot be answered" choice and the comment."""
    choice = form.get("choice", "")
    unanswerable = choice == "unanswerable"
    return {"unanswerable": unanswerable, "choice": int(choice) if choice.isdecimal() else None,
            "answer_text": "" if unanswerable else form.get("answer_text", ""),
            "answer_start": "" if unanswerable else form.get("answer_start", ""),
            "reason": form.get("reason") or None, "comment": form.get("comment", "")[:2000]}


def save_form(db, person, item, form: dict) -> str | None:
    """Check and store a person's answer form (field name -> text) for an item; returns what is
    wrong with it, if anything (nothing is stored then). The app and an imported crowd-platform
    file both go through here, so an answer means the same whichever way it came."""
    if item["kind"] == store.EDIT:
        return save_edit(db, person, item, form)
    if mending.offered(item) or mending.asked(form):
        return save_mend(db, person, item, form)
    return save_judgement(db, person, item, form)


YES = ("yes", "on", "1", "true")


def save_edit(db, person, item, form) -> str | None:
    """An edit item: the rewritten sentence (`edit_text`), checked by `editing.edit_problem`, or the
    sentence marked beyond repair (`beyond_repair`), stored as the person's candidate."""
    beyond = form.get("beyond_repair", "").lower() in YES
    text = form.get("edit_text", "").strip()
    problem = edit_problem(item["payload"], text, beyond)
    if problem:
        return problem
    store.save_candidate(db, person["id"], item["id"], text=None if beyond else text, beyond_repair=beyond)
    return None


def grammatical_answer(item, form) -> tuple[bool | None, str | None]:
    """(grammatical, error) of a form for an item whose payload highlights a sentence (a verify
    item, or a control shown like one): "yes" or "no" is required; other items ask nothing."""
    if "highlight" not in item["payload"]:
        return None, None
    said = form.get("grammatical", "")
    if said not in ("yes", "no"):
        return None, "say whether the highlighted sentence is grammatical English"
    return said == "yes", None


def save_mend(db, person, item, form) -> str | None:
    """A judge item of a DE or DG split (or a control or baseline shown like one: its mend is
    stored, never verified): the judgement, and with it the person's own wrong option
    in place of an option they found right too (`mend_option`, `mend_text`: a candidate), or no
    mend (one saved before is withdrawn). A mend is only for "cannot be answered" for "multiple
    correct options", and must pass `mending.check`."""
    mend = None
    if mending.asked(form):
        if not mending.offered(item):
            return "this question takes no new option; leave the new option empty"
        if form.get("choice") != "unanswerable" or form.get("reason") != mending.MEND_REASON:
            return (f"a new option replaces a second right answer: choose “The question cannot be answered” "
                    f"with the reason “{mending.MEND_REASON}”, or choose “no new option”")
        mend = mending.check(db, item, form)
        if mend.problems:
            return " ".join(mend.problems)
    with store.transaction(db, immediate=True):
        error = save_judgement(db, person, item, form)
        if error:
            return error  # nothing was written
        if mend is None:
            store.delete_candidate(db, person["id"], item["id"])
        else:
            store.save_candidate(db, person["id"], item["id"], option=mend.option, text=mend.text)
    return None


def save_judgement(db, person, item, form) -> str | None:
    """A judge, verify, control or baseline item: an option, a span, or "cannot be answered"
    (and, for a highlighted sentence, whether it is grammatical)."""
    choice = form.get("choice", "")
    comment = form.get("comment", "")[:2000] or None
    grammatical, error = grammatical_answer(item, form)
    if error:
        return error
    if choice == "unanswerable":
        reason = form.get("reason", "")
        if reason not in store.REASONS:
            return "choose a reason why the question cannot be answered"
        store.save_annotation(db, person["id"], item["id"], unanswerable=True, reason=reason, comment=comment,
                              grammatical=grammatical)
        return None
    p = item["payload"]
    if item["task"] == MULTIPLE_CHOICE:
        if not choice.isdecimal() or int(choice) >= len(p["options"]):
            return "choose an option, or mark the question unanswerable"
        store.save_annotation(db, person["id"], item["id"], choice=int(choice), comment=comment,
                              grammatical=grammatical)
        return None
    text, start = form.get("answer_text", ""), form.get("answer_start", "")
    if not text.strip():
        return "select the answer in the paragraph, or mark the question unanswerable"
    if text not in p["context"]:
        return "the answer must be a span of the paragraph"
    if not start.isdecimal():
        return f"the answer “{text}” came without its position in the paragraph; select it again with the mouse"
    found = p["context"][int(start):int(start) + len(text)]
    if found != text:
        # Never moved to another occurrence: that would store a span the annotator did not select.
        return (f"the answer “{text}” does not match the paragraph at character {start} "
                f"(“{found}” is there); select it again with the mouse")
    store.save_annotation(db, person["id"], item["id"], answer_text=text, answer_start=int(start), comment=comment,
                          grammatical=grammatical)
    return None
