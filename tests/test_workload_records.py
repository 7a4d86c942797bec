"""One record per workload (issue 51): workloads.WORKLOADS is the one registry; the per-workload tables
derive from it, a new record is planned, tuned, predicted and run by what it says, each backend has the
runner its records name, and tune/ knows no workload name."""

from __future__ import annotations

import ast
import dataclasses
import textwrap
from pathlib import Path

import pytest

from xlabench import impls as catalog
from xlabench import suite, workloads
from xlabench.backends.runners import runner_table
from xlabench.impls import attention_rules, kernel, kernels, workload_rules
from xlabench.results import schema
from xlabench.run import scheduler
from xlabench.run.case_plan import plan_case
from xlabench.workloads import WORKLOADS, attention
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams
from xlabench.workloads.record import ATTENTION_KERNELS, PAGED_KERNELS, Workload

ROOT = Path(__file__).resolve().parent.parent
FAKE = "fake_attention"


def test_the_tables_are_the_records():
    assert set(WORKLOADS) == {"attention", "paged_attention", "train"}
    assert all(name == w.name for name, w in WORKLOADS.items())
    assert workloads.PARAMS == {n: w.params for n, w in WORKLOADS.items()}
    assert workloads.TUNED_PARAMS == {n: w.tuned for n, w in WORKLOADS.items() if w.tuned}
    assert workloads.TUNE_KEY_FIELDS == {n: w.tune_key for n, w in WORKLOADS.items() if w.tune_key}
    assert set(workloads.TUNE_KEY_FIELDS) == set(workloads.TUNED_PARAMS)  # a workload that tunes has a key
    assert kernel.ATTENTION == workloads.family(ATTENTION_KERNELS) == catalog.USER_WORKLOADS
    assert kernel.PAGED == workloads.family(PAGED_KERNELS)
    assert {n for n, w in WORKLOADS.items() if w.kernels not in (ATTENTION_KERNELS, PAGED_KERNELS)} == set()
    tuned_columns = {c.name: c.tuned for c in schema.COLUMNS if c.tuned}
    assert tuned_columns == {p: n for n, w in WORKLOADS.items() for p in w.tuned}


def _fake(**fields) -> Workload:
    return Workload(FAKE, AttentionParams, ATTENTION_KERNELS, **{
        "tuned": BLOCK_PARAMS, "headline": "wall", "fixes_blocks": ("block_k",), "predicts_skips": False,
        "runner": "attention:tune_key_fields", **fields})


def _attention_case(tmp_path: Path, impl: str, params: str) -> suite.Case:
    p = tmp_path / "s.yaml"
    p.write_text(textwrap.dedent(f"""
        name: s
        workload: attention
        backends: [jax]
        impls: [{impl}]
        params: {{{params}}}
        measure: {{warmup: 0, iters: 3, timer: trace}}
        """).lstrip())
    return suite.load(p).cases()[0]


def _plan(case: suite.Case):
    ctx = scheduler.RunContext(run_id="r", platform="tpu", git_sha="x", tune=None, tune_dir="/cache/tune")
    return plan_case(case, catalog.find(case.backend, case.impl, "attention"), "tpu", ctx)


def test_a_new_record_is_planned_by_what_it_says(tmp_path, monkeypatch):
    monkeypatch.setitem(WORKLOADS, FAKE, _fake())
    case = _attention_case(tmp_path, "flash", "batch: 1, num_heads: 2, head_dim: 64, seq_len: 256, block_k: 128")
    fake = dataclasses.replace(case, workload=FAKE)
    assert _plan(case).headline == "device" and _plan(fake).headline == "wall"  # the records' clocks
    monkeypatch.setitem(WORKLOADS, FAKE, _fake(headline="device"))
    assert _plan(fake).headline == "device"
    assert _plan(case).timing.tune == _plan(fake).timing.tune == "fixed"  # block_k: tuned and fixes_blocks
    unfixed = dataclasses.replace(fake, params={**fake.params, "block_k": None, "block_q": 128})
    assert _plan(unfixed).timing.tune == "search"  # this record's blocks are fixed by block_k alone
    assert workloads.params_model(FAKE) is AttentionParams
    assert runner_table("xlabench.workloads", "runner")(FAKE) is attention.tune_key_fields


