"""The built-in readers: sliding window (computed by hand) and sentence similarity."""

import math

import pytest

from advrace.core.errors import ConfigError
from advrace.core.examples import MCExample
from advrace.models.encoders.readers import SimilarityReader, SlidingWindow, is_builtin_reader, make_reader, tokens


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
    assert is_builtin_reader("sliding-window") and is_builtin_reader("similarity:/models/e5")
    assert not is_builtin_reader("runs/best") and not is_builtin_reader(None)
    with pytest.raises(ConfigError, match="built-in models"):
        make_reader("sliding")


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

    from advrace.core.config import release_config_from_dict
    from advrace.evaluation import evaluate_command
    from advrace.release import build_release
    from conftest import make_race_dir

    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp_path / "rel")
    summary = evaluate_command(tmp_path / "rel", ["sliding-window", "sliding-window:distance"], [],
                               tmp_path / "report", progress=False)
    assert summary["models"] == ["sliding-window", "sliding-window:distance"]  # a built-in name as given
    assert summary["results"]["sliding-window:distance"]["predictions"] == "predictions/sliding-window_distance.jsonl"
    results = json.loads((tmp_path / "report" / "results.json").read_text())
    assert results["results"]["sliding-window"]["source"]["kind"] == "built-in"
    again = evaluate_command(tmp_path / "rel", ["sliding-window"], [], tmp_path / "report2", progress=False)
    assert again["results"]["sliding-window"] == summary["results"]["sliding-window"]


# --------------------------------------------------------------------------- speed without change


def plain_window_score(passage, target, counts):
    """Richardson et al.'s window, every window summed (the formula the reader first used)."""
    size = len(target)
    if not passage or not size:
        return 0.0
    weight = {w: math.log(1 + 1 / counts[w]) for w in target if counts[w]}
    best = 0.0
    for start in range(max(1, len(passage) - size + 1)):
        best = max(best, sum(weight.get(w, 0.0) for w in passage[start:start + size]))
    return best


def plain_distance(passage, question, option):
    q_pos = [i for i, w in enumerate(passage) if w in question]
    a_pos = [i for i, w in enumerate(passage) if w in option]
    if not q_pos or not a_pos or len(passage) < 2:
        return 1.0
    return min(abs(i - j) for i in q_pos for j in a_pos) / (len(passage) - 1)


def test_sliding_window_equals_the_plain_formula_on_random_texts():
    import random
    from collections import Counter

    rng = random.Random(15)
    vocab = [f"w{i}" for i in range(30)]
    for _ in range(3000):
        passage = [rng.choice(vocab[:rng.randint(1, 30)]) for _ in range(rng.randint(0, 50))]
        target = set(rng.sample(vocab, rng.randint(0, 20)))
        counts = Counter(passage)
        assert SlidingWindow.window_score(passage, target, counts) == plain_window_score(passage, target, counts)
        question = set(rng.sample(vocab, rng.randint(0, 4)))
        option = set(rng.sample(vocab, rng.randint(0, 4))) - question
        assert SlidingWindow.distance_term(passage, question, option) == plain_distance(passage, question, option)
    for distance in (False, True):
        sw = SlidingWindow(distance=distance)
        examples = [ex(" ".join(rng.choice(vocab) for _ in range(rng.randint(1, 80))),
                       " ".join(rng.sample(vocab, 5)) + " _ ?", [" ".join(rng.sample(vocab, 3)) for _ in range(4)],
                       i=str(k)) for k in range(200)]
        for e, got in zip(examples, sw.predict_mc(examples)):
            p = tokens(e.passage)
            q = set(tokens(e.question.replace("_", " ")))
            want = []
            for o in e.options:
                a = set(tokens(o))
                score = plain_window_score(p, q | a, Counter(p))
                want.append(score - plain_distance(p, q - a, a - q) if distance else score)
            assert got == want


def test_sliding_window_draws_a_progress_bar_only_when_asked(capsys):
    SlidingWindow().predict_mc(EXAMPLES, desc="charswap", progress=True)
    err = capsys.readouterr().err
    assert "charswap" in err and "question" in err
    SlidingWindow().predict_mc(EXAMPLES, desc="charswap", progress=False)
    SlidingWindow().predict_mc(EXAMPLES)
    assert capsys.readouterr() == ("", "")


