"""Distractor extraction and generation end to end, on tiny models trained here in seconds."""

import gc
import json

import pytest
import torch

from advrace.attacks import get_attack
from advrace.attacks.distractors import candidate_cache
from advrace.attacks.distractors.checks import word_checks
from advrace.attacks.base import CannotPerturb
from advrace.models.runtime.checkpoint_info import checkpoint_sha256
from advrace.core.config import release_config_from_dict
from advrace.core.distractors import jaccard_distance, token_overlap
from advrace.core.errors import ConfigError
from advrace.core.numbers import significant
from advrace.formats import load
from advrace.models.runtime.loading import checkpoint_name
from advrace.release import build_release, read_split
from conftest import tiny
from advrace.training import train


@pytest.fixture(scope="module")
def setup(tmp_path_factory, tiny_llama):
    root = tmp_path_factory.mktemp("distractors")
    race, tok = tiny_llama["race"], tiny_llama["tok_dir"]
    de = train(tiny(tok, race, root / "de", objective="span_extraction", max_length=48, doc_stride=16,
                    epochs=3), progress=False)
    dg = train(tiny(tok, race, root / "dg", objective="distractor_generation", epochs=3), progress=False)
    return {"race": race, "tok": tok, "de": de, "dg": dg, "root": root}


def _build(setup, tmp_path, splits, name="rel"):
    cfg = release_config_from_dict({"name": "t", "data": {"path": str(setup["race"])}, "seed": 7,
                                    "splits": splits})
    manifest = build_release(cfg, tmp_path / name)
    return manifest, tmp_path / name


def test_training_objectives_learn(setup):
    for run in (setup["de"], setup["dg"]):
        losses = [json.loads(line)["loss"] for line in open(run["log"]) if '"train"' in line]
        assert losses[-1] < losses[0]
    assert 0.0 <= setup["de"]["metrics"]["dev_f1"] <= 1.0
    assert setup["de"]["metrics"]["train_features"] > setup["de"]["metrics"]["train_questions"]  # windows
    assert setup["dg"]["metrics"]["train_features"] == 3 * setup["dg"]["metrics"]["train_questions"]
    info = json.loads(open(f"{setup['dg']['final']}/training_info.json").read())
    assert info["objective"] == "distractor_generation" and info["architecture"] == "UniLMSeq2Seq"


def test_span_windows_put_the_answer_at_the_recorded_offsets(setup):
    from transformers import AutoTokenizer

    from advrace.models.encoders.span_encoding import encode_windows, span_training_examples

    examples = load(str(setup["race"])).examples
    questions, contexts, spans = span_training_examples(examples, seed=3)
    for ex, context, (s, e) in zip(examples, contexts, spans):
        assert context[s:e] == ex.answer.strip()
    tok = AutoTokenizer.from_pretrained(setup["tok"])
    windows = encode_windows(tok, questions, contexts, spans, max_length=48, stride=16)
    assert len(windows) > 2 * len(examples)  # long passages are cut into several windows
    for i, (s, e) in enumerate(spans):
        mine = [w for w in windows if w.example == i]
        hits = [w for w in mine if w.start_position]
        assert hits, f"no window holds the answer of question {i}"
        for w in hits:
            assert w.offsets[w.start_position][0] == s and w.offsets[w.end_position][1] == e
            assert w.sequence_ids[w.start_position] == 1
        assert all(w.end_position == 0 for w in mine if not w.start_position)


def test_distractor_extraction_release(setup, tmp_path):
    model = setup["de"]["final"]
    splits = [{"attack": "distractor_extraction",
               "config": {"model": model, "shuffle": True, "batch_size": 3, "max_answer_tokens": 8,
                          "match_answer_format": False}}]
    manifest, out = _build(setup, tmp_path, splits)
    info = manifest["splits"]["distractor_extraction"]
    assert info["checkpoint_sha256"] == checkpoint_sha256(model)
    assert info["inference"] == {"precision": "fp32", "device_type": "cpu", "torch": torch.__version__}
    originals = {ex.source_id: ex for ex in read_split(out, "original")}
    moved = 0
    for ex in read_split(out, "distractor_extraction"):
        orig = originals[ex.source_id]
        assert ex.answer == orig.answer  # the correct option keeps its text, the label follows it
        record = ex.provenance[-1].distractors
        if record is None:
            assert ex.options == orig.options
            continue
        assert record.original == orig.distractors
        new = record.new
        assert 1 <= len(new) <= 3 and len(new) + record.kept_original == 3
        assert all(d in orig.passage and d != orig.answer for d in new)
        assert set(ex.distractors) == set(new) | set(orig.distractors[len(new):])
        moved += ex.label != orig.label
    stats = json.loads((out / "stats.json").read_text())["splits"]["distractor_extraction"]
    a = stats["attack_stats"]
    assert a["checkpoint_sha256"] == info["checkpoint_sha256"]
    assert {"avg_pairwise_jaccard_distance", "avg_answer_overlap", "avg_new_distractor_words",
            "questions_keeping_original_distractors", "original_distractors_kept"} <= set(a)
    assert stats["perturbed"] == a["questions_replaced"] > 0
    assert moved > 0  # shuffle: True moves some answers
    again, out2 = _build(setup, tmp_path, splits, "rel2")
    assert again["splits"] == manifest["splits"]  # byte-identical split files


