"""A GGUF checkpoint (the built-in `smollm2`) converted once into an ordinary Hugging Face folder
(config.json, tokenizer.json, fp32 model.safetensors) in the user's cache folder, and read from
there the next time.

Reading a GGUF through Transformers parses the file once each for the config, the tokenizer and
the weights, converts its tokenizer and dequantises every tensor: about 30 s a load on a laptop
for SmolLM2-135M. The converted folder loads in a second or two.

The folder sits under `<cache>/converted/` (the resources' cache: $ADVRACE_CACHE, else
~/.cache/advrace), named after the GGUF's sha256, the Transformers and gguf versions and this
module's FORMAT, so a changed file or library never reads a stale conversion. It is written under
a temporary name and renamed into place once complete, so a killed conversion, or two processes
converting at once, never leave a half folder under the final name; its manifest (written last)
holds every file's sha256, checked on each read: a damaged folder is said, removed and converted
again. Before it is published, the folder is loaded back and must give the GGUF load's
tokenization, config and bit-identical weights and logits on a probe; otherwise nothing is cached,
the GGUF load is used, and that is said. ADVRACE_CONVERTED_MODELS=0 turns all of it off.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

FORMAT = 1  # bumped whenever what is written, or how it is checked, changes
DISABLE = "ADVRACE_CONVERTED_MODELS"
MANIFEST = "advrace-conversion.json"
_STALE_TEMP_SECONDS = 6 * 3600  # a temporary folder this old is a killed conversion's
_OFF = {"0", "OFF", "NO", "FALSE"}
# a GGUF load's config keys that are no part of the model: the quantizer's settings, the name
# (where it was read), what wrote it and which architecture (the folder's config names its class)
_GGUF_ONLY = {"quantization_config", "_name_or_path", "name_or_path", "transformers_version", "architectures"}

# What happened, per process, for tests and benches: converted, reused, damaged, mismatch, refused
EVENTS: Counter = Counter()

PROBE_TEXTS = ("The quick brown fox jumps over the lazy dog.",
               "Ünïcödé: naïve café, 東京, Привет, emoji 🙂 and a tab\tand\nnewline",
               "  leading spaces, trailing  ", "<|im_start|>user\nWhat is 2+2?<|im_end|>\n",
               "Question: Who wrote it?\nAnswer: A. Tom B. Ann C. Bo D. Lee", "")
PROBE_CHAT = [{"role": "system", "content": "Answer briefly."}, {"role": "user", "content": "Où est le café ?"}]

Loader = Callable[[str | None], tuple]  # a folder (None: the GGUF itself) -> (tokenizer, model)


def enabled() -> bool:
    """Whether converted copies are read and written ($ADVRACE_CONVERTED_MODELS=0 turns them off)."""
    return os.environ.get(DISABLE, "1").strip().upper() not in _OFF


def converted_root() -> Path:
    """Where converted models are kept: `converted/` in the resources' cache folder."""
    from advrace.resources import ResourceConfig  # deferred: start-up time (advrace.resources imports numpy)

    return ResourceConfig().resolved_cache_dir() / "converted"


_HASHES: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    """A file's sha256, computed once per process for a given size and modification time."""
    stat = path.stat()
    key = (str(path.resolve()), stat.st_size, stat.st_mtime_ns)
    if key not in _HASHES:
        h = hashlib.sha256()
        with open(path, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 22), b""):
                h.update(chunk)
        _HASHES[key] = h.hexdigest()
    return _HASHES[key]


def conversion_key(gguf_path: Path) -> dict:
    """Everything a conversion depends on: the file's bytes, the libraries that read and dequantise
    it, and this module's format."""
    return {"source": gguf_path.name, "sha256": file_sha256(gguf_path), "format": FORMAT, **library_versions()}


def library_versions() -> dict:
    """The versions of the libraries that read a GGUF and dequantise it."""
    import gguf
    import transformers

    return {"transformers": transformers.__version__, "gguf": getattr(gguf, "__version__", None) or _dist_version("gguf")}


