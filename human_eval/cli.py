"""`advrace human-eval`: create a study, serve it, report on it, export it; author adversarial
questions against a model and export them as a release split."""

from __future__ import annotations

import argparse
import shlex
import socket
import sys
import textwrap
from pathlib import Path

from advrace.core.errors import ConfigError
from advrace.core.tasks import EXTRACTIVE_QA, MULTIPLE_CHOICE
from advrace.core.text import plural
from advrace.metrics.human_rates import RATES, validation_summary
from advrace.release.card import after_people_text, people_edit_text, quality_control_lines, validation_fate

TASKS = (MULTIPLE_CHOICE, EXTRACTIVE_QA)

EPILOG = textwrap.dedent("""\
    examples:
      advrace human-eval create releases/race-test --per-split 50 --seed 1 --annotators 9 --judgements 3 --db study.db --port 8765
      advrace human-eval create releases/race-test --splits distractor_generation --all-changed --annotators 3 --db dg.db
      advrace human-eval validate dg.db releases/race-test --out releases/race-test-validated
      advrace human-eval create SQUAD_RELEASE --splits addonesent,addsent --edit --editors 5 --annotators 5 --db edit.db
      advrace human-eval create --verify --db EDIT_DB --verifiers 3 --annotators 15   # once the editors pressed Finish
      advrace human-eval serve study.db --port 8765          # as create prints it; send each annotator their link
      advrace human-eval report study.db --out reports/human
      advrace human-eval export study.db --out annotations.jsonl
      advrace human-eval export-tasks study.db --format csv --out tasks.csv  # a crowd platform's input
      advrace human-eval import-answers study.db results.csv               # its results, checked as the app does
      advrace human-eval author --model runs/race/best --db study.db --name alice
      advrace human-eval export-authored study.db --out releases/authored
      advrace human-eval author --model runs/squad-cpu/final --db squad.db --name bob   # span questions

    A span checkpoint (`advrace train` with objective span_extraction, or a hub model whose
    config names a *ForQuestionAnswering architecture) serves the span page: the author writes a
    question about a paragraph (pasted, or picked from the study's SQuAD items), marks its answer,
    and fools the model when its answer's F1 is below --fooled-below (default 0.5).

    The server binds to 127.0.0.1; pass --host 0.0.0.0 (to create and serve) to let others on the
    network reach it. Probe splits (option_only, diagnosis) are left out of a study unless
    --splits names them.
    A study of every changed question (--all-changed), once its annotators have pressed Finish,
    becomes a validated release with `validate`. A judgement is a valid vote only when the
    annotator chose the gold (another option, a fake answer's span, or "cannot be answered" is an
    invalid vote); a question whose votes are not a valid majority (a tie too) goes back to its
    source split's form (or out, with --drop), with the same question of every split built from
    it. Check the result with `advrace verify RELEASE --study DB`.
    Links carry a secret token: anyone with a link can answer as that annotator, so send each
    link only to its annotator. Exit status: 0 on success, 1 when the release does not match its
    manifest (`advrace verify`), 2 on bad input.
    """)


DEFAULT_HOST, DEFAULT_PORT = "127.0.0.1", 8000
WILDCARD_HOSTS = ("0.0.0.0", "")


def _link_host(host: str) -> str:
    """The host name a link can carry: a server bound to every interface is reached by this
    machine's name (127.0.0.1 would work on this machine only)."""
    return socket.gethostname() if host in WILDCARD_HOSTS else host


def _link(host: str, port: int, kind: str, token: str) -> str:
    return f"http://{_link_host(host)}:{port}/{kind}/{token}"


def serve_command(db: str, host: str, port: int) -> str:
    """The `serve` command line that serves links made with `host` and `port`, ready to paste."""
    words = ["advrace", "human-eval", "serve", db]
    if host != DEFAULT_HOST:
        words += ["--host", host]
    return shlex.join(words + ["--port", str(port)])


def f1_threshold(text: str) -> float:
    value = float(text)
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be above 0 and at most 1, got {text}")
    return value


def _authoring_arguments(p) -> None:
    p.add_argument("--task", choices=TASKS,
                   help="the model's task (default: what `advrace train` recorded for the checkpoint, or "
                        "its config's architecture; multiple_choice when neither says)")
    p.add_argument("--fooled-below", type=f1_threshold, default=0.5, metavar="F1",
                   help="span questions: a submission fools the model when the model's answer has SQuAD F1 "
                        "below this against the marked answer (default 0.5)")


