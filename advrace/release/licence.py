"""What data a release was made from, and the licence its card states: told from the manifest's
source (name, format, task, RACE levels), never from a recipe's free text.

A release is derived data, so the source's own terms apply to it; advrace adds none. Known
sources are named with their licence (RACE's terms, SQuAD v1.1 and XQuAD's CC BY-SA 4.0, the
bundled samples' CC0); anything else is "the licence of the source data applies". The manifest
records the result (`source.dataset`, `source.licence`, an SPDX identifier: `LicenseRef-RACE`
for RACE's own terms, `NOASSERTION` where advrace cannot tell) and the card prints it.
"""

from __future__ import annotations

import re

from advrace.core.config import SAMPLE_PREFIX
from advrace.core.tasks import MULTIPLE_CHOICE

RACE_TERMS = "LicenseRef-RACE"
CC_BY_SA = "CC-BY-SA-4.0"
CC0 = "CC0-1.0"
UNKNOWN = "NOASSERTION"

RACE_URL = "https://www.cs.cmu.edu/~glai1/data/race/"
CC_BY_SA_URL = "https://creativecommons.org/licenses/by-sa/4.0/"
CC0_URL = "https://creativecommons.org/publicdomain/zero/1.0/"

RACE = "RACE"
SQUAD = "SQuAD v1.1"
XQUAD = "XQuAD"
SAMPLE = "the bundled sample"

# Hub datasets whose licence is known: the name as given (a Hub redirect's old name too).
HUB_DATASETS = {"ehovy/race": (RACE, RACE_TERMS), "race": (RACE, RACE_TERMS),
                "rajpurkar/squad": (SQUAD, CC_BY_SA), "squad": (SQUAD, CC_BY_SA)}

# SQuAD v1.1's own file names, and XQuAD's (xquad.en.json; the English part as xquad-en.json).
_SQUAD_FILE = re.compile(r"^(train|dev)-v1\.1\.json$", re.IGNORECASE)
_XQUAD_FILE = re.compile(r"^xquad[.\-_]", re.IGNORECASE)

# The Hub's `license` metadata for each licence (https://huggingface.co/docs/hub/repositories-licenses).
HUB_LICENCE = {RACE_TERMS: "other", CC_BY_SA: "cc-by-sa-4.0", CC0: "cc0-1.0", UNKNOWN: "unknown"}


def identify(name: str, format: str, task: str, levels=()) -> dict:
    """`{"dataset": ..., "licence": ...}` for a source read as `name` in `format`: the data set it
    is (None when advrace cannot tell) and the SPDX identifier of its licence."""
    if name.startswith(SAMPLE_PREFIX):
        return {"dataset": SAMPLE, "licence": CC0}
    if format == "hub":
        repo = name.partition(":")[0]
        dataset, licence = HUB_DATASETS.get(repo.lower(), (repo, UNKNOWN))
        return {"dataset": dataset, "licence": licence}
    if task == MULTIPLE_CHOICE and levels:  # RACE's own ids (high1.txt, middle5.txt): RACE
        return {"dataset": RACE, "licence": RACE_TERMS}
    if task != MULTIPLE_CHOICE and _XQUAD_FILE.match(name):
        return {"dataset": XQUAD, "licence": CC_BY_SA}
    if task != MULTIPLE_CHOICE and _SQUAD_FILE.match(name):
        return {"dataset": SQUAD, "licence": CC_BY_SA}
    return {"dataset": None, "licence": UNKNOWN}


def licence_lines(src: dict) -> list[str]:
    """The card's paragraph on the data and its licence: the source's own, nothing else."""
    dataset, licence, format = src.get("dataset"), src.get("licence", UNKNOWN), src.get("format")
    if dataset == SAMPLE:
        return [f"The data is advrace's bundled sample (`{src['name']}`), written for advrace and dedicated to "
                f"the public domain under CC0 1.0 ({CC0_URL}); so is this release."]
    if licence == RACE_TERMS:
        hub = f" (the Hub's `{src['name']}`)" if format == "hub" else ""
        return [f"The data is RACE{hub} (Lai et al., EMNLP 2017; {RACE_URL}). RACE is for non-commercial "
                "research only: under its terms no part of its passages, nor of data derived from them, may "
                "be reproduced, sold or otherwise exploited for any commercial purpose. This release is "
                "derived data and keeps those terms; advrace adds none."]
    if licence == CC_BY_SA:
        what = {SQUAD: "SQuAD v1.1 (Rajpurkar et al., EMNLP 2016)",
                XQUAD: "XQuAD (Artetxe et al., ACL 2020), made from SQuAD v1.1 (Rajpurkar et al., EMNLP 2016) "
                       "dev questions"}[dataset]
        hub = f", from the Hub's `{src['name']}`" if format == "hub" else ""
        return [f"The data is {what}{hub}, licensed CC BY-SA 4.0 ({CC_BY_SA_URL}). This release adapts it "
                "and is shared under the same licence: credit the source and share alike."]
    if format == "hub":
        return [f"The data is the Hub dataset `{dataset}`; for its licence see the dataset's own card "
                f"(https://huggingface.co/datasets/{dataset}). The licence of the source data applies to this "
                "release; advrace adds none."]
    return [f"The data is `{src['name']}` ({format}), which advrace does not know as a published data set: "
            "the licence of the source data applies to this release; advrace adds none."]


def hub_metadata(src: dict) -> list[str]:
    """The card's YAML header lines that tell the Hub the licence."""
    licence = src.get("licence", UNKNOWN)
    lines = [f"license: {HUB_LICENCE.get(licence, 'unknown')}"]
    if licence == RACE_TERMS:
        lines += ["license_name: race-terms", f"license_link: {RACE_URL}"]
    return lines