def _dist_version(name: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return "unknown"


def folder_for(key: dict) -> Path:
    """The converted folder's path for `key`: one name per file content and library versions."""
    stem = Path(key["source"]).stem.replace(" ", "_")
    return converted_root() / f"{stem}-{key['sha256'][:16]}-tf{key['transformers']}-gguf{key['gguf']}-v{key['format']}"


def check_folder(folder: Path, key: dict) -> str | None:
    """Why `folder` cannot be used for `key` (no manifest, another key, a file missing or changed),
    or None when it is complete and intact."""
    try:
        manifest = json.loads((folder / MANIFEST).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return f"no readable {MANIFEST}"
    if not isinstance(manifest, dict) or manifest.get("key") != key:
        return "made for another file or library version"
    files = manifest.get("files")
    if not isinstance(files, dict) or not files:
        return "its manifest lists no files"
    for name, digest in files.items():
        path = folder / name
        if not path.is_file():
            return f"{name} is missing"
        if file_sha256(path) != digest:
            return f"{name} differs from what was written"
    return None


def manifest_of(gguf_path: Path) -> dict | None:
    """The manifest of `gguf_path`'s intact converted folder, or None (none, disabled, damaged)."""
    if not enabled():
        return None
    key = conversion_key(gguf_path)
    folder = folder_for(key)
    if not folder.is_dir() or check_folder(folder, key) is not None:
        return None
    return json.loads((folder / MANIFEST).read_text(encoding="utf-8"))


# --------------------------------------------------------------------------- one parse of the GGUF

_KINDS: dict[str, list] = {}  # a GGUF's sha256 -> its tensor types in file order, counted


def tensor_kinds(gguf_path: Path) -> list[list]:
    """[[ggml type name, how many tensors], ...] of a GGUF, in the order the types first appear
    (Counter(...).most_common() of it is what reports print): from this process's parse, else from
    its converted folder's manifest, else read from the file."""
    sha = file_sha256(gguf_path)
    if sha not in _KINDS:
        manifest = manifest_of(gguf_path)
        if manifest and isinstance(manifest.get("tensor_kinds"), list):
            _KINDS[sha] = manifest["tensor_kinds"]
        else:
            import gguf

            _KINDS[sha] = _count_kinds(gguf.GGUFReader(str(gguf_path)))
    return _KINDS[sha]


def _count_kinds(reader) -> list[list]:
    return [[kind, n] for kind, n in Counter(t.tensor_type.name for t in reader.tensors).items()]


@contextlib.contextmanager
def one_parse():
    """Inside, every `gguf.GGUFReader(path)` of one path returns one reader, and every
    `gguf.get_tensor_name_map(arch, blocks)` one map: Transformers reads the file for the config,
    the tokenizer and the weights (and reports for its tensor types), each by a reader of its own,
    and builds the same name map again for every module of the model; parsing and building are
    most of a load. Readers and maps are only read (tensors are copied when dequantised), so
    sharing them changes nothing they return; a conversion checks that on its probe all the same,
    and the slow test against a load without them. Yields {(path, mode): reader}."""
    import gguf

    original_reader, original_map = gguf.GGUFReader, gguf.get_tensor_name_map
    readers: dict = {}

    def shared_reader(path, mode="r"):
        key = (os.path.realpath(os.fspath(path)), mode)
        if key not in readers:
            readers[key] = original_reader(path, mode)
        return readers[key]

    gguf.GGUFReader = shared_reader
    gguf.get_tensor_name_map = functools.lru_cache(maxsize=None)(original_map)
    try:
        yield readers
    finally:
        gguf.GGUFReader, gguf.get_tensor_name_map = original_reader, original_map


# --------------------------------------------------------------------------- reading and converting


def load(gguf_path: Path, loader: Loader) -> tuple:
    """(tokenizer, model) of a GGUF checkpoint: from its converted folder when there is an intact
    one, else loaded from the GGUF (parsed once) and converted for the next time.

    `loader(folder)` loads (tokenizer, model) from a converted folder, or from the GGUF itself when
    given None, with the caller's load options either way."""
    if not enabled():
        return loader(None)
    key = conversion_key(gguf_path)
    folder = folder_for(key)
    if folder.is_dir():
        why = check_folder(folder, key)
        if why is None:
            EVENTS["reused"] += 1
            return loader(str(folder))
        EVENTS["damaged"] += 1
        _say(f"the converted copy of {gguf_path.name} at {folder} cannot be used ({why}); converting it again")
        _discard(folder)
    if _refused(folder).is_file():
        EVENTS["refused"] += 1
        return loader(None)
    return _convert(gguf_path, key, folder, loader)


def _convert(gguf_path: Path, key: dict, folder: Path, loader: Loader) -> tuple:
    """The GGUF load (parsed once), its converted folder written, checked and published."""
    with one_parse() as readers:
        tokenizer, model = loader(None)
        reader = readers.get((os.path.realpath(gguf_path), "r"))
        if reader is not None:
            _KINDS[key["sha256"]] = _count_kinds(reader)
    try:
        folder.parent.mkdir(parents=True, exist_ok=True)
        _clear_stale_temps(folder.parent)
        temp = Path(tempfile.mkdtemp(prefix=f".tmp-{folder.name}-", dir=folder.parent))
        temp.chmod(0o777 & ~_umask())  # the user's usual permissions, not mkdtemp's 0700
    except OSError as exc:
        _say(f"cannot write a converted copy of {gguf_path.name} under {folder.parent} ({exc}); "
             "it is read from the GGUF each time")
        return tokenizer, model
    try:
        _write(temp, key, tokenizer, model, loader, gguf_path)
        if _publish(temp, folder):
            _say(f"{gguf_path.name} converted once into {folder} (about {_size_mb(folder)} MB); later loads read it. "
                 f"{DISABLE}=0 turns this off; removing the folder clears it")
    except ProbeMismatch as exc:
        EVENTS["mismatch"] += 1
        _say(f"the converted copy of {gguf_path.name} does not load as the GGUF does ({exc}); not cached, "
             "the GGUF is read each time")
        with contextlib.suppress(OSError):
            _refused(folder).write_text(str(exc) + "\n", encoding="utf-8")
    except OSError as exc:
        _say(f"cannot write a converted copy of {gguf_path.name} ({exc}); it is read from the GGUF each time")
    finally:
        _discard(temp)
    return tokenizer, model


def _write(temp: Path, key: dict, tokenizer, model, loader: Loader, gguf_path: Path) -> None:
    """The folder's files, checked by loading them back, and its manifest (last)."""
    if not save_folder(model, tokenizer, temp):
        raise OSError("save_pretrained wrote nothing")
    try:
        back_tokenizer, back_model = loader(str(temp))
    except (OSError, ValueError, KeyError, RuntimeError) as exc:
        raise ProbeMismatch(f"it would not load: {exc}") from exc
    verify(tokenizer, model, back_tokenizer, back_model)
    del back_model
    files = {p.name: file_sha256(p) for p in sorted(temp.iterdir()) if p.is_file()}
    manifest = {"key": key, "files": files, "tensor_kinds": _KINDS.get(key["sha256"]),
                "converted_from": str(gguf_path)}
    with open(temp / MANIFEST, "w", encoding="utf-8") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
        f.flush()
        os.fsync(f.fileno())


def save_folder(model, tokenizer, folder: Path) -> bool:
    """Config, generation config, weights (safetensors, tied ones once) and tokenizer written to
    `folder`, as an ordinary checkpoint: without the GGUF quantizer Transformers attaches to a
    GGUF load (its weights are plain tensors by then), for which `save_pretrained` refuses to
    save. Whether any file was written."""
    from safetensors.torch import save_model

    config = {k: v for k, v in model.config.to_dict().items() if k not in _GGUF_ONLY}
    config["architectures"] = [type(model).__name__]
    (folder / "config.json").write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    if getattr(model, "generation_config", None) is not None:
        model.generation_config.save_pretrained(folder)
    save_model(model, str(folder / "model.safetensors"), metadata={"format": "pt"})
    tokenizer.save_pretrained(folder)
    return any(folder.iterdir())


def _publish(temp: Path, folder: Path) -> bool:
    """`temp` renamed to `folder`, at once; whether it was. Another process that got there first
    wins (its folder was checked as this one was), and this one is discarded."""
    try:
        os.rename(temp, folder)
    except OSError:
        if not folder.is_dir():
            raise
        return False
    EVENTS["converted"] += 1
    return True


def _size_mb(folder: Path) -> int:
    return round(sum(p.stat().st_size for p in folder.iterdir() if p.is_file()) / 1e6)


def _refused(folder: Path) -> Path:
    """The marker a failed probe leaves, so later loads read the GGUF without converting again."""
    return folder.with_name(folder.name + ".mismatch")


def _discard(path: Path) -> None:
    """Remove a folder: renamed aside first, so no reader ever sees it half removed."""
    if not path.exists():
        return
    aside = path.with_name(f".tmp-removed-{path.name}-{os.getpid()}-{time.monotonic_ns()}")
    try:
        os.rename(path, aside)
    except OSError:
        aside = path
    shutil.rmtree(aside, ignore_errors=True)


def _clear_stale_temps(root: Path) -> None:
    """Temporary folders left by conversions killed long ago."""
    now = time.time()
    for temp in root.glob(".tmp-*"):
        with contextlib.suppress(OSError):
            if now - temp.stat().st_mtime > _STALE_TEMP_SECONDS:
                shutil.rmtree(temp, ignore_errors=True)


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def _say(text: str) -> None:
    print(f"note: {text}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- the probe


class ProbeMismatch(Exception):
    """The converted folder loads differently from the GGUF."""


def verify(tokenizer, model, back_tokenizer, back_model) -> None:
    """ProbeMismatch unless the folder's tokenizer and model are the GGUF's: the same tokenization
    of the probe texts (with and without special tokens), special tokens, chat template, config,
    bit-identical weights and bit-identical logits."""
    for what, a, b in tokenizer_facts(tokenizer, back_tokenizer):
        if a != b:
            raise ProbeMismatch(f"tokenizer {what}: {a!r} != {b!r}")
    ours, theirs = _config(model), _config(back_model)
    if ours != theirs:
        diff = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
        raise ProbeMismatch(f"config differs in {', '.join(diff)}")
    _same_weights(model, back_model)
    _same_logits(tokenizer, model, back_model)


def tokenizer_facts(tokenizer, back):
    """(what, the GGUF tokenizer's, the folder's) for every tokenizer fact the scorers rely on."""
    for attr in ("padding_side", "truncation_side", "model_max_length", "bos_token_id", "eos_token_id",
                 "pad_token_id", "unk_token_id", "all_special_tokens", "chat_template"):
        yield attr, getattr(tokenizer, attr, None), getattr(back, attr, None)
    yield "length", len(tokenizer), len(back)
    yield "class", type(tokenizer).__name__, type(back).__name__
    for text in PROBE_TEXTS:
        for special in (True, False):
            ids = tokenizer(text, add_special_tokens=special)["input_ids"]
            yield f"ids of {text!r}", ids, back(text, add_special_tokens=special)["input_ids"]
            yield f"decoding of {text!r}", tokenizer.decode(ids), back.decode(ids)
    if getattr(tokenizer, "chat_template", None):
        yield "chat template", *(t.apply_chat_template(PROBE_CHAT, tokenize=False, add_generation_prompt=True)
                                 for t in (tokenizer, back))


def _config(model) -> dict:
    skip = _GGUF_ONLY
    out = {k: v for k, v in model.config.to_dict().items() if k not in skip}
    generation = getattr(model, "generation_config", None)
    generation = generation.to_dict() if generation is not None else {}
    out["generation_config"] = {k: v for k, v in generation.items() if k not in skip}
    return out


def _same_weights(model, back_model) -> None:
    import torch

    ours, theirs = model.state_dict(), back_model.state_dict()
    if set(ours) != set(theirs):
        raise ProbeMismatch(f"weights differ in names: {sorted(set(ours) ^ set(theirs))[:5]}")
    for name, tensor in ours.items():
        other = theirs[name]
        if tensor.dtype != other.dtype or tensor.shape != other.shape or not torch.equal(tensor, other.to(tensor.device)):
            raise ProbeMismatch(f"weight {name} differs")


def _same_logits(tokenizer, model, back_model) -> None:
    import torch

    ids = [i for text in PROBE_TEXTS for i in tokenizer(text)["input_ids"]][:256]
    batch = torch.tensor([ids])
    with torch.no_grad():
        ours = model(batch.to(model.device)).logits
        theirs = back_model(batch.to(back_model.device)).logits
    if not torch.equal(ours.cpu(), theirs.cpu()):
        raise ProbeMismatch(f"logits differ (at most {(ours.cpu() - theirs.cpu()).abs().max().item():.3g})")
