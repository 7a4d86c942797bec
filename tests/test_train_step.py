"""The JAX train step's performance choices on one CPU device: the chunked cross-entropy (value, gradient,
memory), every remat policy (same loss and gradients as none), and the attention block sizes the step
hands to the Pallas kernels (interpreted)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from _train_compare import unstack_layers
from xlabench.backends.jax import attention_impls as impls
from xlabench.backends.jax import model, sharding, train_case
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.workloads import model_presets as mp
from xlabench.workloads.train import REMAT, TrainParams

HOOKS = model.Hooks(attention=None)  # the loss alone calls no attention


def _p(name: str = "gpt2-tiny", **kw) -> TrainParams:
    base = dict(model=name, global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    return TrainParams(**{**base, **kw})


def _rel(a, b) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(np.abs(a - b).max() / max(1e-30, np.abs(b).max()))


def _grad_diff(ga: list[np.ndarray], gb: list[np.ndarray]) -> float:
    """Worst leaf's |ga - gb| / |gb| (L2), a leaf's norm floored at 1e-3 of the largest: some gradients are
    zero in exact arithmetic (a key bias shifts every score of a query alike) and only rounding noise here."""
    norms = [float(np.linalg.norm(b)) for b in gb]
    floor = 1e-3 * max(norms)
    return max(float(np.linalg.norm(a - b)) / max(n, floor) for a, b, n in zip(ga, gb, norms))


@pytest.mark.parametrize("seq,chunk", [(100, 32), (256, 64), (512, 512), (64, 256)])
def test_chunked_cross_entropy_equals_the_full_softmax(seq: int, chunk: int) -> None:
    """Value and gradient (x and the weight), float32; a padded vocabulary (500 -> 512 columns, the pad
    at -inf), and sequences that chunks do not tile (100 / 32) or that are shorter than one chunk."""
    cfg = mp.PRESETS["gpt2-tiny"].replace(vocab_size=500)
    kx, kw, kt, kg = jax.random.split(jax.random.key(3), 4)
    x = jax.random.normal(kx, (3, seq, cfg.d_model))
    w = 0.1 * jax.random.normal(kw, (cfg.d_model, cfg.padded_vocab))
    t = jax.random.randint(kt, (3, seq), 0, cfg.vocab_size)
    g = jax.random.normal(kg, (3, seq))  # a cotangent that weights every token differently
    # each side one jitted program (op by op, every eager op and its gradient compiled on its own: 3-4.4 s a case)
    full = lambda x, w: model.cross_entropy(model._project(x, w, cfg, HOOKS), t)  # noqa: E731
    chunked = lambda x, w: model.chunked_cross_entropy(x, w, t, cfg, HOOKS, chunk)  # noqa: E731
    np.testing.assert_allclose(jax.jit(chunked)(x, w), jax.jit(full)(x, w), rtol=1e-6, atol=2e-6)
    ga = jax.jit(jax.grad(lambda x, w: (full(x, w) * g).sum(), (0, 1)))(x, w)
    gb = jax.jit(jax.grad(lambda x, w: (chunked(x, w) * g).sum(), (0, 1)))(x, w)
    for a, b in zip(gb, ga):
        assert _rel(a, b) < 1e-5


def _loss_and_grads(p: TrainParams, impl: str = "naive") -> tuple[np.ndarray, list[np.ndarray]]:
    """Per-sequence losses and the gradient of the mean loss (per-layer layout) at the initial weights."""
    prog = train_case.program(p, impl, sharding.per_shard(impl), "cpu")
    params = train_case.initializer(p.config(), p.dtype, p.sharding, (1, 1, 1), p.scan())()[0]
    tokens = jnp.asarray(train_case.make_tokens(p, train_case.TOKEN_SEED))
    hooks = sharding.hooks(prog.mesh, p.sharding, train_case.attention_fn(impl, p.config(), p, prog.mesh,
                                                                          prog.interpret, "cpu"), impl)
    with prog.interpret_ctx():
        (_, per_seq), grads = jax.jit(jax.value_and_grad(
            lambda w: model.loss(w, tokens, p.config(), hooks, p.remat, p.loss_chunk), has_aux=True))(params)
    if model.is_stacked(grads["layers"]):
        grads = {**grads, "layers": unstack_layers(grads["layers"])}
    return np.asarray(per_seq), [np.asarray(x) for x in jax.tree.leaves(grads)]


@pytest.fixture(scope="module")
def base_grads() -> dict:
    return {name: _loss_and_grads(_p(name)) for name in ("gpt2-tiny", "llama-tiny")}


@pytest.mark.parametrize("remat", [r for r in REMAT if r != "none"])
@pytest.mark.parametrize("name", ["gpt2-tiny", "llama-tiny"])
@pytest.mark.parametrize("scan", [False, True])
def test_every_remat_policy_gives_the_loss_and_gradients_of_none(base_grads: dict, name: str, remat: str,
                                                                 scan: bool) -> None:
    losses, grads = _loss_and_grads(_p(name, remat=remat, scan_layers=scan))
    ref_losses, ref_grads = base_grads[name]
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=1e-5)
    assert _grad_diff(grads, ref_grads) < 1e-4


def test_remat_names_are_the_models_policies() -> None:
    """One list of names (workloads/train.py REMAT); every name but none has its policy, and no other."""
    assert set(model.REMAT_POLICIES) == set(REMAT) - {"none"}
    assert model.SCAN_NONE_POLICY in model.REMAT_POLICIES


def test_whole_logits_and_chunks_train_alike(base_grads: dict) -> None:
    """The step's loss with loss_chunk 0 (whole logits) and 32 (chunks of a 128-token sequence)."""
    whole = _loss_and_grads(_p("gpt2-tiny", loss_chunk=0))
    np.testing.assert_allclose(base_grads["gpt2-tiny"][0], whole[0], rtol=0, atol=1e-5)
    chunked = _loss_and_grads(_p("gpt2-tiny", loss_chunk=32))
    np.testing.assert_allclose(chunked[0], whole[0], rtol=0, atol=1e-5)
    assert _grad_diff(chunked[1], whole[1]) < 1e-4


