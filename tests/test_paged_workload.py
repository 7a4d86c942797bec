"""Paged-attention workload, framework-free: parameters, inputs, reference, FLOP/byte model, suite errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from click.testing import CliRunner
from pydantic import ValidationError

from xlabench import flops, results
from xlabench import impls as catalog
from xlabench.cli import main
from xlabench.workloads import PARAMS
from xlabench.workloads.paged import (PagedParams, canonical_context_lens, make_inputs, reference,
                                      round_to_bfloat16)

BASE = dict(batch=4, context_lens=[1, 16, 37, 64], num_heads=4, num_kv_heads=2, head_dim=8, page_size=16)


def make(**kw) -> PagedParams:
    return PagedParams(**{**BASE, **kw})


def test_registered_and_every_field_has_a_column():
    assert PARAMS["paged_attention"] is PagedParams
    assert set(PagedParams.model_fields) <= set(results.CASE_COLUMN_NAMES)
    assert catalog.names_for("paged_attention", "jax") == ["naive", "paged", "ragged_paged", "paged_gpu"]
    assert catalog.names_for("paged_attention", "torch_xla") == ["naive", "paged", "multi_queries_paged", "ragged_paged"]


@pytest.mark.parametrize("spec, canonical", [
    (1024, "1024"), ("1024", "1024"), ({"uniform": [1, 4096]}, "uniform:1..4096"),
    ("uniform: 1 .. 4096", "uniform:1..4096"), ([1, 16, 33], "1,16,33"), ("1, 16,33", "1,16,33"), ([7], "7"),
])
def test_context_lens_forms(spec, canonical):
    assert canonical_context_lens(spec) == canonical


@pytest.mark.parametrize("spec", ["many", {"uniform": [1]}, {"normal": [1, 2]}, [], [1.5, 2], True, "uniform:1..x"])
def test_context_lens_rejects(spec):
    with pytest.raises(ValueError, match="context_lens: expected"):
        canonical_context_lens(spec)


def test_resolved_round_trips_and_lengths_are_deterministic():
    p = make(context_lens={"uniform": [1, 100]}, batch=64, pages_per_compute_block=2).resolved()
    assert p.max_context == 128 and p.total_pages == 64 * 8 and p.num_kv_heads == 2
    again = PagedParams(**p.model_dump())
    assert again == p
    lens = p.lengths()
    assert np.array_equal(lens, again.lengths())
    assert lens.min() >= 1 and lens.max() <= 100 and len(set(lens.tolist())) > 10  # ragged, in range
    assert np.array_equal(make(context_lens=37).lengths(), [37] * 4)


@pytest.mark.parametrize("kw, message", [
    (dict(total_pages=5), "the sequences need 9 pages of 16 tokens but the cache has total_pages=5"),
    (dict(max_context=72), "page_size (16) must divide max_context (72)"),
    (dict(max_context=48, pages_per_compute_block=2), "pages_per_compute_block (2) must divide the pages per sequence"),
    (dict(max_context=48), "context_lens 1,16,37,64 reaches 64 tokens but max_context is 48"),
    (dict(num_heads=6, num_kv_heads=4), "num_heads (6) must be divisible by num_kv_heads (4)"),
    (dict(q_tokens=2), "every context length must be >= q_tokens (2)"),
    (dict(context_lens=[1, 2]), "context_lens lists 2 lengths but batch is 4"),
    (dict(context_lens="uniform:9..3"), "lo (9) must be <= hi (3)"),
    (dict(megacore_mode="kv_head", num_kv_heads=1), "megacore_mode 'kv_head' needs an even num_kv_heads"),
    (dict(page_size=0), "page_size must be >= 1"),
    (dict(devices=2), "devices must be 1"),
    (dict(flavour=1), "Extra inputs are not permitted"),
])
def test_bad_parameters_are_clear(kw, message):
    with pytest.raises(ValidationError) as e:
        make(**kw)
    assert message in str(e.value)


def test_page_table_from_a_shuffled_free_list():
    p = make(total_pages=40).resolved()
    x = make_inputs(p)
    lens, table = x["lengths"], x["page_table"]
    assert table.shape == (4, 4) and table.dtype == np.int32
    used = [table[i, : -(-int(n) // 16)] for i, n in enumerate(lens)]
    flat = np.concatenate(used)
    assert len(flat) == p.pages_needed() == 1 + 1 + 3 + 4
    assert len(set(flat.tolist())) == len(flat)  # no page shared between sequences
    assert flat.min() >= 0 and flat.max() < 40
    assert not np.array_equal(flat, np.arange(len(flat)))  # scattered, not handed out in order
    free = np.setdiff1d(np.arange(40), flat)
    assert np.all(x["k_pages"][:, free] == 0) and np.all(x["k_pages"][:, flat] != 0)
    assert x["q"].shape == (4, 1, 4, 8)
    again = make_inputs(p)
    assert all(np.array_equal(x[k], again[k]) for k in x)  # fixed seed


def _bruteforce(x, page_size):
    """Straight loops over sequences, query tokens and heads: an independent check of reference()."""
    q, lens = x["q"], x["lengths"]
    b, nq, hq, d = q.shape
    hkv = x["k_pages"].shape[0]
    out = np.zeros_like(q, dtype=np.float64)
    for i in range(b):
        n = int(lens[i])
        for t in range(nq):
            seen = n - nq + t + 1
            for h in range(hq):
                kv_h = h // (hq // hkv)
                ks = np.array([x["k_pages"][kv_h, x["page_table"][i, j // page_size], j % page_size] for j in range(seen)])
                vs = np.array([x["v_pages"][kv_h, x["page_table"][i, j // page_size], j % page_size] for j in range(seen)])
                s = ks.astype(np.float64) @ q[i, t, h] / math.sqrt(d)
                w = np.exp(s - s.max())
                out[i, t, h] = (w / w.sum()) @ vs
    return out


@pytest.mark.parametrize("q_tokens", [1, 3])
def test_reference_matches_bruteforce(q_tokens):
    lens = [3, 16, 37, 64] if q_tokens > 1 else [1, 16, 37, 64]
    p = make(context_lens=lens, q_tokens=q_tokens)
    x = make_inputs(p)
    np.testing.assert_allclose(reference(x, 16), _bruteforce(x, 16), atol=1e-6)


def test_round_to_bfloat16_matches_ml_dtypes():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.random.default_rng(0).standard_normal(10_000).astype(np.float32) * 100
    x[:3] = [1.0 + 2**-8, 1.0 + 3 * 2**-8, -0.0]  # ties to even, both ways
    expected = x.astype(ml_dtypes.bfloat16).astype(np.float32)
    assert np.array_equal(round_to_bfloat16(x), expected)


def test_flops_and_bytes_against_a_hand_count():
    # lengths 1, 16, 37, 64; page 16 -> pages 1, 1, 3, 4 = 9 pages = 144 tokens; max_context 64 -> 4 pages/seq
    p = make(dtype="bfloat16").resolved()
    hand_kv = 2 * 144 * 2 * 8 * 2  # K and V x tokens x Hkv x D x bf16
    hand_q_out = 2 * 4 * 1 * 4 * 8 * 2  # q and out: B x q_tokens x Hq x D x 2 bytes
    hand_table = 4 * 4 * 4 + 4 * 4  # int32 page table [4, 4] + lengths [4]
    assert p.bytes() == hand_kv + hand_q_out + hand_table == 9808
    assert p.flops() == 4 * 4 * 8 * (1 + 16 + 37 + 64)
    # three query tokens of a 37-token context see 35, 36 and 37 keys
    assert flops.paged_decode_flops([37], 3, 4, 8) == 4 * 4 * 8 * (35 + 36 + 37)
    f32 = make(dtype="float32", pages_per_compute_block=2).resolved()  # max_context 64 -> still 4 pages/seq
    assert f32.bytes() == 2 * hand_kv + 2 * hand_q_out + hand_table


SUITE = """\
name: bad
workload: paged_attention
impls: [naive, paged]
params:
  num_kv_heads: 2
  head_dim: 64
  page_size: 16
