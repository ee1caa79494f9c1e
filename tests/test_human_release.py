"""A release from people's approved work (`human-eval validate`, issue 45 item 4): SQuAD sentences
edited by some annotators and verified blind by others, RACE distractors mended by their judges;
AddOneSent takes a seeded random approved sentence, AddSent the one a span reader does worst on,
DG the approved mend; provenance keeps every edit and vote; the release verifies."""

import json

import pytest

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.core.provenance import PeopleEdited, Validated, Verification
from advrace.human_eval import store
from advrace.human_eval.selection import with_option, with_sentence
from advrace.human_eval.study import changed_items, create_study, item_payload, release_id
from advrace.human_eval.validate import FINISHED_CANDIDATES_KEY, NO_EDIT_REASON, TamperedStudy, validate_release
from advrace.human_eval.verifying import verify_payload
from advrace.human_eval.votes import added_spans
from advrace.release import build_release, check_release, read_split
from conftest import make_race_dir, make_tokenizer, squad_doc, tiny

EDITORS = ("editor1", "editor2", "editor3", "editor4")
VERIFIERS = ("verifier1", "verifier2", "verifier3")


@pytest.fixture(scope="module")
def squad_release(tmp_path_factory, span_model):
    """AddOneSent and AddSent (with the tiny span reader) on the three Danube questions: every
    question attacked in both."""
    root = tmp_path_factory.mktemp("hr")
    path = root / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(path)}, "seed": 3, "workers": 1, "splits": [
        "addonesent", {"attack": "addsent", "config": {"model": span_model, "max_length": 64}}]}), root / "rel")
    return root / "rel"


def machine_span(ex):
    (start, end), = added_spans(ex)
    return start, end


def edit_study(release, db, splits, edits, verdicts, *, seed=0, finish=None, with_verify=True, studied=None):
    """A study as the edit and verify steps leave it: an edit item per changed question of
    `splits` (its machine sentence shown), `edits` ({record id: [(editor, text or None for beyond
    repair)]}), a verify item per candidate answered by the three verifiers as `verdicts`
    ({(record id, editor): [(chose the gold, grammatical)] * 3}, default: approved), everyone
    finished (or those in `finish`); no verify items without `with_verify`; `studied`: the splits the
    study's meta names (default `splits`)."""
    conn = store.connect(db)
    store.init(conn)
    exs = {ex.id: ex for split in splits for ex in changed_items(release, split)}
    manifest = check_release(release)
    with store.transaction(conn):
        store.set_meta(conn, release=str(release), release_name=manifest["name"], task=manifest["task"], seed=seed,
                       per_split=None, splits=list(studied or splits), all_changed=True, judgements=1,
                       annotators=[*EDITORS, *VERIFIERS], manifest_sha256=release_id(release))
        people = {name: store.add_person(conn, name, store.ANNOTATOR)[0] for name in (*EDITORS, *VERIFIERS)}
        items = {}
        for rid, ex in exs.items():
            start, end = machine_span(ex)
            items[rid] = store.add_item(conn, ex.id.split("/")[0], ex.id, ex.source_id, ex.task,
                                        {**item_payload(ex), "sentence": [start, end],
                                         "machine": ex.context[start:end]}, kind=store.EDIT)
        queues = {name: [] for name in people}
        verify = []
        for rid, made in edits.items():
            for editor, text in made:
                queues[editor].append(items[rid])
                cid = store.save_candidate(conn, people[editor], items[rid], text=text, beyond_repair=text is None)
                if text is None or not with_verify:
                    continue
                shown = with_sentence(exs[rid], text)
                start = shown.context.index(text)
                iid = store.add_item(conn, rid.split("/")[0], rid, exs[rid].source_id, shown.task,
                                     {**item_payload(shown), "highlight": [start, start + len(text)]},
                                     kind=store.VERIFY, candidate_id=cid)
                verify.append((iid, shown, verdicts.get((rid, editor), [(True, True)] * 3), start))
        for iid, *_ in verify:
            for name in VERIFIERS:
                queues[name].append(iid)
        for name, ids in queues.items():
            store.set_queue(conn, people[name], ids)
    for iid, shown, said, start in verify:
        gold = shown.answers[0]
        for name, (chose_gold, grammatical) in zip(VERIFIERS, said):
            if chose_gold:
                store.save_annotation(conn, people[name], iid, answer_text=gold.text, answer_start=gold.start,
                                      grammatical=grammatical)
            else:  # the first word of the candidate: no gold answer
                word = shown.context[start:].split()[0]
                store.save_annotation(conn, people[name], iid, answer_text=word, answer_start=start,
                                      grammatical=grammatical)
    for name in finish if finish is not None else people:
        store.mark_finished(conn, people[name])
        mine = [store.candidate_row(c) for c in store.candidates(conn) if c["annotator"] == name]
        if mine:  # as the edit task's mark_finished keeps an editor's candidates
            store.set_meta(conn, **{FINISHED_CANDIDATES_KEY + name: store.candidates_sha256(mine)})
    conn.close()


