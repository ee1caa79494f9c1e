"""`advrace compare REPORT_A REPORT_B`: two evaluation reports side by side, per model and split,
and first of all whether their numbers can be compared at all: the same release (the sha256 of its
manifest); per model, the same weights (results.json's source `identity`: the sha256 of a folder's
files or of smollm2's GGUF, a Hub model's commit), precision, device, model args and method, the
same scoring protocol (advrace.models.protocol.scoring_protocol) and decoding (what shared the
prompt cache, ran alone or was cut); per split, as many questions. Each difference is said, line by
line, before any number; `--strict` makes any of them exit 1.

Then each shared model and split gets a paired test of B against A on the questions both scored
(their predictions/ files, matched by record id): the difference, its 95% bootstrap interval and
the p-value (exact McNemar for accuracy and exact match, paired bootstrap for F1)."""

from __future__ import annotations

import argparse
import json
import textwrap
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.evaluation.report import BINARY_METRICS, METRIC_TITLES, RECORD_FIELDS
from advrace.evaluation.statistics import LEVEL, paired_difference
from advrace.models.protocol.scoring_protocol import differences

# what must agree per model, beside its identity, protocol and decoding: (where, key, in words)
_RUN_KEYS = (("inference", "precision", "precision"), ("inference", "weights", "weights dtype"),
             ("inference", "device_type", "device"), (None, "model_args", "model args"),
             (None, "method", "method"), (None, "max_length", "maximum length"))


def read_report(path) -> dict:
    """A report's results.json (a report folder or the file itself), with the folder it sits in
    under `folder` (where its predictions/ files are)."""
    path = Path(path)
    file = path / "results.json" if path.is_dir() else path
    try:
        summary = json.loads(file.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"{path}: no results.json there; give a folder written by `advrace evaluate`") from None
    except ValueError as exc:
        raise ConfigError(f"{file}: not JSON ({exc})") from None
    if not isinstance(summary, dict) or "results" not in summary or "release" not in summary:
        raise ConfigError(f"{file}: not an advrace evaluation report (no `results` and `release`)")
    return {**summary, "folder": str(file.parent)}


def _source(summary: dict, model: str) -> dict:
    return summary["results"][model].get("source") or {}


def _shared(a: dict, b: dict) -> list[str]:
    return [m for m in a["models"] if m in b["models"]]


def _identity_caveat(model: str, sa: dict, sb: dict, names: tuple[str, str]) -> list[str]:
    """Whether the two reports scored the same weights (or predictions file) under `model`."""
    ia, ib = sa.get("identity"), sb.get("identity")
    if not ia or not ib:
        missing = " and ".join(n for n, i in zip(names, (ia, ib)) if not i)
        return [f"`{model}`: {missing} does not record what was scored (a report from an advrace that did not "
                "record weights): the weights may differ"]
    diff = [f"{k}: {ia.get(k)!r} vs {ib.get(k)!r}" for k in sorted(set(ia) | set(ib)) if ia.get(k) != ib.get(k)]
    if diff:
        return [f"`{model}` is not the same model in both: " + "; ".join(diff)]
    if sa.get("kind") == "model" and not any(ia.get(k) for k in ("sha256", "commit")):
        return [f"`{model}`: neither report knows which weights it scored (no sha256 or Hub commit recorded): "
                "they may differ"]
    return []


def model_caveats(model: str, a: dict, b: dict, names: tuple[str, str]) -> list[str]:
    """What keeps one model's numbers in the two reports from meaning the same thing."""
    sa, sb = _source(a, model), _source(b, model)
    lines = _identity_caveat(model, sa, sb, names)
    runs = []
    for where, key, words in _RUN_KEYS:
        x = (sa.get(where) or {}).get(key) if where else sa.get(key)
        y = (sb.get(where) or {}).get(key) if where else sb.get(key)
        if x != y:
            runs.append(f"{words}: {x if x is not None else 'not recorded'} vs {y if y is not None else 'not recorded'}")
    if runs:
        lines.append(f"`{model}` was run differently: " + "; ".join(runs))
    # the release is said once, above, for the whole report
    protocol = [d for d in differences(sa.get("protocol") or {}, sb.get("protocol") or {}) if not d.startswith("release:")]
    if protocol:
        lines.append(f"`{model}` was scored under different protocols: " + "; ".join(protocol))
    splits_a, splits_b = a["results"][model]["splits"], b["results"][model]["splits"]
    counts = [f"{s} {splits_a[s].get('n')} vs {splits_b[s].get('n')}" for s in _splits(a, b, model)
              if splits_a[s].get("n") != splits_b[s].get("n")]
    da, db = sa.get("decoding") or {}, sb.get("decoding") or {}
    # counts (questions shared, run alone, cut) follow the questions: another number of them says that first
    decoding = [f"{k}: {da.get(k)!r} vs {db.get(k)!r}" for k in sorted(set(da) | set(db))
                if da.get(k) != db.get(k) and not (counts and _is_count(da.get(k)) and _is_count(db.get(k)))]
    if decoding:
        lines.append(f"`{model}` was decoded differently (what shared the prompt cache, ran alone or was cut): "
                     + "; ".join(decoding))
    if counts:
        lines.append(f"`{model}` was scored on other numbers of questions: " + ", ".join(counts))
    return lines


