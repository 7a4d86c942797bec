"""Every JAX attention impl agrees with the float32 reference on CPU (Pallas kernels interpreted)."""

from __future__ import annotations

import itertools

import jax.numpy as jnp
import numpy as np
import pytest

from xlabench import impls as catalog
from xlabench.backends.jax import attention_impls as impls
from xlabench.backends.jax.attention_case import run_attention_case
from xlabench.measure.timing import TimingPlan, max_normalised_error
from xlabench.protocol.worker_messages import CaseSkipped

PLAN = TimingPlan(warmup=0, iters=1)
CPU_IMPLS = [i.name for i in catalog.CATALOG if i.backend == "jax" and "attention" in i.workloads and i.runs_on("cpu")]


def test_every_catalogued_kernel_names_its_code_and_layout():
    """No table beside the catalogue: each JAX attention kernel's record names the function it runs."""
    jax_names = {i.name for i in catalog.CATALOG if i.backend == "jax" and "attention" in i.workloads}
    assert {n: (impls.get(n).fn.__module__, impls.get(n).layout) for n in jax_names} == {
        n: (impls.__name__, "bhsd" if n in ("flash", "splash") else "bshd") for n in jax_names}
    with pytest.raises(ValueError, match="unknown JAX attention impl 'nope'"):
        impls.get("nope")


@pytest.mark.parametrize("impl,mode,causal,kv_heads", list(itertools.product(
    CPU_IMPLS, ["fwd", "fwd_bwd"], [True, False], [4, 2])))
def test_impl_matches_reference(impl, mode, causal, kv_heads):
    params = dict(batch=1, num_heads=4, num_kv_heads=kv_heads, seq_len=128, head_dim=32,
                  causal=causal, dtype="float32", mode=mode, block_q=64, block_k=128)
    interpret = catalog.find("jax", impl).interpreted("cpu")
    try:
        result = run_attention_case(params, impl, PLAN, interpret, "cpu")
    except CaseSkipped as e:
        # Only a documented limitation may skip: kernels without GQA support.
        assert kv_heads != 4 and impl in ("flash", "pallas_gpu"), f"unexpected skip: {e}"
        assert "num_kv_heads == num_heads" in str(e)
        return
    f = result.fields
    assert f["correct"], f"{impl} error {f['max_abs_err']} above {f['err_tol']}"
    assert f["max_abs_err"] < 1e-4  # float32 on CPU: observed ~1e-6
    assert len(result.samples) == 1  # the reply: samples, summarised by the parent


def test_bfloat16_within_its_tolerance():
    params = dict(batch=1, num_heads=2, seq_len=128, head_dim=64, causal=True, dtype="bfloat16", mode="fwd_bwd")
    f = run_attention_case(params, "splash", PLAN, True, "cpu").fields
    assert f["correct"] and 1e-4 < f["max_abs_err"] <= f["err_tol"]  # bf16 error is visible, not zero


def test_wrong_kernel_is_flagged(monkeypatch):
    """A kernel that returns garbage must give correct=False, never a silent win."""
    monkeypatch.setattr(impls, "naive", lambda q, k, v, cfg: q * 0.5)  # the code naive's record names
    params = dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32")
    f = run_attention_case(params, "naive", PLAN, False, "cpu").fields
    assert f["correct"] is False and f["max_abs_err"] > 0.1


@pytest.mark.parametrize("impl", CPU_IMPLS)
def test_causal_with_longer_kv(impl):
    """Top-left aligned causal mask with kv_seq_len > seq_len: every impl must agree with the reference."""
    params = dict(batch=1, num_heads=2, seq_len=128, kv_seq_len=256, head_dim=32, causal=True,
                  dtype="float32", mode="fwd")
    interpret = catalog.find("jax", impl).interpreted("cpu")
    f = run_attention_case(params, impl, PLAN, interpret, "cpu").fields
    assert f["correct"], f"{impl}: {f['max_abs_err']}"


def test_block_size_constraint_skips():
    params = dict(batch=1, num_heads=2, seq_len=192, head_dim=32, dtype="float32", block_q=128, block_k=128)
    with pytest.raises(CaseSkipped, match="seq_len % block_q"):
        run_attention_case(params, "flash", PLAN, True, "cpu")


