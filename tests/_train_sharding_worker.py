"""Sharded-vs-unsharded train steps, run as a script in its own process with 8 virtual CPU devices.

tests/test_train_sharding.py starts it with XLA_FLAGS=--xla_force_host_platform_device_count=8 (the
device count is fixed when jax initialises, so it cannot share a process with the other tests) and
reads one JSON object from stdout: per case, the losses and parameters after a few AdamW steps
compared with the same steps on one device, and the compiled step's parameter shardings.
"""

from __future__ import annotations

import json
import sys

import jax
import numpy as np

from _train_compare import unstack_layers, update_rel_diff

from xlabench.backends.jax import model as model_lib
from xlabench.backends.jax import sharding, train_case
from xlabench.workloads.train import TrainParams

STEPS = 3
# (model, sharding mode, mesh, impl[, dtype[, scan_layers]]): every mode on GPT-2; LLaMA (GQA) where K/V
# heads are split over tensor; the Pallas flash kernel under shard_map with GQA repeat; one bfloat16
# step; the scanned layers (stacked weights) under fsdp and 2d, flash inside the scanned body.
CASES = [
    ("gpt2-tiny", "dp", "data=8", "naive"),
    ("gpt2-tiny", "fsdp", "fsdp=8", "naive"),
    ("gpt2-tiny", "tp", "data=2,tensor=4", "naive"),
    ("gpt2-tiny", "2d", "fsdp=4,tensor=2", "naive"),
    ("llama-tiny", "fsdp", "data=2,fsdp=4", "naive"),
    ("llama-tiny", "tp", "data=4,tensor=2", "naive"),
    ("llama-tiny", "2d", "fsdp=4,tensor=2", "flash"),
    ("gpt2-tiny", "2d", "fsdp=4,tensor=2", "naive", "bfloat16"),
    ("gpt2-tiny", "fsdp", "fsdp=8", "naive", "float32", True),
    ("llama-tiny", "2d", "fsdp=4,tensor=2", "flash", "float32", True),
]


def _per_layer(params: dict) -> dict:
    """The parameters in the per-layer layout (stacked layers split), to compare with unrolled runs."""
    if model_lib.is_stacked(params["layers"]):
        return {**params, "layers": unstack_layers(params["layers"])}
    return params


def run(model: str, mode: str, mesh: str, impl: str, dtype: str = "float32", scan: bool = False
        ) -> tuple[list[float], list[np.ndarray], dict, list[list[float]]]:
    """Losses of STEPS steps, parameter updates (final - initial, float32, per-layer layout), the
    compiled layouts and the per-sequence losses of every step."""
    devices = 1
    for part in mesh.split(","):
        devices *= int(part.split("=")[1])
    # loss_chunk 32: the cross-entropy in 4 chunks of the sequence, under every sharding (tp: vocabulary split)
    p = TrainParams(model=model, global_batch=8, seq_len=128, dtype=dtype, sharding=mode, mesh=mesh,
                    devices=devices, scan_layers=scan, loss_chunk=32)
    setup = train_case.build(p, impl, sharding.per_shard(impl), "cpu")
    init = [np.asarray(v, np.float32) for v in jax.tree.leaves(_per_layer(setup.state[0]))]
    with setup.prog.interpret_ctx():
        outs = [setup.step() for _ in range(STEPS)]
    losses = [float(loss) for loss, _ in outs]
    per_seq = [np.asarray(s, np.float32).tolist() for _, s in outs]
    updates = [np.asarray(v, np.float32) - i for v, i in zip(jax.tree.leaves(_per_layer(setup.state[0])), init)]
    flat, _ = jax.tree_util.tree_flatten_with_path(setup.state[0])
    in_params = setup.compiled.input_shardings[0][0]
    layouts = {}
    for (k, s), (_, v) in zip(jax.tree_util.tree_flatten_with_path(in_params)[0], flat):
        layouts[jax.tree_util.keystr(k)] = {"spec": str(s.spec), "global": list(v.shape),
                                            "shard": list(s.shard_shape(v.shape))}
    return losses, updates, layouts, per_seq


def main() -> None:
    out: dict = {"devices": len(jax.devices()), "cases": []}
    base: dict = {}
    for model, mode, mesh, impl, *rest in CASES:
        if model not in base:
            base[model] = run(model, "dp", "data=1", "naive")
        losses, updates, layouts, per_seq = run(model, mode, mesh, impl, *rest)
        b_losses, b_updates, _, b_per_seq = base[model]
        diffs = [np.abs(u - b) for u, b in zip(updates, b_updates)]
        out["cases"].append({
            "model": model, "mode": mode, "mesh": mesh, "impl": impl, "dtype": (rest or ["float32"])[0],
            "scan": bool(rest[1:] and rest[1]), "losses": losses, "base_losses": b_losses,
            "per_seq": per_seq, "base_per_seq": b_per_seq,
            "update_rel_diff": update_rel_diff(updates, b_updates),
            "param_max_diff": max(float(d.max()) for d in diffs),
            "update_max": max(float(np.abs(b).max()) for b in b_updates),
            "layouts": layouts,
        })
    json.dump(out, sys.stdout)


if __name__ == "__main__":
    main()
