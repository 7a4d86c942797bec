"""Shared fixtures: tiny suites written to tmp_path, and a way to run the CLI as a real subprocess."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

TINY_SUITE = """
name: tiny
description: two impls, two shapes
workload: attention
backends: [jax]
impls: [naive, xla_sdpa]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1}
matrix:
  seq_len: [64, 128]
measure: {warmup: 1, iters: 3, timeout_s: 120}
"""


@pytest.fixture
def write_suite(tmp_path: Path):
    """Write a suite YAML (dedented) into tmp_path and return its path."""

    def _write(text: str = TINY_SUITE, name: str = "suite.yaml") -> Path:
        p = tmp_path / name
        p.write_text(textwrap.dedent(text).lstrip())
        return p

    return _write


def run_cli(*args: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """`python -m xlabench.cli ...` as a real process (what a user's shell does)."""
    full_env = dict(os.environ)
    full_env.update(env or {})
    full_env["PYTHONPATH"] = str(ROOT) + os.pathsep + full_env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "xlabench", *args], capture_output=True, text=True,
                          env=full_env, timeout=timeout, cwd=str(ROOT))
