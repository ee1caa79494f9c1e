"""An option said of someone the passage never names (rule `other_referent`): its subject moves
to a made-up person ("He", "Tom" -> "Jordan Lee"; "they" -> two names; "his mother" -> "Jordan
Lee's mother"; "the boy" -> "another boy"; a verb phrase gets a name as its subject), and a claim
about a kind becomes another person's belief. The sentence says nothing of the passage's own
people, so it can make no distractor true nor the gold false, while its words lure a reader that
matches them. AddSent uses it where the options are statements about the passage."""

from __future__ import annotations

import re
from collections import Counter

from advrace.core.checks.sentences import OTHER_REFERENT
from advrace.core.provenance import AdversarialSentence, Replacement
from advrace.core.text import WORD_RE, fold_case_and_spaces
from advrace.core.checks.option_identity import END_PUNCT_RE

from .question_swaps import apply_edits
from .reframing import reframe_edits, reframed_det
from .statements import clean_question, finish_sentence, fit_option
from .word_swaps import HONORIFICS

# Names for a sentence moved to another person: given names that are no one's gender, so a
# pronoun later in the sentence ("He lost his bag" -> "Jordan Lee lost his bag") still reads.
OTHER_PEOPLE = ("Jordan Lee", "Alex Morgan", "Sam Taylor", "Robin Clarke", "Casey Brown",
                "Jamie Wilson", "Taylor Reed", "Morgan Hill", "Chris Parker", "Kim Evans",
                "Drew Foster", "Jesse Grant")
THIRD_PERSON = frozenset({"he", "she"})
# "Which is NOT mentioned?": the gold said of anyone would be mentioned, so only distractors move
MENTIONED_RE = re.compile(r"\b(?:mention(?:ed)?|stated?|talk(?:ed)?|discuss(?:ed)?|referr?(?:ed)?|includ(?:ed|e)|"
                          r"list(?:ed)?|describ(?:ed|e)|cover(?:ed)?|given|shown|told|said)\b", re.IGNORECASE)
OPINION_RE = re.compile(r"\b(?:opinions?|facts?|believes?|thinks?)\b", re.IGNORECASE)
POSSESSIVE_PRONOUNS = frozenset({"his", "her", "their", "its"})


def other_names(example, rng) -> list[str]:
    """OTHER_PEOPLE less any whose words the passage, question or options use, in rng order."""
    seen = {w.lower() for w in WORD_RE.findall(" ".join([example.passage, example.question, *example.options]))}
    names = [n for n in OTHER_PEOPLE if not any(w.lower() in seen for w in n.split())]
    rng.shuffle(names)
    return names


def name_used(entry: AdversarialSentence, names: list[str]) -> None:
    """Take a name out of `names` once a sentence uses it, so two sentences name two people."""
    for rep in entry.replacements:
        if rep.kind == OTHER_REFERENT:
            names[:] = [n for n in names if n not in rep.new]


def said_of_others(example, options: list[int], names: list[str], want: int, refusal, resources, inflect
                   ) -> tuple[list[AdversarialSentence], Counter]:
    """Up to `want` sentences, each an option of `options` in turn said of someone else ('He went
    to Beijing.' -> 'Jordan Lee went to Beijing.', 'The boy was sad.' -> 'Another boy was sad.'),
    and the refusals counted; `refusal(example, entry, sentences)` says why a sentence may not go
    in (said already, the gold's text, a check), or None."""
    question = clean_question(example.question)
    chosen, refused, sentences = [], Counter(), set()
    for i in options:
        if len(chosen) == want:
            break
        made = moved_subject(example.options[i], names, example.question, resources, inflect)
        if isinstance(made, str):
            refused[made] += 1
            continue
        entry = AdversarialSentence(made[0], question=question, replacements=made[1],
                                    answer=example.options[i], option=i, rule=OTHER_REFERENT)
        why = refusal(example, entry, sentences)  # the gold must move too, not be believed
        if why:
            refused[why] += 1
            continue
        name_used(entry, names)
        sentences.add(fold_case_and_spaces(entry.sentence))
        chosen.append(entry)
    return chosen, refused