def test_distractor_generation_release(setup, tmp_path):
    model = setup["dg"]["final"]
    splits = [{"attack": "distractor_generation",
               "config": {"model": model, "beam_size": 6, "max_target_tokens": 4, "batch_size": 2}}]
    manifest, out = _build(setup, tmp_path, splits)
    assert manifest["splits"]["distractor_generation"]["checkpoint_sha256"] == checkpoint_sha256(model)
    assert manifest["splits"]["distractor_generation"]["inference"]["precision"] == "fp32"
    originals = {ex.source_id: ex for ex in read_split(out, "original")}
    replaced = 0
    for ex in read_split(out, "distractor_generation"):
        orig = originals[ex.source_id]
        assert ex.label == orig.label and ex.answer == orig.answer  # shuffle is off by default
        record = ex.provenance[-1].distractors
        if record is None:
            continue
        replaced += 1
        new = record.new
        assert 1 <= len(record.candidates) <= 6
        assert all(jaccard_distance(x, y) > 0.5 for i, x in enumerate(new) for y in new[i + 1:])
        assert all(d.lower() != orig.answer.lower() for d in new)
        if orig.answer[0].isupper():  # dressed like the answer (the tiny tokenizer is uncased)
            assert all(d[0].isupper() for d in new)
    assert replaced == manifest["splits"]["distractor_generation"]["perturbed"]


def test_generation_is_the_same_whatever_the_batch(setup):
    examples = load(str(setup["race"])).examples
    make = lambda b: get_attack("distractor_generation")(  # noqa: E731
        {"model": setup["dg"]["final"], "beam_size": 4, "max_target_tokens": 4, "batch_size": b})
    assert make(1).candidates(examples) == make(5).candidates(examples)


def test_causal_lm_backend(setup, tiny_llama):
    attack = get_attack("distractor_generation")({"backend": "causal_lm", "model": tiny_llama["lm"],
                                                  "beam_size": 4, "max_target_tokens": 3,
                                                  "max_passage_tokens": 20})
    examples = load(str(setup["race"])).examples[:3]
    cands = attack.candidates(examples)
    assert len(cands) == 3 and all(1 <= len(c) <= 4 and all(isinstance(t, str) and t for t in c) for c in cands)
    outcomes = attack.apply_batch(examples)
    assert [o.example.answer for o in outcomes] == [ex.answer for ex in examples]


def test_model_attack_errors(setup, tmp_path):
    with pytest.raises(ConfigError, match="needs config.model"):
        get_attack("distractor_extraction")({})
    with pytest.raises(ConfigError, match="objective 'distractor_generation'"):
        get_attack("distractor_extraction")({"model": setup["dg"]["final"]})
    with pytest.raises(ConfigError, match="backend"):
        get_attack("distractor_generation")({"model": setup["dg"]["final"], "backend": "gpt"})
    missing = get_attack("distractor_extraction")({"model": str(tmp_path / "nope")})
    with pytest.raises(ConfigError, match="no checkpoint folder"):
        missing.apply_batch(load(str(setup["race"])).examples)
    with pytest.raises(ConfigError, match="rule-based attack cannot be built from"):
        _build(setup, tmp_path, [
            {"attack": "distractor_extraction", "config": {"model": setup["de"]["final"]}},
            {"attack": "charswap", "name": "cs_de", "from": "distractor_extraction"}])


def test_rule_based_splits_can_feed_a_model_split(setup, tmp_path):
    manifest, out = _build(setup, tmp_path, [
        {"attack": "charswap"},
        {"attack": "distractor_extraction", "name": "de_charswap", "from": "charswap",
         "config": {"model": setup["de"]["final"]}}])
    charswap = {ex.source_id: ex for ex in read_split(out, "charswap")}
    for ex in read_split(out, "de_charswap"):
        assert ex.passage == charswap[ex.source_id].passage
    assert manifest["splits"]["de_charswap"]["source"] == "charswap"


BUILD_DRIVER = """
from advrace.models.runtime.sharding import end_processes
import json, sys
from advrace.core.config import release_config_from_dict
from advrace.release import build_release

build_release(release_config_from_dict(json.loads(sys.argv[1])), sys.argv[2])
from accelerate import PartialState
print(f"processes {PartialState().num_processes}")  # one write: the two processes share stdout
end_processes()
"""