def reference_similarity(reader, examples) -> list[list[float]]:
    """Each sentence and query encoded alone, no batching, no padding, no cache."""
    import torch

    from advrace.models.encoders.mc_encoding import question_with_option
    from advrace.models.encoders.readers import passage_sentences

    def embed(text):
        with torch.no_grad():
            enc = reader.tokenizer(text, truncation=True, max_length=reader.max_length, return_tensors="pt")
            hidden = reader.model(**enc).last_hidden_state[0]
            return torch.nn.functional.normalize(hidden.mean(0), dim=-1)

    out = []
    for e in examples:
        sentences = torch.stack([embed(s) for s in passage_sentences(e.passage) or [e.passage]])
        out.append([float((sentences @ embed(question_with_option(e.question, o))).max()) for o in e.options])
    return out


def release_like_splits() -> dict:
    """Splits sharing most of their text, as a release's do: a sentence inserted (AddSent),
    letters swapped (CharSwap), options replaced (distractor extraction)."""
    def insert(e, sentence):
        return ex(e.passage.replace(". ", f". {sentence} ", 1), e.question, e.options, e.label, e.id)

    def swap(e):
        return ex(e.passage.replace("Tickets", "Tickest").replace("medicine", "mediicne"),
                  e.question.replace("cost", "csot"), e.options, e.label, e.id)

    def replace_options(e):
        return ex(e.passage, e.question, [e.options[e.label], "A farm.", "Ten people.", "The city."][:len(e.options)],
                  0, e.id)

    return {"original": EXAMPLES,
            "addsent": [insert(e, f"The {e.id} tickets cost five dollars.") for e in EXAMPLES],
            "charswap": [swap(e) for e in EXAMPLES],
            "distractor_extraction": [replace_options(e) for e in EXAMPLES]}


@pytest.mark.slow
def test_similarity_across_splits_equals_a_plain_reference_and_caches(reader):
    splits = release_like_splits()
    reader._cache.clear()
    encoded = []
    encode = reader.encode

    def counting(texts, **kw):
        encoded.append(list(texts))
        return encode(texts, **kw)

    reader.encode = counting
    try:
        seen = set()
        for name, examples in splits.items():
            before = len(encoded)
            got = reader.predict_mc(examples)
            want = reference_similarity(reader, examples)
            for g, w in zip(got, want):
                assert g == pytest.approx(w, abs=1e-5)
                # the same choice, but where two options tie within the scores' last bits (other
                # batch shapes take other kernels), either of them
                assert w[max(range(len(g)), key=g.__getitem__)] >= max(w) - 1e-5
            new = [t for call in encoded[before:] for t in call]
            texts = set(new)
            assert texts and len(new) == len(texts), "a text encoded twice in one call"
            assert not texts & seen, f"{name}: texts encoded again"
            if name == "distractor_extraction":  # same passages as original: only the new options
                assert all(t.startswith(("How much", "Which is", "Who can")) for t in texts)
            seen |= texts
        calls = len(encoded)
        assert reader.predict_mc(splits["addsent"]) == reader.predict_mc(splits["addsent"])
        assert len(encoded) == calls
        reader._cache.clear()
        reader.cache_size = 5
        small = reader.predict_mc(splits["charswap"])
        assert len(reader._cache) <= 5
        for g, w in zip(small, reference_similarity(reader, splits["charswap"])):
            assert g == pytest.approx(w, abs=1e-5)
    finally:
        reader.encode = encode
        reader.cache_size = 200_000
        reader._cache.clear()


@pytest.mark.slow
def test_similarity_draws_a_progress_bar_only_when_asked(reader, capsys):
    reader._cache.clear()
    reader.predict_mc(EXAMPLES, desc="addsent", progress=True)
    assert "addsent" in capsys.readouterr().err
    reader._cache.clear()
    reader.predict_mc(EXAMPLES, desc="addsent", progress=False)
    assert capsys.readouterr() == ("", "")


class PlainReader:
    """A user's scorer: `predict_mc(examples)` and nothing more."""

    name = "plain"

    def predict_mc(self, examples):
        return [[float(len(o)) for o in e.options] for e in examples]


