"""Checks of a new distractor (DE and DG, AdvRACE sections 3.1-3.2): it must be a wrong answer,
and not one that a reader can drop by its look. The order is the order a candidate meets them
while building (the first that refuses it is the count key in stats.json), the encoder's batched
cosine last. `DEFAULTS` are the distractor attacks' config defaults, which the audit uses for a
setting the split's config lacks."""

from __future__ import annotations

from advrace.core.text import words
from advrace.core.checks.form import form_giveaway, span_cut
from advrace.core.checks.grounding import grounded_share, repeats_question
from advrace.core.checks.option_identity import answer_equivalence, option_core, refers_to_options, same_option
from advrace.core.checks.question_kinds import asks_what_passage_states, negated_question
from advrace.core.checks.stated import asked_in_passage, nearly_stated, stated_in_passage

from . import OPTION, QUESTION, Check, register

DISTRACTOR_ATTACKS = ("distractor_extraction", "distractor_generation")
# What a negated question's options become: "keep" leaves them as they are; "stated" lets a new
# distractor in only where the passage states it (a NOT question's wrong options are things it says).
NEGATED_MODES = ("keep", "stated")
DEFAULTS = {
    "max_overlap_answer": 0.5,
    # Of RACE's own distractors that pass the word checks, 0.3% reach this MiniLM cosine with
    # their answer: minimal pairs such as "October 28" for "October 15".
    "max_answer_cosine": 0.9,
    "reject_stated_in_passage": True,
    "min_grounded_share": 0.5,
    "reject_form_giveaways": True,
    "negated_questions": "keep",
}


def setting(settings, key: str):
    """The split's (or attack's) value for a check's setting, else the attacks' default."""
    return settings[key] if settings and key in settings else DEFAULTS[key]


class OptionCheck(Check):
    scope = OPTION
    attacks = DISTRACTOR_ATTACKS


@register
class HasWords(OptionCheck):
    name, flag = "has_words", "distractor has no words"

    def refuse(self, subject, ctx, settings):
        return None if words(subject.text) else "has no words"


SPAN_CUT = "begins or ends inside a passage word"  # its count key in stats.json


@register
class SpanCut(OptionCheck):
    """A DE span that begins or ends inside a word of the passage ("h invented" of "Sequoyah
    invented", "man astonished" of "Boardman astonished"): read by the passage's characters on
    each side of the span, so a piece that is a word itself is refused too (the form check excuses
    such a piece in a generated option, which no one cut). Checked first, so that stats.json
    counts every such span under this one key."""

    name, flag = "span_cut", "distractor span cut inside a passage word"
    attacks = ("distractor_extraction",)

    def enabled(self, settings):
        return bool(setting(settings, "reject_form_giveaways"))

    def refuse(self, subject, ctx, settings):
        return SPAN_CUT if span_cut(subject.text, subject.example.passage) else None


@register
class AnswerEquivalent(OptionCheck):
    """Equal to, inside, holding every content word of, or mostly the words of the answer."""

    name, flag = "answer_equivalent", "distractor is the answer in other words"

    def refuse(self, subject, ctx, settings):
        return answer_equivalence(subject.text, subject.example.answer,
                                  max_overlap=setting(settings, "max_overlap_answer"), stopwords=ctx.stopwords)


# The relations that make a short option the answer in other words; an inflection ("old" beside
# "older") or a spelling is a different option, or a duplicate that `same_as_option` catches.
NEAR_MEANINGS = frozenset({"synonym", "hypernym", "hyponym", "sibling"})
SHORT_OPTION_WORDS = 3


@register
class AnswerNearMeaning(OptionCheck):
    """A short option that WordNet puts next to the short answer ("smog" for "air pollution",
    "glad" for "happy"): a second right answer that shares no word with it. Of RACE dev-middle's
    own short distractors, 7 of 1,958 are so (singer beside musician, machines beside computers)."""

    name, flag = "answer_near_meaning", "distractor is the answer in other words"

    def refuse(self, subject, ctx, settings):
        cand, answer = option_core(subject.text), option_core(subject.example.answer)
        if not cand or not answer or max(len(cand.split()), len(answer.split())) > SHORT_OPTION_WORDS:
            return None
        for pos in ("NOUN", "ADJ"):
            why = ctx.same_meaning(cand, answer, pos)
            if why in NEAR_MEANINGS:
                return f"a {why} of the answer"
        return None


@register
class SameAsOption(OptionCheck):
    """Another option but for articles or a subject pronoun ('at the school' beside 'at school')."""

    name, flag = "same_as_option", "duplicate options"

    def refuse(self, subject, ctx, settings):
        twin = next((o for o in subject.others if same_option(subject.text, o)), None)
        return None if twin is None else "repeats another option"