def test_two_processes_shard_inference_and_build_the_same_release(setup, tmp_path):
    """`accelerate launch` / torchrun with two CPU processes: each runs its shard of the model's
    inference, the main process writes a release identical to a one-process build."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    splits = [{"attack": "distractor_extraction", "config": {"model": setup["de"]["final"], "batch_size": 2}},
              {"attack": "distractor_generation",
               "config": {"model": setup["dg"]["final"], "beam_size": 3, "max_target_tokens": 3}}]
    cfg = {"name": "t", "data": {"path": str(setup["race"])}, "seed": 7, "splits": splits}
    single, _ = _build(setup, tmp_path, splits, "single")
    (tmp_path / "driver.py").write_text(BUILD_DRIVER, encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "driver.py"), json.dumps(cfg), str(tmp_path / "double")]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.count("processes 2") == 2
    double = json.loads((tmp_path / "double" / "manifest.json").read_text())
    assert double["splits"] == single["splits"]
    assert double["files"] == single["files"]
    assert double["environment"]["torch_threads"] == 1  # each process's count (OMP_NUM_THREADS), gathered


# --------------------------------------------------------------------------- validity filters

from advrace.core.examples import MCExample  # noqa: E402
from advrace.models.encoders.readers import SlidingWindow  # noqa: E402

STORY = ("Tom was tired after the long walk, so he felt exhausted and went to bed early. The next "
         "morning he went to school by bus. His teacher, Mrs. Green, said that the school trip would "
         "be on Friday. Tom's sister Mary plays the piano every evening.")
WHY = MCExample(id="why", passage=STORY, question="Why did Tom go to bed early?", label=1,
                options=("Because he was ill.", "Because he was tired.", "Because he had homework.",
                         "Because Mary played the piano."))
TRUE = MCExample(id="true", passage=STORY, question="Which of the following is true?", label=0,
                 options=("Mary plays the piano every evening.", "Tom goes to school on foot.",
                          "Mary is Tom's teacher.", "The trip is on Monday."))
STATED = "The next morning he went to school by bus."
PLANTED = {
    "why": ["Because he was tired and sleepy.",  # the answer, and more
            "Because he felt exhausted.",  # the answer in other words (MiniLM cosine 0.92)
            "It's very dangerous.",  # about nothing in the passage
            "Friday",  # a one-word span beside sentence options
            "Because he went to school by bus.",
            "Because Mrs. Green said so."],
    "true": [STATED,  # the passage says so: a second right answer to "which is true?"
             "Tom's sister is his teacher.",
             "Mrs. Green lives with Tom."],
    "all-stated": [STATED, "His teacher, Mrs. Green, said that the school trip would be on Friday."],
}


def planted(setup, **config):
    """Distractor extraction whose model proposes the planted candidates: the filters are real."""
    attack = get_attack("distractor_extraction")({"model": setup["de"]["final"], **config})
    attack.candidates = lambda shard, progress=False: [list(PLANTED[ex.source_id]) for ex in shard]
    return attack


def test_each_filter_rejects_its_plant_with_its_reason(setup):
    all_stated = MCExample(id="all-stated", passage=STORY, question="What can we learn from the passage?",
                           options=TRUE.options, label=0)
    attack = planted(setup)
    why, true, unchanged = attack.apply_batch([WHY, TRUE, all_stated])
    record = why.example.provenance[-1].distractors
    assert record.rejected == {"contains the answer": 1, "a paraphrase of the answer": 1,
                               "not grounded in the passage": 1,
                               "form: length unlike the other options": 1}
    assert record.new == ("Because he went to school by bus.", "Because Mrs. Green said so.")
    assert record.kept_original == 1 and why.example.distractors[-1] == "Because Mary played the piano."
    record = true.example.provenance[-1].distractors
    assert record.rejected == {"stated in the passage": 1}
    assert record.new == ("Tom's sister is his teacher.", "Mrs. Green lives with Tom.")
    # nothing left: the question stays as it was, and says why
    assert not unchanged.perturbed and unchanged.example == all_stated
    assert unchanged.reason == "every candidate rejected, most often as 'stated in the passage'"
    assert attack.summarize([why.example, true.example, unchanged.example])["rejected"] == {
        "a paraphrase of the answer": 1, "contains the answer": 1,
        "form: length unlike the other options": 1, "not grounded in the passage": 1,
        "stated in the passage": 3}


def test_stated_sentences_are_fine_where_the_question_asks_for_one_fact(setup):
    attack = planted(setup)
    attack.candidates = lambda shard, progress=False: [[STATED, "Because Mrs. Green said so."]]
    record = attack.apply_batch([WHY])[0].example.provenance[-1].distractors
    assert record.new == (STATED, "Because Mrs. Green said so.") and record.rejected == {}


def test_each_filter_can_be_turned_off(setup):
    attack = planted(setup, max_answer_cosine=None, min_grounded_share=0.0, reject_form_giveaways=False,
                     reject_stated_in_passage=False, max_overlap_each_other=1.0)
    why, true = (o.example.provenance[-1].distractors for o in attack.apply_batch([WHY, TRUE]))
    assert why.rejected == {"contains the answer": 1}
    assert why.new == ("Because he felt exhausted.", "It's very dangerous.", "Friday.")
    assert true.rejected == {} and true.new[0] == STATED


NOT = MCExample(id="not", passage=STORY, question="Which of the following is NOT mentioned in the story?", label=3,
                options=("Tom went to bed early.", "Mary plays the piano.", "Mrs. Green is a teacher.",
                         "Tom has a dog."))
PLANTED["not"] = [STATED, "Tom hates his teacher.", "Mary went to the zoo."]


def test_negated_questions_keep_their_options_unless_the_config_asks_for_stated_distractors(setup):
    """"Which is NOT mentioned?": a new distractor the passage does not state is a second right
    answer. By default such questions keep their options and say why; `negated_questions: stated`
    lets in only distractors the passage states."""
    kept, why = planted(setup).apply_batch([NOT, WHY])
    assert not kept.perturbed and kept.example == NOT and kept.reason == "negated question"
    assert why.perturbed
    stated = planted(setup, negated_questions="stated", max_overlap_each_other=1.0).apply_batch([NOT])[0]
    record = stated.example.provenance[-1].distractors
    assert record.new == (STATED,)
    assert record.rejected == {"not stated in the passage, for a negated question": 2}
    with pytest.raises(ConfigError, match="negated_questions"):
        planted(setup, negated_questions="yes")


NAMES = ("Sequoyah invented an alphabet for his people in 1821. Mr Boardman astonished the town with it. "
         "Later Lomax, a teacher, used it in his school.")
CUT = MCExample(id="cut", passage=NAMES, question="What did Sequoyah do in 1821?", label=0,
                options=("He made an alphabet.", "He left his town.", "He built a school.", "He met a teacher."))
PLANTED["cut"] = ["H invented an alphabet.",  # "Sequoyah invented": a piece that is a word itself
                  "Man astonished the town.",  # "Boardman astonished"
                  "Max, a teacher.",  # "Lomax, a teacher"
                  "He used it in his school."]


def test_a_span_that_begins_or_ends_inside_a_passage_word_is_refused_and_counted(setup):
    """Issue 46: 8 of 140 DE spans began inside a name ("h invented" of Sequoyah), each piece a
    word itself, which the form check excuses in a generated option. They are refused under one
    key, which the split's stats count."""
    out = planted(setup, max_answer_cosine=None).apply_batch([CUT])[0]
    record = out.example.provenance[-1].distractors
    assert record.new == ("He used it in his school.",)
    assert record.rejected == {"begins or ends inside a passage word": 3}
    attack = planted(setup, max_answer_cosine=None)
    assert attack.summarize([o.example for o in attack.apply_batch([CUT])])["rejected"] == {
        "begins or ends inside a passage word": 3}


