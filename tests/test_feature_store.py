"""The feature cache (advrace.models.runtime.feature_store): Arrow tables that give back exactly the
features eager encoding gives, built once, keyed by everything the features depend on."""

import dataclasses
import functools
import json
import os
import shutil
from pathlib import Path

import pytest
import torch

from advrace.core.errors import ConfigError
from advrace.formats import load
from advrace.models.decoders.distractor_inputs import CausalFeature
from advrace.models.decoders.distractor_inputs import training_features as causal_features
from advrace.models.encoders.mc_encoding import MCFeature, encode_mc
from advrace.models.encoders.mc_scoring import CheckpointScorer
from advrace.models.encoders.span_encoding import SpanWindow, encode_windows, span_training_examples
from advrace.models.generators.seq2seq_encoding import Seq2SeqFeature
from advrace.models.generators.seq2seq_encoding import training_features as seq2seq_features
from advrace.models.runtime.feature_store import FeatureStore, FeatureTable, arrow_features, tokenizer_fingerprint
from advrace.training import train, train_config_from_dict
from advrace.training.objectives import get_objective
from advrace.training.objectives.multiple_choice import MultipleChoice
from conftest import squad_doc, tiny
from test_training import log_records, weights


def _tokenizer(path):
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(path)


def span_windows(tokenizer, examples, seed=3, max_length=48, stride=16):
    questions, contexts, spans = span_training_examples(examples, seed)
    return encode_windows(tokenizer, questions, contexts, spans, max_length=max_length, stride=stride)


ENCODERS = {  # feature class: a picklable encoder of a list of RACE questions
    MCFeature: lambda tok: functools.partial(encode_mc, tok, max_length=40),
    SpanWindow: lambda tok: functools.partial(span_windows, tok),
    Seq2SeqFeature: lambda tok: functools.partial(seq2seq_features, tok, max_source_length=40,
                                                  max_target_length=6),
    CausalFeature: lambda tok: functools.partial(causal_features, tok, max_passage_tokens=12,
                                                 max_distractor_tokens=5, per_question=2, seed=1),
}


@pytest.mark.parametrize("cls", list(ENCODERS), ids=lambda c: c.__name__)
def test_a_table_gives_back_what_eager_encoding_gives(cls, tokenizer_dir, race_dir, tmp_path):
    tok = _tokenizer(tokenizer_dir)
    examples = load(str(race_dir)).examples
    encode = ENCODERS[cls](tok)
    eager = encode(examples)
    store = FeatureStore(tmp_path / "cache")
    # in two parts, as a recipe's training set is stored: `example` counts across them
    table = store.encode(encode, cls, [examples[:3], examples[3:]], {"k": 1})
    assert isinstance(table, FeatureTable) and len(store.built) == 2
    assert len(table) == len(eager) and list(table) == eager
    assert table.take([len(eager) - 1, 0, 2]) == [eager[-1], eager[0], eager[2]]
    assert table.lengths == [f.length for f in eager]
    if cls is SpanWindow:  # the windows that hold no gold span keep position 0, and offsets keep None
        assert any(w.start_position == 0 for w in table) and any(None in w.offsets for w in table)
        assert len({w.example for w in table}) == len(examples)


def test_columns_follow_the_type_hints():
    features = arrow_features(SpanWindow)
    assert features["input_ids"].feature.dtype == "int32"
    assert features["offsets"].feature.length == 2  # a (start, end) pair, or null
    assert set(features) == {f.name for f in dataclasses.fields(SpanWindow)} | {"_length"}


def test_a_second_encoding_reads_the_cache_and_a_change_rebuilds_only_its_part(tokenizer_dir, race_dir,
                                                                             tmp_path):
    tok = _tokenizer(tokenizer_dir)
    examples = load(str(race_dir)).examples
    encode = ENCODERS[MCFeature](tok)
    parts = [examples[:4], examples[4:]]
    FeatureStore(tmp_path).encode(encode, MCFeature, parts, {"k": 1})

    again = FeatureStore(tmp_path)
    assert list(again.encode(encode, MCFeature, parts, {"k": 1})) == encode(examples)
    assert again.built == []

    changed = dataclasses.replace(examples[5], question="Where does Mary live?")
    new_parts = [examples[:4], examples[4:5] + [changed] + examples[6:]]
    store = FeatureStore(tmp_path)
    table = store.encode(encode, MCFeature, new_parts, {"k": 1})
    assert len(store.built) == 1 and table[5] == encode([changed])[0]

    other_key = FeatureStore(tmp_path)
    other_key.encode(encode, MCFeature, parts, {"k": 2})
    assert len(other_key.built) == 2


