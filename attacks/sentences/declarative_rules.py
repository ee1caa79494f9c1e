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
from collections import Counter
from dataclasses import dataclass

from advrace.resources.inflection import indefinite_article, is_base_verb, past_tense, third_person

from .readability import syntax

WH_TAGS = frozenset({"WDT", "WP", "WP$", "WRB"})
NP_TAGS = frozenset({"DT", "PDT", "PRP$", "JJ", "JJR", "JJS", "NN", "NNS", "NNP", "NNPS", "CD", "POS",
                     "PRP", "HYPH", "NML", "FW", "VBN", "VBG"})
NP_CORE = frozenset({"NN", "NNS", "NNP", "NNPS", "CD", "PRP", "FW"})
AUX_LEMMAS = frozenset({"be", "do", "have"})
DO_FORMS = {"did": "VBD", "does": "VBZ", "do": "VBP"}
HOW_ADJ_COPULA = frozenset({"long", "old", "far", "big", "large", "tall", "high", "wide", "deep",
                            "heavy", "fast", "small", "short"})

APPROXIMATE = r"\b(about|around|approximately|nearly|almost|over|under|more|less|fewer|than|at|least|most|up|to|some|roughly)\b"
TIME_NOUNS = frozenset({"year", "years", "month", "day", "date", "century", "decade", "era", "time", "season"})
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
    i: int = -1  # index in the question's parse; -1 for a word the rules wrote
    dep: str = ""
    head: int = -1
    left: int = -1  # first and last index of its subtree
    right: int = -1


def _tokens(question: str, resources) -> list[_Tok]:
    question = re.sub(r"^(\s*)(WH[a-z]+|Wh[A-Z]+\w*)\b", lambda m: m.group(1) + m.group(2).capitalize(),
                      question)  # "WHy was ...": a typo the tagger does not read as a wh-word
    question = re.sub(r"^(\s*)(What|Who|Where|When|How|Which)['’]s\b", r"\1\2 is", question)  # "What's"
    doc = syntax(resources, question.strip())
    toks = [_Tok(t.text, "NNP" if in_name(doc, t.i) else t.tag_, t.lemma_.lower(), t.whitespace_, t.i, t.dep_, t.head.i,
                 t.left_edge.i, t.right_edge.i)
            for t in doc if not t.is_space]  # "relieve  Saint-Pierre": a doubled space is no word
    while toks and toks[-1].tag in (".", ",", ":") or toks and toks[-1].text in ("?", "."):
        toks.pop()
    return toks


def _join(toks: list[_Tok]) -> str:
    out = "".join(t.text + t.ws for t in toks).strip()
    return re.sub(r"\s+([,.;:!?%])", r"\1", re.sub(r"\s+('s|n't)\b", r"\1", out))


def _sentence(*parts: str) -> str:
    text = " ".join(p.strip() for p in parts if p and p.strip())
    text = re.sub(r"\s+([,.;:!?]|['’]s\b)", r"\1", " ".join(text.split())).rstrip(" ,;:")
    if not text:
        return ""
    return text[:1].upper() + text[1:] + ("" if text.endswith(".") else ".")


def _wh_phrase(toks: list[_Tok], resources) -> tuple[int, int, int, str] | None:
    """(start, wh index, end) of the fronted wh-phrase and its kind, or None when the question
    does not start with one (after an optional preposition). A noun phrase ends at a word the
    parse takes for the question's verb, tagged a noun or not ("What party rules in ...": the
    word is made a verb of the present tense)."""
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
        while j < len(toks) and (toks[j].tag in NP_TAGS - {"PRP", "POS", "VBN", "VBG"} or (
                toks[j].tag in ("VBG", "VBN") and j + 1 < len(toks) and toks[j + 1].tag in ("NN", "NNS")) or (
                toks[j].tag == "CC" and j + 1 < len(toks) and toks[j + 1].tag in NP_TAGS and toks[j - 1].tag in NP_CORE)):
            j += 1  # "What German general and fighter pilot"
        root = next((k for k in range(i + 2, j) if toks[k].dep == "ROOT" and toks[k - 1].tag in NP_CORE
                     and toks[k].tag in ("NN", "NNS") and is_base_verb(toks[k].lemma, resources.wordnet)), None)
        if root is not None:
            t = toks[root]
            toks[root] = _Tok(t.text, "VBZ" if t.tag == "NNS" else "VBP", t.lemma, t.ws, t.i, t.dep, t.head, t.left, t.right)
            return i - (1 if i else 0), i, root, "whose_np" if wh == "whose" else "wh_np"
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


def _stranded(toks: list[_Tok]) -> int | None:
    """Where the answer goes after a stranded preposition, the last of a run of them ("referred
    to as |"), or None."""
    def stranded(k: int) -> bool:
        t = toks[k]
        if k + 1 < len(toks) and toks[k + 1].text.lower() == "of" and t.text.lower() in ("as", "out", "instead", "because"):
            return False  # "as of March 2015": one preposition
        return (t.tag in ("IN", "RP") or t.text.lower() in PREPOSITION_ADVERBS) and (
            k + 1 == len(toks) or toks[k + 1].tag in ("IN", "RB", ",", "TO", "RBR", "JJR", "WDT")
            or toks[k + 1].text.lower() == "that" and k + 2 < len(toks) and toks[k + 2].tag.startswith("VB"))  # "for | that"

    for k in range(len(toks)):
        if stranded(k):
            while k + 1 < len(toks) and stranded(k + 1):
                k += 1
            return k + 1
    return None


def _gap(rest: list[_Tok]) -> int:
    """Where an object wh-phrase came from: after a stranded preposition, else after the verb
    and its particle, or before a finite verb that follows it (the wh-phrase was the subject of
    a clause the verb takes: "Which diseases do scientists believe contributed to ..." ->
    "scientists believe A contributed to ...")."""
    stranded = _stranded(rest)
    if stranded is not None:
        return stranded
    k = 0  # past adverbs, and auxiliaries that have a verb after them ("has built", not "has in")
    while k + 1 < len(rest) and (rest[k].tag in ("RB", "RBR") or _is_aux(rest[k]) and (
            rest[k + 1].tag.startswith("VB") or rest[k + 1].tag in ("MD", "RB", "RBR"))):
        k += 1
    k = min(k + 1, len(rest))
    first = k
    # a verb chain ("failed to make", "want to be seen") ends where its object goes
    while k < len(rest) and (rest[k].tag in ("RP", "TO") or (rest[k].tag == "VB" and (rest[k - 1].tag == "TO" or rest[k - 1].lemma in ("help", "make", "let"))) or
                             (rest[k].tag == "VBG" and rest[k - 1].tag == "VB" and k == first) or  # "began using"
                             (rest[k].tag in ("VBN", "VBG", "VB") and rest[k - 1].lemma in ("be", "have", "been"))):
        k += 1
    if k < len(rest) and rest[k - 1].lemma in DITRANSITIVE and rest[k].tag in ("DT", "PRP$", "NN", "NNS", "NNP", "NNPS", "PRP"):
        end = k + 1 if rest[k].tag == "PRP" else _noun_phrase_end(rest, k)
        if end > k and (end == len(rest) or rest[end].tag in ("IN", "RB", "RBR", "TO", ",")):
            return end  # "What should adults teach children" -> "adults should teach children A"
    if k > first and k < len(rest) and rest[k].tag in ("DT", "PRP$", "NN", "NNS", "NNP", "NNPS", "CD", "JJ", "PRP"):
        return first  # "crossed to enter the Empire": the later verb has its object; the gap is the first's
    return k


