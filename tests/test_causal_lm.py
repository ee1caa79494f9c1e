"""The `causal_lm` objective (a decoder-only LM fine-tuned on RACE's distractors) and the DG
attack reading its checkpoints: tiny random Llamas, a few steps each."""

import json
import math
from pathlib import Path

import pytest
import torch

from advrace.attacks import get_attack
from advrace.core.errors import ConfigError
from advrace.models.decoders.distractor_inputs import IGNORE, collate_causal, prompt_ids, training_features
from advrace.models.decoders.tree_beam_decoder import ReorderingDecoder
from advrace.models.runtime.kv_cache import returned_cache
from conftest import tiny

pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def setup(tiny_llama, tmp_path_factory):
    """The shared tiny Llama and RACE folder; `root`, this module's own folder for its runs."""
    return {**tiny_llama, "root": tmp_path_factory.mktemp("causal")}


def _config(setup, out: Path, **extra) -> dict:
    section = {"max_passage_tokens": 24, "max_distractor_tokens": 6, **extra.pop("causal_lm", {})}
    extra = {"epochs": 1, "save_every_steps": None, **extra}
    return tiny(setup["tok"].name_or_path, setup["race"], out, objective="causal_lm", model=setup["lm"],
                model_config=None, tokenizer=None, causal_lm=section, **extra)


@pytest.fixture(scope="module")
def trained(setup):
    from advrace.training import train

    # the embeddings too: a tiny random model learns little through two frozen-embedding layers
    return train(_config(setup, setup["root"] / "run", lr=1e-2, epochs=4,
                         causal_lm={"train_embeddings": True}), progress=False)


def test_labels_cover_the_distractor_only(setup):
    tok, examples = setup["tok"], setup["examples"][:3]
    features = training_features(tok, examples, max_passage_tokens=10, max_distractor_tokens=6)
    assert len(features) == 9  # three distractors per question
    prompts = prompt_ids(tok, examples, 10)
    assert [f.prompt for f in features[:3]] == [tuple(prompts[0])] * 3
    assert all(f.target[-1] == tok.sep_token_id for f in features)  # the test tokenizer's EOS
    ex = examples[0]
    assert tok.decode(features[0].target[:-1]) in [d.lower() for d in ex.distractors]
    batch = collate_causal(features[:4], tok.pad_token_id)
    ids, labels, keep = batch["input_ids"], batch["labels"], batch["logits_to_keep"]
    assert labels.shape == (4, keep) and keep == max(len(f.target) for f in features[:4]) + 1
    for row, f in enumerate(features[:4]):
        scored = labels[row] != IGNORE
        assert scored.sum() == len(f.target)  # no prompt or padding token is scored
        assert labels[row][scored].tolist() == list(f.target) == ids[row, -len(f.target):].tolist()
        pads = ids.shape[1] - f.length
        assert batch["attention_mask"][row].tolist() == [0] * pads + [1] * f.length
        assert batch["position_ids"][row, pads:].tolist() == list(range(f.length))


def test_one_distractor_per_question_is_drawn_by_seed(setup):
    tok, examples = setup["tok"], setup["examples"]
    one = training_features(tok, examples, 10, 6, per_question=1, seed=1)
    assert len(one) == len(examples)
    assert one == training_features(tok, examples, 10, 6, per_question=1, seed=1)
    drawn = lambda seed: [f.target for f in training_features(tok, examples, 10, 6, 1, seed)]  # noqa: E731
    assert len({tuple(drawn(s)) for s in range(6)}) > 1


def test_logits_only_where_the_distractor_is(setup):
    """The loss of the loop's batch equals a full forward's loss on the distractor tokens."""
    from transformers import AutoModelForCausalLM

    tok = setup["tok"]
    model = AutoModelForCausalLM.from_pretrained(setup["lm"]).eval()
    features = training_features(tok, setup["examples"][:2], 12, 6)[:3]
    batch = collate_causal(features, tok.pad_token_id)
    with torch.no_grad():
        out = model(**batch)
        assert out.logits.shape[1] == batch["logits_to_keep"]
        losses = []
        for f in features:
            ids = torch.tensor([f.prompt + f.target])
            logits = model(input_ids=ids).logits[0, len(f.prompt) - 1:-1]
            losses.append(torch.nn.functional.cross_entropy(logits, torch.tensor(f.target), reduction="sum"))
    n = sum(len(f.target) for f in features)
    assert out.loss.item() == pytest.approx((sum(losses) / n).item(), rel=1e-4)