def test_a_new_records_kernel_rules_follow_its_family_and_flags(monkeypatch):
    params = dict(batch=1, num_heads=2, head_dim=64, seq_len=200, block_q=128)  # 200 is not tiled by 128
    skip = attention_rules.predict_skip("jax", "flash", params, "tpu")
    assert skip is not None
    monkeypatch.setitem(WORKLOADS, FAKE, _fake())
    assert workload_rules.predict_skip(FAKE, "jax", "flash", params, "tpu") is None  # its worker decides
    assert workload_rules.search_space(FAKE, "jax", "flash") is kernels.kernel("jax", "flash", False).tune_space
    monkeypatch.setitem(WORKLOADS, FAKE, _fake(predicts_skips=True, tuned=()))
    assert workload_rules.predict_skip(FAKE, "jax", "flash", params, "tpu") == skip
    assert workload_rules.search_space(FAKE, "jax", "flash") is None  # a record without tuned parameters
    assert workload_rules.search_space("attention", "jax", "flash") is not None
    assert workload_rules.search_space("paged_attention", "jax", "paged") is kernels.SPACES[("jax", "paged")]
    assert workload_rules.search_space("train", "jax", "flash") is None  # train does not tune


def _defines(path: Path, function: str) -> bool:
    return path.exists() and any(isinstance(n, ast.FunctionDef) and n.name == function
                                 for n in ast.parse(path.read_text()).body)


@pytest.mark.parametrize("backend", ["jax", "torch_xla"])
def test_each_backend_has_the_runner_and_compiler_each_record_names(backend):
    """Read without importing the backend (its framework): each kind the backend's table is built for
    (runner_table(__name__, kind) in its package) names, for every workload, a function its package defines."""
    package = ROOT / "xlabench" / "backends" / backend
    init = ast.parse((package / "__init__.py").read_text())
    kinds = {c.args[1].value for c in ast.walk(init) if isinstance(c, ast.Call)
             and getattr(c.func, "id", "") == "runner_table"}
    assert "runner" in kinds and kinds <= {"runner", "compiler"}
    missing = [(n, kind) for kind in sorted(kinds) for n, w in WORKLOADS.items()
               if not getattr(w, kind) or not _defines(package / f"{getattr(w, kind).split(':')[0]}.py",
                                                       getattr(w, kind).split(":")[1])]
    assert missing == []


