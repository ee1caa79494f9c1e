import pytest
import torch

from advrace.models.decoders.beam_search import beam_search, greedy_search
from advrace.models.generators.unilm import FullDecoder, Seq2SeqDecoder, UniLMSeq2Seq, next_token_labels, seq2seq_mask

EOS, BANNED = 3, (0, 1, 2, 4)


@pytest.fixture(scope="module")
def model():
    from transformers import BertConfig

    torch.manual_seed(0)
    cfg = BertConfig(vocab_size=40, hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=64)
    return UniLMSeq2Seq(cfg).eval()


def test_seq2seq_mask_element_by_element():
    # source: positions 0-2, target: 3-4, padding: 5
    got = seq2seq_mask(torch.tensor([3]), torch.tensor([5]), 6)[0].int().tolist()
    assert got == [
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 0, 0, 0],
        [1, 1, 1, 1, 0, 0],
        [1, 1, 1, 1, 1, 0],
        [0, 0, 0, 0, 0, 0],
    ]
    # a batch keeps each row's own lengths
    batch = seq2seq_mask(torch.tensor([1, 2]), torch.tensor([3, 2]), 3).int()
    assert batch[0].tolist() == [[1, 0, 0], [1, 1, 0], [1, 1, 1]]
    assert batch[1].tolist() == [[1, 1, 0], [1, 1, 0], [0, 0, 0]]


def test_next_token_labels_cover_the_target_only():
    ids = torch.tensor([[2, 10, 11, 3, 20, 21, 3, 0]])
    labels = next_token_labels(ids, torch.tensor([4]), torch.tensor([7]))
    # position 3 (the source's [SEP]) predicts the first target token; the last [SEP] is predicted
    assert labels.tolist() == [[-100, -100, -100, 20, 21, 3, -100, -100]]


def test_source_only_forward_is_plain_bert(model):
    ids = torch.randint(5, 40, (2, 7))
    full = torch.tensor([7, 7])
    ours = model(input_ids=ids, source_lengths=full, lengths=full).logits
    ref = model.cls(model.bert(input_ids=ids, token_type_ids=torch.zeros_like(ids)).last_hidden_state)
    assert torch.allclose(ours, ref, atol=1e-5)


def test_target_tokens_cannot_see_the_future(model):
    ids = torch.tensor([[2, 7, 8, 3, 9, 10, 11]])
    other = ids.clone()
    other[0, 6] = 12  # change the last target token only
    src, n = torch.tensor([4]), torch.tensor([7])
    a = model(input_ids=ids, source_lengths=src, lengths=n).logits
    b = model(input_ids=other, source_lengths=src, lengths=n).logits
    assert torch.allclose(a[0, :6], b[0, :6], atol=1e-6)
    assert not torch.allclose(a[0, 6], b[0, 6])


def _sources():
    return torch.tensor([[2, 7, 8, 9, 3], [2, 11, 12, 3, 0]]), torch.tensor([5, 4])


def test_beam_search_returns_k_ranked_candidates(model):
    src, lengths = _sources()
    results = beam_search(Seq2SeqDecoder(model), src, lengths, beam_size=5, max_length=6, eos_id=EOS,
                          banned=BANNED)
    for hyps in results:
        assert len(hyps) == 5
        assert len({h.tokens for h in hyps}) == 5
        scores = [h.score for h in hyps]
        assert scores == sorted(scores, reverse=True)
        assert all(not set(h.tokens) & set(BANNED) for h in hyps)
        assert all(EOS not in h.tokens and 0 < len(h.tokens) <= 6 for h in hyps)


def test_cached_decoding_matches_full_re_encoding(model):
    src, lengths = _sources()
    for k in (1, 3, 8):
        cached = beam_search(Seq2SeqDecoder(model), src, lengths, beam_size=k, max_length=5,
                             eos_id=EOS, banned=BANNED, length_penalty=0.7)
        full = beam_search(FullDecoder(model), src, lengths, beam_size=k, max_length=5,
                           eos_id=EOS, banned=BANNED, length_penalty=0.7)
        assert [[h.tokens for h in r] for r in cached] == [[h.tokens for h in r] for r in full]
        for a, b in zip(cached, full):
            assert [h.score for h in a] == pytest.approx([h.score for h in b], abs=1e-4)


def test_beam_one_is_greedy(model):
    src, lengths = _sources()
    beams = beam_search(Seq2SeqDecoder(model), src, lengths, beam_size=1, max_length=6, eos_id=EOS,
                        banned=BANNED)
    for row, n, hyps in zip(src.tolist(), lengths.tolist(), beams):
        assert hyps[0].tokens == greedy_search(model, row[:n], max_length=6, eos_id=EOS, banned=BANNED)


def test_beam_search_finishes_on_the_end_token():
    class Scripted:
        """Token 5 then the end token are near-certain; a decoder with no model at all."""

        def start(self, ids, lengths):
            return {"t": 0}, self._logp(ids.shape[0], 1)[:, 0]

        def step(self, state, tokens, origin):
            state = {"t": state["t"] + 1}
            return state, self._logp(tokens.shape[0], tokens.shape[1], end=True)

        def _logp(self, b, beams, end=False):
            logits = torch.full((b, beams, 8), -5.0)
            logits[..., 3 if end else 5] = 5.0
            return torch.log_softmax(logits, -1)

    hyps = beam_search(Scripted(), torch.zeros((1, 2), dtype=torch.long), torch.tensor([2]),
                       beam_size=2, max_length=10, eos_id=3)[0]
    assert hyps[0].tokens == (5,) and hyps[0].finished
    assert len(hyps) == 2


def test_unilm_saves_and_loads(model, tmp_path):
    model.save_pretrained(tmp_path / "m")
    again = UniLMSeq2Seq.from_pretrained(tmp_path / "m").eval()
    ids = torch.tensor([[2, 7, 8, 3, 9]])
    kw = dict(input_ids=ids, source_lengths=torch.tensor([4]), lengths=torch.tensor([5]))
    assert torch.allclose(model(**kw).logits, again(**kw).logits, atol=1e-6)
    assert again.cls.predictions.decoder.weight.data_ptr() == again.bert.embeddings.word_embeddings.weight.data_ptr()
