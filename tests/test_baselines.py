"""The built-in readers: sliding window (computed by hand) and sentence similarity."""

import math

import pytest

from advrace.models.readers import SimilarityReader, SlidingWindow, is_baseline, make_baseline, tokens
from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample


def ex(passage, question, options, label=0, i="q"):
    return MCExample(id=i, passage=passage, question=question, options=tuple(options), label=label)


def test_sliding_window_by_hand():
    passage = "the cat sat on the mat . the dog ran"
    # counts: the 3, cat 1, sat 1, on 1, mat 1, dog 1, ran 1
    sw = SlidingWindow()
    q, a, b = "where sat the cat", "on the mat", "the dog"
    scores = sw.scores(passage, q, [a, b])
    ic = lambda c: math.log(1 + 1 / c)  # noqa: E731
    # option a: target {where, sat, the, cat, on, mat} (6 words); best window "the cat sat on the mat"
    assert scores[0] == pytest.approx(ic(3) + ic(1) + ic(1) + ic(1) + ic(3) + ic(1))
    # option b: target {where, sat, the, cat, dog} (5 words); best window "the cat sat on the"
    assert scores[1] == pytest.approx(ic(3) + ic(1) + ic(1) + ic(3))
    assert scores[0] > scores[1]


def test_sliding_window_distance_term():
    passage = "alpha beta gamma delta epsilon"
    swd = SlidingWindow(distance=True)
    assert swd.distance_term(tokens(passage), {"alpha"}, {"gamma"}) == pytest.approx(2 / 4)
    assert swd.distance_term(tokens(passage), {"alpha"}, {"zeta"}) == 1.0
    plain = SlidingWindow().scores(passage, "alpha", ["gamma", "beta"])
    with_d = swd.scores(passage, "alpha", ["gamma", "beta"])
    assert with_d[0] == pytest.approx(plain[0] - 0.5) and with_d[1] == pytest.approx(plain[1] - 0.25)


def test_names():
    assert is_baseline("sliding-window") and is_baseline("similarity:/models/e5")
    assert not is_baseline("runs/best") and not is_baseline(None)
    with pytest.raises(ConfigError, match="built-in models"):
        make_baseline("sliding")


@pytest.fixture(scope="module")
def reader():
    return SimilarityReader()


EXAMPLES = [
    ex("The museum opens at nine. Tickets cost ten dollars. Children under five enter free.",
       "How much do tickets cost?", ["Tickets cost ten dollars.", "The museum is closed.", "Nine o'clock.",
                                      "Children pay twenty."], 0, "a"),
    ex("Lucy grew up on a farm in Kenya. She later studied medicine in London and became a doctor.",
       "Which is true about Lucy?", ["She grew up in a big city.", "She never went to school.",
                                     "She studied medicine in London and became a doctor.", "She is a pilot."],
       2, "b"),
    ex("The museum opens at nine. Tickets cost ten dollars. Children under five enter free.",
       "Who can enter for free?", ["Old people", "Children under five", "Teachers", "Everyone"], 1, "c"),
]


@pytest.mark.slow
def test_similarity_ranks_the_restating_option_first(reader):
    scores = reader.predict_mc(EXAMPLES)
    for e, s in zip(EXAMPLES, scores):
        assert max(range(4), key=s.__getitem__) == e.label, (e.id, s)


@pytest.mark.slow
def test_similarity_scores_do_not_depend_on_the_batch(reader):
    whole = reader.predict_mc(EXAMPLES)
    reader.batch_size = 1
    alone = [reader.predict_mc([e])[0] for e in EXAMPLES]
    reader.batch_size = 64
    for a, b in zip(whole, alone):
        assert a == pytest.approx(b, abs=1e-5)


def test_evaluate_takes_built_in_readers_by_name(tmp_path):
    import json

    from advrace.core.config import config_from_dict
    from advrace.evaluation import evaluate_command
    from advrace.release import build_release
    from conftest import make_race_dir

    cfg = config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp_path / "rel")
    summary = evaluate_command(tmp_path / "rel", ["sliding-window", "sliding-window:distance"], [],
                               tmp_path / "report", progress=False)
    assert summary["models"] == ["sliding-window", "sliding-window_distance"]
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["results"]["sliding-window"]["source"]["kind"] == "built-in"
    again = evaluate_command(tmp_path / "rel", ["sliding-window"], [], tmp_path / "report2", progress=False)
    assert again["results"]["sliding-window"] == summary["results"]["sliding-window"]
