import json
import os
import re
import sys
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: loads real pretrained weights (tens of seconds)")
    # One torch thread count for the whole run, set before torch is imported and inherited by the
    # commands tests start: fitted to the load (advrace.models.runtime.precision.cpu_threads), two
    # scorings of one text could run at different counts and differ in their last bits, so a test
    # would pass or fail with how busy the machine is. A count the user set is kept; only
    # tests/test_cpu_threads.py, which tests the fitting, unsets it.
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    global RUN_THREADS
    RUN_THREADS = int(os.environ["OMP_NUM_THREADS"]) if os.environ["OMP_NUM_THREADS"].strip().isdigit() else None


RUN_THREADS: int | None = None  # the run's torch thread count (OMP_NUM_THREADS), once configured


@pytest.fixture(autouse=True)
def _torch_threads():
    """torch's count set back to the run's after each test that changed it."""
    yield
    torch = sys.modules.get("torch")
    if torch is not None and RUN_THREADS and torch.get_num_threads() != RUN_THREADS:
        torch.set_num_threads(RUN_THREADS)


@pytest.fixture(scope="session", autouse=True)
def _private_cache(tmp_path_factory):
    """Resource caches (WordNet copy, word-tag lexicon) go to a temporary folder, not ~/.cache."""
    import os

    old = os.environ.get("ADVRACE_CACHE")
    os.environ["ADVRACE_CACHE"] = str(tmp_path_factory.mktemp("advrace-cache"))
    yield
    if old is None:
        os.environ.pop("ADVRACE_CACHE", None)
    else:
        os.environ["ADVRACE_CACHE"] = old


@pytest.fixture(scope="session")
def ctx():
    """An audit context (advrace.release.audit) without the paraphrase encoder's cosine check,
    shared by the audit tests."""
    from advrace.release import audit

    return audit.AuditContext(overrides={"max_answer_cosine": None})


@pytest.fixture
def install_plugin(tmp_path, monkeypatch):
    """Makes a module importable and lists it in an entry-point group, as a user's installed
    package would (a dist-info folder on sys.path), and resets which groups were loaded."""
    import sys

    from advrace.core import registry

    modules = []

    def install(module: str, source: str, group: str, entry: str | None = None) -> None:
        (tmp_path / f"{module}.py").write_text(source)
        dist = tmp_path / f"{module}-0.1.dist-info"
        dist.mkdir()
        (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {module}\nVersion: 0.1\n")
        (dist / "entry_points.txt").write_text(f"[{group}]\n{entry or module} = {module}\n")
        modules.append(module)

    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "_LOADED", set())
    yield install
    for module in modules:
        sys.modules.pop(module, None)


@pytest.fixture
def one_thread():
    """Tiny models run faster on one thread than on two busy cores."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


def save_tiny_llama(tokenizer, out: Path) -> str:
    """A random 2-layer Llama (seed 0) saved with the test tokenizer: a causal LM in seconds."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=len(tokenizer), hidden_size=32, intermediate_size=64, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=512,
                      bos_token_id=tokenizer.cls_token_id, eos_token_id=tokenizer.sep_token_id,
                      pad_token_id=tokenizer.pad_token_id)
    LlamaForCausalLM(cfg).save_pretrained(out)
    tokenizer.save_pretrained(out)
    return str(out)


PASSAGE = (
    "Tom lives in a small village near the mountains. Every morning he walks to school with his "
    "sister Mary.\nTheir teacher, Mrs Green, often tells them stories about famous scientists. "
    "Yesterday she talked about Marie Curie, who studied radioactivity and won two Nobel prizes.\n"
    "After school, Tom likes playing football while Mary practises the piano."
)


def race_passage(pid: str, n_questions: int = 2) -> dict:
    questions = [
        "Where does Tom live?",
        "Mrs Green often tells stories about  _  .",
        "What does Mary practise after school?",
    ][:n_questions]
    options = [
        ["In a big city", "In a small village", "By the sea", "In the desert"],
        ["famous scientists", "football players", "mountains", "pianists"],
        ["the violin", "football", "the piano", "swimming"],
    ][:n_questions]
    answers = ["B", "A", "C"][:n_questions]
    article = PASSAGE + f" This is passage {pid}."
    return {"article": article, "questions": questions, "options": options, "answers": answers, "id": pid}


@pytest.fixture
def race_dir(tmp_path: Path) -> Path:
    """A tiny RACE folder in the original layout: 3 passages, 7 questions."""
    return make_race_dir(tmp_path)


def make_race_dir(tmp_path: Path) -> Path:
    root = tmp_path / "RACE" / "test"
    for sub, n, k in [("high", 1, 3), ("middle", 2, 2), ("middle", 10, 2)]:
        d = root / sub
        d.mkdir(parents=True, exist_ok=True)
        (d / f"{n}.txt").write_text(json.dumps(race_passage(f"{sub}{n}.txt", k)), encoding="utf-8")
    return root


def squad_doc() -> dict:
    context = ("The Danube is Europe's second-longest river. It flows through ten countries, "
               "including Austria and Hungary, before reaching the Black Sea. Vienna and Budapest "
               "were built on its banks.")
    qas = []
    for i, (q, ans) in enumerate([
        ("Which sea does the Danube reach?", "Black Sea"),
        ("How many countries does the Danube flow through?", "ten"),
        ("Which cities were built on the banks of the Danube?", "Vienna and Budapest"),
    ]):
        qas.append({"id": f"q{i}", "question": q,
                    "answers": [{"text": ans, "answer_start": context.index(ans)}]})
    return {"version": "1.1", "data": [{"title": "Danube", "paragraphs": [{"context": context, "qas": qas}]}]}


