"""Every command line that the README, the documentation pages (`docs/`) and `--help` show, checked so
that none can rot.

Each is parsed by the real parser, every file it names in the repository must exist and every
config it names must load. A concrete one (no placeholders) then runs, in the order shown, in a
sandbox folder laid out like a user's: tiny RACE and SQuAD data at the paths the examples name,
tiny checkpoints in `runs/`, the repository's `configs/`: one folder for the README, one for the
documentation pages in the site's order, one for `--help`. Training commands run one step on a tiny
model; the few that cannot run here (several processes, a server, a GPU grid) are listed in
PARSE_ONLY with the reason, and a stale entry there fails too.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from conftest import make_race_dir, squad_doc

REPO = Path(__file__).resolve().parents[1]
LAUNCHERS = ("accelerate", "torchrun", "python", "python3", ".venv/bin/python")
PLACEHOLDER = re.compile(r"^(?:--[a-z-]+=)?[A-Z][A-Z0-9_]*(?:,\S*)?$")

# Shown, parsed and their configs loaded, but not run here.
PARSE_ONLY = {
    "accelerate launch --multi_gpu --num_processes 4 -m advrace train":
        "four GPUs; tests/test_training.py runs the loop in two processes",
    "ACCELERATE_USE_CPU=true torchrun --nproc_per_node 2 -m advrace train":
        "two processes; tests/test_training.py runs them",
    "accelerate launch -m advrace evaluate": "a launcher; tests/test_evaluation.py scores in two processes",
    "advrace ablate configs/ablation/advrace-table6.yaml": "RoBERTa-large on GPUs; tests/test_ablation.py "
                                                           "runs a grid",
    "advrace human-eval serve": "a server; tests/test_human_eval_browser.py drives it",
    "advrace human-eval author": "a server; tests/test_human_eval_browser.py drives it",
    "advrace human-eval export-authored": "needs questions written on the authoring page "
                                          "(tests/test_human_eval_browser.py)",
    "advrace human-eval create releases/squad-authored": "validates what export-authored wrote from the page "
                                                         "(tests/test_human_eval_browser.py runs the loop)",
    "advrace human-eval report squad-check.db": "reports on that study (tests/test_human_eval_browser.py)",
    "advrace human-eval import-answers": "needs a crowd platform's results file; tests/test_human_crowd.py runs "
                                         "the round trip",
    "advrace human-eval validate": "needs a finished study, answered in the app; tests/test_human_validation.py "
                                   "and tests/test_human_eval_browser.py run it",
    "advrace verify releases/sample-validated --study": "a release that validate wrote "
                                                        "(tests/test_human_validation.py runs verify --study)",
    "advrace verify releases/squad-people --study": "a release that validate wrote from an edit study "
                                                    "(tests/test_human_release.py runs verify --study)",
    "advrace human-eval create releases/race-test --splits distractor_generation": "a release of the full RACE "
                                                                                   "test set with trained DG",
    "advrace build my-release.yaml": "a config the reader writes, shown above it in the README",
    "advrace build configs/release/dg-dev-middle-40.yaml": "real RACE dev-middle and the generator trained on "
                                                           "real RACE train above it",
    "advrace human-eval create releases/dg40": "the release built from real data above it",
    "advrace build --data xquad-sub.json": "real XQuAD-en paragraphs, which tests never read (docs/results.md's study)",
    "advrace human-eval create rel-xquad": "the release built from real data above it",
    "advrace human-eval create rel-dg": "the release built from real data above it",
    "advrace human-eval create --verify --db xq.db": "the study of real data above it, after its editor finished",
    "advrace human-eval create --verify --db dg.db": "the study of real data above it, after its judge finished",
    "advrace verify rel-xquad-validated": "the release validated from the real study above it",
    "advrace verify rel-dg-validated": "the release validated from the real study above it",
    "advrace evaluate releases/dg40": "the release built from real data, and its validated release",
    "advrace push releases/race-test alice/advrace-race-test --private": "online; the dry run runs here",
    "advrace push releases/race-test my-lab/": "online; the dry run runs here",
    "advrace evaluate releases/race-test --model HuggingFaceTB/": "Hub LLMs on a GPU; tests/test_llm_scoring.py "
                                                                 "scores tiny causal LMs",
    "advrace evaluate releases/race-test --model smollm2": "real weights: the slow test of tests/test_llm_scoring.py",
    "advrace evaluate releases/race-test --model Qwen/": "a Hub LLM; tests/test_llm_scoring.py scores letter choice",
    "advrace evaluate releases/race-test --model meta-llama/": "a 70B Hub LLM over GPUs; tests/test_model_args.py "
                                                              "loads a tiny one with these model args",
    "python bench/squad_strength.py XQUAD_EN_JSON": "real XQuAD data, which tests never read; a bench",
    "advrace train configs/train/squad-cpu.yaml --set train.path=runs/squad-strength/": "the bench's split of "
                                                                                         "real XQuAD data",
    "advrace build --data runs/squad-strength/": "the bench's held-out half of real XQuAD data",
    "advrace evaluate runs/squad-strength/": "the bench's release and trained reader",
    "advrace compare reports/smollm2 reports/smollm2-bos": "two reports of real weights; "
                                                           "tests/test_scoring_protocol.py compares two",
    "accelerate launch --num_processes 8 -m advrace evaluate": "8 GPUs; tests/test_llm_scoring.py scores "
                                                               "in two processes",
}


# --------------------------------------------------------------------------- collecting


def _command(line: str) -> str | None:
    line = re.sub(r"\s+#.*$", "", line.strip())
    words = line.split()
    while words and re.match(r"^[A-Z_]+=\S*$", words[0]):
        words = words[1:]
    if words and (words[0] in ("advrace", "make") or words[0] in LAUNCHERS):
        return line
    return None


def doc_pages() -> list[Path]:
    """The README, then every page of docs/ in the site's order (mkdocs.yml's nav), then any page outside it."""
    def flatten(entries):
        for entry in entries:
            value = next(iter(entry.values())) if isinstance(entry, dict) else entry
            if isinstance(value, list):
                yield from flatten(value)
            else:
                yield REPO / "docs" / value

    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    pages = list(dict.fromkeys(flatten(config["nav"])))
    return [REPO / "README.md"] + pages + sorted(set((REPO / "docs").rglob("*.md")) - set(pages))


def _where(page: Path) -> str:
    return str(page.relative_to(REPO))


def page_lines(page: Path) -> list[str]:
    """Command lines of a page's code blocks."""
    text = page.read_text(encoding="utf-8")
    lines = []
    for block in re.findall(r"^```[a-z]*\n(.*?)^```", text, re.S | re.M):
        for line in re.sub(r"\\\n\s*", " ", block).splitlines():
            if (cmd := _command(line)) and (" -m " in cmd or cmd.split()[0] in ("advrace", "make")
                                            or cmd.split()[1].startswith("bench/")):
                lines.append(cmd)
    return list(dict.fromkeys(lines))


