"""lm-evaluation-harness's `acc_norm`: an option's log-likelihood divided by its length in characters.

lm-eval (`lm_eval/api/task.py`, `process_results` of a `multiple_choice` task) divides by
`len(choice)` for each choice as `doc_to_choice` returns it: the option's own characters, without
the target delimiter (the space that `construct_requests` puts before it in the continuation), and
characters rather than tokens (which would tie the number to the tokenizer) or UTF-8 bytes (its
`acc_bytes`). Evaluation's accuracy_norm and the answerability judge's scale both read it here, so
the two can never normalise differently.
"""

from __future__ import annotations

from collections.abc import Sequence


def per_character(scores: Sequence[float], options: Sequence[str]) -> list[float]:
    """Each option's score divided by the option's length in characters, as lm-eval's acc_norm
    does. An empty option counts as one character, where lm-eval would divide by zero."""
    return [score / max(len(option), 1) for score, option in zip(scores, options)]
