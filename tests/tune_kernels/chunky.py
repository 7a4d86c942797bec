"""A user attention kernel in plain jnp that takes a block size (docs/kernels.md): an online softmax over
key chunks of ``cfg.block_k``. No Pallas, so the CPU runs it natively and the tuner can time it there."""

import jax.numpy as jnp


def chunked(q, k, v, cfg):
    b, s, h, d = q.shape
    bk = min(cfg.block_k or 128, k.shape[1])
    qf = q.astype(jnp.float32) * cfg.sm_scale
    m = jnp.full((b, h, s), -jnp.inf)
    denom = jnp.zeros((b, h, s))
    acc = jnp.zeros((b, s, h, d))
    for j in range(k.shape[1] // bk):
        kk = k[:, j * bk:(j + 1) * bk].astype(jnp.float32)
        vv = v[:, j * bk:(j + 1) * bk].astype(jnp.float32)
        sc = jnp.einsum("bqhd,bkhd->bhqk", qf, kk)
        if cfg.causal:
            sc = jnp.where(jnp.arange(j * bk, (j + 1) * bk)[None, :] <= jnp.arange(s)[:, None], sc, -jnp.inf)
        new_m = jnp.maximum(m, sc.max(-1))
        corr = jnp.exp(m - new_m)
        p = jnp.where(jnp.isfinite(sc), jnp.exp(sc - new_m[..., None]), 0.0)
        denom = denom * corr + p.sum(-1)
        acc = acc * jnp.moveaxis(corr, 1, 2)[..., None] + jnp.einsum("bhqk,bkhd->bqhd", p, vv)
        m = new_m
    return (acc / jnp.moveaxis(denom, 1, 2)[..., None]).astype(q.dtype)


chunked.block_params = ("block_k",)
chunked.tune_candidates = [{"block_k": 32}, {"block_k": 64}, {"block_k": 128}]
