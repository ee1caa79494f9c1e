"""Device and precision: where a model runs, whether it computes in bf16, and the record of both.

Weights are read in fp32 (`fp32_load_kwargs`) unless a causal LM's model args ask for another
dtype (advrace.models.runtime.model_args); bf16, when used on fp32 weights, is autocast, chosen by
`use_bf16`. bf16 and fp32 (or two torch versions) can rank candidates differently, so every
release and report that ran a model says which computed it (`precision_info`).

A CPU without bf16 instructions still runs bf16 autocast, emulated: several times slower than
fp32 (bench/evaluate_throughput.py --bf16-vs-fp32 measures it). "auto" never picks it there;
asking for it warns once per process (`warn_if_emulated`, the one place that says so) and the
record says `bf16_emulated`.

On a CPU, how many threads torch computes with is the other half of how fast a model runs there
(`cpu_threads`): torch takes one per core, which on a machine where another process keeps a core
busy makes each of its parallel steps wait for the thread that shares that core. The count also
moves the last bits of a score, which can flip a beam's rank or an argmax, so a release build
holds one count from start to end (`held_threads`) and its manifest records it; only work that
writes no release (evaluation) fits the count to the load. What a held count can still change
without touching a score is how its threads wait for each other (`choose_omp_wait`): on a
machine other processes keep busy, they sleep instead of spinning.
"""

from __future__ import annotations

import contextlib
import functools
import math
import os
import sys
import time
from pathlib import Path

from advrace.models.runtime.sharding import process_state