PRONOUNS_LOWERED = frozenset({"he", "she", "it", "we", "they", "you", "there", "this", "these", "those", "the",
                              "a", "an", "his", "her", "their", "its", "our", "some", "many", "most", "people"})
# verbs that take an indirect object before the direct one ("teach children A", "tell us A")
DITRANSITIVE = frozenset({"give", "tell", "teach", "show", "ask", "send", "offer", "bring", "buy", "lend", "pay",
                          "promise", "owe", "hand", "sell", "cost", "wish", "cook", "read", "write", "leave"})


class _NoForm(Exception):
    """The question has no grammatical statement by these rules; the message is the counted reason."""


# how the subject of an inverted question was found: by the parse's arcs, or by the tags where the
# arcs failed their check (counted per process: bench/ scripts read it)
ARCS: Counter = Counter()
SUBJ_DEPS = frozenset({"nsubj", "nsubjpass", "csubj", "csubjpass", "expl"})
# prepositions the tagger calls adverbs when their object has moved ("a bridge across")
PREPOSITION_ADVERBS = frozenset({"across", "over", "through", "around", "behind", "under"})
NAMING = frozenset({"called", "named", "known", "termed", "nicknamed", "dubbed", "referred"})
# subordinators that open a clause of their own: its verbs are not the question's
CLAUSE_OPENERS = frozenset({"when", "while", "because", "although", "though", "if", "whereas", "unless", "where"})
WH_WORDS = frozenset({"what", "which", "who", "whom", "whose", "when", "where", "why", "how"})
SUBORDINATORS = frozenset({"because", "since", "as", "so", "while", "when", "after", "before", "until", "if",
                           "although", "though", "once", "whenever", "where"})
INVERTING = frozenset({"did", "does", "do", "is", "are", "was", "were", "can", "could", "will", "would", "should",
                       "must", "may", "might", "has", "have", "had", "shall"})
MONTHS = r"(January|February|March|April|May|June|July|August|September|October|November|December)"
# "the N of A" reads as English for these nouns ("the city of Chicago"), not for most ("the team
# of the Lions", "the year of 1918"): read on XQuAD, 5 of 6 np_of sentences were not English
NP_OF_NOUNS = frozenset({"city", "town", "village", "state", "province", "county", "island", "kingdom", "republic",
                         "port", "country", "region", "district", "colony", "territory", "empire", "month",
                         "cities", "towns", "villages", "states", "provinces", "counties", "islands", "kingdoms",
                         "republics", "ports", "countries", "regions", "districts", "colonies", "territories",
                         "empires", "months"})


def in_name(doc, i: int) -> bool:
    """Whether the wh-word at `i` is a word of a name or title ("Doctor Who", "The Who"), not one
    that asks: capitalised after a capitalised word that is no preposition or wh-word."""
    t = doc[i]
    if t.lower_ not in WH_WORDS or not i or not t.text[:1].isupper():
        return False
    prev = doc[i - 1]
    return prev.text[:1].isupper() and prev.tag_ not in WH_TAGS | {"IN", "TO", "CC"}


def _answer_form(answer: str, resources) -> str:
    """What the answer is, for the rules that must choose a preposition or a conjunction:
    sub (a subordinate clause: "because ...", "when ..."), pp (a preposition first), to (to + verb),
    clause (a finite verb after a subject), gerund, verb (a bare verb or participle first), adj
    (no noun), np."""
    toks = [t for t in syntax(resources, answer) if not t.is_punct]
    if not toks:
        return "np"
    first = toks[0]
    if first.lower_ in SUBORDINATORS and len(toks) > 1 and first.lower_ != "as" or first.lower_ == "because":
        return "sub"
    if first.lower_ == "to" and len(toks) > 1 and toks[1].tag_ == "VB":
        return "to"
    if first.tag_ in ("IN", "TO") or first.lower_ in ("due", "owing"):
        return "pp"
    if any(t.tag_ in ("VBD", "VBZ", "VBP", "MD") and any(u.tag_ in NP_CORE for u in toks[:k])
           for k, t in enumerate(toks)):
        return "clause"
    if first.tag_ == "VBG":
        return "gerund"
    if first.tag_ in ("VB", "VBN", "VBD", "VBZ", "VBP", "MD"):
        return "verb"
    if not any(t.tag_ in NP_CORE for t in toks):
        return "adj"
    if len(toks) == 1 and first.text.islower() and resources.wordnet.morphy(first.lower_, "a") \
            and not resources.wordnet.morphy(first.lower_, "n"):
        return "adj"  # "nonviolent": a word alone is tagged a noun more often than not
    return "np"


