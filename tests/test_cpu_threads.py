"""torch's CPU threads (advrace.models.runtime.precision): outside a build, fitted to the machine's
load (`cpu_threads`: one per core that no other process keeps busy, what the user set with
OMP_NUM_THREADS kept as it is), so evaluation follows the load batch by batch; inside a release
build, one count from start to end whatever the load does (`held_threads`), recorded in the
manifest, since the count moves a score's last bits and so can flip a beam's rank."""

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from advrace.core.config import release_config_from_dict
from advrace.models.runtime import precision
from advrace.models.runtime.precision import HeldThreads, cpu_threads, fitted_threads, held_threads
from advrace.release import build_release

CPU = torch.device("cpu")
MEASURED = precision.busy_elsewhere  # the real reading, before any test sets the load
LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")


@pytest.fixture
def threads(monkeypatch):
    """torch at 2 threads of 2 cores, no OMP_NUM_THREADS, and a settable load: set `now`, or
    `loads` (a list, one reading each time the load is measured)."""
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(precision, "usable_cores", lambda: 2)
    busy = {"now": 0.0, "asked": 0, "loads": None}

    def reading(*args, **kwargs):
        busy["asked"] += 1
        return busy["loads"].pop(0) if busy["loads"] else busy["now"]

    monkeypatch.setattr(precision, "busy_elsewhere", reading)
    torch.set_num_threads(2)
    yield busy
    torch.set_num_threads(before)


@pytest.mark.parametrize("ceiling, cores, busy, expected", [
    (2, 2, 0.0, 2), (2, 2, 0.2, 2),  # a blip leaves the cores to torch
    (2, 2, 0.25, 1), (2, 2, 1.0, 1), (2, 2, 1.2, 1), (2, 2, 2.0, 1),  # at least one thread
    (16, 16, 1.3, 14), (8, 16, 3.0, 8),  # never more than torch had
    (1, 2, 0.0, 1), (4, 4, None, 4),  # unknown load: torch's count
])
def test_fitted_threads(ceiling, cores, busy, expected):
    assert fitted_threads(ceiling, cores, busy) == expected


# --------------------------------------------------------------------------- fitting (evaluation)


def test_a_busy_core_is_left_to_its_process_and_the_count_restored(threads):
    threads["now"] = 1.0
    with cpu_threads(CPU) as n:
        assert n == torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2
    threads["now"] = 0.0
    with cpu_threads(CPU) as n:
        assert n == torch.get_num_threads() == 2


def test_nested_blocks_fit_to_the_outermost_count(threads):
    """A loop that fits each batch again inside a block fitted once follows the load both ways."""
    threads["now"] = 1.0
    with cpu_threads(CPU):
        assert torch.get_num_threads() == 1
        threads["now"] = 0.0
        with cpu_threads(CPU):  # the load went: back to the outermost's 2
            assert torch.get_num_threads() == 2
        assert torch.get_num_threads() == 1
    assert torch.get_num_threads() == 2 and precision._ceiling is None


def test_the_count_is_restored_after_an_error(threads):
    threads["now"] = 1.0
    with pytest.raises(RuntimeError), cpu_threads(CPU):
        raise RuntimeError("model failed")
    assert torch.get_num_threads() == 2 and precision._ceiling is None


def test_omp_num_threads_and_gpus_are_left_alone(threads, monkeypatch):
    threads["now"] = 1.0
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    with cpu_threads(CPU) as n:
        assert n == torch.get_num_threads() == 2
    monkeypatch.delenv("OMP_NUM_THREADS")
    with cpu_threads(torch.device("cuda")) as n:
        assert n is None and torch.get_num_threads() == 2
    assert threads["asked"] == 0  # neither measured the load


@pytest.fixture(scope="module")
def models(tiny_llama):
    """The conftest RACE folder and a random tiny Llama (a causal LM for DG and for evaluation)."""
    return {"race": tiny_llama["race"], "lm": tiny_llama["lm"]}


def _counting(monkeypatch, module, name) -> list[int]:
    """torch's thread count each time `module.name` is called, which then runs as before."""
    seen, real = [], getattr(module, name)

    def counted(*args, **kwargs):
        seen.append(torch.get_num_threads())
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return seen


