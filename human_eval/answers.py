"""What an annotator's answer form means: checked and stored in one place, for the web app and
for answers read back from a crowd platform's file alike."""

from __future__ import annotations

from advrace.core.tasks import MULTIPLE_CHOICE

from . import store


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
    return {"unanswerable": unanswerable, "choice": int(choice) if choice.isdigit() else None,
            "answer_text": "" if unanswerable else form.get("answer_text", ""),
            "answer_start": "" if unanswerable else form.get("answer_start", ""),
            "reason": form.get("reason") or None, "comment": form.get("comment", "")[:2000]}


def save_form(db, person, item, form: dict) -> str | None:
    """Check and store a person's answer form (field name -> text) for an item; returns what is
    wrong with it, if anything (nothing is stored then). The app and an imported crowd-platform
    file both go through here, so an answer means the same whichever way it came."""
    return save_judgement(db, person, item, form)


def save_judgement(db, person, item, form) -> str | None:
    """A judge, verify, control or baseline item: an option, a span, or "cannot be answered"."""
    choice = form.get("choice", "")
    comment = form.get("comment", "")[:2000] or None
    if choice == "unanswerable":
        reason = form.get("reason", "")
        if reason not in store.REASONS:
            return "choose a reason why the question cannot be answered"
        store.save_annotation(db, person["id"], item["id"], unanswerable=True, reason=reason, comment=comment)
        return None
    p = item["payload"]
    if item["task"] == MULTIPLE_CHOICE:
        if not choice.isdigit() or int(choice) >= len(p["options"]):
            return "choose an option, or mark the question unanswerable"
        store.save_annotation(db, person["id"], item["id"], choice=int(choice), comment=comment)
        return None
    text, start = form.get("answer_text", ""), form.get("answer_start", "")
    if not text.strip():
        return "select the answer in the paragraph, or mark the question unanswerable"
    if text not in p["context"]:
        return "the answer must be a span of the paragraph"
    if not start.isdigit():
        return f"the answer “{text}” came without its position in the paragraph; select it again with the mouse"
    found = p["context"][int(start):int(start) + len(text)]
    if found != text:
        # Never moved to another occurrence: that would store a span the annotator did not select.
        return (f"the answer “{text}” does not match the paragraph at character {start} "
                f"(“{found}” is there); select it again with the mouse")
    store.save_annotation(db, person["id"], item["id"], answer_text=text, answer_start=int(start), comment=comment)
    return None
