"""FLOP formulas against hand counts and against XLA's own count of naive attention."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import pytest

from xlabench import flops
from xlabench.backends.jax import attention_impls as impls
from xlabench.workloads.attention import AttentionParams


def test_forward_hand_count():
    # B=2, H=4, S=Sk=128, D=64: QK^T is 2*128*128*64 FLOPs per head, PV the same.
    per_head = 2 * 128 * 128 * 64 * 2
    assert flops.attention_fwd_flops(2, 4, 128, 128, 64, causal=False) == 2 * 4 * per_head


def test_causal_visible_keys_exact():
    # query i sees i+1 keys: mean over S=4 queries is (1+2+3+4)/4 = 2.5 = (S+1)/2
    assert flops.causal_visible_keys(4, 4) == 2.5
    # Sq < Sk, top-left aligned: queries 0,1 see 1,2 keys
    assert flops.causal_visible_keys(2, 8) == 1.5
    # Sq > Sk: queries 0..3 see 1..4 keys, queries 4,5 see all 4
    assert flops.causal_visible_keys(6, 4) == (1 + 2 + 3 + 4 + 4 + 4) / 6
    assert flops.attention_fwd_flops(1, 1, 4, 4, 8, causal=True) == 4 * 4 * 2.5 * 8


def test_backward_factors():
    p = AttentionParams(batch=1, num_heads=2, seq_len=256, head_dim=64, causal=False, mode="fwd_bwd")
    fwd = flops.attention_fwd_flops(1, 2, 256, 256, 64, False)
    assert p.flops() == pytest.approx(3.0 * fwd)  # model: fwd + 2x fwd
    assert p.kernel_flops() == pytest.approx(3.5 * fwd)  # kernel: fwd + 2.5x fwd (recomputed QK^T)


def test_mfu():
    assert flops.mfu(1e12, 1.0, 2, 1.0) == pytest.approx(0.5)


@pytest.mark.parametrize("hq,hkv", [(4, 4), (4, 2)])
def test_naive_forward_matches_xla_cost_analysis(hq, hkv):
    """XLA counts the two matmuls of naive non-causal attention; softmax adds a little on top."""
    b, s, d = 2, 256, 64
    q = jnp.zeros((b, s, hq, d), jnp.float32)
    kv = jnp.zeros((b, s, hkv, d), jnp.float32)
    cfg = impls.AttnConfig(causal=False, sm_scale=0.125)
    compiled = jax.jit(lambda q, k, v: impls.naive(q, k, v, cfg)).lower(q, kv, kv).compile()
    ca = compiled.cost_analysis()
    ca = ca[0] if isinstance(ca, (list, tuple)) else ca
    analytic = flops.attention_fwd_flops(b, hq, s, s, d, causal=False)
    assert ca["flops"] == pytest.approx(analytic, rel=0.05)
