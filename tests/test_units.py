"""Unit scale factors are declared once, in xlabench/units.py (issue 59): no 1e12, 1e9, 1e6, 1e3 (or 1000),
2**30, 1 << 20, ... written as a literal anywhere else in the package. Tolerances and epsilons (1e-9 as a
floor, rel_tol=1e-6) are not units and are not looked for: a negative power of ten is nearly always one."""

from __future__ import annotations

import ast

from xlabench import units

from tests._scan import PKG, scan

SCALES = {1e3, 1e6, 1e9, 1e12, 2**20, 2**30, 2**40, 2**50}  # as written: 1e9, 1_000_000_000, 1073741824, ...
# (1024 alone is not looked for: it is far more often a length, 1024 tokens, than a KiB)
SHIFTS = {10, 20, 30, 40, 50}  # 1 << 30, 2 << 30
# Literals of a unit's value that are not units, which the scan cannot tell apart: (file, source line).
NOT_UNITS = {
    ("explain/trace.py", "return (int(tail), name) if tail.isdigit() else (1 << 30, name)"),  # a sort key after
    # every numbered device, not a size
    ("stats/changepoint.py", "(250, 1330.0), (500, 3600.0), (1000, 5300.0), (2000, 10700.0))"),  # a sample size
    ("protocol/timing_plan.py", "max_iters: int = 1000"),  # a count of iterations
    ("worker/main.py", 'return Reply(error=f"{type(e).__name__}: {e}"[:1000])'),  # a message's length
    ("worker/main.py", 'reply(Reply(fatal=f"{type(e).__name__}: {e}".strip()[:1000]))'),
}


def unit_literals(source: str) -> list[tuple[int, str]]:
    """(line, literal) of each unit scale factor written in ``source``."""
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Constant) and type(node.value) in (int, float) and node.value in SCALES:
            found.append((node.lineno, ast.unparse(node)))
        elif isinstance(node, ast.BinOp) and isinstance(node.right, ast.Constant) and (
                isinstance(node.op, ast.LShift) and node.right.value in SHIFTS
                or isinstance(node.op, ast.Pow) and node.right.value in (10, 20, 30, 40, 50, 3, 6, 9, 12)
                and isinstance(node.left, ast.Constant) and node.left.value in (2, 10, 1024)):
            found.append((node.lineno, ast.unparse(node)))
    return sorted(found)


def test_the_scan_finds_each_way_of_writing_a_unit():
    source = "a = x / 1e9\nb = y * 1000\nc = 1 << 30\nd = 2 ** 30\ne = 1024 ** 3\nf = 1_000_000\ng = 2 << 20\n"
    assert [line for line, _ in unit_literals(source)] == [1, 2, 3, 4, 5, 6, 7]
    assert unit_literals("tol = 1e-9\nrel = 1e-6\nn = 512\nseq = 1024\neps = max(s, 1e-12)\n") == []


def test_no_unit_scale_factor_is_a_literal_outside_the_units_module():
    offenders, allowed = scan(unit_literals, NOT_UNITS, lambda rel: rel == "units.py", "use xlabench.units")
    assert offenders == []
    assert allowed == NOT_UNITS, f"allow-list entries that no longer match a line: {sorted(NOT_UNITS - allowed)}"


def test_the_time_scales_are_the_doubles_the_literals_were():
    """MILLISECOND is 1 / MS_PER_S: a correctly rounded division gives exactly the double 1e-3, so a value
    divided by it prints as it did."""
    assert (units.MILLISECOND, units.MICROSECOND, units.NANOSECOND) == (1e-3, 1e-6, 1e-9)
    assert units.to_ms(0.0012345) == 0.0012345 * 1e3 and units.ns_to_s(123456789) == 123456789 / 1e9
    assert units.tflops_per_s(3e12, 0.7) == 3e12 / 0.7 / 1e12 and units.gbytes_per_s(5e9, 0.3) == 5e9 / 0.3 / 1e9


def test_the_units_module_imports_nothing():
    """Every floor imports it, so it imports nothing (of xlabench or a framework) itself."""
    tree = ast.parse((PKG / "units.py").read_text())
    assert [n.module for n in ast.walk(tree) if isinstance(n, (ast.Import, ast.ImportFrom))] == ["__future__"]
