"""scan_layers through the CLI on torch_xla: its loop over layers trains as unrolled. (JAX's scan is
checked in process against the unrolled loop, tests/test_train_model.py, and sharded, tests/test_train_sharding.py;
its half of this suite cost a worker and two cases of CI time.)

Needs the torch_xla environment, found as tests/test_torch_xla.py finds it (XLABENCH_NO_TORCH_XLA=1
skips on purpose).
"""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import numpy as np
import pytest

from conftest import require_torch_xla, run_cli
from xlabench import results
from xlabench.run import envs

pytestmark = pytest.mark.slow

# Two layers (a scan needs more than one to mean anything), 2 devices under fsdp, float32.
SUITE = """
name: scan_backends
workload: train
backends: [torch_xla]
impls: [naive]
params: {model: custom, arch: gpt2, vocab_size: 256, d_model: 64, num_layers: 2, num_heads: 4, d_ff: 128,
         seq_len: 32, global_batch: 4, dtype: float32, sharding: fsdp, devices: 2}
matrix:
  scan_layers: [false, true]
measure: {warmup: 0, iters: 2, timeout_s: 600}
"""


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> object:
    python_torch_xla = require_torch_xla()
    tmp: Path = tmp_path_factory.mktemp("scan_backends")
    suite = tmp / "suite.yaml"
    suite.write_text(textwrap.dedent(SUITE).lstrip())
    proc = run_cli("run", str(suite), "--out", str(tmp / "res"),
                   env={envs.TORCH_XLA_ENV_VAR: python_torch_xla})
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    csv = next(p for p in (tmp / "res").glob("*/*.csv") if not p.name.endswith(".samples.csv"))
    return results.read_rows(csv)


def test_scan_layers_true_trains_like_false(rows) -> None:
    df = rows[rows.backend == "torch_xla"].set_index("scan_layers")
    assert sorted(df.index) == [False, True] and (df.status == "ok").all(), df[["status", "error"]]
    assert df.correct.all()
    unrolled, scanned = (np.array(json.loads(df.loc[s, "losses"])) for s in (False, True))
    assert unrolled[-1] < unrolled[0]
    assert np.max(np.abs(scanned - unrolled)) == 0.0, (scanned, unrolled)  # the same ops, layer by layer
    assert "torch_xla loops over layers in Python" in df.loc[True, "notes"]
    assert "loops over layers" not in df.loc[False, "notes"]