HELEN = MCExample(id="helen", passage="Helen has visited Paris and Rome. She will go to Tokyo next year.",
                  question="Which of the following places has Helen not visited yet?", label=2,
                  options=("Paris.", "Rome.", "Tokyo.", "Both Paris and Rome."))
FLEMING = MCExample(id="fleming", passage=STORY, question="According to the story, Tom _ .", label=0,
                    options=("went to bed early", "walked to school", "played the piano", "had a dog"))
PLANTED["helen"] = ["She will go.", "Next year."]
PLANTED["fleming"] = ["he went to school by bus", "was tired after the long walk",
                      "hated his teacher"]


def test_questions_read_on_race_that_the_checks_missed(setup):
    """Issue 46: "has Helen not visited" is negated (a new place is a second right answer), and
    "According to the story, Tom _" asks what the passage states (a stated span is a right answer)."""
    helen, fleming = planted(setup, max_answer_cosine=None, min_grounded_share=0.0,
                             reject_form_giveaways=False).apply_batch([HELEN, FLEMING])
    assert not helen.perturbed and helen.reason == "negated question"
    record = fleming.example.provenance[-1].distractors
    assert record.new == ("hated his teacher",)
    assert record.rejected == {"stated in the passage": 2}


def test_perturb_raises_cannot_perturb_for_a_question_it_leaves(setup):
    """`perturb` keeps the attack interface's contract for a caller outside the release runner."""
    attack = planted(setup)
    with pytest.raises(CannotPerturb) as info:
        attack.perturb(NOT, attack.rng_for(NOT))
    assert info.value.reason == "negated question"
    assert attack.perturb(WHY, attack.rng_for(WHY)) == attack.apply(WHY).example != WHY


