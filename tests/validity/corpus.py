"""The labelled validity corpus: attacked items written for advrace, valid and invalid,
one YAML file per kind of violation, that `advrace audit` must flag iff they are invalid.

Each file is `{kind, attack, flag, items: [...]}`; `flag` names the registered check
(advrace.core.checks) whose label an invalid item must carry (`check: NAME`). An item is compact; `load()` builds the source example and the attacked one
with the examples' own edit methods and provenance records, as the attacks write them:

- the source question: `src: race/high/8#2` (a sample question: passage, question, options,
  answer) or `src: race/high/8` (a sample passage) with `q`, `opts`, `ans` (a letter); or
  `passage` written in full; SQuAD items `src: squad/<question id>` (the sample's context,
  question and answers), `q` overriding the question;
- AddSent (RACE) and AddOneSent (SQuAD): `sent` (inserted at the end of the passage or context),
  `reps` (each "old>new", then optionally a POS such as PROPN and a kind such as antonym; names
  of several words with "_" for the space; the POS defaults to PROPN for a capitalised old word,
  else NOUN, the kind to glove), `mutated` (defaults to the question with the replacements made),
  `fallback_not` (AddSent), `fake` and `type` (AddOneSent: the fake answer, the gold's answer type);
- distractor attacks: `new`, the new distractors, put in the wrong options' slots in order;
- any item: `config` (the split's attack config; default none), `attack` (default the file's),
  `valid` and `why` (one line).

Passages come from advrace/sample_data or are written in their style; nothing from real data.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import yaml

from advrace.core.examples import Answer, MCExample, SpanExample
from advrace.core.provenance import AdversarialSentence, AttackSummary, NewDistractors, Replacement

HERE = Path(__file__).resolve().parent
SAMPLES = HERE.parents[1] / "advrace" / "sample_data"
KINDS = ("near_meaning", "negated_options", "negated_restated", "negation_hint", "meta_text",
         "change_vanished", "fake_type", "answer_near_meaning", "stated_restated", "cut_span", "span_cut", "grammar")
# kinds read on real splits that no check catches yet: the audit must miss their invalid items.
# Issue 46's: near_meaning_squad (synonym-only mutations that resources.same_meaning does not yet
# relate), grammar_missed (broken sentences the grammar rules do not see) and race_addsent_kinds
# (AdvRACE-style AddSent items whose sentence answers the question), race_addsent_english (RACE
# AddSent sentences that are not English in ways the grammar rules do not see; the attack no longer
# writes them). Issue 48's: verbs_only (SQuAD questions changed only in a verb, to one that can
# say the asked fact).
KNOWN_MISSES = ("second_right_answer", "fake_kind", "blank_misfit", "near_meaning_squad", "grammar_missed",
                "race_addsent_kinds", "race_addsent_english", "verbs_only")


@dataclass(frozen=True)
class Item:
    kind: str
    attack: str
    source: object
    attacked: object
    config: dict | None
    valid: bool
    why: str
    id: str = ""
    flag: str = ""  # the label the kind's check reports

    def __iter__(self):
        """(kind, attack, source_example, attacked_example, config, valid, why)."""
        return iter((self.kind, self.attack, self.source, self.attacked, self.config, self.valid, self.why))


# --------------------------------------------------------------------------- sample data

_race_cache: dict[str, dict] = {}
_squad_cache: dict[str, tuple] = {}


def _race(name: str) -> dict:
    if name not in _race_cache:
        _race_cache[name] = json.loads((SAMPLES / "race" / f"{name}.txt").read_text(encoding="utf-8"))
    return _race_cache[name]


def _squad(qid: str) -> tuple[str, str, str, tuple[Answer, ...]]:
    """(title, context, question, answers) of a sample SQuAD question."""
    if not _squad_cache:
        data = json.loads((SAMPLES / "squad" / "sample-v1.1.json").read_text(encoding="utf-8"))
        for article in data["data"]:
            for para in article["paragraphs"]:
                for qa in para["qas"]:
                    answers = tuple(Answer(a["text"], a["answer_start"]) for a in qa["answers"])
                    _squad_cache[qa["id"]] = (article["title"], para["context"], qa["question"], answers)
    return _squad_cache[qid]


def _mc_source(item: dict, iid: str) -> MCExample:
    src = item.get("src", "")
    passage, question, options, label = item.get("passage"), item.get("q"), item.get("opts"), None
    if src:
        name, _, number = src.removeprefix("race/").partition("#")
        article = _race(name)
        passage = passage or article["article"]
        if number:
            k = int(number)
            question = question or article["questions"][k]
            options = options or article["options"][k]
            label = "ABCD".index(article["answers"][k])
    if "ans" in item:
        label = "ABCD".index(item["ans"])
    if not (passage and question and options) or label is None:
        raise ValueError(f"{iid}: an item needs a passage, question, options and answer")
    return MCExample(id=iid, passage=passage, question=question, options=tuple(options), label=label)


def _span_source(item: dict, iid: str) -> SpanExample:
    if "context" in item:  # written in full: `context`, `q` and `answers` (texts found in the context)
        context = item["context"]
        answers = tuple(Answer(a, context.index(a)) for a in item["answers"])
        return SpanExample(id=iid, title="written", context=context, question=item["q"], answers=answers)
    title, context, question, answers = _squad(item["src"].removeprefix("squad/"))
    return SpanExample(id=iid, title=title, context=context, question=item.get("q", question), answers=answers)


# --------------------------------------------------------------------------- replacements

def _parse_rep(text: str) -> dict:
    """ "purpose>objective", "London>Melbourne PROPN", "main>minor ADJ antonym", ">not negation"."""
    head, *rest = text.split()
    old, _, new = head.partition(">")
    old, new = old.replace("_", " "), new.replace("_", " ")
    pos = next((t for t in rest if t.isupper()), None)
    kind = next((t for t in rest if t.islower()), "glove")
    if pos is None and kind != "negation":
        pos = "PROPN" if old[:1].isupper() else "NOUN"
    rep = {"word": old, "new": new, "kind": kind}
    if pos:
        rep["pos"] = pos
    return rep


def _find_word(text: str, word: str, start: int = 0) -> int:
    m = re.compile(rf"(?<!\w){re.escape(word)}(?!\w)").search(text, start)
    if m is None:
        raise ValueError(f"{word!r} is not a word of {text!r}")
    return m.start()


def _mutate(question: str, reps: list[dict]) -> tuple[str, list[int]]:
    """The question with each replacement made (left to right), and each one's position in it."""
    out, positions, at = question, [], 0
    for rep in reps:
        if not rep["word"]:
            positions.append(0)
            continue
        i = _find_word(out, rep["word"], at)
        positions.append(i)
        out = out[:i] + rep["new"] + out[i + len(rep["word"]):]
        at = i + len(rep["new"])
    return out, positions


