"""Run one train case in JAX: sharded init, AOT-compiled AdamW step, timed steps, losses, checks."""

from __future__ import annotations

import functools
from pathlib import Path
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Callable

import jax
import jax.numpy as jnp
import numpy as np
import optax

from xlabench.backends.jax import attention_impls as impls
from xlabench.backends.jax import model, sharding
from xlabench.backends.jax import aot, hlo_cost
from xlabench.backends.jax.common import compile_timed, peak_memory, trace_pass
from xlabench.measure.phases import Phases
from xlabench.explain.categories import OPTIMIZER_SCOPE
from xlabench.impls import attention_rules as rules
from xlabench.impls.kernels import naive as naive_kernel
from xlabench.measure.timing import TimingPlan, time_calls, with_timer
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.units import GIB, MIB
from xlabench.workloads.attention import AttentionParams
from xlabench.workloads.model_presets import ModelConfig
from xlabench.workloads.train import (ADAMW, MESH_AXES, PARAM_SEED, TOKEN_SEED, TrainParams, largest_batch, make_tokens,
                                      train_result)

OPTIMIZER = optax.adamw(**ADAMW)
MeshKey = tuple[int, int, int]  # (data, fsdp, tensor) sizes
Devices = tuple[jax.Device, ...] | None  # devices of the mesh (None: jax.devices()); a tuple, to cache on


def _mesh_key(p: TrainParams) -> MeshKey:
    shape = p.mesh_shape()
    return tuple(shape[a] for a in MESH_AXES)  # type: ignore[return-value]


# The worker runs many cases of one model and mesh: cache what depends only on those (shardings, the
# jitted initialiser and reference), so a batch or impl sweep compiles them once.
@functools.lru_cache(maxsize=16)
def layouts(cfg: ModelConfig, mode: str, mesh_key: MeshKey, scan: bool = False, devices: Devices = None
            ) -> tuple[jax.sharding.Mesh, Any, Any, Any]:
    """(mesh, parameter shardings, optimizer-state shardings, token sharding), the mesh over ``devices``;
    ``scan``: the parameters in the stacked-layer layout."""
    mesh = sharding.make_mesh(dict(zip(MESH_AXES, mesh_key)), devices)
    p_shard = sharding.param_shardings(cfg, mesh, mode, scan)
    abstract = jax.eval_shape(OPTIMIZER.init, abstract_params(cfg, "float32", scan))
    o_shard = optax.tree_map_params(OPTIMIZER, lambda _, s: s, abstract, p_shard,
                                    transform_non_params=lambda _: sharding.replicated(mesh))
    return mesh, p_shard, o_shard, sharding.batch_sharding(mesh)


def abstract_params(cfg: ModelConfig, dtype: str, scan: bool = False) -> Any:
    return jax.eval_shape(lambda: model.init_params(cfg, jax.random.key(PARAM_SEED), jnp.dtype(dtype), scan))


@functools.lru_cache(maxsize=16)
def initializer(cfg: ModelConfig, dtype: str, mode: str, mesh_key: MeshKey,
                scan: bool = False) -> Callable[[], tuple[Any, Any]]:
    """Jitted () -> (params, opt_state), created sharded on the mesh (never whole on one device)."""
    _, p_shard, o_shard, _ = layouts(cfg, mode, mesh_key, scan)

    def init() -> tuple[Any, Any]:
        params = model.init_params(cfg, jax.random.key(PARAM_SEED), jnp.dtype(dtype), scan)
        return params, OPTIMIZER.init(params)

    return jax.jit(init, out_shardings=(p_shard, o_shard))


