"""torch's CPU threads fitted to the machine's load (advrace.models.runtime.precision.cpu_threads): one per
core that no other process keeps busy, what the user set (OMP_NUM_THREADS) kept as it is, and the
DG attack fitting each batch it decodes."""

import subprocess
import sys
import time

import pytest
import torch

from advrace.models.runtime import precision
from advrace.models.runtime.precision import cpu_threads, fitted_threads

CPU = torch.device("cpu")


@pytest.fixture
def threads(monkeypatch):
    """torch at 2 threads, no OMP_NUM_THREADS, and a settable load: `set_busy(x)`."""
    before = torch.get_num_threads()
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setattr(precision, "usable_cores", lambda: 2)
    busy = {"now": 0.0, "asked": 0}

    def reading(*args, **kwargs):
        busy["asked"] += 1
        return busy["now"]

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


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_a_busy_process_is_seen():
    """Another process that never sleeps is always ready to run: the reading counts it; this
    process's own threads are not counted."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        time.sleep(0.5)
        assert precision.busy_elsewhere() >= 0.9
    finally:
        burner.kill()
        burner.wait()


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads Linux's /proc")
def test_the_reading_thread_is_this_process_own():
    assert precision._own_running() >= 1
    assert precision.busy_elsewhere(samples=2, interval=0.001) >= 0.0
