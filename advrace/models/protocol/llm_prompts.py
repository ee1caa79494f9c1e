"""The prompts a decoder LM is scored with, in one place, so that `advrace evaluate` and the
lm-evaluation-harness task folder of `advrace export --format lm-eval` give a model the same text.

Log-likelihood (`race_prompt` + `option_continuation`) is lm-evaluation-harness's RACE task for an
article with one question: "Article: ...\\n\\n" then the question, and each option as a
continuation after one space. Its `acc_norm` divides an option's log-likelihood by the option's
length in characters (`len(option)`), and so does advrace's (`acc_norm.per_character`).

Letter choice (`letter_prompt`) lists the options as A-D and scores the answer letter; SQuAD
(`squad_prompt`) asks for a short answer, generated greedily up to the first line break.
A few-shot prompt puts k solved examples before the question, each ended by its answer and
separated by a blank line (lm-evaluation-harness's default delimiters).
"""

from __future__ import annotations

from advrace.core.text import LETTERS

LOGLIKELIHOOD, LETTER = "loglikelihood", "letter"  # the two ways of scoring a multiple-choice question
GENERATION = "generation"  # how a SQuAD question is answered
TARGET_DELIMITER = " "
FEWSHOT_DELIMITER = "\n\n"
SQUAD_STOP = "\n"
# the templates, as the scoring protocol records them (advrace.models.protocol.scoring_protocol)
RACE_PROMPT = "Article: {passage}\n\n{question}"
LETTER_PROMPT = "Article: {passage}\n\nQuestion: {question}\n{lettered_options}\nAnswer:"
SQUAD_PROMPT = "{title_line}Background: {context}\n\nQuestion: {question}\n\nAnswer:"
# lm-evaluation-harness's own race task (lm_eval/tasks/race/preprocess_race.py), one per article
LM_EVAL_RACE_PROMPT = ("Article: {article}\n\n{earlier questions, each 'Question: {question}\nAnswer: {answer}\n', "
                       "or a question ending '  _  .' written with its answer in the blank and a line break}"
                       "{last question}")


def race_prompt(ex) -> str:
    """lm-evaluation-harness's RACE context for one question."""
    return RACE_PROMPT.format(passage=ex.passage, question=ex.question)


def option_continuation(option: str) -> str:
    return TARGET_DELIMITER + option


def letter_prompt(ex) -> str:
    options = "\n".join(f"{LETTERS[i]}. {option}" for i, option in enumerate(ex.options))
    return LETTER_PROMPT.format(passage=ex.passage, question=ex.question, lettered_options=options)


def letter_continuation(index: int) -> str:
    return TARGET_DELIMITER + LETTERS[index]


def squad_prompt(ex) -> str:
    title = f"Title: {ex.title}\n\n" if ex.title else ""
    return SQUAD_PROMPT.format(title_line=title, context=ex.context, question=ex.question)


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
