"""Forked build workers share the fluency LM their parent loaded (runner `_shared_models`), once
a probe shows each forked copy computes what the parent's did; a copy that fails is dropped, the
worker loads its own, and the manifest counts it. The splits are the same either way."""

import os
from pathlib import Path

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.provenance import AttackSummary
from advrace.release import build_release, read_split, runner
from conftest import make_tokenizer, save_tiny_llama

torch = pytest.importorskip("torch")


def save_tiny_gpt2(tokenizer, out: Path) -> str:
    """A random 2-layer GPT-2 (absolute positions), saved with the test tokenizer."""
    from transformers import GPT2Config, GPT2LMHeadModel

    torch.manual_seed(0)
    GPT2LMHeadModel(GPT2Config(vocab_size=len(tokenizer), n_embd=32, n_layer=2, n_head=4, n_positions=512,
                               bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                               pad_token_id=tokenizer.pad_token_id)).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


SAVERS = {"llama": save_tiny_llama, "gpt2": save_tiny_gpt2}


@pytest.fixture
def lm_dir(tmp_path, request):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(make_tokenizer(tmp_path))
    return SAVERS[getattr(request, "param", "llama")](tok, tmp_path / "lm")


@pytest.fixture
def loads(tmp_path, monkeypatch):
    """Every load of the LM from its files (not a shared load handed out again), in any process, as a line `pid` in a file (a forked worker's count
    does not reach the parent's memory); `loads.break_fork` makes a copy used in another process
    than the one that loaded it compute other logits ("differ") or raise ("raise")."""
    import advrace.attacks.sentences.fluency as fluency_module
    import advrace.models.decoders.loaded_lm as lm
    from advrace.models.runtime import loading

    log = tmp_path / "loads.txt"
    real = loading._load_model

    class Loads:
        break_fork = None

        def pids(self):
            return [int(x) for x in log.read_text().split()] if log.exists() else []

        def fresh(self):
            """A new build, as in a new process: nothing loaded, no scores cached."""
            monkeypatch.setattr(lm, "_LOADED", {})
            monkeypatch.setattr(fluency_module, "_SHARED", {})
            monkeypatch.setattr(loading, "SHARED", loading.SharedLoads())
            log.unlink(missing_ok=True)

    state = Loads()

    def counted(*args, **kwargs):
        loaded = real(*args, **kwargs)
        with open(log, "a") as f:
            f.write(f"{os.getpid()}\n")
        if state.break_fork:
            _broken_in_children(loaded[0], state.break_fork)
        return loaded

    monkeypatch.setattr(loading, "_load_model", counted)
    monkeypatch.setattr(runner, "CHUNK_PASSAGES", 1)  # three chunks, so that workers fork
    state.fresh()
    return state


def _broken_in_children(model, how: str) -> None:
    born, forward = os.getpid(), model.forward

    def forked_forward(*args, **kwargs):
        if os.getpid() == born:
            return forward(*args, **kwargs)
        if how == "raise":
            raise RuntimeError("a broken thread pool")
        out = forward(*args, **kwargs)
        out.logits[..., 0] += 1.0
        return out

    model.forward = forked_forward


def build(race_dir, lm_dir, out, workers):
    """The manifest, and the bytes of the splits and stats.json."""
    cfg = release_config_from_dict({"data": {"path": str(race_dir)}, "seed": 11, "workers": workers,
                                    "splits": [{"attack": "addsent", "config": {"fluency_model": lm_dir}}]})
    manifest = build_release(cfg, out)
    return manifest, {p.name: p.read_bytes() for p in sorted([*(out / "data").iterdir(), out / "stats.json"])}


def scored(out) -> int:
    """The inserted sentences the LM scored: the build did use the model."""
    return sum(1 for ex in read_split(out, "addsent") for p in ex.provenance if isinstance(p, AttackSummary)
               for s in p.sentences if s.fluency is not None)


@pytest.mark.parametrize("lm_dir", ["llama", "gpt2"], indirect=True)
def test_workers_use_the_parents_model_and_build_the_same_splits(race_dir, lm_dir, loads, tmp_path, monkeypatch):
    manifest, one = build(race_dir, lm_dir, tmp_path / "one", workers=1)
    assert loads.pids() == [os.getpid()] and scored(tmp_path / "one") > 0

    loads.fresh()
    manifest, two = build(race_dir, lm_dir, tmp_path / "two", workers=2)
    assert loads.pids() == [os.getpid()]  # loaded once, in the parent; the workers used its copy
    assert "forked_model_fallbacks" not in manifest["environment"]
    assert manifest["environment"]["torch_threads"] == torch.get_num_threads()

    loads.fresh()
    monkeypatch.setattr(runner, "SHARE_MODELS", False)
    _, alone = build(race_dir, lm_dir, tmp_path / "alone", workers=2)
    assert loads.pids() and os.getpid() not in loads.pids()  # each worker loaded its own, as before
    assert one == two == alone


@pytest.mark.parametrize("how", ["differ", "raise"])
def test_a_forked_copy_that_fails_its_probe_is_replaced_and_counted(race_dir, lm_dir, loads, tmp_path, capfd, how):
    _, one = build(race_dir, lm_dir, tmp_path / "one", workers=1)
    loads.fresh()
    loads.break_fork = how
    manifest, two = build(race_dir, lm_dir, tmp_path / "two", workers=2)
    children = [pid for pid in loads.pids() if pid != os.getpid()]
    assert loads.pids()[0] == os.getpid() and len(children) == len(set(children)) >= 1
    # each worker that ran a chunk failed its probe and counts once; it loads its own at first use
    fallbacks = manifest["environment"]["forked_model_fallbacks"]
    assert 1 <= len(children) <= fallbacks <= 2
    assert capfd.readouterr().err.count("failed its probe") >= fallbacks
    assert one == two  # each worker's own copy computes as the parent's did


def test_a_model_loaded_for_something_else_is_not_this_builds(race_dir, lm_dir, loads, tmp_path):
    """An LM this process loaded earlier (another build, an evaluation) is not a model of a build
    whose attacks load none: its manifest records no torch thread count and no probe runs, so it
    is the same with one worker and with several."""
    from advrace.models.decoders.loaded_lm import loaded_lm

    loaded_lm(lm_dir)
    manifests = []
    for workers in (1, 2):
        cfg = release_config_from_dict({"data": {"path": str(race_dir)}, "seed": 11, "workers": workers,
                                        "splits": ["addsent"]})
        manifests.append(build_release(cfg, tmp_path / f"w{workers}"))
        assert "torch_threads" not in manifests[-1]["environment"]
    assert manifests[0]["environment"] == manifests[1]["environment"]
