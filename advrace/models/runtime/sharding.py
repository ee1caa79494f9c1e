"""Data-parallel inference under Accelerate: each process handles one contiguous shard of the
items, and every process gets all results back in input order. One process (a laptop, or a
plain `python` run) simply maps over everything."""

from __future__ import annotations

from typing import Callable, Sequence


def map_sharded(fn: Callable[[list], list], items: Sequence, state=None) -> list:
    """`fn(items)` computed shard by shard across `state`'s processes (an Accelerator or
    PartialState; None means one process)."""
    items = list(items)
    if state is None or state.num_processes == 1:
        return list(fn(items))
    from accelerate.utils import gather_object

    with state.split_between_processes(list(range(len(items)))) as shard:
        local = list(fn([items[i] for i in shard]))
        pairs = list(zip(shard, local))
    results: list = [None] * len(items)
    for i, value in gather_object(pairs):
        results[i] = value
    return results


def end_processes() -> None:
    """Under torchrun / `accelerate launch`: wait for every process, then close the process group.
    A group left to the interpreter's exit can abort a process ("terminate called without an
    active exception", seen on a loaded machine) when another has already left. Nothing to do
    where torch.distributed was never started (nor imported: no start-up cost)."""
    import sys

    dist = sys.modules.get("torch.distributed")
    if dist is None or not dist.is_available() or not dist.is_initialized():
        return
    dist.barrier()
    dist.destroy_process_group()


def process_state():
    """Accelerate's state of this process: several processes under `accelerate launch` or
    torchrun (on CPUs too, where accelerate otherwise assumes one), else one."""
    import os

    import torch
    from accelerate import PartialState

    cpu = os.environ.get("ACCELERATE_USE_CPU", "").lower() in ("1", "true", "yes") or not torch.cuda.is_available()
    return PartialState(cpu=cpu)
