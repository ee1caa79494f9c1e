import argparse
import json
import re
from pathlib import Path

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.evaluation import (ModelLoadError, PredictionsError, add_evaluate_parser, evaluate_command,
                                load_checkpoint, score_predictions, score_release, unique_names)
from advrace.metrics import load_metric, normalize_answer, squad_em_f1
from advrace.models.encoders.mc_encoding import question_with_option
from advrace.release import build_release, read_split
from conftest import PASSAGE, race_passage, squad_doc

SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def write_race(root: Path) -> Path:
    for sub, n, k in [("high", 1, 3), ("middle", 2, 2), ("middle", 10, 2)]:
        d = root / sub
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{n}.txt").write_text(json.dumps(race_passage(f"{sub}{n}.txt", k)), encoding="utf-8")
    return root


@pytest.fixture(scope="module")
def mc_release(tmp_path_factory) -> Path:
    """original, charswap and the option_only probe over 7 RACE questions."""
    tmp = tmp_path_factory.mktemp("mc")
    cfg = release_config_from_dict({"data": {"path": str(write_race(tmp / "RACE" / "test"))},
                                    "splits": ["charswap", "option_only"], "workers": 1})
    build_release(cfg, tmp / "release")
    return tmp / "release"


@pytest.fixture(scope="module")
def qa_release(tmp_path_factory) -> Path:
    tmp = tmp_path_factory.mktemp("qa")
    (tmp / "squad.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    cfg = release_config_from_dict({"data": {"path": str(tmp / "squad.json")}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp / "release")
    return tmp / "release"


@pytest.fixture(scope="module")
def tiny_checkpoint(tmp_path_factory) -> Path:
    """A 2-layer BERT with a 32-wide hidden state and a WordPiece vocabulary of the test texts."""
    import torch
    from transformers import BertConfig, BertForMultipleChoice, BertTokenizerFast

    tmp = tmp_path_factory.mktemp("ckpt")
    texts = [PASSAGE] + [q for q in race_passage("x", 3)["questions"]]
    texts += [o for opts in race_passage("x", 3)["options"] for o in opts]
    words = sorted({w for t in texts for w in re.findall(r"[a-z]+", t.lower())})[:90]
    vocab = SPECIALS + [".", ",", "?", "_"] + words
    (tmp / "vocab").mkdir()
    (tmp / "vocab" / "vocab.txt").write_text("\n".join(vocab) + "\n", encoding="utf-8")
    tokenizer = BertTokenizerFast.from_pretrained(tmp / "vocab")
    assert tokenizer.tokenize("Tom lives in a small village.") == ["tom", "lives", "in", "a", "small", "village", "."]
    torch.manual_seed(0)
    config = BertConfig(vocab_size=len(vocab), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=512, initializer_range=0.2)
    model = BertForMultipleChoice(config)
    out = tmp / "tiny-bert"
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def write_json(path: Path, data) -> Path:
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


# --------------------------------------------------------------------------- metrics


def test_normalize_answer_follows_squad_v11():
    assert normalize_answer("The  Black Sea!") == "black sea"
    assert normalize_answer("an apple, a pear") == "apple pear"
    assert normalize_answer("Theory") == "theory"
    assert normalize_answer("U.S.A.") == "usa"


def test_squad_module_matches_hand_computed_values():
    cases = [
        ("The Black Sea!", ["Black Sea"], 1.0, 1.0),
        ("an apple", ["apple pie", "the apples"], 0.0, 2 / 3),
        ("ten countries", ["ten", "10"], 0.0, 2 / 3),
        ("Vienna, and Budapest.", ["Vienna and Budapest"], 1.0, 1.0),
        ("Paris", ["London"], 0.0, 0.0),
    ]
    for pred, golds, em, f1 in cases:
        assert squad_em_f1(pred, golds) == pytest.approx((em, f1))
    result = load_metric("squad_v11").compute(predictions=[c[0] for c in cases],
                                              references=[c[1] for c in cases])
    assert result["exact_match"] == pytest.approx(40.0)
    assert result["f1"] == pytest.approx(100 * (1 + 2 / 3 + 2 / 3 + 1 + 0) / 5)


def test_mc_accuracy_module():
    result = load_metric("mc_accuracy").compute(predictions=[1, 0, 3, -1], references=[1, 2, 3, 0])
    assert result == {"accuracy": pytest.approx(50.0)}
    assert load_metric("mc_accuracy") is load_metric("mc_accuracy")


# --------------------------------------------------------------------------- predictions files


def mc_predictions(release: Path, wrong_in_charswap: int = 3) -> dict:
    """Gold everywhere except the first `wrong_in_charswap` charswap questions."""
    preds = {}
    for split in ("original", "charswap", "option_only"):
        for k, ex in enumerate(read_split(release, split)):
            wrong = split == "charswap" and k < wrong_in_charswap
            preds[ex.id] = (ex.label + 1) % 4 if wrong else ex.label
    return preds


def test_score_predictions_multiple_choice(mc_release, tmp_path):
    preds = mc_predictions(mc_release)
    preds["original/high1.txt-0"] = "B"  # letters work too; the gold answer is B
    res = score_predictions(mc_release, write_json(tmp_path / "p.json", preds))
    assert list(res) == ["original", "charswap", "option_only"]
    assert res["original"]["n"] == 7 and res["original"]["accuracy"] == pytest.approx(100.0)
    assert res["charswap"]["accuracy"] == pytest.approx(400 / 7)
    assert [r["correct"] for r in res["charswap"]["records"]] == [False] * 3 + [True] * 4
    rec = res["original"]["records"][0]
    assert rec == {"id": "original/high1.txt-0", "source_id": "high1.txt-0", "prediction": 1,
                   "label": 1, "correct": True, "perturbed": False}  # the release record's flag
    assert [r["perturbed"] for r in res["charswap"]["records"]] == [True] * 7  # charswap changed every question


def test_missing_ids_are_an_error_unless_allowed(mc_release, tmp_path):
    preds = mc_predictions(mc_release, wrong_in_charswap=0)
    for rid in ["charswap/high1.txt-0", "charswap/middle2.txt-1", "original/middle10.txt-0"]:
        del preds[rid]
    path = write_json(tmp_path / "p.json", preds)
    with pytest.raises(PredictionsError) as err:
        score_predictions(mc_release, path)
    message = str(err.value)
    assert "3 of 21 questions have no prediction" in message
    assert "original/middle10.txt-0" in message and "--allow-missing" in message
    res = score_predictions(mc_release, path, allow_missing=True)
    assert res["original"]["accuracy"] == pytest.approx(600 / 7)
    assert res["charswap"]["accuracy"] == pytest.approx(500 / 7)
    assert res["charswap"]["records"][0]["prediction"] is None
    only = score_predictions(mc_release, path, splits=["option_only"])
    assert list(only) == ["option_only"] and only["option_only"]["accuracy"] == pytest.approx(100.0)


def test_bad_predictions_files(mc_release, tmp_path):
    bare = {ex.source_id: ex.label for ex in read_split(mc_release, "original")}
    with pytest.raises(PredictionsError, match=r"<split>/<source_id>"):
        score_predictions(mc_release, write_json(tmp_path / "bare.json", bare))
    preds = mc_predictions(mc_release)
    preds["original/high1.txt-0"] = 4
    with pytest.raises(PredictionsError, match=r"prediction 4 for original/high1.txt-0 is not an option .* 0-3"):
        score_predictions(mc_release, write_json(tmp_path / "range.json", preds))
    (tmp_path / "broken.json").write_text("{", encoding="utf-8")
    with pytest.raises(PredictionsError, match="not valid JSON"):
        score_predictions(mc_release, tmp_path / "broken.json")
    with pytest.raises(PredictionsError, match="no such predictions file"):
        score_predictions(mc_release, tmp_path / "absent.json")
    with pytest.raises(ConfigError, match="no split"):
        score_predictions(mc_release, write_json(tmp_path / "ok.json", mc_predictions(mc_release)),
                          splits=["nope"])


def test_score_predictions_squad(qa_release, tmp_path):
    ids = {ex.source_id: ex.id for ex in read_split(qa_release, "original")}
    preds = {ids["q0"]: "the Black Sea", ids["q1"]: "ten countries", ids["q2"]: "Vienna"}
    for ex in read_split(qa_release, "charswap"):
        preds[ex.id] = ex.answers[0].text
    res = score_predictions(qa_release, write_json(tmp_path / "squad-preds.json", preds))
    orig = res["original"]
    assert orig["n"] == 3
    assert orig["exact_match"] == pytest.approx(100 / 3)
    assert orig["f1"] == pytest.approx(100 * (1 + 2 / 3 + 1 / 2) / 3)
    assert [r["exact_match"] for r in orig["records"]] == [1.0, 0.0, 0.0]
    assert res["charswap"]["exact_match"] == pytest.approx(100.0)
    del preds[ids["q2"]]
    res = score_predictions(qa_release, write_json(tmp_path / "partial.json", preds), allow_missing=True)
    assert res["original"]["exact_match"] == pytest.approx(100 / 3)
    assert res["original"]["f1"] == pytest.approx(100 * (1 + 2 / 3) / 3)
    with pytest.raises(PredictionsError, match="must be an answer text"):
        score_predictions(qa_release, write_json(tmp_path / "bad.json", {**preds, ids["q2"]: 3}))


# --------------------------------------------------------------------------- checkpoints


def reference_scores(checkpoint: Path, examples) -> list[list[float]]:
    """One plain fp32 forward pass per option, no batching and no padding."""
    import torch
    from transformers import AutoModelForMultipleChoice, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(checkpoint)
    model = AutoModelForMultipleChoice.from_pretrained(checkpoint).eval()
    out = []
    with torch.no_grad():
        for ex in examples:
            row = []
            for option in ex.options:
                enc = tokenizer(ex.passage, question_with_option(ex.question, option), truncation=True,
                                max_length=512, return_tensors="pt")
                row.append(model(**{k: v.unsqueeze(1) for k, v in enc.items()}).logits[0, 0].item())
            out.append(row)
    return out


def test_checkpoint_scores_match_a_plain_forward_pass(mc_release, tiny_checkpoint):
    res = score_release(mc_release, str(tiny_checkpoint), bf16=False, batch_size=8, progress=False)
    assert list(res) == ["original", "charswap", "option_only"]
    for split, result in res.items():
        examples = read_split(mc_release, split)
        expected = reference_scores(tiny_checkpoint, examples)
        records = result["records"]
        assert [r["id"] for r in records] == [ex.id for ex in examples]
        for rec, want in zip(records, expected):
            assert rec["scores"] == pytest.approx(want, abs=1e-4)
            assert rec["prediction"] == max(range(4), key=lambda i: want[i])
            assert rec["correct"] == (rec["prediction"] == rec["label"])
        assert result["accuracy"] == pytest.approx(100 * sum(r["correct"] for r in records) / len(records))
        if split == "original":
            assert len({r["prediction"] for r in records}) > 1
    one = score_release(mc_release, str(tiny_checkpoint), bf16=False, batch_size=1, progress=False)
    for split in res:
        assert [r["prediction"] for r in one[split]["records"]] == [r["prediction"] for r in res[split]["records"]]


def test_checkpoint_bf16_runs(mc_release, tiny_checkpoint):
    scorer = load_checkpoint(tiny_checkpoint, bf16=True, batch_size=4)
    assert scorer.bf16 and scorer.name == "tiny-bert"
    scores = scorer.predict_mc(read_split(mc_release, "original"))
    assert len(scores) == 7 and all(len(s) == 4 for s in scores)


class PreferFirst:
    name = "prefer-first"

    def predict_mc(self, examples):
        return [[1.0, 0.5, 0.25, 0.0][:len(ex.options)] for ex in examples]


def test_scorer_objects(mc_release):
    res = score_release(mc_release, PreferFirst(), splits=["original"], progress=False)
    # Gold answers are B, A, C for high1 and B, A for each middle passage: three are option 0.
    assert res["original"]["accuracy"] == pytest.approx(300 / 7)
    assert res["original"]["records"][1]["scores"] == [1.0, 0.5, 0.25, 0.0]


def test_model_loading_errors(tmp_path, monkeypatch):
    with pytest.raises(ModelLoadError, match="no such model folder"):
        load_checkpoint(tmp_path / "absent")
    (tmp_path / "empty").mkdir()
    with pytest.raises(ModelLoadError, match="cannot load a multiple-choice model") as err:
        load_checkpoint(tmp_path / "empty")
    assert err.value.exit_code == 3
    from transformers import AutoTokenizer

    from advrace.models.runtime import loading

    def offline(*args, **kwargs):
        raise OSError("We couldn't connect to 'https://huggingface.co' to load the files")

    monkeypatch.setattr(AutoTokenizer, "from_pretrained", offline)
    # The Hub's address answers (or a proxy hides it), yet the files do not load; an unreachable
    # Hub is tests/test_cli.py's.
    monkeypatch.setattr(loading, "hub_unreachable", lambda: None)
    with pytest.raises(ModelLoadError, match="pass its local folder instead"):
        load_checkpoint("someone/some-model")


def test_command_errors(mc_release, qa_release, tiny_checkpoint, tmp_path):
    with pytest.raises(ConfigError, match="nothing to evaluate"):
        evaluate_command(mc_release, [], [], tmp_path / "r")
    with pytest.raises(ConfigError, match="BertForMultipleChoice is a multiple-choice model, which cannot score "
                                          "the extractive-QA"):
        evaluate_command(qa_release, [str(tiny_checkpoint)], [], tmp_path / "r")
    with pytest.raises(PredictionsError, match="no such predictions file"):
        evaluate_command(mc_release, [], [tmp_path / "absent.json"], tmp_path / "r")
    assert not (tmp_path / "r").exists()
    (tmp_path / "foreign").mkdir()
    (tmp_path / "foreign" / "notes.txt").write_text("mine", encoding="utf-8")
    with pytest.raises(ConfigError, match="not an advrace report"):
        evaluate_command(mc_release, [str(tiny_checkpoint)], [], tmp_path / "foreign")


def test_span_checkpoint_on_a_squad_release(qa_release, tmp_path):
    """EM and F1 of a span model through `advrace evaluate` equal those of its answers scored as a
    predictions file (the official SQuAD v1.1 definition)."""
    from conftest import make_race_dir, make_tokenizer, tiny
    from advrace.training import train

    tok = make_tokenizer(tmp_path)
    squad = write_json(tmp_path / "squad.json", squad_doc())
    run = train(tiny(tok, make_race_dir(tmp_path), tmp_path, objective="span_extraction", max_length=48,
                     doc_stride=16, train={"path": str(squad)}, dev={"path": str(squad)}, epochs=2),
                progress=False)
    summary = evaluate_command(qa_release, [run["final"]], [], tmp_path / "report", max_length=48,
                               progress=False)
    assert summary["models"] == ["tiny"]  # the run's name (training_info.json), not its folder's "final"
    records = [json.loads(line) for line in open(tmp_path / "report" / "predictions" / "tiny.jsonl")]
    preds = {r["id"]: r["prediction"] for r in records}
    assert len(preds) == 6 and all(isinstance(p, str) for p in preds.values())
    again = score_predictions(qa_release, write_json(tmp_path / "p.json", preds))
    scores = json.loads((tmp_path / "report" / "results.json").read_text())
    for split in ("original", "charswap"):
        assert again[split]["f1"] == pytest.approx(summary["results"]["tiny"]["splits"][split]["f1"], abs=1e-3)
    assert "f1" in json.dumps(scores)
    import torch

    from advrace.models.runtime.precision import precision_info, use_bf16

    cpu = torch.device("cpu")  # evaluation keeps its automatic bf16, and says what it chose
    assert scores["results"]["tiny"]["source"]["inference"] == precision_info(cpu, use_bf16(None, cpu))


def test_unique_names():
    assert unique_names(["bert", "bert", "my model", "bert"]) == ["bert", "bert-2", "my_model", "bert-3"]


def test_cli_parser_and_handler(mc_release, tiny_checkpoint, tmp_path, capsys):
    parser = argparse.ArgumentParser(prog="advrace")
    handler = add_evaluate_parser(parser.add_subparsers(dest="command"))
    help_text = parser._subparsers._group_actions[0].choices["evaluate"].format_help()
    for flag in ["--model", "--predictions", "--out", "--splits", "--batch-size", "--max-length",
                 "--no-bf16", "--allow-missing", "--quiet"]:
        assert flag in help_text
    preds = write_json(tmp_path / "gold.json", mc_predictions(mc_release, wrong_in_charswap=0))
    args = parser.parse_args(["evaluate", str(mc_release), "--model", str(tiny_checkpoint),
                              "--predictions", str(preds), "--out", str(tmp_path / "report"),
                              "--splits", "original,charswap", "--batch-size", "4", "--no-bf16", "--quiet"])
    assert args.handler is handler and args.bf16 is False
    assert handler(args) == 0
    summary = json.loads((tmp_path / "report" / "results.json").read_text(encoding="utf-8"))
    label = f"{tiny_checkpoint.parent.name}/tiny-bert"  # no training_info.json: its last two folder names
    assert summary["models"] == [label, "gold"]
    assert summary["columns"] == ["original", "charswap"]
    assert summary["results"]["gold"]["splits"]["charswap"] == {
        "accuracy": 100.0, "accuracy_drop": 0.0, "n": 7, "accuracy_ci": [64.57, 100.0], "accuracy_p": 1.0,
        "paired_n": 7, "attacked_n": 7, "attacked_share": 100.0, "accuracy_attacked": 100.0,
        "accuracy_attacked_ci": [64.57, 100.0], "accuracy_attacked_original": 100.0, "accuracy_attacked_drop": 0.0}
    assert summary["results"][label]["source"]["bf16"] is False
    assert "| gold | 100.00 | 100.00 (drop 0.00%) | 100.00 (drop 0.00%) |" in capsys.readouterr().out


# --------------------------------------------------------------------------- predictions: JSON lines and values
# (the format `advrace evaluate` writes to predictions/, read back with --predictions)


def write_lines(path: Path, lines: list) -> Path:
    path.write_text("".join((line if isinstance(line, str) else json.dumps(line)) + "\n" for line in lines),
                    encoding="utf-8")
    return path


def test_a_reports_predictions_score_the_same_when_fed_back(mc_release, tmp_path):
    """predictions/<model>.jsonl of one report, given to --predictions, gives the same scores."""
    first = evaluate_command(mc_release, ["sliding-window"], [], tmp_path / "first", progress=False)
    written = tmp_path / "first" / "predictions" / "sliding-window.jsonl"
    assert written.read_text(encoding="utf-8").count("\n") == 21
    parser = argparse.ArgumentParser(prog="advrace")
    handler = add_evaluate_parser(parser.add_subparsers(dest="command"))
    assert handler(parser.parse_args(["evaluate", str(mc_release), "--predictions", str(written),
                                      "--out", str(tmp_path / "again"), "--quiet"])) == 0
    again = json.loads((tmp_path / "again" / "results.json").read_text(encoding="utf-8"))
    assert again["models"] == ["sliding-window"]
    assert again["results"]["sliding-window"]["splits"] == first["results"]["sliding-window"]["splits"]
    assert again["results"]["sliding-window"]["average"] == first["results"]["sliding-window"]["average"]
    fed_back = [json.loads(line) for line in open(tmp_path / "again" / "predictions" / "sliding-window.jsonl")]
    originally = [json.loads(line) for line in open(written)]
    assert [(r["id"], r["prediction"], r["correct"]) for r in fed_back] == \
        [(r["id"], r["prediction"], r["correct"]) for r in originally]


def test_json_lines_with_nulls_round_trip_under_allow_missing(mc_release, tmp_path):
    preds = mc_predictions(mc_release, wrong_in_charswap=0)
    preds["charswap/high1.txt-0"] = None  # what the tool writes for a question without a prediction
    path = write_lines(tmp_path / "p.jsonl", [{"id": rid, "prediction": p} for rid, p in preds.items()])
    with pytest.raises(PredictionsError, match=r"1 of 21 questions have no prediction \(charswap/high1.txt-0\)"):
        score_predictions(mc_release, path)
    res = score_predictions(mc_release, path, allow_missing=True)
    assert res["charswap"]["accuracy"] == pytest.approx(600 / 7)
    assert res["charswap"]["records"][0]["prediction"] is None
    named_json = tmp_path / "p-lines.json"  # JSON lines under a .json name read the same
    named_json.write_bytes(path.read_bytes())
    assert score_predictions(mc_release, named_json, allow_missing=True) == res
    one = write_lines(tmp_path / "one.json", [{"id": "original/high1.txt-0", "prediction": "B"}])
    res = score_predictions(mc_release, one, splits=["original"], allow_missing=True)  # one line, named .json
    assert res["original"]["records"][0]["prediction"] == 1


@pytest.mark.parametrize("line, words", [
    ("{not json", r"line 3: not valid JSON \(Expecting property name"),
    ("[1, 2]", r"line 3: expected a JSON object with \"id\" and \"prediction\", got list"),
    ({"id": "original/middle2.txt-0"}, r"line 3: no \"prediction\" field"),
    ({"prediction": 1}, r"line 3: no \"id\" field"),
    ({"id": 7, "prediction": 1}, r"line 3: \"id\" must be a release record id <split>/<source_id>, got 7"),
    ({"id": "original/high1.txt-0", "prediction": 2},
     r"line 3: id original/high1.txt-0 was already given on line 1"),
])
def test_bad_json_lines_name_the_file_and_line(mc_release, tmp_path, line, words):
    """Line numbers count blank lines, as an editor does."""
    path = write_lines(tmp_path / "bad.jsonl", [{"id": "original/high1.txt-0", "prediction": 1}, "", line])
    with pytest.raises(PredictionsError, match=re.escape(str(path)) + ", " + words):
        score_predictions(mc_release, path)


@pytest.mark.parametrize("value", ["E", 4, -1, "AB", 1.0, True])
def test_an_out_of_range_prediction_is_quoted_as_given(mc_release, tmp_path, value):
    preds = mc_predictions(mc_release)
    preds["original/high1.txt-0"] = value
    with pytest.raises(PredictionsError) as err:
        score_predictions(mc_release, write_json(tmp_path / "p.json", preds))
    message = str(err.value)
    assert f"prediction {value!r} for original/high1.txt-0 is not an option of this 4-option question" in message
    assert "A-D" in message and "0-3" in message
    lines = write_lines(tmp_path / "p.jsonl", [{"id": rid, "prediction": p} for rid, p in preds.items()])
    quoted = re.escape(f"prediction {value!r} for original/high1.txt-0 (line 1)")
    with pytest.raises(PredictionsError, match=quoted):
        score_predictions(mc_release, lines)


def test_squad_predictions_as_json_lines(qa_release, tmp_path):
    rows = [{"id": ex.id, "prediction": ex.answers[0].text}
            for split in ("original", "charswap") for ex in read_split(qa_release, split)]
    res = score_predictions(qa_release, write_lines(tmp_path / "squad.jsonl", rows))
    assert res["original"]["exact_match"] == pytest.approx(100.0) and res["charswap"]["f1"] == pytest.approx(100.0)
    rows[2]["prediction"] = 3
    with pytest.raises(PredictionsError, match=r"for \S+ \(line 3\) must be an answer text, got 3"):
        score_predictions(qa_release, write_lines(tmp_path / "bad.jsonl", rows))


class FirstAnswer:
    """A user's SQuAD scorer with the documented `predict_qa(examples)`: no progress keywords."""

    name = "first-answer"

    def predict_qa(self, examples):
        return [ex.answers[0].text for ex in examples]


def test_a_plain_predict_qa_object_scores_a_squad_release(qa_release, tmp_path):
    summary = evaluate_command(qa_release, [FirstAnswer()], [], tmp_path / "report", progress=False)
    splits = summary["results"]["first-answer"]["splits"]
    assert set(splits) == {"original", "charswap"}
    for split in splits:
        assert splits[split]["exact_match"] == pytest.approx(100.0) and splits[split]["f1"] == pytest.approx(100.0)
    assert summary["results"]["first-answer"]["source"]["kind"] == "scorer"


def test_a_predict_qa_that_drops_answers_is_an_error(qa_release, tmp_path):
    from advrace.core.errors import AdvraceError

    class DropsOne(FirstAnswer):
        def predict_qa(self, examples):
            return super().predict_qa(examples)[1:]

    with pytest.raises(AdvraceError, match=r"first-answer: predict_qa returned \d+ answers for \d+ examples"):
        evaluate_command(qa_release, [DropsOne()], [], tmp_path / "report", progress=False)


def test_evaluate_reads_each_split_once_for_models_and_predictions_files(mc_release, tmp_path, monkeypatch):
    """Predictions files reuse the splits the command read: k files do not read the release k more
    times; the scores equal those of score_predictions on its own."""
    import advrace.evaluation.command as command
    import advrace.evaluation.predictions as predictions

    files = [write_json(tmp_path / f"p{k}.json", mc_predictions(mc_release, wrong_in_charswap=k)) for k in (1, 2)]
    alone = [score_predictions(mc_release, f, splits=["original", "charswap"]) for f in files]
    reads = []

    def counted(release, split):
        reads.append(split)
        return read_split(release, split)

    monkeypatch.setattr(command, "read_split", counted)
    monkeypatch.setattr(predictions, "read_split", counted)
    summary = evaluate_command(mc_release, [PreferFirst()], files, tmp_path / "report",
                               splits=["original", "charswap"], progress=False)
    assert sorted(reads) == ["charswap", "option_only", "original"]
    for f, res in zip(files, alone):
        for split in ("original", "charswap"):
            reported = summary["results"][f.stem]["splits"][split]["accuracy"]  # rounded to 2 places
            assert reported == pytest.approx(res[split]["accuracy"], abs=0.005)