def _is_count(value) -> bool:
    return isinstance(value, (int, float, dict)) and not isinstance(value, bool)


def _splits(a: dict, b: dict, model: str) -> list[str]:
    """The splits both reports scored `model` on, in A's column order."""
    splits_a, splits_b = a["results"][model]["splits"], b["results"][model]["splits"]
    return [s for s in a.get("columns") or splits_a if s in splits_a and s in splits_b]


def caveats(a: dict, b: dict, names: tuple[str, str] = ("A", "B")) -> list[str]:
    """What keeps the two reports' numbers from meaning the same thing, one line each."""
    lines = []
    ra, rb = a["release"], b["release"]
    if ra.get("manifest_sha256") != rb.get("manifest_sha256") or ra.get("name") != rb.get("name"):
        lines.append(f"different releases: {ra.get('name')} (manifest sha256 {str(ra.get('manifest_sha256'))[:16]}) "
                     f"vs {rb.get('name')} (manifest sha256 {str(rb.get('manifest_sha256'))[:16]})")
    for model in _shared(a, b):
        lines += model_caveats(model, a, b, names)
    return lines


def read_predictions(summary: dict, model: str) -> dict | None:
    """A model's per-question records in a report (its predictions/ file), `{split: {id: record}}`;
    None when the file is not there (results.json copied alone)."""
    folder, name = summary.get("folder"), summary["results"][model].get("predictions")
    file = Path(folder) / name if folder and name else None
    if file is None or not file.is_file():
        return None
    by_split: dict = {}
    with open(file, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                rec = json.loads(line)
            except ValueError as exc:
                raise ConfigError(f"{file}, line {number}: not JSON ({exc}); the report folder is damaged: "
                                  "evaluate again") from None
            by_split.setdefault(str(rec.get("id", "")).partition("/")[0], {})[rec.get("id")] = rec
    return by_split


def paired_test(records_a: dict, records_b: dict, metric: str) -> dict | None:
    """B − A on the questions both runs of one split scored (matched by record id), in percent:
    `n`, `difference`, `ci` and `p` (statistics.paired_difference); None without such questions."""
    field = RECORD_FIELDS[metric]
    ids = [i for i in records_a if i in records_b
           and records_a[i].get(field) is not None and records_b[i].get(field) is not None]
    found = paired_difference([float(records_a[i][field]) for i in ids], [float(records_b[i][field]) for i in ids],
                              metric in BINARY_METRICS)
    if found is None:
        return None
    return {**found, "difference": 100 * found["difference"], "ci": [100 * v for v in found["ci"]]}


def _paired_cells(test: dict | None) -> list[str]:
    if test is None:
        return ["–", "–", "–"]
    p = "< 0.001" if test["p"] < 1e-3 else f"{test['p']:.3f}"
    return [str(test["n"]), f"{test['ci'][0]:+.2f} to {test['ci'][1]:+.2f}", p]


def compare_reports(a: dict, b: dict, names: tuple[str, str] = ("A", "B"), warn: list[str] | None = None) -> str:
    """The comparison as Markdown: the caveats first, then per shared model and split each
    metric in both reports, B - A (percentage points) and the paired test of B against A on the
    questions both scored. `warn`: the caveats, where the caller has them already."""
    lines = [f"# {names[0]} vs {names[1]}", ""]
    warn = caveats(a, b, names) if warn is None else warn
    if warn:
        lines += ["**These numbers do not compare directly:**", ""] + [f"- {w}" for w in warn] + [""]
    else:
        lines += ["Same release, and every model shared by both was scored under the same protocol. The same "
                  "weights, precision, device, decoding and questions per split, as far as the reports record them.",
                  ""]
    models = _shared(a, b)
    only = [(names[0], m) for m in a["models"] if m not in models] + \
           [(names[1], m) for m in b["models"] if m not in models]
    records = {m: (read_predictions(a, m), read_predictions(b, m)) for m in models}
    unpaired = [m for m, (x, y) in records.items() if x is None or y is None]
    level = round(100 * LEVEL)
    for metric in [m for m in a["metrics"] if m in b["metrics"]]:
        lines += [f"## {METRIC_TITLES.get(metric, metric)}", "", f"| model | split | {names[0]} | {names[1]} | "
                  f"{names[1]} − {names[0]} | paired n | {level}% CI of {names[1]} − {names[0]} | p |",
                  "|---|---|---:|---:|---:|---:|---:|---:|"]
        for model in models:
            splits_a, splits_b = a["results"][model]["splits"], b["results"][model]["splits"]
            rec_a, rec_b = records[model]
            for split in _splits(a, b, model):
                x, y = splits_a[split].get(metric), splits_b[split].get(metric)
                delta = f"{y - x:+.2f}" if x is not None and y is not None else "–"
                show = [f"{v:.2f}" if v is not None else "–" for v in (x, y)]
                test = paired_test(rec_a.get(split, {}), rec_b.get(split, {}), metric) if rec_a and rec_b else None
                lines.append(f"| {model} | {split} | {show[0]} | {show[1]} | {delta} | "
                             + " | ".join(_paired_cells(test)) + " |")
        lines.append("")
    lines += [f"Paired test: {names[1]} against {names[0]} on the questions both scored, matched by record id "
              f"(their predictions/ files): the {level}% percentile bootstrap interval of the mean per-question "
              "difference in percentage points (1000 resamples, seed 0) and the two-sided p-value (exact McNemar "
              "test for accuracy and exact match, paired bootstrap for F1), not corrected for testing several "
              "splits.", ""]
    if unpaired:
        lines += ["No paired test for " + ", ".join(f"`{m}`" for m in unpaired) + ": a report's predictions/ "
                  "file is missing (give the report folder, not a copied results.json).", ""]
    if only:
        lines += ["Models in one report only: " + ", ".join(f"`{m}` ({n})" for n, m in only) + ".", ""]
    return "\n".join(lines).rstrip("\n") + "\n"


COMPARE_EPILOG = textwrap.dedent("""\
    example:
      advrace compare reports/smollm2 reports/smollm2-bos

    Prints, as Markdown: first what keeps the numbers from comparing (another release, by the
    sha256 of its manifest.json; per model: other weights, by the sha256 of a folder's files or
    smollm2's GGUF or a Hub model's commit; another precision, weights dtype, device, model args,
    method or maximum length; another protocol: prompt, BOS, shots, truncation, ...; other decoding:
    what shared the prompt cache, ran alone or was cut; per split, another number of questions),
    then each metric per model and split in both reports, the difference in percentage points and
    a paired test on the questions both scored (from the reports' predictions/ files): its 95%
    bootstrap interval and p-value (exact McNemar; paired bootstrap for F1). Models are matched by
    their report label.
    Exit status: 0; 1 with --strict when any of those caveats stands; 2 if a report cannot be read.
    """)


def add_compare_parser(subparsers):
    """Add the `compare` subcommand; returns its handler."""
    p = subparsers.add_parser(
        "compare", help="compare two evaluation reports, and say whether their numbers compare",
        description="Put two reports of `advrace evaluate` side by side, after saying whether they "
                    "scored the same release under the same protocols.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=COMPARE_EPILOG)
    p.add_argument("report_a", help="report folder (or its results.json)")
    p.add_argument("report_b", help="report folder (or its results.json)")
    p.add_argument("--strict", action="store_true",
                   help="exit 1 when anything keeps the numbers from comparing (another release, other weights, "
                        "precision, protocol, decoding or number of questions), as a check in a script")

    def handler(args) -> int:
        a, b = read_report(args.report_a), read_report(args.report_b)
        names = (str(args.report_a), str(args.report_b))
        warn = caveats(a, b, names)
        print(compare_reports(a, b, names, warn).rstrip())
        return 1 if args.strict and warn else 0

    p.set_defaults(handler=handler)
    return handler
