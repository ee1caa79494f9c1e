"""Is an inserted sentence English? Rules over its dependency parse for what the question-to-
statement rules leave broken (read on XQuAD-en, issue 46): a sentence that is still a question, a
preposition that lost its object ("Soulias Morris from is in Paris."), two auxiliaries in a row
("which will must have"), a verb of the wrong form after an auxiliary ("would changing"), and
"because of" before no noun phrase ("because of to the Lord"), among others (RULE_KINDS).

The parse comes from the caller (`CheckContext.parse`: spaCy, in the audit and the attacks), so
this floor imports no parser: a doc is any sequence of tokens with `.text`, `.tag_` (Penn
Treebank), `.dep_` (ClearNLP labels), `.head`, `.lemma_` and `.i`. A language model's fluency
outlier against its split's own distribution is judged by the audit (advrace.release.audit),
which sees the whole split.
"""

from __future__ import annotations

from . import SENTENCE, Check, register
from .sentences import SENTENCE_ATTACKS

QUESTION_FORM = "question form"
STRANDED = "stranded preposition"
DOUBLED_AUX = "doubled auxiliary"
AUX_FORM = "wrong verb form after an auxiliary"
BECAUSE_OF = "because of without a noun phrase"
PASSIVE_OBJECT = "object after a passive verb"
NO_FINITE = "no finite verb"
ARTICLE = "a or an before the wrong sound"
FLUENCY = "fluency outlier"  # the audit's, against the split's distribution
RULE_KINDS = (QUESTION_FORM, STRANDED, DOUBLED_AUX, AUX_FORM, BECAUSE_OF, PASSIVE_OBJECT, NO_FINITE, ARTICLE)
KINDS = RULE_KINDS + (FLUENCY,)

WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
FINITE = frozenset({"VBD", "VBZ", "VBP"})
AUX_LEMMAS = frozenset({"be", "have", "do"})
SUBJECTS = frozenset({"nsubj", "nsubjpass", "csubj"})
# words that invert a statement's subject and auxiliary: "Never had he seen", "Only then did she"
INVERTING = frozenset({"never", "only", "rarely", "seldom", "hardly", "scarcely", "nor", "neither", "so",
                       "little", "than", "as", "until"})
# a conditional's inversion: "Had he known, ...", "Were it not for ..., ", "Should you need ..., "
CONDITIONAL = frozenset({"had", "were", "should"})
# prepositions proper (no subordinators: "as planned", "when asked", "than expected" are English)
PREPOSITIONS = frozenset({"of", "by", "for", "from", "to", "with", "in", "on", "at", "about", "into", "onto",
                          "over", "under", "between", "through", "during", "without", "against", "among",
                          "within", "upon", "toward", "towards", "across", "behind", "beyond", "near"})
# verbs that keep an object in the passive ("He was given a book", "She was named chair")
DITRANSITIVE = frozenset({"give", "award", "grant", "offer", "tell", "show", "send", "pay", "teach", "ask",
                          "promise", "deny", "allow", "charge", "lend", "hand", "name", "call", "elect",
                          "appoint", "make", "consider", "owe", "assign", "bring", "leave", "sell", "cost",
                          "accord", "afford", "refuse", "spare", "save", "serve", "feed", "fine", "dub",
                          "crown", "title", "rename", "vote", "declare", "label", "term", "nickname"})
# what follows no modal in a statement ("would a rise in wages be"): its verb comes first
NOT_AFTER_MODAL = frozenset({"DT", "PDT", "PRP$", "NN", "NNS", "NNP", "NNPS", "JJ", "CD", "IN"})
# nominative pronouns: "because of he was ill" has a clause where "of" takes a noun phrase
NOMINATIVE = frozenset({"i", "he", "she", "we", "they"})


def _words(doc) -> list:
    return [t for t in doc if t.tag_ not in (".", ",", ":", "``", "''", "-LRB-", "-RRB-", "HYPH", "NFP")]


def _is_verb(tok) -> bool:
    return tok.tag_.startswith("VB") or tok.tag_ == "MD"


def _auxiliary(tok) -> bool:
    """A modal, or a finite be/have/do heading or helping a verb."""
    return tok.tag_ == "MD" or (tok.tag_ in FINITE and tok.lemma_.lower() in AUX_LEMMAS)


def _relative(wh, doc) -> bool:
    """A wh-word that opens a relative clause or an embedded question, not one that asks: it comes
    after a noun, a pronoun, a comma or a verb ("the year when", "he asked where")."""
    prev = [t for t in doc if t.i < wh.i]
    return bool(prev) and (prev[-1].tag_.startswith(("NN", "PRP", "VB")) or prev[-1].tag_ in (",", "IN", "DT", "CD"))


def _in_name(wh, doc) -> bool:
    """"Doctor Who", "The Who": a capitalised wh-word after a determiner or a name is a title."""
    prev = [t for t in doc if t.i < wh.i]
    return wh.text[:1].isupper() and bool(prev) and prev[-1].tag_ in ("DT", "NNP", "NNPS")


