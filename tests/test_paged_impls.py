"""JAX paged-attention impls against the float32 reference, on CPU (Pallas kernels interpreted)."""

from __future__ import annotations

import numpy as np
import pytest

jax = pytest.importorskip("jax")
import jax.numpy as jnp  # noqa: E402

from xlabench import impls as catalog  # noqa: E402
from xlabench.backends.jax import paged_impls  # noqa: E402
from xlabench.backends.jax.paged_case import run_paged_case  # noqa: E402
from xlabench.measure.timing import TimingPlan, max_normalised_error  # noqa: E402
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped  # noqa: E402
from xlabench.workloads.paged import PagedParams, make_inputs, reference  # noqa: E402

PLAN = TimingPlan(warmup=0, iters=1)
# Ragged lengths: a single token, one ending exactly on a page boundary (32), one a token past it (33),
# one mid-page; page tables scattered through a cache with spare pages.
RAGGED = dict(batch=4, context_lens=[1, 32, 33, 21], num_heads=8, num_kv_heads=2, head_dim=128,
              page_size=16, pages_per_compute_block=2, total_pages=12)
F32_TOL = 2e-6  # float32 kernels agree with the float64 reference to ~1e-7


def run_result(impl: str, **kw) -> CaseResult:
    p = PagedParams(**{**RAGGED, **kw}).resolved()
    info = catalog.find("jax", impl, "paged_attention")
    return run_paged_case(p.model_dump(), impl, PLAN, info.interpreted("cpu"), "cpu")


def run(impl: str, **kw) -> dict:
    return run_result(impl, **kw).fields


def test_every_catalogued_kernel_names_its_code():
    """No table beside the catalogue: each JAX paged kernel's record names the function it runs."""
    names = catalog.names_for("paged_attention", "jax")
    assert {n: paged_impls.get(n).fn for n in names} == {n: getattr(paged_impls, n) for n in names}


def test_records_follow_the_shared_contract():
    """kv_round is a function of the platform in both backends (the torch_xla side: test_torch_xla)."""
    assert paged_impls.get("paged").kv_round("cpu") == "bfloat16" and paged_impls.get("naive").kv_round("tpu") is None
    with pytest.raises(ValueError, match="unknown JAX paged-attention impl 'nope'"):
        paged_impls.get("nope")


@pytest.mark.parametrize("impl", ["naive", "paged", "paged_gpu"])
def test_float32_matches_reference_on_ragged_lengths(impl):
    r = run_result(impl, dtype="float32")
    f = r.fields
    assert f["max_abs_err"] < F32_TOL and f["correct"] is True
    assert f["bytes"] == PagedParams(**RAGGED, dtype="float32").bytes()
    assert r.tokens_per_step == 4 and not r.tokens_global  # batch * q_tokens; the parent derives tokens_per_s


@pytest.mark.parametrize("impl", ["paged", "paged_gpu"])
def test_bfloat16_within_tolerance(impl):
    f = run(impl, dtype="bfloat16")
    assert 1e-5 < f["max_abs_err"] <= f["err_tol"] and f["correct"] is True  # bf16 rounding is visible


def test_naive_multi_query_tokens_is_causal():
    f = run("naive", dtype="float32", context_lens=[3, 32, 33, 21], q_tokens=3)
    assert f["max_abs_err"] < F32_TOL


def test_tpu_paged_kernel_rounds_kv_to_bfloat16():
    """Why its reference rounds K/V: against the unrounded one a float32 case is off by ~1e-2."""
    p = PagedParams(**RAGGED, dtype="float32").resolved()
    x = make_inputs(p)
    cfg = paged_impls.PagedConfig(sm_scale=1 / np.sqrt(128), pages_per_compute_block=2, megacore_mode=None,
                                  interpret=True, platform="cpu")
    args = [jnp.asarray(x[n]) for n in ("q", "k_pages", "v_pages", "lengths", "page_table")]
    with paged_impls.tpu_interpret(cfg):
        out = jax.jit(lambda *a: paged_impls.paged(*a, cfg))(*args)
    assert max_normalised_error([out], [reference(x, 16)]) > 1e-3
    assert max_normalised_error([out], [reference(x, 16, kv_round="bfloat16")]) < F32_TOL


