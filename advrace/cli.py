"""The `advrace` command line."""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import platform
import sys
import textwrap
from pathlib import Path

from advrace import __version__
from advrace.core.cli_types import comma_list
from advrace.core.config import load_config, with_overrides, with_settings
from advrace.core.environment import (LOCK_NAME, check_lock, default_lock, package_versions, python_version,
                                      version_differences)
from advrace.core.errors import AdvraceError, ConfigError
from advrace.core.text import plural
from advrace.evaluation import add_evaluate_parser
from advrace.evaluation.compare import add_compare_parser
from advrace.formats import format_names
from advrace.human_eval.cli import add_human_eval_parser
from advrace.models.runtime.loading import transformers_quiet
from advrace.models.runtime.sharding import end_processes
from advrace.release import (attack_share_warnings, audit_release, build_release, check_release, export_advrace,
                             export_lm_eval)
from advrace.release.lm_eval_export import LM_EVAL
from advrace.release.push import add_push_parser
from advrace.training.ablation import add_ablate_parser
from advrace.training.cli import add_train_parser

BUILD_EPILOG = textwrap.dedent("""\
    examples:
      advrace build configs/release/sample.yaml --out releases/sample
      advrace build --data RACE/test --format race-dir --attacks charswap --seed 1 --out releases/race-test
      advrace build --data dev-v1.1.json --attacks charswap --out releases/squad-dev
      advrace build --data @sample/race --attacks addsent --sample 12 --seed 1 --out releases/sample-12
      advrace build --data RACE/test --attacks distractor_extraction --set splits.distractor_extraction.model=runs/de-sample/final --out releases/de-test

    A release is a folder with data/<split>-00000-of-00001.jsonl per split, manifest.json,
    stats.json and a README.md card; the same data, config and seed give byte-identical files.
    An attack that cannot change a question keeps it in its split as a copy; a split whose attack
    changed fewer than half its questions is written all the same, with a warning on stderr that
    gives the share and the commonest reasons (probes such as diagnosis are exempt).
    Exit status: 0 on success, 2 on malformed input or a bad config, 3 if a resource is missing.
    """)


AUDIT_EPILOG = textwrap.dedent("""\
    examples:
      advrace audit releases/sample
      advrace audit releases/sample --split distractor_generation --details

    Each split's line gives how many of its questions the attack changed (attacked N of M,
    the rest are copies of their source), besides the checks' counts.
    Exit status: 0 when nothing is flagged, 1 when the audit flags a question, 2 on a bad
    release folder. `advrace build` runs the same audit and writes its counts into stats.json
    and the card; `advrace build --drop-flagged` leaves flagged questions unchanged.
    """)


EXPORT_EPILOG = textwrap.dedent("""\
    examples:
      advrace export releases/race-test --split charswap --out charswap_test.json
      advrace export releases/race-test --out race-test-advrace
      advrace export releases/race-test --format lm-eval --out lm-eval/race-test
      lm_eval --model hf --model_args pretrained=HuggingFaceTB/SmolLM2-135M --include_path lm-eval/race-test --tasks advrace_race_test

    The lm-eval folder needs pip install .[lm-eval] (lm-eval 0.4.9 or later) to run; the same
    release gives a byte-identical folder. The export verifies the release first (exit 1 if it
    differs from its manifest); exit 2 for an unknown split or an --out that cannot be written.
    """)