def _question_form(doc) -> list[str]:
    words = _words(doc)
    if not words:
        return []
    out = []
    if doc[len(doc) - 1].text.strip().endswith("?"):
        out.append("ends with '?'")
    first = words[0]
    for a in words:
        if not _auxiliary(a):
            continue
        verb = a if a.dep_ not in ("aux", "auxpass") else a.head
        subject = next((s for s in doc if s.dep_ in SUBJECTS and s.head.i == verb.i and s.i > a.i), None)
        if subject is None:
            continue
        before = [t for t in words if t.i < a.i]
        wh = next((t for t in reversed(before) if t.tag_ in WH_TAGS and t.text.lower() in WH_WORDS), None)
        inverted = any(t.text.lower() in INVERTING for t in before) or (
            len(before) > 1 and before[0].text.lower() == "not" and before[1].text.lower() in ("only", "until"))
        if a.i == first.i:
            if not (a.text.lower() in CONDITIONAL and any(t.text == "," for t in doc if t.i > a.i)):
                out.append(f"starts with {a.text!r} before its subject {subject.text!r}")
        elif a.dep_ in ("aux", "auxpass") and not inverted:
            out.append(f"{a.text!r} before its subject {subject.text!r}")
        elif wh is not None and not _relative(wh, doc) and not _in_name(wh, doc) \
                and not any(_is_verb(t) for t in before if t.i > wh.i) \
                and not any(t.text.lower() in INVERTING for t in before if t.i < wh.i):
            out.append(f"{wh.text!r} {a.text!r} before the subject {subject.text!r}")
    root = next((t for t in doc if t.dep_ == "ROOT"), None)
    if out and not out[0].startswith("ends"):
        root = None  # an inversion found already says where it asks
    for wh in words:
        if root is None or wh.i > root.i or wh.tag_ not in WH_TAGS or wh.text.lower() not in WH_WORDS:
            continue
        if any(_is_verb(t) for t in words if t.i < wh.i) or _in_name(wh, doc):
            continue
        tok, seen = wh, set()
        while tok.head.i != tok.i and tok.head.i != root.i and not _is_verb(tok.head) and tok.i not in seen:
            seen.add(tok.i)
            tok = tok.head
        if tok.head.i == root.i and tok.i != root.i:
            out.append(f"asks with {wh.text!r} before its verb {root.text!r}")
            break
    return out


def _ends_relative(p, tokens) -> bool:
    """A preposition that ends a relative clause ("the time that a certificate is good for is",
    "the house he lived in was"): a relative pronoun before it, or a relative clause above it."""
    if any(t.i < p.i and t.tag_ in ("WDT", "WP") and t.text.lower() in ("that", "which", "who", "whom")
           for t in tokens):
        return True
    tok, seen = p, set()
    while tok.head.i != tok.i and tok.i not in seen:
        seen.add(tok.i)
        tok = tok.head
        if tok.dep_ == "relcl":
            return True
    return False


def _stranded(doc) -> list[str]:
    out = []
    tokens = list(doc)
    for p in tokens:
        nxt = tokens[p.i + 1] if p.i + 1 < len(tokens) else None
        if p.tag_ == "TO" and nxt is not None and (nxt.tag_ in FINITE | {"VBN", "MD"}):
            out.append(f"{p.text!r} before {nxt.text!r}")
            continue
        if p.tag_ != "IN":
            continue
        if p.text.lower() in PREPOSITIONS and nxt is not None and (
                nxt.tag_ == "VBN" or (nxt.tag_ in FINITE | {"MD"} and not _ends_relative(p, tokens))):
            out.append(f"{p.text!r} before {nxt.text!r}")
            continue
        if p.dep_ not in ("prep", "dative", "agent"):
            continue
        if any(c.head.i == p.i and c.i != p.i and c.tag_ not in (".", ",") for c in tokens):
            continue  # it has an object (or a second preposition: "out of the city")
        head = p.head
        if (not _is_verb(head) or head.i > p.i) and not _ends_relative(p, tokens):
            out.append(f"{p.text!r} has no object" + (f" before {nxt.text!r}" if nxt is not None and nxt.tag_ != "." else ""))
    return out


def _verb_chain(doc) -> tuple[list[str], list[str]]:
    """(doubled auxiliaries, wrong verb forms) after each modal or do-support."""
    doubled, form = [], []
    tokens = list(doc)
    for a in tokens:
        modal = a.tag_ == "MD"
        do = a.lemma_.lower() == "do" and a.tag_ in FINITE and a.dep_ == "aux"
        be_have = a.lemma_.lower() in ("be", "have") and a.tag_ in FINITE
        if not (modal or do or be_have):
            continue
        nxt = next((t for t in tokens if t.i > a.i and not t.tag_.startswith("RB")), None)
        if be_have and not (nxt is not None and nxt.i == a.i + 1):
            continue  # "is is" aside, be and have are judged beside the next word only
        if modal and nxt is not None and nxt.tag_ in NOT_AFTER_MODAL and a.i != _words(doc)[0].i:
            form.append(f"{a.text!r} before {nxt.text!r}, no verb")  # "would a rise in wages be"
            continue
        if nxt is None or not _is_verb(nxt):
            continue
        pair = f"{a.text!r} {nxt.text!r}"
        if nxt.tag_ == "MD" or (nxt.tag_ in FINITE and nxt.lemma_.lower() in AUX_LEMMAS):
            doubled.append(pair)
        elif (modal or do) and nxt.tag_ != "VB":
            form.append(pair)
    return doubled, form