WHY_CANDIDATES = ["Because he went to school by bus.", "Because Mrs. Green said so.",
                  "Because the trip was on Friday.", "Because Mary plays the piano every evening.",
                  "Because his teacher said that."]


def test_select_with_a_reader_keeps_its_favourite_candidates(setup):
    candidates = WHY_CANDIDATES
    attack = planted(setup, select_with="sliding-window", max_overlap_each_other=1.0)
    attack.candidates = lambda shard, progress=False: [list(candidates)]
    record = attack.apply_batch([WHY])[0].example.provenance[-1].distractors
    gold, *scores = SlidingWindow().scores(STORY, WHY.question, [WHY.answer, *candidates])
    best = sorted(range(len(candidates)), key=lambda j: (-scores[j], j))[:3]
    assert record.new == tuple(candidates[j] for j in best) != tuple(candidates[:3])
    # one reader: still a list of one score each, to 4 significant digits
    assert record.reader_scores == tuple((significant(scores[j]),) for j in best)
    assert record.gold_reader_scores == (significant(gold),)
    # the subclass's rule against near-copies still applies to the reader's order
    strict = planted(setup, select_with="sliding-window", max_overlap_each_other=0.2)
    strict.candidates = attack.candidates
    chosen = strict.apply_batch([WHY])[0].example.provenance[-1].distractors.new
    assert chosen[0] == candidates[best[0]] and all(
        token_overlap(a, b) <= 0.2 for i, a in enumerate(chosen) for b in chosen[i + 1:])


def test_new_distractors_never_repeat_each_other(setup):
    """"the millionaire" and "a millionaire" are far apart by words, yet one option: the audit's
    `same_as_option` holds among the new distractors too."""
    from advrace.attacks.distractors.checks import distinct

    assert distinct(["the millionaire", "a millionaire", "a poor man", "The millionaire."]) == \
        ["the millionaire", "a poor man"]
    attack = planted(setup, max_overlap_each_other=1.0)
    attack.candidates = lambda shard, progress=False: [["Because of the bus.", "Because of a bus.",
                                                        "Because Mrs. Green said so."]]
    record = attack.apply_batch([WHY])[0].example.provenance[-1].distractors
    assert record.new == ("Because of the bus.", "Because Mrs. Green said so.")


def test_select_with_several_readers_ranks_by_their_mean_rank(setup):
    """An ensemble (SWAG's adversarial filtering with several readers): the candidates both
    readers rank high come first, each reader's score recorded in select_with's order."""
    from advrace.attacks.distractors.reader_ranking import ensemble_rank

    assert ensemble_rank([[0.9, 0.1, 0.5], [3.0, 20.0, 1.0]], 1) == 1.0  # 2nd for one, 1st for the other
    candidates = WHY_CANDIDATES
    attack = planted(setup, select_with="sliding-window, sliding-window:distance", max_overlap_each_other=1.0)
    attack.candidates = lambda shard, progress=False: [list(candidates)]
    record = attack.apply_batch([WHY])[0].example.provenance[-1].distractors
    options = [WHY.answer, *candidates]
    rows = [SlidingWindow().scores(STORY, WHY.question, options),
            SlidingWindow(distance=True).scores(STORY, WHY.question, options)]
    best = sorted(range(len(candidates)), key=lambda j: (ensemble_rank(rows, j + 1), j))[:3]
    assert record.new == tuple(candidates[j] for j in best)
    assert record.reader_scores == tuple(tuple(significant(r[j + 1]) for r in rows) for j in best)
    assert record.gold_reader_scores == tuple(significant(r[0]) for r in rows)
    info = attack.describe()["select_with"]
    assert info["name"] == "sliding-window,sliding-window:distance" and len(info["readers"]) == 2
    with pytest.raises(ConfigError, match="several separated by commas"):
        planted(setup, select_with="sliding-window,")


def test_select_with_is_recorded_in_the_manifest(setup, tmp_path):
    splits = [{"attack": "distractor_extraction",
               "config": {"model": setup["de"]["final"], "select_with": "sliding-window", "batch_size": 4}}]
    manifest, out = _build(setup, tmp_path, splits)
    info = manifest["splits"]["distractor_extraction"]
    assert info["model_dependent"] is True
    assert info["select_with"] == {"name": "sliding-window", "checkpoint_sha256": None}
    assert info["config"]["select_with"] == "sliding-window"
    assert info["paraphrase_encoder"]["name"] == "minilm"
    replaced = [ex.provenance[-1].distractors for ex in read_split(out, "distractor_extraction")
                if ex.provenance[-1].distractors]
    assert replaced
    for record in replaced:
        assert len(record.reader_scores) == len(record.new)
        assert record.reader_scores == tuple(sorted(record.reader_scores, reverse=True))
        assert len(record.gold_reader_scores) == 1 and isinstance(record.rejected, dict)
    stats = json.loads((out / "stats.json").read_text())["splits"]["distractor_extraction"]["attack_stats"]
    assert stats["select_with"] == "sliding-window" and isinstance(stats["rejected"], dict)
    assert len(stats["avg_gold_reader_score"]) == len(stats["avg_new_distractor_reader_score"]) == 1
    again, _ = _build(setup, tmp_path, splits, "rel2")
    assert again["splits"] == manifest["splits"]  # byte-identical split files
    # a checkpoint reader is named portably and hashed, never by its path
    folder = setup["de"]["final"]
    described = get_attack("distractor_extraction")({"model": folder, "select_with": folder}).describe()
    assert described["select_with"] == {"name": checkpoint_name(folder),
                                        "checkpoint_sha256": checkpoint_sha256(folder)}
    assert str(tmp_path) not in json.dumps(described) and described["model_dependent"] is True
    assert "model_dependent" not in get_attack("distractor_extraction")({"model": folder}).describe()