def attention_fn(impl: str, cfg: ModelConfig, p: TrainParams, mesh: jax.sharding.Mesh, interpret: bool,
                 platform: str, tune: TimingPlan | None = None, tuned: dict[str, Any] | None = None,
                 tune_batch: int | None = None, cached_for: str | None = None,
                 cache_dir: str | None = None) -> Callable:
    """The per-shard attention call for ``impl``; kernels without GQA get K/V heads repeated.

    With ``tune`` (a run's plan: tuning on) and no block sizes in the suite, the kernel's blocks are its
    search's winner for the step's per-shard attention shape (causal, fwd_bwd), from the tuning cache or
    searched now; ``tuned`` receives the row's tuning columns. ``tune_batch``: tune at this global batch's
    per-shard shape instead of the case's (global_batch auto: every probe of the batch search and the run
    itself use the blocks tuned at the smallest batch, so the memory the search measured is the run's).
    ``cached_for`` (compile-only: a device kind, no device to tune on): the blocks the tuning cache holds for
    that device kind and this per-shard shape, the run's blocks, where it has them; else the defaults.
    Raises CaseSkipped when the impl cannot run these (per-shard) shapes at all.
    """
    im = impls.get(impl)
    acfg = impls.AttnConfig(causal=True, sm_scale=impls.default_scale(cfg.head_dim), block_q=p.block_q,
                            block_k=p.block_k, interpret=interpret)
    shape = (p.batch(), p.seq_len, cfg.num_heads, cfg.head_dim)
    if sharding.per_shard(impl):  # the kernel sees one shard
        shape = sharding.local_shape(shape, tuple(sharding.heads_spec(p.sharding)), mesh)
    b, s, hq, d = shape
    hkv = hq * cfg.num_kv_heads // cfg.num_heads
    tb = b if tune_batch is None else max(1, b * tune_batch // p.batch())  # the per-shard batch tuned at

    def reason_for(kv_heads: int) -> str | None:  # the per-shard call as an attention case
        case = AttentionParams(batch=b, num_heads=hq, num_kv_heads=kv_heads, seq_len=s, head_dim=d, causal=True,
                               dtype=p.dtype, mode="fwd_bwd")
        return impls.skip_reason(im, case, acfg, platform)

    reason = reason_for(hkv)
    repeat = 1
    if reason and hkv != hq and not reason_for(hq):
        repeat = hq // hkv  # the kernel needs equal heads: give every query head its K/V copy
    elif reason:
        raise CaseSkipped(reason)
    if tune is not None and im.tune_space is not None:
        case = AttentionParams(batch=tb, num_heads=hq, num_kv_heads=hq if repeat > 1 else hkv, seq_len=s, head_dim=d,
                               causal=True, dtype=p.dtype, mode="fwd_bwd", block_q=p.block_q, block_k=p.block_k)
        acfg = _searched_blocks(case, impl, acfg, tune, platform, tuned,
                                "" if tb == b else f"; the blocks of global batch {tune_batch}, for global_batch auto")
    elif cached_for is not None and im.tune_space is not None and p.block_q is None and p.block_k is None:
        acfg = _cached_blocks(acfg, impl, cached_for, AttentionParams(
            batch=tb, num_heads=hq, num_kv_heads=hq if repeat > 1 else hkv, seq_len=s, head_dim=d, causal=True,
            dtype=p.dtype, mode="fwd_bwd"), tuned, cache_dir)

    def attend(q: jax.Array, k: jax.Array, v: jax.Array) -> jax.Array:
        if repeat > 1:
            k, v = jnp.repeat(k, repeat, axis=2), jnp.repeat(v, repeat, axis=2)
        return impls.attend(q, k, v, impl, acfg)

    return attend


def _searched_blocks(case: AttentionParams, impl: str, acfg: Any, tune: TimingPlan, platform: str,
                     tuned: dict[str, Any] | None, batch_note: str) -> Any:
    """``acfg`` at the search's winner for the per-shard attention ``case`` (from the tuning cache or searched
    now); ``tuned`` receives the row's tuning columns and a note of the shape tuned at (``batch_note``: at
    another global batch's, for global_batch auto)."""
    from xlabench.backends.jax.attention_case import tuned_config

    acfg, fields, note = tuned_config(case, impl, acfg, tune, platform)
    if tuned is not None:
        fields, said = rules.step_tuning(case, fields, note, batch_note)
        tuned.update(fields)
        tuned["notes"] = said
    return acfg


def _cached_blocks(acfg: Any, impl: str, device_kind: str, case: AttentionParams,
                   tuned: dict[str, Any] | None, cache_dir: str | None = None) -> Any:
    """``acfg`` at the blocks the tuning cache holds for ``case`` on ``device_kind`` (any jax/libtpu version:
    the newest), else the shipped tune table's entry (tune/table.py: exact bucket, else the nearest), saying in ``tuned['notes']`` which blocks the compile used and where they came from."""
    from xlabench import tune
    from xlabench.tune.space import blocks_text
    from xlabench.tune.store import CACHE, TABLE, TuneKey, TuneStore
    from xlabench.workloads.attention import tune_key_fields

    folder = Path(cache_dir) if cache_dir else tune.default_dir()
    found = TuneStore(folder).latest(TuneKey.of(device_kind, "jax", impl, tune_key_fields(case)))
    shape, blocks = rules.shape_text(case), found.blocks
    if found.layer == TABLE:
        acfg = acfg.with_blocks(blocks)
        note = (f"attention at the blocks the shipped tune table holds for its per-shard shape {shape} (fwd_bwd) "
                f"on {device_kind}: {blocks_text(blocks)} ({found.hit.note()}; unverified: no chip here)")
    elif found.layer == CACHE:
        entry = found.cached.entry
        acfg = acfg.with_blocks(blocks)
        note = (f"attention at the tuned blocks the cache holds for its per-shard shape {shape} (fwd_bwd) on "
                f"{device_kind}: {blocks_text(blocks)} (searched {entry.get('created', '?')}, "
                f"jax {dict(entry['key'].get('versions', {})).get('jax', '?')})")
    else:
        note = (f"attention at the kernel's default blocks: the tuning cache ({folder}) holds no winner "
                f"for its per-shard shape {shape} (fwd_bwd) on {device_kind}; a run on the chip tunes it")
    if tuned is not None:
        tuned["notes"] = note
    return acfg


@dataclass
class StepProgram:
    """The train step as a function with its shardings, before any array exists (compile-only use)."""

    params: TrainParams
    mesh: jax.sharding.Mesh
    fn: Callable  # (params, opt_state, tokens) -> (params, opt_state, loss, per-sequence loss)
    param_shardings: Any
    opt_shardings: Any
    token_sharding: Any
    interpret: bool
    forward: Callable  # (params, tokens) -> loss: the step's forward alone (the roofline's scan check)

    @property
    def abstract_args(self) -> tuple[Any, Any, Any]:
        """ShapeDtypeStructs of (params, opt_state, tokens)."""
        p = self.params
        params = abstract_params(p.config(), p.dtype, p.scan())
        tokens = jax.ShapeDtypeStruct((p.batch(), p.seq_len + 1), jnp.int32)
        return params, jax.eval_shape(OPTIMIZER.init, params), tokens

    def interpret_ctx(self) -> Any:
        """Interpret mode is fixed at trace time: trace, compile and call inside this context."""
        return impls.tpu_interpret(impls.AttnConfig(True, 1.0, interpret=self.interpret))

    def compile_forward(self) -> Any:
        """The forward alone, compiled with the step's input shardings."""
        params, _, tokens = self.abstract_args
        fwd = jax.jit(self.forward, in_shardings=(self.param_shardings, self.token_sharding),
                      out_shardings=sharding.replicated(self.mesh))
        with self.interpret_ctx():
            return fwd.lower(params, tokens).compile()

    def jit_kwargs(self, donate: bool) -> dict[str, Any]:
        """The step's jax.jit arguments: shardings in and out, parameters and optimizer state donated
        (updated in place) when ``donate``."""
        rep = sharding.replicated(self.mesh)
        return dict(in_shardings=(self.param_shardings, self.opt_shardings, self.token_sharding),
                    out_shardings=(self.param_shardings, self.opt_shardings, rep, rep),
                    donate_argnums=(0, 1) if donate else ())

    def compile(self, donate: bool) -> tuple[Any, float, float]:
        with self.interpret_ctx():
            return compile_timed(self.fn, self.abstract_args, **self.jit_kwargs(donate))

    def peak_bytes(self, donate: bool, device: Any = None) -> int | None:
        """Per-device bytes of the compiled step (XLA memory_analysis), compiled and never run; for a
        program XLA refuses for want of memory, the figure it gave (None: it gave none)."""
        try:
            with self.interpret_ctx():
                compiled, _, _ = aot.lower_and_compile(self.fn, self.abstract_args, device, **self.jit_kwargs(donate))
        except aot.CompileOom as oom:
            return oom.used or None
        return peak_memory(compiled, device)[0]


def program(p: TrainParams, impl: str, interpret: bool, platform: str,
            devices: Sequence[jax.Device] | None = None, tune: TimingPlan | None = None,
            tuned: dict[str, Any] | None = None, tune_batch: int | None = None,
            cached_for: str | None = None, cache_dir: str | None = None) -> StepProgram:
    """Mesh, shardings and the step function of a case (raises CaseSkipped where it cannot run).

    ``devices``: what the mesh spans (default: this process's jax.devices()); pass a TPU topology's
    compile-only devices to compile the step ahead of time for hardware that is not attached;
    ``cache_dir``: with ``cached_for``, the tuning cache folder the case plan names (default: the user's).
    """
    if p.sharding == "auto":
        raise CaseSkipped(sharding.AUTO_REASON)
    cfg = p.config()
    mesh, p_shard, o_shard, tok_shard = layouts(cfg, p.sharding, _mesh_key(p), p.scan(),
                                                None if devices is None else tuple(devices))
    hooks = sharding.hooks(mesh, p.sharding, attention_fn(impl, cfg, p, mesh, interpret, platform, tune, tuned,
                                                          tune_batch, cached_for, cache_dir), impl)

    def step(params, opt_state, tokens):
        (loss, per_seq), grads = jax.value_and_grad(
            lambda w: model.loss(w, tokens, cfg, hooks, p.remat, p.loss_chunk, grad_in_forward=True),
            has_aux=True)(params)
        with jax.named_scope(OPTIMIZER_SCOPE):  # the update's ops carry it in their metadata (xlabench explain)
            updates, opt_state = OPTIMIZER.update(grads, opt_state, params)
            params = optax.apply_updates(params, updates)
        return params, opt_state, loss, per_seq

    def forward(params, tokens):
        return model.loss(params, tokens, cfg, hooks, p.remat, p.loss_chunk)[0]

    return StepProgram(p, mesh, step, p_shard, o_shard, tok_shard, interpret, forward)


@dataclass
class TrainSetup:
    """A compiled step with its state on the mesh (reused by tests)."""

    prog: StepProgram
    compiled: Any
    state: tuple[Any, Any]  # (params, opt_state)
    tokens: jax.Array
    lower_s: float
    compile_s: float

    def step(self) -> tuple[jax.Array, jax.Array]:
        params, opt_state, loss, per_seq = self.compiled(*self.state, self.tokens)
        self.state = (params, opt_state)
        return loss, per_seq


def build(p: TrainParams, impl: str, interpret: bool, platform: str, tune: TimingPlan | None = None,
          tuned: dict[str, Any] | None = None, tune_batch: int | None = None) -> TrainSetup:
    """The case's program compiled, with parameters, optimizer state and tokens placed on the mesh (its
    attention tuned as ``tune`` and ``tune_batch`` say: see attention_fn)."""
    prog = program(p, impl, interpret, platform, tune=tune, tuned=tuned, tune_batch=tune_batch)
    state = initializer(p.config(), p.dtype, p.sharding, _mesh_key(p), p.scan())()
    tokens = jax.device_put(make_tokens(p, TOKEN_SEED), prog.token_sharding)
    compiled, lower_s, compile_s = prog.compile(donate=platform != "cpu")  # CPU cannot donate buffers
    return TrainSetup(prog, compiled, state, tokens, lower_s, compile_s)


@functools.lru_cache(maxsize=16)
def _reference_fn(cfg: ModelConfig, mode: str, mesh_key: MeshKey, scan: bool) -> Callable:
    mesh = layouts(cfg, mode, mesh_key, scan)[0]
    naive = functools.partial(impls.attend, impl=naive_kernel.NAME,
                              cfg=impls.AttnConfig(causal=True, sm_scale=impls.default_scale(cfg.head_dim)))
    hooks = sharding.hooks(mesh, mode, naive, naive_kernel.NAME)

    def fwd(params, tokens):
        f32 = jax.tree.map(lambda w: w.astype(jnp.float32), params)
        return model.loss(f32, tokens, cfg, hooks)[1]

    return jax.jit(fwd, out_shardings=sharding.replicated(mesh))


def reference_losses(setup: TrainSetup) -> np.ndarray:
    """Per-sequence loss at the current parameters in float32 with naive attention (HIGHEST matmul
    precision, same mesh), on the first data x fsdp sequences (one per batch shard, to stay cheap)."""
    p, mesh = setup.prog.params, setup.prog.mesh
    n = mesh.shape["data"] * mesh.shape["fsdp"]
    tokens = jax.device_put(setup.tokens[:n], setup.prog.token_sharding)
    with jax.default_matmul_precision("highest"):
        return np.asarray(_reference_fn(p.config(), p.sharding, _mesh_key(p), p.scan())(setup.state[0], tokens))


def resolve_batch(p: TrainParams, impl: str, interpret: bool, platform: str, limit: int | None,
                  devices: Sequence[jax.Device] | None = None, donate: bool = True,
                  need: Callable[[TrainParams], int | None] | None = None,
                  tune: TimingPlan | None = None) -> tuple[TrainParams, str]:
    """``p`` with ``global_batch: auto`` replaced by the largest batch whose step fits ``limit`` bytes per
    device (p.memory_limit_gib when given), found by compiling the step (never running it); and a note
    saying so. CaseSkipped when no limit is known or not even the smallest batch fits. ``need(params)``:
    the per-device bytes of the step at a batch (default: program(...).peak_bytes), for a caller that
    keeps what each probe compiled). ``tune``: the run's plan: every probe's attention runs at the blocks
    the run will (tuned at the smallest batch, ``tune_batch``), so its memory is the run's."""
    if not p.auto_batch:
        return p, ""
    if p.memory_limit_gib is not None:
        limit = int(p.memory_limit_gib * GIB)
    if not limit:
        raise CaseSkipped(f"global_batch auto needs a memory limit: this {platform} device reports none; "
                          "set memory_limit_gib")
    device = None if devices is None else devices[0]
    if need is None:
        need = lambda q: program(q, impl, interpret, platform, devices, tune=tune,  # noqa: E731
                                 tune_batch=p.batch_step()).peak_bytes(donate, device)
    batch, seen = largest_batch(lambda b: need(p.with_batch(b)), limit, p.batch_step())
    unit, size = ("GiB", GIB) if limit >= GIB else ("MiB", MIB)  # a small budget's figures differ in MiB
    probes = ", ".join(f"{b}: {'?' if v is None else f'{v / size:.2f}'}" for b, v in sorted(seen.items()))
    if not batch:
        raise CaseSkipped(f"global_batch auto: not even batch {p.batch_step()} fits {limit / size:.2f} {unit} per "
                          f"device ({unit} by batch: {probes})")
    return p.with_batch(batch), (f"global_batch auto: {batch}, the largest multiple of {p.batch_step()} whose step "
                                 f"fits {limit / size:.2f} {unit} per device (compile-only {unit} by batch: {probes})")


def device_limit(device: Any) -> int | None:
    """The bytes a device lets a program use (TPU, GPU: bytes_limit), None where it reports none (CPU)."""
    try:
        return (device.memory_stats() or {}).get("bytes_limit")
    except Exception:
        return None


def run_train_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    p = TrainParams(**params)
    donate = platform != "cpu"  # CPU cannot donate buffers
    auto = p.auto_batch
    tune_batch = p.batch_step() if auto else None  # auto: the blocks every probe of the search compiled with
    phase = Phases()
    with phase("batch"):  # an auto batch: the largest that fits, found by compiling (else nothing)
        p, batch_note = resolve_batch(p, impl, interpret, platform, device_limit(jax.devices()[0]), donate=donate,
                                      tune=plan)
    tuned: dict[str, Any] = {}
    with phase("compile"):  # the attention's blocks (tuned or from the table), the state, the step compiled
        setup = build(p, impl, interpret, platform, tune=plan, tuned=tuned, tune_batch=tune_batch)
    tune_note = tuned.pop("notes", "")
    with phase("reference"):
        ref = reference_losses(setup)
    device = next(d for d in setup.prog.mesh.devices.flat if d.process_index == jax.process_index())
    outs: list[tuple[jax.Array, jax.Array]] = []
    n = p.steps_per_sample

    def call() -> tuple[Any, Any]:
        # A training loop's dispatch: n steps queued back to back (each takes the last one's state, still
        # on the device), then one sync on the losses and the final state (every update inside the sample).
        for _ in range(n):
            outs.append(setup.step())
        return outs[-n:], setup.state

    with setup.prog.interpret_ctx(), phase("timing"):
        loops, _ = time_calls(call, jax.block_until_ready, plan)
        # The trace pass's steps are not timed steps: their losses are not the row's. Device seconds are
        # per step, whatever the host does between steps.
        traced = trace_pass(setup.compiled, lambda: (setup.step(), setup.state), plan, len(loops))
    samples = [t / n for t in loops]  # a sample: one loop's mean step time
    with phase("xla figures"):
        mem, mem_note = peak_memory(setup.compiled, device)
        xla, xla_notes = hlo_cost.xla_figures(setup.compiled, p.devices)
    result = train_result(p, samples, plan, setup.lower_s, setup.compile_s, mem,
                          [float(loss) for loss, _ in outs], plan.warmup * n, np.asarray(outs[0][1])[: len(ref)],
                          ref, [mem_note, *xla_notes, f"step time: {n} steps dispatched per sample, one sync, "
                                                      f"sample = loop time / {n}"], [batch_note] if batch_note else [])
    found = {"global_batch": p.batch(), "max_batch": p.batch()} if batch_note else {}
    if tune_note:
        result = result.replace(notes="; ".join(filter(None, [result.notes, tune_note])))
    phase.log(f"{impl} {p.model} batch={p.batch()} scan={p.scan()}")
    result = result.replace(metrics={**result.metrics, **xla, **found, **tuned}, phase_s=phase.rounded())
    return with_timer(result, plan, traced)