def _because_of(doc) -> list[str]:
    tokens = list(doc)
    out = []
    for i in range(len(tokens) - 2):
        a, b, c = tokens[i], tokens[i + 1], tokens[i + 2]
        if a.text.lower() == "because" and b.text.lower() == "of" and (
                c.tag_ in ("TO", "IN", "MD", "WDT", "WRB") or c.tag_ in FINITE or c.text.lower() in NOMINATIVE):
            out.append(f"'because of {c.text}'")
    return out


def _passive_object(doc) -> list[str]:
    """"The name of the follower was ennobled Oscar Whitfield": a fake put after a passive verb
    that takes no object."""
    tokens = list(doc)
    out = []
    for v in tokens:
        if v.tag_ != "VBN" or v.lemma_.lower() in DITRANSITIVE:
            continue
        kids = [t for t in tokens if t.head.i == v.i and t.i != v.i]
        if any(k.dep_ == "auxpass" for k in kids):
            out += [f"{v.text!r} {k.text!r}" for k in kids if k.dep_ == "dobj" and k.i > v.i][:1]
    return out


def _no_finite(doc) -> list[str]:
    """"Calvin's writings to spread to Paris in 1915.": a statement needs a finite verb."""
    words = _words(doc)
    if not words or any(t.tag_ in FINITE or t.tag_ == "MD" for t in words):
        return []
    root = next((t for t in words if t.dep_ == "ROOT"), None)
    # only a root verb in a non-finite form: a root noun or participle is as often the tagger's
    # misreading of a rare past tense ("The decree of 1763 forbade/JJ trade", "The committee named/VBN GSM")
    return [f"root {root.text!r}"] if root is not None and root.tag_ in ("VB", "VBG") else []


# words spelt with a vowel that start with a consonant sound, and the reverse ("a university", "an hour")
_CONSONANT_SOUND = ("uni", "use", "usu", "uti", "ura", "ure", "euro", "eu", "one", "once", "ubiq", "uk")
_VOWEL_SOUND = ("hour", "honest", "honor", "honour", "heir", "herb")


def _article(doc) -> list[str]:
    """"a evolutionary situation", "an transliteration": the article against the next word's
    first letter, in lowercase words only (an acronym or a name is read by its letters: "an FBI")."""
    tokens = list(doc)
    out = []
    for a, w in zip(tokens, tokens[1:]):
        art, word = a.text.lower(), w.text
        if art not in ("a", "an") or not word[:1].isalpha() or not word.islower():
            continue
        vowel = word[0] in "aeiou" and not word.startswith(_CONSONANT_SOUND)
        vowel = vowel or word.startswith(_VOWEL_SOUND)
        if (art == "a") == vowel:
            out.append(f"{a.text!r} {word!r}")
    return out


def grammar_findings(doc) -> list[tuple[str, str]]:
    """(kind, where) for each problem the rules find in a parsed sentence, kinds in RULE_KINDS order."""
    doubled, form = _verb_chain(doc)
    found = {QUESTION_FORM: _question_form(doc), STRANDED: _stranded(doc), DOUBLED_AUX: doubled,
             AUX_FORM: form, BECAUSE_OF: _because_of(doc), PASSIVE_OBJECT: _passive_object(doc),
             NO_FINITE: _no_finite(doc), ARTICLE: _article(doc)}
    return [(kind, where) for kind in RULE_KINDS for where in found[kind]]


def grammar_problems(doc) -> list[str]:
    """The kinds of problem (RULE_KINDS) of a parsed sentence, each once, or [] for one that passes."""
    return list(dict.fromkeys(kind for kind, _ in grammar_findings(doc)))


@register
class Grammar(Check):
    """An inserted sentence the rules find broken: a reader drops it at once, and a crowd would
    have fixed it (Jia and Liang's did). Needs the caller's parser (`ctx.parse`); a context
    without one (returning None) judges nothing."""

    name, flag = "grammar", "ungrammatical sentence"
    scope = SENTENCE
    attacks = SENTENCE_ATTACKS

    def refuse(self, subject, ctx, settings):
        parse = getattr(ctx, "parse", None)
        doc = parse(subject.text) if parse is not None else None
        if doc is None:
            return None
        found = grammar_findings(doc)
        return "; ".join(f"{kind} ({where})" for kind, where in found) or None
