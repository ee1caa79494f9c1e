"""The passage and its author moved to another text or person: "The writer urges the readers to
_" becomes "Another writer urges the readers to ...". A sentence that keeps "the writer" is about
this very passage and answers the question with a distractor, whatever else changed; no reader
takes "another writer" for this passage's author. Also the titles a question names, which a
sentence about another author must not keep."""

from __future__ import annotations

from advrace.core.provenance import Replacement
from advrace.resources.inflection import match_case

from .statement_frames import TITLE_QUOTE_RE


# The words that name this passage or its author. A sentence that keeps them is about this very
# passage: "The writer urges the listeners to obey their parents." answers "The writer urges the
# readers to _" with a distractor, whatever else changed. So they always move to another text or
# person ("Another writer urges ..."), which no reader takes for this passage's author.
REFRAME_NOUNS = frozenset({"passage", "article", "text", "paragraph", "writer", "author", "story", "poem"})
REFRAME_DETS = frozenset({"the", "this"})


def reframed_det(tok):
    """The 'the'/'this' of 'the writer', 'this reading passage' that `reframe_edits` moves, or None."""
    doc = tok.doc
    if tok.i == 0:
        return None
    det = next((c for c in tok.children if c.dep_ == "det" and c.i < tok.i), doc[tok.i - 1])
    if det.lower_ not in REFRAME_DETS or any(t.pos_ not in ("ADJ", "NOUN", "DET") for t in doc[det.i + 1:tok.i]):
        return None
    return det


def reframe_edits(doc) -> list:
    """Edits that move 'the/this passage', 'the writer' (and article, text, paragraph, author) to
    'another ...'; a later mention of the same noun becomes 'that ...' so it stays the other one."""
    out, seen = [], set()
    for tok in doc:
        lower = tok.lower_
        if lower not in REFRAME_NOUNS or tok.dep_ == "compound" or tok.i == 0:
            continue
        det = reframed_det(tok)
        if det is None:
            continue
        new = match_case("that" if lower in seen else "another", det.text)
        seen.add(lower)
        record = Replacement(det.idx, det.idx + len(det.text), det.text, new, "reframe",
                             changes_meaning=True)
        out.append((det.idx, det.idx + len(det.text), new, record))
    return out


def title_spans(doc) -> list[tuple[int, int]]:
    """Character spans of the titles a question names: quoted text, a work of art, or a run of two
    or more capitalised words after the first ('the story The Magic of Thinking Big')."""
    text = doc.text
    spans = [m.span() for m in TITLE_QUOTE_RE.finditer(text)]
    spans += [(e.start_char, e.end_char) for e in doc.ents if e.label_ == "WORK_OF_ART"]
    run = []
    for tok in list(doc) + [None]:
        title_word = tok is not None and tok.i > 0 and (tok.text[:1].isupper() or (
            run and tok.lower_ in ("of", "the", "a", "an", "and", "in", "on", "to", "for")))
        if title_word and tok.pos_ == "PROPN" and tok.ent_type_ == "PERSON":
            title_word = False
        if title_word:
            run.append(tok)
            continue
        while run and not run[-1].text[:1].isupper():
            run.pop()
        if sum(t.text[:1].isupper() for t in run) >= 2 and run[0].pos_ != "PROPN" or \
                sum(t.text[:1].isupper() for t in run) >= 3:
            spans.append((run[0].idx, run[-1].idx + len(run[-1].text)))
        run = []
    return spans