def _temp_bytes(p: TrainParams) -> int:
    compiled, _, _ = train_case.program(p, "naive", False, "cpu").compile(donate=False)
    return int(compiled.memory_analysis().temp_size_in_bytes)


def test_chunked_loss_lowers_peak_memory() -> None:
    """A 16k vocabulary at batch 8 x 256: the float32 logits are 128 MiB, a 32-position chunk's 16 MiB.
    Measured (jax 0.10.2 CPU): temporaries 340.0 MiB whole, 125.0 MiB chunked."""
    p = dict(vocab_size=16384, global_batch=8, seq_len=256)
    whole, chunked = _temp_bytes(_p(loss_chunk=0, **p)), _temp_bytes(_p(loss_chunk=32, **p))
    logits = 8 * 256 * 16384 * 4
    assert chunked < whole - logits, (whole, chunked)


def _peak_bytes(p: TrainParams) -> int:
    ma = train_case.program(p, "naive", False, "cpu").compile(donate=False)[0].memory_analysis()
    return int(ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes)


def test_scanned_step_without_remat_needs_no_more_memory_than_unrolled(monkeypatch) -> None:
    """The issue's bound: the scanned step with remat none within 1.25x of the unrolled step's memory.
    Measured (jax 0.10.2 CPU, gpt2-tiny, batch 8 x 256, float32): unrolled 125.2 MB, scanned 74.8 MB;
    the scanned body not checkpointed (every layer's S x S kept, stacked) 156.6 MB."""
    p = dict(global_batch=8, seq_len=256)
    unrolled, scanned = _peak_bytes(_p(scan_layers=False, **p)), _peak_bytes(_p(scan_layers=True, **p))
    assert scanned <= 1.25 * unrolled, (scanned, unrolled)
    monkeypatch.setattr(model, "SCAN_NONE_POLICY", "none")  # the body as it was: the bound is not vacuous
    assert _peak_bytes(_p(scan_layers=True, **p)) > 1.2 * scanned


