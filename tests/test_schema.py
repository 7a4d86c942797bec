"""The typed schema: every column declares its dtype (and whether it is a tuned parameter), the reader types
each column by it, and every other list of columns (text, tuned, kernel options, block names) derives from it."""

from __future__ import annotations

import ast
import csv
import math
import warnings
from pathlib import Path

import pandas as pd
import pytest

from xlabench import results
from xlabench.results import schema

ROOT = Path(__file__).resolve().parent.parent


def _row(i: int, **kw):
    return {"schema_version": schema.SCHEMA_VERSION, "run_id": "r1", "suite": "s", "case_id": f"c{i}",
            "workload": "attention", "impl": "flash", "status": "ok", "median_s": 0.5 + i, **kw}


def _write(path: Path, header: list[str], rows: list[dict]) -> Path:
    with open(path, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=header)
        w.writeheader()
        for r in rows:
            w.writerow({k: results._cell(r.get(k)) for k in header})
    return path


def test_every_column_declares_one_of_the_dtypes():
    assert {c.dtype for c in schema.COLUMNS} == set(schema.CELL_TYPES)
    assert schema.TEXT_COLUMN_NAMES == {c.name for c in schema.COLUMNS if c.dtype == "text"}


def test_read_rows_types_each_column_by_its_declared_dtype(tmp_path):
    files = results.RunFiles(tmp_path / "r1.csv")
    with results.RowWriter(files) as w:
        w.write(_row(0, block_q=512, causal=True, correct=False, mesh="4", seq_len=1024, mfu=0.5))
        w.write(_row(1, causal=False, mesh="data=2", seq_len=2048))  # block_q, correct, mfu empty
    df = results.read_rows(files.csv)
    for c in schema.COLUMNS:
        cells = df[c.name].dropna().tolist()
        want = {"text": str, "int": (int, float), "float": float, "bool": bool}[c.dtype]
        assert all(isinstance(v, want) for v in cells), (c.name, c.dtype, cells)
        if c.dtype in ("int", "float") and cells:
            assert pd.api.types.is_numeric_dtype(df[c.name]), c.name
    assert df["mesh"].tolist() == ["4", "data=2"]  # text that looks like a number stays text
    assert df["seq_len"].dtype == "int64" and df.loc[0, "block_q"] == 512 and math.isnan(df.loc[1, "block_q"])
    assert df["causal"].tolist() == [True, False] and df.loc[0, "correct"] is False


@pytest.mark.parametrize("column, cell, says", [
    ("block_q", "12.5", "block_q '12.5' is not an integer"),
    ("correct", "yes", "correct 'yes' is not true or false"),
    ("median_s", "abc", r"median_s 'abc' is not a number \(s\)"),
    ("mfu", "high", "mfu 'high' is not a number"),
    ("seq_len", "inf", "seq_len 'inf' is not an integer"),
])
def test_a_cell_not_of_its_columns_dtype_is_refused_naming_its_line(tmp_path, column, cell, says):
    path = _write(tmp_path / "r1.csv", schema.COLUMN_NAMES, [_row(0), _row(1, **{column: cell})])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the error, and no numpy warning before it
        with pytest.raises(results.ResultsFileError, match=rf"r1\.csv:3: {says}"):
            results.read_rows(path)


def test_a_column_left_empty_reads_as_missing_numbers_whatever_its_dtype(tmp_path):
    path = _write(tmp_path / "r1.csv", schema.COLUMN_NAMES, [_row(0), _row(1)])
    df = results.read_rows(path)
    for name in ("correct", "block_q", "mfu"):  # bool, int, float
        assert df[name].dtype == "float64" and df[name].isna().all(), name


def test_units_are_declared_once_in_the_schema():
    """gate.config.METRICS spelled each metric's unit again beside the schema's: two declarations that could
    disagree. The gate's metric has no unit of its own: it reads the schema's, and names a column or is refused."""
    import dataclasses

    from xlabench.gate.config import METRICS, Metric

    assert "unit" not in {f.name for f in dataclasses.fields(Metric)}
    assert {m.name: m.unit for m in METRICS.values()} == {m: schema.UNIT_OF[m] for m in METRICS}
    assert METRICS["tflops_per_s"].unit == "TFLOP/s" and METRICS["mfu"].unit == ""
    with pytest.raises(ValueError, match="not a column"):
        Metric("median_ms", False, "median")


def test_the_tuned_parameter_lists_all_derive_from_one():
    """pages_per_compute_block was tuned by --tune, in chartdata.TUNING and left out of paged's cache key,
    but missing from workloads.TUNED_PARAMS: four lists that disagreed."""
    from xlabench import workloads
    from xlabench.audit.shape import SHAPE_COLUMNS
    from xlabench.report import chartdata
    from xlabench.workloads import TUNED_PARAMS, attention, paged

    assert TUNED_PARAMS == {n: w.tuned for n, w in workloads.WORKLOADS.items() if w.tuned}
    key_fields = {"attention": attention.tune_key_fields(attention.AttentionParams(
                      batch=1, num_heads=2, seq_len=256, head_dim=64, block_q=128)),
                  "paged_attention": paged.tune_key_fields(paged.PagedParams(
                      batch=1, context_lens="256", num_heads=2, head_dim=64, page_size=16,
                      pages_per_compute_block=4))}
    by_name = {c.name: c for c in schema.COLUMNS}
    for workload, names in TUNED_PARAMS.items():
        for name in names:
            assert by_name[name].tuned == workload and by_name[name].group == "case"
            assert by_name[schema.TUNED_PREFIX + name].dtype == by_name[name].dtype == "int"
            assert name in chartdata.TUNING and name not in SHAPE_COLUMNS
            assert name not in key_fields[workload]
    assert {c.name for c in schema.COLUMNS if c.tuned} == {n for ns in TUNED_PARAMS.values() for n in ns}