def add_human_eval_parser(subparsers):
    p = subparsers.add_parser(
        "human-eval", help="validate splits with annotators, and author adversarial questions",
        description="Human evaluation of a release in a web app (valid and correct rates per split, "
                    "agreement), and human-in-the-loop adversarial authoring against a model.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    sub = p.add_subparsers(dest="human_command", required=True)
    for add in (_add_create, _add_serve, _add_report, _add_validate, _add_export, _add_export_tasks,
                _add_import_answers, _add_author, _add_export_authored):
        add(sub)

    def handler(args) -> int:
        return _run(args)

    p.set_defaults(handler=handler)
    return handler


def _add_create(sub) -> None:
    c = sub.add_parser("create", help="sample a study from a release and create annotator accounts")
    c.add_argument("release", nargs="?", help="release folder (not with --verify, which adds to a study)")
    c.add_argument("--db", required=True, help="the study database to create (SQLite)")
    c.add_argument("--per-split", type=int, help="questions sampled per split (default 50)")
    c.add_argument("--all-changed", action="store_true",
                   help="every question the splits' attacks changed (perturbed: true) instead of a sample: "
                        "the study `validate` turns into a validated release")
    c.add_argument("--seed", type=int, default=0)
    c.add_argument("--annotators", type=int,
                   help="annotator accounts (default 3; with --verify, new accounts added to the study, default 0)")
    c.add_argument("--edit", action="store_true",
                   help="SQuAD: an edit study: people rewrite each machine sentence of the changed questions of "
                        "--splits (addonesent, addsent, addsentmod) into fluent English, or mark it beyond repair")
    c.add_argument("--editors", type=int, default=5, metavar="K",
                   help="with --edit: editors per sentence, none editing one twice (default 5, at most --annotators)")
    c.add_argument("--verify", action="store_true",
                   help="add to the study --db a verify item for each edit (and each RACE mend) of annotators who "
                        "pressed Finish: answered blind by annotators who never saw the question")
    c.add_argument("--verifiers", type=int, default=3, metavar="M",
                   help="with --verify: verifiers per edit (default 3); an edit is approved when more than half "
                        "of them answer with the gold and call it grammatical")
    c.add_argument("--judgements", type=int, metavar="K",
                   help="judgements per item, spread over the annotators from the seed, none judging an item "
                        "twice (default: every annotator judges every item)")
    c.add_argument("--same-annotator-versions", action="store_true",
                   help="let one annotator judge two versions of one question (by default never: what the "
                        "versions share gives the gold away); the study, its report and a validated release "
                        "record it")
    _add_study_quality_arguments(c)
    c.add_argument("--splits", help="comma-separated splits (default: all but the probe splits, such as "
                                    "option_only, which has no passage or question; name them here to "
                                    "include them, e.g. --splits original,addsent,option_only)")
    c.add_argument("--host", default=DEFAULT_HOST,
                   help="the address `serve` will bind to, used in the printed links and serve command")
    c.add_argument("--port", type=int, default=DEFAULT_PORT,
                   help="the port `serve` will listen on, used in the printed links and serve command")


def _add_study_quality_arguments(c) -> None:
    """create's checks on the annotators: control questions, and a baseline of unattacked originals."""
    c.add_argument("--controls", type=float, default=0.0, metavar="RATE",
                   help="mix control questions (original questions with a known answer) into every queue, "
                        "about RATE of it (0.1 is what crowd studies use; default 0: none), to measure each "
                        "annotator's accuracy; with --edit, every later --verify round mixes them in too")
    c.add_argument("--min-accuracy", type=float, metavar="A",
                   help="exclude from the votes annotators whose accuracy on control questions is below A "
                        "(default 0.75 with --controls)")
    c.add_argument("--baseline", type=float, default=0.0, metavar="RATE",
                   help="also judge the original of RATE of the studied questions, each by annotators who "
                        "have no version of it, so that the report gives the valid rate of the unattacked "
                        "questions beside the attacked ones (default 0: none)")


def _add_serve(sub) -> None:
    s = sub.add_parser("serve", help="run the annotation web app")
    s.add_argument("db")
    s.add_argument("--host", default=DEFAULT_HOST)
    s.add_argument("--port", type=int, default=DEFAULT_PORT)
    s.add_argument("--model", help="also serve the authoring page with this model (checkpoint or built-in)")
    _authoring_arguments(s)


def _add_report(sub) -> None:
    r = sub.add_parser("report", help="valid rate (items) and correct rate (judgements) with 95%% intervals, "
                                      "kappa, disagreements")
    r.add_argument("db")
    r.add_argument("--out", required=True, help="folder for report.json, report.md, report.png")


def _add_validate(sub) -> None:
    v = sub.add_parser("validate", help="write a validated release from a finished --all-changed study",
                       description="Write a new release in which every changed question of the studied splits "
                                   "carries its votes (valid only when the annotator chose the gold), and one "
                                   "without a valid majority (a tie too) is back as in its source split (or "
                                   "dropped, with --drop). The manifest and card record the study; check it "
                                   "with `advrace verify OUT --study DB`.")
    v.add_argument("db", help="the study database (created with --all-changed)")
    v.add_argument("release", help="the release the study was created from")
    v.add_argument("--out", required=True, help="the validated release folder to write")
    v.add_argument("--drop", action="store_true",
                   help="remove the questions judged invalid from their split instead of putting back the original")
    v.add_argument("--partial", action="store_true",
                   help="validate an unfinished study: an item whose votes so far decide its verdict gets it; "
                        "the others stay as they are, marked unvalidated in provenance")
    v.add_argument("--adversary", metavar="MODEL",
                   help="a span checkpoint: an edited AddSent split takes, of each question's approved sentences, "
                        "the one MODEL does worst on (AddSent's criterion, as Jia and Liang chose); required when "
                        "the study edited an addsent split")


def _add_export(sub) -> None:
    x = sub.add_parser("export", help="every annotation as JSONL")
    x.add_argument("db")
    x.add_argument("--out", required=True)


def _add_export_tasks(sub) -> None:
    et = sub.add_parser("export-tasks",
                        help="every queued task as a CSV for a crowd platform (Prolific, Mechanical Turk)",
                        description="One row per task of every annotator's queue (an annotator is one worker): what "
                                    "the app's page shows (never the gold), the ids and a row hash to read the "
                                    "answers back, the answer form's fields as empty columns and a worker_id column. "
                                    "See docs/human-eval.md, 'Running a study on Prolific or Mechanical Turk'.")
    et.add_argument("db")
    et.add_argument("--format", choices=("csv",), default="csv", help="the file's format (csv)")
    et.add_argument("--out", required=True, help="the CSV file to write")
    et.add_argument("--annotators", metavar="NAME[,NAME...]",
                    help="only these annotators' queues (e.g. one batch per queue, each published to one worker)")


def _add_import_answers(sub) -> None:
    ia = sub.add_parser("import-answers", help="store a crowd platform's results CSV as the app would, or nothing",
                        description="Every answer goes through the app's checks; the whole file is refused, nothing "
                                    "stored, when a row is of another study, names an unknown queue, position or "
                                    "item, was edited (its row hash), answers a task twice, puts two workers on a "
                                    "queue or one worker on two, or is an answer the app refuses. Accepts "
                                    "Mechanical Turk's Input.<col>/Answer.<col>/WorkerId columns.")
    ia.add_argument("db")
    ia.add_argument("file", help="the platform's results file (CSV)")
    ia.add_argument("--finish", action="store_true",
                    help="mark finished every queue in the file, answered or not (default: those all answered); a "
                         "queue finished with open tasks keeps them open for good, and `validate` then needs --partial")


def _add_author(sub) -> None:
    a = sub.add_parser("author", help="create an author account and serve the authoring page")
    a.add_argument("--model", required=True,
                   help="a multiple-choice checkpoint, sliding-window / similarity, or a span checkpoint "
                        "(SQuAD questions)")
    _authoring_arguments(a)
    a.add_argument("--db", required=True, help="a study database (created if missing)")
    a.add_argument("--name", default="author1", help="the author's account name")
    a.add_argument("--host", default=DEFAULT_HOST)
    a.add_argument("--port", type=int, default=DEFAULT_PORT)


def _add_export_authored(sub) -> None:
    ea = sub.add_parser("export-authored", help="submitted questions as a human_authored release split")
    ea.add_argument("db")
    ea.add_argument("--out", required=True, help="release folder to write")
    ea.add_argument("--task", choices=TASKS,
                    help="which submissions, when the database holds both multiple-choice and span ones")


def _run(args) -> int:
    """Run one subcommand (`COMMANDS`). `advrace` builds this parser for every command; the web app
    (Jinja2, its templates) and the model code are ~40 ms of imports that only human-eval needs, so
    each subcommand's run imports its own modules, deferred for start-up."""
    cmd = args.human_command
    if cmd in NEEDS_STUDY and not Path(args.db).is_file():
        raise ConfigError(f"{args.db}: no such study database; create one with `advrace human-eval create`")
    if cmd not in COMMANDS:
        raise ConfigError(f"unknown human-eval command {cmd!r}")
    return COMMANDS[cmd](args)


def _create_options_problem(args) -> str | None:
    """What create's options contradict, if they do."""
    if args.all_changed and args.per_split is not None:
        return "--per-split samples, --all-changed takes every changed question: give one of them"
    if args.edit and args.verify:
        return "--edit creates an edit study, --verify adds verify items to one: give one of them"
    if (args.edit or args.verify) and (args.per_split is not None or args.judgements is not None):
        return ("--edit takes every machine sentence of the changed questions, each to --editors "
                "annotators, and --verify each edit to --verifiers: drop --per-split and --judgements")
    if (args.edit or args.verify) and args.baseline:
        return "--baseline judges the originals of judged questions; an edit study has none to judge: drop --baseline"
    if args.verify and (args.controls or args.min_accuracy is not None):
        return ("--verify mixes control questions into the verify queues at the rate the study was "
                "created with (create --edit --controls RATE --min-accuracy A); drop --controls and "
                "--min-accuracy here")
    if args.verify and args.release:
        return f"--verify adds to the study --db, made from its own release; drop {args.release}"
    if not args.verify and not args.release:
        return "create needs a release folder (or --verify, to add verify items to --db)"
    return None


def _create(args) -> int:
    problem = _create_options_problem(args)
    if problem:
        raise ConfigError(problem)
    if args.verify:
        out = _add_verify_round(args)
    elif args.edit:
        out = _create_edit_study(args)
    else:
        out = _create_judge_study(args)
    if out.get("controls") and not args.verify:
        print(f"mixed {plural(out['controls'], 'control question')} into the queues (about {args.controls:.0%} of "
              f"each{', and of each verify round' if args.edit else ''}); annotators below {out['min_accuracy']} "
              "accuracy on them are excluded from the votes")
    if out.get("left_out"):
        print(f"left out the probe splits {', '.join(out['left_out'])} (name them in --splits to include them)")
    for name, token in out["annotators"].items():
        print(f"  {name}: {_link(args.host, args.port, 'a', token)}")
    if args.host in WILDCARD_HOSTS:
        print(f"The links name this machine {_link_host(args.host)!r}; if annotators reach it by another "
              "name or address, use that instead.")
    print("Start the app with: " + serve_command(args.db, args.host, args.port))
    return 0


def _splits(args) -> list[str] | None:
    return [s for s in args.splits.split(",") if s] if args.splits else None


def _annotators(args) -> int:
    return 3 if args.annotators is None else args.annotators


def _add_verify_round(args) -> dict:
    from . import verifying  # deferred for start-up

    out = verifying.add_verify_items(args.db, verifiers=args.verifiers, annotators=args.annotators or 0,
                                     seed=args.seed)
    print(f"added to {args.db}: {verifying.describe(out, args.verifiers)}")
    aside = verifying.set_aside_line(args.db)
    if aside:
        print(aside)
    return out


def _create_edit_study(args) -> dict:
    from . import editing  # deferred for start-up

    out = editing.create_edit_study(args.release, args.db, splits=_splits(args), editors=args.editors,
                                    annotators=_annotators(args), seed=args.seed, controls_rate=args.controls,
                                    min_accuracy=args.min_accuracy)
    print(f"created {args.db}: {editing.describe(out)}, {plural(len(out['annotators']), 'annotator')}")
    return out


def _create_judge_study(args) -> dict:
    from . import study  # deferred for start-up

    out = study.create_study(args.release, args.db, per_split=args.per_split or 50, seed=args.seed,
                             annotators=_annotators(args), splits=_splits(args), all_changed=args.all_changed,
                             judgements=args.judgements, same_annotator_versions=args.same_annotator_versions,
                             controls_rate=args.controls, baseline_rate=args.baseline, min_accuracy=args.min_accuracy)
    per_item = (f", {plural(args.judgements, 'judgement')} per item"
                if args.judgements is not None and args.judgements < len(out["annotators"]) else "")
    print(f"created {args.db}: {plural(out['items'], 'item')} from {', '.join(out['splits'])}"
          f"{' (every changed question)' if args.all_changed else ''}, "
          f"{plural(len(out['annotators']), 'annotator')}{per_item}")
    if out["baseline"]:
        print(f"added the originals of {plural(out['baseline'], 'studied question')} as baseline items, each to "
              "annotators who have no version of it")
    if args.same_annotator_versions:
        print("one annotator may judge several versions of a question (--same-annotator-versions; recorded)")
    return out


def _serve(args) -> int:
    """serve, and author (which first makes the author's account): the web app until Ctrl-C."""
    from . import authoring, server, study  # deferred for start-up

    db = args.db
    model = authoring.load_authoring_model(args.model, task=args.task, fooled_below=args.fooled_below) \
        if args.model else None
    if args.human_command == "author":
        token = study.add_authors(db, [args.name])[args.name]
        print(f"author {args.name}: {_link(args.host, args.port, 'author', token)}")

    def ready(httpd):
        print(f"serving {db} on http://{args.host}:{httpd.server_port} (Ctrl-C to stop)", flush=True)

    try:
        server.serve(db, args.host, args.port, model, ready)
    except KeyboardInterrupt:
        pass
    return 0


def _report(args) -> int:
    from . import report  # deferred for start-up

    result = report.write(args.db, args.out)
    print((Path(args.out) / "report.md").read_text(encoding="utf-8").rstrip())
    print(f"\nwrote {args.out}: report.json, report.md, report.png ({plural(len(result['splits']), 'split')})")
    return 0


def _validate(args) -> int:
    from . import validate  # deferred for start-up

    done = validate.validate_release(args.db, args.release, args.out, drop=args.drop, partial=args.partial,
                                     adversary=args.adversary)
    print(f"wrote {args.out}: validated from {args.release} by the study {args.db}")
    for split, v in done["splits"].items():
        if v.get("kind") == "edit":
            print(f"  {split}: {people_edit_text(v, args.drop)}")
            continue
        print(f"  {split}: {validation_summary(v)}; {validation_fate(v, args.drop)}{after_people_text(v)}")
        if v["unjudged"]:
            print(f"  {split}: {plural(v['unjudged'], 'item')} not yet judged, left as they were and marked "
                  "unvalidated (--partial)")
    for line in quality_control_lines(done):
        print(textwrap.fill(line, 100))
    print(textwrap.fill(RATES, 100))
    print("check it with: " + shlex.join(["advrace", "verify", args.out, "--study", args.db]))
    sys.stdout.flush()  # after the summary, where stdout and stderr share a terminal
    for line in done["warnings"]:
        print(line, file=sys.stderr)
    return 0


def _export(args) -> int:
    from . import report  # deferred for start-up

    print(f"wrote {plural(report.export_jsonl(args.db, args.out), 'annotation')} to {args.out}")
    return 0


def _export_tasks(args) -> int:
    from . import crowd  # deferred for start-up

    out = crowd.export_tasks(args.db, args.out, [n for n in (args.annotators or "").split(",") if n] or None)
    print(f"wrote {args.out}: {plural(out['rows'], 'task')} in {plural(out['queues'], 'queue')} (one worker "
          f"each) of study {out['study_id']}")
    return 0


def _import_answers(args) -> int:
    from . import crowd  # deferred for start-up

    out = crowd.import_answers(args.db, args.file, finish=args.finish)
    print(f"imported {args.file} into {args.db}: {plural(out['stored'], 'answer')} stored, "
          f"{out['unchanged']} already stored unchanged, {out['unanswered']} rows unanswered"
          + (f", {out['rejected']} rejected on the platform (not imported)" if out["rejected"] else ""))
    if out["finished"]:
        print(f"finished: {', '.join(out['finished'])}")
    return 0


def _export_authored(args) -> int:
    from . import authoring  # deferred for start-up

    manifest, fooled = authoring.export_authored(args.db, args.out, task=args.task)
    print(f"wrote {args.out}: {plural(manifest['splits']['human_authored']['count'], manifest['task'] + ' question')} "
          f"in split human_authored, {fooled} of which fooled the model")
    return 0


COMMANDS = {"create": _create, "serve": _serve, "author": _serve, "report": _report, "validate": _validate,
            "export": _export, "export-tasks": _export_tasks, "import-answers": _import_answers,
            "export-authored": _export_authored}
NEEDS_STUDY = ("serve", "report", "export", "export-authored", "validate", "export-tasks", "import-answers")