def rows(release_dir, split):
    return {ex.id: ex for ex in read_split(release_dir, split)}


REJECTED = [(False, True), (False, True), (True, True)]  # two of three chose the fake answer
UNGRAMMATICAL = [(True, False), (True, False), (True, True)]  # the gold, but two call it ungrammatical


def test_addonesent_holds_a_seeded_approved_edit_never_a_rejected_one(squad_release, tmp_path):
    """Each question has two approved edits and one rejected (two of three verifiers answered with
    its fake): the release holds an approved one, drawn by the study's seed (both approved ones
    across seeds, never the rejected one), and the same bytes twice from the same study."""
    rids = [f"addonesent/{q}" for q in ("q0", "q1", "q2")]
    chosen = {}
    for seed in range(4):
        db = tmp_path / f"s{seed}.db"
        edit_study(squad_release, db, ["addonesent"], {
            rid: [("editor1", f"The Rhine reaches the North Sea ({rid})."), ("editor2", f"Oslo is far away ({rid})."),
                  ("editor3", f"Bergen is far away ({rid}).")] for rid in rids},
            {(rid, "editor1"): REJECTED for rid in rids}, seed=seed)
        v = validate_release(db, squad_release, tmp_path / f"v{seed}")["splits"]["addonesent"]
        assert (v["kept"], v["mended"], v["back"], v["approved"], v["verified"]) == (3, 3, 0, 6, 9)
        assert v["chosen"] == {"random": 3, "worst": 0, "only": 0}
        for rid, ex in rows(tmp_path / f"v{seed}", "addonesent").items():
            record = ex.provenance[-1]
            assert isinstance(record, PeopleEdited) and record.edits[record.chosen].approved
            assert record.why == f"a random draw (seed {seed}) among 2 approved edits"
            text = record.edits[record.chosen].text
            assert text in ex.context and "Rhine" not in ex.context and record.machine not in ex.context
            chosen.setdefault(rid, set()).add(text.split()[0])
    assert set().union(*chosen.values()) == {"Oslo", "Bergen"}, chosen  # a draw, not always the first
    validate_release(tmp_path / "s0.db", squad_release, tmp_path / "again")
    assert all(p.read_bytes() == (tmp_path / "again" / p.relative_to(tmp_path / "v0")).read_bytes()
               for p in (tmp_path / "v0").rglob("*") if p.is_file())


def test_provenance_holds_every_edit_its_votes_and_why_one_was_chosen(squad_release, tmp_path):
    """One rejected edit, one approved, one beyond repair: the approved one is held, the answers'
    offsets still point at the gold, and provenance names the machine's sentence, each edit with
    its editor, each verifier's vote, the choice and why."""
    rids = [f"addonesent/{q}" for q in ("q0", "q1", "q2")]
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {
        rid: [("editor1", "The Rhine reaches the North Sea."), ("editor2", f"Oslo is far away ({rid})."),
              ("editor3", None)] for rid in rids}, {(rid, "editor1"): REJECTED for rid in rids})
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")["splits"]["addonesent"]
    assert (v["candidates"], v["beyond_repair"], v["verified"], v["approved"]) == (9, 3, 6, 3)
    assert v["approval_rate"] == pytest.approx(0.5) and v["chosen"]["only"] == 3
    source = rows(squad_release, "addonesent")
    for rid, ex in rows(tmp_path / "v", "addonesent").items():
        assert ex.context.endswith(f"Oslo is far away ({rid}).")
        old = source[rid]
        assert [(a.text, ex.context[a.start:a.end]) for a in ex.answers] == [(a.text, a.text) for a in old.answers]
        record = ex.provenance[-1]
        assert record.machine == old.context[slice(*machine_span(old))]
        assert [(e.editor, e.item, e.approved, e.beyond_repair) for e in record.edits] == [
            ("editor1", rid, False, False), ("editor2", rid, True, False), ("editor3", rid, False, True)]
        assert record.edits[0].verifications == (
            Verification("verifier1", False, True, "selected the added sentence's answer “The”"),
            Verification("verifier2", False, True, "selected the added sentence's answer “The”"),
            Verification("verifier3", True, True))
        assert record.edits[0].machine == record.machine
        assert record.chosen == 1 and record.why == "the only approved edit"
    assert check_release(tmp_path / "v")["splits"]["addonesent"]["perturbed"] == 3