def test_filter_config_errors(setup):
    make = lambda **c: get_attack("distractor_generation")({"model": setup["dg"]["final"], **c})  # noqa: E731
    with pytest.raises(ConfigError, match="min_grounded_share"):
        make(min_grounded_share=1.5)
    with pytest.raises(ConfigError, match="max_answer_cosine"):
        make(max_answer_cosine=2.0)
    with pytest.raises(ConfigError, match="select_with"):
        make(select_with=" ")
    with pytest.raises(ConfigError, match="select_with_pool"):
        make(select_with_pool=0)


def test_an_answer_naming_other_options_keeps_its_question_and_no_candidate_names_them(setup):
    both = MCExample(id="both", passage=STORY, question="Why was Tom late?",
                     options=("He missed the bus.", "It rained.", "Both A and B.", "He was ill."), label=2)
    attack = get_attack("distractor_extraction")({"model": setup["de"]["final"]})
    attack.candidates = lambda shard, progress=False: [["Because Mrs. Green said so.", "A and C."]
                                                       for _ in shard]
    kept, changed = attack.apply_batch([both, WHY])
    assert not kept.perturbed and kept.example == both
    assert kept.reason == "the answer refers to the other options"
    assert changed.example.provenance[-1].distractors.rejected.get("refers to the other options") == 1


def test_splits_that_differ_only_in_choosing_share_one_model_pass(setup, tmp_path, monkeypatch):
    from advrace.attacks.distractor_generation import DistractorGeneration

    calls = []
    real = DistractorGeneration.candidates

    def counted(self, examples, progress=False):
        calls.append(len(examples))
        return real(self, examples, progress)

    monkeypatch.setattr(DistractorGeneration, "candidates", counted)
    model = setup["dg"]["final"]
    cfg = release_config_from_dict({"name": "dg-twice", "data": {"path": str(setup["race"])}, "seed": 3, "splits": [
        {"attack": "distractor_generation", "config": {"model": model, "beam_size": 4}},
        {"attack": "distractor_generation", "name": "dg_sw", "config": {"model": model, "beam_size": 4,
                                                                                  "select_with": "sliding-window"}},
        {"attack": "distractor_generation", "name": "dg_beam3", "config": {"model": model, "beam_size": 3}}]})
    build_release(cfg, tmp_path / "rel")
    n = len(read_split(tmp_path / "rel", "original"))
    assert calls == [n, n]  # the select_with split reused the first pass; another beam size did not
    gc.collect()
    assert len(candidate_cache._CANDIDATES) == 0  # gone with the build's attacks


def test_the_candidate_cache_does_not_grow_across_builds(setup, tmp_path):
    """Ablations and test runs build many releases in one process: each build's candidates go
    with it, whatever its settings."""
    for beam in (4, 3, 2):
        cfg = release_config_from_dict({"data": {"path": str(setup["race"])}, "splits": [
            {"attack": "distractor_generation", "config": {"model": setup["dg"]["final"], "beam_size": beam}}]})
        build_release(cfg, tmp_path / f"beam{beam}")
        gc.collect()
        assert sum(len(c) for c in candidate_cache._CANDIDATES.values()) == 0


