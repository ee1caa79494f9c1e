""""Not" put into a question where nothing else changes its meaning (AddSent's
`negation_fallback`, AdvRACE's rule): after the first auxiliary or an inverted subject ("What
does Tom not like?"), as do-support before the main verb ("Tom does not like _"), or an existing
"not" taken out, so that negations never stack."""

from __future__ import annotations

from advrace.core.provenance import Replacement
from advrace.resources.inflection import match_case

from .statement_frames import in_blank

NOUN_PHRASE_POS = frozenset({"DET", "ADJ", "NUM", "PROPN", "NOUN", "PRON"})
SUBJECT_DEPS = frozenset({"nsubj", "nsubjpass", "expl", "csubj"})
CONTRACTED_AUX = {"ca": "can", "wo": "will", "sha": "shall", "ai": "is"}
DO_SUPPORT = {"VBZ": "does", "VBD": "did", "VBP": "do", "VB": "do"}


def _record(word: str, new: str, position: int) -> Replacement:
    return Replacement(position, position + len(word), word, new, "negation", changes_meaning=True)


def negation_edits(doc, blanks) -> list:
    """Edits that negate the question: 'not' after the first auxiliary (after an inverted
    subject: 'What does Tom not like?'), do-support before the main verb, or removing an
    existing 'not' so negations never stack."""
    toks = [t for t in doc if not in_blank(t, blanks)]
    aux = next((t for t in toks if t.pos_ == "AUX" or t.tag_ == "MD"), None)
    if aux is not None:
        after = doc[aux.i + 1] if aux.i + 1 < len(doc) else None
        if after is not None and after.lower_ in ("not", "n't", "n’t"):
            if after.lower_ == "not":
                return [(aux.idx + len(aux.text), after.idx + len(after.text), "",
                         _record(after.text, "", after.idx))]
            full = match_case(CONTRACTED_AUX.get(aux.lower_, aux.lower_), aux.text)
            return [(aux.idx, after.idx + len(after.text), full,
                     _record(aux.text + after.text, full, aux.idx))]
        neg = next((t for t in toks if t.lower_ == "not" and t.dep_ == "neg" and t.i > aux.i), None)
        if neg is not None:  # 'What did Tom not like?': the "not" after the subject goes
            gap = doc[neg.i - 1].idx + len(doc[neg.i - 1].text)
            return [(gap, neg.idx + len(neg.text), "", _record(neg.text, "", neg.idx))]
        head = aux if aux.head == aux or aux.dep_ == "ROOT" else aux.head
        subj = next((c for c in head.children if c.dep_ in SUBJECT_DEPS and c.i > aux.i), None)
        anchor = aux
        if subj is not None:
            edge = subj.right_edge
            participle = next((t for t in subj.subtree if t.dep_ == "acl" and t.tag_ in ("VBN", "VBG")
                               and t.i > subj.i), None)
            if participle is not None:  # 'Where was the writer born?' parsed as 'writer born'
                edge = doc[participle.i - 1]
            rest = [t for t in doc[edge.i + 1:] if not t.is_punct]
            if head is not aux or rest or subj.pos_ == "PRON":
                anchor = edge
        elif head is not aux:
            anchor = _inverted_subject(doc, aux) or aux
        if anchor is aux and aux.lower_ == "can":
            new = match_case("cannot", aux.text)
            return [(aux.idx, aux.idx + len(aux.text), new, _record(aux.text, new, aux.idx))]
        at = anchor.idx + len(anchor.text)
        return [(at, at, " not", _record("", "not", at))]
    roots = [t for t in toks if t.dep_ == "ROOT" and t.pos_ == "VERB" and t.tag_ in DO_SUPPORT]
    verbs = roots or [t for t in toks if t.pos_ == "VERB" and t.tag_ in ("VBZ", "VBD", "VBP")]
    if not verbs:
        return []
    verb = verbs[0]
    lemma = verb.lemma_.lower() if verb.lemma_.isalpha() else verb.text.lower()
    new = match_case(f"{DO_SUPPORT[verb.tag_]} not {lemma}", verb.text)
    return [(verb.idx, verb.idx + len(verb.text), new, _record(verb.text, new, verb.idx))]


def _inverted_subject(doc, aux):
    """Last token of a noun phrase right after an auxiliary with more words after it, for
    parses that miss the subject of 'What does Tom like?'."""
    last = None
    for tok in doc[aux.i + 1:]:
        if tok.pos_ not in NOUN_PHRASE_POS and tok.tag_ != "POS":
            break
        last = tok
    if last is None or last.pos_ not in ("NOUN", "PROPN", "PRON"):
        return None
    rest = [t for t in doc[last.i + 1:] if not t.is_punct and not t.is_space]
    return last if rest else None