matrix:
  {sweep}
"""


@pytest.mark.parametrize("sweep, message", [
    ('"batch,context_lens": [[2, 64], [2, "uniform:1..128"]]\n  total_pages: [7]',
     "the sequences need 8 pages of 16 tokens but the cache has total_pages=7"),
    ('"batch,context_lens": [[2, 64]]\n  max_context: [136]', "page_size (16) must divide max_context (136)"),
    ('"batch,context_lens": [[2, 64]]\n  num_heads: [8, 5]', "num_heads (5) must be divisible by num_kv_heads (2)"),
    ('"batch,context_lens": [[2, many]]', "context_lens: expected"),
])
def test_suite_validate_exits_2_with_the_reason(tmp_path, sweep, message):
    body = SUITE.format(sweep=sweep)
    if "num_heads" not in sweep:
        body = body.replace("params:\n", "params:\n  num_heads: 8\n")
    path = tmp_path / "bad.yaml"
    path.write_text(body)
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert message in res.output and "bad.yaml:" in res.output and "Traceback" not in res.output


def test_suite_file_validates():
    res = CliRunner().invoke(main, ["validate", "suites/paged_attention.yaml"])
    assert res.exit_code == 0, res.output
    assert "cpu: 96" in res.output  # 48 JAX + 48 torch_xla cases


def test_paged_result_checks_against_the_reference_and_reports_counts_not_rates():
    """The shared end of a paged case (both backends): the error, the K/V-rounding note, the counts."""
    from xlabench.measure.timing import TimingPlan
    from xlabench.workloads.paged import cached_reference, paged_result

    p = PagedParams(**{**BASE, "context_lens": [2, 16, 37, 64]}, q_tokens=2).resolved()
    out = cached_reference(p, "bfloat16")
    r = paged_result(p, [1.0, 2.0], TimingPlan(), None, 0.5, None, out, "bfloat16", ["m"])
    assert r.max_abs_err == 0.0 and r.correct is True and r.tokens_per_step == 8 and not r.tokens_global
    assert r.notes == "m; reference with K/V rounded to bfloat16 (the kernel casts them)"
    assert r.metrics == {"flops": p.flops(), "kernel_flops": p.flops(), "bytes": p.bytes()}
    wrong = paged_result(p, [1.0], TimingPlan(), None, 0.5, None, out * 2, None, [])
    assert wrong.correct is False and wrong.notes == ""
    assert p.paged_config(True, "cpu").sm_scale == pytest.approx(1 / math.sqrt(p.head_dim))


def test_an_empty_note_leaves_no_stray_separator_in_the_row():
    """The paged runner passes its tuning note even when empty: the row's notes read '; peak memory: ...'
    (every CPU paged row, 2026-12-06)."""
    from xlabench.measure.timing import TimingPlan
    from xlabench.workloads.paged import PagedParams, cached_reference, paged_result

    p = PagedParams(batch=2, num_heads=8, num_kv_heads=2, context_lens=64, page_size=16, head_dim=128,
                    dtype="float32").resolved()
    out = paged_result(p, [1e-3] * 3, TimingPlan(warmup=0, iters=3), None, 0.1, None,
                       cached_reference(p), None, ["", "peak memory: XLA memory_analysis", ""])
    assert out.notes == "peak memory: XLA memory_analysis"


def test_the_paged_kernels_declare_their_search_and_default_beside_their_rules():
    """The searches lived in workloads/paged.py, their rules in impls/paged_rules.py and the untuned
    default (1 page) twice: now the search and its default sit with the rules, the default declared once."""
    from xlabench.impls import paged_rules
    from xlabench.impls.kernels.paged import page_blocks
    from xlabench.workloads import paged

    p = paged.PagedParams(batch=2, context_lens="256", num_heads=4, head_dim=128, page_size=16)
    for impl, space in paged_rules.SPACES.items():
        assert impl in paged_rules.RULES
        (stage,) = space(p)
        assert stage.default == {"pages_per_compute_block": p.compute_pages}
        assert {c["pages_per_compute_block"] for c in stage.candidates} == set(page_blocks(p))
    assert not hasattr(paged, "paged_space") and not hasattr(paged, "ragged_space")
