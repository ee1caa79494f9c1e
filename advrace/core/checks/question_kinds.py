"""What a multiple-choice question asks for, where that decides which new distractors are
valid: what the passage states ("Which is TRUE?": a stated sentence is a second right answer),
or the one option that does not fit ("Which is NOT true?", "All ... EXCEPT _")."""

from __future__ import annotations

import re

# A question that asks what the passage states or lets one infer: every sentence the passage
# states answers it, so such a sentence cannot be a distractor.
STATES_RE = re.compile(
    # "... is true (about/of/according ...)", not "the right way" or "turned right"
    r"\b(?:which|what)\b[^?]*(?:\b(?:is|are|was|were|be)|['\u2019]s)\s+(?:\w+\s+){0,2}(?:true|correct|right)\b"
    r"(?!\s+(?!about|of|in|according|to|for|from)\w)"
    r"|\bwe\s+(?:can|could|may|might)\s+(?:learn|know|infer|conclude|tell|see|find|understand|guess)\b"
    r"|\b(?:you\s+(?:can|could|may|might)|(?:can|could|may|might)\s+you)\s+(?:learn|infer|conclude|guess)\b"
    r"|\b(?:can|could|may|might)\s+(?:be\s+)?(?:learn(?:ed|t)?|inferr?ed|infer|conclud(?:ed|e)|known|seen|"
    r"told|found)\b"
    r"|\bwe\s+(?:learn|know|infer|conclude|guess)\b"
    r"|\b(?:infer|inferred|imply|implies|implied|suggest|suggests|suggested|conclude|concluded)\b"
    r"|\b(?:mentioned|stated|described|told|said)\s+in\s+the\s+(?:passage|text|article|story)\b"
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story)\s*,?\s*which\b"
    r"|\bwhat\s+does\s+the\s+(?:passage|text|article|story|writer|author)\s+(?:tell|show|say)\b"
    # "The passage indicates that _", "According to the passage, _": the blank is a whole statement
    r"|\b(?:passage|text|article|story|writer|author)\s+(?:also\s+|clearly\s+)?(?:indicates?|shows?|tells?\s+us|"
    r"says?|states?|reveals?|proves?)\s+(?:that\b|_)"
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story|writer|author)\s*,?\s*_"
    # "According to the story, Fleming _ .": the blank is all that is said of someone
    r"|\baccording\s+to\s+the\s+(?:passage|text|article|story|writer|author)\s*,\s*"
    r"(?:(?:the|a|an|this|that|these|those|his|her|their|our|my)\s+(?:[a-z]+\s+)?[a-z]+"
    r"|(?-i:[A-Z][a-z]+(?:\s+[A-Z][a-z]+)?)|he|she|they|we|you|it|people)\s+_+[\s.]*$",
    re.IGNORECASE)

# A question whose right answer is the one option that does NOT satisfy it ("Which is NOT an
# advantage of Weibo?", "All are true EXCEPT _", "Which statement is false?", "Bob doesn't have _ in
# his bag.", "Which places has Helen not visited yet?", "What did the boy never do?"): every other
# option must then satisfy it, so a new distractor that does not (a place the passage never says
# she visited) is a second right answer. The asked thing is what the negated verb is (not) true
# of: which, what or who is its subject or object. "Why didn't Tom go?", "How many states don't
# have the law?" and "Tom is not happy because _" ask for a reason, a number or a cause of
# something negated, which a new distractor does not become by failing to fit; they are not matched.
_NEG = r"(?:n['\u2019]t|\s+not|\s+never|\s+no\s+longer)"
_AUX = r"(?:is|are|was|were|does|do|did|can|could|should|would|will|has|have|may|might|must|need)"
_CONTRACTED = r"(?:can['\u2019]t|cannot|won['\u2019]t|shan['\u2019]t)"
_CONNECTIVE = (r"(?:because|if|when|whenever|so|since|as|until|till|unless|while|but|and|after|before|though|"
               r"although|means?|meant)")