def test_evaluation_follows_the_load_batch_by_batch(threads, models, monkeypatch):
    """`advrace evaluate`'s decoder-LM scoring writes no release: each batch runs at the count
    fitted to the load measured before it, and the count is torch's again afterwards."""
    from advrace.formats import load
    from advrace.models.decoders import llm_scoring

    seen = _counting(monkeypatch, llm_scoring, "shared_logprobs")
    scorer = llm_scoring.load_causal_scorer(models["lm"], bf16=False, batch_size=1)
    # one question of each of three articles: an article's questions share one batch
    examples = list({ex.passage: ex for ex in reversed(load(str(models["race"])).examples)}.values())[-3:]
    assert len({ex.passage for ex in examples}) == 3
    threads["loads"] = [0.0, 1.0, 0.0]
    scores = scorer.predict_mc(examples)
    assert seen == [2, 1, 2] and threads["asked"] == 3 and torch.get_num_threads() == 2
    assert [len(s) for s in scores] == [len(ex.options) for ex in examples]


@LINUX
def test_a_real_busy_process_takes_a_thread_away(threads, monkeypatch):
    """The load as measured, not as set: beside a process that never sleeps (always ready to run),
    the reading counts it, and a block on 2 cores computes with 1 thread."""
    monkeypatch.setattr(precision, "busy_elsewhere", MEASURED)
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert precision.busy_elsewhere() >= 0.9
        with cpu_threads(CPU) as n:
            assert n == torch.get_num_threads() == 1
    finally:
        burner.kill()
        burner.wait()
    assert torch.get_num_threads() == 2


@LINUX
def test_this_process_own_running_threads_are_counted_as_its_own():
    """A thread of this process that computes (hashing releases the GIL, so it stays runnable)
    counts as this process's own, not as load elsewhere."""
    assert precision._own_running() >= 1  # the reading thread itself
    data, stop = bytes(1 << 24), threading.Event()

    def hashing():
        import hashlib

        while not stop.is_set():
            hashlib.sha256(data).digest()

    worker = threading.Thread(target=hashing)
    worker.start()
    try:
        time.sleep(0.05)
        assert max(precision._own_running() for _ in range(20)) >= 2
    finally:
        stop.set()
        worker.join()


# --------------------------------------------------------------------------- one count per build


def test_a_held_count_ignores_the_load_and_is_put_back_when_changed(threads):
    threads["now"] = 1.0
    with held_threads() as held:
        assert held.threads is None  # nothing asked for it yet: torch need not be imported
        with cpu_threads(CPU) as n:
            assert n == torch.get_num_threads() == 2
        torch.set_num_threads(1)  # something in the build changed it
        with held_threads() as inner, cpu_threads(CPU) as n:
            assert inner is held and n == torch.get_num_threads() == 2
    assert threads["asked"] == 0 and precision._held is None
    with cpu_threads(CPU) as n:  # after the build, fitting again
        assert n == 1 and threads["asked"] == 1


def _dg_config(models) -> dict:
    return {"name": "threads", "data": {"path": str(models["race"])}, "workers": 1, "audit": False,
            "splits": [{"attack": "distractor_generation",
                        "config": {"backend": "causal_lm", "model": models["lm"], "beam_size": 2,
                                   "max_target_tokens": 2, "max_passage_tokens": 40, "batch_size": 2,
                                   "select_with": None, "max_answer_cosine": None}}]}


