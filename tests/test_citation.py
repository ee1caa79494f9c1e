"""CITATION.cff, LICENSE and the docs' BibTeX agree with the package and with each other: the file is
a well-formed Citation File Format 1.2.0 record (what GitHub's "Cite this repository" reads), its
version and licence are the package's, its release date is a real date whose year the BibTeX gives,
and every paper it lists has a BibTeX entry on docs/citing.md with the same title, year and DOI.
Nothing here is pinned to a date or a version: a release that bumps them stays green as long as
the files agree."""

import datetime
import re
from pathlib import Path

import yaml

from advrace import __version__

REPO = Path(__file__).resolve().parents[1]
# Citation File Format 1.2.0: the reference types used here, and the identifiers' shapes
CFF_REFERENCE_TYPES = {"article", "book", "conference-paper", "proceedings", "report", "software", "thesis",
                       "generic", "dataset", "preprint"}
DOI = re.compile(r"10\.\d{4,9}/\S+")


def cff() -> dict:
    return yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))


def released(record: dict) -> datetime.date:
    """date-released as CFF requires it: an ISO 8601 date (YAML may give it as a date or a string)."""
    value = record["date-released"]
    return value if isinstance(value, datetime.date) else datetime.date.fromisoformat(str(value))


def bibtex_entries(markdown: str) -> list[dict]:
    """The BibTeX entries of a page's ```bibtex blocks: {"type", "key", field: value}, the values
    with their braces (nested ones kept) and blanks collapsed."""
    entries = []
    for block in re.findall(r"```bibtex\n(.*?)```", markdown, re.S):
        for m in re.finditer(r"@(\w+)\{([^,]+),", block):
            entry, i = {"type": m.group(1).lower(), "key": m.group(2).strip()}, m.end()
            while True:
                field = re.compile(r"\s*(\w+)\s*=\s*\{").match(block, i)
                if not field:
                    break
                depth, j = 1, field.end()
                while depth:
                    depth += {"{": 1, "}": -1}.get(block[j], 0)
                    j += 1
                entry[field.group(1).lower()] = " ".join(block[field.end():j - 1].split())
                i = j + 1 if j < len(block) and block[j] == "," else j
            entries.append(entry)
    return entries


def unbraced(text: str) -> str:
    return text.replace("{", "").replace("}", "")


def test_citation_cff_is_well_formed():
    record = cff()
    assert record["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors", "type", "version", "date-released", "license", "references"):
        assert record.get(key), f"CITATION.cff lacks {key}"
    assert record["type"] == "software"
    assert all(a.get("name") or (a.get("family-names") and a.get("given-names")) for a in record["authors"])
    assert released(record) <= datetime.date.today()  # a date that has come, not a placeholder
    for ref in record["references"]:
        where = ref.get("title", ref)
        assert ref["type"] in CFF_REFERENCE_TYPES, where
        assert ref["title"] and isinstance(ref["year"], int) and 1900 < ref["year"] <= released(record).year, where
        assert ref["authors"] and all(a.get("family-names") and a.get("given-names") for a in ref["authors"]), where
        if "start" in ref or "end" in ref:
            assert int(ref["start"]) <= int(ref["end"]), where
        if "doi" in ref:
            assert DOI.fullmatch(str(ref["doi"])), where
        if "url" in ref:
            assert str(ref["url"]).startswith("https://"), where


def test_citation_cff_names_this_version_and_licence():
    record = cff()
    assert record["version"] == __version__
    assert record["license"] == "Apache-2.0"
    setup = (REPO / "setup.py").read_text(encoding="utf-8")
    assert re.search(r'license_expression="([^"]+)"', setup).group(1) == record["license"]


def test_the_docs_bibtex_agrees_with_citation_cff():
    record = cff()
    entries = bibtex_entries((REPO / "docs" / "citing.md").read_text(encoding="utf-8"))
    (software,) = [e for e in entries if e["type"] == "software"]
    assert unbraced(software["title"]) == record["title"]
    assert software["version"] == __version__ == record["version"]
    assert int(software["year"]) == released(record).year
    assert software["license"] == record["license"]
    assert [unbraced(software["author"])] == [a["name"] for a in record["authors"]]
    papers = {" ".join(unbraced(e["title"]).split()): e for e in entries if e["type"] != "software"}
    assert len(record["references"]) >= 5
    for ref in record["references"]:
        entry = papers.get(" ".join(ref["title"].split()))
        assert entry is not None, f"no BibTeX on docs/citing.md for {ref['title']!r}"
        assert int(entry["year"]) == ref["year"], ref["title"]
        if "doi" in ref:
            assert entry.get("doi") == ref["doi"], ref["title"]
        if "start" in ref:
            assert entry["pages"] == f"{ref['start']}--{ref['end']}", ref["title"]


def test_the_licence_is_apache_2():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