def test_train_step_hands_block_sizes_to_flash(monkeypatch) -> None:
    """block_q / block_k reach the kernel's config (and its checks); the step trains like the default."""
    seen = []
    attend = impls.attend
    monkeypatch.setattr(impls, "attend", lambda q, k, v, impl, cfg: seen.append((cfg, q.shape)) or
                        attend(q, k, v, impl, cfg))
    p = _p(seq_len=256, block_q=128, block_k=256)
    losses, grads = _loss_and_grads(p, "flash")
    assert {(c.block_q, c.block_k) for c, _ in seen} == {(128, 256)}
    assert {shape for _, shape in seen} == {(2, 256, 4, 32)}  # [B, S, H, D] of gpt2-tiny
    ref_losses, ref_grads = _loss_and_grads(_p(seq_len=256), "naive")
    np.testing.assert_allclose(losses, ref_losses, rtol=0, atol=1e-5)
    assert _grad_diff(grads, ref_grads) < 1e-4
    with pytest.raises(CaseSkipped, match="multiple of 128"):
        train_case.program(_p(seq_len=256, block_k=64), "flash", True, "cpu")


@pytest.mark.parametrize("seq,chunk", [(100, 32), (256, 64), (64, 256)])
def test_the_mean_cross_entropy_with_its_gradient_in_the_forward_equals_the_full_softmax(seq: int, chunk: int):
    """The train step's head (mean_cross_entropy): the mean's value and gradient (x and the weight) equal
    the full softmax's, and the per-token values too; padded vocabulary and sequences chunks do not tile."""
    cfg = mp.PRESETS["gpt2-tiny"].replace(vocab_size=500)
    kx, kw, kt = jax.random.split(jax.random.key(4), 3)
    x = jax.random.normal(kx, (3, seq, cfg.d_model))
    w = 0.1 * jax.random.normal(kw, (cfg.d_model, cfg.padded_vocab))
    t = jax.random.randint(kt, (3, seq), 0, cfg.vocab_size)
    # jitted, as the step runs them (op by op, every eager op and its gradient compiled on its own)
    full = lambda x, w: model.cross_entropy(model._project(x, w, cfg, HOOKS), t)  # noqa: E731
    fused = lambda x, w: model.mean_cross_entropy(x, w, t, cfg, HOOKS, chunk)  # noqa: E731
    value, per_token = jax.jit(fused)(x, w)
    want = jax.jit(full)(x, w)
    np.testing.assert_allclose(per_token, want, rtol=1e-6, atol=2e-6)
    np.testing.assert_allclose(value, want.mean(), rtol=1e-6)
    ga = jax.jit(jax.grad(lambda x, w: 3.0 * full(x, w).mean(), (0, 1)))(x, w)
    gb = jax.jit(jax.grad(lambda x, w: 3.0 * fused(x, w)[0], (0, 1)))(x, w)
    for a, b in zip(gb, ga):
        assert _rel(a, b) < 1e-5


@pytest.mark.slow  # starts a process
def test_the_step_computes_the_heads_gradient_once() -> None:
    """The vocabulary projection's matmuls in the compiled step: three with the gradient in the forward
    (logits, dx, dw), four with chunked_cross_entropy's backward (the logits again). Counted from XLA's
    FLOPs: the difference is one chunk's projection, 2 x chunk tokens x d_model x padded_vocab (XLA's cost
    analysis counts a loop's body once; with a single chunk XLA merges the two projections itself)."""
    p = _p("gpt2-tiny", loss_chunk=32, vocab_size=8192)
    cfg = p.config()
    prog = train_case.program(p, "naive", False, "cpu")
    params, opt, tokens = prog.abstract_args
    hooks = model.Hooks(attention=lambda q, k, v: impls.attend(q, k, v, "naive", impls.AttnConfig(True, 1.0)))

    def flops(fused: bool) -> float:
        f = jax.value_and_grad(lambda w, t: model.loss(w, t, cfg, hooks, "none", 32, fused), has_aux=True)
        return jax.jit(f).lower(params, tokens).compile().cost_analysis()["flops"]

    one = 2 * p.batch() * 32 * cfg.d_model * cfg.padded_vocab
    assert flops(False) - flops(True) == pytest.approx(one, rel=0.02)
