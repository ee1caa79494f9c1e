"""Every model path with a bf16 branch, run with bf16 autocast forced on and off on the CPU.

A CPU without native bf16 never chooses bf16 by itself, so without these tests the bf16 code of
evaluation, the span scorer, distractor extraction and generation (UniLM's cached decoder and
the causal-LM backend), the model-dependent SQuAD adversaries and mixed-precision training would
only ever run on the machines that have it. The models are tiny and random: what is checked is
that each path runs, gives finite and well-formed outputs, that bf16 really computes in bf16
(its numbers differ from fp32's, by little), and that with bf16 off the numbers are fp32's.
"""

import math
from pathlib import Path

import pytest
import torch

from advrace.attacks import get_attack
from conftest import tiny

PRECISIONS = [pytest.param(False, id="fp32"), pytest.param(True, id="bf16")]


def here(bf16: bool) -> dict:
    """The record of a model run on this machine's CPU; bf16 without native support says so."""
    from advrace.models.runtime.precision import cpu_has_native_bf16

    emulated = {"bf16_emulated": True} if bf16 and not cpu_has_native_bf16() else {}
    return {"precision": "bf16" if bf16 else "fp32", "device_type": "cpu", "torch": torch.__version__,
            **emulated}


pytestmark = pytest.mark.usefixtures("one_thread")


def _bert(cls, tokenizer, out: Path, **extra) -> str:
    """A random 2-layer BERT of class `cls` saved with the test tokenizer."""
    from transformers import BertConfig

    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(tokenizer), hidden_size=32, num_hidden_layers=2,
                        num_attention_heads=4, intermediate_size=64, max_position_embeddings=256,
                        initializer_range=0.2, **extra)
    cls(config).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


@pytest.fixture(scope="module")
def setup(tiny_llama, tmp_path_factory):
    """The shared tiny Llama and questions, and random BERTs of the test tokenizer, one per head."""
    from transformers import BertForMultipleChoice, BertForQuestionAnswering

    from advrace.models.generators.unilm import UniLMSeq2Seq

    root, tok = tmp_path_factory.mktemp("precision"), tiny_llama["tok"]
    return {"examples": tiny_llama["examples"], "squad": tiny_llama["squad_examples"],
            "mc": _bert(BertForMultipleChoice, tok, root / "mc"),
            "qa": _bert(BertForQuestionAnswering, tok, root / "qa"),
            "unilm": _bert(UniLMSeq2Seq, tok, root / "unilm"), "lm": tiny_llama["lm"]}


def _finite(values) -> bool:
    return all(math.isfinite(v) for v in values)


# --------------------------------------------------------------------------- evaluation


def _plain_mc_scores(path: str, examples) -> list[list[float]]:
    """One fp32 forward pass per question, no autocast and no batching."""
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    from advrace.models.encoders.mc_encoding import question_with_option

    tok = AutoTokenizer.from_pretrained(path)
    model = AutoModelForMultipleChoice.from_pretrained(path).eval()
    out = []
    with torch.no_grad():
        for ex in examples:
            enc = tok([ex.passage] * len(ex.options), [question_with_option(ex.question, o) for o in ex.options],
                      truncation=True, max_length=256, padding=True, return_tensors="pt")
            out.append(model(**{k: v.unsqueeze(0) for k, v in enc.items()}).logits[0].tolist())
    return out


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_checkpoint_scorer(setup, bf16):
    from advrace.models.encoders.mc_scoring import load_checkpoint

    examples = setup["examples"]
    scorer = load_checkpoint(setup["mc"], bf16=bf16, batch_size=3, max_length=256)
    assert scorer.bf16 is bf16 and scorer.inference == here(bf16)
    scores = scorer.predict_mc(examples)
    assert [len(s) for s in scores] == [len(ex.options) for ex in examples]
    assert all(_finite(s) for s in scores)
    plain = _plain_mc_scores(setup["mc"], examples)
    flat, want = [x for s in scores for x in s], [x for s in plain for x in s]
    if bf16:
        assert flat == pytest.approx(want, abs=0.03) and flat != pytest.approx(want, abs=1e-6)
    else:
        assert flat == pytest.approx(want, abs=1e-4)


