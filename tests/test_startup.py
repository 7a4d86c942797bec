"""Start-up (issue 20, item 10): `--help`, `list`, `validate` and `info --peaks` load no framework and
none of scipy, pandas or matplotlib (they took ~10 s on a loaded host for a listing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

HEAVY = ("jax", "jaxlib", "torch", "torch_xla", "scipy", "pandas", "matplotlib")

PROBE = """
import json, sys
from xlabench.cli import main
try:
    main(sys.argv[1:], standalone_mode=False)
except SystemExit:
    pass
print("\\nMODULES " + json.dumps(sorted({m.split(".")[0] for m in sys.modules})))
"""


def _modules(*args: str) -> tuple[set[str], str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", "")}
    p = subprocess.run([sys.executable, "-c", PROBE, *args], capture_output=True, text=True, env=env, cwd=str(ROOT),
                       timeout=300)
    assert p.returncode == 0, p.stderr
    line = [ln for ln in p.stdout.splitlines() if ln.startswith("MODULES ")][-1]
    return set(json.loads(line[len("MODULES "):])), p.stdout


@pytest.mark.parametrize("args", [
    ["--help"], ["run", "--help"], ["gate", "--help"], ["compile", "--help"],
    ["list", "suites/gpt2.yaml"], ["list", "suites/attention.yaml", "--profile", "cpu", "--json"],
    ["validate", "suites/attention.yaml", "suites/gpt2.yaml"], ["info", "--peaks"],
])
@pytest.mark.slow  # starts a process
def test_light_commands_import_no_framework_scipy_pandas_or_matplotlib(args):
    loaded, out = _modules(*args)
    assert "xlabench" in loaded and out.strip()  # the command ran and printed
    assert loaded & set(HEAVY) == set(), args


@pytest.mark.slow  # starts a process
def test_the_gate_package_loads_its_statistics_on_first_use():
    """`xlabench.gate` is cheap to import (the CLI's defaults need it), and its names still work."""
    code = ("import sys; import xlabench.gate as g; light = 'scipy' not in sys.modules; "
            "import xlabench.gate.pairing; print(light, callable(g.compare), g.Comparison.__name__, "
            "g.samples_needed(g.GateConfig(), 48))")
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert p.stdout.split() == ["True", "True", "Comparison", "7"], p.stderr