def test_a_version_2_file_reads_with_the_tuners_blocks_in_their_own_columns(tmp_path):
    """Version 2 wrote a tuned block_q over the case's own: read as version 3, block_q is the suite's."""
    header = [c for c in schema.COLUMN_NAMES if not c.startswith(schema.TUNED_PREFIX)]
    path = _write(tmp_path / "r1.csv", header, [
        _row(0, schema_version=2, tuned="search", block_q=512, block_k=1024),
        _row(1, schema_version=2, tuned="fixed", block_q=256, block_k=256),
        _row(2, schema_version=2, impl="naive"),
        _row(3, schema_version=2, workload="paged_attention", impl="paged", tuned="cache",
             pages_per_compute_block=8)])
    df = results.read_rows(path)
    assert df.loc[0, ["tuned_block_q", "tuned_block_k"]].tolist() == [512, 1024]
    assert df.loc[0, ["block_q", "block_k"]].isna().all()
    assert df.loc[1, ["block_q", "block_k"]].tolist() == [256, 256] and df.loc[1, ["tuned_block_q"]].isna().all()
    assert df.loc[2, ["block_q", "tuned_block_q"]].isna().all()
    assert df.loc[3, "tuned_pages_per_compute_block"] == 8 and math.isnan(df.loc[3, "pages_per_compute_block"])


def test_tune_table_shows_the_tuners_blocks():
    from xlabench.cli.tune import table

    t = table([{"workload": "attention", "impl": "flash", "seq_len": 1024, "block_q": None,
                "tuned_block_q": 512, "tuned_block_k": 256, "tuned": "search"},
               {"workload": "paged_attention", "impl": "paged", "tuned_pages_per_compute_block": 8,
                "tuned": "cache"}])
    assert list(t.columns[2].cells) == ["512x256", "8"]


def _string_constants(path: Path) -> list[str]:
    return [n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)]


def test_block_names_are_spelled_out_once():
    from xlabench.workloads.attention import BLOCK_PARAMS

    spelled = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "xlabench").rglob("*.py")
                     if set(BLOCK_PARAMS) & set(_string_constants(p)))
    assert spelled == ["xlabench/workloads/attention.py"]


@pytest.mark.parametrize("cell, want", [(2, 2.0), (0.5, 0.5), ("3e-3", 3e-3), (None, None), (float("nan"), None),
                                        (float("inf"), None), (True, None), ("", None), ("abc", None)])
def test_a_cell_is_read_as_a_number_in_one_place(cell, want):
    """Five modules each parsed a cell with their own try/float/isnan (roofline, audit, explain, gate,
    history): they now share xlabench.cells.number."""
    from xlabench import roofline
    from xlabench.audit import invariants
    from xlabench.explain import runfile
    from xlabench.gate import config
    from xlabench.cells import number

    assert number(cell) == want and config.num(cell) == want
    row = {"x": cell}
    assert roofline._num(row, "x") == invariants.num(row, "x") == runfile._number(row, "x") == want


def test_columns_markdown_is_the_readmes_table_with_each_columns_type():
    """`xlabench columns --markdown` said 'as in the README' and wrote its own table (no type column)."""
    from click.testing import CliRunner

    from xlabench.cli import main

    res = CliRunner().invoke(main, ["columns", "--markdown"])
    assert res.exit_code == 0
    table = res.output.strip()
    assert table in (ROOT / "README.md").read_text()
    assert "| `block_q` | int |" in table and "| `git_sha` | text |" in table


def test_kernel_flops_is_said_alike_in_the_column_and_the_flop_section():
    """Issue 61 item 11: the column said "backward 2.5x forward" (read as fwd_bwd 2.5x) where the README's FLOP
    section said fwd_bwd is 3.5x: both say both, from flops.BWD_KERNEL_FACTOR."""
    from xlabench import flops

    backward, both = f"backward {flops.BWD_KERNEL_FACTOR:g}x forward", f"fwd_bwd {1 + flops.BWD_KERNEL_FACTOR:g}x forward"
    said = next(c.doc for c in schema.COLUMNS if c.name == "kernel_flops")
    assert backward in said and both in said, said
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## FLOP and MFU conventions", 1)[1].split("\n## ", 1)[0]
    line = next(x for x in section.split("\n- ") if "`kernel_flops`" in x)
    assert backward in " ".join(line.split()) and f"`{both.split()[0]}` {both.split()[1]}" in " ".join(line.split()), line
