import jax, jax.numpy as jnp

def chunked(q, k, v, cfg):
    """Attention over key chunks of cfg.block_k (online softmax), plain jnp: tunable on any platform."""
    b, s, h, d = q.shape
    bk = cfg.block_k or 128
    bk = min(bk, k.shape[1])
    n = k.shape[1] // bk
    qf = q.astype(jnp.float32) * cfg.sm_scale
    m = jnp.full((b, h, s), -jnp.inf); l = jnp.zeros((b, h, s)); acc = jnp.zeros((b, s, h, d))
    for j in range(n):
        kk = k[:, j*bk:(j+1)*bk].astype(jnp.float32); vv = v[:, j*bk:(j+1)*bk].astype(jnp.float32)
        sc = jnp.einsum("bqhd,bkhd->bhqk", qf, kk)
        if cfg.causal:
            mask = jnp.arange(j*bk, (j+1)*bk)[None, :] <= jnp.arange(s)[:, None]
            sc = jnp.where(mask, sc, -jnp.inf)
        mn = jnp.maximum(m, sc.max(-1)); corr = jnp.exp(m - mn); p = jnp.exp(sc - mn[..., None])
        p = jnp.where(jnp.isfinite(sc), p, 0.0)
        l = l * corr + p.sum(-1); acc = acc * jnp.moveaxis(corr, 1, 2)[..., None] + jnp.einsum("bhqk,bkhd->bqhd", p, vv); m = mn
    return (acc / jnp.moveaxis(l, 1, 2)[..., None]).astype(q.dtype)

chunked.block_params = ("block_k",)
chunked.tune_candidates = [{"block_k": 32}, {"block_k": 64}, {"block_k": 128}]