def test_evaluate_shows_reader_progress_and_quiet_shows_nothing(tmp_path, capsys):
    from advrace.core.config import release_config_from_dict
    from advrace.evaluation import evaluate_command
    from advrace.release import build_release
    from conftest import make_race_dir

    cfg = release_config_from_dict({"data": {"path": str(make_race_dir(tmp_path))}, "splits": ["charswap"], "workers": 1})
    build_release(cfg, tmp_path / "rel")
    capsys.readouterr()
    evaluate_command(tmp_path / "rel", ["sliding-window", PlainReader()], [], tmp_path / "report", progress=True)
    captured = capsys.readouterr()
    assert "scoring sliding-window on 2 splits" in captured.out
    assert "original" in captured.err and "charswap" in captured.err and "question" in captured.err
    evaluate_command(tmp_path / "rel", ["sliding-window", PlainReader()], [], tmp_path / "quiet", progress=False)
    assert capsys.readouterr() == ("", "")


# --------------------------------------------------------------------------- encoding once


TEXTS = ["Tickets cost ten dollars.", "", "She studied medicine in London and became a doctor.",
         "Nine o'clock.", "Tickets cost ten dollars.", " ".join(["a long passage"] * 80),
         "Who can enter for free? Children under five", "The museum is closed.", "Ten dollars."]


def two_pass_encode(reader, texts):
    """`SimilarityReader.encode` as it first was: tokenised once to sort, again per batch."""
    import torch

    lengths = [len(ids) for ids in reader.tokenizer(list(texts), truncation=True,
                                                    max_length=reader.max_length)["input_ids"]]
    order = sorted(range(len(texts)), key=lambda i: (-lengths[i], i))
    out = [None] * len(texts)
    with torch.inference_mode():
        for k in range(0, len(order), reader.batch_size):
            idx = order[k:k + reader.batch_size]
            enc = reader.tokenizer([texts[i] for i in idx], padding=True, truncation=True,
                                   max_length=reader.max_length, return_tensors="pt")
            hidden = reader.model(**enc).last_hidden_state
            mask = enc["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = torch.nn.functional.normalize((hidden * mask).sum(1) / mask.sum(1).clamp(min=1), dim=-1)
            for row, i in enumerate(idx):
                out[i] = pooled[row]
    return torch.stack(out)


def model_inputs(reader, run):
    """What `run()` gives the reader's model, call by call."""
    calls = []
    handle = reader.model.register_forward_pre_hook(
        lambda _, args, kwargs: calls.append({k: v.clone() for k, v in kwargs.items()}), with_kwargs=True)
    try:
        result = run()
    finally:
        handle.remove()
    return result, calls


@pytest.mark.slow
def test_similarity_encode_gives_the_model_what_the_two_pass_encode_gave(reader):
    import torch

    try:
        for size in (1, 3, 64):
            reader.batch_size = size
            got, new_calls = model_inputs(reader, lambda: reader.encode(TEXTS))
            want, old_calls = model_inputs(reader, lambda: two_pass_encode(reader, TEXTS))
            assert len(new_calls) == len(old_calls) == -(-len(TEXTS) // size)
            for new, old in zip(new_calls, old_calls):
                assert new.keys() == old.keys()
                assert all(torch.equal(new[k], old[k]) and new[k].dtype == old[k].dtype for k in new)
            assert torch.equal(got, want)
    finally:
        reader.batch_size = 64


@pytest.mark.slow
def test_paraphrase_cosines_do_not_depend_on_what_was_asked_before():
    """The filter's cosines decide what a release holds, so they are computed afresh for each
    call: a vector cached from another call's batch could differ in its last bits."""
    from advrace.models.encoders.paraphrase import encoder_for, paraphrase_cosines

    pairs = [("He was ill.", "He was sick."), ("A farm.", "He was sick."), ("He was ill.", "He was ill."),
             ("Ten people.", "The city.")]
    texts = list(dict.fromkeys(t for pair in pairs for t in pair))
    vectors = encoder_for().encode(texts)
    row = {t: i for i, t in enumerate(texts)}
    products = vectors[[row[a] for a, _ in pairs]] * vectors[[row[b] for _, b in pairs]]
    want = [round(float(x), 6) for x in products.sum(dim=-1)]
    assert paraphrase_cosines(pairs) == want
    paraphrase_cosines([("A much longer sentence about the farm and the city.", "He was sick.")])
    assert paraphrase_cosines(pairs) == want
    assert paraphrase_cosines([]) == []


@pytest.mark.slow
def test_similarity_readers_share_the_encoder_weights_not_their_caches():
    from advrace.models.encoders.paraphrase import encoder_for

    reader = make_reader("similarity", batch_size=32)
    shared = encoder_for()
    assert reader.model is shared.model and reader.tokenizer is shared.tokenizer
    assert reader is not shared and reader._cache is not shared._cache
    assert (reader.batch_size, shared.batch_size) == (32, 64)
