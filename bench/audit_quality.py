"""Benchmark: how well `advrace audit` tells valid attacked items from invalid ones, on the
labelled validity corpus of tests/validity/.

Each kind of violation (near_meaning, negated_options, negated_restated, negation_hint,
meta_text, change_vanished, fake_type) has items written for advrace from the sample data, valid
and invalid. An invalid item counts as caught when the audit reports the kind's flag on it; a
valid item counts as a false alarm when the audit reports any flag on it. Per kind and overall:

    precision = caught / (caught + false alarms)    recall = caught / invalid items

The audit runs without the paraphrase encoder (`max_answer_cosine: None`), as the tests do.

    python bench/audit_quality.py [--kinds near_meaning,meta_text] [--wrong]

`--wrong` lists every item the audit gets wrong (id, label, why, flags).
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)
from advrace.release import audit as A  # noqa: E402


def load_corpus():
    """tests/validity/corpus.py, the loader the tests use."""
    spec = importlib.util.spec_from_file_location("advrace_validity_corpus", ROOT / "tests" / "validity" / "corpus.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def _ratio(num: int, den: int) -> str:
    return f"{num / den:.3f}" if den else "-"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    corpus = load_corpus()
    ap.add_argument("--kinds", default=",".join(corpus.KINDS + corpus.KNOWN_MISSES),
                    help="comma-separated kinds (default: all, the known misses too)")
    ap.add_argument("--wrong", action="store_true", help="list the items the audit gets wrong")
    results.add_argument(ap)
    args = ap.parse_args(argv)
    kinds = [k for k in args.kinds.split(",") if k]
    ctx = A.AuditContext(overrides={"max_answer_cosine": None})

    rows, wrong, total = [], [], [0, 0, 0, 0]  # items, invalid, caught, false alarms
    for kind in kinds:
        n = invalid = caught = alarms = 0
        for item in corpus.load([kind]):
            flags = corpus.audit(item, ctx)
            n += 1
            if item.valid:
                alarms += bool(flags)
            else:
                invalid += 1
                caught += item.flag in {name for name, _ in flags}
            if not corpus.judged_right(item, flags):
                wrong.append((item, flags))
        rows.append((kind, n, invalid, _ratio(caught, caught + alarms), _ratio(caught, invalid)))
        for i, v in enumerate((n, invalid, caught, alarms)):
            total[i] += v
    rows.append(("overall", total[0], total[1], _ratio(total[2], total[2] + total[3]), _ratio(total[2], total[1])))

    head = ("kind", "items", "invalid", "precision", "recall")
    widths = [max(len(str(r[i])) for r in [head, *rows]) for i in range(len(head))]
    line = lambda r: " | ".join(str(c).ljust(w) if i == 0 else str(c).rjust(w) for i, (c, w) in enumerate(zip(r, widths)))
    print(line(head))
    print("-+-".join("-" * w for w in widths))
    for r in rows[:-1]:
        print(line(r))
    print("-+-".join("-" * w for w in widths))
    print(line(rows[-1]))
    if args.wrong and wrong:
        print(f"\n{len(wrong)} items judged wrong:")
        for item, flags in wrong:
            label = "valid" if item.valid else "invalid"
            print(f"  {item.id} [{label}] {item.why}")
            print(f"    flags: {[name for name, _ in flags] or 'none'}")
    if args.record:
        results.record("audit_quality", {f"{r[0]} ({r[1]} items)": f"precision {r[3]}, recall {r[4]}" for r in rows},
                       argv)
    return 0


if __name__ == "__main__":
    sys.exit(main())
