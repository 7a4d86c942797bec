"""The package's architecture as a test: the CLI is a leaf (no library module imports it), the import
graph has no cycle, and the two frameworks stay in their workers (the parent's modules never import one)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "xlabench"
FRAMEWORKS = ("jax", "jaxlib", "torch", "torch_xla", "libtpu")


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _graph() -> tuple[dict[str, set[str]], dict[str, set[str]]]:
    """(module -> xlabench modules it imports at module level, module -> top-level packages it imports anywhere)."""
    files = {_module(p): p for p in PKG.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    externals: dict[str, set[str]] = {}
    for name, path in files.items():
        tree = ast.parse(path.read_text())
        deps: set[str] = set()
        ext: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module:
                ext.add(node.module.split(".")[0])
                if node.module.startswith("xlabench"):
                    deps |= {m for m in [node.module, *(f"{node.module}.{a.name}" for a in node.names)] if m in files}
            elif isinstance(node, ast.Import):
                for a in node.names:
                    ext.add(a.name.split(".")[0])
                    if a.name in files:
                        deps.add(a.name)
        top_level = {n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))}
        graph[name] = set()
        for node in top_level:  # the import graph that runs at import time (lazy imports inside functions aside)
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlabench"):
                graph[name] |= {m for m in [node.module, *(f"{node.module}.{a.name}" for a in node.names)]
                                if m in files and m != name}
        externals[name] = ext
        graph[name] -= {name}
    return graph, externals


def test_no_library_module_imports_the_cli():
    graph = _all_imports()
    offenders = sorted((m, d) for m, deps in graph.items() for d in deps
                       if d.startswith("xlabench.cli") and not m.startswith("xlabench.cli") and m != "xlabench.__main__")
    assert offenders == []


def _all_imports() -> dict[str, set[str]]:
    """module -> every xlabench module it imports, at module level or inside a function."""
    out: dict[str, set[str]] = {}
    for path in PKG.rglob("*.py"):
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("xlabench"):
                deps |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("xlabench")}
        out[_module(path)] = deps
    return out


def test_import_graph_has_no_cycle():
    """Lazy imports inside functions count too: a cycle hidden in a function is still a cycle."""
    graph, _ = _graph()
    every = _all_imports()
    # a package's __init__ naming its children is not a cycle with a child importing the package
    edges = {m: {d for d in deps | every[m] if d in graph and d != m and not d.startswith(m + ".")}
             for m, deps in graph.items()}
    state: dict[str, int] = {}
    cycles: list[list[str]] = []

    def visit(u: str, stack: list[str]) -> None:
        state[u] = 1
        stack.append(u)
        for v in sorted(edges[u]):
            if state.get(v) == 1:
                cycles.append(stack[stack.index(v):] + [v])
            elif not state.get(v):
                visit(v, stack)
        stack.pop()
        state[u] = 2

    for m in sorted(edges):
        if not state.get(m):
            visit(m, [])
    assert cycles == []


def test_parent_side_modules_never_import_a_framework():
    """Only backends/ (and the worker that loads them) may import jax or torch: the CLI, run, results, gate
    and report packages run in the parent process, which must stay framework-free."""
    _, externals = _graph()
    parent_side = [m for m in externals if m.split(".")[1:2] and m.split(".")[1] in
                   ("cli", "run", "results", "gate", "report")]
    assert len(parent_side) > 20  # the packages exist
    offenders = sorted((m, sorted(externals[m] & set(FRAMEWORKS))) for m in parent_side if externals[m] & set(FRAMEWORKS))
    assert offenders == []


def test_protocol_and_measure_are_the_bottom_floors():
    """protocol/ (what crosses between parent and worker) imports nothing of xlabench but itself; measure/
    only protocol, the cache, the statistics and the units below it; neither a framework: every floor may
    import them."""
    _, externals = _graph()
    every = _all_imports()
    below = {"protocol": ("xlabench.protocol",),
             "measure": ("xlabench.measure", "xlabench.protocol", "xlabench.cache", "xlabench.stats",
                         "xlabench.units")}
    for package, allowed in below.items():
        mods = [m for m in every if m == f"xlabench.{package}" or m.startswith(f"xlabench.{package}.")]
        assert len(mods) > 3, package
        for m in mods:
            assert not externals[m] & set(FRAMEWORKS), m
            assert {d for d in every[m] if not d.startswith(allowed)} == set(), m


# The statistics that the worker, measure/, run/ and `validate` import: no scipy (their startup stays light).
LIGHT_STATISTICS = ("xlabench.stats.summary", "xlabench.stats.power", "xlabench.stats.multiple")


def test_the_statistics_are_pure():
    """xlabench/stats/ imports nothing of xlabench outside itself and no framework; its light modules load
    no scipy, even inside a function, and they are all that the worker's side and run/ import of it."""
    _, externals = _graph()
    every = _all_imports()
    mods = [m for m in every if m == "xlabench.stats" or m.startswith("xlabench.stats.")]
    assert len(mods) > 3  # the package exists
    for m in mods:
        assert {d for d in every[m] if not d.startswith("xlabench.stats")} == set(), m
        assert not externals[m] & set(FRAMEWORKS), m
    for m in LIGHT_STATISTICS:
        assert externals[m] <= {"__future__", "functools", "math", "statistics", "typing", "numpy", "xlabench"}, m
        assert {d for d in every[m] if d.startswith("xlabench.")} <= set(LIGHT_STATISTICS), m
    light_side = [m for m in every if m.split(".")[1:2] and m.split(".")[1] in ("measure", "run", "worker", "backends")]
    offenders = sorted((m, d) for m in light_side for d in every[m]
                       if d.startswith("xlabench.stats") and not d.startswith(LIGHT_STATISTICS))
    assert offenders == []


