"""From people's rewrites to a release's question (`human-eval validate`): which rewrites their
verifiers approved, and which approved one a changed question takes.

- A candidate is approved when a strict majority of its verifiers (not the excluded ones)
  answered its question blind with the gold and, for a sentence, called it grammatical
  (`verifying.approvals`, the one definition).
- Jia and Liang drew AddOneSent's and AddSent's sentences from one pool per question, every
  approved edit of its raw sentences. Here a question's pool is every candidate made on an edit
  item of that question (same source id) in the studied splits whose attacks share the sentence
  generator (`POOLED`: addonesent and squad_addsent write their candidates with one generator and one set
  of fake answers), so both splits choose among the same approved sentences, as in the paper, and
  a question keeps a sentence when any of its machine sentences could be mended. A split of another
  generator (addsentmod: the second set, prepended) pools only its own items' candidates.
- AddOneSent (and any split but AddSent) takes a seeded random approved sentence, AddSent the one
  the adversary (a span model) scores worst on, by AddSent's own criterion
  (`advrace.attacks.squad.span_model.model_f1s`, `worst`: the lowest F1, the first of equally bad ones).
- A RACE mend (a judge's own distractor in place of an option) counts only when people judged the
  machine's question invalid; of several approved, the one most verifiers approved is taken, a tie
  broken by a seeded draw.

The taken text goes in with the example's own edit methods (`replace_spans`, `replace_options`),
so answer offsets and the label stay right; nothing here does offset arithmetic.
"""

from __future__ import annotations

from dataclasses import dataclass

from advrace.core.errors import ConfigError
from advrace.core.provenance import PeopleEdit, Verification
from advrace.core.seeding import seeded_rng

from . import store, verifying
from .votes import added_spans, vote

# by the attacks' own names (`attacks_of` resolves an older release's "addsent")
POOLED = ("addonesent", "squad_addsent")  # attacks whose candidate sentences come from one generator
ADVERSARIAL = "squad_addsent"  # the attack whose split takes the approved sentence its adversary does worst on
RANDOM, WORST, ONLY = "random", "worst", "only"  # how a question's edit was chosen


def attacks_of(manifest: dict, splits) -> dict[str, str]:
    """Each split's attack by its own name: a release's split keeps the name its config used, and
    an alias ("addsent" in an older release) is resolved by the release's task."""
    from advrace.attacks import canonical_name  # deferred for start-up time: importing the attacks loads every attack module

    return {split: canonical_name(manifest["splits"][split]["attack"], manifest["task"]) for split in splits}


def verification(a: dict) -> Verification:
    """A verify item's answer (a row of `store.annotations`) as a verification: whether it chose
    the gold (a span inside the highlighted candidate named as its answer) and called it grammatical."""
    highlight = a["payload"].get("highlight")
    v = vote(a, [tuple(highlight)] if highlight else ())
    return Verification(a["annotator"], v.valid, None if a["grammatical"] is None else bool(a["grammatical"]), v.reason)


@dataclass(frozen=True)
class Verified:
    """What a candidate's verifiers said (`verifications`, in name order, of annotators who
    pressed Finish and are not excluded), how many were to say it (`queued`), and whether each
    approved it (`approves`: `verifying.verifier_vote`, the one approval rule)."""

    verifications: tuple[Verification, ...]
    queued: int
    approves: tuple[bool, ...] = ()

    @property
    def pending(self) -> bool:
        """Not all its verifications are in, or no verifier is left to give one (all excluded)."""
        return not self.queued or len(self.verifications) < self.queued


def verified(study, excluded=frozenset()) -> dict[int, Verified]:
    """Each candidate's verifications, by candidate id (the verify items' answers)."""
    queued = study.expected(excluded)
    answers: dict[int, list[dict]] = {}
    for a in sorted(study.counted(), key=lambda a: a["annotator"]):
        if a["kind"] == store.VERIFY and a["annotator"] not in excluded:
            answers.setdefault(a["item_id"], []).append(a)
    out: dict[int, Verified] = {}
    for item in study.items:
        if item["kind"] == store.VERIFY and item["candidate_id"] is not None:
            before = out.get(item["candidate_id"], Verified((), 0))
            mine = answers.get(item["id"], ())
            out[item["candidate_id"]] = Verified(before.verifications + tuple(verification(a) for a in mine),
                                                 before.queued + queued.get(item["id"], 0),
                                                 before.approves + tuple(verifying.verifier_vote(a).valid for a in mine))
    return out


def machine_text(item: dict) -> str:
    """The machine's sentence an edit item shows (its payload's `machine`, else its `sentence` span)."""
    p = item["payload"]
    if p.get("machine"):
        return p["machine"]
    start, end = p["sentence"]
    return p["context"][start:end]