def test_an_ungrammatical_majority_rejects_an_edit(squad_release, tmp_path):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"],
               {rid: [("editor1", "The Rhine reaches the North Sea."), ("editor2", "Oslo is far away.")]},
               {(rid, "editor2"): UNGRAMMATICAL})
    validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")
    out = rows(tmp_path / "v", "addonesent")
    assert "The Rhine reaches the North Sea." in out[rid].context and "Oslo" not in out[rid].context


def test_addsent_holds_the_approved_edit_the_reader_does_worst_on(squad_release, span_model, tmp_path):
    """Four approved edits of q2's AddSent sentence: the release holds the one the reader's F1 is
    lowest with (the first of equally bad ones), not the first, the best or the last worst one.
    AddOneSent's q2 draws from the same pool (one per question, as Jia and Liang)."""
    from advrace.attacks.squad.span_model import model_f1s
    from advrace.models.encoders.span_scoring import load_span_model

    rid = "addsent/q2"
    texts = ["Halloway City were built on the banks of the Elbe.", "Hamburg was built on the Elbe.",
             "Paris and Rome were built on the banks of the Elbe.", "Budapest was built on the banks of the Sava."]
    edits = {rid: list(zip(EDITORS, texts)), "addsent/q1": [("editor1", "The Sava flows through fifteen countries.")]}
    db = tmp_path / "s.db"
    edit_study(squad_release, db, ["addonesent", "addsent"], edits, {("addsent/q1", "editor1"): REJECTED})
    with pytest.raises(ConfigError, match=r"addsent .*--adversary MODEL"):
        validate_release(db, squad_release, tmp_path / "v")
    example = rows(squad_release, "addsent")[rid]
    scorer = load_span_model(span_model, max_length=64)
    f1s = model_f1s(scorer, [example] * 4, [with_sentence(example, t).context for t in texts])
    worst = min(range(4), key=lambda i: f1s[i])
    # the reader tells a wrong choice (the first, the best, the last of the worst) from the right one
    assert f1s[worst] < f1s[0] and f1s[worst] < max(f1s) and worst != 3, f1s
    validation = validate_release(db, squad_release, tmp_path / "v", adversary=span_model)
    out = rows(tmp_path / "v", "addsent")
    record = out[rid].provenance[-1]
    assert texts[worst] in out[rid].context and record.chosen == worst
    assert record.adversary == validation["adversary"]["model"] and record.why.startswith("the approved edit")
    assert [e.model_f1 for e in record.edits] == pytest.approx(f1s, abs=1e-3)
    v = validation["splits"]["addsent"]
    assert (v["chosen"], v["kept"], v["back"]) == ({"random": 0, "worst": 1, "only": 0}, 1, 2)
    # AddOneSent's q2 draws among the same three approved sentences, by the seed
    drawn = rows(tmp_path / "v", "addonesent")["addonesent/q2"].provenance[-1]
    assert drawn.edits[drawn.chosen].text in texts and len(drawn.edits) == 4
    # q1's only edit was rejected and q0 had none: both back as the original
    original = rows(squad_release, "original")
    for q in ("q0", "q1"):
        assert out[f"addsent/{q}"].context == original[f"original/{q}"].context
        assert out[f"addsent/{q}"].provenance[-1].why == NO_EDIT_REASON
    assert validation["adversary"]["checkpoint_sha256"]


def test_nothing_approved_goes_back_or_with_drop_out_and_is_counted(squad_release, tmp_path, capsys):
    rid = "addonesent/q1"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"],
               {rid: [("editor1", "The Sava flows through fifteen countries.")],
                "addonesent/q2": [("editor1", "Oslo is far away."), ("editor2", None)]},
               {(rid, "editor1"): REJECTED})
    assert main(["human-eval", "validate", str(tmp_path / "s.db"), str(squad_release), "--out",
                 str(tmp_path / "v")]) == 0
    out, err = capsys.readouterr()
    assert "addonesent: 1 of 3 (33.3%) attacked after people" in out
    assert "2 changed questions without an approved edit put back" in out
    # the build's warning, in its words, on stderr and in the card
    warning = "warning: addonesent attacked 1 of 3 questions (33%) after people's validation; top reasons"
    assert warning in err and f"{NO_EDIT_REASON} (2)" in err
    assert warning in (tmp_path / "v" / "README.md").read_text()
    manifest = check_release(tmp_path / "v")
    v = manifest["validation"]["splits"]["addonesent"]
    assert (v["kept"], v["back"], v["size"], v["attacked_share"]) == (1, 2, 3, pytest.approx(1 / 3, abs=1e-3))
    assert manifest["splits"]["addonesent"]["perturbed"] == 1
    stats = json.loads((tmp_path / "v" / "stats.json").read_text())
    assert stats["splits"]["addonesent"]["unperturbed_reasons"] == {NO_EDIT_REASON: 2}
    assert main(["human-eval", "validate", str(tmp_path / "s.db"), str(squad_release), "--out",
                 str(tmp_path / "d"), "--drop"]) == 0
    assert "dropped from the split" in capsys.readouterr().out
    dropped = check_release(tmp_path / "d")
    assert sorted(rows(tmp_path / "d", "addonesent")) == ["addonesent/q2"]
    v = dropped["validation"]["splits"]["addonesent"]
    assert (v["kept"], v["back"], v["size"], v["attacked_share"]) == (1, 2, 1, 1.0)
    assert dropped["validation"]["warnings"] == []