def page_mentions(page: Path) -> list[str]:
    """Inline code naming an advrace command: often a fragment, so only its command and flags
    are checked."""
    text = page.read_text(encoding="utf-8")
    prose = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return list(dict.fromkeys(re.findall(r"`((?:accelerate launch -m )?advrace [a-z][^`]*)`", prose)))


def _parsers(parser: argparse.ArgumentParser, prefix=()):
    yield prefix, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, prefix + (name,))


def help_lines() -> list[str]:
    """The lines under "example:" or "examples:" in every command's --help."""
    from advrace.cli import _parser

    lines = []
    for _, parser in _parsers(_parser()):
        inside = False
        for line in parser.format_help().splitlines():
            if re.match(r"^examples?:\s*$", line):
                inside = True
            elif line and not line.startswith(" "):
                inside = False
            elif inside and (cmd := _command(line)):
                lines.append(cmd)
    return list(dict.fromkeys(lines))


def _argv(line: str) -> tuple[list[str], dict[str, str]]:
    """advrace's own arguments of a command line, and the environment it sets."""
    words = shlex.split(line.replace("~", "$HOME"))
    env = {}
    while re.match(r"^[A-Z_]+=", words[0]):
        key, _, value = words.pop(0).partition("=")
        env[key] = value
    if words[0] == "advrace":
        return words[1:], env
    assert "-m" in words, f"{line!r}: runs no module"
    module = words[words.index("-m") + 1]
    assert module == "advrace", f"{line!r}: runs module {module!r}; the entry point is `-m advrace`"
    return words[words.index("-m") + 2:], env