def moved_subject(option: str, names: list[str], question: str, resources, inflect):
    """(sentence, replacements) with the option's subject moved to another referent, or why
    not: a name or he/she becomes a name from OTHER_PEOPLE (they: two names), a possessive
    his/her/Tom's the name's, 'the N' becomes 'another N' ('other Ns'), a verb phrase gets a
    name as its subject. A claim about a kind ('Teenagers need less sleep.') is never made:
    inserted in the passage it is the writer's own."""
    text = END_PUNCT_RE.sub("", " ".join(option.split())).rstrip(" ,;:")
    doc = resources.parse(text)
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    subj = root and next((c for c in root.children if c.dep_ in ("nsubj", "nsubjpass")), None)
    if subj is None and doc[0].tag_ == "VB" and doc[0].pos_ == "VERB" and names:
        # "Try to make the man laugh." -> "Jordan Lee tried to make the man laugh."
        past = inflect(doc[0].lemma_.lower(), "VBD")
        if past is None or any(t.lower_ in ("you", "your", "yourself") for t in doc):
            return "no subject to move to another referent"
        new = f"{names[0]} {past}"
        edits = reframe_edits(doc) + [(0, len(doc[0].text), new, Replacement(
            0, len(doc[0].text), doc[0].text, new, OTHER_REFERENT, changes_meaning=True))]
        return finish_sentence(apply_edits(text, edits)), tuple(e[3] for e in sorted(edits, key=lambda e: e[0]))
    if subj is None:
        subj = next((c for c in root.children if c.dep_ == "csubj"), None) if root else None
        return _believed(text, doc, subj, names, question, resources) if subj is not None else \
            "no subject to move to another referent"
    edits = reframe_edits(doc)
    det = reframed_det(subj)
    if det is None or not any(e[0] == det.idx for e in edits):
        edits += _subject_edit(doc, subj, names)
        if not any(e[3].kind != "reframe" for e in edits):
            return _believed(text, doc, subj, names, question, resources)
    sentence = finish_sentence(apply_edits(text, edits))
    return sentence, tuple(e[3] for e in sorted(edits, key=lambda e: e[0]))


def _believed(text: str, doc, subj, names: list[str], question: str, resources):
    """A claim about a kind ('Teenagers need less sleep than adults.') as another person's
    belief ('Jordan Lee believes that teenagers need ...'): in the passage, the writer reports
    it without stating it. Not for a subject that points back into the passage (it, this,
    there, the N): 'Jordan Lee believes that it is in a big city' speaks of its city."""
    det = next((c for c in subj.children if c.dep_ == "det"), None)
    generic = subj.pos_ == "NOUN" and (det is None or det.lower_ in ("a", "an", "some", "many", "most", "all", "every"))
    if doc[0].tag_ in ("WRB", "WP", "WDT"):  # "Why disasters are dangerous.": no statement to believe
        return "no subject to move to another referent"
    if OPINION_RE.search(question):  # "Which is an opinion?": a fact believed is one
        return "a belief for a question about opinions"
    if not names or not (generic or subj.dep_ == "csubj" or subj.tag_ == "VBG") \
            or any(c.dep_ == "poss" for c in subj.children):
        return "no subject to move to another referent"
    new = f"{names[0]} believes that"
    record = Replacement(0, 0, "", new, OTHER_REFERENT, changes_meaning=True)
    return finish_sentence(f"{new} {fit_option(text, False, True, resources)}"), (record,)


def _subject_edit(doc, subj, names: list[str]) -> list:
    def edit(first, last, new, kind=OTHER_REFERENT):
        start, end = doc[first].idx, doc[last].idx + len(doc[last].text)
        old = doc.text[start:end]
        return [(start, end, new, Replacement(start, end, old, new, kind, changes_meaning=True))]

    def name_run(tok):
        first = tok.i
        while first > 0 and (doc[first - 1].pos_ == "PROPN" or
                             doc[first - 1].lower_.rstrip(".") in HONORIFICS):
            first -= 1
        return first

    if subj.lower_ in ("they", "we") and len(names) >= 2 and (subj.lower_ == "they" or not any(
            t.lower_ in ("us", "our", "ours", "ourselves") for t in doc)):
        return edit(subj.i, subj.i, f"{names[0]} and {names[1]}")
    person = {"i": {"i", "me", "my", "mine", "myself"}, "you": {"you", "your", "yours", "yourself"}}
    if subj.lower_ in person and names and not any(t.lower_ in person[subj.lower_] for t in doc if t.i != subj.i) and any(
            a.tag_ == "MD" or a.tag_ == "VBD" and a.lower_ != "were" for a in [subj.head, *subj.head.children]):
        return edit(subj.i, subj.i, names[0])  # "You can open the windows." - no agreement to mend
    if subj.lower_ in THIRD_PERSON or subj.pos_ == "PROPN":
        if not names or (subj.pos_ == "PROPN" and any(c.dep_ == "det" for c in subj.children)):
            return []
        return edit(subj.i if subj.pos_ != "PROPN" else name_run(subj), subj.i, names[0])
    if subj.pos_ != "NOUN":
        return []
    poss = next((c for c in subj.children if c.dep_ == "poss"), None)
    if poss is not None:
        if poss.lower_ in POSSESSIVE_PRONOUNS and poss.lower_ != "its" and names:
            return edit(poss.i, poss.i, names[0] + "'s")
        if poss.pos_ == "PROPN" and names:
            return edit(name_run(poss), poss.i, names[0])
        return []
    det = next((c for c in subj.children if c.dep_ == "det" and c.i < subj.i), None)
    if det is not None and det.lower_ in ("the", "this", "that", "these", "those"):
        return edit(det.i, det.i, "other" if subj.tag_ == "NNS" else "another")
    # a bare or indefinite noun ("Teenagers need less sleep.", "A hobby can make you
    # outstanding.") says something of a kind, not of someone: moved to a neighbour
    # ("Youngsters need less sleep.") the passage's writer would state the distractor itself
    return []