def test_the_release_verifies_with_its_study_and_refuses_a_changed_edit(squad_release, tmp_path, capsys):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"],
               {rid: [("editor1", "Oslo is far away."), ("editor2", "Bergen is far away.")]},
               {(rid, "editor2"): REJECTED})
    validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")
    manifest = check_release(tmp_path / "v")
    conn = store.connect(tmp_path / "s.db")
    assert manifest["validation"]["study"]["candidates_sha256"] == store.candidates_sha256(
        [store.candidate_row(c) for c in store.candidates(conn)])
    conn.close()
    assert main(["verify", str(tmp_path / "v")]) == 0
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0
    assert "its tamper checks pass" in capsys.readouterr().out
    copy = tmp_path / "copy.db"
    copy.write_bytes((tmp_path / "s.db").read_bytes())
    conn = store.connect(copy)
    conn.execute("UPDATE candidates SET text = 'Bergen is near.' WHERE text = 'Bergen is far away.'")
    conn.close()
    assert main(["verify", str(tmp_path / "v"), "--study", str(copy)]) == 1
    assert "its candidates (people's edits and mends" in capsys.readouterr().err
    with pytest.raises(TamperedStudy, match=r"verify item \d+ \(addonesent/q0\) does not show what its candidate"):
        validate_release(copy, squad_release, tmp_path / "x")
    with pytest.raises(TamperedStudy, match="editor2's edits or mends changed after they pressed Finish"):
        validate_release(copy, squad_release, tmp_path / "x")
    # a verifier who edited the question they verify is refused
    conn = store.connect(copy)
    conn.execute("UPDATE candidates SET text = 'Bergen is far away.' WHERE text = 'Bergen is near.'")
    editor = conn.execute("SELECT id FROM people WHERE name = 'verifier1'").fetchone()["id"]
    item = store.item_by_record_id(conn, rid)["id"]
    store.save_candidate(conn, editor, item, beyond_repair=True)
    conn.close()
    with pytest.raises(TamperedStudy, match="verifier1 verified an edit of q0, a question they edited"):
        validate_release(copy, squad_release, tmp_path / "x")
    # a verify item whose gold answers were moved (its votes then score against another span) is refused
    other = tmp_path / "other.db"
    other.write_bytes((tmp_path / "s.db").read_bytes())
    conn = store.connect(other)
    row = conn.execute("SELECT id, payload FROM items WHERE kind = ?", (store.VERIFY,)).fetchone()
    payload = json.loads(row["payload"])
    payload["answers"][0]["answer_start"] += 1
    conn.execute("UPDATE items SET payload = ? WHERE id = ?", (json.dumps(payload), row["id"]))
    conn.close()
    with pytest.raises(TamperedStudy, match=r"verify item \d+ \(\S+\) does not show what its candidate"):
        validate_release(other, squad_release, tmp_path / "x")


def test_excluded_annotators_votes_are_left_out(squad_release, tmp_path):
    """An edit approved by two of three verifiers is rejected when one of the two is excluded
    (a tie of the remaining two is no strict majority)."""
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]},
               {(rid, "editor1"): [(True, True), (False, True), (True, True)]})
    kept = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")["splits"]["addonesent"]
    assert kept["approved"] == 1
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "x", excluded={"verifier3"})
    assert v["splits"]["addonesent"]["approved"] == 0 and v["study"]["excluded"] == ["verifier3"]
    record = rows(tmp_path / "x", "addonesent")[rid].provenance[-1]
    assert [x.annotator for x in record.edits[0].verifications] == ["verifier1", "verifier2"]
    assert main(["verify", str(tmp_path / "x"), "--study", str(tmp_path / "s.db")]) == 0


# --------------------------------------------------------------------------- RACE: a DG item mended


@pytest.fixture(scope="module")
def dg_release(tmp_path_factory):
    root = tmp_path_factory.mktemp("dg")
    race, tok = make_race_dir(root), make_tokenizer(root)
    from advrace.training import train

    dg = train(tiny(tok, race, root / "dg", objective="distractor_generation", epochs=1), progress=False)
    build_release(release_config_from_dict({"name": "t", "data": {"path": str(race)}, "seed": 7, "workers": 1,
                                            "splits": [{"attack": "distractor_generation", "config": {
                                                "model": dg["final"], "beam_size": 6, "max_target_tokens": 4,
                                                "batch_size": 2}}]}), root / "rel")
    return root / "rel"


