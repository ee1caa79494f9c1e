"""WordNet through nltk, offline: nltk's own data when the user has it, else Debian's
`wordnet-base` files copied into an nltk data folder with the `lexnames` file Debian lacks, read
by a reader that skips nltk's slow start-up. Antonyms are the one query the attacks make.
"""

from __future__ import annotations

import functools
import hashlib
import itertools
import json
import os
import re
import shutil
import tempfile
import threading
import warnings
from pathlib import Path
from typing import Any

from advrace.core.errors import ResourceMissing

from .packages import lean_import, package_version

DEBIAN_WORDNET_DIR = "/usr/share/wordnet"
WORDNET_HINT = (
    "install it with `apt-get install -y --no-install-recommends wordnet-base` "
    "(or `python -m nltk.downloader wordnet` when online)"
)
UPOS_TO_WORDNET = {"NOUN": "n", "VERB": "v", "ADJ": "a", "ADV": "r"}

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

# nltk data roots this process built, told apart from the user's own nltk data
_OUR_NLTK_ROOTS: set[str] = set()
_NLTK_LOCK = threading.Lock()


def lexnames_text() -> str:
    return "".join(
        "%02d\t%s\t%d\n" % (i, name, _LEXNAME_CATEGORY[name.split(".")[0]])
        for i, name in enumerate(_LEXNAMES)
    )


def _header_version(open_data_adj) -> str | None:
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
    lean_import("nltk")
    import nltk.data  # deferred for start-up time: importing nltk takes half a second

    paths = [p for p in nltk.data.path if str(p) not in exclude]
    try:
        return nltk.data.find("corpora/wordnet", paths=paths)
    except (LookupError, ValueError, OSError):
        return None


def _source_stamp(src: Path, names: list[str]) -> dict:
    return {
        "source": str(src),
        "files": {n: [(src / n).stat().st_size, (src / n).stat().st_mtime_ns] for n in names},
        "lexnames": "copied" if "lexnames" in names else "generated",
    }


def build_wordnet_dir(src: Path, nltk_root: Path) -> Path:
    """Copy WordNet into `<nltk_root>/corpora/wordnet` (plus a generated `lexnames`), atomically.

    nltk reads only from roots on nltk.data.path and refuses symlinks that leave them, so the
    files are copied; a stamp records the source so a changed source is rebuilt.
    """
    missing = [n for n in _WORDNET_REQUIRED if not (src / n).is_file()]
    if missing:
        raise ResourceMissing(f"WordNet folder {src} lacks {', '.join(missing)}; {WORDNET_HINT}")
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
            (tmp / "lexnames").write_text(lexnames_text(), encoding="utf-8")
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


# The files whose parse the index cache holds: satellites come from data.adj.
INDEX_FILES = ("data.adj", "index.noun", "index.verb", "index.adj", "index.adv")
INDEX_CACHE = "wordnet_index"


def _satellite_offsets(data_adj: str) -> set[int]:
    offsets = set()
    for line in data_adj.split("\n"):
        if not line.strip() or line.startswith(" "):
            continue
        fields = line.split()
        if len(fields) >= 3 and fields[2] == "s":
            offsets.add(int(fields[0]))
    return offsets


def _index_lines(fileid: str, text: str, sats: set[int], error: type):
    """(lemma, pos, offsets) per line of an index file, plus the satellite ("s") entry of each
    adjective, as nltk's reader fills its map."""
    for lineno, line in enumerate(text.split("\n"), 1):
        if not line.strip() or line.startswith(" "):
            continue
        parts = line.split()
        try:
            lemma, pos, n_synsets, n_pointers = parts[0], parts[1], int(parts[2]), int(parts[3])
            start = 6 + n_pointers
            offsets = [int(x) for x in parts[start : start + n_synsets]]
            if n_synsets <= 0 or int(parts[4 + n_pointers]) != n_synsets or len(offsets) != n_synsets:
                raise ValueError("synset counts disagree")
        except (IndexError, ValueError) as exc:
            raise error(f"file {fileid}, line {lineno}: {exc}") from exc
        yield lemma, pos, offsets
        if pos == "a":
            yield lemma, "s", [o for o in offsets if o in sats]