def test_trainable_layers_freezes_the_rest(setup):
    from advrace.training.objectives.causal_lm import TopLayersCausalLM
    from advrace.training.objectives.causal_lm import CausalLMSettings as S

    model = TopLayersCausalLM(S(trainable_layers=1)).from_pretrained(setup["lm"])
    trainable = {n for n, p in model.named_parameters() if p.requires_grad}
    assert trainable and all(n.startswith(("model.layers.1.", "model.norm.")) for n in trainable)
    assert "model.norm.weight" in trainable and not any(n.startswith("model.layers.0.") for n in trainable)
    every = TopLayersCausalLM(S(trainable_layers=0)).from_pretrained(setup["lm"])
    trainable = {n for n, p in every.named_parameters() if p.requires_grad}
    assert any(n.startswith("model.layers.0.") for n in trainable)
    assert not trainable & {"model.embed_tokens.weight", "lm_head.weight"}
    embed = TopLayersCausalLM(S(trainable_layers=1, train_embeddings=True)).from_pretrained(setup["lm"])
    trainable = {n for n, p in embed.named_parameters() if p.requires_grad}
    assert {"model.embed_tokens.weight", "lm_head.weight"} <= trainable
    assert not any(n.startswith("model.layers.0.") for n in trainable)


def test_training_changes_only_the_top_layers(setup, tmp_path):
    from safetensors.torch import load_file

    from advrace.training import train

    result = train(_config(setup, tmp_path, max_steps=2, causal_lm={"trainable_layers": 1}), progress=False)
    before = load_file(str(Path(setup["lm"]) / "model.safetensors"))
    after = load_file(str(Path(result["final"]) / "model.safetensors"))
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert changed and all(k.startswith(("model.layers.1.", "model.norm.")) for k in changed)


def test_objective_learns_and_saves_a_loadable_checkpoint(setup, trained):
    from transformers import AutoModelForCausalLM

    log = [json.loads(line) for line in Path(trained["log"]).read_text().splitlines()]
    losses = [r["loss"] for r in log if r["event"] == "train"]
    assert len(losses) >= 4 and losses[-1] < losses[0]
    evals = [r for r in log if r["event"] == "eval"]
    assert evals[-1]["dev_token_accuracy"] > evals[0]["dev_token_accuracy"]
    assert evals[-1]["dev_loss"] < evals[0]["dev_loss"] and math.isfinite(evals[-1]["dev_loss"])
    final = Path(trained["final"])
    info = json.loads((final / "training_info.json").read_text())
    assert info["objective"] == "causal_lm" and info["architecture"] == "AutoModelForCausalLM"
    assert info["config"]["causal_lm"]["max_passage_tokens"] == 24
    model = AutoModelForCausalLM.from_pretrained(final)
    assert type(model).__name__ == "LlamaForCausalLM"


def test_dg_reads_its_backend_from_the_checkpoint(setup, trained):
    examples = setup["examples"][:4]
    attack = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 4,
                                                  "max_target_tokens": 5})
    cfg = attack.config
    assert cfg.backend == "causal_lm" and cfg.max_passage_tokens == 24  # the training run's
    cands = attack.candidates(examples)
    assert len(cands) == 4 and all(1 <= len(c) <= 4 and all(isinstance(t, str) and t for t in c) for c in cands)
    # trained on these very questions, the generator's first candidates are RACE's distractors
    hits = sum(bool({c.lower() for c in cs} & {d.lower() for d in ex.distractors})
               for cs, ex in zip(cands, examples))
    assert hits >= 2
    again = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 4,
                                                 "max_target_tokens": 5})
    assert again.candidates(examples) == cands  # deterministic
    outcomes = attack.apply_batch(examples)
    assert [o.example.answer for o in outcomes] == [ex.answer for ex in examples]
    assert attack.describe()["config"]["backend"] == "causal_lm"
    assert attack.describe()["config"]["beam_size"] == 4