def _answer_for(kind: str, wh_tokens: list[_Tok], answer: str, answer_type: str | None, resources
                ) -> tuple[str, str]:
    """(phrase put in place of the wh-phrase, rule suffix); _NoForm where the answer cannot take
    the wh-phrase's place ("because of to the Lord")."""
    words = [t.text for t in wh_tokens]
    lower = [w.lower() for w in words]
    prep = lower[0] if wh_tokens and wh_tokens[0].tag == "IN" else ""
    body = words[1:] if prep else words
    if kind == "how_many":
        # "how much money" + "$5 million": the answer already names its unit
        names_unit = re.search(r"[^\W\d_]", re.sub(NUMBER_WORDS, "", re.sub(APPROXIMATE, "", answer.lower()))) \
            or re.search(r"[$€£¥%]", answer)
        noun = "" if names_unit else " ".join(body[2:])
        return f"{prep} {answer} {noun}".strip(), "how_many"
    if kind == "whose_np":
        mark = "" if re.search(r"['’]s?$", answer) else "'" if answer.endswith("s") and not answer.endswith("ss") \
            else "'s"  # "governments' goals"; "Hadrian's wall"
        return f"{prep} {answer}{mark} {' '.join(body[1:])}".strip(), "whose"
    if kind == "wh_np":
        if wh_tokens[-1].tag in ("NN", "NNS") and _answer_form(answer, resources) == "adj":
            # "What type of regime" + "Islamist": "an Islamist regime"
            article = f"{indefinite_article(answer)} " if wh_tokens[-1].tag == "NN" else ""
            answer = f"{article}{answer} {wh_tokens[-1].text}"
        if prep:
            return f"{prep} {answer}", "prep_wh_np"
        return answer, "wh_np"
    if kind in ("when", "where", "why", "how"):
        form = _answer_form(answer, resources)
        if kind == "when":
            if form in ("pp", "sub"):
                return answer, "when"
            if form != "np":
                raise _NoForm("answer is no time")
            on = answer_type in ("date", "weekday") or re.match(rf"^({MONTHS} \d{{1,2}}\b|\d{{1,2}} {MONTHS})", answer)
            p = "at" if answer_type == "time" else "on" if on else "in"
            return f"{p} {answer}", "when"
        if kind == "where":
            if form in ("pp", "sub"):
                return answer, "where"
            if form not in ("np",):
                raise _NoForm("answer is no place")
            return f"{prep or 'in'} {answer}", "where"
        if kind == "why":
            # "because" + a clause, "because of" + a noun phrase, a purpose or a reason as it is
            if form == "clause":
                return f"because {answer}", "why_clause"
            if form in ("sub", "to") or (form == "pp" and lower_first(answer) in ("for", "due", "owing", "out", "from")):
                return answer, "why_as_is"
            if form == "verb" and syntax(resources, answer)[0].tag_ == "VB":
                return f"to {answer}", "why_as_is"  # a purpose: "to avoid ..."
            if form in ("np", "gerund"):
                return f"because of {answer}", "why"
            raise _NoForm("answer is no reason")
        # how: a means by "by", a manner or a phrase with its own preposition as it is
        if form in ("pp", "sub", "adj"):
            return answer, "how_as_is"
        if form in ("np", "gerund"):
            return f"by {answer}", "how"
        raise _NoForm("answer is no manner or means")
    return (f"{prep} {answer}".strip(), kind)


def lower_first(text: str) -> str:
    return text.split(" ", 1)[0].lower() if text else ""


def declarative_candidates(question: str, answer: str, resources, answer_type: str | None = None
                           ) -> list[Candidate]:
    """Every matching rule's sentence for the question with `answer` in it, best rule first; []
    where the rules have no grammatical statement (`declarative_form` says why)."""
    return declarative_form(question, answer, resources, answer_type)[0]


def declarative_form(question: str, answer: str, resources, answer_type: str | None = None
                     ) -> tuple[list[Candidate], str | None]:
    """(candidates, None), or ([], the reason) where the question has no statement the rules can
    write and check: each candidate is parsed again and refused if it still reads as a question,
    strands a preposition or doubles an auxiliary (`statement_problem`)."""
    try:
        cands = _form(question, answer, resources, answer_type)
    except _NoForm as no:
        return [], str(no)
    if not cands:
        return [], "no rule matched"
    kept, problems, seen = [], [], set()
    for cand in cands:
        problem = statement_problem(cand.sentence, answer, resources)
        if problem:
            problems.append(problem)
        elif cand.sentence not in seen:
            seen.add(cand.sentence)
            kept.append(cand)
    return (kept, None) if kept else ([], problems[0])


def statement_problem(sentence: str, answer: str, resources) -> str | None:
    """What keeps a written sentence from being a statement, or None: a question form (a "?", a
    wh-word or an inverted auxiliary first), a stranded preposition ("X from is in Paris"), a
    doubled auxiliary ("which will must have"), "because of" before a clause or a preposition."""
    if "?" in sentence:
        return "question form"
    doc = [t for t in syntax(resources, sentence) if not t.is_punct]
    if not doc:
        return "empty"
    starts_with_answer = sentence.lower().startswith(answer.lower()[:max(1, len(answer))])
    first = doc[0]
    if not starts_with_answer and (first.lower_ in WH_WORDS and first.tag_ in WH_TAGS or
                                   first.lower_ in INVERTING and len(doc) > 1 and doc[1].tag_ in NP_TAGS):
        return "question form"
    relative = False
    for k, t in enumerate(doc):
        nxt = doc[k + 1] if k + 1 < len(doc) else None
        if t.tag_ in ("WDT", "WP") or t.lower_ == "that":
            relative = True  # "the time that a certificate is good for is ...": a relative clause's own
        if (t.tag_ == "IN" and t.lower_ not in SUBORDINATORS | {"that", "whether", "than"} and not relative
                and (nxt is None or nxt.tag_ in ("VBZ", "VBD", "VBP", "MD"))):
            return "stranded preposition"
        if nxt is not None and t.tag_ == "MD":
            after = next((u for u in doc[k + 1:] if u.tag_ not in ("RB", "RBR")), None)
            if after is not None and after.tag_ in ("MD", "VBZ", "VBD", "VBP"):
                return "doubled auxiliary"
        if (t.lower_ == "because" and nxt is not None and nxt.lower_ == "of" and k + 2 < len(doc)
                and (doc[k + 2].tag_ in ("TO", "IN", "MD", "VBZ", "VBD", "VBP", "VB", "VBN") or doc[k + 2].lower_ == "that")):
            return "because of + clause"
    return None


def _form(question: str, answer: str, resources, answer_type: str | None) -> list[Candidate]:
    """The question's statements with `answer` in place of its wh-phrase: a fronted phrase kept in
    front, a "there" question, a wh-phrase that is the subject, do-support undone, "how long/old"
    with a copula, else the inverted auxiliary moved back beside its verb."""
    toks = _tokens(question, resources)
    found = _wh_phrase(toks, resources)
    fronted = _fronted(toks, found, answer, resources, answer_type)
    if fronted is not None:
        return fronted
    if found is None:
        return _non_wh(toks, answer, answer_type, resources)
    start, _, end, kind = found
    if kind == "how_adj" and end < len(toks) and toks[end].text.lower() == "ago":
        end += 1  # "How long ago did ..."
    wh_tokens, rest = toks[start:end], toks[end:]
    phrase, rule = _answer_for(kind, wh_tokens, answer, answer_type, resources)
    fronted_prep = wh_tokens[0].tag == "IN"
    if not rest:
        return [Candidate(f"bare_{rule}", _sentence(phrase))]
    nominal = kind in ("wh_np", "how_many", "whose_np", "who", "what", "which") and not fronted_prep
    p = next((k for k, t in enumerate(rest) if t.tag.startswith("VB") or t.tag == "MD"), len(rest))
    if nominal and p + 1 < len(rest) and rest[p].lemma == "be" and rest[p + 1].text.lower() == "there":
        return _there(rule, phrase, answer, rest, p)
    if nominal and _wh_is_subject(rest):
        return _subject(kind, rule, phrase, answer, wh_tokens, rest, resources)
    noun = wh_tokens[-1].text.lower()
    if kind == "wh_np" and noun in TIME_NOUNS and not fronted_prep:  # "What year did X give birth" -> "... in A"
        kind, phrase = "time_np", _answer_for("when", wh_tokens, answer, answer_type, resources)[0]
    elif kind == "how_many" and noun == "times":  # "How many times has X won the cup" -> "... twice"
        kind = "how_often"
    if not _is_aux(rest[0]):
        raise _NoForm("no auxiliary after the wh-phrase")
    aux, after = rest[0], rest[1:]
    if len(after) > 1 and after[0].text.lower() in ("n't", "not") and not after[1].tag.startswith("VB"):
        raise _NoForm("negation before the subject")  # "What can't Parliament do"
    if aux.lemma == "do" and aux.text.lower() in DO_FORMS:
        return _do_support(kind, rule, phrase, answer, wh_tokens, rest, nominal, resources)
    if not after:
        raise _NoForm("no subject after the auxiliary")
    subject, tail = _inverted_split(aux, after, resources, nominal, kind)
    if kind == "how_adj" and aux.lemma == "be" and not any(t.tag.startswith("VB") for t in tail[:_main_part(tail)]):
        return _how_adj_copula(wh_tokens, aux, after, subject, tail, answer, resources)
    if aux.lemma == "be" and not any(t.tag.startswith("VB") for t in tail[:_main_part(tail)]):
        return _copula(kind, rule, phrase, answer, aux, after, wh_tokens, fronted_prep)
    # be + participle, have, modals: the auxiliary moves behind the subject
    return _place(kind, f"aux_{rule}", phrase, answer, _join(subject), [aux] + tail, wh_tokens, resources)


