"""Question + answer -> declarative sentence, for Jia and Liang's AddSent (step 3).

Jia and Liang wrote about 50 rules over CoreNLP constituency parses. These rules are this
project's own, over spaCy's tokens and Penn tags (the small English model's dependency arcs are
too noisy on questions to lean on): find the wh-phrase at the front (with a leading preposition,
"how many NP", "which NP", "whose NP"), decide whether it is the subject, undo the inversion
(do-support gives its tense back to the main verb; other auxiliaries move behind the subject),
and put the answer where the wh-phrase was or where its meaning goes (when -> "in A", why ->
"because of A"). Several rules may match one question, each giving a candidate; every candidate
is named by its rule so that provenance and tests can tell them apart.

Only a word that the tagger and WordNet both take for a base-form verb gets the tense that
do-support held ("did the Texans victory in ..." has no such word, and "inned" is no answer),
and no rule leaves the question's wh-word in the sentence ("the what districts of ...").
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from advrace.resources.inflection import is_base_verb, past_tense, third_person

WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
NP_TAGS = frozenset({"DT", "PDT", "PRP$", "JJ", "JJR", "JJS", "NN", "NNS", "NNP", "NNPS", "CD", "POS",
                     "PRP", "HYPH", "NML", "FW", "VBN", "VBG"})
NP_CORE = frozenset({"NN", "NNS", "NNP", "NNPS", "CD", "PRP", "FW"})
AUX_LEMMAS = frozenset({"be", "do", "have"})
DO_FORMS = {"did": "VBD", "does": "VBZ", "do": "VBP"}
HOW_ADJ_COPULA = frozenset({"long", "old", "far", "big", "large", "tall", "high", "wide", "deep",
                            "heavy", "fast", "small", "short"})

NUMBER_WORDS = r"\b(hundred|thousand|million|billion|trillion|dozen|one|two|three|four|five|six|seven|eight|nine|ten)\b"


@dataclass(frozen=True)
class Candidate:
    rule: str
    sentence: str


@dataclass(frozen=True)
class _Tok:
    text: str
    tag: str
    lemma: str
    ws: str


def _tokens(question: str, resources) -> list[_Tok]:
    question = re.sub(r"^(\s*)(WH[a-z]+|Wh[A-Z]+\w*)\b", lambda m: m.group(1) + m.group(2).capitalize(),
                      question)  # "WHy was ...": a typo the tagger does not read as a wh-word
    question = re.sub(r"^(\s*)(What|Who|Where|When|How|Which)['’]s\b", r"\1\2 is", question)  # "What's"
    doc = resources.parse(question.strip())
    toks = [_Tok(t.text, "NNP" if t.tag_ in WH_TAGS and t.i and t.text[:1].isupper() and doc[t.i - 1].text[:1].isupper()
                 else t.tag_, t.lemma_.lower(), t.whitespace_) for t in doc]  # "Doctor Who" is a name
    while toks and toks[-1].tag in (".", ",", ":") or toks and toks[-1].text in ("?", "."):
        toks.pop()
    return toks


def _join(toks: list[_Tok]) -> str:
    out = "".join(t.text + t.ws for t in toks).strip()
    return re.sub(r"\s+([,.;:!?%])", r"\1", re.sub(r"\s+('s|n't)\b", r"\1", out))


def _sentence(*parts: str) -> str:
    text = " ".join(p.strip() for p in parts if p and p.strip())
    text = re.sub(r"\s+([,.;:!?]|['’]s\b)", r"\1", " ".join(text.split())).rstrip(" ,;:")
    return text[:1].upper() + text[1:] + "." if text else ""


def _wh_phrase(toks: list[_Tok]) -> tuple[int, int, int, str] | None:
    """(start, wh index, end) of the fronted wh-phrase and its kind, or None when the question
    does not start with one (after an optional preposition)."""
    i = 0
    if toks and toks[0].tag == "IN" and len(toks) > 1 and toks[1].tag in WH_TAGS:
        i = 1
    if not toks or i >= len(toks) or toks[i].tag not in WH_TAGS:
        return None
    wh = toks[i].text.lower()
    j = i + 1
    if wh == "how" and j < len(toks) and toks[j].text.lower() in ("many", "much"):
        j += 1
        while j < len(toks) and toks[j].tag in NP_TAGS - {"VBN", "VBG", "PRP", "POS"}:
            j += 1
        return i - (1 if i else 0), i, j, "how_many"
    if wh == "how" and j < len(toks) and toks[j].tag in ("JJ", "RB", "JJR", "RBR"):
        return i - (1 if i else 0), i, j + 1, "how_adj"
    if wh in ("what", "which", "whose") and j < len(toks) and toks[j].tag in NP_TAGS - {"PRP", "POS", "VBN", "VBG"}:
        while j < len(toks) and toks[j].tag in NP_TAGS - {"PRP", "POS", "VBN", "VBG"}:
            j += 1
        if j + 1 < len(toks) and toks[j].text.lower() == "of" and toks[j + 1].tag in NP_TAGS:
            j += 1
            while j < len(toks) and toks[j].tag in NP_TAGS - {"PRP", "POS", "VBN", "VBG"}:
                j += 1
            if j + 1 < len(toks) and toks[j].tag == "POS":  # "what percentage of Warsaw's population"
                j += 1
                while j < len(toks) and toks[j].tag in NP_TAGS - {"PRP", "POS", "VBN", "VBG"}:
                    j += 1
        return i - (1 if i else 0), i, j, "whose_np" if wh == "whose" else "wh_np"
    return i - (1 if i else 0), i, j, wh


def _leading_clause(toks: list[_Tok]) -> int:
    """Where the question proper starts after a fronted phrase and its comma ("According to the
    AAA, what is ..."), or 0."""
    for k, t in enumerate(toks[:-1]):
        if t.text == "," and k > 0 and (toks[k + 1].tag in WH_TAGS or (
                toks[k + 1].tag == "IN" and k + 2 < len(toks) and toks[k + 2].tag in WH_TAGS)):
            return k + 1
    return 0


def _as_written(sentence: str, source: str) -> str:
    """The sentence with its first word as the question or the answer wrote it ("the
    percentage", "Norway"), for a sentence that no longer starts the text."""
    first = sentence.split(" ", 1)[0]
    words = set(source.split())
    if first not in words and first.lower() in words:
        return first.lower() + sentence[len(first):]
    return sentence


def _is_aux(tok: _Tok) -> bool:
    return tok.tag == "MD" or (tok.lemma in AUX_LEMMAS and tok.tag.startswith("VB"))


def _noun_phrase_end(toks: list[_Tok], start: int) -> int:
    """End of the noun phrase (with "of NP" attachments) that starts at `start`."""
    j = start
    while True:
        k = j
        while k < len(toks) and (toks[k].tag in NP_TAGS - {"VBN", "VBG"} or (
                toks[k].tag in ("VBN", "VBG") and k + 1 < len(toks) and toks[k + 1].tag in NP_CORE)):
            k += 1
        if k == j:
            return j
        j = k
        if j + 1 < len(toks) and ((toks[j].tag == "IN" and toks[j].text.lower() == "of") or toks[j].tag == "CC") \
                and toks[j + 1].tag in NP_TAGS:
            j += 1
            continue
        return j


def _gap(rest: list[_Tok]) -> int:
    """Where an object wh-phrase came from: after a stranded preposition, else after the verb
    and its particle."""
    for k, t in enumerate(rest):
        if t.tag == "IN" and (k + 1 == len(rest) or rest[k + 1].tag in ("IN", "RB", ",")):
            return k + 1
    k = 0
    while k < len(rest) and _is_aux(rest[k]) and k + 1 < len(rest):
        k += 1
    k = min(k + 1, len(rest))
    # a verb chain ("failed to make", "want to be seen") ends where its object goes
    while k < len(rest) and (rest[k].tag in ("RP", "TO") or
                             (rest[k].tag.startswith("VB") and rest[k - 1].tag in ("TO", "VB", "VBN"))):
        k += 1
    return k


def _answer_for(kind: str, wh_tokens: list[_Tok], answer: str, answer_type: str | None) -> tuple[str, str]:
    """(phrase put in place of the wh-phrase, rule suffix)."""
    words = [t.text for t in wh_tokens]
    lower = [w.lower() for w in words]
    prep = lower[0] if wh_tokens and wh_tokens[0].tag == "IN" else ""
    body = words[1:] if prep else words
    if kind == "how_many":
        # "how much money" + "$5 million": the answer already names its unit
        names_unit = re.search(r"[^\W\d_]", re.sub(NUMBER_WORDS, "", answer.lower())) or re.search(r"[$€£¥%]", answer)
        noun = "" if names_unit else " ".join(body[2:])
        return f"{prep} {answer} {noun}".strip(), "how_many"
    if kind == "whose_np":
        return f"{prep} {answer}'s {' '.join(body[1:])}".strip(), "whose"
    if kind == "wh_np":
        noun = " ".join(body[1:])
        if prep:
            return f"{prep} {answer}", "prep_wh_np"
        return answer, "wh_np"
    if kind == "when":
        p = {"time": "at", "date": "on", "weekday": "on"}.get(answer_type or "", "in")
        return f"{p} {answer}", "when"
    if kind == "where":
        return f"{prep or 'in'} {answer}", "where"
    if kind == "why":
        return f"because of {answer}", "why"
    if kind == "how":
        return f"by {answer}", "how"
    return (f"{prep} {answer}".strip(), kind)


def declarative_candidates(question: str, answer: str, resources, answer_type: str | None = None
                           ) -> list[Candidate]:
    """Every matching rule's sentence for the question with `answer` in it, best rule first."""
    toks = _tokens(question, resources)
    found = _wh_phrase(toks)
    if found is None:
        lead = _leading_clause(toks)
        if lead:  # "According to the AAA, what is ...": Jia and Liang's "$PP ," and "$SBAR ," prefixes
            rest = _join(toks[lead:])
            return [Candidate(c.rule, f"{_join(toks[:lead])} {_as_written(c.sentence, f'{rest} {answer}')}")
                    for c in declarative_candidates(rest, answer, resources, answer_type)]
        return _non_wh(toks, answer)
    start, _, end, kind = found
    wh_tokens, rest = toks[start:end], toks[end:]
    phrase, rule = _answer_for(kind, wh_tokens, answer, answer_type)
    fronted_prep = wh_tokens[0].tag == "IN"
    if not rest:
        return [Candidate(f"bare_{rule}", _sentence(phrase))]
    nominal = kind in ("wh_np", "how_many", "whose_np", "who", "what", "which") and not fronted_prep
    # "Who was born ...", "Which river is longer than ...": the auxiliary has no subject after it
    aux_then_verb = _is_aux(rest[0]) and len(rest) > 1 and (
        rest[1].tag in ("VBN", "VBG", "VB") or
        (rest[0].lemma == "be" and rest[1].tag in ("JJ", "JJR", "JJS", "IN", "RB", "RBR")))
    if nominal and (not _is_aux(rest[0]) or aux_then_verb or _main_verb(rest)):
        return _subject(kind, rule, phrase, answer, wh_tokens, rest)
    if not _is_aux(rest[0]):
        return []
    aux, after = rest[0], rest[1:]
    subject, tail = _split_subject(after)
    if aux.lemma == "be" and (not any(t.tag.startswith("VB") for t in tail)
                              or any(t.tag == "WDT" or t.text.lower() == "that" for t in subject[1:])):
        # "What is a synonym for DNA", "What is the longest time that a certificate is good for":
        # all of it is the subject (the verb after "that" is the relative clause's own)
        subject, tail = subject + tail, []
    if aux.lemma == "do" and aux.text.lower() in DO_FORMS:
        if not tail and len(subject) > 1:  # "did the war end": the tagger took the verb for a noun
            subject, tail = subject[:-1], subject[-1:]
        past_slip = (bool(tail) and tail[0].tag == "VBD" and aux.text.lower() == "did" and tail[0].lemma not in AUX_LEMMAS
                     and all(t.tag in NP_TAGS for t in subject))
        if not tail or not subject or not (past_slip or _do_support_verb(subject, tail, resources)):
            split = _verb_after_noun(after, resources)
            if split is None:  # no verb follows: "did" is the main verb ("Who did the National Anthem?")
                return _subject(kind, rule, phrase, answer, wh_tokens, rest) if nominal else []
            subject, tail = after[:split], after[split:]
        tense = DO_FORMS[aux.text.lower()]
        verb = tail[0].text
        if not past_slip:  # "did the V&A received": the question's slip already gave the tense
            verb = past_tense(verb) if tense == "VBD" else third_person(verb) if tense == "VBZ" else verb
        clause = [_Tok(verb, "VB", verb, " ")] + tail[1:]
        return _place(kind, f"do_{rule}", phrase, answer, _join(subject), clause, wh_tokens)
    if not subject:
        return []
    if kind == "how_adj" and aux.lemma == "be":
        # "How long is the river" -> "The river is A long"
        adj = wh_tokens[-1].text
        return [Candidate("how_adj_copula", _sentence(_join(subject), aux.text, answer, adj, _join(tail)))]
    if aux.lemma == "be" and not tail:
        # "What is the capital of France" -> "The capital of France is A"
        out = [Candidate(f"copula_{rule}", _sentence(_join(subject), aux.text,
                                                     answer if kind == "wh_np" and not fronted_prep
                                                     else phrase))]
        if kind == "wh_np":
            prep = wh_tokens[0].text.lower() if fronted_prep else ""
            out.append(Candidate("copula_np_of", _sentence(_join(subject), aux.text, prep,
                                                           f"the {_wh_noun(wh_tokens)} of {answer}")))
        return out
    # be + participle, have, modals: the auxiliary moves behind the subject
    return _place(kind, f"aux_{rule}", phrase, answer, _join(subject), [aux] + tail, wh_tokens)


def _wh_noun(wh_tokens: list[_Tok]) -> str:
    """The noun of a wh-phrase, after the wh-word and any preposition before it ("in what
    districts" -> "districts")."""
    k = next((i for i, t in enumerate(wh_tokens) if t.tag in WH_TAGS), 0)
    return " ".join(t.text for t in wh_tokens[k + 1:])


def _do_support_verb(subject: list[_Tok], tail: list[_Tok], resources) -> bool:
    """Whether the word after the subject of do-support is a verb to give the tense back to:
    WordNet has it as a verb in its base form, and the tagger says so, in the question or (the
    small model often tags a question's last word as a noun: "did the war end") in a verb slot
    of its own: "the war will end"."""
    verb = tail[0]
    if not is_base_verb(verb.text, resources.wordnet):
        return False
    if verb.tag in ("VB", "VBP"):
        return True
    probe = f"{_join(subject)} will {_join(tail)}."
    tags = [t.tag_ for t in resources.parse(probe)]
    k = len(resources.parse(f"{_join(subject)} will"))
    return k < len(tags) and tags[k] in ("VB", "VBP")


def _verb_after_noun(after: list[_Tok], resources) -> int | None:
    """Where the verb of do-support starts when the tagger took it for a noun inside the subject
    ("did the German army reoccupy Rhineland", "did the Broncos score in ..."): the first
    lowercase base-form verb after a noun that passes `_do_support_verb`."""
    for k in range(1, len(after)):
        t = after[k]
        if (after[k - 1].tag in ("NN", "NNS", "NNP", "NNPS", "CD", "JJ") and t.text.islower()
                and _do_support_verb(after[:k], after[k:], resources)):
            return k
    return None


def _split_subject(after: list[_Tok]) -> tuple[list[_Tok], list[_Tok]]:
    """Subject and the rest after an inverted auxiliary: everything up to the first verb ("How
    would the societies in Europe support ..."), else a noun phrase (the tagger sometimes takes
    the verb for a noun: "did the war end")."""
    k = next((i for i, t in enumerate(after) if t.tag.startswith("VB")), None)
    if k:
        return after[:k], after[k:]
    end = _noun_phrase_end(after, 0)
    return after[:end], after[end:]


def _main_verb(rest: list[_Tok]) -> bool:
    """"had" followed by a noun phrase and no verb is the main verb ("Which player had the most
    interceptions?"), not an auxiliary ("What has the company built?"). "did"/"does" always
    stand for do-support: the tagger often takes the verb after them for a noun."""
    if rest[0].tag == "MD" or rest[0].lemma != "have":
        return False
    end = _noun_phrase_end(rest, 1)
    return end > 1 and not any(t.tag.startswith("VB") for t in rest[end:])


def _subject(kind, rule, phrase, answer, wh_tokens, rest) -> list[Candidate]:
    """The wh-phrase is the subject: "Who founded X" -> "A founded X"."""
    vp = _join(rest)
    if kind != "wh_np":
        return [Candidate(f"subject_{rule}", _sentence(phrase, vp))]
    noun = _wh_noun(wh_tokens)
    return [Candidate("subject_wh_np", _sentence(answer, vp)),
            Candidate("subject_np_of", _sentence(f"the {noun} of {answer}", vp))]


def _place(kind, rule, phrase, answer, subject: str, clause: list[_Tok], wh_tokens) -> list[Candidate]:
    """Subject + clause with the answer phrase at the gap (objects) or after the clause
    (adverbial wh-words)."""
    if kind in ("when", "where", "why", "how", "how_adj") or (wh_tokens and wh_tokens[0].tag == "IN"):
        return [Candidate(rule, _sentence(subject, _join(clause), answer if kind == "how_adj" else phrase))]
    k = _gap(clause)
    out = [Candidate(rule, _sentence(subject, _join(clause[:k]), phrase, _join(clause[k:])))]
    if kind == "wh_np":
        noun = _wh_noun(wh_tokens)
        out.append(Candidate(f"{rule}_np_of", _sentence(subject, _join(clause[:k]), f"the {noun} of {answer}",
                                                        _join(clause[k:]))))
    return out


def _non_wh(toks: list[_Tok], answer: str) -> list[Candidate]:
    """Questions without a fronted wh-phrase: a wh-word in place ("The war ended in what
    year"), or a yes/no question, which has no declarative form with an answer. The asking
    wh-word is the last one: earlier ones open relative clauses ("those persons who oppose
    what?")."""
    for k in range(len(toks) - 1, -1, -1):
        t = toks[k]
        if t.tag in WH_TAGS:
            end = _noun_phrase_end(toks, k + 1) if t.text.lower() in ("what", "which", "whose") else k + 1
            return [Candidate("in_situ", _sentence(_join(toks[:k]), answer, _join(toks[end:])))]
    if len(toks) > 1 and toks[0].text.lower() in ("name", "list", "give") and toks[0].tag in ("VB", "NN", "NNP"):
        # "Name one of the causes of immunodeficiency." -> "One of the causes of immunodeficiency is A."
        rest = toks[1:]
        verb = "are" if rest[0].tag == "NNS" or rest[0].text.lower() in ("two", "three", "some", "several") else "is"
        return [Candidate("imperative_name", _sentence(_join(rest), verb, answer))]
    return []
