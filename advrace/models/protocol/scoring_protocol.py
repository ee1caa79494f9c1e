"""Everything that decides a decoder LM's number, as one frozen record.

Two numbers are comparable only if the same text was scored the same way: the prompt template,
the target delimiter and the few-shot separator; which shots (file, fingerprint, seed); whether
a BOS token goes first and whether a chat template wrapped the prompt; how a prompt too long for
the model was cut; which metrics; which weights (a GGUF's quantisation included); and which
release. `advrace evaluate` writes this record into results.json and results.md ("How each model
was scored"), and `advrace export --format lm-eval` into its marker file; `differences` says in
words where two records part.

Two protocols exist:
- `advrace-per-question` (the default): every question of every split is scored on its own, with
  the prompt lm-evaluation-harness's `race` task builds for an article with one question. An
  adversarial split attacks each question on its own, so each must be scored on its own.
- `lm-eval-race`: lm-evaluation-harness's own `race` task, on the release's `original` split:
  one document per article, the article's earlier questions and their answers in the context,
  only its last question scored, metric acc (advrace.models.protocol.lm_eval_race).
"""

from __future__ import annotations

import hashlib
from dataclasses import asdict, dataclass, field, fields

from advrace.models.protocol import llm_prompts

PER_QUESTION = "advrace-per-question"
LM_EVAL_RACE = "lm-eval-race"
PROTOCOLS = (PER_QUESTION, LM_EVAL_RACE)
BOS_POLICIES = ("tokenizer", "always", "never")
TRUNCATION = ("left: a (context, continuation) pair longer than max_length + 1 tokens loses the first "
              "tokens of its context, each pair on its own, as lm-evaluation-harness cuts it; every cut "
              "is warned and counted")
PROTOCOL_TEXT = {
    PER_QUESTION: "every question scored on its own, with the prompt lm-evaluation-harness's race task "
                  "builds for an article with one question (not lm-eval's race number: that task scores "
                  "only each article's last question, its earlier questions answered in the context)",
    LM_EVAL_RACE: "lm-evaluation-harness's own race task: one document per article of the original split, "
                  "the article's earlier questions with their answers in the context, only its last "
                  "question scored",
}


# The version of lm-evaluation-harness's race task that `lm-eval-race` reproduces (race.yaml's
# metadata.version; lm-eval 0.4.13 ships it): version 3.0 fills in the blank of an earlier
# question ending in "  _  ." with its answer, the fix of lm-eval's issue 835 (PR 3716). Before it
# (2.0) the question's stem was dropped and the blank kept (" _  .dog"), so numbers of the two
# versions differ on articles with such questions.
LM_EVAL_RACE_TASK = {
    "task": "race", "version": "3.0",
    "change": "an earlier question ending in '  _  .' is written as the sentence with its answer in the blank, "
              "the fix of lm-eval issue 835 (PR 3716), where version 2.0 and before dropped the question's stem",
    "dataset": "EleutherAI/race, config high, split test",
}


def text_sha256(text: str | None) -> str | None:
    return None if text is None else hashlib.sha256(text.encode("utf-8")).hexdigest()