ENV_EPILOG = textwrap.dedent("""\
    examples:
      advrace env
      advrace env --lock constraints.txt

    `make demo` and `make test` install the lock's exact versions and run `advrace env --check`;
    `advrace verify` names the packages whose running version differs from a release's manifest.
    Exit status: 0, or 1 with --check when the environment differs from the lock.
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
    # in the order `advrace --help` lists them; each adder returns its handler (`args -> exit status`)
    for name, handler in [("build", _add_build(sub)), ("verify", _add_verify(sub)), ("export", _add_export(sub)),
                          ("audit", _add_audit(sub)), ("attacks", _add_attacks(sub)), ("env", _add_env(sub)),
                          ("push", add_push_parser(sub)),
                          ("evaluate", add_evaluate_parser(sub)), ("compare", add_compare_parser(sub)),
                          ("train", add_train_parser(sub)),
                          ("ablate", add_ablate_parser(sub)), ("human-eval", add_human_eval_parser(sub))]:
        sub.choices[name].set_defaults(handler=handler)
    return p


def _add_build(sub):
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
    b.add_argument("--limit", type=int, help="use only the first N questions read (for quick looks)")
    b.add_argument("--sample", type=int, metavar="N",
                   help="a random sample of N questions drawn with the seed, whole passages kept "
                        "together and RACE's levels in their shares (after --limit, if given)")
    b.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="set a config value (YAML), repeatable: splits.SPLIT.KEY for a split's "
                        "attack config (splits.distractor_extraction.model=runs/de/final), data.KEY, "
                        "resources.KEY, seed, ...; paths are relative to the current folder")
    b.add_argument("--lenient", action="store_true",
                   help="skip malformed records, count them and list them in the manifest")
    b.add_argument("--workers", type=int, help="worker processes over passages (default: one per "
                                                "core); the release is the same for any number")
    b.add_argument("--out", required=True, help="release folder to write (replaced atomically)")
    b.add_argument("--drop-flagged", action="store_true",
                   help="leave each question the audit flags as in its source split (unperturbed, "
                        "with the reason), so every split keeps the same questions")
    b.add_argument("--quiet", action="store_true", help="no progress bars")
    return _build


def _add_verify(sub):
    v = sub.add_parser("verify", help="re-hash a release against its manifest",
                       description="Re-hash every file of a release; exit 1 on any difference.")
    v.add_argument("release", help="release folder")
    v.add_argument("--study", metavar="DB",
                   help="a validated release (`advrace human-eval validate`): also check that this study "
                        "database is the one it was validated from (same source release, same annotations)")
    return _verify


def _add_export(sub):
    e = sub.add_parser("export", help="export a release to another format",
                       description="Export splits to AdvRACE's release format (advrace: a JSON dict "
                                   "race_id -> {context, question, options, label}), or as an "
                                   "lm-evaluation-harness task folder (lm-eval: one task per split "
                                   "and a group, on advrace's own decoder-LM prompts).",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EXPORT_EPILOG)
    e.add_argument("release", help="release folder")
    e.add_argument("--format", choices=["advrace", LM_EVAL], default="advrace")
    e.add_argument("--split", type=comma_list, help="split(s) to export (default: all)")
    e.add_argument("--out", required=True,
                   help="advrace: output file for one split, or a folder of <split>.json for several; "
                        "lm-eval: the task folder (new, empty, or an earlier lm-eval export)")
    return _export


def _add_audit(sub):
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
    a.add_argument("--judge", metavar="MODEL",
                   help="also refuse a DE or DG split's new distractor that MODEL rates at least as likely as "
                        "the gold, less the margin (a multiple-choice checkpoint folder, a causal LM folder or a "
                        "Hub name, strong enough to judge; see docs/audit.md, 'The answerability judge')")
    a.add_argument("--judge-margin", type=float, metavar="M",
                   help="the judge's margin on its own scale, 0 or more (default: calibrated on each split's own "
                        "source questions, refusing at most --judge-refusal-rate of their original distractors)")
    a.add_argument("--judge-refusal-rate", type=float, metavar="R", default=None,
                   help="the largest share of the source questions' own distractors the calibrated margin "
                        "refuses (default 0.02)")
    return _audit


def _add_attacks(sub):
    sub.add_parser("attacks", help="list the available attacks and their default configs")
    return _attacks


def _add_env(sub):
    n = sub.add_parser("env", help="print the versions that decide a release's bytes; compare with the lock",
                       description="Print advrace's and Python's versions, whether this CPU computes "
                                   "bf16 natively, and the versions of the packages that can change a "
                                   "release's bytes; compare the whole environment with a lock file.",
                       formatter_class=argparse.RawDescriptionHelpFormatter, epilog=ENV_EPILOG)
    n.add_argument("--lock", help=f"pip constraints file to compare with (default: the checkout's "
                                  f"{LOCK_NAME}, when advrace runs from one)")
    n.add_argument("--check", action="store_true",
                   help="exit 1 when the environment differs from the lock (what `make test` runs)")
    return _env


def _build(args) -> int:
    cfg = with_overrides(load_config(args.config), data=args.data, format=args.format,
                         attacks=args.attacks, seed=args.seed, limit=args.limit, sample=args.sample,
                         lenient=args.lenient, workers=args.workers, drop_flagged=args.drop_flagged)
    cfg = with_settings(cfg, args.set)
    if not cfg.splits:
        print("advrace build: no attacks named: wrote only `original`; see `advrace attacks` (name them "
              "with --attacks or a config's splits)", file=sys.stderr)
    manifest = build_release(cfg, args.out, progress=not args.quiet)
    src = manifest["source"]
    split = f", the {src['split']} split" if src.get("split") else ""
    chosen = src.get("selection", {})
    how = (f"a seeded sample (seed {chosen['seed']}) of {chosen['from']:,}, "
           if chosen.get("method") == "sample" else "")
    print(f"wrote {args.out}: {plural(src['kept'], 'question')} from {src['name']}{split} "
          f"({how}{src['read']:,} read, {len(src['skipped']):,} skipped)")
    for split, info in manifest["splits"].items():
        print(f"  {split:<24} {info['count']:>6} {'record' if info['count'] == 1 else 'records'}  "
              f"{info['perturbed']:>6} perturbed  sha256 {info['sha256'][:16]}")
    for s in src["skipped"]:
        print(f"  skipped: {s['file']}, record {s['record']}: {s['problem']}", file=sys.stderr)
    if manifest["splits"]:  # written (under `accelerate launch`, by the main process only)
        stats = json.loads((Path(args.out) / "stats.json").read_text(encoding="utf-8"))
        sys.stdout.flush()  # after the summary, where stdout and stderr share a terminal
        for line in attack_share_warnings(manifest, stats):
            print(line, file=sys.stderr)
    return 0


def _verify(args) -> int:
    manifest = check_release(args.release)
    n = len(manifest["splits"]) + len(manifest["files"])
    print(f"{args.release}: OK, {plural(n, 'file')} match the manifest "
          f"({plural(len(manifest['splits']), 'split')})")
    if validation := manifest.get("validation"):
        source = validation["source_release"]
        print(f"{args.release}: validated by people from the release {source['name']!r} "
              f"(manifest sha256 {source['manifest_sha256'][:16]})")
    if args.study:
        from advrace.human_eval.validate import check_study_link  # deferred for start-up time: only --study reads a study

        print(check_study_link(manifest, args.study, args.release))
    recorded = manifest.get("environment")
    if recorded is None:
        print(f"{args.release}: the manifest records no package versions (built by an earlier advrace); "
              "a rebuild may differ", file=sys.stderr)
    elif moved := version_differences(recorded):
        print(f"{args.release}: built with other versions than this environment's, so a rebuild may "
              f"give other bytes:\n  " + "\n  ".join(moved), file=sys.stderr)
    return 0


def _env(args) -> int:
    from advrace.models.runtime.precision import cpu_has_native_bf16  # deferred for start-up time: the models floor imports torch helpers

    print(f"advrace {__version__}, Python {python_version()} ({platform.system()} {platform.machine()})")
    print(f"bf16 on this CPU: {'native' if cpu_has_native_bf16() else 'emulated (bf16: true runs several times slower than fp32)'}")
    print("packages that decide a release's bytes:")
    for name, version in package_versions().items():
        print(f"  {name:<24} {version or 'not installed'}")
    lock = args.lock or default_lock()
    if lock is None:
        print(f"no lock file: advrace is not running from a checkout; pass --lock {LOCK_NAME}")
        return 1 if args.check else 0
    result = check_lock(lock)
    if result.ok:
        print(f"lock {lock}: the environment matches its {plural(result.pinned, 'pin')}")
        return 0
    problems = result.problems()
    print(f"lock {lock}: the environment differs in {plural(len(problems), 'package')}:")
    for p in problems:
        print(f"  {p}")
    if args.check:
        print(f"advrace env: the environment is not the lock's; reinstall it with `make clean && make test` "
              f"(or pip install -c {lock} ...)", file=sys.stderr)
        return 1
    return 0


def _audit(args) -> int:
    ctx = None
    for option in ("judge_margin", "judge_refusal_rate"):
        if getattr(args, option) is not None and args.judge is None:
            raise ConfigError(f"--{option.replace('_', '-')} needs --judge MODEL")
    if args.judge is not None:
        from advrace.models.judge import REFUSAL_RATE, load_judge  # deferred: start-up time (torch)
        from advrace.release.audit import AuditContext

        rate = REFUSAL_RATE if args.judge_refusal_rate is None else args.judge_refusal_rate
        ctx = AuditContext(judge=load_judge(args.judge, args.judge_margin, where="--judge", refusal_rate=rate))
    audits = audit_release(args.release, args.split, ctx)
    flagged = sum(a.counts()["flagged"] for a in audits.values())
    print(f"{args.release}: audited {plural(len(audits), 'split')}, {plural(flagged, 'question')} flagged")
    for split, audit in audits.items():
        c = audit.counts()
        found = ", ".join(f"{check}: {n}" for check, n in c["by_check"].items()) or "-"
        print(f"  {split:<24} attacked {audit.share():<18} {c['checked']:>6} checked  {c['flagged']:>5} flagged  "
              f"{found}")
        for kind in c["unchecked"]:
            print(f"    not checked: {kind}; read a sample or validate with `advrace human-eval`")
        if args.details:
            for _, ex_id, check, detail in audit.flags:
                print(f"    {ex_id}: {check}: {detail}")
    return 1 if flagged else 0


def _export(args) -> int:
    if args.format == LM_EVAL:
        done = export_lm_eval(args.release, args.out, args.split)
        print(f"wrote {done.out}: group {done.group}, {plural(len(done.tasks), 'task')} "
              f"({', '.join(done.tasks.values())})")
        print(f"run: {done.command()}")
        return 0
    for path in export_advrace(args.release, args.out, args.split):
        print(f"wrote {path}")
    return 0


def _attacks(args) -> int:
    from advrace.attacks import ALIASES, attack_classes  # deferred for start-up time: importing the attacks loads every attack module

    for cls in attack_classes():
        doc = (cls.__doc__ or sys.modules[cls.__module__].__doc__ or "").strip().splitlines()[0]
        print(f"{cls.name}: {doc}")
        print(f"  tasks: {', '.join(cls.tasks)}")
        print(f"  config: {json.dumps(dataclasses.asdict(cls.Config()))}")
    for alias, by_task in ALIASES.items():
        named = ", ".join(f"{name} on {task}" for task, name in by_task.items())
        print(f"{alias}: an older name, read by the data's task: {named}")
    return 0


def main(argv: list[str] | None = None) -> int:
    try:
        parser = _parser()  # asks the registries, which load third-party plugins
    except AdvraceError as exc:
        print(f"advrace: error: {exc}", file=sys.stderr)
        return exc.exit_code
    args = parser.parse_args(argv)
    try:
        with transformers_quiet(getattr(args, "quiet", False)):
            status = args.handler(args)
        end_processes()
        return status
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