@register
class EchoesQuestion(OptionCheck):
    name, flag = "echoes_question", "distractor repeats the question"

    def refuse(self, subject, ctx, settings):
        return "repeats the question" if repeats_question(subject.text, subject.example.question,
                                                           ctx.stopwords) else None


@register
class RefersToOptions(OptionCheck):
    name, flag = "refers_to_options", "distractor refers to the other options"

    def refuse(self, subject, ctx, settings):
        return "refers to the other options" if refers_to_options(subject.text) else None


@register
class StatedForTrueQuestion(OptionCheck):
    """'Which is true?' is answered by every sentence the passage states, and by one that says
    what a sentence says in nearly its words ("They can even be deadly." for "Bad teeth can be
    painful and even be deadly."); a question the passage quotes ("Did you enjoy the evening?")
    is no statement and is refused too."""

    name, flag = "stated_in_passage", "distractor stated in the passage"

    def enabled(self, settings):
        return bool(setting(settings, "reject_stated_in_passage"))

    def refuse(self, subject, ctx, settings):
        ex = subject.example
        if not asks_what_passage_states(ex.question):
            return None
        if stated_in_passage(subject.text, ex.passage):
            return "stated in the passage"
        if asked_in_passage(subject.text, ex.passage):
            return "a question the passage asks"
        return "stated in the passage, nearly word for word" if \
            nearly_stated(subject.text, ex.passage, ctx.stopwords) else None


@register
class UnstatedForNegatedQuestion(OptionCheck):
    """With `negated_questions: stated`, a NOT/EXCEPT question's new distractor must be a thing the
    passage states: one it does not state is a second right answer to "Which is NOT mentioned?"."""

    name, flag = "unstated_for_negated", "new distractor of a negated question not stated in the passage"

    def enabled(self, settings):
        return setting(settings, "negated_questions") == "stated"

    def refuse(self, subject, ctx, settings):
        ex = subject.example
        return "not stated in the passage, for a negated question" if negated_question(ex.question) and \
            not stated_in_passage(subject.text, ex.passage) else None


@register
class Ungrounded(OptionCheck):
    """RACE's distractors are written from the passage; one about nothing in it gives itself away."""

    name, flag = "grounded", "distractor about nothing in the passage"

    def enabled(self, settings):
        return setting(settings, "min_grounded_share") > 0

    def refuse(self, subject, ctx, settings):
        ex = subject.example
        share = grounded_share(subject.text, [ex.passage, ex.question], ctx.stopwords)
        return "not grounded in the passage" if share < setting(settings, "min_grounded_share") else None


@register
class FormGiveaway(OptionCheck):
    """Compared with the question's original options: case, final stop, length; and a word of
    the passage cut, or a blank of it kept, where the option is a piece of it."""

    name, flag = "form", "distractor gives itself away by form"

    def enabled(self, settings):
        return bool(setting(settings, "reject_form_giveaways"))

    def refuse(self, subject, ctx, settings):
        why = form_giveaway(subject.text, list(subject.example.options), passage=subject.example.passage,
                            known_word=ctx.known_word)
        if why is None:
            return None
        # the length message carries numbers: one count key for it
        return "form: length unlike the other options" if why[0].isdigit() else f"form: {why}"


@register
class AnswerParaphrase(OptionCheck):
    """The paraphrase encoder's cosine with the answer, batched over a split."""

    name, flag = "answer_paraphrase", "distractor is the answer in other words"

    def enabled(self, settings):
        return setting(settings, "max_answer_cosine") is not None

    def refuse_many(self, subjects, ctx, settings):
        bound = setting(settings, "max_answer_cosine")
        cosines = ctx.cosines([(s.text, s.example.answer.strip()) for s in subjects]) if subjects else []
        return ["a paraphrase of the answer" if cos >= bound else None for cos in cosines]

    def refuse(self, subject, ctx, settings):
        return self.refuse_many([subject], ctx, settings)[0]


# ------------------------------------------------------------------ questions


class QuestionCheck(Check):
    scope = QUESTION
    attacks = DISTRACTOR_ATTACKS


@register
class AnswerNamesOptions(QuestionCheck):
    name, flag = "answer_names_options", "answer refers to replaced options"

    def refuse(self, subject, ctx, settings):
        return "the answer refers to the other options" if refers_to_options(subject.example.answer) else None


@register
class NegatedQuestion(QuestionCheck):
    """In "Which is NOT an advantage of Weibo?" every wrong option must be an advantage the passage
    states: a span or a generated sentence that is not is a second right answer. Such questions
    keep their options unless the config opts in (`negated_questions: stated`)."""

    name, flag = "negated_question", "negated question given new distractors"

    def enabled(self, settings):
        return setting(settings, "negated_questions") == "keep"

    def refuse(self, subject, ctx, settings):
        found = negated_question(subject.example.question)
        return "negated question" if found else None