@functools.cache
def cpu_has_native_bf16() -> bool:
    """Without bf16 instructions CPUs emulate it, which is slower than fp32 and less exact."""
    try:
        flags = set(Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace").split())
    except OSError:
        return False
    return bool(flags & {"avx512_bf16", "amx_bf16", "bf16"})


def bf16_emulated(device, bf16: bool) -> bool:
    """Whether `bf16` compute on `device` is emulated: bf16 on a CPU without bf16 instructions."""
    import torch

    return bool(bf16) and torch.device(device).type == "cpu" and not cpu_has_native_bf16()


# The advice of the warning, by who asked: a model's `bf16` setting (attacks, evaluation) by default.
BF16_SETTING = "set bf16: false (or leave it unset/null: auto picks fp32 on this CPU)"
_warned_emulated = False


def warn_if_emulated(device, bf16: bool, advice: str = BF16_SETTING) -> None:
    """Say once per process, on stderr, that the bf16 asked for is emulated on this CPU. Every
    path that turns bf16 on by request (`use_bf16`, training's mixed_precision) comes here."""
    global _warned_emulated
    if _warned_emulated or not bf16_emulated(device, bf16):
        return
    _warned_emulated = True
    print("warning: bf16 was asked for, but this CPU has no native bf16 (no avx512_bf16 or amx_bf16): "
          "torch emulates it, typically several times slower than fp32 and less exact; "
          f"{advice}", file=sys.stderr, flush=True)


def use_bf16(requested: bool | None, device) -> bool:
    """True: always; False: never; None: where the device computes in bf16 natively (which
    makes results depend on the hardware). True on a CPU that would emulate bf16 warns once."""
    import torch

    if device.type not in ("cpu", "cuda"):
        return False
    if requested is not None:
        warn_if_emulated(device, bool(requested))
        return bool(requested)
    if device.type == "cuda":
        return torch.cuda.is_bf16_supported()
    return cpu_has_native_bf16()


def inference_device():
    """The device this process runs a model on (its GPU under `accelerate launch`, else the CPU)."""
    return process_state().device


def precision_info(device, bf16: bool, weights=None) -> dict:
    """What computed a model's outputs: bf16 and fp32 (or two torch versions) can rank candidates
    differently, so a release or a report says which ran; `bf16_emulated: true` where bf16 ran
    without native support (the key is absent otherwise, so fp32 records are as they were).

    `weights`: the torch dtype of the weights. Weights loaded in bf16 or fp16 (a causal LM's
    `dtype` model argument) compute in that dtype without autocast: the precision says so, and
    `weights` names their dtype (absent for fp32 weights, so those records are as they were)."""
    import torch

    half = {torch.bfloat16: "bf16", torch.float16: "fp16"}
    precision = "bf16" if bf16 else half.get(weights, "fp32")
    info = {"precision": precision, "device_type": torch.device(device).type, "torch": torch.__version__}
    if weights is not None and weights != torch.float32:
        info["weights"] = str(weights).removeprefix("torch.")
    if bf16_emulated(device, precision == "bf16"):
        info["bf16_emulated"] = True
    return info


def fp32_load_kwargs() -> dict:
    """`from_pretrained` keyword arguments that load weights in fp32 whatever they were saved in;
    autocast picks the compute precision."""
    return dtype_load_kwargs("float32")


def dtype_load_kwargs(dtype: str) -> dict:
    """`from_pretrained` keyword arguments that load weights in `dtype` ("auto": the checkpoint's
    own; else a torch dtype's name, "bfloat16"), under the keyword the installed Transformers
    takes (`dtype` since 4.56, `torch_dtype` before)."""
    import torch
    import transformers

    major, minor = (int(x) for x in transformers.__version__.split(".")[:2])
    return {"dtype" if (major, minor) >= (4, 56) else "torch_dtype": dtype if dtype == "auto" else getattr(torch, dtype)}


def attention_backends(device):
    """On CUDA, attention without cuDNN's kernel: it builds a plan for every new sequence length
    (about 0.1 s each on an H100), which batches padded to their own length would pay again and
    again. Flash and memory-efficient attention have no such cost."""
    if device.type != "cuda":
        return contextlib.nullcontext()
    try:
        from torch.nn.attention import SDPBackend, sdpa_kernel
    except ImportError:
        return contextlib.nullcontext()
    return sdpa_kernel([SDPBackend.FLASH_ATTENTION, SDPBackend.EFFICIENT_ATTENTION, SDPBackend.MATH])


# ---------------------------------------------------------------- CPU threads

# libgomp (torch's OpenMP on Linux) reads how a thread waits at a barrier once, when torch is
# imported: by default it spins for a while first. Beside other running processes a spinning
# thread takes the core from the thread it waits for, and every one of a model's small operations
# ends at a barrier: SmolLM2 at 2 threads on 2 cores at load 8-9 ran 4.7x faster with waiting
# threads asleep (OMP_WAIT_POLICY=PASSIVE), at the same thread count, so with the same work split
# and the same floats (docs/results.md, bench/dg_causal_lm.py).
OMP_WAIT_KEYS = ("OMP_WAIT_POLICY", "GOMP_SPINCOUNT", "KMP_BLOCKTIME")


def others_running() -> int | None:
    """Threads of other processes running or ready to run now, one reading of /proc/loadavg;
    None where it cannot be read."""
    try:
        with open("/proc/loadavg", encoding="ascii") as f:
            running = int(f.read().split()[3].split("/")[0])
    except (OSError, ValueError, IndexError):
        return None
    return max(0, running - _own_running())


def choose_omp_wait(environ=None, busy: float | None = None, torch_loaded: bool | None = None,
                    workers: int = 1) -> str | None:
    """Sets OMP_WAIT_POLICY=PASSIVE in `environ` (os.environ) when other processes are running now
    (`busy`: how many, on average; when None, three readings a millisecond apart, a few ms in
    all) in at least half the readings (one reading of a kernel thread is a blip), or when this
    process is about to fork `workers` > 1 processes that each compute at the held thread count
    (a build's workers: each keeps the count, so their threads share the cores), and torch is
    not imported yet (after, libgomp has read its policy); a wait setting the user made is kept.
    Returns the policy set, else None. Which way threads wait changes no score: the thread count
    and the work each thread does stay the same."""
    environ = os.environ if environ is None else environ
    if torch_loaded is None:
        torch_loaded = "torch" in sys.modules
    if torch_loaded or any(environ.get(k, "").strip() for k in OMP_WAIT_KEYS):
        return None
    if workers <= 1 and busy is None:
        busy = busy_elsewhere(samples=3, interval=0.001)
    if workers > 1 or (busy is not None and busy >= 0.5):
        environ["OMP_WAIT_POLICY"] = "PASSIVE"
        return "PASSIVE"
    return None


# A core counts as taken by other processes once they keep it running this share of the time. DG
# on 2 cores: beside a process busy half the time, one thread decoded 5-9x faster than two, beside
# one busy a quarter of the time two were still 1.2x faster, and on an idle machine 1.7x
# (docs/results.md, bench/dg_causal_lm.py).
TAKEN_FROM = 0.25
_ceiling: int | None = None  # torch's thread count outside every `cpu_threads` block


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity), else the machine's."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _own_running() -> int:
    """This process's threads that are running or ready to run (Linux)."""
    n = 0
    for tid in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{tid}/stat", encoding="ascii", errors="replace") as f:
                n += f.read().rpartition(")")[2].split()[0] == "R"
        except (OSError, IndexError):
            pass
    return n


