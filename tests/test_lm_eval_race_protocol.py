"""`advrace evaluate --protocol lm-eval-race` against lm-evaluation-harness's own `race` task,
run from the installed lm_eval package (its race.yaml, pointed at rows in EleutherAI/race's format
that this test writes) on the same articles with the same tiny model: the same documents, the same
predictions, the same acc, and the task version recorded. What the protocol refuses, and the
warning when a release is not lm-eval's data (RACE-high's test set)."""

import dataclasses
import importlib.util
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from advrace.core.config import release_config_from_dict
from advrace.core.errors import ConfigError
from advrace.evaluation import evaluate_command
from advrace.evaluation.command import not_lm_evals_data
from advrace.models.protocol import lm_eval_race
from advrace.models.protocol.scoring_protocol import LM_EVAL_RACE_TASK
from advrace.release import build_release, read_split

pytest.importorskip("lm_eval", reason="lm-evaluation-harness is not installed")
pytestmark = pytest.mark.usefixtures("one_thread")
RACE_YAML = Path(importlib.util.find_spec("lm_eval").submodule_search_locations[0]) / "tasks" / "race" / "race.yaml"

RUN_RACE = """
import json, sys
import torch
torch.set_num_threads(1)
import lm_eval
from lm_eval.tasks import TaskManager

model, folder = sys.argv[1], sys.argv[2]
r = lm_eval.simple_evaluate(model="hf", tasks=["race_local"],
                            model_args={"pretrained": model, "dtype": "float32", "add_bos_token": False},
                            task_manager=TaskManager(include_path=folder, include_defaults=False),
                            device="cpu", batch_size=8, log_samples=True)
samples = [{"doc_id": s["doc_id"], "ll": [x[0][0] for x in s["resps"]], "acc": s["acc"]}
           for s in r["samples"]["race_local"]]
print("RESULTS " + json.dumps({"acc": r["results"]["race_local"]["acc,none"], "samples": samples}))
"""


@pytest.fixture(scope="module")
def setup(tiny_llama):
    """The shared RACE release, and the tiny Llama whose tokenizer has the BOS or EOS token that
    lm-eval's HF model needs."""
    return {"race": tiny_llama["race"], "release": tiny_llama["mc"], "lm": tiny_llama["lm_eval_lm"]}


def test_it_gives_lm_evals_own_race_number(setup, tmp_path):
    summary = evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=False,
                               protocol="lm-eval-race", bos="never")
    (label,) = summary["models"]
    result = summary["results"][label]
    assert list(result["splits"]) == ["original"] and summary["metrics"] == ["accuracy"]
    protocol = result["source"]["protocol"]
    assert protocol["name"] == "lm-eval-race" and protocol["metrics"] == ["acc"]
    # the task version reproduced: the installed lm-eval's race.yaml, which the rest of this test runs
    assert protocol["lm_eval_task"] == LM_EVAL_RACE_TASK
    assert re.search(r"^  version: (\S+)$", RACE_YAML.read_text(), re.M).group(1) == LM_EVAL_RACE_TASK["version"]
    assert "issue 835" in protocol["lm_eval_task"]["change"]
    assert "reproduces lm-eval's `race` task, version 3.0: " in (tmp_path / "r" / "results.md").read_text()
    records = [json.loads(x) for x in next((tmp_path / "r" / "predictions").glob("*.jsonl")).read_text().splitlines()]
    originals = read_split(setup["release"], "original")
    docs = lm_eval_race.documents(originals)
    assert len(records) == len(docs) == 3  # one per article: its last question
    assert [r["id"] for r in records] == [d.example.id for d in docs]

    # lm-eval's own race task on the same articles, written as EleutherAI/race rows
    data = tmp_path / "race.jsonl"
    data.write_text("".join(json.dumps(lm_eval_race.eleuther_row(d.questions)) + "\n" for d in docs))
    race_yaml = RACE_YAML
    folder = tmp_path / "task"
    folder.mkdir()
    (folder / "race_local.yaml").write_text(
        f"include: {json.dumps(str(race_yaml))}\ntask: race_local\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
           "TOKENIZERS_PARALLELISM": "false", "HF_HOME": str(tmp_path / "hf"), "OMP_NUM_THREADS": "1"}
    done = subprocess.run([sys.executable, "-c", RUN_RACE, setup["lm"], str(folder)], capture_output=True,
                          text=True, env=env, cwd=tmp_path, timeout=300)
    assert done.returncode == 0, done.stderr[-4000:]
    (line,) = [x for x in done.stdout.splitlines() if x.startswith("RESULTS ")]
    theirs = json.loads(line[len("RESULTS "):])
    samples = sorted(theirs["samples"], key=lambda s: s["doc_id"])
    for rec, s in zip(records, samples):
        assert rec["scores"] == pytest.approx(s["ll"], abs=1e-3)
        assert rec["correct"] == bool(s["acc"])
    assert result["splits"]["original"]["accuracy"] == pytest.approx(100 * theirs["acc"], abs=0.01)


def test_what_the_protocol_refuses(setup, tmp_path):
    kwargs = dict(out=tmp_path / "r", progress=False, protocol="lm-eval-race")
    with pytest.raises(ConfigError, match="scores the `original` split only"):
        evaluate_command(setup["release"], [setup["lm"]], splits=["charswap"], **kwargs)
    with pytest.raises(ConfigError, match="zero-shot log-likelihood"):
        evaluate_command(setup["release"], [setup["lm"]], method="letter", **kwargs)
    with pytest.raises(ConfigError, match="decoder language models only"):
        evaluate_command(setup["release"], ["sliding-window"], **kwargs)
    with pytest.raises(ConfigError, match="unknown protocol"):
        evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", progress=False, protocol="race")
    assert not (tmp_path / "r").exists()


def test_a_release_that_is_not_race_high_test_is_warned_about(setup, tmp_path, capsys):
    evaluate_command(setup["release"], [setup["lm"]], out=tmp_path / "r", progress=False, bf16=False,
                     protocol="lm-eval-race", bos="never")
    err = capsys.readouterr().err
    assert "warning: --protocol lm-eval-race: lm-evaluation-harness's race task has RACE-high's test set only" in err
    assert "its original split holds 2 articles of RACE-middle (of 3 articles scored)" in err

    high = tmp_path / "high-release"
    build_release(release_config_from_dict({"data": {"path": str(setup["race"] / "high")},
                                            "splits": ["charswap"], "workers": 1}), high)
    evaluate_command(high, [setup["lm"]], out=tmp_path / "h", progress=False, bf16=False, protocol="lm-eval-race",
                     bos="never")
    assert "warning" not in capsys.readouterr().err

    highs = read_split(high, "original")
    assert not_lm_evals_data({"source": {"split": "test"}}, highs) is None
    assert "it was made from RACE's dev set" in not_lm_evals_data({"source": {"split": "dev"}}, highs)
    renamed = [dataclasses.replace(ex, source_id=f"q{i}-0") for i, ex in enumerate(highs[-1:])]
    assert "1 article of unknown level (not RACE ids)" in not_lm_evals_data({}, renamed)