def _hash_code(h, code) -> None:
    """The bytecode and constants, nested code objects (comprehensions) by their own content:
    their repr holds a memory address, different in every process."""
    h.update(code.co_code)
    for const in code.co_consts:
        if hasattr(const, "co_code"):
            _hash_code(h, const)
        else:
            h.update(repr(const).encode())


def index_cache_key(raw: dict[str, bytes]) -> str:
    """sha256 of the parsed files' bytes and of the parsing code itself, so that neither other
    WordNet files nor a changed parser can read an old entry."""
    h = hashlib.sha256()
    for fn in (_satellite_offsets, _index_lines):
        _hash_code(h, fn.__code__)
    for name in sorted(raw):
        h.update(f"{name}\0{len(raw[name])}\0".encode())
        h.update(raw[name])
    return h.hexdigest()


def _read_index_cache(path: Path | None) -> dict | None:
    if path is None:
        return None
    try:
        with open(path, encoding="utf-8") as fh:
            data = json.load(fh)
        return data if isinstance(data, dict) and {"satellites", "lemmas"} <= data.keys() else None
    except (OSError, ValueError):
        return None


def _write_index_cache(path: Path | None, satellites: set[int], lemmas: dict) -> None:
    """Atomically (a temporary file renamed into place); a cache that cannot be written is skipped."""
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
        with os.fdopen(fd, "w", encoding="utf-8") as fh:  # dumps, not dump: the C encoder
            fh.write(json.dumps({"satellites": sorted(satellites), "lemmas": lemmas}, separators=(",", ":")))
        os.replace(tmp, path)
    except OSError:
        pass


@functools.lru_cache(maxsize=1)
def _offline_reader_class() -> type:
    lean_import("nltk")
    # deferred for start-up time: importing nltk takes half a second
    from nltk.corpus.reader.wordnet import WordNetCorpusReader, WordNetError

    class OfflineWordNetCorpusReader(WordNetCorpusReader):
        """nltk's reader minus its slow start-up: no WordNet-version mapping (it needs
        index.sense and costs seconds), and the index files parsed once per content: the parse
        is kept in `index_dir` under the files' sha256 (`index_cache_key`) and read back next time."""

        def __init__(self, root, omw_reader, index_dir: Path | None = None):
            self._index_dir = index_dir
            self._index_path: Path | None = None
            self._cached_lemmas: dict | None = None
            super().__init__(root, omw_reader)

        def map_wn(self, version="wordnet"):
            return None

        def _scan_satellites(self):  # nltk calls this first, then _load_lemma_pos_offset_map
            self._raw = {}
            for fileid in INDEX_FILES:
                with self.abspath(fileid).open() as fh:
                    self._raw[fileid] = fh.read()
            if self._index_dir is not None:
                self._index_path = self._index_dir / f"{index_cache_key(self._raw)}.json"
            cached = _read_index_cache(self._index_path)
            if cached is not None:
                self.satellite_offsets = set(cached["satellites"])
                self._cached_lemmas = cached["lemmas"]
            else:
                self.satellite_offsets = _satellite_offsets(self._raw["data.adj"].decode(self._ENCODING))

        def _load_lemma_pos_offset_map(self):
            raw, self._raw = self._raw, {}
            if self._cached_lemmas is not None:
                self._lemma_pos_offset_map.update(self._cached_lemmas)
                self._cached_lemmas = None
                return
            for suffix in self._FILEMAP.values():
                fileid = f"index.{suffix}"
                text = raw[fileid].decode(self._ENCODING)
                for lemma, pos, offsets in _index_lines(fileid, text, self.satellite_offsets, WordNetError):
                    self._lemma_pos_offset_map[lemma][pos] = offsets
            _write_index_cache(self._index_path, self.satellite_offsets, self._lemma_pos_offset_map)

    return OfflineWordNetCorpusReader