DG = "distractor_generation"


def mend_study(release, db, invalid: set, mends: dict, verdicts: dict, *, with_verify=True, unfinished=()):
    """A DG study of every changed question judged by three judges (`invalid`: record ids all three
    find a second right answer in), `mends` ({record id: [(judge, option, text)]}) verified by three
    other annotators (`verdicts`: {(record id, judge): [chose the gold] * 3}, default all); without
    `with_verify` (and for a mend of the gold option, as `verifying.to_verify` leaves it) no verify items;
    everyone presses Finish but `unfinished`."""
    judges, verifiers = ["annotator1", "annotator2", "annotator3"], list(VERIFIERS)
    create_study(release, db, splits=[DG], all_changed=True, annotators=3)
    conn = store.connect(db)
    people = {a["name"]: a["id"] for a in store.annotators(conn)}
    exs = {ex.id: ex for ex in changed_items(release, DG)}
    for name in judges:
        for row in store.queue(conn, people[name]):
            item = store.item(conn, row["item_id"])
            if item["record_id"] in invalid:
                store.save_annotation(conn, people[name], item["id"], unanswerable=True, reason="multiple correct options")
            else:
                store.save_annotation(conn, people[name], item["id"], choice=item["payload"]["label"])
    verify = []
    with store.transaction(conn):
        for name in verifiers if with_verify and any(o != exs[r].label for r, m in mends.items() for _, o, _ in m) else ():
            people[name] = store.add_person(conn, name, store.ANNOTATOR)[0]
        for rid, made in mends.items():
            item = store.item_by_record_id(conn, rid)
            for judge, option, text in made:
                cid = store.save_candidate(conn, people[judge], item["id"], option=option, text=text)
                if not with_verify or option == exs[rid].label:
                    continue
                shown = with_option(exs[rid], option, text)
                payload = verify_payload(item, store.candidate(conn, people[judge], item["id"]))  # as the app makes it
                verify.append((store.add_item(conn, DG, rid, exs[rid].source_id, shown.task, payload,
                                              kind=store.VERIFY, candidate_id=cid), shown, verdicts.get((rid, judge))))
        for name in verifiers if verify else ():
            store.set_queue(conn, people[name], [iid for iid, *_ in verify])
    for iid, shown, said in verify:
        for name, gold in zip(verifiers, said or [True] * 3):
            store.save_annotation(conn, people[name], iid, choice=shown.label if gold else (shown.label + 1) % 4)
    for name in people:
        if name not in unfinished:
            store.mark_finished(conn, people[name])
    conn.close()


def test_dg_holds_the_approved_mend(dg_release, tmp_path):
    changed = [ex for ex in changed_items(dg_release, DG)]
    assert len(changed) >= 3
    a, b, c = (ex.id for ex in changed[:3])
    first = changed[0]
    option = (first.label + 1) % 4
    rejected_option = (first.label + 2) % 4
    mend_study(dg_release, tmp_path / "s.db", {a, b, c},
               {a: [("annotator1", rejected_option, "A red kite"), ("annotator2", option, "A blue kite")],
                b: [("annotator3", (changed[1].label + 1) % 4, "Never on Sunday")]},
               {(a, "annotator1"): [False, False, True], (b, "annotator3"): [True, False, False]})
    validation = validate_release(tmp_path / "s.db", dg_release, tmp_path / "v")
    check_release(tmp_path / "v")
    out, source = rows(tmp_path / "v", DG), rows(dg_release, DG)
    original = rows(dg_release, "original")
    mended = out[a]
    expected = list(source[a].options)
    expected[option] = "A blue kite"
    assert list(mended.options) == expected and mended.label == source[a].label
    assert mended.passage == source[a].passage
    validated, record = mended.provenance[-2], mended.provenance[-1]
    assert isinstance(validated, Validated) and validated.verdict == "invalid" and len(validated.votes) == 3
    assert isinstance(record, PeopleEdited) and record.edits[record.chosen].text == "A blue kite"
    assert record.machine == source[a].options[option] and record.why == "the only approved mend"
    assert [e.approved for e in record.edits] == [False, True]
    assert [v.valid for v in record.edits[0].verifications] == [False, False, True]
    # b's only mend was rejected and c had none: back as the original
    for rid in (b, c):
        assert list(out[rid].options) == list(original["original/" + rid.split("/", 1)[1]].options)
    # provenance keeps b's rejected mend and its votes (after its judges' verdict)
    assert isinstance(out[b].provenance[-2], Validated) and out[b].provenance[-2].verdict == "invalid"
    kept_b = out[b].provenance[-1]
    assert isinstance(kept_b, PeopleEdited) and kept_b.chosen is None and kept_b.edits[0].editor == "annotator3"
    assert [x.valid for x in kept_b.edits[0].verifications] == [True, False, False]
    v = validation["splits"][DG]
    assert (v["invalid"], v["mended"], v["back"], v["candidates"], v["approved"]) == (3, 1, 2, 3, 1)
    assert v["kept"] == len(changed) - 2 and v["size"] == len(source)
    card = (tmp_path / "v" / "README.md").read_text()
    assert "3 judged invalid, 1 of them kept with people's mend, 2 put back" in card
    assert "`people_edited` record" in card
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0


