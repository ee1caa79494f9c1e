"""AddOneSent and AddSentMod choose with the answer model (attacks/squad/answer_model_choice.py):
the most fluent candidate sentence of the fake with the highest PMI, scored a chunk at a
time; the scores in provenance; AddSentMod's fakes another set for every rule."""

import json
import random

import pytest
import torch

from advrace.attacks.squad import closed_book as closed_book_module
from advrace.models.decoders import loaded_lm as loaded_lm_module
from advrace.attacks.sentences import fluency as fluency_module
from advrace.attacks.squad.config import AddSentConfig
from advrace.attacks.squad_addsent import AddOneSent, AddSentMod
from advrace.attacks.sentences.fluency import fluent_choice
from advrace.attacks.squad.answer_rules import FallbackFakes, shift_date, shift_number
from advrace.attacks.squad.closed_book import ClosedAnswer
from advrace.attacks.squad.fake_answers import FakePool
from advrace.core.config import release_config_from_dict
from advrace.core.numbers import significant
from advrace.core.provenance import AdversarialSentence, AttackSummary, from_json, to_json
from advrace.core.examples import Answer, SpanExample
from advrace.release import build_release, runner
from advrace.resources import get_resources
from conftest import make_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")

LM = "tiny-test-lm"


@pytest.fixture(scope="module")
def res():
    return get_resources()


@pytest.fixture
def tiny_lm(tmp_path, monkeypatch):
    """A tiny random llama under the name LM, for the closed-book answers, the PMI and the fluency."""
    import transformers as tf
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    config = tf.LlamaConfig(vocab_size=len(tok), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                            num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                            pad_token_id=0, bos_token_id=1, eos_token_id=2, initializer_range=0.5)
    torch.manual_seed(0)
    model = tf.AutoModelForCausalLM.from_config(config).eval()
    monkeypatch.setattr(loaded_lm_module, "_LOADED", {(LM, False): (model, tok, torch.device("cpu"), False)})
    monkeypatch.setattr(closed_book_module, "_SHARED", {})
    monkeypatch.setattr(fluency_module, "_SHARED", {})
    return model, tok


def _example(context, answer, question, id="q"):
    return SpanExample(id=id, title="t", context=context, question=question,
                       answers=(Answer(answer, context.index(answer)),))


def _record(sentence):
    return AdversarialSentence(sentence, answer="x", fake_rule="typed")


def test_the_most_fluent_candidate_is_kept_where_a_random_one_would_differ(tiny_lm):
    sentences = ["The river reaches the sea.", "sea the reaches river The.", "The sea reaches the river.",
                 "river river river sea."]
    scorer = fluency_module.fluency(LM, False)
    values = [significant(v) for v in scorer.scores(sentences)]
    assert len(set(values)) == len(values)  # the tiny model tells them apart
    best = max(range(len(values)), key=lambda i: values[i])
    # the candidates in an order where the seeded random choice takes another one
    rng_pick = random.Random(5).choice(range(len(sentences)))
    order = list(range(len(sentences)))
    if rng_pick == best:
        order = order[1:] + order[:1]
    cands = [_record(sentences[i]) for i in order]
    assert random.Random(5).choice(cands).sentence != sentences[best]
    chosen = fluent_choice({"k": (cands, {})}, scorer)["k"]
    assert chosen[0].sentence == sentences[best]
    assert chosen[0].fluency == values[best] and chosen[1] == len(cands)


def test_a_fluency_tie_goes_to_the_first_candidate_and_every_chunk_is_one_call(tiny_lm):
    class Counting(fluency_module.Fluency):
        calls = 0

        def scores(self, sentences):
            Counting.calls += 1
            return super().scores(sentences)

    scorer = Counting(LM)
    same = [AdversarialSentence("The river reaches the sea.", answer=a) for a in ("first", "second")]
    other = [_record("The sea is deep."), _record("Deep is the sea.")]
    chosen = fluent_choice({"a": (same, {}), "b": (other, {}), "c": ([], {"no verb": 1})}, scorer)
    assert Counting.calls == 1
    assert chosen["a"][0] is not None and chosen["a"][0].answer == "first"
    assert chosen["c"] == (None, 0, {"no verb": 1})


def test_the_scores_round_trip_in_provenance_and_are_absent_when_unset():
    plain = AttackSummary("addonesent", sentences=(AdversarialSentence("The sea is deep.", answer="deep"),))
    data = to_json(plain)
    assert "fluency" not in json.dumps(data) and "fake_pmi" not in json.dumps(data)
    assert from_json(data) == plain
    scored = AttackSummary("addonesent", sentences=(AdversarialSentence("The sea is deep.", answer="deep",
                                                                         fluency=-4.125, fake_pmi=2.5),))
    data = to_json(scored)
    assert data["sentences"][0]["fluency"] == -4.125 and data["sentences"][0]["fake_pmi"] == 2.5
    assert from_json(json.loads(json.dumps(data))) == scored