def test_worker_is_imported_only_by_the_process_entry():
    """The parent talks to workers through measure's messages; only the worker's own modules (and its
    ``python -m`` entry) import xlabench.worker."""
    every = _all_imports()
    offenders = sorted((m, d) for m, deps in every.items() for d in deps
                       if d.startswith("xlabench.worker") and not m.startswith("xlabench.worker"))
    assert offenders == []


# The floors README's Layout section draws, bottom to top: a package imports only from floors below it.
FLOORS = (
    {"cache", "protocol", "hardware", "stats", "cells", "units"},  # the cache's root and JSON writer; the worker
    # protocol; the chip records; the statistics (pure); a cell as a number; the unit scale factors
    {"measure", "flops", "roofline"},
    {"tune"},  # framework-free block-size search and its cache; the workloads declare their spaces with it
    {"workloads"},  # one record per workload (workloads.WORKLOADS): params, tuned parameters, tune key, clock
    {"results"},  # the schema's tuned columns derive from the workload records
    {"audit"},  # the invariants of a row (pure functions), checked by the run, the gate, the report and `audit`
    {"impls"},  # the impl catalog and the built-in kernels' rules and search spaces, over the workloads' params
    {"suite"},
    {"explain"},  # where a step's device time goes: trace and HLO readers, over the results and the workloads
    {"backends", "run"},
    {"gate", "worker"},
    {"report", "history"},  # report.best tunes by the gate's test; history reads runs through the gate's loader
    {"cli"},
    {"__main__"},
)


def _package(module: str) -> str:
    return module.split(".")[1] if module != "xlabench" else ""


def test_no_package_imports_up_or_across_the_floors():
    floor = {p: i for i, ps in enumerate(FLOORS) for p in ps}
    every = _all_imports()
    packages = {_package(m) for m in every} - {""}
    assert packages <= set(floor), f"packages not on a floor: {sorted(packages - set(floor))}"
    offenders = sorted((m, d) for m, deps in every.items() for d in deps
                       if _package(m) and _package(d) and _package(d) != _package(m)
                       and _package(d) in floor and floor[_package(d)] >= floor[_package(m)])
    assert offenders == []


def test_package_docstrings_point_to_the_readme_layout_instead_of_listing_modules():
    """They listed modules that no longer exist (measure: messages, power; gate: load, session; suite: load,
    messages): README.md's Layout is the one list, checked against the floors above."""
    readme = (ROOT / "README.md").read_text()
    assert "## Layout" in readme
    listing = [str(p.relative_to(ROOT)) for p in PKG.glob("*/__init__.py")
               if "Modules:" in (ast.get_docstring(ast.parse(p.read_text())) or "")]
    assert listing == []


MAX_FUNCTION_LINES = 60


def test_no_function_is_over_60_lines():
    """A function longer than a screen is split into named parts (issue 51): def line to last line, its
    docstring included."""
    long = []
    for path in PKG.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
    assert sorted(long) == []


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
    """A module past 500 lines is split by what its parts do (suite_runner.py reached 508)."""
    long = [f"{path.relative_to(ROOT)} ({n} lines)" for path in sorted(PKG.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_MODULE_LINES]
    assert long == []


def test_the_readmes_layout_draws_these_floors():
    """README.md's Layout block: a line starting with floor i's number, and the lines under it that name
    another `xlabench/...`, list exactly FLOORS[i]'s packages."""
    import re

    readme = (ROOT / "README.md").read_text()
    block = readme.split("## Layout", 1)[1].split("```", 2)[1]
    drawn: list[set[str]] = []
    for line in block.splitlines():
        m = re.match(r"(\d+)?\s+xlabench/(\w+)", line)
        if not m:
            continue
        if m.group(1) is not None:
            assert int(m.group(1)) == len(drawn), line
            drawn.append(set())
        drawn[-1].add(m.group(2))
    assert drawn == [set(f) for f in FLOORS]
