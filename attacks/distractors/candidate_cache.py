"""The candidates a model proposes, computed once for the splits of one build that differ only in
how they filter and choose (`SELECTION_FIELDS`): a release with DG with and without `select_with`
runs the generator once."""

from __future__ import annotations

import dataclasses
import json
import weakref

from .config import SELECTION_FIELDS


class _Candidates(dict):
    """One proposing setting's candidates by question (a dict that can be weakly referenced)."""


# Per proposing setting, the candidates shared by the attacks alive at once (one build's splits)
# and gone with them, so that no build, ablation run or test leaves its candidates behind.
_CANDIDATES: weakref.WeakValueDictionary = weakref.WeakValueDictionary()


def cached_candidates(attack, examples: list, progress: bool) -> list[list[str]]:
    """`attack.candidates` of the examples, from the cache where an attack of the same proposing
    setting computed them. The key holds the checkpoint's sha256, every other config value and the
    proposing method itself, so nothing else can share an entry; the attack holds its entry alive."""
    config = {k: v for k, v in dataclasses.asdict(attack.config).items() if k not in SELECTION_FIELDS}
    key = (type(attack).__name__, attack.checkpoint_sha256, json.dumps(config, sort_keys=True, default=str),
           getattr(attack.candidates, "__func__", attack.candidates))
    cache = _CANDIDATES.get(key)
    if cache is None:
        cache = _CANDIDATES[key] = _Candidates()
    attack._candidates_held = cache  # kept alive by this attack, as long as it is
    keyed = [(ex.source_id, ex.passage, ex.question, ex.options) for ex in examples]
    todo = list({k: ex for k, ex in zip(keyed, examples) if k not in cache}.items())
    if todo:
        for (k, _), cands in zip(todo, attack.candidates([ex for _, ex in todo], progress)):
            cache[k] = list(cands)
    return [cache[k] for k in keyed]
