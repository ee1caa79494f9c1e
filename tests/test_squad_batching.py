"""The SQuAD answer model's work batched across questions (attacks.squad.closed_book,
attacks.sentences.fluency): the closed-book answers, the PMI and the fluency are the same whatever
the batch size (1, 3, all) and however many sentences share a packed row, and equal the values of
each question or sentence run alone, for every family the packed core claims (a sliding window
shorter than a packed row included)."""

import pytest
import torch

from advrace.attacks.sentences.fluency import Fluency
from advrace.attacks.squad import closed_book as closed_book_module
from advrace.attacks.squad.closed_book import NULL_QUESTION, PMI_PROMPT, ClosedBook
from advrace.models.decoders.fluency import start_token
from conftest import make_tokenizer
from test_closed_book import NEW_TOKENS, QUESTIONS, _reference, _tiny

pytestmark = pytest.mark.usefixtures("one_thread")

FAMILIES = [("llama", "sdpa"), ("llama", "eager"), ("gpt2", "eager"), ("mistral", "sdpa")]
# of different lengths, so that a row padded or packed wrongly moves a score
SENTENCES = ["Tom walks.", "Mary practises the piano after school every day.", "Tom lives in a small village.",
             "Mrs Green is a teacher.", "village a small in lives Tom.", "Where does Tom walk every morning?",
             "The sister walks with Tom every morning after school."]
FAKES = ["village", "piano", "a small village", "Mrs Green", "school every day"]
FLUENCY_BF16_GAP, PMI_BF16_GAP = 0.02, 0.08  # SDPA measured 0.0077 and 0.036: the packed and alone paths add in other orders


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(make_tokenizer(tmp_path_factory.mktemp("tok")))


def _sum_logprob(model, tok, context: str, continuation: str) -> float:
    """log P(continuation | start token + context), the pair run alone as one row."""
    ctx = [start_token(tok)] + tok(context, add_special_tokens=False).input_ids
    whole = tok(context + continuation, add_special_tokens=False).input_ids
    ids = ctx + whole[len(ctx) - 1:]
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
    return float(sum(logprobs[i - 1, ids[i]] for i in range(len(ctx), len(ids))))


def _mean_logprob(model, tok, sentence: str) -> float:
    ids = [start_token(tok)] + tok(sentence, add_special_tokens=False).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
    return float(logprobs[range(len(ids) - 1), ids[1:]].mean())


@pytest.mark.parametrize("family, impl", FAMILIES)
def test_fluency_is_the_same_however_the_sentences_are_packed(tok, family, impl):
    """Each sentence's score, with 1, 3 or all sentences to a packed row and batches of 1, 3 or
    all, is its own row's: a score given back to the wrong sentence, or a segment that sees
    another's tokens, moves it. Mistral's window (12) is shorter than a row of several sentences
    but not than one sentence: the packed row must still be exact."""
    model = _tiny(family, len(tok), impl, window=12)
    alone = [_mean_logprob(model, tok, s) for s in SENTENCES]
    assert len({round(a, 3) for a in alone}) == len(SENTENCES)  # scores that tell the sentences apart
    for batch in (1, 3, len(SENTENCES)):
        for pack in (1, 3, len(SENTENCES)):
            scorer = Fluency("tiny", batch_size=batch, pack=pack)
            scorer._loaded = (model, tok, torch.device("cpu"), False)
            got = scorer.scores(SENTENCES)
            assert got == pytest.approx(alone, abs=1e-4), (family, batch, pack)
            assert scorer._core.unshared.alone == 0  # every sentence in the packed rows


def _pairs() -> list[tuple[str, str]]:
    """Questions of different lengths, each with fakes of different lengths, one fake shared."""
    return [(q, f) for i, q in enumerate(QUESTIONS) for f in FAKES[i:i + 2 + i % 2]]


@pytest.mark.parametrize("family, impl", FAMILIES)
def test_the_pmi_is_the_same_whatever_the_batch_size(tok, family, impl, monkeypatch):
    """Question rows and content-free rows (two fakes a row here, so that there are several) in
    batches of 1, 3 or all give each pair the PMI of its two pairs run alone: a value given to
    the wrong fake or row, or a row padded into another's, moves it."""
    monkeypatch.setattr(closed_book_module, "_NULL_GROUP", 2)
    model = _tiny(family, len(tok), impl, window=40)
    pairs = _pairs()
    want = [_sum_logprob(model, tok, PMI_PROMPT.format(question=q), f" {f}")
            - _sum_logprob(model, tok, PMI_PROMPT.format(question=NULL_QUESTION), f" {f}") for q, f in pairs]
    assert len({round(w, 3) for w in want}) > len(pairs) // 2  # values that depend on the pair
    for batch in (1, 3, len(pairs)):
        book = ClosedBook("tiny", batch_size=batch)
        book._loaded = (model, tok, torch.device("cpu"), False)
        assert book.pmi(pairs) == pytest.approx(want, abs=1e-4), (family, batch)


@pytest.mark.parametrize("family, impl", FAMILIES)
def test_the_closed_book_answers_are_the_same_whatever_the_batch_size(tmp_path, family, impl):
    """Questions of different lengths, decoded in batches of 1, 3 or all over the shared shots,
    each get the answer of its whole prompt run alone: left padding, or a row that sees another's
    tokens, changes a greedy answer."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    model = _tiny(family, len(tok), impl, window=512)
    want = {q: _reference(model, tok, q) for q in QUESTIONS}
    assert len(set(want.values())) > 1
    for batch in (1, 3, len(QUESTIONS)):
        book = ClosedBook("tiny", batch_size=batch, max_new_tokens=NEW_TOKENS)
        book._loaded = (model, tok, torch.device("cpu"), False)
        assert book.answers(QUESTIONS) == want, (family, batch)
        unshared = book._core.unshared.record()
        assert (unshared["shared"], unshared["run_alone"]) == (len(QUESTIONS), 0), unshared  # batched, not alone


def _gap(a, b) -> float:
    return max(abs(x - y) for x, y in zip(a, b))


@pytest.mark.parametrize("family, impl", FAMILIES)
def test_with_bf16_on_packed_fluency_and_batched_pmi_are_each_alone_in_bf16(tok, family, impl, monkeypatch):
    """bf16 on (autocast, as `answer_bf16: true` runs them) as well as off: the packed fluency
    rows and the batched PMI rows give what each sentence or pair gives alone in bf16, within
    bf16's own rounding (the two paths add in other orders), and bf16 did take effect."""
    monkeypatch.setattr(closed_book_module, "_NULL_GROUP", 2)
    model = _tiny(family, len(tok), impl, window=40)
    pairs = _pairs()
    fp32 = [_mean_logprob(model, tok, s) for s in SENTENCES]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        alone = [_mean_logprob(model, tok, s) for s in SENTENCES]
        want = [_sum_logprob(model, tok, PMI_PROMPT.format(question=q), f" {f}")
                - _sum_logprob(model, tok, PMI_PROMPT.format(question=NULL_QUESTION), f" {f}") for q, f in pairs]
    assert _gap(alone, fp32) > 1e-4  # bf16 was on
    scorer = Fluency("tiny", bf16=True, batch_size=3, pack=3)
    scorer._loaded = (model, tok, torch.device("cpu"), True)
    assert _gap(scorer.scores(SENTENCES), alone) < FLUENCY_BF16_GAP, family
    book = ClosedBook("tiny", batch_size=3, bf16=True)
    book._loaded = (model, tok, torch.device("cpu"), True)
    assert _gap(book.pmi(pairs), want) < PMI_BF16_GAP, family
