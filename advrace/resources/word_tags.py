"""The part of speech of words tagged on their own, kept on disk per spaCy model.

Attacks use it to keep a replacement's part of speech. Tagging a lone word costs about as much
as tagging a sentence, so the tags are kept between runs; they are a function of the word and
the model, so a release does not depend on what the cache holds.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path

Tags = tuple[str, str]  # (universal POS, Penn tag)


def lexicon_path(cache_dir: Path, model_name: str, meta: dict | None) -> Path:
    """One file per spaCy model and version under `<cache>/word_tags`."""
    meta = meta or {}
    name = f"{meta.get('lang', 'xx')}_{meta.get('name', model_name)}-{meta.get('version', '0')}"
    return cache_dir / "word_tags" / f"{re.sub(r'[^A-Za-z0-9_.-]', '_', name)}.json"


def tag_words(tagger, words: list[str]) -> list[Tags]:
    """Tags of each word alone, in one batch; ('X', '') for text spaCy splits into several tokens."""
    return [(doc[0].pos_, doc[0].tag_) if len(doc) == 1 else ("X", "")
            for doc in tagger.pipe(words, batch_size=256)]


class WordTagLexicon:
    """Word tags read from disk on first use, with the ones computed since kept apart so that
    workers can hand them to the main process, which saves them."""

    def __init__(self, locate: Callable[[], Path]):
        self._locate = locate
        self._tags: dict[str, Tags] | None = None
        self._new: dict[str, Tags] = {}

    def _lexicon(self) -> dict[str, Tags]:
        if self._tags is None:
            self._tags = {}
            path = self._locate()
            try:
                self._tags.update({w: tuple(t) for w, t in json.loads(path.read_text("utf-8")).items()})
            except (OSError, ValueError, AttributeError):
                pass
        return self._tags

    def lookup(self, words: list[str], tag_missing: Callable[[list[str]], Iterable[Tags]]) -> list[Tags]:
        """The tags of `words`, asking `tag_missing` (once, in a batch) for unknown ones."""
        tags = self._lexicon()
        missing = [w for w in dict.fromkeys(words) if w not in tags]
        if missing:
            for word, found in zip(missing, tag_missing(missing)):
                tags[word] = self._new[word] = found
        return [tags[w] for w in words]

    def take_new(self) -> dict[str, Tags]:
        new, self._new = self._new, {}
        return new

    def add(self, tags: dict) -> None:
        self._lexicon().update(tags)
        self._new.update(tags)

    def save(self) -> None:
        """Merge the new tags into the file on disk (atomically; last writer wins)."""
        if not self._new:
            return
        path = self._locate()
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            try:
                merged = json.loads(path.read_text("utf-8"))
            except (OSError, ValueError):
                merged = {}
            merged.update({w: list(t) for w, t in self._new.items()})
            fd, tmp = tempfile.mkstemp(dir=path.parent, suffix=".tmp")
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                json.dump(merged, f, ensure_ascii=False, sort_keys=True)
            os.replace(tmp, path)
            self._new = {}
        except OSError:
            pass  # a read-only cache only costs speed