# --------------------------------------------------------------------------- items

def _addsent(item: dict, src: MCExample, iid: str) -> MCExample:
    reps = [_parse_rep(r) for r in item.get("reps", ())]
    mutated, positions = _mutate(src.question, reps)
    for rep, pos in zip(reps, positions):
        rep["position"] = pos
    sentence = item["sent"]
    if "dis" in item:
        k = int(item["dis"])
    else:
        said = sentence.lower()
        wrong = [i for i in range(len(src.options)) if i != src.label]
        k = next((i for i in wrong if src.options[i].rstrip(".").lower() in said), wrong[0])
    replacements = tuple(Replacement(r["position"], r["position"] + len(r["word"]), r["word"], r["new"], r["kind"],
                                     pos=r.get("pos")) for r in reps)
    entry = AdversarialSentence(sentence, question=item.get("mutated", mutated), replacements=replacements,
                                answer=src.options[k], option=k, negation_fallback=bool(item.get("fallback_not")))
    return src.insert_sentence(sentence, len(src.passage)).with_provenance(AttackSummary("addsent", sentences=(entry,)))


def _addonesent(item: dict, src: SpanExample, iid: str) -> SpanExample:
    reps, at = [], 0
    question = src.question
    for text in item.get("reps", ()):
        rep = _parse_rep(text)
        start = _find_word(question, rep["word"], at)
        at = start + len(rep["word"])
        reps.append(Replacement(start, at, rep["word"], rep["new"], rep["kind"]))
    mutated = item.get("mutated") or _mutate(question, [{"word": r.old, "new": r.new} for r in reps])[0]
    sentence = item["sent"]
    entry = AdversarialSentence(sentence, question=mutated, replacements=tuple(reps), answer=item.get("fake", ""),
                                answer_type=item.get("type", ""), rule="written", fake_rule=item.get("rule", ""))
    return src.insert_sentence(sentence, len(src.context)).with_provenance(
        AttackSummary("addonesent", sentences=(entry,)))


