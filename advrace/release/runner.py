"""Run a release's attacks over passages, in parallel worker processes.

Questions that share a passage are processed together, by every attack in turn, so the
resources' parse caches see each passage once however many questions and attacks use it.
Groups of passages go to worker processes; every attack takes its randomness from a generator
seeded by the example's source id, so the results are the same for any number of workers.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

from advrace.core.config import ReleaseConfig, SplitSpec
from advrace.core.errors import ConfigError
from advrace.core.paths import MODEL, WHERE_PATHS_ARE_READ, missing_paths
from advrace.core.provenance import AttackSummary
from advrace.models.runtime.precision import choose_omp_wait, held_threads

ORIGINAL = "original"
CHUNK_PASSAGES = 16
# Forked workers share the models their parent loaded (`Attack.preload`), each copy probed first;
# False: every worker loads its own, as before (the tests compare the two).
SHARE_MODELS = True


@dataclass(frozen=True)
class SplitResult:
    examples: list
    perturbed: list[bool]
    reasons: list[str | None]


def passage_groups(examples: list) -> list[list[int]]:
    """Indices of examples grouped by passage (or context), in order of first appearance."""
    groups: dict[str, list[int]] = {}
    for i, ex in enumerate(examples):
        groups.setdefault(ex.passage_text, []).append(i)
    return list(groups.values())


def _checked_specs(cfg: ReleaseConfig):
    """(spec, seed) per split, after checking that each split is built from an earlier one."""
    known = {ORIGINAL}
    for spec in cfg.splits:
        if spec.source not in known:
            raise ConfigError(f"split {spec.split!r} is built from {spec.source!r}, which is not an "
                              f"earlier split; earlier splits: {', '.join(sorted(known))}")
        yield spec, cfg.seed if spec.seed is None else spec.seed
        known.add(spec.split)


def check_splits(cfg: ReleaseConfig) -> None:
    """What can be checked before any data is read (attack names, their configs, split order), so
    that a typo in the config is not hidden behind a data error or an hour of loading."""
    from advrace.attacks import attacks_named  # deferred for start-up time: importing the attacks loads every attack module

    where = f"{cfg.source_file}: " if cfg.source_file else ""
    for key, path, _ in missing_paths(cfg.resources):
        if key != "cache_dir":  # made when first needed
            raise ConfigError(f"{where}resources.{key} {path}: no such file or folder{WHERE_PATHS_ARE_READ}")
    for spec, seed in _checked_specs(cfg):
        errors = []
        for cls in attacks_named(spec.attack):  # one class per task: the config must suit one of them
            try:
                cls(spec.config, seed=seed)
                break
            except ConfigError as exc:
                errors.append(exc)
        else:
            raise errors[0]
        check_split_paths(spec, cls, where)


def check_split_paths(spec: SplitSpec, cls, where: str = "") -> None:
    """Every file, folder and local model that a split's config names exists: a missing model is
    reported before the data is read, not after, with what to do about it."""
    for key, path, kind in missing_paths(spec.config):
        hint = ""
        if key == "model" and getattr(cls, "train_hint", None):
            run = os.path.dirname(path) if os.path.basename(path) in ("final", "best") else path
            hint = f"; train it with {cls.train_hint.rstrip('`')} --output-dir {run}`"
        elif key == "select_with":
            hint = ("; give a multiple-choice checkpoint folder (`advrace train`) or a built-in reader "
                    "(sliding-window, similarity)")
        elif key == "judge":
            hint = ("; give a multiple-choice checkpoint folder (`advrace train`), a causal-LM folder or a Hub "
                    "name, or remove the judge key")
        raise ConfigError(f"{where}split {spec.split!r}: {key} {path}: no such "
                          f"{'folder' if kind == MODEL else 'file or folder'}{hint}{WHERE_PATHS_ARE_READ}")


def make_attacks(cfg: ReleaseConfig, resources, task: str | None = None) -> list:
    from advrace.attacks import get_attack  # deferred for start-up time: importing the attacks loads every attack module

    return [get_attack(spec.attack, task)(spec.config, seed=seed, resources=resources)
            for spec, seed in _checked_specs(cfg)]


def settle(attack, outcome) -> tuple:
    """(example, perturbed, reason); an unchanged example records why in its provenance."""
    new = outcome.example if outcome.perturbed else outcome.example.with_provenance(
        AttackSummary(attack.name, unchanged=outcome.reason))
    return new, outcome.perturbed, outcome.reason


class Runner:
    """Applies every split's attack to one passage's questions, each split from its source split."""

    def __init__(self, specs: tuple[SplitSpec, ...], attacks: list):
        self.specs = specs
        self.attacks = attacks

    def run_group(self, examples: list) -> dict[str, list]:
        out: dict[str, list] = {spec.split: [] for spec in self.specs}
        for ex in examples:
            current = {ORIGINAL: ex}
            for spec, attack in zip(self.specs, self.attacks):
                item = settle(attack, attack.apply(current[spec.source]))
                current[spec.split] = item[0]
                out[spec.split].append(item)
        return out

    def run_groups(self, groups: list[list]) -> list[dict]:
        """Several passages at once: attacks first analyse them all in one batch."""
        flat = [ex for group in groups for ex in group]
        for attack in self.attacks:
            attack.prepare(flat)
        return [self.run_group(group) for group in groups]


_WORKER: tuple[Runner, object] | None = None
_NOTES: list[str] = []  # a worker's notes not yet sent to the parent


def _shared_models(attacks: list) -> tuple[dict, int | None]:
    """Load the attacks' models in the parent (`Attack.preload`), so that forked workers share them,
    with the probe log-probs each worker's copy must reproduce and the torch thread count they
    were computed at (the build's held count, which the workers then compute at too)."""
    if not SHARE_MODELS:
        return {}, None
    keys = {key for attack in attacks for key in attack.preload()}
    if not keys:
        return {}, None
    from advrace.models.decoders.loaded_lm import fork_references  # deferred: start-up time

    with held_threads() as held:
        threads = held.hold()
        return fork_references(keys), threads


def _init_worker(runner: Runner, resources, references: dict, threads: int | None) -> None:
    global _WORKER
    resources.after_fork()
    _WORKER = (runner, resources)
    if references:
        import torch  # deferred: start-up time (here only when the parent loaded a model)

        from advrace.models.decoders.loaded_lm import check_forked  # deferred: start-up time (as above)

        torch.set_num_threads(threads)  # the parent's count: a fork need not keep it, and it moves scores' last bits
        for note in check_forked(references):
            print(f"note: build worker {os.getpid()}: {note}", file=sys.stderr, flush=True)
            _NOTES.append(note)


def _run_chunk(chunk: list[list]) -> tuple[list[dict], dict, list[str]]:
    """A chunk's outcomes, plus the word tags the worker computed, for the on-disk lexicon, and
    the worker's notes not yet sent (a forked model that failed its probe)."""
    runner, resources = _WORKER
    notes = _NOTES[:]
    _NOTES.clear()
    return runner.run_groups(chunk), resources.take_new_word_tags(), notes


def default_workers() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def run_splits(cfg: ReleaseConfig, examples: list, resources, *, workers: int | None = None,
                progress: bool = False, state=None, record: dict | None = None
                ) -> tuple[list, dict[str, SplitResult]]:
    """Returns the attack objects and, per split, its examples in input order. `record`, where
    given, gets `forked_model_fallbacks`: the build workers whose shared model failed its probe
    (each loaded its own), where any did.

    Rule-based attacks run first, passage by passage in worker processes; model-based ones
    (`batched`) then take their whole source split at once, sharded over `state`'s processes, at
    one torch thread count whatever the load (advrace.models.runtime.precision.held_threads).
    """
    attacks = make_attacks(cfg, resources, examples[0].task if examples else None)
    pairs = list(zip(cfg.splits, attacks))
    rule = [(spec, a) for spec, a in pairs if not a.batched]
    model_splits = {spec.split for spec, a in pairs if a.batched}
    for spec, _ in rule:
        if spec.source in model_splits:
            raise ConfigError(f"split {spec.split!r}: a rule-based attack cannot be built from the "
                              f"model-based split {spec.source!r}; build it from 'original' or a "
                              "rule-based split")
    by_split, fallbacks = _run_rule_based([s for s, _ in rule], [a for _, a in rule], examples, resources,
                                          workers, progress)
    if fallbacks and record is not None:
        record["forked_model_fallbacks"] = fallbacks
    # every model at one torch thread count, here as in a build (training's adversarial copies too)
    with held_threads():
        for spec, attack in pairs:
            if not attack.batched:
                continue
            source = examples if spec.source == ORIGINAL else by_split[spec.source].examples
            items = [settle(attack, o) for o in attack.apply_batch(source, state=state, progress=progress)]
            by_split[spec.split] = SplitResult([i[0] for i in items], [i[1] for i in items],
                                               [i[2] for i in items])
    return attacks, {spec.split: by_split[spec.split] for spec in cfg.splits}


def _run_rule_based(specs: list, attacks: list, examples: list, resources, workers, progress
                    ) -> tuple[dict[str, SplitResult], int]:
    """Per split, its results; and how many workers' shared models failed their probe."""
    runner = Runner(tuple(specs), attacks)
    groups = passage_groups(examples)
    results: list[dict | None] = [None] * len(groups)
    # A fixed chunk size, so that spaCy sees the same batches whatever the number of workers.
    chunks = [list(range(s, min(s + CHUNK_PASSAGES, len(groups)))) for s in range(0, len(groups), CHUNK_PASSAGES)]
    # No more workers than chunks: a build of one chunk runs in this process, with no fork.
    workers = max(1, min(workers or default_workers(), len(chunks)))
    payload = [[[examples[i] for i in groups[gi]] for gi in chunk] for chunk in chunks]
    bar = _bar(len(examples), progress and bool(specs))
    fallbacks = 0

    def collect(chunk, outs):
        for gi, out in zip(chunk, outs):
            results[gi] = out
            bar.update(len(groups[gi]))

    if specs and workers == 1:
        for chunk, part in zip(chunks, payload):
            collect(chunk, runner.run_groups(part))
    elif specs:
        # each worker computes at the held count, so their threads share the cores: a thread
        # spinning at a barrier would take the core from a thread of another worker (2.4x slower
        # on 2 cores: docs/results.md, "Build workers and torch's threads")
        choose_omp_wait(workers=workers)
        resources.preload({key for attack in attacks for key in attack.uses})
        # fork: workers inherit the loaded resources, models and the attacks instead of unpickling
        # them; an executor (unlike multiprocessing.Pool) raises when a worker dies instead of hanging.
        pool = ProcessPoolExecutor(workers, mp_context=multiprocessing.get_context("fork"),
                                   initializer=_init_worker, initargs=(runner, resources, *_shared_models(attacks)))
        try:
            futures = [pool.submit(_run_chunk, part) for part in payload]
            for chunk, future in zip(chunks, futures):
                outs, word_tags, notes = future.result()
                collect(chunk, outs)
                resources.add_word_tags(word_tags)
                fallbacks += len(notes)
        finally:
            pool.shutdown(wait=True, cancel_futures=True)
    bar.close()
    resources.save_word_tags()

    by_split: dict[str, SplitResult] = {}
    for spec in specs:
        slots: list = [None] * len(examples)
        for group, out in zip(groups, results):
            for i, item in zip(group, out[spec.split]):
                slots[i] = item
        by_split[spec.split] = SplitResult([s[0] for s in slots], [s[1] for s in slots],
                                           [s[2] for s in slots])
    return by_split, fallbacks


def _bar(total: int, enabled: bool):
    from tqdm.auto import tqdm

    return tqdm(total=total, desc="attacking", unit="q", dynamic_ncols=True, leave=False, disable=not enabled)
