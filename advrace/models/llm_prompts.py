"""The prompts a decoder LM is scored with, in one place, so that `advrace evaluate` and the
lm-evaluation-harness task folder of `advrace export --format lm-eval` give a model the same text.

Log-likelihood (`race_prompt` + `option_continuation`) is lm-evaluation-harness's RACE task for an
article with one question: "Article: ...\\n\\n" then the question, and each option as a
continuation after one space. Its `acc_norm` divides an option's log-likelihood by the option's
length in characters (`len(option)`), and so does advrace's.

Letter choice (`letter_prompt`) lists the options as A-D and scores the answer letter; SQuAD
(`squad_prompt`) asks for a short answer, generated greedily up to the first line break.
A few-shot prompt puts k solved examples before the question, each ended by its answer and
separated by a blank line (lm-evaluation-harness's default delimiters).
"""

from __future__ import annotations

LOGLIKELIHOOD, LETTER = "loglikelihood", "letter"  # the two ways of scoring a multiple-choice question
LETTERS = "ABCDEFGHIJ"
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
SQUAD_STOP = "\n"


def race_prompt(ex) -> str:
    """lm-evaluation-harness's RACE context for one question."""
    return f"Article: {ex.passage}\n\n{ex.question}"


def option_continuation(option: str) -> str:
    return TARGET_DELIMITER + option


def letter_prompt(ex) -> str:
    options = "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(ex.options))
    return f"Article: {ex.passage}\n\nQuestion: {ex.question}\n{options}\nAnswer:"


def letter_continuation(index: int) -> str:
    return TARGET_DELIMITER + LETTERS[index]


def squad_prompt(ex) -> str:
    title = f"Title: {ex.title}\n\n" if ex.title else ""
    return f"{title}Background: {ex.context}\n\nQuestion: {ex.question}\n\nAnswer:"


def squad_target(ex) -> str:
    return TARGET_DELIMITER + ex.answers[0].text if ex.answers else ""


def with_shots(prompt: str, shots: list[str]) -> str:
    """`prompt` after the solved examples `shots` (each a prompt and its answer)."""
    return FEWSHOT_DELIMITER.join([*shots, prompt])


def solved_mc(ex, method: str) -> str:
    """A few-shot example: its prompt and its gold answer, as the scored question's would read."""
    if method == LETTER:
        return letter_prompt(ex) + letter_continuation(ex.label)
    return race_prompt(ex) + option_continuation(ex.options[ex.label])


def solved_squad(ex) -> str:
    return squad_prompt(ex) + squad_target(ex)