def _distractors(item: dict, src: MCExample, attack: str) -> MCExample:
    new = list(item["new"])
    options = list(src.options)
    for slot, text in zip([i for i in range(len(options)) if i != src.label], new):
        options[slot] = text
    record = NewDistractors(original=src.distractors, new=tuple(new))
    return src.replace_options(options).with_provenance(AttackSummary(attack, distractors=record))


def kind_flag(spec: dict) -> str:
    """The label an invalid item of the kind must carry: its check's, or a known miss's own."""
    from advrace.core.checks import REGISTRY

    if "any" in spec["flag"]:  # a known miss that any check may come to catch: "" stands for any flag
        return ""
    return REGISTRY[spec["flag"]["check"]].flag if "check" in spec["flag"] else spec["flag"]["miss"]


def spec(kind: str) -> dict:
    return yaml.safe_load((HERE / f"{kind}.yaml").read_text(encoding="utf-8"))


def load(kinds=KINDS) -> Iterator[Item]:
    """Every item of the kinds, in file order."""
    for kind in kinds:
        data = spec(kind)
        flag = kind_flag(data)
        for n, item in enumerate(data["items"], 1):
            iid = item.get("id") or f"{kind}-{n:02d}"
            attack = item.get("attack", data["attack"])
            if attack == "addonesent":
                src = _span_source(item, iid)
                ex = _addonesent(item, src, iid)
            else:
                src = _mc_source(item, iid)
                ex = _addsent(item, src, iid) if attack == "addsent" else _distractors(item, src, attack)
            yield Item(kind, attack, src, ex, item.get("config"), bool(item["valid"]), item["why"],
                       id=iid, flag=flag)


def squad_questions() -> list[tuple[SpanExample, str | None]]:
    """(question, closed-book answer or None): every SQuAD question the corpus's items are made
    from, then those written in squad_fakes.yaml to trap the fake-answer rules."""
    out, seen = [], set()
    for kind in KINDS + KNOWN_MISSES:
        for item in spec(kind)["items"]:
            src = item.get("src", "")
            if src.startswith("squad/") and src not in seen:
                seen.add(src)
                title, context, question, answers = _squad(src.removeprefix("squad/"))
                out.append((SpanExample(id=src, title=title, context=context, question=question,
                                        answers=answers), None))
    written = yaml.safe_load((HERE / "squad_fakes.yaml").read_text(encoding="utf-8"))["items"]
    for n, item in enumerate(written, 1):
        context = item["context"]
        answers = tuple(Answer(a, context.index(a)) for a in item["answers"])
        out.append((SpanExample(id=f"squad_fakes-{n:02d}", title="written", context=context,
                                question=item["question"], answers=answers), item.get("closed")))
    return out


def audit(item: Item, ctx) -> list[tuple[str, str]]:
    """The audit's flags on one item: (label, detail)."""
    from advrace.release import audit as A

    return [(name, detail) for _, _, name, detail in
            A.audit_split(item.attack, [item.source], [item.attacked], ctx, item.config).flags]


def judged_right(item: Item, flags: list[tuple[str, str]]) -> bool:
    """A valid item has no flag at all; an invalid one carries its kind's label."""
    if item.valid:
        return not flags
    return bool(flags) if item.flag == "" else item.flag in {name for name, _ in flags}