def test_the_key_holds_the_tokenizers_content_not_its_name(tokenizer_dir, tmp_path):
    tok = _tokenizer(tokenizer_dir)
    tok("a question", "an answer", truncation="longest_first", max_length=8)  # changes its truncation state
    copy = tmp_path / "copy"
    shutil.copytree(tokenizer_dir, copy)
    assert tokenizer_fingerprint(tok) == tokenizer_fingerprint(_tokenizer(copy))
    from transformers import BertTokenizerFast

    vocab = tmp_path / "vocab.txt"
    vocab.write_text((tokenizer_dir.parent / "vocab.txt").read_text() + "newword\n")
    assert tokenizer_fingerprint(BertTokenizerFast(str(vocab))) != tokenizer_fingerprint(tok)


def _remove_manifest(folder):
    (folder / "manifest.json").unlink()


def _cut_data_in_half(folder):
    (data,) = folder.glob("data*.arrow")
    data.write_bytes(data.read_bytes()[:data.stat().st_size // 2])


@pytest.mark.parametrize("harm", [_remove_manifest, _cut_data_in_half], ids=["unfinished", "damaged"])
@pytest.mark.parametrize("cls", [MCFeature, SpanWindow], ids=lambda c: c.__name__)
def test_an_unfinished_or_damaged_table_is_built_again(harm, cls, tokenizer_dir, race_dir, tmp_path):
    encode = ENCODERS[cls](_tokenizer(tokenizer_dir))
    examples = load(str(race_dir)).examples
    FeatureStore(tmp_path).encode(encode, cls, [examples], {})
    (folder,) = tmp_path.glob("features/*/*")
    harm(folder)
    store = FeatureStore(tmp_path)
    assert list(store.encode(encode, cls, [examples], {})) == encode(examples)
    assert len(store.built) == 1 and (folder / "manifest.json").is_file()


def test_several_workers_write_the_same_rows(tokenizer_dir, race_dir, tmp_path):
    tok = _tokenizer(tokenizer_dir)
    base = load(str(race_dir)).examples
    examples = [dataclasses.replace(base[i % len(base)], id=f"q{i}") for i in range(1100)]
    encode = ENCODERS[SpanWindow](tok)
    one = FeatureStore(tmp_path / "one", workers=1).encode(encode, SpanWindow, [examples], {})
    two = FeatureStore(tmp_path / "two", workers=2)
    table = two.encode(encode, SpanWindow, [examples], {})
    files = json.loads(next((tmp_path / "two").glob("features/*/*/manifest.json")).read_text())["files"]
    assert len(files) == 2
    assert list(table) == list(one) == encode(examples)


def test_a_subclass_that_encodes_otherwise_has_its_own_key(tokenizer_dir, race_dir, tmp_path):
    class Shouting(MultipleChoice):
        name = "shouting_test"

        def features(self, tokenizer, examples, seed, dev=False):
            return super().features(tokenizer, [dataclasses.replace(e, question=e.question.upper())
                                                for e in examples], seed, dev)

    cfg = train_config_from_dict(tiny(tokenizer_dir, race_dir, tmp_path))
    plain = get_objective(cfg)
    assert Shouting(cfg).encoding_key(1, False) != plain.encoding_key(1, False)
    assert plain.encoding_key(1, False) == plain.encoding_key(2, True)  # shared with evaluation


def test_a_cached_run_trains_exactly_as_an_eager_one_and_a_second_run_encodes_nothing(
        tokenizer_dir, race_dir, tmp_path):
    cfg = tiny(tokenizer_dir, race_dir, tmp_path, epochs=1, dev={"limit": 5},
               feature_cache=str(tmp_path / "cache"))
    first = train(cfg, output_dir=tmp_path / "first", progress=False)["metrics"]
    second = train(cfg, output_dir=tmp_path / "second", progress=False)["metrics"]
    eager = train({**cfg, "feature_cache": False}, output_dir=tmp_path / "eager", progress=False)["metrics"]
    assert (first["feature_tables_built"], second["feature_tables_built"], eager["feature_tables_built"]) == (2, 0, 0)
    w = weights(tmp_path / "eager" / "final")
    for run in ("first", "second"):
        assert log_records(tmp_path / run) == log_records(tmp_path / "eager")
        cached = weights(tmp_path / run / "final")
        assert all(torch.equal(cached[k], w[k]) for k in w)


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_scoring_a_large_split_through_the_cache_gives_the_same_scores(bf16, tokenizer_dir, race_dir):
    from transformers import AutoModelForMultipleChoice, BertConfig

    torch.manual_seed(0)
    model = AutoModelForMultipleChoice.from_config(BertConfig(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2,
        intermediate_size=64, max_position_embeddings=128))
    scorer = CheckpointScorer(model, _tokenizer(tokenizer_dir), batch_size=3, max_length=64, bf16=bf16)
    assert scorer.bf16 is bf16
    examples = load(str(race_dir)).examples
    eager = scorer.predict_mc(examples)
    scorer.store_from = 1
    assert scorer.predict_mc(examples) == eager
    cache = Path(os.environ["ADVRACE_CACHE"])  # the session's, from conftest
    manifests = [json.loads(p.read_text()) for p in cache.glob("features/*/*/manifest.json")]
    assert any(m["key"]["max_length"] == 64 and m["key"].get("encoder") == "encode_mc" for m in manifests)


def test_a_cache_that_cannot_be_written_says_where_and_what_to_do(tokenizer_dir, race_dir, tmp_path):
    tok = _tokenizer(tokenizer_dir)
    blocked = tmp_path / "a-file"
    blocked.write_text("not a folder")
    with pytest.raises(ConfigError, match="feature cache .*a-file.*choose another folder"):
        FeatureStore(blocked).encode(ENCODERS[MCFeature](tok), MCFeature, [load(str(race_dir)).examples], {})
    assert blocked.read_text() == "not a folder"


def test_a_second_run_of_a_recipe_reads_its_adversarial_copies_from_the_cache(tokenizer_dir, race_dir,
                                                                             tmp_path, monkeypatch):
    import advrace.training.loop as loop

    cfg = tiny(tokenizer_dir, race_dir, tmp_path, max_steps=1, feature_cache=str(tmp_path / "cache"),
               recipe={"task": "adversarial", "attacks": ["charswap"], "workers": 1})
    first = train(cfg, output_dir=tmp_path / "first", progress=False)

    def attack_again(*args, **kwargs):
        raise AssertionError("the training set was attacked again")

    monkeypatch.setattr(loop, "build_train_set", attack_again)
    second = train(cfg, output_dir=tmp_path / "second", progress=False)
    assert second["data"] == first["data"] and second["metrics"]["feature_tables_built"] == 0
    copies = [sorted(p.read_text() for p in (tmp_path / run / "data").glob("adversarial-*.json"))
              for run in ("first", "second")]
    assert copies[0] == copies[1] and len(copies[0]) == 1


@pytest.mark.parametrize("bf16", [False, True], ids=["fp32", "bf16"])
def test_reading_a_large_squad_split_through_the_cache_gives_the_same_answers(bf16, span_model, tmp_path):
    from advrace.models.encoders.span_scoring import load_span_model

    doc = squad_doc()
    doc["data"][0]["paragraphs"][0]["context"] *= 3  # several windows per question
    paragraph = doc["data"][0]["paragraphs"][0]
    for qa in paragraph["qas"]:
        qa["answers"] = [{"text": a["text"], "answer_start": paragraph["context"].index(a["text"])}
                         for a in qa["answers"]]
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(doc))
    examples = load(str(path)).examples
    scorer = load_span_model(span_model, bf16=bf16)
    assert scorer.bf16 is bf16
    eager = scorer.n_best([e.question for e in examples], [e.context for e in examples], 5)
    answers = scorer.predict_qa(examples)
    scorer.store_from = 1
    windows = scorer.cached_windows(examples)
    assert len(windows) > len(examples) and list(windows) == scorer.windows(
        [e.question for e in examples], [e.context for e in examples])
    assert scorer.n_best([e.question for e in examples], [e.context for e in examples], 5,
                         windows=windows) == eager
    assert scorer.predict_qa(examples) == answers