def test_dg_backend_defaults(setup, trained, tmp_path):
    make = lambda **c: get_attack("distractor_generation")(c)  # noqa: E731
    assert make(model=setup["lm"]).config.backend == "causal_lm"  # a causal LM folder, nothing recorded
    assert make(model=setup["lm"]).config.beam_size == 20
    assert make(model=setup["lm"]).config.max_passage_tokens == 400
    assert make(model="smollm2").config.backend == "causal_lm"
    assert make(model="HuggingFaceTB/SmolLM2-360M-Instruct").config.backend == "causal_lm"
    assert make(model=str(tmp_path / "runs" / "dg" / "final")).config.backend == "unilm"
    assert make(model=trained["final"], max_passage_tokens=8).config.max_passage_tokens == 8
    with pytest.raises(ConfigError, match="backend 'causal_lm'"):
        make(model=trained["final"], backend="unilm")
    with pytest.raises(ConfigError, match="objective 'causal_lm'"):
        get_attack("distractor_extraction")({"model": trained["final"]})


@pytest.mark.parametrize("bf16", [pytest.param(False, id="fp32"), pytest.param(True, id="bf16")])
def test_bf16_on_and_off(setup, trained, bf16):
    from advrace.training import train

    result = train(_config(setup, setup["root"] / f"mp-{bf16}", max_steps=2,
                           mixed_precision="bf16" if bf16 else "no"), progress=False)
    metrics = result["metrics"]
    assert metrics["step"] == 2 and math.isfinite(metrics["train_loss"]) and math.isfinite(metrics["dev_loss"])
    examples = setup["examples"][:2]
    attack = get_attack("distractor_generation")({"model": trained["final"], "beam_size": 3,
                                                  "max_target_tokens": 4, "bf16": bf16})
    cands = attack.candidates(examples)
    assert attack._bf16 is bf16 and attack.describe()["inference"]["precision"] == ("bf16" if bf16 else "fp32")
    assert all(1 <= len(c) <= 3 for c in cands)


# ---------------------------------------------------------------- decoding: tree attention


class ReferenceDecoder(ReorderingDecoder):
    """The decoder CausalDecoder replaced: the library's ReorderingDecoder, whose prompt's keys
    and values are copied to every beam and reordered at every step, but run on the whole padded
    batch at once (as the attack hands it), not one unpadded question at a time."""

    def start(self, source_ids, source_lengths):
        with torch.inference_mode():
            out = self.model(input_ids=source_ids, use_cache=True, logits_to_keep=1)
        state = {"cache": returned_cache(out), "beams": 1, "length": source_ids.shape[1]}
        return state, torch.log_softmax(out.logits[:, -1].float(), dim=-1)


def _prompts(vocab: int, lengths=(9, 23, 4, 16)) -> list[list[int]]:
    g = torch.Generator().manual_seed(1)
    return [torch.randint(5, vocab, (n,), generator=g).tolist() for n in lengths]


def _search(decoder, prompts: list[list[int]], **kw) -> list:
    from advrace.models.decoders.beam_search import beam_search

    ids = torch.zeros((len(prompts), max(map(len, prompts))), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, :len(p)] = torch.tensor(p)
    return beam_search(decoder, ids, torch.tensor([len(p) for p in prompts]), **kw)


def _same(got: list, want: list) -> None:
    assert [h.tokens for h in got] == [h.tokens for h in want]
    assert [h.finished for h in got] == [h.finished for h in want]
    for g, w in zip(got, want):
        assert g.score == pytest.approx(w.score, abs=1e-5) and g.logprob == pytest.approx(w.logprob, abs=1e-5)


@pytest.fixture(scope="module")
def lm(setup):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(setup["lm"]).eval()


