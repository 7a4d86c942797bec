"""The torch_xla backend for real, in its own environment (driven as worker processes, as `xlabench run`
does): every impl agrees with the float32 reference, JAX and torch_xla rows of one case report the same
FLOPs and both agree with it, recompilation while timing and wrong kernels are flagged.

The torch_xla environment is found like the CLI finds it (XLABENCH_TORCH_XLA_PYTHON, else
.venv-torch-xla). Without it these tests FAIL, saying how to create it (CI creates it: .ci/run); set
XLABENCH_NO_TORCH_XLA=1 to skip them on purpose.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from pathlib import Path

import numpy as np
import pytest
import yaml

from xlabench import impls, results
from xlabench.run import envs
from xlabench.workloads.attention import AttentionParams
from xlabench.workloads.train import TrainParams

from conftest import FIXTURE_PEAK, ROOT, require_torch_xla, run_cli

pytestmark = pytest.mark.slow

OPT_OUT = "XLABENCH_NO_TORCH_XLA"

# Four combinations cover every impl forward and backward, causal and not, MHA and GQA (2 query heads
# per KV head), on 128 tokens so the interpreted kernels stay fast.
SUITE = """
name: txla
workload: attention
backends: [jax, torch_xla]
impls:
  jax: [naive, flash, splash]
  torch_xla: [naive, sdpa, flash, splash]
params: {batch: 1, num_heads: 4, seq_len: 128, head_dim: 32, dtype: float32, block_q: 64, block_k: 128}
matrix:
  "causal,mode,num_kv_heads": [[true, fwd_bwd, 4], [false, fwd, 4], [true, fwd, 2], [false, fwd_bwd, 2]]
measure: {warmup: 1, iters: 3, timeout_s: 300}
"""


@pytest.fixture(scope="module")
def torch_xla_python() -> str:
    return require_torch_xla()


# Decode (1 new token) and 4 new tokens, ragged lengths, GQA, float32.
PAGED_SUITE = """
name: txla_paged
workload: paged_attention
backends: [jax, torch_xla]
impls:
  jax: [naive, paged]
  torch_xla: [naive, paged, multi_queries_paged, ragged_paged]
params: {batch: 4, context_lens: "uniform:4..512", num_heads: 8, num_kv_heads: 2, head_dim: 128,
         page_size: 16, pages_per_compute_block: 4, dtype: float32}
matrix:
  q_tokens: [1, 4]
measure: {warmup: 1, iters: 3, timeout_s: 300}
"""


# A one-layer model of each architecture (GQA and RoPE in llama), unsharded and sharded on 4 devices,
# torch_xla only: a JAX side (6 more cases and 2 workers, ~20 s of CI) only compared counts that both
# backends take from one function (workloads/train.py: train_result), checked here against the FLOP file.
# And two layers under fsdp, looped over in Python (scan_layers: true) and unrolled, on the 4-device worker
# the sharded cases use (a suite of their own, tests/test_train_scan_backends.py, started one more CLI and
# torch_xla worker, ~6 s of CPU to import torch_xla alone).
TRAIN_SUITE = """
name: txla_train
workload: train
backends: [torch_xla]
impls: [naive]
params: {model: custom, vocab_size: 256, d_model: 64, num_heads: 4, d_ff: 128,
         seq_len: 32, global_batch: 8, dtype: float32}
matrix:
  "arch,num_kv_heads,sharding,devices,num_layers,scan_layers":
    - [gpt2, 4, dp, 1, 1, false]
    - [gpt2, 4, fsdp, 4, 1, false]
    - [gpt2, 4, 2d, 4, 1, false]
    - [gpt2, 4, auto, 4, 1, false]
    - [llama, 2, dp, 1, 1, false]
    - [llama, 2, 2d, 4, 1, false]
    - [gpt2, 4, fsdp, 4, 2, false]
    - [gpt2, 4, fsdp, 4, 2, true]