def _fronted(toks: list[_Tok], found, answer: str, resources, answer_type: str | None) -> list[Candidate] | None:
    """A phrase fronted before the question proper stays in front, its statement after it; None
    where the question has none."""
    lead = _leading_clause(toks)
    if lead and (found is None or (found[3] == "when" and found[0] == 0 and toks[lead].text.lower() != "which")):
        # "According to the AAA, what is ...", "When X, what is it called": Jia and Liang's "$PP ," and "$SBAR ,"
        rest = _join(toks[lead:])
        return [Candidate(c.rule, f"{_join(toks[:lead])} {_as_written(c.sentence, f'{rest} {answer}')}")
                for c in _form(rest, answer, resources, answer_type)]
    if found is None:
        k = _unmarked_lead(toks)
        if k:  # "After the Peterloo massacre what poet wrote ...": the same without its comma
            rest = _join(toks[k:])
            return [Candidate(c.rule, f"{_join(toks[:k])}, {_as_written(c.sentence, f'{rest} {answer}')}")
                    for c in _form(rest, answer, resources, answer_type)]
    return None


def _there(rule: str, phrase: str, answer: str, rest: list[_Tok], p: int) -> list[Candidate]:
    """"How many bids for the prize were there in 1915" -> "There were A bids for the prize in
    1915"; `p` is where the verb "be" is in `rest`, the question after its wh-phrase."""
    more = rest[p + 2:]
    k = _stranded(more)  # "What river was there a bridge across in Roman times" -> "... across A in ..."
    if k is not None and p == 0:
        return [Candidate(f"there_{rule}", _sentence("there", rest[p].text, _join(more[:k]), answer, _join(more[k:])))]
    return [Candidate(f"there_{rule}", _sentence("there", rest[p].text, phrase, _join(rest[:p]), _join(more)))]


def _do_support(kind, rule, phrase, answer, wh_tokens, rest: list[_Tok], nominal: bool, resources) -> list[Candidate]:
    """Do-support undone: its tense goes back to the verb (and to a verb joined to it by "and"),
    a negation keeps it ("do not have"); where no verb follows, "did" is the main verb."""
    aux, after = rest[0], rest[1:]
    subject, tail, past_slip = _do_split(aux, after, resources)
    if subject is None:  # no verb follows: "did" is the main verb ("Who did the National Anthem?")
        if nominal and not (after[-1].tag in ("VB", "VBP") and is_base_verb(after[-1].text, resources.wordnet)):
            return _subject(kind, rule, phrase, answer, wh_tokens, rest, resources)
        raise _NoForm("no verb to carry the tense")
    tense = DO_FORMS[aux.text.lower()]

    def inflect(word: str) -> str:
        return past_tense(word) if tense == "VBD" else third_person(word) if tense == "VBZ" else word

    head_tag = syntax(resources, answer)[0].tag_
    if kind == "what" and tail[0].text.lower() == "do" and _answer_form(answer, resources) == "verb" \
            and (head_tag in ("VB", "VBP") or head_tag == tense or head_tag == "VBN" and tense == "VBD"):
        # "What does Doctor Who do when ..." + "regenerate": the answer is the verb phrase, in
        # the tense of "does" (an answer in that tense already stays: "did" + "installed ...")
        head, _, more = answer.partition(" ")
        head = inflect(head) if head_tag in ("VB", "VBP") else head
        return [Candidate("do_what_do", _sentence(_join(subject), head, more, _join(tail[1:])))]
    if subject[-1].text.lower() in ("not", "n't"):  # "What do coastal beroids not have": do-support stays
        clause = [aux, subject[-1]] + tail
        return _place(kind, f"do_{rule}", phrase, answer, _join(subject[:-1]), clause, wh_tokens, resources)
    verb = tail[0].text
    if not past_slip:  # "did the V&A received": the question's slip already gave the tense
        verb = inflect(verb)
    clause = [_Tok(verb, "VB", tail[0].lemma, " ")] + [
        _Tok(inflect(t.text), "VB", t.lemma, t.ws)
        if not past_slip and j and tail[j - 1].text.lower() in ("and", "or") and t.tag in ("VB", "VBP")
        and is_base_verb(t.text, resources.wordnet) else t for j, t in enumerate(tail) if j]
    return _place(kind, f"do_{rule}", phrase, answer, _join(subject), clause, wh_tokens, resources)


def _how_adj_copula(wh_tokens, aux: _Tok, after: list[_Tok], subject, tail, answer: str, resources) -> list[Candidate]:
    """"How long is the river" -> "The river is A long"; "How long was X in operation" -> "X was
    in operation for A"; an answer that is no measure gets no sentence."""
    adj = wh_tokens[-1].text.lower()
    subject, tail = _copula_subject(after) if _main_part(after) == len(after) else (subject, tail)
    end = _noun_phrase_end(after, 0)
    if not tail and 0 < end < len(after) and after[end].tag == "IN":
        subject, tail = after[:end], after[end:]  # "How long was the theatre in operation": its predicate
    measured = any(t.tag_ in ("NN", "NNS") for t in syntax(resources, answer))
    if adj == "old" and re.fullmatch(r"[\d.,]+", answer.strip()):
        answer, measured = f"{answer} years", True  # "How old was X" + "15"
    if not measured:
        raise _NoForm("answer is no measure")  # "How long was X in operation" + "1870 to 1939"
    if tail and adj == "long":  # "How long was X in operation" -> "X was in operation for A"
        return [Candidate("how_adj_copula", _sentence(_join(subject), aux.text, _join(tail), "for", answer))]
    said = answer if answer.lower().split()[-1:] == [adj] else f"{answer} {adj}"
    return [Candidate("how_adj_copula", _sentence(_join(subject), aux.text, said, _join(tail)))]