@pytest.mark.parametrize("mode", ["kv_head", "batch"])
def test_paged_megacore_modes_in_the_interpreter(mode):
    assert run("paged", dtype="float32", megacore_mode=mode)["max_abs_err"] < F32_TOL


def test_ragged_paged_is_skipped_on_cpu_with_the_interpreter_error():
    with pytest.raises(CaseSkipped, match=r"does not run in the CPU Pallas interpreter \(on TPU it does\), jax [\d.]+: \w+Error: "):
        run("ragged_paged", dtype="float32")


@pytest.mark.parametrize("q_tokens", [1, 3])
def test_ragged_inputs_match_the_kernels_own_reference(q_tokens):
    """The packing ragged_paged hands the kernel (combined K/V cache, flattened q, cu_q_lens) is right:
    the kernel's pure-jnp reference on that packing equals ours."""
    from jax.experimental.pallas.ops.tpu import ragged_paged_attention as rpa

    p = PagedParams(**{**RAGGED, "context_lens": [3, 32, 33, 21]}, dtype="float32", q_tokens=q_tokens).resolved()
    x = make_inputs(p)
    cfg = paged_impls.PagedConfig(sm_scale=1 / np.sqrt(128), pages_per_compute_block=2, megacore_mode=None,
                                  interpret=True, platform="cpu")
    args = paged_impls.get("ragged_paged").prepare(
        *[jnp.asarray(x[n]) for n in ("q", "k_pages", "v_pages", "lengths", "page_table")], cfg)
    out = rpa.ref_ragged_paged_attention(*args, sm_scale=cfg.sm_scale).reshape(x["q"].shape)
    assert max_normalised_error([out], [reference(x, 16)]) < F32_TOL


@pytest.mark.parametrize("impl, kw, reason", [
    ("paged", dict(context_lens=[3, 32, 33, 21], q_tokens=3), "takes one query token per sequence"),
    ("paged_gpu", dict(context_lens=[3, 32, 33, 21], q_tokens=3), "takes one query token per sequence"),
    ("naive", dict(megacore_mode="batch"), "megacore_mode applies to the Pallas TPU paged kernel only"),
    ("ragged_paged", dict(head_dim=64), "needs head_dim a multiple of 128"),
])
def test_unsupported_cases_skip_with_a_reason(impl, kw, reason):
    with pytest.raises(CaseSkipped, match=reason):
        run(impl, dtype="float32", **kw)


def test_megacore_skipped_on_a_tpu_without_megacore():
    p = PagedParams(**RAGGED, megacore_mode="batch")
    im = paged_impls.get("paged")
    assert "may hang" in im.unsupported(p, "tpu", "TPU v5 lite")
    assert im.unsupported(p, "tpu", "TPU v4") is None


def test_a_wrong_kernel_is_reported_wrong(monkeypatch):
    """The check can fail: an impl that ignores the last page of every sequence is marked incorrect."""
    real = paged_impls.naive

    def drop_last_page(q, k, v, lengths, table, cfg):
        return real(q, k, v, jnp.maximum(lengths - 16, 1), table, cfg)

    monkeypatch.setattr(paged_impls, "naive", drop_last_page)  # the code naive's record names
    f = run("naive", dtype="float32")
    assert f["correct"] is False and f["max_abs_err"] > f["err_tol"]


@pytest.mark.parametrize("pages, block, splits", [(8, 2, 4), (64, 4, 16), (6, 1, 6), (96, 2, 16), (34, 2, 1)])
def test_gpu_k_splits_leave_whole_compute_blocks(pages, block, splits):
    assert paged_impls.gpu_k_splits(pages, block) == splits