def test_tune_knows_no_workload_name():
    """tune/ is below the workloads: it is handed what it needs (a kernel's config, a case's key fields)."""
    names = set(WORKLOADS) | {ATTENTION_KERNELS, PAGED_KERNELS}
    found = []
    for path in (ROOT / "xlabench" / "tune").rglob("*.py"):
        tree = ast.parse(path.read_text())
        found += [f"{path.name}:{n.lineno} {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names]
        found += [f"{path.name}: imports {m}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  for m in [n.module or ""] if m.startswith("xlabench.workloads")]
    assert found == []


# Strings equal to a workload's name that are not a workload's name where they stand: (file, string) -> (how
# many times the file compares with or keys by it, why).
NOT_A_WORKLOAD = {
    ("xlabench/backends/jax/model.py", "attention"): (1, "a remat policy's name (keep q, k, v and the output)"),
    ("xlabench/explain/breakdown.py", "attention"): (3, "an HLO op category (Pallas kernels: explain/categories.py)"),
}


def _name_literals(tree: ast.AST, names: set[str]) -> list[ast.Constant]:
    """String constants in ``names`` that a comparison compares with (``==``, ``in (...)``), a dict literal
    keys by or a subscript looks up."""
    found: list[ast.Constant] = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            found += [c for o in operands for c in ([o] if isinstance(o, ast.Constant) else
                                                   getattr(o, "elts", []) if isinstance(o, (ast.Tuple, ast.List, ast.Set))
                                                   else [])]
        elif isinstance(n, ast.Dict):
            found += [k for k in n.keys if k is not None]
        elif isinstance(n, ast.Subscript):
            found.append(n.slice)
    return [c for c in found if isinstance(c, ast.Constant) and isinstance(c.value, str) and c.value in names]


def test_no_module_outside_the_workloads_dispatches_on_a_workload_name():
    """Issue 51: one definition of each workload's facts, its record. Outside xlabench/workloads/, no module
    compares a value with a workload's name, keys a dict by one or looks one up: it reads the record."""
    names = set(WORKLOADS)
    seen: dict[tuple[str, str], list[int]] = {}
    for path in sorted((ROOT / "xlabench").rglob("*.py")):
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith("xlabench/workloads/"):
            continue
        for c in _name_literals(ast.parse(path.read_text()), names):
            seen.setdefault((rel, c.value), []).append(c.lineno)
    dispatch = sorted(f"{f}:{lines} {v!r}" for (f, v), lines in seen.items() if (f, v) not in NOT_A_WORKLOAD)
    assert dispatch == []
    assert {k: len(v) for k, v in seen.items()} == {k: n for k, (n, _) in NOT_A_WORKLOAD.items()}


def test_the_walk_finds_what_a_dispatch_looks_like():
    tree = ast.parse('if w == "train": pass\nx = w in ("attention", "other")\nd = {"paged_attention": 1}\n'
                     'f = FIGURES["attention"]\ny = w == "trained" or catalog.find(b, i, "attention")\n')
    assert [(c.lineno, c.value) for c in _name_literals(tree, set(WORKLOADS))] == [
        (1, "train"), (2, "attention"), (3, "paged_attention"), (4, "attention")]


def test_a_new_record_gets_a_kernels_facts_by_default(monkeypatch):
    """A record that says nothing but its name, params model and family: a kernel's summary figures, no fit
    chart, a synced call's wall clock, not sharded nor fitted to a slice, its blocks kept, no attention FLOPs."""
    import pandas as pd

    from xlabench.explain import runfile
    from xlabench.report import chartdata, markdown
    from xlabench.results.display import CLOCK_WORDS, clock_note
    from xlabench.run import envs
    from xlabench.workloads.record import KERNEL_FIGURES, FitChart

    bare = Workload(FAKE, AttentionParams, ATTENTION_KERNELS)
    assert (bare.figures, bare.fit, bare.wall_clock, bare.sharded, bare.fits_slice, bare.drops_untaken_blocks,
            bare.attention_flops) == (KERNEL_FIGURES, None, "call", False, False, False, "")
    monkeypatch.setitem(WORKLOADS, FAKE, bare)
    rows = pd.DataFrame([{"workload": FAKE, "impl": "flash", "median_s": 1e-3, "clock": "wall", "status": "ok"}]
                        ).reindex(columns=schema.COLUMN_NAMES)
    assert [f.header for f in KERNEL_FIGURES] == ["TFLOP/s", "MFU %"]
    assert "| TFLOP/s | MFU % |" in markdown.summary(rows)
    assert clock_note(rows.to_dict("records")) == f"times and rates on {CLOCK_WORDS['wall']}"
    assert envs.worker_variant("torch_xla", FAKE, {"sharding": "auto"}) == ""
    assert runfile.attention_flops({"workload": FAKE, "kernel_flops": 1e9}) is None
    with pytest.raises(KeyError):
        chartdata.fit_chart(FAKE)
    monkeypatch.setitem(WORKLOADS, FAKE, dataclasses.replace(
        bare, attention_flops="kernel_flops", wall_clock="steps", sharded=True,
        fit=FitChart("context_lens", "context length", "HBM vs context length", x_is_spec=True)))
    assert runfile.attention_flops({"workload": FAKE, "kernel_flops": 1e9}) == 1e9
    assert "training steps" in clock_note(rows.to_dict("records"))
    assert envs.worker_variant("torch_xla", FAKE, {"sharding": "auto"}) == "spmd-auto"
    assert list(chartdata.fit_x(pd.DataFrame({"context_lens": ["uniform:256-1024"]}), FAKE)) == [640.0]
