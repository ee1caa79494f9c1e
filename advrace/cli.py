"""The `advrace` command line."""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import sys
import textwrap

from advrace import __version__
from advrace.core.cli_types import comma_list
from advrace.core.config import load_config, with_overrides
from advrace.core.errors import AdvraceError
from advrace.evaluation import add_evaluate_parser
from advrace.formats import format_names
from advrace.human_eval.cli import add_human_eval_parser
from advrace.release import audit_release, build_release, check_release, export_advrace
from advrace.release.push import add_push_parser
from advrace.training.ablation import add_ablate_parser
from advrace.training.cli import add_train_parser

BUILD_EPILOG = textwrap.dedent("""\
    examples:
      advrace build configs/release/sample.yaml --out releases/sample
      advrace build --data RACE/test --format race-dir --attacks charswap --seed 1 --out releases/race-test
      advrace build --data dev-v1.1.json --attacks charswap --out releases/squad-dev

    A release is a folder with data/<split>-00000-of-00001.jsonl per split, manifest.json,
    stats.json and a README.md card; the same data, config and seed give byte-identical files.
    Exit status: 0 on success, 2 on malformed input or a bad config, 3 if a resource is missing.
    """)


AUDIT_EPILOG = textwrap.dedent("""\
    examples:
      advrace audit releases/sample
      advrace audit releases/sample --split distractor_generation --details

    Exit status: 0 when nothing is flagged, 1 when the audit flags a question, 2 on a bad
    release folder. `advrace build` runs the same audit and writes its counts into stats.json
    and the card; `advrace build --drop-flagged` leaves flagged questions unchanged.
    """)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="advrace",
        description="Build, verify and export frozen adversarial benchmark releases for reading "
                    "comprehension (RACE multiple choice, SQuAD v1.1 extraction).",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="Run 'advrace COMMAND --help' for the options of each command.")
    p.add_argument("--version", action="version", version=f"advrace {__version__}")
    sub = p.add_subparsers(dest="command", metavar="COMMAND", required=True)

    b = sub.add_parser("build", help="build a release from a config and/or command-line options",
                       description="Attack a clean test set and write a frozen, checksummed release.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=BUILD_EPILOG)
    b.add_argument("config", nargs="?", help="release recipe (YAML), e.g. configs/release/sample.yaml")
    b.add_argument("--data", help="input: a RACE folder, a .jsonl(.gz), an AdvRACE or SQuAD .json, "
                                   "@sample/race, @sample/squad, or a hub name such as ehovy/race (online)")
    b.add_argument("--format", choices=format_names(),
                   help="input format (default: detected from the path)")
    b.add_argument("--attacks", type=comma_list, help="comma-separated attacks, replacing the config's splits "
                                                "(see 'advrace attacks')")
    b.add_argument("--seed", type=int, help="seed for every random choice (default: the config's, else 0)")
    b.add_argument("--limit", type=int, help="use only the first N questions (for quick looks)")
    b.add_argument("--lenient", action="store_true",
                   help="skip malformed records, count them and list them in the manifest")
    b.add_argument("--workers", type=int, help="worker processes over passages (default: one per "
                                                "core); the release is the same for any number")
    b.add_argument("--out", required=True, help="release folder to write (replaced atomically)")
    b.add_argument("--drop-flagged", action="store_true",
                   help="leave each question the audit flags as in its source split (unperturbed, "
                        "with the reason), so every split keeps the same questions")
    b.add_argument("--quiet", action="store_true", help="no progress bars")

    v = sub.add_parser("verify", help="re-hash a release against its manifest",
                       description="Re-hash every file of a release; exit 1 on any difference.")
    v.add_argument("release", help="release folder")

    e = sub.add_parser("export", help="export a release to another format",
                       description="Export splits to AdvRACE's release format "
                                   "(a JSON dict race_id -> {context, question, options, label}).")
    e.add_argument("release", help="release folder")
    e.add_argument("--format", choices=["advrace"], default="advrace")
    e.add_argument("--split", type=comma_list, help="split(s) to export (default: all)")
    e.add_argument("--out", required=True,
                   help="output file for one split, or a folder of <split>.json for several")

    a = sub.add_parser("audit", help="check that every split keeps its gold answers right",
                       description="Run the label-preservation checks on every attacked split of a "
                                   "release: inserted text that states a gold answer or only "
                                   "paraphrases the question, swaps that move a first or last "
                                   "letter, distractors that are the answer in other words, that "
                                   "the passage states, duplicates and form giveaways, unknown word "
                                   "forms, and any change the provenance does not record.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=AUDIT_EPILOG)
    a.add_argument("release", help="release folder")
    a.add_argument("--split", type=comma_list, help="split(s) to audit (default: every attacked one)")
    a.add_argument("--details", action="store_true", help="list each flagged question's id and reason")

    sub.add_parser("attacks", help="list the available attacks and their default configs")

    for name, handler in [("build", _build), ("verify", _verify), ("export", _export), ("audit", _audit),
                          ("attacks", _attacks), ("push", add_push_parser(sub)),
                          ("evaluate", add_evaluate_parser(sub)), ("train", add_train_parser(sub)),
                          ("ablate", add_ablate_parser(sub)), ("human-eval", add_human_eval_parser(sub))]:
        sub.choices[name].set_defaults(handler=handler)
    return p


def _build(args) -> int:
    cfg = with_overrides(load_config(args.config), data=args.data, format=args.format,
                         attacks=args.attacks, seed=args.seed, limit=args.limit,
                         lenient=args.lenient, workers=args.workers, drop_flagged=args.drop_flagged)
    manifest = build_release(cfg, args.out, progress=not args.quiet)
    src = manifest["source"]
    split = f", the {src['split']} split" if src.get("split") else ""
    print(f"wrote {args.out}: {src['kept']} questions from {src['name']}{split} "
          f"({src['read']} read, {len(src['skipped'])} skipped)")
    for split, info in manifest["splits"].items():
        print(f"  {split:<24} {info['count']:>6} records  {info['perturbed']:>6} perturbed  "
              f"sha256 {info['sha256'][:16]}")
    for s in src["skipped"]:
        print(f"  skipped: {s['file']}, record {s['record']}: {s['problem']}", file=sys.stderr)
    return 0


def _verify(args) -> int:
    manifest = check_release(args.release)
    n = len(manifest["splits"]) + len(manifest["files"])
    print(f"{args.release}: OK, {n} files match the manifest ({len(manifest['splits'])} splits)")
    return 0


def _audit(args) -> int:
    audits = audit_release(args.release, args.split)
    flagged = sum(a.counts()["flagged"] for a in audits.values())
    print(f"{args.release}: audited {len(audits)} splits, {flagged} questions flagged")
    for split, audit in audits.items():
        c = audit.counts()
        found = ", ".join(f"{check}: {n}" for check, n in c["by_check"].items()) or "-"
        print(f"  {split:<24} {c['checked']:>6} checked  {c['flagged']:>5} flagged  {found}")
        if args.details:
            for _, ex_id, check, detail in audit.flags:
                print(f"    {ex_id}: {check}: {detail}")
    return 1 if flagged else 0


def _export(args) -> int:
    for path in export_advrace(args.release, args.out, args.split):
        print(f"wrote {path}")
    return 0


def _attacks(args) -> int:
    from advrace.attacks import attack_classes  # deferred for start-up time: importing the attacks loads every attack module

    for cls in attack_classes():
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        print(f"{cls.name}: {doc}")
        print(f"  tasks: {', '.join(cls.tasks)}")
        print(f"  config: {json.dumps(dataclasses.asdict(cls.Config()))}")
    return 0


@contextlib.contextmanager
def library_bars_silenced(silence: bool):
    """`--quiet` also for the bars that Transformers and the Hub draw while loading a model. The
    variable reaches a Transformers imported later (and worker processes); one already imported
    is told directly. Both are put back afterwards, for callers of `main` in a longer process
    that had imported Transformers already."""
    if not silence:
        yield
        return
    before = os.environ.get("HF_HUB_DISABLE_PROGRESS_BARS")
    os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = "1"
    hf_logging = sys.modules.get("transformers.utils.logging")
    # A Transformers first imported meanwhile read the variable and keeps its bars off: turning
    # them on again would only warn that the Hub's copy of the variable has priority.
    restore = hf_logging is not None and hf_logging.is_progress_bar_enabled()
    if hf_logging is not None:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("HF_HUB_DISABLE_PROGRESS_BARS", None)
        else:
            os.environ["HF_HUB_DISABLE_PROGRESS_BARS"] = before
        hf_logging = sys.modules.get("transformers.utils.logging")
        if hf_logging is not None and restore:
            hf_logging.enable_progress_bar()


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _parser()  # asks the registries, which load third-party plugins
    except AdvraceError as exc:
        print(f"advrace: error: {exc}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    try:
        with library_bars_silenced(getattr(args, "quiet", False)):
            return args.handler(args)
    except AdvraceError as exc:
        print(f"advrace {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"advrace {args.command}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # output piped into `head` and the like: stop quietly
        sys.stdout = open(os.devnull, "w")
        return 0


if __name__ == "__main__":
    sys.exit(main())
