"""The JAX train step on one CPU device: parameter tree, kernels agree, XLA's FLOP count, remat, rows."""

from __future__ import annotations

import math

import jax
import numpy as np
import pytest

from _train_compare import unstack_layers, update_rel_diff
from xlabench import flops
from xlabench.backends.jax import model, sharding, train_case
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.workloads import model_presets as mp
from xlabench.workloads.train import TrainParams

STEPS = 2


def _p(model_name: str, **kw) -> TrainParams:
    base = dict(model=model_name, global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    return TrainParams(**{**base, **kw})


def _per_layer_leaves(params: dict) -> list[np.ndarray]:
    """Leaves in the per-layer (unrolled) layout, whichever layout ``params`` has."""
    if model.is_stacked(params["layers"]):
        params = {**params, "layers": unstack_layers(params["layers"])}
    return [np.asarray(x) for x in jax.tree.leaves(params)]


def _train(p: TrainParams, impl: str) -> tuple[np.ndarray, list[np.ndarray], train_case.TrainSetup]:
    """Per-sequence losses of STEPS steps [STEPS, batch], the parameter update (final - initial) per
    leaf of the per-layer layout, and the setup."""
    setup = train_case.build(p, impl, sharding.per_shard(impl), "cpu")
    init = _per_layer_leaves(setup.state[0])
    with setup.prog.interpret_ctx():
        losses = np.stack([np.asarray(setup.step()[1]) for _ in range(STEPS)])
    return losses, [x - i for x, i in zip(_per_layer_leaves(setup.state[0]), init)], setup


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


@pytest.mark.slow  # trains with Pallas kernels the CPU interpreter simulates (~35 s)
@pytest.mark.parametrize("name,impl", [("gpt2-tiny", "flash"), ("llama-tiny", "flash")])
def test_pallas_kernels_train_like_naive(naive_runs: dict, name: str, impl: str) -> None:
    """flash has no GQA: llama-tiny (4 query / 2 KV heads) runs it with K/V heads repeated."""
    base = naive_runs[name]
    assert base[0][-1].mean() < base[0][0].mean()
    _assert_same_training(_train(_p(name), impl), base)


@pytest.mark.parametrize("remat", ["full", "dots"])
def test_remat_changes_memory_not_results(naive_runs: dict, remat: str) -> None:
    """Same losses and updates as without remat, and less temporary memory in the compiled step
    (measured, jax 0.10.2 CPU, llama-tiny batch 2 x 128: none 8.47 MB, dots 8.07 MB, full 8.07 MB)."""
    run = _train(_p("llama-tiny", remat=remat), "naive")
    _assert_same_training(run, naive_runs["llama-tiny"])
    base = naive_runs["llama-tiny"][2].compiled.memory_analysis()
    assert _p("llama-tiny").remat == "none"
    assert run[2].compiled.memory_analysis().temp_size_in_bytes < 0.97 * base.temp_size_in_bytes


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
    """Compile only (abstract arguments: no parameter is allocated). The whole-logits loss: cost_analysis
    counts a loop body once, and the chunked loss is a loop over chunks (hlo_cost counts trips)."""
    p = _p("gpt2-124m", seq_len=1024, loss_chunk=0)
    compiled, _, _ = train_case.program(p, "naive", False, "cpu").compile(donate=False)
    cfg = p.config()
    # The step multiplies by the padded vocabulary (50304): count that too, to compare like with like.
    padded = flops.train_step_flops(cfg.replace(vocab_size=cfg.padded_vocab), 2, 1024, causal=False)
    ratio = _xla_flops(compiled) / padded
    assert XLA_OVER_ANALYTIC[0] <= ratio <= 1.02, ratio  # a real-size model: elementwise work is < 2%
    assert p.flops() < padded  # the reported model FLOPs: causal, true vocabulary


# The scanned step against the unrolled one (same seed: the same weights, stacked): per-sequence losses
# at the initial weights and after one AdamW step, and the update. With remat inside the scanned body,
# and flash (a Pallas kernel under shard_map, interpreted) inside it.
@pytest.mark.parametrize("name,impl,remat", [("gpt2-tiny", "naive", "none"), ("llama-tiny", "naive", "full"),
                                             ("llama-tiny", "flash", "dots")])
def test_scan_layers_trains_like_the_unrolled_loop(naive_runs: dict, name: str, impl: str, remat: str) -> None:
    run = _train(_p(name, scan_layers=True, remat=remat), impl)
    assert model.is_stacked(run[2].state[0]["layers"])
    assert not model.is_stacked(naive_runs[name][2].state[0]["layers"])
    _assert_same_training(run, naive_runs[name])


def _hlo_dots(p: TrainParams) -> int:
    """Matmuls in the lowered step's StableHLO (what XLA then compiles)."""
    prog = train_case.program(p, "naive", False, "cpu")
    return jax.jit(prog.fn).trace(*prog.abstract_args).lower().as_text().count("stablehlo.dot_general")


def test_scanned_program_does_not_grow_with_depth() -> None:
    """Why scan: XLA gets one layer's program whatever the depth (an unrolled step gets every layer)."""
    dots = {(scan, n): _hlo_dots(_p("gpt2-tiny", num_layers=n, scan_layers=scan, remat="full"))
            for scan in (False, True) for n in (2, 4)}
    assert dots[True, 2] == dots[True, 4]
    assert dots[False, 4] > dots[False, 2] > dots[True, 2]


def test_scan_layout_stacks_the_per_layer_layout() -> None:
    cfg = mp.PRESETS["llama-tiny"].replace(num_layers=3)
    flat = lambda tree: dict(jax.tree_util.tree_flatten_with_path(tree, is_leaf=model.is_spec)[0])  # noqa: E731
    one, stacked = flat(model.layout(cfg)["layers"][0]), flat(model.layout(cfg, scan=True)["layers"])
    assert set(stacked) == set(one)
    for k, spec in stacked.items():
        assert spec.shape == (3, *one[k].shape) and spec.axes == (None, *one[k].axes) and spec.init == one[k].init
    arrays = flat(train_case.abstract_params(cfg, "float32", scan=True)["layers"])
    assert {k: x.shape for k, x in arrays.items()} == {k: s.shape for k, s in stacked.items()}


@pytest.mark.parametrize("mode", ["dp", "fsdp", "tp", "2d"])
def test_stacked_weights_shard_like_one_layer(mode: str) -> None:
    """The rule: each stacked weight's PartitionSpec is one layer's with a leading None (layer axis)."""
    from jax.sharding import PartitionSpec as P

    cfg = mp.PRESETS["llama-tiny"]
    mesh = sharding.make_mesh({"data": 1, "fsdp": 1, "tensor": 1})
    one = jax.tree_util.tree_flatten_with_path(sharding.param_shardings(cfg, mesh, mode)["layers"][0])[0]
    stacked = dict(jax.tree_util.tree_flatten_with_path(sharding.param_shardings(cfg, mesh, mode, True)["layers"])[0])
    assert len(one) == len(stacked)
    for path, s in one:
        assert stacked[path].spec == P(None, *s.spec), path
    assert (mode == "dp") == all(set(s.spec) <= {None} for _, s in one)


def test_program_builds_its_mesh_over_the_given_devices() -> None:
    """``devices`` (e.g. a TPU topology's compile-only devices) replaces jax.devices() for the mesh."""
    devs = jax.devices()
    prog = train_case.program(_p("gpt2-tiny", scan_layers=True), "naive", False, "cpu", devices=devs)
    assert list(prog.mesh.devices.flat) == devs[:1]
    assert prog.param_shardings["layers"]["wq"].mesh == prog.mesh
    with pytest.raises(ValueError, match="needs 2 devices but 1 are available"):
        sharding.make_mesh({"data": 2, "fsdp": 1, "tensor": 1}, devs)


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
