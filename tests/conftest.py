import json
from pathlib import Path

import pytest


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: loads real pretrained weights (tens of seconds)")


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