def _offline_wordnet_reader(nltk_root: Path, index_dir: Path | None = None):
    lean_import("nltk")
    import nltk.data  # deferred for start-up time: importing nltk takes half a second

    root = nltk.data.find("corpora/wordnet", paths=[str(nltk_root)])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=".*multilingual functions are not available")
        return _offline_reader_class()(root, None, index_dir)


def wordnet_source(wordnet_dir: str | None) -> tuple[str, Any]:
    """('nltk', pointer) for the user's regular nltk data, else ('dir', folder to copy)."""
    try:
        lean_import("nltk.data")  # deferred for start-up time, and only to see that nltk is installed
    except ImportError:
        raise ResourceMissing(
            f"nltk is not installed; `pip install nltk`, then {WORDNET_HINT}"
        ) from None
    if wordnet_dir:
        return "dir", Path(wordnet_dir).expanduser()
    own = _nltk_own_wordnet(_OUR_NLTK_ROOTS)
    if own is not None:
        return "nltk", own
    return "dir", Path(DEBIAN_WORDNET_DIR)


def _where(wordnet_dir: str | None) -> str:
    """Where WordNet came from, for the manifest: Debian's package, or a folder by name only."""
    return f"folder {Path(wordnet_dir).expanduser().name}" if wordnet_dir else "Debian wordnet-base"


def load_wordnet(wordnet_dir: str | None, cache_dir: Path) -> tuple[Any, str]:
    """(an nltk WordNetCorpusReader, where its data came from), built offline from Debian's files
    under `cache_dir` when nltk has no data of its own."""
    kind, source = wordnet_source(wordnet_dir)
    if kind == "nltk":
        lean_import("nltk")
        import nltk.corpus  # deferred for start-up time: importing nltk takes half a second

        wn = nltk.corpus.wordnet
        wn.ensure_loaded()
        return wn, "nltk_data"
    if not Path(source).is_dir():
        raise ResourceMissing(f"WordNet folder {source} does not exist; {WORDNET_HINT}")
    lean_import("nltk")
    import nltk.data  # deferred for start-up time: importing nltk takes half a second

    nltk_root = cache_dir / "nltk_data"
    build_wordnet_dir(Path(source), nltk_root)
    with _NLTK_LOCK:
        if str(nltk_root) not in nltk.data.path:
            nltk.data.path.append(str(nltk_root))
        _OUR_NLTK_ROOTS.add(str(nltk_root))
    return _offline_wordnet_reader(nltk_root, cache_dir / INDEX_CACHE), _where(wordnet_dir)


def wordnet_version(wordnet_dir: str | None, loaded: tuple[Any, str] | None = None) -> str:
    """The version line for the manifest: from the loaded reader and where it came from, else
    from the header of the data files it would load."""
    nltk_v = package_version("nltk") or "missing"
    if loaded is not None:
        reader, where = loaded
        wn_v = reader.get_version()
    else:
        try:
            kind, source = wordnet_source(wordnet_dir)
        except ResourceMissing:
            return "missing"
        if kind == "nltk":
            wn_v = _header_version(lambda: source.join("data.adj").open())
            where = "nltk_data"
        else:
            wn_v = _header_version(lambda: open(Path(source) / "data.adj", "rb"))
            where = _where(wordnet_dir)
    if wn_v is None:
        return f"missing ({where})"
    return f"WordNet {wn_v} (nltk {nltk_v}, {where})"


def reopen_files(reader) -> None:
    """Make the reader open its data files again on next use: a forked worker shares its
    parent's file offsets, so workers reading at once would corrupt each other's reads."""
    if reader is not None and getattr(reader, "_data_file_map", None):
        reader._data_file_map = {}


def wordnet_antonyms(wn, word: str, pos: str) -> list[str]:
    """Single-word WordNet antonyms of the word's lemmas (morphy's first, then its other
    analyses), in first-seen order; `pos` is a universal POS in UPOS_TO_WORDNET."""
    wn_pos = UPOS_TO_WORDNET[pos]
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
    return found


def verb_exceptions(wn) -> dict[str, list[str]]:
    """WordNet's irregular verb forms (verb.exc), each inflected form to its base forms."""
    return getattr(wn, "_exception_map", {}).get("v", {})