# --------------------------------------------------------------------------- derive_release: a replaced question

DERIVED = "addsent_on_charswap"


def test_a_replaced_question_is_written_and_the_split_built_from_it_follows(tmp_path):
    """derive_release alone: a decision that replaces charswap's question keeps it attacked in its
    new form (re-audited), and the split built from charswap takes that new question as its own,
    put back with its source's (it was made from the text the decision replaced)."""
    from advrace.release.build import WITH_SOURCE, Decision, derive_release

    build_release(release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "workers": 1, "splits": [
        "charswap", {"attack": "addsent", "name": DERIVED, "from": "charswap"}]}), tmp_path / "rel")
    ex = changed_items(tmp_path / "rel", "charswap")[0]
    sid = ex.source_id
    new = with_option(ex, (ex.label + 1) % 4, "A mended distractor")
    record = PeopleEdited(ex.options[(ex.label + 1) % 4], chosen=None, why="test")
    derive_release(tmp_path / "rel", tmp_path / "out", {"charswap": {ex.id: Decision(record, example=new)}}, {})
    manifest = check_release(tmp_path / "out")
    out = rows(tmp_path / "out", "charswap")[ex.id]
    assert out.options == new.options and out.provenance[-1] == record and out.provenance[:-1] == new.provenance
    assert manifest["splits"]["charswap"]["perturbed"] == check_release(tmp_path / "rel")["splits"]["charswap"]["perturbed"]
    derived = rows(tmp_path / "out", DERIVED)[f"{DERIVED}/{sid}"]
    assert derived.options == new.options and derived.passage == new.passage
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    assert stats["splits"][DERIVED]["unperturbed_reasons"].get(WITH_SOURCE) == 1
    assert stats["audit"]["charswap"]["checked"] == len(rows(tmp_path / "out", "charswap"))
    other = changed_items(tmp_path / "rel", "charswap")[1]
    with pytest.raises(ConfigError, match="keeps the question's id"):
        derive_release(tmp_path / "rel", tmp_path / "bad", {"charswap": {ex.id: Decision(record, example=other)}}, {})


def test_an_unverified_edit_needs_partial_and_leaves_the_question_as_the_machine_made_it(squad_release, tmp_path):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {},
               finish=[*EDITORS, "verifier1"])
    with pytest.raises(ConfigError, match=r"unfinished study: 1 of 4 items .*verifier2 .*--partial"):
        validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", partial=True)
    split = v["splits"]["addonesent"]
    assert v["study"]["partial"] and (split["unvalidated"], split["back"], split["kept"]) == (1, 2, 1)
    out = rows(tmp_path / "v", "addonesent")[rid]
    assert out.context == rows(squad_release, "addonesent")[rid].context
    assert out.provenance[-1].chosen is None and "not decided" in out.provenance[-1].why


def test_control_and_baseline_items_never_change_the_release(squad_release, tmp_path):
    """A control and a baseline item (the original of a studied question, of its source id),
    answered wrong by one verifier and left unanswered by another: no vote, no approval, no
    decision and no "unfinished" rests on them."""
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {},
               finish=[*EDITORS, "verifier2", "verifier3"])
    original = rows(squad_release, "original")["original/q0"]
    conn = store.connect(tmp_path / "s.db")
    person = conn.execute("SELECT id FROM people WHERE name = 'verifier1'").fetchone()["id"]
    queue = [row["item_id"] for row in store.queue(conn, person)]
    with store.transaction(conn):
        extra = [store.add_item(conn, "original", original.id, "q0", original.task, item_payload(original), kind=kind)
                 for kind in (store.CONTROL, store.BASELINE)]
        conn.execute("DELETE FROM queue WHERE person_id = ?", (person,))
        store.set_queue(conn, person, queue + extra)
        idle = conn.execute("SELECT id FROM people WHERE name = 'verifier2'").fetchone()["id"]
        conn.execute("DELETE FROM queue WHERE person_id = ?", (idle,))
        store.set_queue(conn, idle, queue + extra)
    for iid in extra:
        store.save_annotation(conn, person, iid, unanswerable=True, reason="no correct option")
    store.mark_finished(conn, person)
    conn.close()
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")["splits"]["addonesent"]
    assert (v["approved"], v["verified"], v["kept"]) == (1, 1, 1)
    record = rows(tmp_path / "v", "addonesent")[rid].provenance[-1]
    assert [x.annotator for x in record.edits[0].verifications] == list(VERIFIERS)
    assert all(x.valid for x in record.edits[0].verifications)