@pytest.mark.parametrize("causal,kv_heads,sk", [(True, 2, 96), (False, 4, 64)])
def test_the_shared_chunked_reference_matches_the_numpy_spec(causal, kv_heads, sk):
    """The JAX backend's reference (its math, workloads.attention's chunk rule: one compiled loop over
    chunks of 8 rows here, the largest divisor of 48 within the rule's 10) agrees with the framework-free
    numpy_reference, outputs and gradients."""
    from xlabench.workloads.attention import chunked_reference, numpy_reference, reference_chunk

    rng = np.random.default_rng(0)
    q, do = (rng.standard_normal((1, 48, 4, 16), dtype=np.float32) for _ in range(2))
    k, v = (rng.standard_normal((1, sk, kv_heads, 16), dtype=np.float32) for _ in range(2))
    spec = numpy_reference(q, k, v, do, causal, 0.25)
    small = 1 * 4 * sk * 4 * 3 * 10  # ten query rows per chunk
    assert reference_chunk(1, 4, 48, sk, True, small) == 10
    got = impls.reference_outputs(*(jnp.asarray(x) for x in (q, k, v, do)), causal, 0.25, max_score_bytes=small)
    assert len(got) == 4 and max_normalised_error(got, spec) < 1e-5
    numpy_chunked = chunked_reference(q, k, do, lambda qc, off: numpy_reference(qc, k, v, None, causal, 0.25, off)[0],
                                      lambda qc, doc, off: numpy_reference(qc, k, v, doc, causal, 0.25, off),
                                      lambda xs: np.concatenate(xs, axis=1), small)
    assert max_normalised_error(numpy_chunked, spec) < 1e-6
    fwd = impls.reference_outputs(*(jnp.asarray(x) for x in (q, k, v)), None, causal, 0.25, max_score_bytes=small)
    assert len(fwd) == 1 and max_normalised_error(fwd, spec[:1]) < 1e-5


@pytest.mark.slow  # the CPU interpreter simulates splash's fused backward (~25 s)
def test_splash_with_its_fused_backward_kernel_gives_the_reference_gradients():
    """fused_bwd 1 (a candidate of splash's backward search): one kernel computes dq, dk and dv. Interpreted
    on the CPU, its gradients equal the float32 reference's, causal and not, like the two-kernel default's."""
    import jax

    ks = jax.random.split(jax.random.key(7), 4)
    q, k, v, do = (jax.random.normal(kk, (1, 256, 2, 64), jnp.float32) for kk in ks)
    scale = impls.default_scale(64)
    for causal in (True, False):
        ref = impls.reference_outputs(q, k, v, do, causal, scale)
        for fused in (0, 1):
            cfg = impls.AttnConfig(causal=causal, sm_scale=scale, block_q=128, block_k=128, interpret=True)
            cfg = cfg.with_blocks({"block_kv_compute": 128, "block_q_bwd": 128, "block_k_bwd": 128, "fused_bwd": fused})
            out, vjp = jax.vjp(lambda q, k, v: impls.attend(q, k, v, "splash", cfg), q, k, v)
            for got, want in zip((out, *vjp(do)), ref):
                np.testing.assert_allclose(np.asarray(got), np.asarray(want), atol=2e-4, rtol=2e-4)


def test_splash_searches_its_backward_with_and_without_the_fused_kernel_from_the_default():
    from xlabench.workloads.attention import AttentionParams

    p = AttentionParams(batch=4, num_heads=16, seq_len=4096, head_dim=128, mode="fwd_bwd")
    fwd, bwd = impls.get("splash").tune_space(p)
    assert {c["fused_bwd"] for c in bwd.candidates} == {0, 1} and bwd.default["fused_bwd"] == 0
    assert {c["fused_bwd"] for c in bwd.seeds} == {0, 1}
    assert "fused_bwd" not in {n for c in fwd.candidates for n in c}


def test_a_case_logs_the_time_of_its_check_against_the_reference(capsys):
    """Issue 49: on the v5e, 193 s of the attention suite's 673 s fell outside the logged phases (about
    1.5-2 s a case, 0.2 s on CPU); the comparison of the outputs with the reference, their copy to the host
    included, is now a phase of its own, so that the chip's next run says what it costs."""
    params = dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32", mode="fwd_bwd")
    run_attention_case(params, "naive", PLAN, False, "cpu")
    line = capsys.readouterr().err.strip().splitlines()[-1]
    assert line.startswith("naive S=64 b=1 fwd_bwd") and ", reference " in line and ", check " in line, line


def test_the_device_check_gives_the_host_figure_from_three_scalars_a_pair():
    """The JAX check reduces each output and its reference on their device (max|o - r|, max|r|, finite) and
    gives the framework-free harness's figure: the scale floor of 1, the worst pair, inf for a non-finite
    output."""
    from xlabench.backends.jax import common
    from xlabench.measure import timing as harness

    rng = np.random.default_rng(0)
    small = rng.normal(0, 0.1, (2, 8, 3, 4)).astype(np.float32)  # max|r| < 1: the floor of 1 applies
    big = rng.normal(0, 10, (2, 8, 3, 4)).astype(np.float32)
    outs = [small + 1e-3, big + rng.normal(0, 0.5, big.shape).astype(np.float32)]
    refs = [small, big]
    on_device = harness.max_normalised_error([jnp.asarray(o, jnp.bfloat16) for o in outs],
                                             [jnp.asarray(r) for r in refs], common.device_error_parts)
    on_host = harness.max_normalised_error([np.asarray(jnp.asarray(o, jnp.bfloat16), np.float32) for o in outs], refs)
    assert on_device == pytest.approx(on_host, rel=1e-6) and on_host > 1e-3
    bad = outs[1].copy()
    bad[0, 0, 0, 0] = np.nan
    for parts in (common.device_error_parts, None):
        assert harness.max_normalised_error([jnp.asarray(outs[0]), jnp.asarray(bad)], refs, parts) == float("inf")