def _is_synopsis(argv: list[str]) -> bool:
    return any(ch in w for w in argv for ch in "[]|") or "..." in argv or any(
        PLACEHOLDER.match(w) for w in argv)


def _parse_only(line: str) -> str | None:
    return next((why for prefix, why in PARSE_ONLY.items() if line.startswith(prefix)), None)


PAGES = doc_pages()
ALL_LINES = [(_where(page), line) for page in PAGES for line in page_lines(page)] + [
    ("--help", line) for line in help_lines()]
MENTIONS = list(dict.fromkeys((_where(page), m) for page in PAGES for m in page_mentions(page)))
SOURCES = {"README": lambda where: where == "README.md", "docs": lambda where: where.startswith("docs/"),
           "--help": lambda where: where == "--help"}


def test_lines_were_found():
    """The collectors see the README's, the pages' and the help's examples (an empty list would pass everything)."""
    readme = [line for where, line in ALL_LINES if SOURCES["README"](where)]
    docs = [line for where, line in ALL_LINES if SOURCES["docs"](where)]
    shown = [line for where, line in ALL_LINES if SOURCES["--help"](where)]
    assert "make test" in readme and "make demo" in readme
    assert any(line.startswith("advrace build configs/release/sample.yaml") for line in docs)
    assert any(line.startswith("advrace human-eval create") for line in docs + shown)
    assert any("-m advrace train" in line for line in shown)
    assert {where for where, _ in ALL_LINES} >= {"docs/getting-started.md", "docs/building.md", "docs/human-eval.md"}
    assert len(readme) >= 5 and len(docs) >= 40 and len(shown) >= 15


def test_parse_only_entries_are_still_shown():
    stale = [prefix for prefix in PARSE_ONLY if not any(line.startswith(prefix) for _, line in ALL_LINES)]
    assert not stale, f"PARSE_ONLY names command lines that no longer appear: {stale}"


# --------------------------------------------------------------------------- parsing


def _subparser(argv: list[str]) -> argparse.ArgumentParser:
    from advrace.cli import _parser

    parser, path = _parser(), []
    for word in argv:
        found = {name: sub for prefix, sub in _parsers(parser) if len(prefix) == 1 for name in [prefix[0]]}
        name = word.split("|")[0]
        if name not in found:
            break
        parser, path = found[name], path + [name]
    assert path, f"{' '.join(argv)!r}: no advrace subcommand"
    return parser


def _check_flags(where: str, line: str, argv: list[str]) -> None:
    parser = _subparser(argv)
    known = {s for action in parser._actions for s in action.option_strings}
    for word in argv:
        for flag in re.findall(r"(?<![\w-])(--[a-z][a-z-]*)", word):
            assert flag in known, f"{where}: {line!r}: {flag} is not an option of this command"


def _check_files(line: str, argv: list[str]) -> None:
    for word in argv:
        for value in [word.partition("=")[2] if word.startswith("--") else word]:
            if re.match(r"^(configs|bench)/", value):
                assert (REPO / value).exists(), f"{line!r} names {value}, which the repository does not have"


def _load_config(argv: list[str]) -> None:
    command, rest = argv[0], argv[1:]
    config = next((w for w in rest if w.endswith(".yaml")), None)
    if config is None or not (REPO / config).exists():
        return
    sets = [rest[i + 1] for i, w in enumerate(rest[:-1]) if w == "--set"]
    if command == "train":
        from advrace.training.config import load_config

        load_config(REPO / config, sets)
    elif command == "ablate":
        from advrace.training.ablation import load_grid

        load_grid(REPO / config)
    elif command == "build":
        from advrace.core.config import load_config

        load_config(str(REPO / config))


@pytest.mark.parametrize("where,line", ALL_LINES, ids=[f"{w}: {line[:70]}" for w, line in ALL_LINES])
def test_command_line_parses(where, line):
    words = line.split()
    if words[0] == "make":
        assert re.search(rf"^{re.escape(words[1])}:", (REPO / "Makefile").read_text(), re.M), \
            f"{where}: {line!r}: the Makefile has no target {words[1]}"
        return
    if words[0] in LAUNCHERS and " -m " not in line:
        assert (REPO / words[1]).is_file(), f"{where}: {line!r}: no script {words[1]}"
        return
    argv, _ = _argv(line)
    _check_files(line, argv)
    if _is_synopsis(argv):
        _check_flags(where, line, argv)
        return
    from advrace.cli import _parser

    try:
        _parser().parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: {line!r} does not parse (exit {exc.code})")
    _load_config(argv)


