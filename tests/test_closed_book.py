"""Closed-book fakes (attacks.closed_book): a causal LM's answer to the question alone, tried after
the typed pool, the moved numbers and a name of the asked kind, before the part-of-speech rules."""

import random

import pytest
import torch

from advrace.attacks.squad.candidates import sentence_candidates
from advrace.attacks.squad.config import AddSentConfig
from advrace.attacks.squad.answer_rules import FallbackFakes
from advrace.attacks.squad.closed_book import MAX_GOLD_COSINE, PROMPT, ClosedAnswer, ClosedBook, unlike_the_golds, usable
from advrace.attacks.squad.fake_answers import FakePool, answer_type
from advrace.core.checks import REGISTRY, Subject, TextContext
from advrace.core.examples import Answer, SpanExample
from advrace.core.provenance import AdversarialSentence
from advrace.resources import get_resources
from conftest import make_tokenizer

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def res():
    return get_resources()


def _example(context, answer, question):
    return SpanExample(id="q", title="t", context=context, question=question,
                       answers=(Answer(answer, context.index(answer)),))


@pytest.mark.parametrize("raw, question, kinds, want", [
    (" the Saint Johns River\n\nQ: What", "What river runs alongside Tampa?", ("river",), "the Saint Johns River"),
    (" because of rust\n", "Why did the mill close?", (), "rust"),
    (" in 1901.", "When was the mill built?", (), "1901"),
    (" the Texans\n", "Who did the Texans beat?", (), None),  # the question's own entity
    (" I don't know\n", "Who built the mill?", (), None),
    (" George Stephenson\n", "Who built the mill?", (), None),  # the prompt's own example
    (" no\n", "What do beroids not have?", (), None),
    (" a creature that is a type of animal that is a type\n", "What does it represent?", (), None),
    (" a medical professional\n", "What type of professional is a technician?", ("professional",),
     "a medical professional"),
])
def test_an_answer_is_a_fake_only_when_short_and_new_to_the_question(res, raw, question, kinds, want):
    assert usable(raw, question, res.stopwords, kinds) == want


def _tiny(family: str, vocab: int, impl: str = "sdpa", window: int = 24):
    import transformers as tf

    common = dict(vocab_size=vocab, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                  num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                  pad_token_id=0, bos_token_id=1, eos_token_id=2,
                  initializer_range=0.5)  # weights large enough that the answer depends on the question
    config = {"llama": lambda: tf.LlamaConfig(**common),
              "qwen2": lambda: tf.Qwen2Config(**common),
              "mistral": lambda: tf.MistralConfig(**common, sliding_window=window),
              "gemma2": lambda: tf.Gemma2Config(**common, head_dim=8, sliding_window=window,
                                                tie_word_embeddings=False),  # tied: every answer alike
              "phi3": lambda: tf.Phi3Config(**common, sliding_window=window),
              "olmo2": lambda: tf.Olmo2Config(**common),
              "gpt2": lambda: tf.GPT2Config(vocab_size=vocab, n_embd=32, n_layer=2, n_head=4, n_positions=512,
                                            bos_token_id=1, eos_token_id=2, initializer_range=0.5)}[family]()
    torch.manual_seed(0)
    return tf.AutoModelForCausalLM.from_config(config, attn_implementation=impl).eval()


QUESTIONS = ["Where does Tom live?", "What does Mary practise after school?", "Who is Mrs Green?",
             "Where does Tom walk every morning with his sister?"]
NEW_TOKENS = 5


def _reference(model, tok, question: str) -> str:
    """The greedy answer of the whole prompt, run alone by `generate`: no shared cache."""
    ids = tok(PROMPT.split(" {question}")[0]).input_ids
    ids += tok(f" {question}" + PROMPT.split("{question}")[1], add_special_tokens=False).input_ids
    with torch.no_grad():
        out = model.generate(torch.tensor([ids]), max_new_tokens=NEW_TOKENS, do_sample=False, num_beams=1,
                             pad_token_id=tok.pad_token_id, eos_token_id=tok.sep_token_id)
    return tok.decode(out[0, len(ids):], skip_special_tokens=True)