def _unmarked_lead(toks: list[_Tok]) -> int:
    """Where the question proper starts after a fronted phrase with no comma ("At first what did
    ..."), or 0: a preposition or adverb first, then a wh-word that is neither a preposition's
    object ("in which") nor a noun's relative pronoun, with an auxiliary or its noun phrase next."""
    if not toks or toks[0].tag not in ("IN", "RB"):
        return 0
    for k in range(2, len(toks) - 1):
        t = toks[k]
        if t.tag in WH_TAGS and t.text.lower() in ("what", "which", "who", "when", "where", "why", "how"):
            if toks[k - 1].tag in ("IN", "TO", "DT", "WDT", "WP") or toks[k - 1].tag in NP_CORE and t.text.lower() in ("which", "who"):
                return 0
            nxt = toks[k + 1]
            return k if _is_aux(nxt) or nxt.tag in NP_TAGS or nxt.tag in ("JJ", "RB") else 0
    return 0


def _wh_is_subject(rest: list[_Tok]) -> bool:
    """Whether a nominal wh-phrase is the subject: no auxiliary follows it ("Who founded X"),
    "had" is the main verb, or an auxiliary is followed by its verb with no subject between.
    The arcs decide first where they show a subject right after the auxiliary ("What is most of
    the cleared land used for?"); a modal takes only a bare verb ("What would changing X be")."""
    if not _is_aux(rest[0]) or _main_verb(rest):
        return True
    if len(rest) < 2:
        return False
    aux, nxt = rest[0], rest[1]
    arc = next((t for t in rest[1:] if t.dep in SUBJ_DEPS and t.left == nxt.i and t.head in (aux.i, aux.head)), None)
    if arc is not None and arc.tag not in WH_TAGS:
        ARCS["inverted subject by arcs"] += 1
        return False
    if aux.tag == "MD":
        return nxt.tag == "VB" or (nxt.tag == "RB" and len(rest) > 2 and rest[2].tag == "VB")
    if aux.lemma == "be":
        return nxt.tag in ("VBN", "VBG", "JJ", "JJR", "JJS", "IN", "RB", "RBR")
    if aux.lemma == "have":
        return nxt.tag in ("VBN",)
    return False


def _do_split(aux: _Tok, after: list[_Tok], resources) -> tuple[list[_Tok] | None, list[_Tok], bool]:
    """(subject, clause from the verb on, whether the question already gave the verb its tense)
    after do-support; (None, [], False) where no verb follows. The verb is the one "did" hangs
    on in the parse where WordNet has it as a base-form verb and a subject precedes it
    ("did Genghis Khan cross to enter ...": "cross", though tagged a noun); else the tags decide."""
    pos = {t.i: k for k, t in enumerate(after)}
    v = pos.get(aux.head)
    if v and aux.dep == "aux" and after[v].text.islower() and is_base_verb(after[v].text, resources.wordnet) \
            and any(t.tag in NP_CORE for t in after[:v]) and after[v - 1].tag not in ("TO", "IN", "DT", "VB", "VBP"):
        ARCS["do-support verb by arcs"] += 1
        return after[:v], after[v:], False
    ARCS["do-support verb by tags"] += 1
    subject, tail = _split_subject(after)
    while len(tail) > 1 and tail[0].tag in ("RB", "RBR") and tail[0].text.lower() not in ("not", "n't"):
        subject, tail = subject + tail[:1], tail[1:]  # "does Doctor Who usually | take": the adverb stays before it
    if not tail and len(subject) > 1:  # "did the war end": the tagger took the verb for a noun
        subject, tail = subject[:-1], subject[-1:]
    past_slip = (bool(tail) and tail[0].tag == "VBD" and aux.text.lower() == "did" and tail[0].lemma not in AUX_LEMMAS
                 and all(t.tag in NP_TAGS for t in subject))
    if not tail or not subject or not (past_slip or _do_support_verb(subject, tail, resources)):
        split = _verb_after_noun(after, resources)
        if split is None:
            return None, [], False
        subject, tail = after[:split], after[split:]
    return subject, tail, past_slip


def _inverted_split(aux: _Tok, after: list[_Tok], resources, nominal: bool, kind: str) -> tuple[list[_Tok], list[_Tok]]:
    """Subject and the rest after an inverted auxiliary. The parse first: the subject runs up to
    the verb the auxiliary hangs on, less the adverbs and auxiliaries before that verb ("What
    must the adoption of laws which will make X illegal have" -> the whole noun phrase, relative
    clause and all; "What was the museum originally called" -> "the museum"); checked to hold a
    noun and to end at a verb of the auxiliary's kind. A question's last participle ends the
    subject first ("What is the derivative of X called"), unless a relative clause's; a copula
    whose subject's arc spans all the rest keeps it whole where the wh-phrase is nominal ("What
    was the name of the leader ennobled by Henry III"). Else the tags (`_split_subject`)."""
    last = len(after) - 1 - (len(after) > 1 and after[-1].tag in ("IN", "RP"))
    if aux.lemma == "be" and last > 0 and after[last].tag in ("VBN", "VBD") and after[last].dep != "relcl" \
            and not any(t.tag in ("WDT", "WP") or t.text.lower() == "that" for t in after[:last]):
        # "What is the derivative of an object's changing momentum called?": the participle last
        k = last
        while k > 1 and after[k - 1].tag in ("RB", "RBR"):
            k -= 1
        ARCS["inverted subject by the final participle"] += 1
        return after[:k], after[k:]
    if nominal and aux.lemma == "be" and aux.dep == "ROOT" and not _open_progressive(after) and any(
            t.dep in SUBJ_DEPS and t.head == aux.i and t.left == after[0].i and t.right == after[-1].i for t in after) \
            and not any(t.text.lower() in NAMING for t in after):  # "What is the area called near ...": its verb
        ARCS["copula by arcs"] += 1  # "What was the name of the leader ennobled by Henry III"
        return after, []
    pos = {t.i: k for k, t in enumerate(after)}
    v = pos.get(aux.head)
    if aux.dep in ("aux", "auxpass") and v:
        verb = after[v]
        fits = (verb.tag in ("VBN", "VBG") or (verb.tag == "VBD" and all(t.tag in ("IN", "RP", "RB") for t in after[v + 1:]))
                if aux.lemma == "be" else verb.tag in ("VBN", "VBD") if aux.lemma == "have"
                else verb.tag.startswith("VB"))
        k = v
        while k > 0 and (after[k - 1].tag in ("RB", "RBR", "TO") or _is_aux(after[k - 1])):
            k -= 1
        if fits and k and any(t.tag in NP_CORE for t in after[:k]) and after[k - 1].tag not in ("IN", "HYPH") \
                and v < _main_part(after):
            ARCS["inverted subject by arcs"] += 1
            return after[:k], after[k:]
    ARCS["inverted subject by tags"] += 1
    subject, tail = _split_subject(after)
    if len(tail) > 1 and tail[0].text.lower() in NAMING and (
            tail[1].tag in ("WDT", "WP") or tail[1].text.lower() == "that" or tail[1].tag == "IN" and len(tail) > 2
            and tail[2].tag in ("WDT", "WP")):
        # "What is the group called that does not agree ..." -> "The group that does not agree ... is called A"
        return subject + tail[1:], tail[:1]
    if aux.lemma != "be" and not any(t.tag.startswith("VB") for t in tail):
        split = _verb_after_noun(after, resources)  # "What could the Program purchase"
        if split is None:
            raise _NoForm("no verb after the auxiliary")
        t = after[split]
        return after[:split], [_Tok(t.text, "VB", t.lemma, t.ws, t.i, t.dep, t.head, t.left, t.right)] + after[split + 1:]
    relative = any(t.tag in ("WDT", "WP") or t.text.lower() == "that" for t in subject)
    verb = next((t for t in tail if t.tag not in ("TO", "RB", "RBR") and not (_is_aux(t) and t.tag in ("VB", "VBN"))), None)
    if aux.lemma == "be" and verb is not None and tail[:_main_part(tail)] and (
            verb.tag not in ("VBN", "VBG", "VBD") or subject[-1].tag == "IN" or relative and verb.tag == "VBD"
            or kind in ("which", "who") and aux.dep == "ROOT" and verb.tag == "VBN" and verb.dep in ("acl", "relcl")
            and verb.text.lower() not in NAMING and _stranded(tail) is None):
        # "Which is the largest city not connected to ...": a copula; the participle modifies its noun
        return after, []  # "What is the term for a task that generally lends ...": a copula; the verb is the clause's
    return subject, tail