# "What did Tom not like?" asks for what he disliked, an attitude a new distractor does not get by
# failing to fit; "Who doesn't like sports?" (the asked one is the subject) still asks for the exception
_ATTITUDE = r"(?:like|love|enjoy|want|wish|agree|believe|trust|care|mind|approve|accept|support)\b"
_SUBJECT = r"(?:(?-i:[A-Z][\w'\u2019]*)|he|she|they|we|you|i|it|(?:the|his|her|their|our|my|your)\s+\w+)"
# which, what or who that asks (the question's start, or after a comma or a preposition), not one
# that opens a relative clause ("Which is true about the boys who didn't go?")
_ASKING = (r"(?:^[\s.]*|[,;:!?\"\u201c(]\s*|\b(?:in|on|at|for|from|of|with|to|by|about|among|during)\s+)"
           r"(?:which|what|who)")
INVERTED_RE = re.compile(
    r"\bNOT\b|\bEXCEPT\b|(?i:\bexcept\s*(?:_|\.|\?|$)|\b(?:false|untrue|incorrect|inaccurate)\b"
    r"|\b(?:which|what)\b[^?]*?\b(?:is|are|was|were|be)\s+(?:\w+\s+)?wrong\s*(?:[?._]|$|according\b|about\b|in\b)"
    # "Which of the following is not ...", "What can't robots do?"; not "What did Amy do when she could not ..."
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?(?:{_AUX}{_NEG}|{_CONTRACTED})\b"
    rf"(?!\s+{_SUBJECT}\s+{_ATTITUDE})"
    # ... the subject between the auxiliary and its negation: "Which places has Helen not visited?",
    # "What did the boy never do?"; "Who never came?", "Which is no longer used?"
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?{_AUX}\s+"
    rf"(?:(?!{_CONNECTIVE}\b|{_AUX}\b)[\w'\u2019]+\s+){{1,3}}?(?:not|never|no\s+longer)\b(?!\s+{_ATTITUDE})"
    rf"|{_ASKING}\s+(?:(?!{_CONNECTIVE}\b)\w+\s+){{0,5}}?(?:never|no\s+longer)\b"
    r"|\bnot\s+about\s*\?"
    r"|\b(?:not|never|n['\u2019]t)\s+(?:\w+\s+)?(?:true|correct|right|mentioned|stated|included|"
    r"discussed|talked\s+about|referred\s+to|given|listed|shown|described|covered|inferred|learned|learnt|"
    r"concluded|known|found|told|said|implied|suggested)\b"
    r"|\b(?:cannot|can['\u2019]t|couldn['\u2019]t)\s+(?:we\s+|you\s+)?(?:be\s+)?"
    r"(?:learn|infer|conclude|know|tell|find|see)"
    # a blank completing a negated clause: "Bob doesn't have _", "_ is not a kind of fish"
    rf"|(?:\b(?:not|never)\b|n['\u2019]t\b|\b{_CONTRACTED})(?:(?!\b{_CONNECTIVE}\b)[^,;.?_])*_"
    r"|^[\s.]*_+\s+(?:is|are|was|were)\s+(?:not|never)\b)",
    re.MULTILINE)


def asks_what_passage_states(question: str) -> bool:
    """'What can we learn from the text?', 'Which is TRUE?', 'We can infer that _', 'According to
    the story, Fleming _.', unless it asks for the one that is not so (`negated_question`: then a
    stated sentence is the right distractor). A "not" elsewhere does not make it so: "Which is
    true about the boys who didn't go?" is answered by what the passage states."""
    return bool(STATES_RE.search(question)) and not negated_question(question)


def negated_question(question: str) -> str | None:
    """The words that make the question ask for the one option that does not satisfy it ("NOT",
    "EXCEPT", "false", "is not mentioned", "which is wrong"), or None."""
    found = INVERTED_RE.search(question)
    return " ".join(found.group().split()) if found else None