# --------------------------------------------------------------------------- span scorer


def _plain_n_best(scorer, questions, contexts, n_best):
    """The n-best lists from one fp32 forward pass per window, no autocast and no batching."""
    from advrace.models.encoders.span_decoding import best_spans, merge_windows
    from advrace.models.encoders.span_encoding import collate_windows, encode_windows

    windows = encode_windows(scorer.tokenizer, questions, contexts, max_length=scorer.max_length,
                             stride=scorer.doc_stride)
    per_context = [[] for _ in questions]
    with torch.no_grad():
        for w in windows:
            out = scorer.model(**collate_windows([w], scorer.tokenizer.pad_token_id, labels=False))
            per_context[w.example].append(best_spans(
                out.start_logits[0], out.end_logits[0], w.offsets, w.sequence_ids, contexts[w.example],
                n_best=n_best, max_answer_tokens=scorer.max_answer_tokens, top_k=max(n_best, 20)))
    return [merge_windows(spans, n_best) for spans in per_context]


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_span_scorer(setup, bf16):
    from advrace.models.encoders.span_scoring import load_span_model

    examples = setup["examples"]
    questions, contexts = [ex.question for ex in examples], [ex.passage for ex in examples]
    scorer = load_span_model(setup["qa"], bf16=bf16, batch_size=4, max_length=48)
    assert scorer.bf16 is bf16 and scorer.inference == here(bf16)
    got = scorer.n_best(questions, contexts, 5)
    for spans, context in zip(got, contexts):
        assert 1 <= len(spans) <= 5
        assert all(context[s.start:s.end] == s.text and s.text for s in spans)
        scores = [s.score for s in spans]
        assert _finite(scores) and scores == sorted(scores, reverse=True)
    plain = _plain_n_best(scorer, questions, contexts, 5)
    got_scores = [s.score for spans in got for s in spans]
    if bf16:
        assert got_scores != pytest.approx([s.score for spans in plain for s in spans], abs=1e-6)
        assert [spans[0].score for spans in got] == pytest.approx([spans[0].score for spans in plain], abs=0.05)
    else:
        assert [[(s.start, s.end) for s in spans] for spans in got] == \
            [[(s.start, s.end) for s in spans] for spans in plain]
        assert got_scores == pytest.approx([s.score for spans in plain for s in spans], abs=1e-4)


# --------------------------------------------------------------------------- distractor attacks


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_distractor_extraction(setup, bf16):
    examples = setup["examples"]
    config = {"model": setup["qa"], "max_length": 48, "doc_stride": 16, "batch_size": 4, "n_best": 10}
    attack = get_attack("distractor_extraction")({**config, "bf16": bf16})
    before = attack.describe()
    assert before["inference"] == here(bf16)
    cands = attack.candidates(examples)
    assert attack.describe() == before  # what the loader chose is what describe() foresaw
    for ex, cs in zip(examples, cands):
        assert cs and all(c and c in " ".join(ex.passage.split()) and "\n" not in c for c in cs)
    outcomes = attack.apply_batch(examples)
    assert [o.example.answer for o in outcomes] == [ex.answer for ex in examples]
    assert all(len(o.example.options) == len(ex.options) for o, ex in zip(outcomes, examples))
    if not bf16:  # the default is fp32
        default = get_attack("distractor_extraction")(config)
        assert default.describe()["inference"] == here(False)
        assert default.candidates(examples) == cands


def test_auto_precision_is_what_the_hardware_gives(setup):
    """`bf16: null` picks bf16 where the CPU has it natively; describe() says which it got."""
    from advrace.models.runtime.precision import cpu_has_native_bf16

    attack = get_attack("distractor_extraction")({"model": setup["qa"], "bf16": None, "max_length": 48,
                                                  "doc_stride": 16})
    want = here(cpu_has_native_bf16())
    assert attack.describe()["inference"] == want
    attack.candidates(setup["examples"][:1])
    assert attack.describe()["inference"] == want


# --------------------------------------------------------------------------- emulated bf16