def _open_progressive(after: list[_Tok]) -> bool:
    """Whether the words after "be" hold a progressive whose last verb lacks its object ("What
    are the dads trying to do", "What were the children trying to find"): the wh-phrase is that
    verb's object, not the copula's complement, though the parse hangs the participle on the noun."""
    at = {t.i for t in after}
    for t in after:
        if t.tag == "VBG" and t.dep == "acl":
            if t.lemma == "do" and not any(w.head == t.i and w.dep in ("dobj", "xcomp", "ccomp") for w in after):
                return True  # "What are the children doing in the afternoon"
            for u in after:
                if u.dep == "xcomp" and u.head == t.i and u.tag == "VB" and not any(
                        w.head == u.i and w.dep in ("dobj", "dative", "ccomp") for w in after) and t.head in at:
                    return True
    return False


def _copula_subject(after: list[_Tok]) -> tuple[list[_Tok], list[_Tok]]:
    """Subject and predicate after an inverted copula with an adverbial wh-word ("Why is X
    important", "How old is X today"): the parse's subject where it starts the rest, else the
    tags' noun phrase."""
    arc = next((t for t in after if t.dep in SUBJ_DEPS and t.left == after[0].i and t.right >= t.i), None)
    if arc is not None:
        end = next((k + 1 for k, t in enumerate(after) if t.i == arc.right), None)
        if end:
            ARCS["copula subject by arcs"] += 1
            return after[:end], after[end:]
    ARCS["copula subject by tags"] += 1
    end = _noun_phrase_end(after, 0) or len(after)
    return after[:end], after[end:]


def _copula(kind, rule, phrase, answer, aux, after, wh_tokens, fronted_prep) -> list[Candidate]:
    """An inverted copula with no verb after it. A nominal wh-phrase is the complement: all the
    rest is the subject ("What is the capital of France" -> "The capital of France is A"), up to
    a stranded preposition, which takes the answer ("Who was Iqbal a critic of" -> "Iqbal was a
    critic of A"; "Where is X from" -> "X is from A"). An adverbial one follows the predicate."""
    if after[0].tag == "EX":  # "In what year was there an attempt to ..." -> "There was an attempt to ... in A"
        if kind in ("when", "where", "why", "how") or fronted_prep:
            return [Candidate(f"copula_{rule}", _sentence("there", aux.text, _join(after[1:]), phrase))]
        k = _stranded(after[1:])  # "What river was there a bridge across in Roman times"
        if k is not None:
            return [Candidate(f"copula_{rule}", _sentence("there", aux.text, _join(after[1:k + 1]), answer,
                                                          _join(after[k + 1:])))]
        return [Candidate(f"copula_{rule}", _sentence("there", aux.text, phrase, _join(after[1:])))]
    if after[-1].tag == "IN" and not fronted_prep and not any(t.tag in ("WDT", "WP") or t.text.lower() == "that"
                                                               for t in after):  # not a relative clause's own
        if _answer_starts_with_preposition(answer):
            raise _NoForm("stranded preposition")
        split = min(next((k for k in range(1, len(after) - 1)
                          if after[k].tag in ("DT", "PRP$", "PDT") and after[k - 1].tag in NP_CORE), len(after) - 1),
                    _noun_phrase_end(after, 0) or len(after))  # "the Canarian Islands | off the coast of"
        if not any(t.tag in NP_CORE for t in after[:split]):
            raise _NoForm("stranded preposition")
        return [Candidate(f"copula_{rule}", _sentence(_join(after[:split]), aux.text, _join(after[split:]), answer))]
    if kind in ("when", "where", "why", "how"):
        subject, pred = _copula_subject(after)
        if not subject or not any(t.tag in NP_CORE for t in subject):
            raise _NoForm("no subject after the auxiliary")
        return [Candidate(f"copula_{rule}", _sentence(_join(subject), aux.text, _join(pred), phrase))]
    out = [Candidate(f"copula_{rule}", _sentence(_join(after), aux.text,
                                                 answer if kind == "wh_np" and not fronted_prep else phrase))]
    if kind == "wh_np" and _np_of_fits(wh_tokens, answer):
        prep = wh_tokens[0].text.lower() if fronted_prep else ""
        out.append(Candidate("copula_np_of", _sentence(_join(after), aux.text, prep,
                                                       f"the {_wh_noun(wh_tokens)} of {answer}")))
    return out


def _answer_starts_with_preposition(answer: str) -> bool:
    return lower_first(answer) in ("in", "at", "on", "from", "to", "of", "for", "by", "with", "into", "during")


