"""Distractors mended by people (issue 45, item 3): in a judge item of a DE or DG split, an
annotator who finds a second right answer among the options ("cannot be answered", reason
"multiple correct options") may write their own wrong option in its place. The new option is a
candidate (store.save_candidate with `option` and `text`); the verify step then puts it to other
annotators, answered blind.

A new option meets the checks the attack's own options met (advrace.core.checks.options, with the
split's settings from the release's manifest, recorded in the study's meta), live while it is typed
and again when it is saved, besides this module's own: not empty, not another option again, and
for DE a span of the passage. Two kinds of the attack's checks do not run here:
- those that compare the option with the gold answer (`GOLD_CHECKS`): their refusal would tell the
  annotator which option is the gold, who has not been told and may still change their judgement;
  the blind verifiers catch a new option that is the answer in other words;
- batched ones (the paraphrase encoder's cosine): they would load a neural model into the web app.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from advrace.core.checks import OPTION, Subject, TextContext, checks_for
from advrace.core.distractors import match_format
from advrace.core.examples import MCExample
from advrace.core.provenance import AttackSummary
from advrace.core.seeding import seeded_rng
from advrace.core.text import LETTERS
from advrace.core.checks.option_identity import option_key

from . import store

SPAN, TEXT = "span", "text"  # a DE mend is a span of the passage; a DG mend any text
MEND_KINDS = {"distractor_extraction": SPAN, "distractor_generation": TEXT}
ATTACKS = {kind: attack for attack, kind in MEND_KINDS.items()}
MEND_REASON = "multiple correct options"
SETTINGS_KEY = "mend_settings"  # meta: split -> the split's attack config (the checks' settings)
FIELDS = ("mend_option", "mend_text")  # the form's fields (also CSV columns of a crowd platform)
MAX_CHARS = 300
GOLD_CHECKS = frozenset({"answer_equivalent", "answer_near_meaning", "answer_paraphrase"})

# What each check's refusal means to an annotator (the checks' own reasons are count keys).
EXPLAINED = {
    "has_words": "has no words",
    "same_as_option": "is another option again, but for “a”, “the” or a pronoun",
    "echoes_question": "only repeats words of the question, so it answers nothing",
    "refers_to_options": "refers to the other options (“all of the above”, “both A and B”)",
    "stated_in_passage": "is something the passage says, so it is a right answer to a question that asks "
                         "what the passage says",
    "unstated_for_negated": "is not something the passage says, so it is a right answer to a question that "
                            "asks what the passage does NOT say",
    "grounded": "is about nothing in the passage, so readers can drop it without reading; use the passage's "
                "words",
}
FORM_EXPLAINED = {"form: length unlike the other options": "is much longer or shorter than the other options",
                  "form: cut inside a word of the passage": "is cut inside a word of the passage"}


def mend_kind(example) -> str | None:
    """How a judge item of this example may be mended: SPAN or TEXT when the last attack that
    changed it is DE or DG and gave it new distractors, else None. Read from the example itself
    (its provenance), so that `human-eval validate`, which rebuilds each item's payload from the
    release, expects the same payload."""
    last = next((r for r in reversed(example.provenance) if isinstance(r, AttackSummary)), None)
    if last is None or last.distractors is None:
        return None
    return MEND_KINDS.get(last.attack)


def split_settings(manifest: dict, splits) -> dict:
    """The config of each DE and DG split of `splits` (the settings its checks ran with), for the
    study's meta: the app then checks a new option without the release at hand."""
    return {split: manifest["splits"][split].get("config") or {} for split in splits
            if manifest["splits"][split].get("attack") in MEND_KINDS}


def offered(item: dict) -> bool:
    """Whether the item's page offers a mend: a judge item whose payload says how, or a control or
    baseline item of a study whose judge items offer mends (`control_mend`), shown alike."""
    return item.get("kind", store.JUDGE) in TAKES_MEND and item["payload"].get("mend") in ATTACKS


# A control or baseline offers a mend as the judge items beside it do, or it would be told from
# them by the missing box (in the page, and in a crowd task's `mend` column); its mend is stored
# and never verified (`verifying.to_verify` takes judge items' mends only).
TAKES_MEND = (store.JUDGE, store.CONTROL, store.BASELINE)


def control_mend(items, record_id: str, seed) -> str | None:
    """The `mend` of a control or baseline item (an original question, `record_id`) in a study
    of these `items`: None unless its judge items offer mends; else their kind, or with both DE and
    DG judge items a seeded one of the two. `create` writes it and `validate` expects it, both
    through `controls.control_payload`."""
    kinds = sorted({i["payload"].get("mend") for i in items if i["kind"] == store.JUDGE} & set(ATTACKS))
    if len(kinds) < 2:
        return kinds[0] if kinds else None
    return seeded_rng("advrace-control-mend", seed, record_id).choice(kinds)


def asked(form: dict) -> bool:
    """Whether the answer form carries a mend (an option to replace, or a new text)."""
    return bool(form.get("mend_option", "").strip() or form.get("mend_text", "").strip())


def page(db, person, item, form: dict | None = None) -> dict | None:
    """What item.html shows of the mend controls: None unless offered; else the kind and the
    person's saved mend, if any, or after a refused save (`form`) the mend that was sent."""
    if not offered(item):
        return None
    if not _LOADED.is_set():  # WordNet (~5 s) loads while the annotator reads, not on their first keystroke
        threading.Thread(target=resources, daemon=True).start()
    if form is not None:
        option = form.get("mend_option", "").strip()
        return {"kind": item["payload"]["mend"], "option": int(option) if option.isdecimal() else None,
                "text": form.get("mend_text", "")[:MAX_CHARS]}
    saved = store.candidate(db, person["id"], item["id"])
    return {"kind": item["payload"]["mend"], "option": saved["option"] if saved else None,
            "text": (saved["text"] or "") if saved else ""}


