"""Run one train case in torch_xla: the JAX backend's model, presets, FLOPs and tokens, AdamW, torch_xla
SPMD sharding, timed steps, losses, check against a float32 naive reference.

The worker is an SPMD worker (``xr.use_spmd()``, or ``use_spmd(auto=True)`` for ``auto``; the runner
starts one per mode, see ``xlabench.run.envs.worker_variant``). Sharding modes, over a (data, fsdp, tensor)
mesh of ``devices`` virtual devices:

* ``dp``: parameters replicated, the batch split over data;
* ``fsdp``: FSDPv2 (``SpmdFullyShardedDataParallel``: every parameter's first dimension over fsdp, and
  data too when the mesh has one);
* ``tp`` / ``2d``: ``xs.mark_sharding`` per weight by the logical-axis rules both backends share
  (workloads.model_layout.RULES: heads, MLP, vocabulary over tensor; 2d adds the model dimension over fsdp);
* ``auto``: XLA's auto-sharding chooses (nothing is marked).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np
import torch

from xlabench import impls as catalog
from xlabench.impls import kernels
from xlabench.backends import user_impl
from xlabench.backends.torch_xla import attention_impls as attn
from xlabench.backends.torch_xla.attention_case import TORCH_DTYPES, _highest_precision, ref_device
from xlabench.backends.torch_xla.common import measure, peak_memory, with_device_times, xla_device
from xlabench.backends.torch_shared.model import Transformer, checkpoint_layers, logical_axes, unsupported_step
from xlabench.backends.torch_shared.model import reference_losses as shared_reference_losses
from xlabench.measure.phases import Phases
from xlabench.measure.timing import TimingPlan
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped
from xlabench.workloads.attention import AttentionParams
from xlabench.workloads.model_layout import BATCH_AXES, mesh_axis
from xlabench.workloads.model_presets import ModelConfig
from xlabench.workloads.train import ADAMW, MESH_AXES, PARAM_SEED, TOKEN_SEED, TrainParams, make_tokens, train_result

# Steps that compile: the first creates AdamW's state (a different graph from every later step).
COMPILING_STEPS = 2


def make_mesh(p: TrainParams):
    import torch_xla.distributed.spmd as xs
    import torch_xla.runtime as xr

    shape = p.mesh_shape()
    n = p.devices
    if xr.global_runtime_device_count() != n:  # a torch_xla SPMD mesh spans every device of the process
        raise ValueError(f"mesh {shape} spans {n} devices but torch_xla sees {xr.global_runtime_device_count()}; "
                         f"an SPMD mesh must use them all: set devices to {xr.global_runtime_device_count()}")
    return xs.Mesh(np.arange(n), tuple(shape[a] for a in MESH_AXES), MESH_AXES)


def attention_fn(impl: str, cfg: ModelConfig, p: TrainParams, mesh: Any, interpret: bool,
                 platform: str) -> Callable:
    """[B,S,H,D] attention for the model; kernels without GQA get K/V heads repeated."""
    user = catalog.is_user(impl)
    k = kernels.kernel("torch_xla", impl, paged_family=False)
    if not user and (k is None or not k.trains):
        trains = [k.info.name for k in kernels.KERNELS if k.key[0] == "torch_xla" and not k.paged and k.trains]
        raise CaseSkipped(f"torch_xla train runs attention impls {', '.join(trains)}; not {impl!r}")
    acfg = attn.AttnConfig(causal=True, sm_scale=attn.default_scale(cfg.head_dim), interpret=interpret)
    if user:
        _check_user(attn.get(impl), cfg, p, acfg, platform)
    if k is not None and k.per_shard:  # a custom call SPMD cannot partition: its per-shard form, given the mesh
        return catalog.resolve(k.sharded)(acfg, p, mesh, cfg.num_heads // cfg.num_kv_heads, platform)
    im = attn.get(impl)

    def attend(q, k, v):
        out = im.fn(attn.to_layout(q, im.layout), attn.to_layout(k, im.layout), attn.to_layout(v, im.layout), acfg)
        return attn.to_layout(out, im.layout)

    return attend


def _check_user(im: attn.TorchAttentionImpl, cfg: ModelConfig, p: TrainParams, acfg: attn.AttnConfig,
                platform: str) -> None:
    """A user impl in the step: whole arrays (torch_xla's SPMD partitions its torch ops), so a JAX
    kernel spliced in by call_jax (an opaque call) runs unsharded only; its own rule on the step's shapes."""
    if im.framework == "jax" and p.devices > 1:
        raise CaseSkipped(f"{im.name}: a JAX kernel through call_jax is not partitioned by torch_xla's SPMD; "
                          "its train rows need devices: 1")
    case = AttentionParams(batch=p.global_batch, num_heads=cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                           seq_len=p.seq_len, head_dim=cfg.head_dim, causal=True, dtype=p.dtype, mode="fwd_bwd")
    reason = user_impl.skip_reason(im, case, acfg, platform)
    if reason:
        raise CaseSkipped(reason)


def shard(model: Transformer, p: TrainParams, mesh: Any) -> torch.nn.Module:
    """Lay the (device-resident) model out on the mesh for the case's sharding mode."""
    import torch_xla.distributed.spmd as xs

    if p.sharding == "auto":
        return model
    if p.sharding == "fsdp":
        from torch_xla.experimental.spmd_fully_sharded_data_parallel import SpmdFullyShardedDataParallel

        data = "data" if mesh.shape()["data"] > 1 else None
        out_spec = (BATCH_AXES,) if data else ("fsdp",)
        return SpmdFullyShardedDataParallel(model, mesh=mesh, extra_data_axis=data,
                                            shard_output=lambda out, m: xs.mark_sharding(out, m, out_spec))
    for name, axes in logical_axes(p.config()).items():
        xs.mark_sharding(model.w[name], mesh, tuple(mesh_axis(p.sharding, a) for a in axes))
    return model


def reference_losses(model: Transformer, tokens: np.ndarray, device: torch.device) -> np.ndarray:
    """torch_shared.model.reference_losses at the highest matmul precision of an XLA device."""
    with _highest_precision(device):
        return shared_reference_losses(model, tokens, device)


def run_train_case(params: dict[str, Any], impl: str, plan: TimingPlan, interpret: bool,
                   platform: str) -> CaseResult:
    import torch_xla.distributed.spmd as xs

    p = TrainParams(**params)
    cfg = p.config()
    if why := unsupported_step(p, "torch_xla"):
        raise CaseSkipped(why)
    phase = Phases()
    with phase("build"):
        mesh = make_mesh(p)
        model = Transformer(cfg, TORCH_DTYPES[p.dtype], PARAM_SEED,
                            attention_fn(impl, cfg, p, mesh, interpret, platform))
        tokens_np = make_tokens(p, TOKEN_SEED)
    n_ref = p.mesh_shape()["data"] * p.mesh_shape()["fsdp"]  # one sequence per batch shard, as in JAX
    with phase("reference"):
        ref = reference_losses(model, tokens_np[:n_ref], ref_device(platform))

    device = xla_device()
    with phase("build"):  # the model on the device, sharded
        step_model = shard(model.to(device), p, mesh)
        if p.remat == "full":
            from torch_xla.utils.checkpoint import checkpoint

            checkpoint_layers(model, checkpoint)
        tokens = torch.from_numpy(tokens_np).to(device)
        if p.sharding != "auto":
            xs.mark_sharding(tokens, mesh, (BATCH_AXES, None))
    opt = torch.optim.AdamW(step_model.parameters(), lr=ADAMW["learning_rate"], betas=(ADAMW["b1"], ADAMW["b2"]),
                            eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
    outs: list[tuple[torch.Tensor, torch.Tensor]] = []

    def call() -> tuple[torch.Tensor, torch.Tensor]:
        per_seq = step_model(tokens)
        loss = per_seq.mean()
        loss.backward()
        opt.step()
        opt.zero_grad(set_to_none=True)
        outs.append((loss.detach(), per_seq.detach()))
        return outs[-1]

    m = measure(call, plan, compiling_calls=COMPILING_STEPS, phase=phase)
    mem, mem_note = peak_memory(device)
    remarks = []
    if p.loss_chunk:
        remarks.append("loss_chunk: the torch_xla step takes the whole float32 logits (the chunked "
                       "cross-entropy is the JAX step's)")
    if p.scan():
        remarks.append("scan_layers: torch_xla loops over layers in Python (per-layer weights, as with "
                       "scan_layers=false: the same model and losses); only the JAX step scans")
    # timed: the steps after the compiling ones and the warm-up
    result = train_result(p, m.samples, plan, None, m.compile_s, mem, [float(loss) for loss, _ in outs],
                          COMPILING_STEPS + plan.warmup, outs[0][1].cpu().numpy()[:n_ref], ref,
                          m.notes() + [mem_note], remarks)
    phase.log(f"{impl} {p.model} batch={p.batch()} scan={p.scan()}")
    return with_device_times(result.replace(phase_s=phase.rounded()), plan, m)
