"""Fluency (models.decoders.fluency, attacks.fluency): a sentence's mean token log-probability,
each token predicted from the ones before it and the first from the start token, computed over a
shared start-token cache exactly as one row per sentence computes it, for every model family."""

import pytest
import torch

from advrace.attacks.sentences.fluency import Fluency
from advrace.models.decoders.fluency import mean_logprobs, start_token
from conftest import make_tokenizer
from test_closed_book import _tiny

pytestmark = pytest.mark.usefixtures("one_thread")

GROUPS = [["Tom lives in a small village.", "village a small in lives Tom."], [],
          ["Mary practises the piano after school every day.", "Tom walks."]]


@pytest.fixture(scope="module")
def tok(tmp_path_factory):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(make_tokenizer(tmp_path_factory.mktemp("tok")))


def _one_row(model, tok, sentence: str) -> float:
    ids = [start_token(tok)] + tok(sentence, add_special_tokens=False).input_ids
    with torch.no_grad():
        logprobs = torch.log_softmax(model(torch.tensor([ids])).logits[0, :-1].float(), -1)
    return float(logprobs[range(len(ids) - 1), ids[1:]].mean())


@pytest.mark.parametrize("family, impl", [("llama", "sdpa"), ("llama", "eager"), ("qwen2", "sdpa"),
                                          ("mistral", "sdpa"), ("gemma2", "eager"), ("phi3", "sdpa"),
                                          ("gpt2", "eager")])
def test_each_sentence_scores_as_its_own_row(tok, family, impl):
    """A wrong mask, position or token offset in the shared cache moves a score off its row's; a
    sum in place of the mean ranks the short sentence first."""
    model = _tiny(family, len(tok), impl, window=12)  # a window shorter than the longest sentence
    with torch.no_grad():
        got = mean_logprobs(model, tok, GROUPS)
    assert [len(g) for g in got] == [2, 0, 2]
    for group, scores in zip(GROUPS, got):
        for sentence, score in zip(group, scores):
            assert score == pytest.approx(_one_row(model, tok, sentence), abs=1e-4), (family, sentence)
    assert len({round(s, 4) for g in got for s in g}) == 4  # scores that depend on the sentence


def test_the_start_token_is_bos_then_eos_then_cls(tok):
    assert start_token(tok) == tok.cls_token_id  # the test tokenizer has no BOS nor EOS

    class Gpt2Like:
        bos_token_id, eos_token_id = None, 7
    assert start_token(Gpt2Like()) == 7

    class NoStart:
        bos_token_id = eos_token_id = cls_token_id = None
    with pytest.raises(ValueError, match="no BOS, EOS or CLS"):
        start_token(NoStart())


def test_the_scorer_caches_and_keeps_the_most_fluent(tok):
    """Scores do not depend on the company a sentence is asked in; the most fluent is the highest
    score, the first on a tie, and a sentence asked twice is scored once."""
    model = _tiny("llama", len(tok))
    scorer = Fluency("tiny", batch_size=2)
    scorer._loaded = (model, tok, torch.device("cpu"), False)
    sentences = GROUPS[0] + GROUPS[2]
    alone = [_one_row(model, tok, s) for s in sentences]
    got = scorer.scores(sentences + sentences[:1])
    assert got[:4] == pytest.approx(alone, abs=1e-4) and got[4] == got[0]
    best = max(range(4), key=lambda i: alone[i])
    assert scorer.most_fluent(sentences) == best
    assert scorer.most_fluent([sentences[best], sentences[best]]) == 0
    assert len(scorer._scores) == 4


@pytest.mark.parametrize("bf16", [False, True])
def test_the_scorer_under_bf16_and_fp32(tok, bf16):
    """bf16 on (autocast, as `answer_bf16: true` asks) and off: scores within bf16's rounding of
    the fp32 rows, and the same choice between two sentences far apart."""
    model = _tiny("llama", len(tok))
    scorer = Fluency("tiny", bf16=bf16)
    scorer._loaded = (model, tok, torch.device("cpu"), bf16)
    sentences = GROUPS[0] + GROUPS[2]
    reference = [_one_row(model, tok, s) for s in sentences]
    got = scorer.scores(sentences)
    assert got == pytest.approx(reference, abs=0.1 if bf16 else 1e-4)
    assert (got != pytest.approx(reference, abs=1e-6)) == bf16  # bf16 ran in bf16, fp32 in fp32
    far = max(range(4), key=lambda i: reference[i]), min(range(4), key=lambda i: reference[i])
    if reference[far[0]] - reference[far[1]] > 0.2:
        assert scorer.most_fluent([sentences[far[1]], sentences[far[0]]]) == 1
