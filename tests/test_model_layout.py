"""The train model's framework-free data (workloads.model_layout), shared by both backends."""

from __future__ import annotations

import pytest

import re
import subprocess
import sys
from pathlib import Path

from xlabench.workloads import model_layout as ml
from xlabench.workloads.model_presets import PRESETS

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # starts a process
def test_model_data_imports_no_framework():
    code = ("import sys, xlabench.workloads.model_layout, xlabench.workloads.train; "
            "print(sorted(m for m in ('jax', 'torch', 'torch_xla') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT)
    assert out.stdout.strip() == "[]"


def test_torch_xla_takes_model_data_from_workloads_not_from_the_jax_backend():
    """torch_xla may run JAX kernels (jax_kernels, *_impls), never take model data from backends.jax."""
    for path in (ROOT / "xlabench" / "backends" / "torch_xla").glob("*.py"):
        text = path.read_text()
        assert not re.search(r"backends\.jax(\.| import )(model|sharding|train_case)\b", text), path.name


def test_scan_layout_stacks_every_spec_of_one_layer():
    cfg = PRESETS["llama-tiny"]
    one = dict(ml.flat_layout(cfg))
    stacked = ml.layout(cfg, scan=True)["layers"]
    assert stacked["wq"] == ml.ParamSpec((cfg.num_layers, *one["layers.0.wq"].shape),
                                         (None, *one["layers.0.wq"].axes), "normal")
    assert stacked["attn_norm"]["scale"].axes == (None, None)


def test_rules_map_only_known_logical_axes_to_mesh_axes():
    for mode, rules in ml.RULES.items():
        assert set(rules) <= {ml.VOCAB, ml.EMBED, ml.HEADS, ml.MLP}
        assert set(rules.values()) <= {"fsdp", "tensor"}
    assert ml.mesh_axis("2d", ml.HEADS) == "tensor" and ml.mesh_axis("2d", None) is None
