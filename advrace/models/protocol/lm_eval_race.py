"""lm-evaluation-harness's own `race` task, rebuilt from a release's questions, so that advrace can
reproduce lm-eval's RACE number.

lm-eval's `race` (lm_eval/tasks/race: race.yaml + preprocess_race.py, task version 3.0 in 0.4.13)
is not advrace's one-question prompt (advrace.models.protocol.llm_prompts.race_prompt). It reads
EleutherAI/race, config `high`, split `test`: one row per *article*, `article` (the text) and
`problems`, a *string* holding a Python literal (read with `ast.literal_eval`) of the article's
questions in RACE's order, each `{"question", "answer" (a letter A-D), "options" (4 strings)}`.
Per article:

- only the LAST problem is scored (`doc_to_choice`: its options 0-3; `doc_to_target`: its
  answer letter as 0-3; metric `acc`, the option of highest summed log-likelihood);
- the context (`doc_to_text`) is `"Article: " + article + "\\n\\n"`, then for each EARLIER
  problem, in order: when the question's last six characters are exactly `"  _  ."` (a blank at
  the end of a sentence), the question less its last five characters, then the gold option, then
  `"\\n"` (`"I like  _  ."` with answer "dogs" gives `"I like dogs\\n"`: the blank's left pair
  of spaces keeps one); any other question (a blank elsewhere too) gives
  `"Question: " + question + "\\nAnswer: " + gold option + "\\n"`; and last the scored
  question itself, as it is (its blank left in place), with nothing after it;
- zero-shot, no description: the prompt is `doc_to_text` alone, and each option is scored as the
  continuation `" " + option` (the default `target_delimiter`).

An article with one question is `"Article: ...\\n\\n" + question`: advrace's own prompt.

`documents(examples)` groups a split's questions by article (the source id `<passage id>-<k>`
that every RACE format gives, `k` the question's place in its passage) and returns one
`RaceDocument` per article, in the order articles first appear; `contexts(examples)` is
`{scored question's id: context}` for `CausalLMScorer(contexts=...)`, which is then given
`[d.example for d in documents]`. `eleuther_row` writes an article as an EleutherAI/race row, to
run lm-eval's task itself on the same articles.

What a split holds is what is grouped: a release built with `--limit` can end with part of an
article, whose last question present is then scored. The article text is the scored question's
passage (on the original split every question of an article has the same one).
EleutherAI/race groups the Hub's rows by article *text*; here articles are grouped by passage id,
the same thing unless two RACE files hold one text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advrace.core.examples import MCExample
from advrace.core.text import LETTERS

TARGET_DELIMITER = " "  # lm-eval's default target_delimiter; the race task keeps it
N_OPTIONS = 4  # doc_to_choice takes options 0-3
END_BLANK = "  _  ."  # a question ending with this is rendered as the filled-in sentence
_SOURCE_ID = re.compile(r"^(?P<article>.+)-(?P<k>\d+)$")


@dataclass(frozen=True)
class RaceDocument:
    """One lm-eval `race` document: an article and its questions, the last one scored."""

    article_id: str
    questions: tuple[MCExample, ...]  # the article's questions in RACE's order; the last is scored
    context: str  # lm-eval's doc_to_text
    continuations: tuple[str, ...]  # lm-eval's target_delimiter + doc_to_choice

    @property
    def example(self) -> MCExample:
        """The scored question."""
        return self.questions[-1]

    @property
    def target(self) -> int:
        """lm-eval's doc_to_target: the scored question's gold option."""
        return self.example.label


def article_key(ex: MCExample) -> tuple[str, int]:
    """(passage id, the question's place in it) from the source id `<passage id>-<k>`."""
    found = _SOURCE_ID.match(ex.source_id)
    if found is None:
        raise ValueError(f"{ex.id}: source id {ex.source_id!r} does not name its passage and question "
                         "(`<passage id>-<k>`, as every RACE format writes it)")
    return found["article"], int(found["k"])


def _checked(ex: MCExample) -> MCExample:
    if len(ex.options) != N_OPTIONS:
        raise ValueError(f"{ex.id}: lm-eval's race task takes exactly {N_OPTIONS} options, "
                         f"this question has {len(ex.options)}")
    return ex


def group_articles(examples) -> list[tuple[str, tuple[MCExample, ...]]]:
    """(passage id, its questions in RACE's order) per article, in the order articles first appear."""
    articles: dict[str, dict[int, MCExample]] = {}
    for ex in examples:
        article, k = article_key(_checked(ex))
        questions = articles.setdefault(article, {})
        if k in questions:
            raise ValueError(f"{ex.id}: question {k} of {article} appears twice "
                             f"(also as {questions[k].id}); give one split's questions")
        questions[k] = ex
    return [(article, tuple(qs[k] for k in sorted(qs))) for article, qs in articles.items()]


def solved_question(ex: MCExample) -> str:
    """An earlier question of the article with its gold answer, as doc_to_text writes it."""
    if ex.question[-len(END_BLANK):] == END_BLANK:
        return ex.question[:-(len(END_BLANK) - 1)] + ex.answer + "\n"
    return "Question: " + ex.question + "\n" + "Answer: " + ex.answer + "\n"


def race_context(questions) -> str:
    """lm-eval's race doc_to_text for an article's questions (in order; the last is scored)."""
    *earlier, scored = questions
    return ("Article: " + scored.passage + "\n\n" + "".join(solved_question(q) for q in earlier)
            + scored.question)


def documents(examples) -> list[RaceDocument]:
    """One lm-eval race document per article of `examples` (a RACE split's questions)."""
    return [RaceDocument(article, questions, race_context(questions),
                         tuple(TARGET_DELIMITER + o for o in questions[-1].options))
            for article, questions in group_articles(examples)]


def contexts(examples) -> dict[str, str]:
    """{scored question's id: lm-eval's race context}, one entry per article."""
    return {d.example.id: d.context for d in documents(examples)}


def eleuther_row(questions) -> dict:
    """An article as a row of EleutherAI/race: `article` and `problems`, a Python literal as a
    string (its questions in order, each with its answer letter)."""
    problems = [{"question": q.question, "answer": LETTERS[q.label], "options": list(q.options)}
                for q in map(_checked, questions)]
    return {"article": questions[-1].passage, "problems": repr(problems)}