def _np_of_fits(wh_tokens: list[_Tok], answer: str) -> bool:
    """Whether "the N of A" reads as English: N a place or month noun (`NP_OF_NOUNS`) and A a
    name."""
    noun = _wh_noun(wh_tokens).lower()
    return noun in NP_OF_NOUNS and answer[:1].isupper() and noun not in answer.lower()


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
    tags = [t.tag_ for t in syntax(resources, probe)]
    k = len(syntax(resources, f"{_join(subject)} will"))
    return k < len(tags) and tags[k] in ("VB", "VBP")


def _verb_after_noun(after: list[_Tok], resources) -> int | None:
    """Where the verb of do-support starts when the tagger took it for a noun inside the subject
    ("did the German army reoccupy Rhineland", "did the Broncos score in ..."): the first
    lowercase base-form verb after a noun that passes `_do_support_verb` ("did a 1996 study by
    Perotti examine": not "study", after a determiner's number and before "by"; "does the west
    side of Fresno lie": not "side")."""
    found = [k for k in range(1, len(after))
             if after[k - 1].tag in ("NN", "NNS", "NNP", "NNPS", "CD", "JJ") and after[k].text.islower()
             and not (after[k - 1].tag == "CD" and k > 1 and after[k - 2].tag == "DT")  # "a 1996 study"
             and _do_support_verb(after[:k], after[k:], resources)]
    # a word before "of" or "by" is a noun more likely than the verb ("the west side of Fresno ... lie")
    return next((k for k in found if not (k + 1 < len(after) and after[k + 1].text.lower() in ("of", "by"))),
                found[0] if found else None)


def _split_subject(after: list[_Tok]) -> tuple[list[_Tok], list[_Tok]]:
    """Subject and the rest after an inverted auxiliary by the tags: everything up to the first
    verb after a noun ("How would the societies in Europe support ..."; not "the suspended team",
    "of referring"), less adverbs before it, else a noun phrase (the tagger sometimes takes the
    verb for a noun: "did the war end")."""
    main = _main_part(after)
    k = next((i for i, t in enumerate(after[:main]) if t.tag.startswith("VB") and i and after[i - 1].tag not in ("IN", "HYPH")
              and any(u.tag in NP_CORE for u in after[:i]) and not (t.tag == "VB" and after[i - 1].tag == "TO")), None)
    if k:
        while k > 1 and (after[k - 1].tag in ("RB", "RBR", "TO") or _is_aux(after[k - 1])):
            k -= 1  # "an elected assembly | was to be set up"
        return after[:k], after[k:]
    if main < len(after):  # "How old was Peyton Manning | when he played ..."
        return after[:main], after[main:]
    end = _noun_phrase_end(after, 0)
    if 1 < end < len(after) and after[end - 1].tag == "JJ" and after[end - 1].text.endswith("ed") \
            and after[end - 2].tag in NP_CORE and after[end].tag in ("TO", "IN"):
        end -= 1  # "has a Lama determined to do": the tagger's adjective is the participle
        t = after[end]
        return after[:end], [_Tok(t.text, "VBN", t.lemma, t.ws, t.i, t.dep, t.head, t.left, t.right)] + after[end + 1:]
    return after[:end], after[end:]


def _main_part(toks: list[_Tok]) -> int:
    """Where a clause of its own starts ("when he played in ..."), or the length."""
    return next((k for k, t in enumerate(toks) if t.text.lower() in CLAUSE_OPENERS), len(toks))


def _main_verb(rest: list[_Tok]) -> bool:
    """"had" followed by a noun phrase and no verb is the main verb ("Which player had the most
    interceptions?"), not an auxiliary ("What has the company built?"). "did"/"does" always
    stand for do-support: the tagger often takes the verb after them for a noun."""
    if rest[0].tag == "MD" or rest[0].lemma != "have":
        return False
    end = _noun_phrase_end(rest, 1)
    return end > 1 and not any(t.tag.startswith("VB") and rest[end + k - 1].tag != "IN"  # "on initiating"
                               for k, t in enumerate(rest[end:]))


def _subject(kind, rule, phrase, answer, wh_tokens, rest, resources) -> list[Candidate]:
    """The wh-phrase is the subject: "Who founded X" -> "A founded X", the verb agreeing with the
    answer's number ("Other senior pharmacy technicians oversee ..."). A subject is a noun phrase:
    "What happened to the crew" + "asphyxiated" has no statement here."""
    form = _answer_form(answer, resources) if kind in ("what", "who", "which") else "np"
    if form in ("clause", "sub", "to") or form == "verb" and answer[:1].islower():
        raise _NoForm("answer is no noun phrase")
    vp = _join(_agree(rest, phrase if kind != "wh_np" else answer, resources))
    if kind != "wh_np":
        return [Candidate(f"subject_{rule}", _sentence(phrase, vp))]
    out = [Candidate("subject_wh_np", _sentence(phrase, vp))]
    if _np_of_fits(wh_tokens, answer):
        out.append(Candidate("subject_np_of", _sentence(f"the {_wh_noun(wh_tokens)} of {answer}", vp)))
    return out


def _plural(answer: str, resources) -> bool | None:
    """Whether the answer is a plural noun phrase (its first noun phrase's last noun plural, or
    nouns joined by "and"), a singular one, or None where it has no noun."""
    toks = list(syntax(resources, answer))
    end = next((k for k, t in enumerate(toks) if t.tag_ in ("IN", ",", "(", "-LRB-") and k), len(toks))
    nouns = [t for t in toks[:end] if t.tag_ in ("NN", "NNS", "NNP", "NNPS")]
    if not nouns:
        return None
    if any(t.lower_ == "and" for t in toks[:end]) or nouns[-1].tag_ in ("NNS", "NNPS"):
        return True
    return False


PLURAL_OF = {"is": "are", "was": "were", "has": "have", "does": "do"}
SINGULAR_OF = {v: k for k, v in PLURAL_OF.items()}


def _agree(rest: list[_Tok], answer: str, resources) -> list[_Tok]:
    """The clause with its first verb in the answer's number, where it is a present-tense verb
    or was/were."""
    first = rest[0]
    word = first.text.lower()
    if first.tag not in ("VBZ", "VBP", "VBD") or first.tag == "VBD" and word not in ("was", "were"):
        return rest
    if _answer_form(answer, resources) not in ("np", "adj") or answer[:1] in "\"'“‘":
        return rest  # '"We are beggars," was in German': a quotation or a clause has no number
    plural = _plural(answer, resources)
    if plural is None:
        return rest
    if plural and (word in PLURAL_OF or first.tag == "VBZ"):
        new = PLURAL_OF.get(word) or (first.lemma if third_person(first.lemma) == word else None)
    elif not plural and (word in SINGULAR_OF or first.tag == "VBP"):
        new = SINGULAR_OF.get(word) or (third_person(first.text) if word == first.lemma else None)
    else:
        new = None
    return [_Tok(new, first.tag, first.lemma, first.ws)] + rest[1:] if new else rest


