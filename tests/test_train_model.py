"""The JAX train step on one CPU device: parameter tree, kernels agree, XLA's FLOP count, remat, rows."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from _train_compare import update_rel_diff
from xlabench import flops
from xlabench.backends.jax import model, sharding, train_case
from xlabench.worker_api import CaseSkipped
from xlabench.workloads import model_presets as mp
from xlabench.workloads.train import TrainParams

STEPS = 2


def _p(model_name: str, **kw) -> TrainParams:
    base = dict(model=model_name, global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    return TrainParams(**{**base, **kw})


def _train(p: TrainParams, impl: str) -> tuple[list[float], list[np.ndarray], train_case.TrainSetup]:
    """Losses of STEPS steps, the parameter update (final - initial) per leaf, and the setup."""
    setup = train_case.build(p, impl, impl in sharding.SHARD_MAP_IMPLS, "cpu")
    init = [np.asarray(x) for x in jax.tree.leaves(setup.state[0])]
    with setup.prog.interpret_ctx():
        losses = [float(setup.step()[0]) for _ in range(STEPS)]
    return losses, [np.asarray(x) - i for x, i in zip(jax.tree.leaves(setup.state[0]), init)], setup


@pytest.fixture(scope="module")
def naive_runs() -> dict:
    return {m: _train(_p(m), "naive") for m in ("gpt2-tiny", "llama-tiny")}


@pytest.mark.parametrize("name", list(mp.PRESETS))
def test_parameter_tree_matches_the_count(name: str) -> None:
    cfg = mp.PRESETS[name]
    tree = train_case.abstract_params(cfg, "bfloat16")
    assert sum(math.prod(x.shape) for x in jax.tree.leaves(tree)) == mp.param_count(cfg, cfg.padded_vocab)
    assert all(x.dtype == jax.numpy.bfloat16 for x in jax.tree.leaves(tree))


# float32: two attention implementations (or remat) round differently at ~1e-7; measured update
# differences are ~1e-4 of the update (from a few near-zero gradients), so 1e-2 leaves margin while a
# wrong gradient anywhere (e.g. a wrong mask) gives ~1.
LOSS_TOL, UPDATE_TOL = 1e-5, 1e-2


def _assert_same_training(a, b) -> None:
    (la, ua, _), (lb, ub, _) = a, b
    assert np.allclose(la, lb, rtol=0, atol=LOSS_TOL), (la, lb)
    assert update_rel_diff(ua, ub) <= UPDATE_TOL, update_rel_diff(ua, ub)


@pytest.mark.parametrize("name,impl", [("gpt2-tiny", "flash"), ("llama-tiny", "flash")])
def test_pallas_kernels_train_like_naive(naive_runs: dict, name: str, impl: str) -> None:
    """flash has no GQA: llama-tiny (4 query / 2 KV heads) runs it with K/V heads repeated."""
    base = naive_runs[name]
    assert base[0][-1] < base[0][0]
    _assert_same_training(_train(_p(name), impl), base)


@pytest.mark.parametrize("remat", ["full", "dots"])
def test_remat_changes_memory_not_results(naive_runs: dict, remat: str) -> None:
    _assert_same_training(_train(_p("llama-tiny", remat=remat), "naive"), naive_runs["llama-tiny"])


# XLA's HloCostAnalysis counts every op of the compiled step: the matmuls, plus elementwise work
# (softmax, norms, GELU/SiLU, AdamW) that the model FLOPs leave out. Naive attention computes the full
# S x S scores and masks them, so XLA is compared with the non-causal count. Measured (jax 0.10.2 CPU):
# gpt2-tiny 1.035, llama-tiny 1.028 (batch 2, seq 128: elementwise work, AdamW's above all, is a larger
# share of a 0.5M-parameter model), gpt2-124m 1.008 (batch 2, seq 1024). Pallas kernels are custom calls (interpreted
# on CPU: XLA counts one grid step), so they are never compared with XLA.
XLA_OVER_ANALYTIC = (1.0, 1.05)


def _xla_flops(compiled) -> float:
    cost = compiled.cost_analysis()
    return float((cost[0] if isinstance(cost, list) else cost)["flops"])


@pytest.mark.parametrize("name", ["gpt2-tiny", "llama-tiny"])
def test_analytic_flops_vs_xla_cost_analysis_tiny(naive_runs: dict, name: str) -> None:
    p = _p(name)
    ratio = _xla_flops(naive_runs[name][2].compiled) / flops.train_step_flops(p.config(), 2, 128, causal=False)
    assert XLA_OVER_ANALYTIC[0] <= ratio <= XLA_OVER_ANALYTIC[1], ratio


@pytest.mark.slow
def test_analytic_flops_vs_xla_cost_analysis_gpt2_124m() -> None:
    """Compile only (abstract arguments: no parameter is allocated)."""
    p = _p("gpt2-124m", seq_len=1024)
    compiled, _, _ = train_case.program(p, "naive", False, "cpu").compile(donate=False)
    cfg = p.config()
    # The step multiplies by the padded vocabulary (50304): count that too, to compare like with like.
    padded = flops.train_step_flops(cfg.replace(vocab_size=cfg.padded_vocab), 2, 1024, causal=False)
    ratio = _xla_flops(compiled) / padded
    assert XLA_OVER_ANALYTIC[0] <= ratio <= 1.02, ratio  # a real-size model: elementwise work is < 2%
    assert p.flops() < padded  # the reported model FLOPs: causal, true vocabulary


def test_auto_sharding_is_skipped_with_the_reason() -> None:
    with pytest.raises(CaseSkipped, match="no public XLA auto-sharding"):
        train_case.program(_p("gpt2-tiny", sharding="auto"), "naive", False, "cpu")


def test_impl_that_cannot_run_is_skipped() -> None:
    p = _p("gpt2-tiny")
    mesh = sharding.make_mesh(p.mesh_shape())
    with pytest.raises(CaseSkipped, match="cuDNN fused attention needs bfloat16"):
        train_case.attention_fn("cudnn", p.config(), p, mesh, False, "gpu")
    with pytest.raises(CaseSkipped, match="flash_attention needs block_k to be a multiple of 128"):
        train_case.program(_p("gpt2-tiny", seq_len=64), "flash", True, "cpu")


def test_layout_axes_name_known_logical_axes() -> None:
    known = {model.VOCAB, model.EMBED, model.HEADS, model.MLP, None}
    for cfg in (mp.PRESETS["gpt2-124m"], mp.PRESETS["llama3-8b"]):
        specs = jax.tree.leaves(model.layout(cfg), is_leaf=model.is_spec)
        assert all(len(s.axes) == len(s.shape) and set(s.axes) <= known for s in specs)


def test_update_comparison_catches_a_wrong_mask(naive_runs: dict) -> None:
    """The equivalence criterion is not vacuous: non-causal attention trains differently."""
    import optax

    from xlabench.backends.jax import attention_impls as impls

    p = _p("gpt2-tiny")
    setup = naive_runs["gpt2-tiny"][2]
    wrong = impls.AttnConfig(causal=False, sm_scale=impls.default_scale(32))
    hooks = sharding.hooks(setup.prog.mesh, "dp", lambda q, k, v: impls.attend(q, k, v, "naive", wrong), "naive")
    params, opt_state = train_case.initializer(p.config(), p.dtype, p.sharding, (1, 1, 1))()
    init = [np.asarray(x) for x in jax.tree.leaves(params)]

    @jax.jit
    def step(params, opt_state, tokens):
        grads = jax.grad(lambda w: model.loss(w, tokens, p.config(), hooks)[0])(params)
        updates, opt_state = train_case.OPTIMIZER.update(grads, opt_state, params)
        return optax.apply_updates(params, updates), opt_state

    for _ in range(STEPS):
        params, opt_state = step(params, opt_state, setup.tokens)
    ua = [np.asarray(x) - i for x, i in zip(jax.tree.leaves(params), init)]
    assert update_rel_diff(ua, naive_runs["gpt2-tiny"][1]) > 10 * UPDATE_TOL
