"""What both authoring pages accept of a posted draft before a model reads it: a JSON object
whose texts are strings, the long one (a passage or paragraph) at most `MAX_TEXT` characters."""

from __future__ import annotations

MAX_TEXT = 20000


def text_problem(draft, long_field: str, shown: str) -> str | None:
    """What is wrong with the draft's shape (None: nothing); `long_field` holds the passage or
    paragraph, called `shown` on the page, beside the question."""
    if not isinstance(draft, dict):
        return "expected a JSON object"
    if not isinstance(draft.get(long_field), str) or not isinstance(draft.get("question"), str):
        return f"{shown} and question must be text"
    if len(draft[long_field]) > MAX_TEXT:
        return f"the {shown} is too long ({MAX_TEXT:,} characters at most)"
    return None