def test_a_build_computes_at_one_count_while_the_load_changes_and_records_it(threads, models, monkeypatch,
                                                                             tmp_path):
    """DG fits each batch it decodes to the load when called alone, but inside a build every batch
    runs at the count torch had when the build began, the load never measured, and the manifest
    records that count."""
    import advrace.models.decoders.beam_search as bs
    from advrace.attacks import get_attack
    from advrace.formats import load

    seen = _counting(monkeypatch, bs, "beam_search")
    cfg = _dg_config(models)
    threads["loads"] = [0.0, 1.0, 0.0, 1.0]  # before each of the 4 batches of 7 questions
    get_attack("distractor_generation")(cfg["splits"][0]["config"]).candidates(load(str(models["race"])).examples)
    assert seen == [2, 1, 2, 1]
    seen.clear()
    threads["loads"], threads["asked"] = [0.0, 1.0, 0.0, 1.0], 0
    manifest = build_release(release_config_from_dict(cfg), tmp_path / "release")
    assert seen == [2, 2, 2, 2] and threads["asked"] == 0
    written = json.loads((tmp_path / "release" / "manifest.json").read_text(encoding="utf-8"))
    assert manifest["environment"]["torch_threads"] == written["environment"]["torch_threads"] == 2
    torch.set_num_threads(1)  # the user's count (OMP_NUM_THREADS=1, say) is the one held and recorded
    seen.clear()
    again = build_release(release_config_from_dict(cfg), tmp_path / "again")
    assert seen == [1, 1, 1, 1] and again["environment"]["torch_threads"] == 1


def test_adversarial_copies_for_training_are_made_at_one_count(threads, models, monkeypatch):
    """training.recipes makes adversarial training data with the release runner, outside any
    build: its models too compute at one count while the load changes."""
    import advrace.models.decoders.beam_search as bs
    from advrace.formats import load
    from advrace.release.runner import run_splits
    from advrace.resources import get_resources

    seen = _counting(monkeypatch, bs, "beam_search")
    cfg = release_config_from_dict(_dg_config(models))
    threads["loads"] = [0.0, 1.0, 0.0, 1.0]
    run_splits(cfg, load(str(models["race"])).examples, get_resources(cfg.resources), workers=1)
    assert seen == [2, 2, 2, 2] and threads["asked"] == 0 and precision._held is None


def test_a_build_without_a_model_records_no_count(models, tmp_path):
    manifest = build_release(release_config_from_dict({"data": {"path": str(models["race"])}, "workers": 1,
                                                       "splits": ["charswap"]}), tmp_path / "release")
    assert "torch_threads" not in manifest["environment"] and "packages" in manifest["environment"]


RECORD_DRIVER = """
import torch
from advrace.models.runtime.precision import HeldThreads
from advrace.models.runtime.sharding import end_processes, process_state

state = process_state()
torch.set_num_threads(state.process_index + 1)
differ = HeldThreads().record(state)
torch.set_num_threads(1)
agree = HeldThreads().record(state)
if state.is_main_process:
    print("records", differ, agree, flush=True)
end_processes()
"""


def test_each_process_count_is_recorded_one_number_where_they_agree(tmp_path):
    """Under `accelerate launch` / torchrun every process's count is gathered: a list by process
    where they differ, one number where they agree."""
    (tmp_path / "driver.py").write_text(RECORD_DRIVER, encoding="utf-8")
    root = Path(__file__).resolve().parents[1]
    env = {**os.environ, "ACCELERATE_USE_CPU": "true", "OMP_NUM_THREADS": "1",
           "PYTHONPATH": os.pathsep.join([str(root), os.environ.get("PYTHONPATH", "")])}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "driver.py")]
    done = subprocess.run(cmd, env=env, cwd=tmp_path, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "records [1, 2] 1" in done.stdout
    assert HeldThreads().record(None) is None  # one process that ran no model: nothing to record


def test_the_tests_run_at_one_count_that_the_load_cannot_change():
    """conftest's pin: OMP_NUM_THREADS is set for the whole run (so `cpu_threads` fits nothing and
    the commands tests start inherit it) and torch computes at that count."""
    import conftest

    assert os.environ.get("OMP_NUM_THREADS", "").strip() and precision.threads_fixed()
    assert conftest.RUN_THREADS == torch.get_num_threads()


def test_a_started_process_group_is_closed_at_the_end_and_none_is_left_alone(tmp_path, monkeypatch):
    """`end_processes` (the CLI calls it after each command) closes a group it finds started, and
    does nothing where none was."""
    import torch.distributed as dist

    from advrace.models.runtime.sharding import end_processes

    end_processes()  # no group: nothing, no error
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", "0")
    dist.init_process_group("gloo", init_method=f"file://{tmp_path / 'rendezvous'}", rank=0, world_size=1)
    assert dist.is_initialized()
    end_processes()
    assert not dist.is_initialized()
