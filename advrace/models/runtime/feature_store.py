"""Encoded features on disk, in Arrow: built once by `datasets`' `map`, then read memory-mapped.

All of RACE train at 512 tokens is 76,303 x 4 token sequences; held as Python tuples that is
over 20 GB, so training and the evaluation of large releases keep features here instead. A
feature is a frozen dataclass (MCFeature, SpanWindow, Seq2SeqFeature, CausalFeature, or a
plugin's); its Arrow columns follow its type hints, and a row becomes the same object again when
it is read, so collate functions and decoders see exactly what eager encoding gives them.

A cached table is keyed by a fingerprint of everything its rows depend on: the examples, the
tokenizer's content (not its name), and the caller's key (encoder, max_length, settings, seed).
A training set is stored in parts (the original questions, the copies a recipe adds), each
keyed on its own, so a changed recipe re-encodes the copies only. Encoding a list in parts
must give the same rows as encoding it whole: features are made per question, and a feature's
`example` field, where it has one, counts questions from the start of the list it was made from
(the store shifts it).
"""

from __future__ import annotations

import bisect
import contextlib
import dataclasses
import hashlib
import json
import os
import shutil
import types
import typing
from pathlib import Path
from typing import Callable, Sequence

from advrace import __version__
from advrace.core.atomic import atomic_dir
from advrace.core.errors import ConfigError
from advrace.core.examples import example_from_record, examples_sha256
from advrace.resources import ResourceConfig

# Part of every key, with advrace's version: bump it when a table's layout or an encoder's output
# changes, and older tables are not read again.
FORMAT = 1
EXAMPLE_FIELD = "example"
LENGTH_COLUMN = "_length"
BATCH = 500  # questions per `map` batch: a batch's Python features are what a worker holds
STORE_FROM = 2000  # questions from which the scorers keep a split's features here, not in memory
PARALLEL_FROM = 2000  # fewer questions are encoded in one process: a pool costs more than it saves


def default_cache_dir() -> Path:
    """The resources' cache folder: $ADVRACE_CACHE, else ~/.cache/advrace."""
    return ResourceConfig().resolved_cache_dir()


def tokenizer_fingerprint(tokenizer) -> str:
    """What the tokenizer does, not what it is called: its vocabulary, rules and special tokens.
    A fast tokenizer's truncation and padding state is left out: calls change it."""
    backend = getattr(tokenizer, "backend_tokenizer", None)
    if backend is not None:
        spec = json.loads(backend.to_str())
        spec.pop("truncation", None)
        spec.pop("padding", None)
    else:
        spec = sorted(tokenizer.get_vocab().items())
    extra = {"class": type(tokenizer).__name__, "special": getattr(tokenizer, "special_tokens_map", {}),
             "lower": getattr(tokenizer, "do_lower_case", None)}
    return _digest(json.dumps([spec, extra], sort_keys=True, default=str).encode())


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


# ------------------------------------------------------------------ features <-> Arrow rows

def _arrow_type(hint):
    from datasets import List, Value  # deferred for start-up time: datasets imports pyarrow

    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        inner = [a for a in args if a is not type(None)]
        if len(inner) == 1:
            return _arrow_type(inner[0])  # Arrow values are nullable
    elif origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return List(_arrow_type(args[0]))
        if args and all(a == args[0] for a in args):
            return List(_arrow_type(args[0]), length=len(args))
    elif hint in (int, str, bool, float):
        return Value({int: "int32", str: "string", bool: "bool", float: "float64"}[hint])
    raise TypeError(f"no Arrow column for a field of type {hint!r}")


def arrow_features(cls):
    """The Arrow columns of a feature dataclass, from its type hints, and the length column."""
    from datasets import Features, Value  # deferred for start-up time

    hints = typing.get_type_hints(cls)
    columns = {f.name: _arrow_type(hints[f.name]) for f in dataclasses.fields(cls)}
    return Features({**columns, LENGTH_COLUMN: Value("int32")})


def _frozen(value):
    return tuple(_frozen(v) for v in value) if isinstance(value, list) else value