def edits(study, excluded=frozenset()) -> list[dict]:
    """The edit candidates of annotators not `excluded`, in item and editor order; each with its
    item's machine text as `machine`."""
    items = {item["id"]: item for item in study.items}
    return [{**c, "machine": machine_text(items[c["item_id"]])}
            for c in sorted(study.candidates, key=lambda c: (c["item_id"], c["annotator"]))
            if c["item_kind"] == store.EDIT and c["annotator"] not in excluded]


def pools(study, attacks: dict[str, str], excluded=frozenset()) -> dict[tuple[str, str], list[dict]]:
    """The edit candidates (`edits`) of each question's pool (see the module's docstring), by
    (pool, source id), in item and editor order."""
    out: dict[tuple[str, str], list[dict]] = {}
    for c in edits(study, excluded):
        if c["split"] in attacks:
            out.setdefault(pool_key(c["split"], attacks[c["split"]], c["source_id"]), []).append(c)
    return out


def pool_of(pools: dict, candidates: list[dict], split: str, attack: str, example) -> list[dict]:
    """A changed question's pool: its pool key's candidates, and those of any edit item that shows
    one of its machine sentences (an edit study makes one item per distinct sentence, so a split
    whose sentences another studied split holds too has its candidates on that split's items)."""
    pool = list(pools.get(pool_key(split, attack, example.source_id), []))
    mine = {example.passage_text[s:e] for s, e in added_spans(example)}
    taken = {c["id"] for c in pool}
    pool += [c for c in candidates if c["source_id"] == example.source_id and c["machine"] in mine
             and c["id"] not in taken]
    return sorted(pool, key=lambda c: (c["item_id"], c["annotator"]))


def pool_key(split: str, attack: str, source_id: str) -> tuple[str, str]:
    return ("+".join(POOLED) if attack in POOLED else split, source_id)


def mends(study, excluded=frozenset()) -> tuple[dict[str, list[dict]], dict[str, list[dict]]]:
    """The mends (a judge's own distractor for an option) of annotators not `excluded` on each judge
    item, by record id, in editor order; and, apart, those that replaced the gold option (never
    verified nor taken: a judge cannot know the gold, and the question would lose its answer)."""
    labels = {item["id"]: item["payload"].get("label") for item in study.items}
    out: dict[str, list[dict]] = {}
    gold: dict[str, list[dict]] = {}
    for c in sorted(study.candidates, key=lambda c: (c["item_id"], c["annotator"])):
        if c["item_kind"] == store.JUDGE and c["option"] is not None and c["text"] and c["annotator"] not in excluded:
            (gold if c["option"] == labels.get(c["item_id"]) else out).setdefault(c["record_id"], []).append(c)
    return out, gold


def people_edit(c: dict, machine: str, approved: bool, said: Verified | None, f1: float | None = None) -> PeopleEdit:
    return PeopleEdit(editor=c["annotator"], machine=machine, item=c["record_id"], text=c["text"],
                      option=c["option"], beyond_repair=bool(c["beyond_repair"]), approved=approved,
                      verifications=said.verifications if said else (), model_f1=f1)


def with_sentence(example, text: str):
    """The SQuAD example with people's sentence in place of the one the attack added."""
    spans = added_spans(example)
    if len(spans) != 1:
        raise ConfigError(f"{example.id}: holds {len(spans)} added sentences, not one; an edited sentence "
                          "replaces the single sentence AddOneSent or AddSent added")
    start, end = spans[0]
    return example.replace_spans(example.passage_field, [(start, end, text.strip())])


def with_option(example, option: int, text: str):
    """The RACE example with option `option` replaced by a judge's distractor (never the gold)."""
    if not 0 <= option < len(example.options) or option == example.label:
        raise ConfigError(f"{example.id}: a mend replaces option {option}, which is "
                          f"{'the gold' if option == example.label else 'no option'}; a mend replaces a distractor")
    options = list(example.options)
    options[option] = text.strip()
    return example.replace_options(options)


def random_choice(approved: list, seed: int, example_id: str) -> int:
    """AddOneSent's draw: an index into `approved`, seeded by the study's seed and the question."""
    return seeded_rng("advrace-human-eval-choice", seed, example_id).randrange(len(approved))


def most_approved(approved: list[tuple[dict, Verified]], seed: int, example_id: str) -> int:
    """The mend most verifiers approved; a tie broken by a seeded draw."""
    rng = seeded_rng("advrace-human-eval-mend", seed, example_id)
    ties = [rng.random() for _ in approved]
    return min(range(len(approved)), key=lambda i: (-sum(approved[i][1].approves), ties[i]))
