"""Benchmark: start-up of the built-in `smollm2`, read from its GGUF or from its converted copy
(advrace.models.runtime.converted_models).

Each timed load is a fresh process (imports included) running `load_causal_scorer("smollm2")`:
`gguf` with the converted copy turned off (ADVRACE_CONVERTED_MODELS=0: the GGUF parsed and
dequantised, as before), `cold` with an empty cache (one parse, the conversion written and checked)
and `warm` reading the copy `cold` wrote; the three alternate, `--repeat` times, and the figures are
ratios against `gguf` measured in the same run. Then `advrace evaluate` of a release of the first
`--questions` questions, with the copy off, then twice with an empty cache (first and second run);
the three reports must be byte-identical.

    python bench/model_load.py [PATH] [--questions 4] [--repeat 1] [--busy] [--record]

PATH: any input `advrace build` reads (default: the bundled RACE sample).
"""

from __future__ import annotations

import argparse
import filecmp
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import results  # noqa: E402  (bench/results.py)

SAMPLE = ROOT / "advrace" / "sample_data" / "race"
LOAD = ("import time; t = time.perf_counter(); "
        "from advrace.models.decoders.llm_scoring import load_causal_scorer; "
        "from advrace.models.runtime import converted_models as cm; s = load_causal_scorer('smollm2'); "
        "print(f'{time.perf_counter() - t:.3f}', dict(cm.EVENTS))")

WARM_UP = ("import transformers, safetensors.torch, tokenizers, gguf; "
           "import transformers.models.llama.modeling_llama, transformers.models.llama.configuration_llama; "
           "import transformers.modeling_gguf_pytorch_utils, transformers.integrations.ggml, "
           "transformers.quantizers.quantizer_gguf; "
           "from advrace.models.decoders.llm_scoring import load_causal_scorer; "
           "import advrace.evaluation.command")


def timed(cmd: list[str], env: dict) -> tuple[float, str]:
    """(wall seconds, last line of stdout) of a fresh process."""
    t0 = time.perf_counter()
    out = subprocess.run(cmd, env=env, cwd=ROOT, check=True, capture_output=True, text=True).stdout
    return time.perf_counter() - t0, (out.strip().splitlines() or [""])[-1]


def env_for(base: dict, cache: Path, on: bool = True) -> dict:
    env = {**base, "ADVRACE_CACHE": str(cache), "ADVRACE_CONVERTED_MODELS": "1" if on else "0"}
    return env


def loads(base: dict, tmp: Path, repeat: int) -> dict[str, list[float]]:
    """Wall seconds of each kind of load, interleaved: gguf, cold, warm."""
    runs: dict[str, list[float]] = {"gguf": [], "cold": [], "warm": []}
    for i in range(repeat):
        cache = tmp / f"cache-load-{i}"
        for kind in runs:
            seconds, line = timed([sys.executable, "-c", LOAD], env_for(base, cache, kind != "gguf"))
            runs[kind].append(seconds)
            print(f"  load {kind:<5} {seconds:6.1f} s  ({line})", flush=True)
    return runs


def evaluations(base: dict, tmp: Path, data: str, questions: int) -> dict[str, float]:
    """Wall seconds of `advrace evaluate --model smollm2`: copy off, first run, second run; the
    reports compared byte for byte."""
    release = tmp / "release"
    subprocess.run([sys.executable, "-m", "advrace", "build", "--data", data, "--attacks", "charswap",
                    "--limit", str(questions), "--out", str(release), "--quiet"],
                   env=base, cwd=ROOT, check=True, stdout=subprocess.DEVNULL)
    cache = tmp / "cache-evaluate"
    out: dict[str, float] = {}
    for kind in ("off", "first", "second"):
        cmd = [sys.executable, "-m", "advrace", "evaluate", str(release), "--model", "smollm2",
               "--out", str(tmp / f"report-{kind}"), "--quiet"]
        out[kind] = timed(cmd, env_for(base, cache, kind != "off"))[0]
        print(f"  evaluate {kind:<6} {out[kind]:6.1f} s", flush=True)
    for kind in ("first", "second"):
        cmp = filecmp.dircmp(tmp / "report-off", tmp / f"report-{kind}")
        if cmp.diff_files or cmp.left_only or cmp.right_only or any(c.diff_files for c in cmp.subdirs.values()):
            raise SystemExit(f"the {kind} run's report differs from the one read from the GGUF: {cmp.diff_files}")
    print("  reports: byte-identical (copy off, first run, second run)")
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("path", nargs="?", default=str(SAMPLE))
    ap.add_argument("--questions", type=int, default=4)
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--busy", action="store_true", help="run a CPU-burning process beside everything timed")
    results.add_argument(ap)
    args = ap.parse_args()

    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"]) if args.busy else None
    try:
        with tempfile.TemporaryDirectory(prefix="advrace-model-load-") as tmp:
            tmp = Path(tmp)
            base = results.subprocess_env(tmp)
            base.setdefault("OMP_NUM_THREADS", "1")
            print(f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}{', beside a busy process' if args.busy else ''}")
            # untimed: compiles the bytecode of every module a load imports, so that no timed kind pays it
            timed([sys.executable, "-c", WARM_UP], base)
            runs = loads(base, tmp, args.repeat)
            med = {kind: statistics.median(ts) for kind, ts in runs.items()}
            evals = evaluations(base, tmp, args.path, args.questions)
    finally:
        if burner:
            burner.kill()
    print(f"smollm2 load, median of {args.repeat}: GGUF {med['gguf']:.1f} s, first (converting) "
          f"{med['cold']:.1f} s = {med['cold'] / med['gguf']:.2f}x, converted copy {med['warm']:.1f} s = "
          f"{med['gguf'] / med['warm']:.1f}x faster")
    print(f"evaluate --model smollm2, {args.questions} questions: first {evals['first']:.1f} s, second "
          f"{evals['second']:.1f} s ({evals['first'] - evals['second']:.1f} s faster); GGUF only {evals['off']:.1f} s")
    if args.record:
        results.record("model_load", {
            "busy": "yes" if args.busy else "no", "GGUF load s": f"{med['gguf']:.1f}",
            "first load (converting) s": f"{med['cold']:.1f}", "converted load s": f"{med['warm']:.1f}",
            "speed-up": f"{med['gguf'] / med['warm']:.1f}x",
            f"evaluate {args.questions} q, first / second s": f"{evals['first']:.1f} / {evals['second']:.1f}"})
    return 0


if __name__ == "__main__":
    sys.exit(main())