@dataclass(frozen=True)
class ScoringProtocol:
    """See the module doc. `prompt` is the template with {passage}, {question}, ... fields."""

    name: str
    method: str
    prompt: str
    target_delimiter: str
    fewshot_delimiter: str
    metrics: tuple[str, ...]
    max_length: int
    max_length_from: str  # "--max-length", or the model config's key that gave it
    bos: str  # BOS_POLICIES
    adds_bos: bool  # what the policy came to for this tokenizer
    chat_template: bool
    chat_template_sha256: str | None = None
    shots: int = 0
    few_shot_file: str | None = None
    few_shot_sha256: str | None = None
    few_shot_seed: int | None = None
    truncation: str = TRUNCATION
    model: dict = field(default_factory=dict)  # name, path, weights
    release: dict = field(default_factory=dict)  # name, manifest_sha256
    lm_eval_task: dict | None = None  # the lm-eval task version an lm-eval protocol reproduces

    @property
    def description(self) -> str:
        return PROTOCOL_TEXT.get(self.name, self.name)

    def to_dict(self) -> dict:
        out = asdict(self)
        out["metrics"] = list(self.metrics)
        out["description"] = self.description
        return out

    @classmethod
    def from_dict(cls, data: dict) -> ScoringProtocol:
        known = {f.name for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        values["metrics"] = tuple(values.get("metrics") or ())
        return cls(**values)


def task_protocol(task_is_mc: bool, method: str, *, per_article: bool = False) -> dict:
    """The part of a protocol that depends on the release's task and the method alone (no model):
    what the scorer and the lm-eval export both render from."""
    if not task_is_mc:
        prompt, metrics = llm_prompts.SQUAD_PROMPT, ("exact_match", "f1")
    elif per_article:
        prompt, metrics = llm_prompts.LM_EVAL_RACE_PROMPT, ("acc",)
    elif method == llm_prompts.LETTER:
        prompt, metrics = llm_prompts.LETTER_PROMPT, ("acc",)
    else:
        prompt, metrics = llm_prompts.RACE_PROMPT, ("acc", "acc_norm")
    return {"name": LM_EVAL_RACE if per_article else PER_QUESTION, "method": method, "prompt": prompt,
            "target_delimiter": llm_prompts.TARGET_DELIMITER, "fewshot_delimiter": llm_prompts.FEWSHOT_DELIMITER,
            "metrics": metrics, "truncation": TRUNCATION,
            **({"lm_eval_task": dict(LM_EVAL_RACE_TASK)} if per_article else {})}


# what two records may differ in without the numbers meaning different things
_NOT_DECISIVE = {"description"}


def differences(a: dict, b: dict) -> list[str]:
    """Where two protocol records (their dicts) part, one line each; [] when they agree on all
    that decides a number. A record missing on one side is itself a difference."""
    if not a or not b:
        return ["one of them has no scoring protocol recorded (scored by advrace before protocols "
                "were recorded, or not a decoder LM)"] if a != b else []
    lines = []
    for key in sorted(set(a) | set(b)):
        if key in _NOT_DECISIVE or a.get(key) == b.get(key):
            continue
        lines.append(f"{key}: {a.get(key)!r} vs {b.get(key)!r}")
    return lines


def protocol_line(protocol: dict) -> str:
    """A one-line account of a protocol for results.md."""
    shots = protocol.get("shots") or 0
    few = (f"{shots}-shot from `{protocol.get('few_shot_file')}` (sha256 {str(protocol.get('few_shot_sha256'))[:12]}, "
           f"seed {protocol.get('few_shot_seed')})") if shots else "zero-shot"
    bos = f"BOS {'added' if protocol.get('adds_bos') else 'not added'} (policy: {protocol.get('bos')})"
    chat = "inside the chat template" if protocol.get("chat_template") else "no chat template"
    model = protocol.get("model") or {}
    weights = f"; weights: {model['weights']}" if model.get("weights") else ""
    return (f"protocol `{protocol.get('name')}` ({protocol.get('description') or PROTOCOL_TEXT.get(protocol.get('name'), '')}); "
            f"method {protocol.get('method')}; prompt {protocol.get('prompt')!r}, target delimiter "
            f"{protocol.get('target_delimiter')!r}, few-shot separator {protocol.get('fewshot_delimiter')!r}; "
            f"{few}; {bos}; {chat}; max length {protocol.get('max_length')} "
            f"(from {protocol.get('max_length_from')}), cut per pair from the left; metrics "
            f"{', '.join(protocol.get('metrics') or ())}{weights}{_lm_eval_terms(protocol)}")


def _lm_eval_terms(protocol: dict) -> str:
    """What a reader comparing with lm-evaluation-harness needs besides the prompt: the task
    version reproduced, and the weights' dtype when it is advrace's default (float32), which is
    not lm-eval's (auto: the checkpoint's own)."""
    task = protocol.get("lm_eval_task")
    out = (f"; reproduces lm-eval's `{task.get('task')}` task, version {task.get('version')}: {task.get('change')}; "
           f"lm-eval's data: {task.get('dataset')}") if isinstance(task, dict) else ""
    model = protocol.get("model") or {}
    if isinstance(model.get("model_args"), dict) and "dtype" not in model["model_args"]:
        out += ("; dtype float32, advrace's default, where lm-eval's default is auto (the checkpoint's own): "
                "--model-args dtype=auto loads the weights as lm-eval does")
    return out
