"""Device mesh and shardings of the train step, per sharding mode.

Mesh axes are always (data, fsdp, tensor), size 1 where a mode does not use one. The batch is split
over data x fsdp. Parameters follow their logical axes (model.layout) through RULES (workloads.model_layout):

* ``dp``:   every parameter replicated;
* ``fsdp``: the model dimension of every weight split over ``fsdp`` (optimizer state alike);
* ``tp``:   Megatron tensor parallelism: heads, MLP hidden and vocabulary split over ``tensor``;
* ``2d``:   fsdp x tensor, both of the above.

XLA's SPMD partitioner splits plain ops; Pallas kernels are custom calls it cannot split, so those
run per shard through ``jax.shard_map`` (attention is independent per sequence and per head).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Callable

import jax
from jax.sharding import NamedSharding, PartitionSpec as P

from xlabench import impls as catalog
from xlabench.impls import kernels
from xlabench.backends.jax import model
from xlabench.workloads.model_layout import BATCH_AXES, RULES, mesh_axis  # noqa: F401 (RULES re-exported)
from xlabench.workloads.train import JAX_AUTO_REASON, MESH_AXES



def per_shard(impl: str) -> bool:
    """Whether the train step calls ``impl`` under shard_map: a built-in whose kernel record says so (a Pallas
    custom call XLA cannot partition: ``Kernel.per_shard``), and every user impl (it may be a Pallas kernel;
    attention is independent per sequence and head, so per shard is exact)."""
    if catalog.is_user(impl):
        return True
    k = kernels.kernel("jax", impl, paged_family=False)
    return k is not None and k.per_shard

AUTO_REASON = JAX_AUTO_REASON  # declared beside the modes: the dry run predicts this skip


def make_mesh(shape: dict[str, int], devices: Sequence[jax.Device] | None = None) -> jax.sharding.Mesh:
    """A (data, fsdp, tensor) mesh over the first prod(shape) of ``devices`` (default: jax.devices()).

    ``devices`` lets a caller build the mesh over devices this process does not run on, e.g. the
    compile-only devices of a TPU topology (jax.experimental.topologies) for ahead-of-time compiles.
    """
    n = shape["data"] * shape["fsdp"] * shape["tensor"]
    devices = list(jax.devices() if devices is None else devices)
    if len(devices) < n:
        raise ValueError(f"mesh {shape} needs {n} devices but {len(devices)} are available "
                         f"({devices[0].platform}); set devices to at most {len(devices)}")
    return jax.make_mesh(tuple(shape[a] for a in MESH_AXES), MESH_AXES,
                         axis_types=(jax.sharding.AxisType.Auto,) * len(MESH_AXES), devices=devices[:n])


def param_shardings(cfg: Any, mesh: jax.sharding.Mesh, mode: str, scan: bool = False) -> Any:
    """NamedSharding per parameter, same tree as model.layout(cfg, scan). Stacked layer weights shard
    like one layer's, their leading layer axis unsharded (None in the PartitionSpec)."""
    return jax.tree.map(lambda s: NamedSharding(mesh, P(*(mesh_axis(mode, a) for a in s.axes))),
                        model.layout(cfg, scan), is_leaf=model.is_spec)


def batch_sharding(mesh: jax.sharding.Mesh) -> NamedSharding:
    return NamedSharding(mesh, P(BATCH_AXES, None))


def replicated(mesh: jax.sharding.Mesh) -> NamedSharding:
    return NamedSharding(mesh, P())


def local_shape(global_shape: tuple[int, ...], spec_axes: tuple[Any, ...], mesh: jax.sharding.Mesh) -> tuple[int, ...]:
    """Per-shard shape of an array laid out by ``spec_axes`` (mesh axis name, tuple of names or None)."""
    out = []
    for n, ax in zip(global_shape, spec_axes):
        names = ax if isinstance(ax, tuple) else (ax,) if ax else ()
        div = 1
        for name in names:
            div *= mesh.shape[name]
        out.append(n // div)
    return tuple(out)


def heads_spec(mode: str) -> P:
    return P(BATCH_AXES, None, mesh_axis(mode, model.HEADS), None)


def hooks(mesh: jax.sharding.Mesh, mode: str, attention: Callable, impl: str) -> model.Hooks:
    """Sharding constraints on activations plus the attention call (under shard_map for Pallas impls)."""

    def constrain(spec: P) -> Callable[[jax.Array], jax.Array]:
        sharding = NamedSharding(mesh, spec)
        return lambda x: jax.lax.with_sharding_constraint(x, sharding)

    hspec = heads_spec(mode)
    attend = attention
    if per_shard(impl):
        attend = jax.shard_map(attention, mesh=mesh, in_specs=(hspec, hspec, hspec), out_specs=hspec,
                               check_vma=False)
    return model.Hooks(
        attention=attend,
        act=constrain(P(BATCH_AXES, None, None)),
        heads=constrain(hspec),
        mlp=constrain(P(BATCH_AXES, None, mesh_axis(mode, model.MLP))),
        logits=constrain(P(BATCH_AXES, None, mesh_axis(mode, model.VOCAB))),
    )