def _window_for(tok) -> int:
    """The shortest sliding window under which the shots' cache is shared: the shots, the longest
    question and the answer's tokens."""
    head = tok(PROMPT.split(" {question}")[0]).input_ids
    width = max(len(tok(f" {q}" + PROMPT.split("{question}")[1], add_special_tokens=False).input_ids)
                for q in QUESTIONS)
    return len(head) + width + NEW_TOKENS


@pytest.mark.parametrize("family, impl", [("llama", "sdpa"), ("llama", "eager"), ("qwen2", "sdpa"),
                                          ("mistral", "sdpa"), ("gemma2", "eager"), ("phi3", "sdpa"),
                                          ("olmo2", "sdpa"), ("gpt2", "eager")])
def test_the_cached_shots_give_the_answers_of_the_whole_prompt(tmp_path, family, impl):
    """The shots' keys and values, computed once and shared by a batch of left-padded questions,
    give each question the greedy answer that the whole prompt run alone by `generate` gives, for
    every family: a sliding window (mistral, gemma2, phi3) just long enough for the shots, the
    longest question and the answer included, under which the shared cache must be used."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    model = _tiny(family, len(tok), impl, window=_window_for(tok))
    book = ClosedBook("tiny", batch_size=3, max_new_tokens=NEW_TOKENS)
    book._loaded = (model, tok, torch.device("cpu"), False)
    got = book.answers(QUESTIONS)
    unshared = book._core.unshared.record()
    assert (unshared["shared"], unshared["run_alone"]) == (len(QUESTIONS), 0), unshared  # the cache was used
    assert len(set(got.values())) > 1, got  # a model whose answer depends on the question
    for q in QUESTIONS:
        assert got[q] == _reference(model, tok, q), (family, q)


def _rows(tok) -> dict[str, int]:
    return {q: len(tok(f" {q}" + PROMPT.split("{question}")[1], add_special_tokens=False).input_ids)
            for q in QUESTIONS}


@pytest.mark.parametrize("family", ["mistral", "gemma2", "phi3"])
@pytest.mark.parametrize("short", [2, None])
def test_a_question_too_long_for_the_window_runs_alone_and_is_counted(tmp_path, family, short):
    """A window one token short of what the longest question needs (shots, question and answer
    less the answer's last token): that question runs alone, its whole prompt under the model's
    own cache, and is counted; the others still share the shots. A window no longer than the
    shots: every question alone. Each answer is the whole prompt's either way."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    head = len(tok(PROMPT.split(" {question}")[0]).input_ids)
    window = _window_for(tok) - short if short else head
    model = _tiny(family, len(tok), "eager" if family == "gemma2" else "sdpa", window=window)
    book = ClosedBook("tiny", batch_size=len(QUESTIONS), max_new_tokens=NEW_TOKENS)
    book._loaded = (model, tok, torch.device("cpu"), False)
    got = book.answers(QUESTIONS)
    alone = [q for q, n in _rows(tok).items() if head + n + NEW_TOKENS - 1 > window]
    assert (len(alone) == 1) if short else (len(alone) == len(QUESTIONS))
    unshared = book._core.unshared.record()
    assert unshared["run_alone"] == len(alone) and unshared["shared"] == len(QUESTIONS) - len(alone)
    assert unshared["reasons"] == {f"sliding window of {window} tokens": len(alone)}
    # what each ran alone, against its own tokens only had it shared the shots
    assert unshared["tokens_run_alone"] - unshared["tokens_if_shared"] == head * len(alone)
    for q in QUESTIONS:
        assert got[q] == _reference(model, tok, q), (family, q)


def test_the_closed_book_answer_comes_after_a_name_of_the_asked_kind_and_before_the_pos_rules(res):
    ex = _example("The old mill was run by the miller's guild until the flood.", "the flood",
                  "What closed the old mill?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    kind = answer_type(ex.context, ex.answers[0].start, ex.answers[0].end, res)
    rules = [c.rule for c in FallbackFakes(pool, res).choices(ex, kind, ["the flood"], random.Random(0),
                                                               closed=ClosedAnswer("a fire", 0.1))]
    assert rules[0] == "closed_book" and "closed_book" not in rules[1:]
    # the gold, or a phrase of the passage, is never a fake
    for closed in ("the flood", "the miller's guild", "flood waters"):
        rules = [c.rule for c in FallbackFakes(pool, res).choices(ex, kind, ["the flood"], random.Random(0),
                                                                   closed=ClosedAnswer(closed, 0.1))]
        assert "closed_book" not in rules, closed
    ex = _example("Barges sailed up the Halloway River to the mill.", "the Halloway River",
                  "Which river did the barges sail up?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    kind = answer_type(ex.context, ex.answers[0].start, ex.answers[0].end, res)
    rules = [c.rule for c in FallbackFakes(pool, res).choices(ex, kind, [ex.answers[0].text], random.Random(0),
                                                               closed=ClosedAnswer("the Thames", 0.1))]
    assert rules.index("asked_name") < rules.index("closed_book")


def test_a_closed_book_fake_is_held_to_what_the_wh_word_asks(res):
    check, ctx = REGISTRY["fake_type"], TextContext(answer_type_fn=lambda t, s, e: answer_type(t, s, e, res))

    def refused(context, gold, question, sentence, fake):
        ex = _example(context, gold, question)
        rec = AdversarialSentence(sentence, question=question, answer=fake, fake_rule="closed_book")
        return check.refuse(Subject(ex, sentence, record=rec), ctx, {})

    context = "Angell wrote most before World War I, in London."
    # a time for "When", though the gold reads as an event's name
    assert not refused(context, "before World War I", "When did Angell write most?",
                       "Howell wrote most in the 1920s.", "the 1920s")
    # but not a year for "Who"
    context = "The mill was built by Hobb in 1874."
    assert refused(context, "Hobb", "Who built the mill?", "The barn was built by 1931.", "1931")
    # nor, for "Who", a model's answer with no capital letter, whatever the recogniser labels it
    # (read on XQuAD-en: "3rd-and-10 fumbled the corner on 3rd-and-9.", typed a country)
    context = "Newton fumbled the ball on 3rd-and-9."
    assert refused(context, "Newton", "Who fumbled the ball on 3rd-and-9?",
                   "3rd-and-10 fumbled the corner on 3rd-and-9.", "3rd-and-10")
    # while a name with a lowercase particle is a name
    assert not refused(context, "Newton", "Who fumbled the ball on 3rd-and-9?",
                       "Charles de Gaulle fumbled the corner on 3rd-and-9.", "Charles de Gaulle")


def test_a_sentence_takes_the_closed_book_fake_where_the_rules_know_only_the_answers_form(res):
    ex = _example("The old mill closed after the flood of the river.", "the flood",
                  "What closed the old mill?")
    pool = FakePool.from_contexts([ex.context], res, cap=3)
    out, rejected = sentence_candidates(ex, res, AddSentConfig(), rng=random.Random(0), pool=pool,
                                        closed=ClosedAnswer("a fire", 0.1234))
    assert out, rejected
    assert {o.fake_rule for o in out} == {"closed_book"} and all("a fire" in o.sentence.lower() for o in out)
    assert {o.fake_cosine for o in out} == {0.1234}  # recorded in the sentence's provenance


@pytest.mark.parametrize("answer, gold, kept", [
    ("America", "the United States", False),  # a WordNet synonym, its determiner aside
    ("ministers", "pastors", False),  # a WordNet synonym the encoder puts at 0.62
    ("autoimmune disease", "autoimmunity", False),  # read on XQuAD-en: cosines 0.91, 0.84, 0.81
    ("basketball", "NBA", False),  # "Which sport?": the league's sport is a second right answer
    ("England", "Britain", False),
    ("ten years", "10 years", False),  # the same number in words
    ("the nineteenth century", "19th century", False),
    ("space suits", "new Apollo spacesuit", False),  # read on XQuAD-en at cosine 0.58: the gold, respaced
    ("the Apollo spacesuits", "space suit", False),  # the other way round
    ("a spacesuit", "space suit", False),  # cosine 0.71
    ("1973", "1974", True),  # near in the encoder (0.88), another year
    ("110 mph", "100 mph", True),
    ("male", "female", True),  # the nearest different answers read: 0.73, 0.70, 0.70
    ("Albert Einstein", "Isaac Newton", True),
    ("Saudi Arabia", "Iran", True),
])
def test_a_closed_book_answer_that_restates_a_gold_is_no_fake(res, answer, gold, kept):
    out = unlike_the_golds({"q": answer, "other": None}, {"q": ["a gold never near it", gold], "other": [gold]}, res)
    assert set(out) == ({"q"} if kept else set())
    if kept:
        assert out["q"].text == answer and 0.5 < out["q"].gold_cosine < 1  # the nearest gold's
        assert out["q"].gold_cosine < MAX_GOLD_COSINE or any(c.isdigit() for c in answer)


def test_a_run_of_the_golds_words_is_matched_by_whole_words(res):
    """Written as one, a run must be whole words: "spacecraft" begins like "spacesuit", and "man"
    is inside "woman", yet neither restates the gold."""
    from advrace.attacks.squad.closed_book import _restates

    assert not _restates("spacecraft", "new Apollo spacesuit", 0.0, res)
    assert not _restates("man", "the woman", 0.0, res)
    assert _restates("Apollo space suits", "the new Apollo spacesuit", 0.0, res)


@pytest.mark.slow
def test_smollm2_answers_with_phrases_of_the_asked_kind(res):
    """The real model: a person for "who", a year for "when", a short phrase each."""
    book = ClosedBook()
    got = book.answers(["Who painted the ceiling of the Sistine Chapel?", "When did the Berlin Wall fall?",
                        "What do pandas mainly eat?"])
    who, when, what = (usable(a, q, res.stopwords) for q, a in got.items())
    assert who and who[0].isupper(), got
    assert when and any(c.isdigit() for c in when), got
    assert what and len(what.split()) <= 3, got


def test_no_answer_model_gives_the_rules_alone_and_a_missing_one_says_what_to_do(res):
    from advrace.attacks.squad.preparation import closed_book_fakes
    from advrace.core.errors import AdvraceError

    ex = _example("The old mill closed after the flood.", "the flood", "What closed the old mill?")
    assert closed_book_fakes([ex], AddSentConfig(answer_model=""), res) == {}
    with pytest.raises(AdvraceError, match=r"answer_model .*no checkpoint folder .*or to \"\" for Jia and Liang"):
        closed_book_fakes([ex], AddSentConfig(answer_model="/nonexistent/lm"), res)


@pytest.mark.parametrize("bf16", [pytest.param(False, id="fp32"), pytest.param(True, id="bf16")])
def test_the_answers_are_computed_in_the_precision_asked(tmp_path, bf16):
    """bf16 forced on and off on this CPU: the model's head computes in bf16 only when asked, and
    either way each question gets its answer (fp32's equal the whole prompt's, tested above)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    model = _tiny("llama", len(tok))
    book = ClosedBook("tiny", batch_size=2, max_new_tokens=3, bf16=bf16)
    book._loaded = (model, tok, torch.device("cpu"), bf16)
    book._packed_core()  # its probe runs in fp32 by design (packed_scoring.probe_sharing), before the hook
    seen = []
    model.lm_head.register_forward_hook(lambda m, i, out: seen.append(out.dtype))
    questions = ["Where does Tom live?", "Who is Mrs Green?", "What does Mary practise?"]
    got = book.answers(questions)
    assert set(got) == set(questions) and all(isinstance(a, str) for a in got.values())
    assert set(seen) == {torch.bfloat16 if bf16 else torch.float32}