@pytest.fixture
def cpu_bf16(monkeypatch):
    """Set whether the CPU has native bf16 (`cpu_bf16(False)`: emulated), with the once-per-process
    warning not yet given."""
    from advrace.models.runtime import precision

    monkeypatch.setattr(precision, "_warned_emulated", False)
    return lambda native: monkeypatch.setattr(precision, "cpu_has_native_bf16", lambda: native)


def test_forced_bf16_on_a_cpu_without_it_warns_once_and_is_recorded(setup, cpu_bf16, capsys):
    from advrace.models.encoders.mc_scoring import load_checkpoint
    from advrace.models.runtime.precision import precision_info, use_bf16

    cpu_bf16(False)
    cpu = torch.device("cpu")
    assert use_bf16(True, cpu) is True  # asked for, it is what runs
    warning = capsys.readouterr().err
    assert warning.count("warning:") == 1 and "emulate" in warning and "slower than fp32" in warning
    assert "bf16: false" in warning
    assert precision_info(cpu, True) == {"precision": "bf16", "device_type": "cpu", "torch": torch.__version__,
                                         "bf16_emulated": True}
    assert "bf16_emulated" not in precision_info(cpu, False)  # fp32 records are as they were
    # every path says it, but only once per process: a scorer and an attack after it
    scorer = load_checkpoint(setup["mc"], bf16=True, batch_size=3, max_length=64)
    assert scorer.bf16 is True and scorer.inference["bf16_emulated"] is True
    attack = get_attack("distractor_extraction")({"model": setup["qa"], "bf16": True, "max_length": 48,
                                                  "doc_stride": 16})
    assert attack.describe()["inference"]["bf16_emulated"] is True
    attack.candidates(setup["examples"][:1])
    assert attack.describe()["inference"]["bf16_emulated"] is True
    assert "warning:" not in capsys.readouterr().err


def test_forced_bf16_with_native_support_is_silent(setup, cpu_bf16, capsys):
    from advrace.models.runtime.precision import precision_info, use_bf16

    cpu_bf16(True)
    cpu = torch.device("cpu")
    assert use_bf16(True, cpu) is True and precision_info(cpu, True) == {
        "precision": "bf16", "device_type": "cpu", "torch": torch.__version__}
    attack = get_attack("distractor_extraction")({"model": setup["qa"], "bf16": True, "max_length": 48,
                                                  "doc_stride": 16})
    assert "bf16_emulated" not in attack.describe()["inference"]
    assert capsys.readouterr().err == ""


def test_auto_stays_fp32_without_native_bf16(setup, cpu_bf16, capsys):
    from advrace.models.encoders.mc_scoring import load_checkpoint
    from advrace.models.runtime.precision import use_bf16

    cpu_bf16(False)
    assert use_bf16(None, torch.device("cpu")) is False and use_bf16(False, torch.device("cpu")) is False
    assert load_checkpoint(setup["mc"], batch_size=3, max_length=64).inference == here(False)
    attack = get_attack("distractor_extraction")({"model": setup["qa"], "bf16": None, "max_length": 48,
                                                  "doc_stride": 16})
    assert attack.describe()["inference"] == here(False)
    assert "warning:" not in capsys.readouterr().err
    cpu_bf16(True)  # where the CPU has it, auto takes it
    assert use_bf16(None, torch.device("cpu")) is True


