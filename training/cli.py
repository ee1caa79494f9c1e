"""`advrace train`: the command-line face of training.loop.train."""

from __future__ import annotations

import argparse
import dataclasses
import sys
import textwrap

from advrace.core.errors import AdvraceError
from advrace.core.text import plural

from .config import load_config
from .objectives import REGISTRY

EPILOG = textwrap.dedent("""\
    examples:
      advrace train configs/train/cpu-smoke.yaml --output-dir runs/smoke
      advrace train configs/train/cpu-smoke.yaml --output-dir runs/smoke --resume
      advrace train configs/train/advrace-gpu.yaml --set train.path=/data/RACE/train --set dev.path=/data/RACE/dev
      accelerate launch --multi_gpu --num_processes 4 -m advrace train configs/train/advrace-gpu.yaml
      ACCELERATE_USE_CPU=true torchrun --nproc_per_node 2 -m advrace train configs/train/cpu-smoke.yaml

      advrace train configs/train/de-cpu.yaml --output-dir runs/de
      advrace train configs/train/dg-cpu.yaml --output-dir runs/dg

    A run writes OUTPUT/best and OUTPUT/final (from_pretrained folders: AutoModelForMultipleChoice,
    AutoModelForQuestionAnswering, or advrace.models.generators.unilm.UniLMSeq2Seq, per objective),
    OUTPUT/log.jsonl, OUTPUT/metrics.json and resumable OUTPUT/checkpoints/step-N.
    --max-steps stops early without changing the learning-rate schedule, so a capped run continued
    with --resume and a larger cap ends exactly where an uncapped run would. Resume with the same
    config and number of processes; the output folder should be on a filesystem all nodes share.
    Encoded training and dev sets are kept in the feature cache (~/.cache/advrace/features, or
    $ADVRACE_CACHE; `feature_cache: DIR` or `false` in the config), so the next run on the same
    data, tokenizer and max_length starts in seconds.
    Exit status: 0 on success, 2 on a bad config or malformed data, 3 if a resource is missing.
    """)


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError("must be a positive integer")
    return n


def _objectives() -> str:
    """The built-in objectives in words (third-party ones are not imported just for --help)."""
    named = [f"{name} ({cls.summary})" if cls.summary else name for name, cls in REGISTRY.items()]
    return ", ".join(named[:-1]) + " or " + named[-1] if len(named) > 1 else "".join(named)


def add_train_parser(subparsers):
    """Add `train` to an argparse subparsers object; returns the handler (args -> exit status)."""
    p = subparsers.add_parser(
        "train", help="train a reader, a distractor extractor or a distractor generator",
        description="Train with Accelerate on one CPU, one GPU, or several (accelerate launch), "
                    "keeping the best dev checkpoint. The config's `objective` picks the model: "
                    f"{_objectives()}.",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=EPILOG)
    p.add_argument("config", help="training recipe (YAML), e.g. configs/train/cpu-smoke.yaml")
    p.add_argument("--resume", action="store_true",
                   help="continue from the latest checkpoint in the output folder (fresh start if none)")
    p.add_argument("--output-dir", help="run folder (default: the config's output_dir, else runs/NAME)")
    p.add_argument("--max-steps", type=_positive,
                   help="stop after N optimizer steps (the learning-rate schedule still spans all epochs)")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="override a config key, e.g. --set train.limit=300 --set lr=2e-5 (repeatable)")
    p.add_argument("--quiet", action="store_true", help="no progress bars or status lines")
    return run_train


def run_train(args) -> int:
    from .loop import train  # deferred for start-up time: the loop imports torch

    cfg = load_config(args.config, args.set)
    if args.max_steps is not None:
        cfg = dataclasses.replace(cfg, max_steps=args.max_steps)
    result = train(cfg, output_dir=args.output_dir, resume=args.resume, progress=not args.quiet)
    m = result["metrics"]
    line = (f"trained {plural(m['step'], 'step')} on {plural(m['train_questions'], 'question')} "
            f"in {m['seconds']:.0f}s")
    metric = m["metric"]
    if m.get(metric) is not None:
        name = metric.removeprefix("dev_").replace("_", " ")
        line += (f"; dev {name} {m[metric]:.4f} (final), {m['best_' + metric]:.4f} "
                 f"(best, step {m['best_step']})")
    print(line)
    if result["best"]:
        print(f"  best:  {result['best']}")
    print(f"  final: {result['final']}")
    print(f"  log:   {result['log']}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m advrace.training")
    handler = add_train_parser(parser.add_subparsers(dest="command", required=True))
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] != ["train"]:
        argv.insert(0, "train")
    args = parser.parse_args(argv)
    try:
        return handler(args)
    except AdvraceError as exc:
        print(f"advrace train: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("advrace train: interrupted (continue with --resume)", file=sys.stderr)
        return 130