@dataclass(frozen=True)
class Mend:
    option: int | None  # the option replaced
    text: str  # the new option as it will stand in the item (dressed like the option it replaces)
    problems: tuple[str, ...]  # why it is refused, in words for the annotator; empty when it is accepted
    checks: tuple[str, ...] = ()  # the names of the attack's checks that ran on it


def check(db, item: dict, form: dict) -> Mend:
    """The mend in the form (`mend_option`, `mend_text`) against the item's options and passage."""
    p = item["payload"]
    options, raw_option = p["options"], form.get("mend_option", "").strip()
    typed = " ".join(form.get("mend_text", "").split())
    if not raw_option.isdecimal() or int(raw_option) >= len(options):
        return Mend(None, typed, ("Choose the option that is also right: your new option takes its place.",))
    k = int(raw_option)
    if not typed:
        return Mend(k, typed, (f"Type a wrong answer to put in place of option {LETTERS[k]}, or choose “no new "
                               "option”.",))
    if len(typed) > MAX_CHARS:
        return Mend(k, typed, (f"The new option is {len(typed)} characters long; options are at most {MAX_CHARS}.",))
    settings = store.meta(db).get(SETTINGS_KEY, {}).get(item["split"], {})
    # dressed like the option it replaces, never like the gold: the live check shows this text
    text = match_format(typed, options[k], p["passage"]) if settings.get("match_answer_format", True) else typed
    if option_key(text) == option_key(options[k]):
        return Mend(k, text, (f"The new option is option {LETTERS[k]} as it stands; write a different one.",))
    twin = next((j for j, o in enumerate(options) if j != k and option_key(o) == option_key(text)), None)
    if twin is not None:
        return Mend(k, text, (f"The new option is option {LETTERS[twin]} again; write a different one.",))
    problems = []
    if p["mend"] == SPAN and not in_passage(typed, p["passage"]):
        problems.append("For this question the new option must be words of the passage: select them in the "
                        "passage, or type them exactly as they stand there (within one paragraph).")
    ran, refusals = run_checks(p, k, text, settings)
    return Mend(k, text, tuple(problems + refusals), ran)


def in_passage(text: str, passage: str) -> bool:
    """Whether `text` stands in one paragraph of the passage (runs of spaces as one), but for its
    first letter's case and a closing full stop, which the attack also changes to dress a span like
    the answer (match_format)."""
    text = " ".join(text.split())
    variants = {text, text[:1].swapcase() + text[1:]}
    variants |= {v[:-1].rstrip() for v in variants if v.endswith((".", ",", ";", ":"))}
    paragraphs = [" ".join(line.split()) for line in passage.splitlines()]
    return any(v and v in para for v in variants for para in paragraphs)


def run_checks(payload: dict, k: int, text: str, settings: dict) -> tuple[tuple[str, ...], list[str]]:
    """The attack's option checks that the split's settings turn on (but `GOLD_CHECKS` and batched
    ones) on the new option in place of option `k`, beside the item's other options: the names of
    the checks that ran, and each refusal explained."""
    attack = ATTACKS[payload["mend"]]
    checks = [c for c in checks_for(attack, OPTION)
              if not c.batched and c.name not in GOLD_CHECKS and c.enabled(settings)]
    res = resources()
    ctx = TextContext(stopwords=frozenset(res.stopwords), same_meaning_fn=res.same_meaning,
                      known_word_fn=res.known_word)
    others = tuple(o for j, o in enumerate(payload["options"]) if j != k)
    # The options the new one will stand beside, whichever is the gold: a check run beside other
    # options when the gold is replaced would refuse differently, and a worker who tries one text
    # in place of each option in turn would read the gold off the refusals. The label is a
    # stand-in (no check that runs here reads it: `GOLD_CHECKS` do not run).
    example = MCExample("mend", payload["passage"], payload["question"], others, 0)
    subject = Subject(example, text, others)
    refusals = []
    for c in checks:
        why = c.refuse(subject, ctx, settings)
        if why:
            refusals.append(explain(c, why))
    return tuple(c.name for c in checks), refusals


_LOCK, _LOADED = threading.Lock(), threading.Event()


def resources():
    """The process's resources with WordNet loaded (the form check asks it whether a word is
    English), once: a page's warm-up and a first check do not load it twice."""
    from advrace.resources import get_resources  # deferred: start-up time (the app starts without the resources)

    res = get_resources()
    if not _LOADED.is_set():
        with _LOCK:
            res.wordnet
            _LOADED.set()
    return res


def explain(check, why: str) -> str:
    if check.name in EXPLAINED:
        return f"The new option {EXPLAINED[check.name]}."
    if why.startswith("form: "):
        said = FORM_EXPLAINED.get(why, why[len("form: "):])
        return f"The new option gives itself away by its look: it {said}."
    return f"The new option is refused by the check “{check.flag}”: it {why}."


def live(db, item: dict, form: dict) -> dict:
    """The live check's answer (the app's JSON): whether the mend would be accepted, why not, the
    text as it would be saved, and which of the attack's checks ran."""
    mend = check(db, item, form)
    return {"ok": not mend.problems, "problems": list(mend.problems), "text": mend.text,
            "option": mend.option, "checks": list(mend.checks)}