def _beam_inputs():
    return torch.tensor([[2, 7, 8, 9, 10, 3], [2, 11, 12, 3, 0, 0]]), torch.tensor([6, 4])


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_unilm_cached_decoder(setup, bf16):
    """The cached decoder agrees with full re-encoding, step by step, under either precision; its
    padding mask must fit bf16 (fp32's lowest value does not)."""
    from advrace.models.decoders.beam_search import beam_search
    from advrace.models.generators.unilm import FullDecoder, Seq2SeqDecoder, UniLMSeq2Seq

    model = UniLMSeq2Seq.from_pretrained(setup["unilm"]).eval()
    src, lengths = _beam_inputs()
    tol = 0.1 if bf16 else 1e-4
    with torch.autocast("cpu", dtype=torch.bfloat16, enabled=bf16):
        cached, full = Seq2SeqDecoder(model), FullDecoder(model)
        (cs, cl), (fs, fl) = cached.start(src, lengths), full.start(src, lengths)
        assert cl.dtype == torch.float32 and torch.allclose(cl, fl, atol=tol)
        tokens = cl[:, 5:].topk(3, dim=-1).indices + 5
        origin = torch.zeros_like(tokens)
        for _ in range(2):
            (cs, cl), (fs, fl) = cached.step(cs, tokens, origin), full.step(fs, tokens, origin)
            assert cl.shape == (2, 3, model.config.vocab_size) and torch.isfinite(cl).all()
            assert torch.allclose(cl, fl, atol=tol)
            assert torch.allclose(cl.exp().sum(-1), torch.ones(2, 3), atol=1e-3)
            origin = torch.tensor([[2, 0, 1], [1, 1, 0]])
        hyps = beam_search(cached, src, lengths, beam_size=4, max_length=4, eos_id=3, banned=(0, 1, 2, 4))
    for row in hyps:
        assert len(row) == 4 and len({h.tokens for h in row}) == 4
        assert all(_finite([h.score, h.logprob]) and 0 < len(h.tokens) <= 4 for h in row)
        assert all(not set(h.tokens) & {0, 1, 2, 3, 4} for h in row)


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_distractor_generation_unilm(setup, bf16):
    examples = setup["examples"]
    config = {"model": setup["unilm"], "beam_size": 4, "max_target_tokens": 3, "batch_size": 3,
              "max_source_length": 96}
    attack = get_attack("distractor_generation")({**config, "bf16": bf16})
    before = attack.describe()
    assert before["inference"] == here(bf16)
    cands = attack.candidates(examples)
    assert attack.describe() == before
    assert len(cands) == len(examples)
    assert all(1 <= len(cs) <= 4 and all(isinstance(c, str) and c for c in cs) for cs in cands)
    outcomes = attack.apply_batch(examples)
    assert [o.example.answer for o in outcomes] == [ex.answer for ex in examples]
    if not bf16:
        assert get_attack("distractor_generation")(config).candidates(examples) == cands


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_distractor_generation_causal_lm(setup, bf16):
    examples = setup["examples"][:3]
    config = {"backend": "causal_lm", "model": setup["lm"], "beam_size": 3, "max_target_tokens": 3,
              "max_passage_tokens": 20}
    attack = get_attack("distractor_generation")({**config, "bf16": bf16})
    assert attack.describe()["inference"] == here(bf16)
    cands = attack.candidates(examples)
    assert attack.describe()["inference"] == here(bf16) and attack._bf16 is bf16
    assert len(cands) == 3 and all(1 <= len(cs) <= 3 and all(isinstance(c, str) and c for c in cs)
                                   for cs in cands)
    if not bf16:
        assert get_attack("distractor_generation")(config).candidates(examples) == cands


# --------------------------------------------------------------------------- SQuAD adversaries


@pytest.mark.parametrize("bf16", PRECISIONS)
def test_model_dependent_squad_adversaries(setup, bf16):
    examples = setup["squad"]
    addsent = get_attack("addsent", "extractive_qa")({"model": setup["qa"], "max_length": 64, "bf16": bf16})
    assert addsent.describe()["inference"] == here(bf16)
    f1 = addsent._f1(examples, [ex.context + " Vienna is in Austria." for ex in examples])
    assert len(f1) == 3 and all(0.0 <= f <= 1.0 for f in f1)
    assert addsent.scorer.bf16 is bf16 and addsent.describe()["inference"] == here(bf16)

    config = {"model": setup["qa"], "max_length": 64, "length": 2, "epochs": 1, "candidates": 2}
    addany = get_attack("addany")({**config, "bf16": bf16})
    records = [o.example.provenance[-1] for o in addany.apply_batch(examples)]
    for r in records:
        assert 0.0 <= r.search.expected_f1 == r.search.trace[-1] <= r.search.trace[0] <= 1.0
        assert len(r.sentences[0].sentence.split()) == 2 and r.search.queries > 1
    assert addany.describe()["inference"] == here(bf16)
    if not bf16:
        default = get_attack("addany")(config)
        assert [o.example.provenance[-1] for o in default.apply_batch(examples)] == records