@pytest.fixture
def squad_file(tmp_path: Path) -> Path:
    path = tmp_path / "squad.json"
    path.write_text(json.dumps(squad_doc()), encoding="utf-8")
    return path


SPECIAL = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


@pytest.fixture
def tokenizer_dir(tmp_path: Path) -> Path:
    """A WordPiece tokenizer whose vocabulary holds every word of the conftest passages."""
    return make_tokenizer(tmp_path)


def make_tokenizer(tmp_path: Path) -> Path:
    from transformers import BertTokenizerFast

    text = PASSAGE + " " + json.dumps(race_passage("high1.txt", 3)) + " middle"
    words = sorted(set(re.findall(r"[a-z]+", text.lower())))
    vocab = tmp_path / "vocab.txt"
    vocab.write_text("\n".join(SPECIAL + list("0123456789.,?!_'\"-") + words) + "\n", encoding="utf-8")
    out = tmp_path / "tokenizer"
    BertTokenizerFast(str(vocab)).save_pretrained(out)  # transformers 5 ignores vocab_file=
    return out


def tiny(tokenizer_dir: Path, race_dir: Path, tmp_path: Path, **extra) -> dict:
    cfg = {
        "name": "tiny",
        "model_config": {"model_type": "bert", "vocab_size": 128, "hidden_size": 32,
                         "num_hidden_layers": 2, "num_attention_heads": 2, "intermediate_size": 64,
                         "max_position_embeddings": 128},
        "tokenizer": str(tokenizer_dir),
        "train": {"path": str(race_dir)},
        "dev": {"path": str(race_dir)},
        "lr": 1e-3, "warmup_ratio": 0.0, "epochs": 2, "batch_size": 2, "max_length": 96,
        "save_every_steps": 2, "tensorboard": False, "output_dir": str(tmp_path / "run"),
    }
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(cfg.get(key), dict):
            cfg[key] = {**cfg[key], **value}
        else:
            cfg[key] = value
    return cfg




@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory):
    """The set-up most decoder-LM tests share, built once per run: the conftest RACE folder and its
    questions, the test tokenizer, a random tiny Llama saved with it, and charswap releases of the
    RACE folder and of the SQuAD sample. Read-only: a test that changes a file copies it first, and
    a module writes its own outputs into a folder of its own.

    Keys: `root`; `race` (RACE/test) and `examples`; `tok_dir` and `tok` (loaded); `lm`; `lm_eval_lm`
    (the same weights with [CLS]/[SEP] named as BOS/EOS, which lm-evaluation-harness's HF model needs);
    `mc` (the RACE release); `squad_json`, `squad_examples` and `squad` (its release)."""
    from types import MappingProxyType

    from transformers import AutoTokenizer

    from advrace.core.config import release_config_from_dict
    from advrace.formats import load
    from advrace.release import build_release

    root = tmp_path_factory.mktemp("tiny-llama")
    race, tok_dir = make_race_dir(root), make_tokenizer(root)
    tok = AutoTokenizer.from_pretrained(tok_dir)
    lm = save_tiny_llama(tok, root / "lm")
    lm_eval_tok = AutoTokenizer.from_pretrained(tok_dir)
    lm_eval_tok.bos_token, lm_eval_tok.eos_token = "[CLS]", "[SEP]"
    lm_eval_lm = save_tiny_llama(lm_eval_tok, root / "lm-eval-lm")
    squad_json = root / "squad.json"
    squad_json.write_text(json.dumps(squad_doc()), encoding="utf-8")
    releases = {}
    for name, data in (("mc", race), ("squad", squad_json)):
        releases[name] = root / name
        build_release(release_config_from_dict({"data": {"path": str(data)}, "splits": ["charswap"], "workers": 1}),
                      releases[name])
    return MappingProxyType({"root": root, "race": race, "examples": load(str(race)).examples, "tok_dir": tok_dir,
                             "tok": tok, "lm": lm, "lm_eval_lm": lm_eval_lm, **releases, "squad_json": squad_json,
                             "squad_examples": load(str(squad_json)).examples})


@pytest.fixture(scope="session")
def span_model(tmp_path_factory):
    """A tiny span-extraction checkpoint trained by `advrace train` on the SQuAD sample
    (64-token windows, so a longer paragraph takes several)."""
    from advrace.training import train

    root = tmp_path_factory.mktemp("span")
    squad = root / "squad.json"
    squad.write_text(json.dumps(squad_doc()), encoding="utf-8")
    run = train(tiny(make_tokenizer(root), make_race_dir(root), root, objective="span_extraction",
                     max_length=64, doc_stride=16, train={"path": str(squad)}, dev={"path": str(squad)},
                     epochs=2), progress=False)
    return run["final"]


class _FixedNeighbours:
    def __init__(self, glove, near):
        self._glove, self._near = glove, near

    def nearest(self, word, k=10):
        return [(w, 0.9) for w in self._near.get(word, [])][:k]

    def __contains__(self, word):
        return word in self._glove


class FixedNeighbourResources:
    """The real resources with GloVe's neighbours of some words fixed (`near`: word -> list), and
    `same_meaning` answering as told for some pairs (`same`: (word, new) -> reason)."""

    def __init__(self, real, near, same=None):
        self._real, self.glove, self._same = real, _FixedNeighbours(real.glove, near), same or {}

    def same_meaning(self, word, new, pos=None):
        if (word.lower(), new.lower()) in self._same:
            return self._same[(word.lower(), new.lower())]
        return self._real.same_meaning(word, new, pos)

    def __getattr__(self, name):
        return getattr(self._real, name)