# --------------------------------------------------------------------------- review fixes (issue 45)


def test_edits_never_sent_to_verify_are_refused_and_with_partial_undecided(squad_release, tmp_path):
    """Without `create --verify` nothing approved an edit: validate refuses rather than put every
    question back 'no approved edit'; --partial leaves them as the machine made them."""
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {},
               with_verify=False)
    with pytest.raises(ConfigError, match=r"1 edit \(addonesent/q0\) have no verify items.*create --verify"):
        validate_release(tmp_path / "s.db", squad_release, tmp_path / "v")
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", partial=True)
    split = v["splits"]["addonesent"]
    assert v["study"]["partial"] and (split["unvalidated"], split["kept"], split["verified"]) == (1, 1, 0)
    assert "not decided" in rows(tmp_path / "v", "addonesent")[rid].provenance[-1].why


def test_an_edit_whose_verifiers_are_all_excluded_is_short_not_rejected(squad_release, tmp_path):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {})
    with pytest.raises(ConfigError, match=r"lost every judge or verifier to the exclusion of verifier1, verifier2, "
                                          r"verifier3") as err:
        validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", excluded=set(VERIFIERS))
    assert "not finished:" not in str(err.value)
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", excluded=set(VERIFIERS), partial=True)
    assert (v["splits"]["addonesent"]["unvalidated"], v["splits"]["addonesent"]["back"]) == (1, 2)


def test_an_excluded_editors_edit_does_not_count(squad_release, tmp_path):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"],
               {rid: [("editor1", "Oslo is far away."), ("editor2", "Bergen is far away.")]}, {})
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", excluded={"editor1"})
    record = rows(tmp_path / "v", "addonesent")[rid].provenance[-1]
    assert [e.editor for e in record.edits] == ["editor2"] and record.edits[record.chosen].text == "Bergen is far away."
    assert v["splits"]["addonesent"]["candidates"] == 1


def test_partial_approval_counts_only_fully_verified_edits(squad_release, tmp_path):
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {},
               finish=[*EDITORS, "verifier1"])
    split = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", partial=True)["splits"]["addonesent"]
    assert (split["verified"], split["approved"], split["approval_rate"]) == (0, 0, None)


def test_addsent_counts_the_approvals_of_its_pool(squad_release, span_model, tmp_path):
    """AddSent's questions choose among the pooled edits made on AddOneSent's items: its approval
    numbers are over those, not null."""
    rid = "addonesent/q0"
    edit_study(squad_release, tmp_path / "s.db", ["addonesent", "addsent"], {rid: [("editor1", "Oslo is far away.")]},
               {})
    v = validate_release(tmp_path / "s.db", squad_release, tmp_path / "v", adversary=span_model)
    assert (v["splits"]["addsent"]["approved"], v["splits"]["addsent"]["approval_rate"]) == (1, 1)
    assert v["splits"]["addsent"]["chosen"]["only"] == 1
    card = (tmp_path / "v" / "README.md").read_text()
    assert "attacked after people, 1 of them with an approved edit" in card


SHADOW_SPLITS = [{"attack": "addonesent", "config": {"answer_model": ""}},
                 {"attack": "addonesent", "name": "again", "config": {"answer_model": ""}}]