def test_one_factory_makes_every_multiple_choice_scorer(setup, monkeypatch):
    """Evaluation, `select_with` and authoring share make_mc_scorer, each with its own batches."""
    from advrace.evaluation.scoring import make_scorer
    from advrace.models.encoders import mc_scoring
    from advrace.models.encoders.mc_scoring import CheckpointScorer
    from advrace.models.runtime.precision import inference_device

    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice

    from advrace.core.errors import ConfigError

    folder = setup["de"]["final"]  # a span (DE) checkpoint: as a reader it would get a random head
    with pytest.raises(ConfigError, match="BertForQuestionAnswering model, not the ForMultipleChoice"):
        get_attack("distractor_extraction")({"model": folder, "select_with": folder})._readers()
    mc = setup["root"] / "mc-reader"
    if not mc.is_dir():
        BertForMultipleChoice(BertConfig.from_pretrained(folder)).save_pretrained(mc)
        AutoTokenizer.from_pretrained(folder).save_pretrained(mc)
    attack = get_attack("distractor_extraction")({"model": folder, "select_with": str(mc), "batch_size": 3,
                                                  "select_with_max_length": 64})
    [reader] = attack._readers()
    assert isinstance(reader, CheckpointScorer) and attack._readers()[0] is reader
    assert reader.batch_size == 3 and reader.max_length <= 64
    assert reader.device.type == next(reader.model.parameters()).device.type == inference_device().type
    monkeypatch.setattr(mc_scoring, "make_reader", lambda name, **kwargs: (name, kwargs))
    assert make_scorer("similarity", batch_size=16, max_length=None, bf16=None, accelerator=None) == \
           ("similarity", {"batch_size": 32})
    sw = get_attack("distractor_extraction")({"model": folder, "select_with": "similarity", "batch_size": 5})
    assert sw._readers() == [("similarity", {"batch_size": 5})]
    assert mc_scoring.make_mc_scorer("similarity", batch_size=1, max_length=None, bf16=False) == ("similarity", {})


def test_checkpoint_digest_is_memoised_until_a_file_changes(tmp_path, monkeypatch):
    import hashlib
    import os

    from advrace.models.runtime import checkpoint_info

    folder = tmp_path / "ckpt"
    (folder / "sub").mkdir(parents=True)
    (folder / "a.bin").write_bytes(b"x" * 10)
    (folder / "sub" / "b.txt").write_text("hi")

    def plain():
        h = hashlib.sha256()
        for name in ("a.bin", "sub/b.txt"):
            h.update(name.encode() + b"\0" + (folder / name).read_bytes() + b"\0")
        return h.hexdigest()

    first = checkpoint_sha256(folder)
    assert first == plain()
    opened = []
    monkeypatch.setattr(checkpoint_info, "open", lambda *a, **k: opened.append(a) or open(*a, **k), raising=False)
    assert checkpoint_sha256(str(folder)) == checkpoint_sha256(folder / "sub" / "..") == first
    assert not opened
    (folder / "a.bin").write_bytes(b"y" * 10)
    stat = (folder / "a.bin").stat()
    os.utime(folder / "a.bin", ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))
    assert checkpoint_sha256(folder) == plain() != first and opened
    assert checkpoint_sha256(tmp_path / "absent") is None


def test_training_info_is_read_once_and_generators_take_either_objective(setup, monkeypatch):
    from advrace.attacks.distractors import attack as distractor_attack
    from advrace.models.runtime import checkpoint_info

    with pytest.raises(ConfigError, match="not 'distractor_generation' or 'causal_lm'"):
        get_attack("distractor_generation")({"model": setup["de"]["final"]})
    reads = []
    real = checkpoint_info.training_info

    def counted(model):
        reads.append(model)
        return real(model)

    monkeypatch.setattr(checkpoint_info, "training_info", counted)
    monkeypatch.setattr(distractor_attack, "training_info", counted)
    attack = get_attack("distractor_generation")({"model": setup["dg"]["final"]})
    assert attack.config.backend == "unilm" and attack._source_length() > 0
    assert len(reads) == 1


def test_vetting_refuses_twins_of_kept_options_and_echoes_of_the_question(setup):
    """Read on RACE dev-middle's DG split: "at the school" beside the kept "at school", and
    options that only repeat the question, are refused before selection."""
    from collections import Counter

    attack = get_attack("distractor_generation")({"model": setup["dg"]["final"]})
    ex = MCExample(id="q", passage="Tom reads at home and on the bus.", question="The teacher reads the exercise books  _",
                   options=("in class", "at home", "at school", "in the classroom"), label=1)
    rejected = Counter()
    passed = word_checks(ex, ["at the school", "the exercise books", "on the bus"], rejected, attack._checks,
                         attack.config.match_answer_format)
    assert passed == ["on the bus"]
    assert rejected == Counter({"repeats another option": 1, "repeats the question": 1})


def test_vetting_refuses_a_short_candidate_that_wordnet_puts_next_to_the_answer(setup):
    """Read on RACE dev-middle's DG split: "smog" for the answer "air pollution"."""
    from collections import Counter

    attack = get_attack("distractor_generation")({"model": setup["dg"]["final"]})
    ex = MCExample(id="q", passage="Smog, noise and dirty water: the air was the worst.",
                   question="The most serious kind of pollution is _ .",
                   options=("noise pollution", "air pollution", "water pollution", "light pollution"), label=1)
    rejected = Counter()
    assert word_checks(ex, ["smog", "dirty water"], rejected, attack._checks,
                       attack.config.match_answer_format) == ["dirty water"]
    assert rejected == Counter({"a synonym of the answer": 1})


