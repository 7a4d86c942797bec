"""The Makefile's environments: what a fresh clone's `make run` and `make test` install."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

MAKEFILE = Path(__file__).resolve().parent.parent / "Makefile"


def _recipe(target: str) -> str:
    return MAKEFILE.read_text().split(f"\n{target}:", 1)[1].split("\n\n", 1)[0]


def test_every_environment_gets_bytecode_for_what_it_imports() -> None:
    """uv writes no .pyc unless told, and with PYTHONDONTWRITEBYTECODE set (CI's machines) Python never
    writes one either: every worker and CLI process then compiled jax and torch from source again (a fresh
    clone's tests took 914 s instead of 704). The JAX environment's installs compile everything (the main
    job's processes import much of it); the torch_xla environment's 10,600 files, of which its processes
    import ~2,650, get theirs from its check, which imports torch_xla with bytecode writes on (31 s of a
    fresh clone's setup for the install, 20 s for the check), and the tests write the rest once."""
    lines = MAKEFILE.read_text().splitlines()
    installs = [ln for ln in lines if re.search(r"\$\(UV\) pip install", ln)]
    jax_installs = [ln for ln in installs if "$(BIN)/python" in ln.split()]
    assert len(jax_installs) >= 2, installs  # the JAX environment and its libtpu extra
    missing = [ln.strip() for ln in jax_installs if "--compile-bytecode" not in ln.split()]
    assert not missing, missing
    txla = _recipe("$(TXLA_BIN)/.installed")
    check = [ln for ln in txla.splitlines() if "import torch_xla" in ln]
    assert check and all(ln.split()[:2] == ["env", "-u"] and ln.split()[2] == "PYTHONDONTWRITEBYTECODE"
                         for ln in check), txla
    assert re.search(r"env -u PYTHONDONTWRITEBYTECODE \$\(BIN\)/python -m pytest", _recipe("pytest-run"))


def _prerequisites(target: str) -> list[str]:
    line = next(ln for ln in MAKEFILE.read_text().splitlines() if ln.startswith(f"{target}:"))
    return line.split(":", 1)[1].split()


def test_the_main_job_and_the_tests_run_on_xlabench_compiled_to_bytecode() -> None:
    """The editable source tree is no package the installs compile: with PYTHONDONTWRITEBYTECODE set, each
    CLI and worker process compiled xlabench's modules again (a CLI start 0.6 s of CPU instead of 0.4)."""
    for target in ("run", "test", "test-fast"):
        assert "bytecode" in _prerequisites(target), target
    recipe = _recipe("bytecode")
    assert re.search(r"-m compileall\b.*\bxlabench\b", recipe), recipe


def _rule(goals: list[str], target: str) -> str:
    """``target``'s rule as make itself reads the Makefile for ``goals`` (its database, nothing run)."""
    out = subprocess.run(["make", "-p", "-q", "-f", str(MAKEFILE), *goals], capture_output=True, text=True,
                         cwd=MAKEFILE.parent, env=_top_make_env()).stdout
    return next(ln for ln in out.splitlines() if ln.startswith(f"{target}:"))


def _top_make_env() -> dict[str, str]:
    """This environment as a shell's, not a make's (`make test` runs these tests under make)."""
    return {k: v for k, v in os.environ.items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}


def test_the_environments_build_side_by_side_and_the_tests_wait_for_both() -> None:
    """`make torch-xla-env test` (the README's test command, .ci/run's): the torch_xla environment's check, one
    thread importing torch_xla, ran before the JAX installs' bytecode compile, which keeps two cores busy:
    side by side a fresh clone's environments took 40.4 s instead of 53.8. The tests must then wait for the
    torch_xla environment they drive, and only where it is a goal (`make test` alone needs none)."""
    assert re.search(r"^MAKEFLAGS \+= --jobs=2$", MAKEFILE.read_text(), re.M)
    for target in ("test", "test-fast"):
        assert "| torch-xla-env" in _rule(["torch-xla-env", target], target)
        assert "torch-xla-env" not in _rule([target], target)
    # A sub-make (pytest-run) shares the top make's jobs: set again, make warned at every `make test`.
    dry = subprocess.run(["make", "-n", "test-fast"], capture_output=True, text=True, cwd=MAKEFILE.parent,
                         env=_top_make_env())
    assert "pytest-run" in dry.stdout and "forced in makefile" not in dry.stderr, dry.stderr
    ci = (MAKEFILE.parent / ".ci" / "run").read_text()
    assert re.search(r"^make torch-xla-env test$", ci, re.M), ci