class FeatureTable(Sequence):
    """Features read from Arrow tables one at a time (or a batch at a time), as the dataclass
    they were stored from. Parts are concatenated; the `example` field counts across them."""

    def __init__(self, cls, parts: list, example_counts: list[int]):
        self.cls = cls
        self.parts = parts
        self.names = [f.name for f in dataclasses.fields(cls)]
        self.shift = EXAMPLE_FIELD in self.names
        self.starts = [0]
        self.example_starts = [0]
        for part, n in zip(parts, example_counts):
            self.starts.append(self.starts[-1] + len(part))
            self.example_starts.append(self.example_starts[-1] + n)
        self.lengths = [n for part in parts for n in part[LENGTH_COLUMN]]

    def __len__(self) -> int:
        return self.starts[-1]

    def _feature(self, row: dict, part: int):
        values = {name: _frozen(row[name]) for name in self.names}
        if self.shift:
            values[EXAMPLE_FIELD] += self.example_starts[part]
        return self.cls(**values)

    def _locate(self, i: int) -> tuple[int, int]:
        if not -len(self) <= i < len(self):
            raise IndexError(f"feature {i} of {len(self)}")
        i %= len(self)
        part = bisect.bisect_right(self.starts, i) - 1
        return part, i - self.starts[part]

    def __getitem__(self, i: int):
        part, row = self._locate(i)
        return self._feature(self.parts[part][row], part)

    def take(self, indices: Sequence[int]) -> list:
        """Features at `indices`, read a part's rows at a time (a batch's worth is one read)."""
        located = [self._locate(i) for i in indices]
        out: list = [None] * len(indices)
        for part in sorted({p for p, _ in located}):
            mine = [(k, row) for k, (p, row) in enumerate(located) if p == part]
            columns = self.parts[part][[row for _, row in mine]]
            for j, (k, _) in enumerate(mine):
                out[k] = self._feature({name: columns[name][j] for name in self.names}, part)
        return out


def feature_lengths(features: Sequence) -> Sequence[int]:
    """Each feature's length, without reading the features back from a FeatureTable."""
    return features.lengths if isinstance(features, FeatureTable) else [f.length for f in features]


def take_features(features: Sequence, indices: Sequence[int]) -> list:
    return features.take(indices) if isinstance(features, FeatureTable) else [features[i] for i in indices]


# ------------------------------------------------------------------ building and reading the cache

def _encode_batch(batch: dict, indices: list[int], *, encode, cls):
    """`map`'s function: the batch's questions (JSON records) to feature rows."""
    examples = [example_from_record(json.loads(r)) for r in batch["record"]]
    columns: dict[str, list] = {f.name: [] for f in dataclasses.fields(cls)}
    columns[LENGTH_COLUMN] = []
    for feature in encode(examples):
        for name in columns:
            if name == LENGTH_COLUMN:
                columns[name].append(feature.length)
            elif name == EXAMPLE_FIELD:
                columns[name].append(indices[feature.example])
            else:
                columns[name].append(getattr(feature, name))
    return columns