measure: {warmup: 0, iters: 2, timeout_s: 600}
"""


def _run_both(suite_text: str, python: str, tmp: Path):
    """One run of a suite with both backends, through the CLI (as a user runs it): rows and samples."""
    suite = tmp / "suite.yaml"
    suite.write_text(textwrap.dedent(suite_text).lstrip())
    proc = run_cli("run", str(suite), "--out", str(tmp / "res"), env={envs.TORCH_XLA_ENV_VAR: python})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    csv = next(p for p in (tmp / "res").glob("*/*.csv") if not p.name.endswith(".samples.csv"))
    return results.read_rows(csv), results.read_samples(csv)


@pytest.fixture(scope="module")
def both_frameworks(torch_xla_python, tmp_path_factory):
    return _run_both(SUITE, torch_xla_python, tmp_path_factory.mktemp("txla"))


@pytest.fixture(scope="module")
def both_paged(torch_xla_python, tmp_path_factory):
    return _run_both(PAGED_SUITE, torch_xla_python, tmp_path_factory.mktemp("txla_paged"))


def test_every_torch_xla_impl_matches_the_float32_reference(both_frameworks):
    df, samples = both_frameworks
    tx = df[df.backend == "torch_xla"]
    assert sorted(set(tx.impl)) == sorted(impls.names_for("attention", "torch_xla"))
    skipped = tx[tx.status == "skipped"]
    # The only skip: the flash kernel has no GQA (the same reason as the JAX flash row).
    assert set(skipped.impl) == {"flash"} and (skipped.num_kv_heads == 2).all()
    assert skipped.error.str.contains("num_kv_heads == num_heads").all()
    ok = tx[tx.status == "ok"]
    assert len(ok) == 14
    assert ok.correct.all() and (ok.max_abs_err < 1e-4).all(), ok[["impl", "max_abs_err"]]  # float32: ~1e-6
    assert (ok.interpret == ok.impl.isin(["flash", "splash"])).all()  # Pallas kernels: the CPU interpreter
    assert (ok.platform == "cpu").all() and ok.framework_version.str.contains("torch_xla 2.9").all()
    assert (ok.compile_s > 0).all() and (ok.n == 3).all()
    assert not ok.notes.str.contains("suspicious").any()  # stable graphs: no recompilation while timing
    assert samples[samples.case_id.isin(ok.case_id)].groupby("case_id").size().eq(3).all()


def test_jax_and_torch_xla_rows_of_one_case_agree(both_frameworks):
    df, _ = both_frameworks
    ok = df[df.status == "ok"]
    keys = ["impl", "causal", "mode", "num_kv_heads"]
    pairs = ok[ok.backend == "jax"].merge(ok[ok.backend == "torch_xla"], on=keys, suffixes=("_jax", "_tx"))
    assert set(pairs.impl) == {"naive", "flash", "splash"} and len(pairs) == 10
    for _, r in pairs.iterrows():
        p = AttentionParams(batch=1, num_heads=4, num_kv_heads=int(r.num_kv_heads), seq_len=128, head_dim=32,
                            causal=bool(r.causal), mode=r["mode"])
        assert r.flops_jax == r.flops_tx == p.flops()
        assert r.kernel_flops_jax == r.kernel_flops_tx == p.kernel_flops()
        # Same inputs, each framework against its own float32 reference: both within 1e-4 of it.
        assert r.correct_jax and r.correct_tx and max(r.max_abs_err_jax, r.max_abs_err_tx) < 1e-4
        assert r.case_id_jax != r.case_id_tx and r.mfu_tx > 0
        assert r.peak_tflops_jax == r.peak_tflops_tx  # one host peak per run: MFU compares across frameworks


@pytest.fixture(scope="module")
def both_train(torch_xla_python, tmp_path_factory):
    return _run_both(TRAIN_SUITE, torch_xla_python, tmp_path_factory.mktemp("txla_train"))


def test_torch_xla_sharded_train_step_equals_unsharded(both_train):
    df, _ = both_train
    tx = df[(df.backend == "torch_xla") & (df.num_layers == 1)].set_index(["arch", "sharding"])
    assert len(tx) == 6 and (tx.status == "ok").all() and tx.correct.all(), tx[["status", "error", "notes"]]
    assert (tx.max_abs_err < 1e-4).all()  # step-0 loss vs the float32 naive reference
    for arch, sharded in (("gpt2", ["fsdp", "2d", "auto"]), ("llama", ["2d"])):
        base = json.loads(tx.loc[(arch, "dp"), "losses"])
        assert base[1] < base[0]  # a live step: the loss falls on the repeated batch
        for mode in sharded:
            assert json.loads(tx.loc[(arch, mode), "losses"]) == pytest.approx(base, abs=1e-4), (arch, mode)
    manual = tx.drop(index=("gpt2", "auto"))  # auto-sharding may re-shard between steps; manual modes must not
    assert not manual.notes.str.contains("suspicious").any()


def test_torch_xla_train_rows_count_what_the_flop_file_says(both_train):
    """The row's FLOPs and parameter count are the FLOP file's for the row's model (what JAX rows report
    too), and the first loss is near ln(vocab): the model starts from random weights."""
    df, _ = both_train
    ok = df[df.status == "ok"]
    assert len(ok) == 8
    params = yaml.safe_load(TRAIN_SUITE)["params"]
    for _, r in ok.iterrows():
        p = TrainParams(**params, arch=r.arch, num_kv_heads=int(r.num_kv_heads), sharding=r.sharding,
                        devices=int(r.devices), num_layers=int(r.num_layers), scan_layers=bool(r.scan_layers))
        assert (r.flops, r.flops_palm, r.params_count) == (p.flops(), p.flops_palm(), p.params_count()), r.arch
    assert ((ok.loss_first - np.log(256)).abs() < 0.2).all(), ok.loss_first.tolist()


def test_scan_layers_true_trains_like_false(both_train) -> None:
    """scan_layers on torch_xla: its loop over layers trains as unrolled. (JAX's scan is checked in process
    against the unrolled loop, tests/test_train_model.py, and sharded, tests/test_train_sharding.py.)"""
    df, _ = both_train
    df = df[(df.backend == "torch_xla") & (df.num_layers == 2)].set_index("scan_layers")
    assert sorted(df.index) == [False, True] and (df.status == "ok").all(), df[["status", "error"]]
    assert df.correct.all() and (df.sharding == "fsdp").all() and (df.devices == 4).all()
    unrolled, scanned = (np.array(json.loads(df.loc[s, "losses"])) for s in (False, True))
    assert unrolled[-1] < unrolled[0]
    assert np.max(np.abs(scanned - unrolled)) == 0.0, (scanned, unrolled)  # the same ops, layer by layer
    assert "torch_xla loops over layers in Python" in df.loc[True, "notes"]
    assert "loops over layers" not in df.loc[False, "notes"]


def test_torch_xla_paged_impls_match_the_reference_and_jax_counts(both_paged):
    df, _ = both_paged
    tx = df[df.backend == "torch_xla"].set_index(["impl", "q_tokens"])
    assert sorted(set(df[df.backend == "torch_xla"].impl)) == sorted(impls.names_for("paged_attention", "torch_xla"))
    # The Pallas paged kernel takes one query token: the same skip, for the same reason, as in JAX.
    jx = df[df.backend == "jax"].set_index(["impl", "q_tokens"])
    assert tx.loc[("paged", 4), "status"] == jx.loc[("paged", 4), "status"] == "skipped"
    assert tx.loc[("paged", 4), "error"] == jx.loc[("paged", 4), "error"]
    ok = tx[tx.status == "ok"]
    assert len(ok) == 7 and ok.correct.all() and (ok.max_abs_err < 1e-4).all(), ok[["max_abs_err", "notes"]]
    assert ok.loc[("paged", 1), "interpret"] and "rounded to bfloat16" in ok.loc[("paged", 1), "notes"]
    for impl in ("multi_queries_paged", "ragged_paged"):  # on CPU: torch_xla's reference paths, labelled
        assert ok.loc[(impl, 1), "notes"].startswith("CPU: torch_xla's use_kernel=False reference path")
    assert not ok.notes.str.contains("suspicious").any()
    for (impl, q_tokens), r in ok.iterrows():  # identical counts to the JAX rows of the same case
        j = jx.loc[("naive", q_tokens)]
        assert r.flops == j.flops and r["bytes"] == j["bytes"] and r.flops > 0
        assert r.tokens_per_s == pytest.approx(4 * q_tokens / r.median_s)


def _in_worker_env(python: str, code: str) -> dict:
    env = envs.worker_environ("torch_xla", 1, dict(os.environ))
    env["PYTHONPATH"] = str(ROOT)
    proc = subprocess.run([python, "-c", textwrap.dedent(code)], capture_output=True, text=True, env=env,
                          timeout=600, cwd=str(ROOT))
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def test_recompilation_while_timing_and_wrong_kernels_are_flagged(torch_xla_python):
    out = _in_worker_env(torch_xla_python, """
        import itertools, json, sys
        import xlabench.backends.torch_xla as backend
        probed = backend.probe()  # the host peak, cached (the tests' fixture): read without importing JAX
        peak = {"tflops": probed["measured_cpu_tflops"], "jax_imported": "jax" in sys.modules}
        import torch
        from xlabench.backends.torch_xla import attention_impls as ai
        from xlabench.measure.timing import TimingPlan
        run = backend.runner_for("attention")
        params = dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32")
        plan = TimingPlan(warmup=1, iters=3)
        counter = itertools.count()
        # A roll by a different amount every call (undone at once): same values, a new graph each time.
        naive = ai.naive  # the code naive's record names, replaced for the two checks
        def drifting(q, k, v, cfg):
            n = next(counter)
            return torch.roll(torch.roll(naive(q, k, v, cfg), n, 1), -n, 1)
        ai.naive = drifting
        drift = run(params, "naive", plan, False, "cpu").fields
        ai.naive = lambda q, k, v, cfg: q * 0.5
        wrong = run(params, "naive", plan, False, "cpu").fields
        ai.naive = naive
        from xlabench import impls
        from xlabench.backends.torch_xla import paged_impls as pi
        from xlabench.workloads.paged import PagedParams
        p = PagedParams(batch=1, context_lens=[16], num_heads=2, head_dim=128, page_size=16)
        contract = {"records": isinstance(ai.get("flash"), impls.AttentionImplRecord)
                               and isinstance(pi.get("paged"), impls.PagedImplRecord),
                    "kv_round": {n: pi.get(n).kv_round("cpu") for n in sorted(impls.names_for("paged_attention", "torch_xla"))},
                    "splash": ai.get("splash").unsupported(1, 64, 64, 2, 2, "float32", ai.AttnConfig(True, 1.0), "cpu"),
                    "paged": pi.get("naive").unsupported(p, "cpu", "cpu")}
        print(json.dumps({"drift": drift, "wrong": wrong, "code": {n: ai.get(n).fn.__module__ for n in impls.names_for("attention", "torch_xla")},
                          "contract": contract,
                          "peak": peak}))
    """)
    # the worker reads the cached host peak without importing JAX (0.77 s of CPU per torch_xla worker)
    assert out["peak"] == {"tflops": FIXTURE_PEAK["tflops"], "jax_imported": False}
    # every catalogued torch_xla kernel's record names its code in the backend's module
    assert out["code"] == {n: "xlabench.backends.torch_xla.attention_impls" for n in impls.names_for("attention", "torch_xla")}
    # One impl-record contract for both backends: the shared records, unsupported(..., platform), kv_round(platform)
    assert out["contract"] == {"records": True, "splash": None, "paged": None,
                               "kv_round": {"multi_queries_paged": None, "naive": None, "paged": "bfloat16",
                                            "ragged_paged": None}}
    drift, wrong = out["drift"], out["wrong"]
    assert "suspicious: 3 recompilation(s) while timing" in drift["notes"] and drift["correct"]
    assert wrong["correct"] is False and wrong["max_abs_err"] > 0.1
    assert "suspicious" not in wrong["notes"]


def test_every_torch_xla_workload_logs_its_phases(torch_xla_python):
    """Attention, paged and train name their phases as the JAX runners do (the run's meta sums them per
    phase; a runner that names none is all 'other'). A train case runs in an SPMD worker of its own."""
    kernels = _in_worker_env(torch_xla_python, """
        import json
        import xlabench.backends.torch_xla as backend
        from xlabench.measure.timing import TimingPlan
        from xlabench.workloads.paged import PagedParams
        plan = TimingPlan(warmup=0, iters=2)
        att = backend.runner_for("attention")(dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32",
                                                   mode="fwd_bwd"), "naive", plan, False, "cpu")
        pp = PagedParams(batch=1, context_lens=[16], num_heads=2, head_dim=128, page_size=16, dtype="float32")
        paged = backend.runner_for("paged_attention")(pp.resolved().model_dump(), "naive", plan, False, "cpu")
        print(json.dumps({n: [sorted(r.phase_s), r.correct] for n, r in (("attention", att), ("paged", paged))}))
    """)
    train = _in_worker_env(torch_xla_python, """
        import json, os
        from xlabench.protocol.worker_env import TORCH_XLA_SPMD_VAR
        os.environ[TORCH_XLA_SPMD_VAR] = "spmd"  # before the backend's import: SPMD is process-global
        import xlabench.backends.torch_xla as backend
        from xlabench.measure.timing import TimingPlan
        r = backend.runner_for("train")(dict(model="custom", arch="gpt2", vocab_size=256, d_model=64, num_heads=4,
                                             d_ff=128, num_layers=1, seq_len=32, global_batch=2, dtype="float32",
                                             sharding="dp", devices=1), "naive", TimingPlan(warmup=0, iters=2),
                                        False, "cpu")
        print(json.dumps([sorted(r.phase_s), r.correct]))
    """)
    assert kernels == {"attention": [["check", "compile", "inputs", "reference", "timing"], True],
                       "paged": [["check", "compile", "inputs", "timing"], True]}
    assert train == [["build", "compile", "reference", "timing"], True]


def test_trace_timer_on_torch_xla_takes_xla_execute_time(torch_xla_python, tmp_path):
    """`--timer trace`: torch_xla rows get the device columns from XLA's ExecuteTime metric (one sample per
    execution), within the wallclock time of the same iterations; JAX rows from the profiler."""
    suite = tmp_path / "suite.yaml"
    suite.write_text(textwrap.dedent("""\
        name: txla_trace
        workload: attention
        backends: [jax, torch_xla]
        impls: [naive]
        params: {batch: 1, num_heads: 2, seq_len: 128, head_dim: 32, dtype: float32, causal: false}
        matrix: {mode: [fwd, fwd_bwd]}
        measure: {warmup: 1, iters: 5, timeout_s: 300}
        """))
    proc = run_cli("run", str(suite), "--out", str(tmp_path / "res"), "--timer", "trace",
                   env={envs.TORCH_XLA_ENV_VAR: torch_xla_python})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    csv = next(p for p in (tmp_path / "res").glob("*/*.csv") if not p.name.endswith(".samples.csv"))
    df = results.read_rows(csv)
    assert (df.status == "ok").all() and set(df.timer) == {"trace"}
    assert df.device_median_s.notna().all() and (df.device_median_s > 0).all()
    tx = df[df.backend == "torch_xla"]
    assert len(tx) == 2 and tx.notes.str.contains("device times from torch_xla's ExecuteTime metric").all()
    # the device part of a lazy-tensor step is within the step it was measured in (same iterations)
    assert (tx.device_median_s <= tx.median_s).all() and (tx.host_overhead >= 1).all()