def _place(kind, rule, phrase, answer, subject: str, clause: list[_Tok], wh_tokens, resources) -> list[Candidate]:
    """Subject + clause with the answer phrase at the gap (objects and stranded prepositions) or
    after the clause (adverbial wh-words)."""
    if not subject:
        raise _NoForm("no subject after the auxiliary")
    stranded = clause and clause[-1].tag == "IN" and not (wh_tokens and wh_tokens[0].tag == "IN")
    if kind in ("when", "where") and stranded:  # "Where did X come from" -> "X came from A"
        if _answer_starts_with_preposition(answer):
            raise _NoForm("stranded preposition")
        return [Candidate(rule, _sentence(subject, _join(clause), answer))]
    if kind == "how_adj" and clause[0].text.lower() in ("take", "takes", "took"):  # "It took A to ..."
        return [Candidate(rule, _sentence(subject, clause[0].text, answer, _join(clause[1:])))]
    if kind in ("when", "where", "why", "how", "how_adj", "time_np", "how_often") or (wh_tokens and wh_tokens[0].tag == "IN"):
        # before a comma's afterthought: "was set up in A, under the terms of the Act"
        c = next((k for k, t in enumerate(clause) if t.text == "," and k), len(clause))
        return [Candidate(rule, _sentence(subject, _join(clause[:c]), answer if kind == "how_adj" else phrase,
                                          _join(clause[c:])))]
    d = _open_do(clause)
    if kind == "what" and d is not None and _verb_phrase_for(clause[d].text.lower(), answer, resources):
        # "What has a Lama determined to do" + "be reborn", "What is Tom going to do tomorrow" +
        # "visit his aunt", "What are the children doing" + "playing football": the answer is the
        # verb phrase, in place of "do" or "doing"
        return [Candidate(f"{rule}_do", _sentence(subject, _join(clause[:d]), answer, _join(clause[d + 1:])))]
    if d is not None:  # "What does X want Y to do" + "homework": the object of "do"
        return [Candidate(rule, _sentence(subject, _join(clause[:d + 1]), phrase, _join(clause[d + 1:])))]
    k = _gap(clause)
    if 0 < k < len(clause) and clause[k].text.lower() == "from" and _answer_form(answer, resources) == "clause":
        # "What can we learn from the passage" + "Tom is kind" -> "We can learn from the passage that Tom is kind"
        lead = "" if answer.lower().startswith("that ") else "that"
        first, _, more = answer.partition(" ")
        first = first.lower() if first.lower() in PRONOUNS_LOWERED else first
        return [Candidate(rule, _sentence(subject, _join(clause), lead, first, more))]
    out = [Candidate(rule, _sentence(subject, _join(clause[:k]), phrase, _join(clause[k:])))]
    if kind == "wh_np" and _np_of_fits(wh_tokens, answer):
        noun = _wh_noun(wh_tokens)
        out.append(Candidate(f"{rule}_np_of", _sentence(subject, _join(clause[:k]), f"the {noun} of {answer}",
                                                        _join(clause[k:]))))
    return out


def _verb_phrase_for(do: str, answer: str, resources) -> bool:
    """Whether the answer is a verb phrase in the form of "do" (a base verb) or "doing" (a
    gerund), read after "to" or "is" so that the tagger sees it as a verb ("read more")."""
    if do == "doing":
        return syntax(resources, f"is {answer}")[1].tag_ == "VBG"
    return syntax(resources, answer)[0].tag_ in ("VB", "VBP") or syntax(resources, f"to {answer}")[1].tag_ == "VB"


def _open_do(clause: list[_Tok]) -> int | None:
    """Index of a "to do" or "doing" whose object is the wh-phrase: the last such word, followed
    by nothing or by adverbials only (a preposition, an adverb, "tomorrow"), not by an object."""
    for d in range(len(clause) - 1, 0, -1):
        if clause[d].text.lower() == "do" and clause[d - 1].tag == "TO" or clause[d].text.lower() == "doing":
            nxt = clause[d + 1] if d + 1 < len(clause) else None
            if nxt is None or nxt.tag in ("IN", "RB", "RBR", ",") or nxt.dep in ("npadvmod", "advmod", "prep"):
                return d
            return None
    return None


def _non_wh(toks: list[_Tok], answer: str, answer_type, resources) -> list[Candidate]:
    """Questions without a fronted wh-phrase: a wh-word in place ("The war ended in what
    year"), or a yes/no question, which has no declarative form with an answer. The asking
    wh-word is the last one: earlier ones open relative clauses ("those persons who oppose
    what?")."""
    for k in range(len(toks) - 1, -1, -1):
        t = toks[k]
        if t.tag in WH_TAGS and t.text.lower() in WH_WORDS:  # not "that" opening a relative clause
            word = t.text.lower()
            if word in ("what", "which", "whose"):
                end = _noun_phrase_end(toks, k + 1)
                said = answer
                if end > k + 1 and toks[end - 1].tag in ("NN", "NNS") and _answer_form(answer, resources) == "adj":
                    # "the first kind of what type of protest" + "nonviolent": "nonviolent protest"
                    article = "" if toks[end - 1].tag == "NNS" or (k and toks[k - 1].text.lower() == "of") \
                        else f"{indefinite_article(answer)} "
                    said = f"{article}{answer} {toks[end - 1].text}"
                return [Candidate("in_situ", _sentence(_join(toks[:k]), said, _join(toks[end:])))]
            if word == "how" and k + 1 < len(toks) and toks[k + 1].text.lower() in ("many", "much"):
                end = _noun_phrase_end(toks, k + 2) if k + 2 < len(toks) else k + 2
                phrase, _ = _answer_for("how_many", toks[k:end], answer, answer_type, resources)
                return [Candidate("in_situ", _sentence(_join(toks[:k]), phrase, _join(toks[end:])))]
            if word == "how" and k + 1 < len(toks) and toks[k + 1].tag in ("JJ", "RB", "JJR", "RBR"):
                adj = toks[k + 1].text.lower()  # "were how old" + "515 million years old"
                end = k + 2 if answer.lower().split()[-1:] == [adj] else k + 1
                return [Candidate("in_situ", _sentence(_join(toks[:k]), answer, _join(toks[end:])))]
            return [Candidate("in_situ", _sentence(_join(toks[:k]), answer, _join(toks[k + 1:])))]
    if len(toks) > 1 and toks[0].text.lower() in ("name", "list", "give") and toks[0].tag in ("VB", "NN", "NNP"):
        # "Name one of the causes of immunodeficiency." -> "One of the causes of immunodeficiency is A."
        rest = toks[1:]
        verb = "are" if rest[0].tag == "NNS" or rest[0].text.lower() in ("two", "three", "some", "several") else "is"
        return [Candidate("imperative_name", _sentence(_join(rest), verb, answer))]
    raise _NoForm("no wh-phrase")
