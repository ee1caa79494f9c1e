"""CITATION.cff, LICENSE and the docs' BibTeX agree with the package: its version and licence, and
every paper the citation file lists has its BibTeX on docs/citing.md."""

import re
from pathlib import Path

import yaml

from advrace import __version__

REPO = Path(__file__).resolve().parents[1]


def test_citation_cff_names_this_version_and_licence():
    cff = yaml.safe_load((REPO / "CITATION.cff").read_text(encoding="utf-8"))
    assert cff["cff-version"] == "1.2.0" and cff["version"] == __version__
    assert cff["authors"] == [{"name": "The advrace developers"}]
    assert cff["license"] == "Apache-2.0" and 'license_expression="Apache-2.0"' in (REPO / "setup.py").read_text()
    assert str(cff["date-released"]) == "2026-11-27"
    citing = " ".join((REPO / "docs" / "citing.md").read_text(encoding="utf-8").split())
    titles = [ref["title"] for ref in cff["references"]]
    assert len(titles) >= 5
    for title in titles:  # the BibTeX spells RACE's and SQuAD's titles with braces: compare without them
        assert title.replace("{", "") in citing.replace("{", "").replace("}", ""), title
    version = re.search(r"version = \{([^}]*)\}", citing)
    assert version and version.group(1) == __version__


def test_the_licence_is_apache_2():
    text = (REPO / "LICENSE").read_text(encoding="utf-8")
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
