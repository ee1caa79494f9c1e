"""The shapes of a RACE question that its statement is made from, as patterns: a blank, a frame
after the question ("What's Tom? He's a _"), "Why ...? Because _", "What did X think of Y?", "How
many ... are there?", a title asked for; and what the declarative rules leave broken. Read by
`statements` (question + option -> sentence) and the AddSent recipe."""

from __future__ import annotations

import re

from advrace.core.text import BLANK_OR_PARENS_RE

TRAILING_DOTS_RE = re.compile(r"\s*(?:\.{3,}|…)\s*$")
# words that start sentences and names alike: never taken for a name by their case in the passage
FUNCTION_WORDS = frozenset({"it", "he", "she", "they", "we", "you", "i", "the", "a", "an", "this", "that", "these",
                            "those", "there", "his", "her", "their", "its", "our", "my", "your", "some", "many",
                            "most", "all", "no", "not", "because", "to", "in", "on", "at", "by", "for", "with"})
GLUED_ARTICLE_RE = re.compile(r"\b(in|on|at|of|to|for|from|with|by|about)-(?=(?:the|a|an|this|that|another)\b)",
                              re.IGNORECASE)
LEADING_JUNK_RE = re.compile(r"^[\s.]+")
SPACE_BEFORE_PUNCT_RE = re.compile(r"\s+([.,;:!?])")
TITLE_QUOTE_RE = re.compile(r"\"[^\"]+\"|“[^”]+”|'[A-Z][^']*'")
FINITE_TAGS = frozenset({"VBD", "VBZ", "VBP", "MD"})
CLAUSE_OPENER_RE = re.compile(r"^\s*because(?:\s+of)?\s+", re.IGNORECASE)

# why an option fits no slot of a wh-question (the recipe says such an option of someone else)
CLAUSE_OPTION = "clause option for a wh-question"
VERB_PHRASE_OPTION = "verb-phrase option for a wh-question"

ASKED_THEN_BLANK_RE = re.compile(r"\?\s*_+\s*$")
FRAME_PRONOUN_RE = re.compile(r"^\s*(he|she|it|they)(?=['’\s])", re.IGNORECASE)
BECAUSE_FRAME_RE = re.compile(r"^\W*because\W*_+\W*$", re.IGNORECASE)
ASKED_THEN_FRAME_RE = re.compile(r"^([^?]*\?)\s*(.*_.*)$", re.DOTALL)  # a question, then a frame with a blank
THERE_RE = re.compile(r"^how\s+many\s+(.+?)\s+(is|are|was|were)\s+there\b\s*(.*?)\s*\?*$", re.IGNORECASE)
FOLLOWING_RE = re.compile(r"\b(which|what)(?:\s+one)?\s+of\s+the\s+following\s+(?=(?:is|are|was|were|can|could|may|"
                          r"might|would|will|should|must|does|do|did|has|have|had|best|most)\b)", re.IGNORECASE)
DOUBLED_PREP_RE = re.compile(r"\b(?:in|at|on|by|because of)\s+(?=(?:in|on|at|by|during|before|after|from|because|"
                             r"anytime|every|last|next|today|tomorrow|yesterday|tonight|once|twice|always|never|"
                             r"until|till|since|within|through)\b)", re.IGNORECASE)
TITLE_RE = re.compile(r"\btitles?\b", re.IGNORECASE)
# a question whose verb takes a that-clause: the clause option follows it ("... tells us that X")
SAYING_RE = re.compile(r"\b(?:tell|say|think|believe|show|suggest|mean|know|learn|hope|feel|want to tell)\s*"
                       r"(?:us|you|me|them)?\s*\?*\s*$", re.IGNORECASE)
YES_NO_RE = re.compile(r"^\W*(?:yes|no)\b\s*[,.!]", re.IGNORECASE)
TITLE_BLANK_RE = re.compile(r"\btitles?\b[^_\"“]*\b(?:is|be)\s*_", re.IGNORECASE)  # a title asked, unquoted
THINK_OF_RE = re.compile(r"^what\s+(do|does|did)\s+(.+?)\s+think\s+(of|about)\s+(.+?)\s*\?*$", re.IGNORECASE)
OBJECT_TO_SUBJECT = {"him": "he", "her": "she", "them": "they", "me": "I", "us": "we", "it": "it"}
ABOUT_RE = re.compile(r"^what\s+(is|are|was|were)\s+(.+?)\s+((?:\w+ly\s+)?(?:about|like|for|from))\s*\?*$",
                      re.IGNORECASE)
# what the declarative rules leave broken: a stranded preposition at the end ("give his mother
# the drink to."), a sentence opening on a clitic ("N't have ..."), "because of" before a verb
BROKEN_RE = re.compile(r"\b(?:to|of|for|with|from|about|at|in|on|by)\.?$|^\W*n['’]t\b|\bbecause of (?:to|like)\b"
                       r"|\b(?:is|are|was|were) there\b|\bnot\s+\w+\s+(?:is|are|was|were)\s+because\b"
                       r"|\bof the following\b|\b(?:in|of|on|at|for|to|with) (?:is|are|was|were)\b",
                       re.IGNORECASE)


def has_blank(question: str) -> bool:
    """A fill-in-the-blank question: '_', '( )' or a trailing '...' takes the option."""
    return bool(BLANK_OR_PARENS_RE.search(question) or TRAILING_DOTS_RE.search(question))


def blank_spans(question: str) -> list[tuple[int, int]]:
    return [m.span() for m in BLANK_OR_PARENS_RE.finditer(question)]


def in_blank(tok, blanks) -> bool:
    """Whether a token is (part of) a blank: never swapped, negated or antonymised."""
    start, end = tok.idx, tok.idx + len(tok.text)
    return "_" in tok.text or any(s < end and start < e for s, e in blanks)