def test_a_split_whose_sentences_another_split_holds_takes_that_splits_edits(tmp_path):
    """addonesent twice (same sentences): the edit study's items are all the first split's; the
    second takes the same approved edits (it used to fall through to the judges' votes: KeyError)."""
    (tmp_path / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    build_release(release_config_from_dict({"data": {"path": str(tmp_path / "squad.json")}, "seed": 3,
                                            "splits": SHADOW_SPLITS, "workers": 1}), tmp_path / "rel")
    rid = "addonesent/q0"
    edit_study(tmp_path / "rel", tmp_path / "s.db", ["addonesent"], {rid: [("editor1", "Oslo is far away.")]}, {},
               studied=["addonesent", "again"])
    v = validate_release(tmp_path / "s.db", tmp_path / "rel", tmp_path / "v")
    again = rows(tmp_path / "v", "again")["again/q0"]
    assert "Oslo is far away." in again.context and again.provenance[-1].edits[0].editor == "editor1"
    assert v["splits"]["again"]["kind"] == "edit" and v["splits"]["again"]["mended"] == 1


def test_mends_never_sent_to_verify_are_refused_and_with_partial_undecided(dg_release, tmp_path):
    a = changed_items(dg_release, DG)[0]
    mend_study(dg_release, tmp_path / "s.db", {a.id}, {a.id: [("annotator1", (a.label + 1) % 4, "A blue kite")]}, {},
               with_verify=False)
    with pytest.raises(ConfigError, match=r"1 mend \(.*\) have no verify items"):
        validate_release(tmp_path / "s.db", dg_release, tmp_path / "v")
    v = validate_release(tmp_path / "s.db", dg_release, tmp_path / "v", partial=True)["splits"][DG]
    assert (v["invalid"], v["back"], v["undecided"]) == (1, 0, 1)
    card = (tmp_path / "v" / "README.md").read_text()
    assert "1 judged invalid, 0 of them kept with people's mend, 1 with mends not yet verified left as the machine " \
           "made them, 0 put back" in card
    out = rows(tmp_path / "v", DG)[a.id]
    assert out.options == a.options and "not decided" in out.provenance[-2].reason
    assert out.provenance[-1].chosen is None and out.provenance[-1].edits[0].text == "A blue kite"


def test_a_mend_with_verifications_pending_is_undecided_under_partial(dg_release, tmp_path):
    a = changed_items(dg_release, DG)[0]
    mend_study(dg_release, tmp_path / "s.db", {a.id}, {a.id: [("annotator1", (a.label + 1) % 4, "A blue kite")]},
               {(a.id, "annotator1"): [False, True, True]}, unfinished={"verifier2", "verifier3"})
    v = validate_release(tmp_path / "s.db", dg_release, tmp_path / "v", partial=True)["splits"][DG]
    assert (v["invalid"], v["back"], v["verified"]) == (1, 0, 0)


def test_a_mend_of_the_gold_is_left_out_and_counted(dg_release, tmp_path):
    a = changed_items(dg_release, DG)[0]
    mend_study(dg_release, tmp_path / "s.db", {a.id}, {a.id: [("annotator1", a.label, "A blue kite")]}, {})
    v = validate_release(tmp_path / "s.db", dg_release, tmp_path / "v")["splits"][DG]
    assert (v["replaced_gold"], v["back"], v.get("candidates", 0)) == (1, 1, 0)
    assert "1 mend of the gold option left out" in (tmp_path / "v" / "README.md").read_text()


def test_a_judged_valid_question_keeps_its_offered_mend_in_provenance(dg_release, tmp_path):
    a = changed_items(dg_release, DG)[0]
    mend_study(dg_release, tmp_path / "s.db", set(), {a.id: [("annotator1", (a.label + 1) % 4, "A blue kite")]}, {})
    validate_release(tmp_path / "s.db", dg_release, tmp_path / "v")
    out = rows(tmp_path / "v", DG)[a.id]
    assert out.options == a.options and out.provenance[-2].verdict == "valid"
    record = out.provenance[-1]
    assert isinstance(record, PeopleEdited) and record.chosen is None and record.edits[0].approved
    assert main(["verify", str(tmp_path / "v"), "--study", str(tmp_path / "s.db")]) == 0


@pytest.mark.parametrize("bf16", [False, True])
def test_the_adversary_scores_at_the_precision_the_addsent_split_was_built_with(span_model, tmp_path, bf16):
    """`--adversary` reads people's sentences as AddSent read the machine's: with bf16 forced on
    (emulated on a CPU without it) and off, the choice is the worst at that precision, and the
    manifest says which precision it was."""
    from advrace.attacks import get_attack
    from advrace.attacks.squad.span_model import model_f1s

    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    config = {"model": span_model, "max_length": 64, "bf16": bf16}
    build_release(release_config_from_dict({"data": {"path": str(path)}, "seed": 3, "workers": 1, "splits": [
        "addonesent", {"attack": "addsent", "config": config}]}), tmp_path / "rel")
    rid = "addsent/q2"
    texts = ["Halloway City were built on the banks of the Elbe.", "Hamburg was built on the Elbe.",
             "Paris and Rome were built on the banks of the Elbe."]
    edit_study(tmp_path / "rel", tmp_path / "s.db", ["addonesent", "addsent"], {rid: list(zip(EDITORS, texts))}, {})
    validation = validate_release(tmp_path / "s.db", tmp_path / "rel", tmp_path / "v", adversary=span_model)
    assert validation["adversary"]["inference"]["precision"] == ("bf16" if bf16 else "fp32")
    attack = get_attack("addsent", "extractive_qa")(config, 0)
    example = rows(tmp_path / "rel", "addsent")[rid]
    f1s = model_f1s(attack.scorer, [example] * 3, [with_sentence(example, t).context for t in texts])
    record = rows(tmp_path / "v", "addsent")[rid].provenance[-1]
    assert record.chosen == min(range(3), key=lambda i: f1s[i])
    assert [e.model_f1 for e in record.edits] == pytest.approx(f1s, abs=1e-3)