@pytest.mark.parametrize("where,line", MENTIONS, ids=[f"{w}: {m[:70]}" for w, m in MENTIONS])
def test_command_mentioned_in_the_docs_exists(where, line):
    argv, _ = _argv(line)
    _check_files(line, argv)
    _check_flags(where, line, argv)


def test_files_named_in_help_and_docs_exist(monkeypatch):
    """Also outside the examples: an option's "e.g. configs/..." or a module to run with -m."""
    from advrace.cli import _parser

    monkeypatch.setenv("COLUMNS", "1000")  # argparse would wrap a long path over two lines
    texts = {" ".join(prefix) or "advrace": parser.format_help() for prefix, parser in _parsers(_parser())}
    texts.update({_where(page): page.read_text(encoding="utf-8") for page in PAGES})
    for where, text in texts.items():
        for path in re.findall(r"(?<![\w/.-])((?:configs|bench)/[\w./-]*\w)", text):
            assert (REPO / path).exists(), f"{where} names {path}, which the repository does not have"
        for module in re.findall(r"(?:python3?|accelerate launch|torchrun)\b[^\n`]*? -m ([\w.]+)", text):
            assert module in ("advrace", "pytest", "pip", "venv"), \
                f"{where}: `-m {module}`; advrace's entry point is `-m advrace`"


# --------------------------------------------------------------------------- running


def _race_jsonl(root: Path, path: Path) -> None:
    rows = []
    for f in sorted(root.rglob("*.txt")):
        doc = json.loads(f.read_text(encoding="utf-8"))
        for k, question in enumerate(doc["questions"]):
            rows.append({"example_id": f"{doc['id']}-{k}", "article": doc["article"], "question": question,
                         "options": doc["options"][k], "answer": doc["answers"][k]})
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.writelines(json.dumps(r) + "\n" for r in rows)


def _tiny_checkpoints(folder: Path) -> dict[str, str]:
    """The golden build's tiny span, UniLM and causal models, and a multiple-choice one."""
    import torch
    from transformers import AutoTokenizer, BertConfig, BertForMultipleChoice

    sys.path.insert(0, str(REPO / "tests"))
    from golden.golden_build import make_models

    models = make_models(folder, positions=512)
    tok = AutoTokenizer.from_pretrained(models["qa"])
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        mc = BertForMultipleChoice(BertConfig(vocab_size=len(tok), hidden_size=32, num_hidden_layers=2,
                                              num_attention_heads=4, intermediate_size=64,
                                              max_position_embeddings=512))
    mc.save_pretrained(folder / "mc")
    tok.save_pretrained(folder / "mc")
    return {**models, "mc": str(folder / "mc")}


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    return _tiny_checkpoints(tmp_path_factory.mktemp("models"))


@pytest.fixture
def sandbox(tmp_path, models):
    """A user's working folder: data where the examples look for it, tiny checkpoints in runs/."""
    root = tmp_path / "work"
    root.mkdir()
    (root / "configs").symlink_to(REPO / "configs")
    (root / "bench").symlink_to(REPO / "bench")
    (root / "constraints.txt").symlink_to(REPO / "constraints.txt")
    race = make_race_dir(root / "tiny")
    for target in ("RACE/test", "RACE/dev", "RACE/train", "home/data/RACE/test", "data/RACE/train",
                   "data/RACE/dev"):
        (root / target).parent.mkdir(parents=True, exist_ok=True)
        (root / target).symlink_to(race)
    _race_jsonl(race, root / "RACE" / "train.jsonl.gz")
    (root / "dev-v1.1.json").write_text(json.dumps(squad_doc()), encoding="utf-8")
    runs = {"de-sample/final": "qa", "dg-sample/final": "lm", "bert-base": "mc", "roberta": "mc",
            "bert-large": "mc", "race/best": "mc"}
    for run, kind in runs.items():
        (root / "runs" / run).parent.mkdir(parents=True, exist_ok=True)
        (root / "runs" / run).symlink_to(models[kind])
    return root, models


