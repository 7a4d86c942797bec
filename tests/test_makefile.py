"""The Makefile's environments: what a fresh clone's `make run` and `make test` install."""

from __future__ import annotations

import re
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"


def test_every_uv_install_writes_bytecode() -> None:
    """uv writes no .pyc unless told, and with PYTHONDONTWRITEBYTECODE set (CI's machines) Python never
    writes one either: every worker and CLI process then compiled jax and torch from source again (a fresh
    clone's tests took 914 s instead of 704)."""
    installs = [ln for ln in MAKEFILE.read_text().splitlines() if re.search(r"\$\(UV\) pip install", ln)]
    assert len(installs) >= 3, installs  # the JAX environment, its libtpu extra, the torch_xla environment
    missing = [ln.strip() for ln in installs if "--compile-bytecode" not in ln.split()]
    assert not missing, missing


def _prerequisites(target: str) -> list[str]:
    line = next(ln for ln in MAKEFILE.read_text().splitlines() if ln.startswith(f"{target}:"))
    return line.split(":", 1)[1].split()


def test_the_main_job_and_the_tests_run_on_xlabench_compiled_to_bytecode() -> None:
    """The editable source tree is no package the installs compile: with PYTHONDONTWRITEBYTECODE set, each
    CLI and worker process compiled xlabench's modules again (a CLI start 0.6 s of CPU instead of 0.4)."""
    for target in ("run", "test", "test-fast"):
        assert "bytecode" in _prerequisites(target), target
    recipe = MAKEFILE.read_text().split("\nbytecode:", 1)[1].split("\n\n", 1)[0]
    assert re.search(r"-m compileall\b.*\bxlabench\b", recipe), recipe
