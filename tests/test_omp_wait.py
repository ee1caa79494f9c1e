"""How torch's OpenMP threads wait (advrace.models.runtime.precision.choose_omp_wait): asleep
(OMP_WAIT_POLICY=PASSIVE) when other processes are running as advrace starts, so that a waiting
thread does not take the core from the one it waits for; the user's own setting kept; and the
same floats either way, since the thread count and each thread's work are unchanged."""

import hashlib
import os
import subprocess
import sys

import pytest

from advrace.models.runtime import precision

LINUX = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="libgomp and /proc are Linux's")


@pytest.mark.parametrize("environ, busy, torch_loaded, expected", [
    ({}, 1.0, False, "PASSIVE"),  # another process running: threads sleep
    ({}, 2.67, False, "PASSIVE"),
    ({}, 0.67, False, "PASSIVE"),  # running in two readings of three
    ({}, 0.33, False, None),  # one reading of three: a blip
    ({}, 0.0, False, None),  # nothing else running: libgomp's own default (spin a while)
    ({}, None, False, None),  # unknown (no /proc): libgomp's default
    ({}, 2.0, True, None),  # torch already imported: libgomp has read its policy
    ({"OMP_WAIT_POLICY": "ACTIVE"}, 2.0, False, None),  # the user's choice kept
    ({"GOMP_SPINCOUNT": "1000"}, 2.0, False, None),
    ({"KMP_BLOCKTIME": "0"}, 2.0, False, None),
    ({"OMP_WAIT_POLICY": " "}, 2.0, False, "PASSIVE"),  # blank is unset
])
def test_choose_omp_wait(environ, busy, torch_loaded, expected, monkeypatch):
    readings = []
    monkeypatch.setattr(precision, "busy_elsewhere", lambda **kw: readings.append(kw) or busy)
    env = dict(environ)
    assert precision.choose_omp_wait(env, torch_loaded=torch_loaded) == expected
    assert env == ({**environ, "OMP_WAIT_POLICY": expected} if expected else environ)
    # read only when it can matter, and briefly (it runs at import)
    asked = not torch_loaded and not any(v.strip() for v in environ.values())
    assert readings == ([{"samples": 3, "interval": 0.001}] if asked else [])


@pytest.mark.parametrize("environ, workers, torch_loaded, expected", [
    ({}, 2, False, "PASSIVE"),  # workers at the held count share the cores, on an idle machine too
    ({}, 8, False, "PASSIVE"),
    ({}, 1, False, None),  # one process on an idle machine: libgomp's default
    ({}, 2, True, None),  # torch already imported
    ({"OMP_WAIT_POLICY": "ACTIVE"}, 2, False, None),  # the user's choice kept
])
def test_workers_sleep_at_barriers(environ, workers, torch_loaded, expected, monkeypatch):
    monkeypatch.setattr(precision, "busy_elsewhere", lambda **kw: 0.0)
    env = dict(environ)
    assert precision.choose_omp_wait(env, torch_loaded=torch_loaded, workers=workers) == expected
    assert env == ({**environ, "OMP_WAIT_POLICY": expected} if expected else environ)


# A build of three passages in chunks of one, its workers forked (the runner's own code path),
# in a fresh process: the policy the start-up reading may have set is cleared first, so only the
# runner can set it; then what the environment holds once the workers ran
RUNNER = r"""
import os, sys
from advrace.core.config import release_config_from_dict
from advrace.release import runner
from advrace.release.build import build_release
assert "torch" not in sys.modules
os.environ.pop("OMP_WAIT_POLICY", None)
runner.CHUNK_PASSAGES = 1
cfg = release_config_from_dict({"data": {"path": sys.argv[1]}, "splits": ["charswap"], "seed": 1,
                                "workers": int(sys.argv[2])})
build_release(cfg, sys.argv[3])
print(os.environ.get("OMP_WAIT_POLICY"))
"""


@LINUX
@pytest.mark.parametrize("workers, expected", [(2, "PASSIVE"), (1, "None")])
def test_a_build_that_forks_workers_sets_passive(race_dir, tmp_path, workers, expected):
    script = tmp_path / "run.py"
    script.write_text(RUNNER, encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k not in precision.OMP_WAIT_KEYS}
    out = subprocess.run([sys.executable, str(script), str(race_dir), str(workers), str(tmp_path / "rel")],
                         env=env, capture_output=True, text=True, check=True, timeout=600).stdout.split()
    assert out[-1] == expected


@LINUX
def test_set_before_torch_when_the_machine_is_busy():
    """`advrace`'s commands import precision before torch: beside a busy process the policy is
    in the environment by the time libgomp reads it."""
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    env = {k: v for k, v in os.environ.items() if k not in precision.OMP_WAIT_KEYS}
    code = ("import os, sys, advrace.cli; "
            "print(os.environ.get('OMP_WAIT_POLICY'), 'torch' in sys.modules)")
    try:
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             check=True, timeout=300).stdout.split()
    finally:
        burner.kill()
        burner.wait()
    assert out == ["PASSIVE", "False"]


# Tiny random decoders of each family the DG decoder runs (absolute positions, rotary,
# sliding window), eager and SDPA, and one of SmolLM2's widths whose floats do move with the
# thread count: the digest would see a policy that changed how the work is split.
SCORES = r"""
import hashlib, sys, torch
from transformers import GPT2Config, GPT2LMHeadModel, LlamaConfig, LlamaForCausalLM, MistralConfig, MistralForCausalLM
torch.set_num_threads(int(sys.argv[1]))
torch.manual_seed(0)
small = dict(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2, num_attention_heads=4)
models = [LlamaForCausalLM(LlamaConfig(**small, num_key_value_heads=2)),
          MistralForCausalLM(MistralConfig(**small, num_key_value_heads=2, sliding_window=16)),
          GPT2LMHeadModel(GPT2Config(vocab_size=512, n_embd=128, n_layer=2, n_head=4, n_positions=512)),
          # SmolLM2's widths, one layer: at 80 tokens, 1 and 2 threads give other floats here
          LlamaForCausalLM(LlamaConfig(vocab_size=512, hidden_size=576, intermediate_size=1536,
                                       num_hidden_layers=1, num_attention_heads=9, num_key_value_heads=3))]
digest = hashlib.sha256()
for model in models:
    for attn in ("eager", "sdpa"):
        model.config._attn_implementation = attn
        for n in (300, 80):
            ids = torch.randint(0, 512, (2, n), generator=torch.Generator().manual_seed(n))
            with torch.inference_mode():
                digest.update(model.eval()(input_ids=ids).logits.numpy().tobytes())
print(digest.hexdigest())
"""


@LINUX
def test_the_wait_policy_changes_no_score(tmp_path):
    script = tmp_path / "scores.py"
    script.write_text(SCORES, encoding="utf-8")
    base = {k: v for k, v in os.environ.items() if k not in (*precision.OMP_WAIT_KEYS, "OMP_NUM_THREADS")}

    def digest(policy: str, threads: int = 2) -> str:
        env = {**base, "OMP_WAIT_POLICY": policy}
        out = subprocess.run([sys.executable, str(script), str(threads)], env=env, capture_output=True,
                             text=True, check=True, timeout=600).stdout.split()
        return out[-1]

    passive = digest("PASSIVE")
    assert passive == digest("ACTIVE")
    assert len(passive) == len(hashlib.sha256().hexdigest())