def test_the_build_audits_a_split_with_its_own_settings_and_names_what_it_cannot_see(setup, tmp_path):
    """With grounding off, the tiny generator's ungrounded candidates pass the attack; the build's
    audit must read the same setting, as `advrace audit` does from the manifest, not the default."""
    from advrace.release import audit_release

    splits = [{"attack": "distractor_generation",
               "config": {"model": setup["dg"]["final"], "beam_size": 6, "max_target_tokens": 4,
                          "batch_size": 2, "min_grounded_share": 0}}]
    manifest, out = _build(setup, tmp_path, splits)
    assert manifest["splits"]["distractor_generation"]["perturbed"] > 0
    built = json.loads((out / "stats.json").read_text())["audit"]["distractor_generation"]
    assert built == audit_release(out)["distractor_generation"].counts()
    assert "right answer" in built["unchecked"][0]
    assert "the audit does not see a new distractor that is a right answer too" in (out / "README.md").read_text()


# Read on RACE dev-high's DE and DG splits of the demo models (issue 37): spans cut inside a word
# ("Oride to protect teeth"), spans holding the passage's blanks, and sentences the passage states
# for "The passage indicates that _". Written in RACE's style, not taken from it.
TEETH = ("Bad teeth can be painful and even be deadly. Experts say good dental care starts at birth. "
         "The use of fluoride to protect teeth is common in many parts of the world. Doctors worry about "
         "children being _ short of _ exercise and sleep.")


def test_de_refuses_a_span_cut_inside_a_word_or_holding_a_blank(setup):
    attack = planted(setup, max_answer_cosine=None)
    ex = MCExample(id="teeth", passage=TEETH, question="What do experts say about dental care?", label=0,
                   options=("it starts at birth", "it starts at school", "it is not important", "it costs too much"))
    attack.candidates = lambda shard, progress=False: [[
        "oride to protect teeth",  # "fluoride" cut
        "being _ short of _ exercise",  # the passage's blanks
        "fluoride to protect teeth",  # the same span, at a word's boundary
        "exercise and sleep"]]  # after the blanks
    record = attack.apply_batch([ex])[0].example.provenance[-1].distractors
    # DE's cut spans count under span_cut's key (issue 46), which runs before the form check
    assert record.rejected == {"begins or ends inside a passage word": 1, "form: holds a blank": 1}
    assert record.new == ("fluoride to protect teeth", "exercise and sleep")


def test_de_refuses_what_the_passage_states_where_the_question_asks_what_it_indicates(setup):
    attack = planted(setup, max_answer_cosine=None)
    ex = MCExample(id="teeth", passage=TEETH, question="The passage indicates that _ .", label=0,
                   options=("Doctors worry about children.", "Sugar is good for teeth.", "Fluoride is rare.",
                            "Babies need no dental care."))
    attack.candidates = lambda shard, progress=False: [[
        "good dental care starts at birth",  # stated
        "They can even be deadly",  # nearly: "Bad teeth can be painful and even be deadly."
        "They can never be deadly",  # the passage says the opposite
        "fluoride is used in few parts of the world"]]
    record = attack.apply_batch([ex])[0].example.provenance[-1].distractors
    assert record.rejected == {"stated in the passage": 1, "stated in the passage, nearly word for word": 1}
    assert record.new == ("They can never be deadly.", "Fluoride is used in few parts of the world.")


def test_a_split_built_with_a_model_trained_on_the_bundled_sample_says_so_on_its_card(setup, tmp_path):
    """`make demo` trains its DE and DG models on the sample's 77 questions: a release built with
    them shows the pipeline only, and its card and manifest say so; a model trained on other data
    gets no such line."""
    import shutil

    from advrace.models.runtime.checkpoint_info import TRAINING_INFO

    demo = tmp_path / "de-demo" / "final"
    shutil.copytree(setup["de"]["final"], demo)
    info = json.loads((demo / TRAINING_INFO).read_text())
    assert info["config"]["train"]["path"] == str(setup["race"])  # trained here, on other data
    info["config"]["train"]["path"] = "@sample/race"  # as configs/train/de-cpu.yaml trains it
    (demo / TRAINING_INFO).write_text(json.dumps(info))
    cards = {}
    for name, model in (("demo", demo), ("other", setup["de"]["final"])):
        manifest, out = _build(setup, tmp_path, [{"attack": "distractor_extraction",
                                                  "config": {"model": str(model), "max_answer_tokens": 8}}], name)
        cards[name] = ((out / "README.md").read_text(), manifest["splits"]["distractor_extraction"])
    card, split = cards["demo"]
    assert split["trained_on_sample"] == "@sample/race"
    assert "trained on the bundled sample (`@sample/race`)" in card and "configs/train/de-gpu.yaml" in card
    card, split = cards["other"]
    assert "trained_on_sample" not in split and "bundled sample" not in card
