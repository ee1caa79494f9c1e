"""Where an adversarial sentence goes: last in the passage (Jia and Liang's AddSent, AddOneSent,
AddAny), or first (AddSentMod, which tests whether a model learned to skip the last sentence)."""

from __future__ import annotations


def place(example, sentence: str, prepend: bool):
    """The example with `sentence` added to its context, first or last (its answers' offsets moved)."""
    return example.insert_sentence(sentence, 0 if prepend else len(example.context))