@pytest.mark.parametrize("beam,length", [(1, 5), (3, 1), (3, 7), (6, 4)])
def test_tree_decoder_equals_the_reference(lm, beam, length):
    """Alone or several questions together, each question's hypotheses are the reference's."""
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    prompts = _prompts(lm.config.vocab_size)
    kw = {"beam_size": beam, "max_length": length, "eos_id": 3, "banned": (0,)}
    want = [_search(ReferenceDecoder(lm), [p], **kw)[0] for p in prompts]
    decoder = CausalDecoder(lm)
    assert decoder.batched
    for p, w in zip(prompts, want):
        _same(_search(decoder, [p], **kw)[0], w)
    for got, w in zip(_search(decoder, prompts, **kw), want):
        _same(got, w)


def test_tree_decoder_with_eager_attention(setup):
    """An attention implementation that adds its mask (eager) gets an additive float mask."""
    from transformers import AutoModelForCausalLM

    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    model = AutoModelForCausalLM.from_pretrained(setup["lm"], attn_implementation="eager").eval()
    prompts = _prompts(model.config.vocab_size, (7, 12))
    kw = {"beam_size": 4, "max_length": 5, "eos_id": 3}
    want = [_search(ReferenceDecoder(model), [p], **kw)[0] for p in prompts]
    for got, w in zip(_search(CausalDecoder(model), prompts, **kw), want):
        _same(got, w)


def test_sliding_window_models_fall_back_to_reordering(tmp_path):
    """A cache that drops old keys cannot hold a shared prompt: one question at a time, reordered."""
    from transformers import MistralConfig, MistralForCausalLM

    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    torch.manual_seed(0)
    cfg = MistralConfig(vocab_size=64, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                        num_attention_heads=4, num_key_value_heads=2, sliding_window=8)
    model = MistralForCausalLM(cfg).eval()
    decoder = CausalDecoder(model)
    assert not decoder.batched
    prompt = _prompts(64, (12,))
    kw = {"beam_size": 3, "max_length": 4, "eos_id": 3}
    _same(_search(decoder, prompt, **kw)[0], _search(ReferenceDecoder(model), prompt, **kw)[0])


def test_the_prompt_is_cached_once_for_all_beams(lm):
    """The cache is one row: the prompts once, then `beams` tokens a question a step; a finished
    question is left out of a step (`active`) and the other's scores do not move."""
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    prompts, beams, vocab = _prompts(lm.config.vocab_size, (9, 14)), 4, lm.config.vocab_size
    g = torch.Generator().manual_seed(0)
    # four steps' tokens and origins (the first step's beams all come from the one start beam)
    moves = [(torch.randint(5, vocab, (2, beams), generator=g),
              torch.randint(0, 1 if k == 0 else beams, (2, beams), generator=g)) for k in range(4)]

    def run(active=None):
        decoder = CausalDecoder(lm)
        ids = torch.zeros((2, 14), dtype=torch.long)
        for r, p in enumerate(prompts):
            ids[r, :len(p)] = torch.tensor(p)
        state, _ = decoder.start(ids, torch.tensor([9, 14]))
        expected = 9 + 14
        for k, (tokens, origin) in enumerate(moves):
            last = k == len(moves) - 1
            state, logp = decoder.step(state, tokens, origin, active=active if last else None)
            expected += beams * (sum(active) if last and active else 2)
            cache = state["cache"]
            assert cache.get_seq_length() == expected and cache.layers[0].keys.shape[0] == 1
            assert logp.shape == (2, beams, vocab)
        return logp

    both, one = run(), run(active=[False, True])
    assert torch.allclose(one[1], both[1], atol=1e-5)


