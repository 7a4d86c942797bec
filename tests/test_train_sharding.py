"""Each sharding mode really shards, and gives the same training steps as one device (8 virtual CPUs).

The checks run in one subprocess (tests/_train_sharding_worker.py) because the CPU device count is
fixed when jax initialises, and the other tests' jax has one device.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

# every test reads the report of one process that runs the sharded steps on 8 virtual devices
pytestmark = pytest.mark.slow

ROOT = Path(__file__).resolve().parent.parent
# float32 on CPU: reductions split over devices round differently (~1e-7 relative on the loss). The
# updates (final - initial weights after 3 AdamW steps) differ by ~1e-4 of their norm at most
# (measured: <= 3.1e-5, from a few near-zero gradients whose sign rounding decides); a wrong gradient
# anywhere gives ~1 (tests/test_train_model.py checks a wrong mask does).
LOSS_TOL = 1e-5
UPDATE_TOL = 1e-2
# bfloat16 against the float32 steps: the loss agrees to bf16 precision (8-bit mantissa, ln 512 ~ 6.2).
BF16_LOSS_TOL = 5e-2


@pytest.fixture(scope="module")
def report() -> dict:
    env = dict(os.environ)
    env["XLA_FLAGS"] = (env.get("XLA_FLAGS", "") + " --xla_force_host_platform_device_count=8").strip()
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, str(ROOT / "tests" / "_train_sharding_worker.py")], env=env,
                          capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)
    assert out["devices"] == 8
    return out


def _case(report: dict, model: str, mode: str, impl: str = "naive", dtype: str = "float32",
          scan: bool = False) -> dict:
    for c in report["cases"]:
        if (c["model"], c["mode"], c["impl"], c["dtype"], c["scan"]) == (model, mode, impl, dtype, scan):
            return c
    raise AssertionError(f"no case {model} {mode} {impl} {dtype} scan={scan} in the worker's report")


CASES = [("gpt2-tiny", "dp", "naive"), ("gpt2-tiny", "fsdp", "naive"), ("gpt2-tiny", "tp", "naive"),
         ("gpt2-tiny", "2d", "naive"), ("llama-tiny", "fsdp", "naive"), ("llama-tiny", "tp", "naive"),
         ("llama-tiny", "2d", "flash")]


@pytest.mark.parametrize("model,mode,impl", CASES)
def test_sharded_step_matches_one_device(report: dict, model: str, mode: str, impl: str) -> None:
    c = _case(report, model, mode, impl)
    assert len(c["losses"]) == len(c["base_losses"]) == 3
    for got, want in zip(c["losses"], c["base_losses"]):
        assert abs(got - want) <= LOSS_TOL, (c["mesh"], c["losses"], c["base_losses"])
    assert c["base_losses"][-1] < c["base_losses"][0]  # the steps train: same batch, falling loss
    assert c["update_rel_diff"] <= UPDATE_TOL, c["update_rel_diff"]
    assert c["param_max_diff"] < 0.1 * c["update_max"]  # no single weight went astray either


def test_bfloat16_sharded_step_trains(report: dict) -> None:
    c = _case(report, "gpt2-tiny", "2d", dtype="bfloat16")
    assert all(abs(a - b) <= BF16_LOSS_TOL for a, b in zip(c["losses"], c["base_losses"])), c["losses"]
    assert c["losses"][-1] < c["losses"][0]


def _paths_with_axis(model_name: str, axis: str) -> set[str]:
    """Parameter paths whose layout has the logical axis (xlabench.backends.jax.model.layout)."""
    import jax

    from xlabench.backends.jax import model
    from xlabench.workloads.model_presets import PRESETS

    flat = jax.tree_util.tree_flatten_with_path(model.layout(PRESETS[model_name]), is_leaf=model.is_spec)[0]
    return {jax.tree_util.keystr(k) for k, spec in flat if axis in spec.axes}


def _layout(c: dict, path: str) -> dict:
    return c["layouts"][path]


WQ, WO, EMBED, NORM = "['layers'][0]['wq']", "['layers'][0]['wo']", "['embed']", "['layers'][0]['attn_norm']['scale']"


def test_dp_replicates_every_parameter(report: dict) -> None:
    c = _case(report, "gpt2-tiny", "dp")
    assert all(v["shard"] == v["global"] for v in c["layouts"].values())


@pytest.mark.parametrize("model", ["gpt2-tiny", "llama-tiny"])
def test_fsdp_splits_model_dim_of_every_weight(report: dict, model: str) -> None:
    c = _case(report, model, "fsdp")
    fsdp = 8 if model == "gpt2-tiny" else 4
    wq = _layout(c, WQ)
    assert wq["shard"] == [wq["global"][0] // fsdp] + wq["global"][1:]
    assert _layout(c, WO)["shard"][2] == _layout(c, WO)["global"][2] // fsdp
    assert _layout(c, EMBED)["shard"][1] == _layout(c, EMBED)["global"][1] // fsdp
    mlp = "['layers'][0]['w_in']" if model == "gpt2-tiny" else "['layers'][0]['w_gate']"
    assert _layout(c, mlp)["shard"][0] == _layout(c, mlp)["global"][0] // fsdp
    assert _layout(c, NORM)["shard"] == _layout(c, NORM)["global"]  # vectors stay replicated
    sharded = {k for k, v in c["layouts"].items() if v["shard"] != v["global"]}
    assert sharded == _paths_with_axis(model, "embed")  # every weight with a model dim, nothing else


@pytest.mark.parametrize("model,tensor", [("gpt2-tiny", 4), ("llama-tiny", 2)])
def test_tp_splits_heads_mlp_and_vocab(report: dict, model: str, tensor: int) -> None:
    c = _case(report, model, "tp")
    assert _layout(c, WQ)["shard"][1] == _layout(c, WQ)["global"][1] // tensor
    assert _layout(c, "['layers'][0]['wk']")["shard"][1] == _layout(c, "['layers'][0]['wk']")["global"][1] // tensor
    assert _layout(c, WO)["shard"][0] == _layout(c, WO)["global"][0] // tensor
    assert _layout(c, EMBED)["shard"][0] == _layout(c, EMBED)["global"][0] // tensor
    down = "['layers'][0]['w_out']" if model == "gpt2-tiny" else "['layers'][0]['w_down']"
    assert _layout(c, down)["shard"] == [_layout(c, down)["global"][0] // tensor, _layout(c, down)["global"][1]]
    assert _layout(c, WQ)["shard"][0] == _layout(c, WQ)["global"][0]  # model dim whole
    sharded = {k for k, v in c["layouts"].items() if v["shard"] != v["global"]}
    assert sharded == _paths_with_axis(model, "heads") | _paths_with_axis(model, "mlp") | _paths_with_axis(model, "vocab")


@pytest.mark.parametrize("model,impl", [("gpt2-tiny", "naive"), ("llama-tiny", "flash")])
def test_2d_splits_over_fsdp_and_tensor(report: dict, model: str, impl: str) -> None:
    c = _case(report, model, "2d", impl)
    g = _layout(c, WQ)["global"]
    assert _layout(c, WQ)["shard"] == [g[0] // 4, g[1] // 2, g[2]]
    assert "fsdp" in _layout(c, WQ)["spec"] and "tensor" in _layout(c, WQ)["spec"]
    e = _layout(c, EMBED)["global"]
    assert _layout(c, EMBED)["shard"] == [e[0] // 2, e[1] // 4]


@pytest.mark.parametrize("model,mode,impl", [("gpt2-tiny", "fsdp", "naive"), ("llama-tiny", "2d", "flash")])
def test_scanned_sharded_step_matches_unrolled_one_device(report: dict, model: str, mode: str, impl: str) -> None:
    """Stacked layers under jax.lax.scan, sharded, against the unrolled loop on one device: the same
    per-sequence losses at the initial weights and after each AdamW step, and the same updates."""
    c = _case(report, model, mode, impl, scan=True)
    for got, want in zip(c["per_seq"], c["base_per_seq"], strict=True):
        assert max(abs(a - b) for a, b in zip(got, want, strict=True)) <= LOSS_TOL, (got, want)
    assert c["update_rel_diff"] <= UPDATE_TOL, c["update_rel_diff"]
    assert c["param_max_diff"] < 0.1 * c["update_max"]


def test_scanned_weights_shard_like_one_layer_with_the_layer_axis_whole(report: dict) -> None:
    from jax.sharding import PartitionSpec

    c = _case(report, "llama-tiny", "2d", "flash", scan=True)
    wq, one = c["layouts"]["['layers']['wq']"], _case(report, "llama-tiny", "2d", "flash")["layouts"][WQ]
    assert wq["global"] == [2, *one["global"]] and wq["shard"] == [2, *one["shard"]]
    # one layer's spec with the layer axis whole (compared past the class name: jax prints P(...) or PartitionSpec(...))
    assert wq["spec"].split("(", 1)[1] == str(PartitionSpec(None, "fsdp", "tensor", None)).split("(", 1)[1]
    fsdp = _case(report, "gpt2-tiny", "fsdp", scan=True)["layouts"]
    assert fsdp["['layers']['w_in']"]["shard"] == [2, 128 // 8, 512]
    assert fsdp["['layers']['attn_norm']['scale']"]["shard"] == [2, 128]  # vectors replicated