def test_addsentmod_moves_dates_and_numbers_otherwise(res):
    for text in ("between 1550 and 1580", "March 3, 1911", "the 1990s", "3 March"):
        assert shift_date(text) and shift_date(text, True) and shift_date(text) != shift_date(text, True), text
    for text in ("about 21", "three years", "$5 million", "12th", "1,200 men", "zero"):
        assert shift_number(text) and shift_number(text, True) and shift_number(text) != shift_number(text, True), text


@pytest.mark.parametrize("context, answer, question, rule", [
    ("The bridge opened in 1911 after years of work.", "1911", "When did the bridge open?", "date"),
    ("The river flows through ten countries.", "ten", "How many countries does the river flow through?",
     "number"),
    ("The lamprey is a jawless fish of the rivers.", "The lamprey", "What jawless fish lives in rivers?",
     "lexfile"),
])
def test_addsentmod_fakes_differ_from_addonesents_for_each_rule(res, context, answer, question, rule):
    ex = _example(context, answer, question)
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    first = [c for c in FallbackFakes(pool, res).choices(ex, "other", [answer], random.Random(0), 3)
             if c.rule == rule]
    second = [c for c in FallbackFakes(pool, res, True).choices(ex, "other", [answer], random.Random(0), 3)
              if c.rule == rule]
    assert first and second, rule
    assert not {f for c in first for f in c.fakes} & {f for c in second for f in c.fakes}, (first, second)


def test_the_closed_book_answer_is_addonesents_alone(res):
    ex = _example("The mill closed after the great flood.", "the great flood", "What closed the old mill?")
    closed = ClosedAnswer("a fire", 0.2)
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    one = [c.rule for c in FallbackFakes(pool, res).choices(ex, "other", [], random.Random(0), 2, closed)]
    mod = [c.rule for c in FallbackFakes(pool, res, True).choices(ex, "other", [], random.Random(0), 2, closed)]
    assert "closed_book" in one and "closed_book" not in mod
    assert mod  # another rule's fake instead


def test_the_typed_pool_gives_the_second_set_other_phrases(res):
    context = ("Paris, Lyon, Marseille, Toulouse, Nice, Nantes, Bordeaux and Lille are cities of France. "
               "Berlin is in Germany.")
    pool = FakePool.from_contexts([context], res, cap=3)
    key = ("place", "city")
    one = pool.choose(key, [], "Where is it?", "Where is it?", random.Random(0), 8, False)
    two = pool.choose(key, [], "Where is it?", "Where is it?", random.Random(0), 8, True)
    assert one and two and not set(one) & set(two)


SQUAD_LIMIT = 9


def _build(tmp_path, name, workers, answer_model=LM):
    cfg = release_config_from_dict({
        "name": name, "data": {"path": "@sample/squad", "limit": SQUAD_LIMIT}, "seed": 2017, "workers": workers,
        "splits": [{"attack": "addonesent", "config": {"answer_model": answer_model}},
                   {"attack": "addsentmod", "config": {"answer_model": answer_model}}]})
    build_release(cfg, tmp_path / name)
    return {p.name: p.read_bytes() for p in sorted((tmp_path / name / "data").glob("*.jsonl"))}


def _sentences(built, split) -> dict:
    """source id -> the split's sentence record, for each attacked question."""
    out = {}
    for line in built[f"{split}-00000-of-00001.jsonl"].decode().splitlines():
        r = json.loads(line)
        for p in json.loads(r["provenance"]):
            if p.get("sentences"):
                out[r["source_id"]] = p["sentences"][0]
    return out


def test_the_models_choice_does_not_depend_on_the_workers(tiny_lm, tmp_path, monkeypatch):
    monkeypatch.setattr(runner, "CHUNK_PASSAGES", 1)  # a chunk per passage, so that workers fork
    one = _build(tmp_path, "one", 1)
    two = _build(tmp_path, "two", 2)
    assert one == two
    sentences = list(_sentences(one, "addonesent").values())
    assert sentences and all("fluency" in s and "fake_pmi" in s for s in sentences)


def test_without_an_answer_model_no_score_is_recorded(tmp_path):
    built = _build(tmp_path, "rules", 1, answer_model="")
    text = b"".join(built.values())
    assert b'sentences' in text and b"fluency" not in text and b"fake_pmi" not in text


def test_addsentmod_shares_few_sentences_and_fakes_with_addonesent(tiny_lm, tmp_path):
    built = _build(tmp_path, "both", 1)
    one, mod = _sentences(built, "addonesent"), _sentences(built, "addsentmod")
    both = set(one) & set(mod)
    assert len(both) >= SQUAD_LIMIT // 2
    assert not [i for i in both if one[i]["sentence"] == mod[i]["sentence"]]
    assert not [i for i in both if one[i]["answer"] == mod[i]["answer"]]