def _tiny_train(argv: list[str], models: dict[str, str]) -> list[str]:
    """One optimiser step of a tiny model of the config's objective on four questions."""
    from advrace.training.config import load_config

    sets = [argv[i + 1] for i, w in enumerate(argv[:-1]) if w == "--set"]
    cfg = load_config(REPO / argv[1], sets)
    model = {"causal_lm": "lm", "span_extraction": "qa", "distractor_generation": "unilm"}.get(cfg.objective, "mc")
    extra = ["--max-steps", "1", "--quiet", "--set", f"model={models[model]}", "--set", "model_overrides={}",
             "--set", "train.limit=4", "--set", "dev.limit=4", "--set", "batch_size=2",
             "--set", "eval_batch_size=4", "--set", "gradient_accumulation_steps=1",
             "--set", "max_length=64", "--set", "mixed_precision='no'"]
    if cfg.objective == "causal_lm":
        extra += ["--set", "causal_lm.trainable_layers=1", "--set", "causal_lm.max_passage_tokens=32"]
    if cfg.objective == "span_extraction":
        extra += ["--set", "span_extraction.doc_stride=16"]
    return argv + extra


def _predictions_file(root: Path, argv: list[str]) -> None:
    """The predictions file an evaluate example names, for the release it scores (option A)."""
    path = root / argv[argv.index("--predictions") + 1]
    release = root / argv[1]
    path.parent.mkdir(parents=True, exist_ok=True)
    ids = [json.loads(line)["id"] for f in sorted((release / "data").glob("*.jsonl"))
           for line in f.read_text(encoding="utf-8").splitlines() if line.strip()]
    if path.suffix == ".jsonl":
        path.write_text("".join(json.dumps({"id": i, "prediction": 0}) + "\n" for i in ids), encoding="utf-8")
    else:
        path.write_text(json.dumps({i: 0 for i in ids}), encoding="utf-8")


def _runnable(source: str) -> list[tuple[str, str]]:
    out = []
    for where, line in ALL_LINES:
        if not SOURCES[source](where) or line.startswith("make ") or _parse_only(line):
            continue
        if line.split()[0] in LAUNCHERS and " -m " not in line:
            out.append((where, line))
        elif not _is_synopsis(_argv(line)[0]):
            out.append((where, line))
    return out


@pytest.mark.parametrize("source", list(SOURCES))
def test_every_concrete_command_line_runs(source, sandbox, monkeypatch, capsys):
    """In the order shown, each source in a folder of its own: later examples use what earlier
    ones wrote."""
    from advrace.cli import main

    root, models = sandbox
    monkeypatch.chdir(root)
    monkeypatch.setenv("HOME", str(root / "home"))
    monkeypatch.setenv("ACCELERATE_USE_CPU", "true")
    failures = []
    for where, line in _runnable(source):
        if line.split()[0] in LAUNCHERS:
            run = subprocess.run([sys.executable, *shlex.split(line)[1:]], cwd=root, capture_output=True,
                                 text=True, env={**os.environ, "HOME": str(root / "home")})
            code, err = run.returncode, run.stderr[-2000:]
        else:
            argv, env = _argv(os.path.expandvars(line.replace("~", "$HOME")))
            for key, value in env.items():
                monkeypatch.setenv(key, value)
            argv = [w.replace("/data/", f"{root}/data/") if w.startswith("train.path=/data/")
                    or w.startswith("dev.path=/data/") else w for w in argv]
            if argv[0] == "train":
                argv = _tiny_train(argv, models)
            if argv[0] == "build":
                argv += ["--quiet"] + ([] if "--sample" in argv else ["--limit", "8"])
            if argv[:2] == ["human-eval", "create"] and "--db" in argv:
                (root / argv[argv.index("--db") + 1]).unlink(missing_ok=True)  # each example starts a study
            if argv[0] == "evaluate" and "--predictions" in argv:
                _predictions_file(root, argv)
            try:
                code = main(argv)
            except Exception as exc:  # noqa: BLE001 - reported with the line that raised it
                code = f"{type(exc).__name__}: {exc}"
            err = capsys.readouterr().err[-2000:]
        if code != 0:
            failures.append(f"{where}: {line!r}: exit {code}\n{err}")
    assert not failures, "\n\n".join(failures)