@dataclasses.dataclass
class FeatureStore:
    """Where encoded features live: `directory` (a cache of Arrow tables), or None to encode into
    Python objects in memory, as before the cache existed (small inputs, and the baseline of
    bench/train_memory.py). `workers`: `map` processes; None: every core for large inputs."""

    directory: Path | None
    workers: int | None = None
    progress: bool = False
    built: list = dataclasses.field(default_factory=list)  # keys encoded by this store, for reports

    def encode(self, encode: Callable[[list], list], cls, parts: Sequence[Sequence], key: dict,
               what: str = "features") -> Sequence:
        """The features `encode` makes of the concatenated `parts` (lists of examples).
        `encode(examples)` must be picklable (a module function or functools.partial of one)."""
        if self.directory is None:
            return encode([ex for part in parts for ex in part])
        parts = [p for p in parts if len(p)]
        tables = [self._part(encode, cls, part, key, what) for part in parts]
        return FeatureTable(cls, tables, [len(p) for p in parts])

    def _part(self, encode, cls, examples: Sequence, key: dict, what: str):
        fingerprint = _digest(json.dumps({
            "format": FORMAT, "advrace": __version__, "class": f"{cls.__module__}.{cls.__qualname__}",
            "key": key, "examples": examples_sha256(examples)}, sort_keys=True, default=str).encode())
        folder = Path(self.directory) / "features" / fingerprint[:2] / fingerprint
        manifest = _read_manifest(folder, len(examples))
        table = _open(folder, manifest) if manifest is not None else None
        if table is None:  # none yet, or a damaged one
            shutil.rmtree(folder, ignore_errors=True)
            table = _open(folder, self._build(encode, cls, examples, key, folder, what))
            if table is None:
                raise RuntimeError(f"{folder}: the encoded {what} just written cannot be read back; "
                                   "delete the folder and run again")
        return table

    def _build(self, encode, cls, examples: Sequence, key: dict, folder: Path, what: str) -> dict:
        """Encode into a folder that appears whole or not at all, so a folder under its
        fingerprint is always a finished table (another run's, if two raced: the same)."""
        workers = self.workers or (min(os.cpu_count() or 1, 8) if len(examples) >= PARALLEL_FROM else 1)
        workers = max(1, min(workers, len(examples) // BATCH or 1))
        try:
            with atomic_dir(folder, "manifest.json", "feature table") as tmp:
                manifest = self._write(encode, cls, examples, key, tmp, workers, what)
        except OSError as exc:
            raise ConfigError(f"cannot write the encoded {what} to the feature cache {self.directory} "
                              f"({exc}); free some space there, or choose another folder "
                              "(`feature_cache: DIR` in a training config, or $ADVRACE_CACHE)") from None
        self.built.append(folder.name)
        return manifest

    def _write(self, encode, cls, examples: Sequence, key: dict, tmp: Path, workers: int, what: str) -> dict:
        import datasets  # deferred for start-up time
        from datasets.arrow_writer import ArrowWriter

        # The questions go to disk first, so that the workers map them rather than each being
        # sent a pickled copy, and the main process never holds them twice.
        records = tmp / "records.arrow"
        with ArrowWriter(features=datasets.Features({"record": datasets.Value("string")}),
                         path=str(records)) as writer:
            for start in range(0, len(examples), BATCH):
                writer.write_batch({"record": [json.dumps(ex.to_record(), ensure_ascii=False)
                                               for ex in examples[start:start + BATCH]]})
            writer.finalize()
        source = datasets.Dataset.from_file(str(records))
        with _mapping(self.progress, workers):
            encoded = source.map(
                _encode_batch, with_indices=True, batched=True, batch_size=BATCH,
                remove_columns=["record"], features=arrow_features(cls),
                num_proc=workers if workers > 1 else None, cache_file_name=str(tmp / "data.arrow"),
                new_fingerprint=tmp.name[1:41], fn_kwargs={"encode": encode, "cls": cls},
                desc=f"encoding {what}")
        manifest = {"format": FORMAT, "examples": len(examples), "rows": len(encoded),
                    "files": [Path(f["filename"]).name for f in encoded.cache_files],
                    "class": f"{cls.__module__}.{cls.__qualname__}", "key": key}
        del encoded, source
        records.unlink()
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1, default=str) + "\n",
                                           encoding="utf-8")
        return manifest


@contextlib.contextmanager
def _mapping(progress: bool, workers: int):
    """`datasets`' bars off unless `progress`; with several workers, no threads of the tokenizer's
    own, which would fight the forked workers for the cores. Both put back afterwards."""
    import datasets  # deferred for start-up time

    quiet = not progress and not datasets.are_progress_bars_disabled()
    saved = os.environ.get("TOKENIZERS_PARALLELISM")
    if quiet:
        datasets.disable_progress_bars()
    if workers > 1:
        os.environ["TOKENIZERS_PARALLELISM"] = "false"
    try:
        yield
    finally:
        if quiet:
            datasets.enable_progress_bars()
        if workers > 1 and saved is None:
            os.environ.pop("TOKENIZERS_PARALLELISM")
        elif workers > 1:
            os.environ["TOKENIZERS_PARALLELISM"] = saved


def _open(folder: Path, manifest: dict):
    """The table a manifest describes, memory-mapped; None when its files cannot be read whole."""
    from datasets import Dataset, concatenate_datasets  # deferred for start-up time

    try:
        tables = [Dataset.from_file(str(folder / name)) for name in manifest["files"]]
    except (OSError, ValueError):  # pyarrow's errors for a truncated or overwritten file
        return None
    table = concatenate_datasets(tables) if len(tables) > 1 else tables[0]
    return table if len(table) == manifest["rows"] else None


def _read_manifest(folder: Path, examples: int) -> dict | None:
    """A finished table's manifest, or None (then it is built again). A folder appears only
    when a build has finished, so a missing or stale manifest means damage or an old format."""
    try:
        manifest = json.loads((folder / "manifest.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    return manifest if manifest.get("format") == FORMAT and manifest.get("examples") == examples else None
