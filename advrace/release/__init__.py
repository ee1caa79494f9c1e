"""Frozen releases: build, verify and export a directory of adversarial splits.

Layout (loadable with `datasets.load_dataset("json", data_dir=DIR)` and `load_dataset(DIR)`):

    DIR/data/<split>-00000-of-00001.jsonl   one file per split (the Hub's naming for named splits)
    DIR/squad/<split>.json                  SQuAD releases only: SQuAD v1.1 JSON per split
    DIR/stats.json                          lengths, words changed, unperturbed counts
    DIR/README.md                           the card
    DIR/manifest.json                       versions, fingerprints, configs, sha256 of every file

One module per idea: `records` (a split's file and its records), `stats` (stats.json), `card`
(README.md), `runner` (running the attacks over passages), `audit` (does every example keep its gold
answer right), `build` (building and writing a release and its manifest, or one derived from
another), `verify` (re-hashing one), `export` (the AdvRACE format) and `lm_eval_export` (an
lm-evaluation-harness task folder).
"""

from advrace.release.records import (FORMAT_VERSION, NO_ATTACK, dumps, from_record, in_split, perturbed_flags,
                                     read_split, sha256_file, split_file, split_records, squad_json, to_record)
from advrace.release.stats import split_stats
from advrace.release.card import dataset_card
from advrace.release.runner import ORIGINAL
from advrace.release.audit import AuditContext, audit_release, audit_split, register_checks, register_unchecked
from advrace.release.build import attack_share_warnings, build_release, derive_release, source_name, write_release
from advrace.release.verify import check_release, load_manifest, verify_release
from advrace.release.export import export_advrace
from advrace.release.lm_eval_export import LmEvalExport, export_lm_eval

__all__ = [
    "FORMAT_VERSION", "NO_ATTACK", "ORIGINAL",
    "build_release", "write_release", "derive_release", "source_name", "attack_share_warnings",
    "load_manifest", "verify_release", "check_release",
    "export_advrace", "export_lm_eval", "LmEvalExport",
    "AuditContext", "audit_release", "audit_split", "register_checks", "register_unchecked",
    "split_file", "read_split", "split_records", "perturbed_flags", "to_record", "from_record", "in_split", "squad_json", "dumps", "sha256_file",
    "split_stats", "dataset_card",
]