# --------------------------------------------------------------------------- training


@pytest.fixture(scope="module")
def runs(tiny_llama, tmp_path_factory):
    """Two-step training runs by (objective, mixed precision), each trained once."""
    root = tmp_path_factory.mktemp("runs")
    race, tok = tiny_llama["race"], tiny_llama["tok_dir"]
    done = {}

    def run(objective: str, precision: str) -> dict:
        if (objective, precision) not in done:
            from advrace.training import train

            extra = {"max_length": 48, "doc_stride": 16} if objective == "span_extraction" else {}
            cfg = tiny(tok, race, root / f"{objective}-{precision}", objective=objective,
                       mixed_precision=precision, epochs=1, max_steps=2, save_every_steps=None, **extra)
            done[objective, precision] = train(cfg, progress=False)
        return done[objective, precision]

    return run


def test_training_in_bf16_on_a_cpu_without_it_warns(cpu_bf16, capsys, tmp_path, tiny_llama):
    from advrace.training.loop import _accelerator, _reset_accelerate
    from advrace.training.config import as_config

    race, tok = tiny_llama["race"], tiny_llama["tok_dir"]
    _reset_accelerate()  # an evaluation or lm-eval run earlier in this process left its state
    for native, precision in [(True, "bf16"), (False, "no"), (False, "bf16")]:
        cpu_bf16(native)
        cfg = as_config(tiny(tok, race, tmp_path, mixed_precision=precision))
        try:
            _accelerator(cfg, tmp_path / "run")
        finally:
            _reset_accelerate()
        err = capsys.readouterr().err
        if native or precision == "no":
            assert "warning:" not in err
        else:
            assert "emulate" in err and "mixed_precision: no" in err


@pytest.mark.parametrize("bf16", PRECISIONS)
@pytest.mark.parametrize("objective", ["multiple_choice", "span_extraction", "distractor_generation"])
def test_training_mixed_precision(runs, objective, bf16):
    from safetensors.torch import load_file

    result = runs(objective, "bf16" if bf16 else "no")
    metrics = result["metrics"]
    assert metrics["step"] == 2 and math.isfinite(metrics["train_loss"])
    assert 0.0 <= metrics[metrics["metric"]] <= 1.0
    weights = load_file(str(Path(result["final"]) / "model.safetensors"))
    assert all(w.dtype == torch.float32 and torch.isfinite(w).all() for w in weights.values())
    if bf16:  # the same steps in bf16 end near, not at, the fp32 weights
        fp32 = load_file(str(Path(runs(objective, "no")["final"]) / "model.safetensors"))
        diffs = [(weights[k] - fp32[k]).abs().max().item() for k in fp32]
        assert 0 < max(diffs) < 0.05


# --------------------------------------------------------------------------- answerability judge


@pytest.mark.parametrize("kind", ["mc", "lm"])
@pytest.mark.parametrize("bf16", PRECISIONS)
def test_answerability_judge(setup, bf16, kind):
    """The judge at the attack's precision: fp32's scores are the scorer's own; bf16's differ by
    little; the gold restated is refused at margin 0 in both."""
    from advrace.models.judge import load_judge

    ex = setup["examples"][0]
    judge = load_judge(setup[kind], 0.0, bf16=bf16, batch_size=2)
    assert judge.scorer.bf16 is bf16
    others = [o for i, o in enumerate(ex.options) if i != ex.label]
    (verdicts,) = judge.judge([(ex, [ex.answer, *others])])
    assert verdicts[0].refused and all(_finite([v.candidate, v.gold]) for v in verdicts)
    fp32 = load_judge(setup[kind], 0.0, bf16=False, batch_size=2).judge([(ex, [ex.answer, *others])])[0]
    got, want = [v.candidate for v in verdicts], [v.candidate for v in fp32]
    if bf16:
        assert got == pytest.approx(want, abs=0.05) and got != pytest.approx(want, abs=1e-7)
    else:
        assert got == want