def test_prompts_sharing_a_prefix_share_its_cache(lm):
    """Questions on one passage: a prompt that begins like an earlier one runs only the rest
    (at least its last token), and each still gets the reference's hypotheses."""
    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    base, other = _prompts(lm.config.vocab_size, (20, 9))
    prompts = [base, base[:12] + [7, 8, 9, 10, 11, 12], base, base[:5], other]
    kw = {"beam_size": 3, "max_length": 6, "eos_id": 3}
    want = [_search(ReferenceDecoder(lm), [p], **kw)[0] for p in prompts]
    for got, w in zip(_search(CausalDecoder(lm), prompts, **kw), want):
        _same(got, w)
    ids = torch.zeros((len(prompts), 20), dtype=torch.long)
    for r, p in enumerate(prompts):
        ids[r, :len(p)] = torch.tensor(p)
    state, _ = CausalDecoder(lm).start(ids, torch.tensor([len(p) for p in prompts]))
    assert state["cache"].get_seq_length() == 20 + 6 + 1 + 1 + 9
    assert state["lengths"].tolist() == [len(p) for p in prompts]
    assert state["visible"].sum(1).tolist() == [len(p) for p in prompts]


@pytest.mark.parametrize("bf16", [pytest.param(False, id="fp32"), pytest.param(True, id="bf16")])
def test_tree_decoder_under_autocast_without_deprecation_warnings(lm, bf16):
    import warnings

    from advrace.models.decoders.tree_beam_decoder import CausalDecoder

    prompts = _prompts(lm.config.vocab_size)
    with warnings.catch_warnings():
        warnings.simplefilter("error", FutureWarning)
        warnings.simplefilter("error", DeprecationWarning)
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
            found = _search(CausalDecoder(lm), prompts, beam_size=3, max_length=4, eos_id=3)
    assert len(found) == len(prompts)
    assert all(1 <= len(hs) <= 3 and all(math.isfinite(h.score) and h.tokens for h in hs) for hs in found)


def test_dg_candidates_do_not_depend_on_the_batch(setup, trained, monkeypatch):
    """The attack decodes `batch_size` questions together (a finished one leaves the steps); one
    at a time, and the reference decoder, give the same lists."""
    import advrace.attacks.distractors.generation as dg

    examples = setup["examples"][:5]
    make = lambda n: get_attack("distractor_generation")({  # noqa: E731
        "model": trained["final"], "beam_size": 3, "max_target_tokens": 12, "batch_size": n})
    seen, step = [], dg.CausalDecoder.step

    def recording(self, state, tokens, origin, active=None):
        seen.append(active)
        return step(self, state, tokens, origin, active)

    monkeypatch.setattr(dg.CausalDecoder, "step", recording)
    together = make(3).candidates(examples)
    assert any(a and not all(a) for a in seen)  # some question finished before the others
    assert make(1).candidates(examples) == together
    monkeypatch.setattr(dg, "CausalDecoder", ReferenceDecoder)
    assert make(3).candidates(examples) == together


def test_dg_fits_torch_threads_to_the_load_batch_by_batch(setup, trained, monkeypatch):
    """Each batch decodes with torch's threads fitted to the load measured before it (beside a
    process busy on one of 2 cores, 1 thread, not 2); the count is restored after, and the
    candidates are those of a fixed count."""
    import advrace.models.decoders.beam_search as bs
    from advrace.models.runtime import precision

    examples = setup["examples"][:5]
    make = lambda: get_attack("distractor_generation")({  # noqa: E731
        "model": trained["final"], "beam_size": 3, "max_target_tokens": 12, "batch_size": 2})
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(precision, "usable_cores", lambda: 2)
    loads = iter([0.0, 1.0, 0.0])  # before each of the 3 batches
    monkeypatch.setattr(precision, "busy_elsewhere", lambda *a, **k: next(loads))
    seen, search = [], bs.beam_search

    def recording(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return search(*args, **kwargs)

    monkeypatch.setattr(bs, "beam_search", recording)
    torch.set_num_threads(2)  # the one_thread fixture restores torch's count
    fitted = make().candidates(examples)
    assert seen == [2, 1, 2] and torch.get_num_threads() == 2
    monkeypatch.setenv("OMP_NUM_THREADS", "1")  # the user's count, kept
    torch.set_num_threads(1)
    assert make().candidates(examples) == fitted and seen[3:] == [1, 1, 1]