def busy_elsewhere(samples: int = 10, interval: float = 0.005) -> float | None:
    """How many cores other processes keep busy now: the machine's threads that are running or
    ready to run (/proc/loadavg) less this process's own, averaged over `samples` readings
    `interval` seconds apart (about 50 ms); None where Linux's /proc cannot be read."""
    total = 0
    for i in range(samples):
        if i:
            time.sleep(interval)
        others = others_running()
        if others is None:
            return None
        total += others
    return total / samples


def fitted_threads(ceiling: int, cores: int, busy: float | None) -> int:
    """`ceiling` threads, but no more than the `cores` other processes leave free (`busy` of them
    in use, a core counting as taken from TAKEN_FROM of it), and at least one; `ceiling` when
    `busy` is unknown."""
    if busy is None:
        return max(1, ceiling)
    taken = math.floor(busy + 1 - TAKEN_FROM)  # 0.25 busy takes a core, 1.25 two
    return max(1, min(ceiling, cores - taken))


def threads_fixed() -> bool:
    """OMP_NUM_THREADS set: the user chose torch's thread count, and `cpu_threads` keeps it."""
    return bool(os.environ.get("OMP_NUM_THREADS", "").strip())


class HeldThreads:
    """The one thread count a build computes at (`held_threads`): torch's when first asked for
    (`hold`), which is what OMP_NUM_THREADS or `torch.set_num_threads` made it, else one per core."""

    def __init__(self):
        self.threads: int | None = None

    def hold(self) -> int:
        """The held count, chosen on the first call; torch's count set back to it where something
        changed it since."""
        import torch

        if self.threads is None:
            self.threads = torch.get_num_threads()
        elif torch.get_num_threads() != self.threads:
            torch.set_num_threads(self.threads)
        return self.threads

    def record(self, state=None) -> int | list[int] | None:
        """What a manifest records: the held count (None where no model was asked for one), or
        under `accelerate launch` (`state` of several processes) each process's, one number where
        they agree. Every process must call it (it gathers)."""
        if state is None or state.num_processes == 1:
            return self.threads
        from accelerate.utils import gather_object

        counts = gather_object([self.hold()])
        return counts[0] if len(set(counts)) == 1 else counts


_held: HeldThreads | None = None  # inside `held_threads`: the count every `cpu_threads` yields


@contextlib.contextmanager
def held_threads():
    """A release build's model work at one torch thread count from start to end, whatever the load
    does meanwhile: `cpu_threads` inside it measures nothing and yields the held count. Torch is
    not imported here: a build without a model holds nothing (`HeldThreads.hold` imports it).
    Nested blocks share the outermost's count. Yields the `HeldThreads`."""
    global _held
    outermost = _held is None
    if outermost:
        _held = HeldThreads()
    try:
        yield _held
    finally:
        if outermost:
            _held = None


@contextlib.contextmanager
def cpu_threads(device):
    """Model work on `device` with torch's intra-op threads fitted to the machine's load now: on
    a CPU, torch's count (one per core by default, or what `torch.set_num_threads` set outside
    every such block) less one per core that other processes keep busy (`fitted_threads`).

    Each block measures the load again (about 50 ms), so a loop that opens one per batch follows
    the load as it changes; nested blocks fit to the outermost's count. With OMP_NUM_THREADS set,
    or on a GPU, nothing changes; inside `held_threads` (a release build) neither, the held count
    is yielded. Yields the threads used (None on a GPU). The count can change the last bits of a
    model's scores, as torch's own default, one per core, does from machine to machine."""
    global _ceiling
    import torch

    if torch.device(device).type != "cpu":
        yield None
        return
    if _held is not None:
        yield _held.hold()
        return
    before = torch.get_num_threads()
    if threads_fixed():
        yield before
        return
    outermost = _ceiling is None
    if outermost:
        _ceiling = before
    try:
        threads = fitted_threads(_ceiling, usable_cores(), busy_elsewhere())
        if threads != before:
            torch.set_num_threads(threads)
        yield threads
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)
        if outermost:
            _ceiling = None


choose_omp_wait()  # at import: advrace's commands import this module before torch
