"""The run summary (xlabench/report/summary.py): ok / failed / wrong rows in the table, skipped rows folded into
one line per reason with a count; and the shared 'which keys vary' and number helpers it uses."""

from __future__ import annotations

import io
import math
from pathlib import Path

import numpy as np
import pytest
from rich.console import Console

from xlabench import results
from xlabench.report import summary

MISSING = ("torch_xla environment missing (make torch-xla-env): {path} (the default location) is not an "
           "executable python; create it with `make torch-xla-env`")


def _row(backend: str, impl: str, batch: int, status: str = "ok", **extra) -> dict:
    row = {"backend": backend, "impl": impl, "global_batch": batch, "sharding": "fsdp", "status": status,
           "median_s": 0.25 if status == "ok" else None, "tflops_per_s": 1.5 if status == "ok" else None,
           "mfu": 0.4 if status == "ok" else None, "max_abs_err": 1e-6 if status == "ok" else None}
    row.update(extra)
    return row


def _rows() -> list[dict]:
    rows = [_row("jax", "naive", b) for b in (8, 16)]
    rows.append(_row("jax", "flash", 8, interpret=True))
    rows.append(_row("jax", "flash", 16, correct=False))
    rows.append(_row("jax", "splash", 8, "failed", error="RuntimeError: boom"))
    # Twelve torch_xla rows skipped for one cause, their paths differing; two for another.
    rows += [_row("torch_xla", impl, b, "skipped", error=MISSING.format(path=f"/home/u{b}/.venv-torch-xla/bin/python"))
             for impl in ("naive", "flash") for b in (8, 16, 32, 64, 128, 256)]
    rows += [_row("jax", "splash", b, "skipped", error="jax/splash runs on tpu, not cpu") for b in (16, 32)]
    return rows


def _text(renderable) -> str:
    console = Console(width=200, record=True, file=io.StringIO())
    console.print(renderable)
    return console.export_text()


def test_skipped_rows_fold_into_one_line_per_reason_with_a_count():
    rows = _rows()
    s = summary.build(rows, [{"global_batch": r["global_batch"], "sharding": r["sharding"]} for r in rows])
    assert [(g.reason, g.count) for g in s.skipped] == [
        ("torch_xla environment missing (make torch-xla-env)", 12), ("jax/splash runs on tpu, not cpu", 2)]
    lines = s.lines()
    assert lines[0].startswith("12 skipped: torch_xla environment missing (make torch-xla-env)\n    e.g. ")
    assert "/home/u8/.venv-torch-xla/bin/python" in lines[0]  # one example of the details
    assert lines[1] == "2 skipped: jax/splash runs on tpu, not cpu"  # nothing more to show: no example


def test_table_holds_ok_failed_and_wrong_rows_only():
    rows = _rows()
    s = summary.build(rows, [{"global_batch": r["global_batch"], "sharding": r["sharding"]} for r in rows])
    assert s.table is not None and s.table.row_count == 5
    text = _text(s.table)
    assert "skipped" not in text and "torch_xla" not in text
    assert "WRONG RESULT" in text and "flash*" in text and "failed E1" in text  # * : interpreted
    assert "E1 RuntimeError: boom" in _text(s)  # the error, whole, under the table
    assert " 250 " in text and " 40.0" in text  # median ms, MFU % (three digits)
    headers = [str(c.header) for c in s.table.columns]
    assert "global\nbatch" in headers and not any("sharding" in h for h in headers)  # varying params only
    assert "sharding=fsdp" in s.fixed_line() and "backend=jax" in s.fixed_line()  # the rest: one line


def test_all_skipped_gives_no_table():
    s = summary.build([_row("torch_xla", "naive", 8, "skipped", error="")], [{"global_batch": 8}])
    assert s.table is None and s.lines() == ["1 skipped: no reason given"]


def test_skip_reason_is_the_head_before_a_top_level_colon():
    assert summary.skip_reason("connect to HOST:1234 refused") == "connect to HOST:1234 refused"
    assert summary.skip_reason("a:  b: c") == "a"
    inside = "no auto-sharding (jax 0.7.1's one aborts on CPU: 'callback wasn't registered'); torch_xla runs auto"
    assert summary.skip_reason(inside) == inside  # the colon in brackets does not split it
    assert summary.skip_reason("it's 'a: b' here: details") == "it's 'a: b' here"
    assert summary.skip_reason(" \n") == "no reason given"
    long = summary.SkipGroup("x" * 500, 3, "x" * 500).line()
    assert long.startswith("3 skipped: xxx") and len(long) == len("3 skipped: ") + 200 and "\n" not in long


def test_varying_keys_in_order_with_empties_as_one_value():
    recs = [{"a": 1, "b": 64, "c": None, "d": [1, 2]}, {"a": 1, "b": 64.0, "c": float("nan"), "d": [1, 3]},
            {"a": np.int64(1), "b": 128, "c": ""}]
    assert results.varying(recs) == ["b", "d"]  # 64 == 64.0; None, NaN, '' and missing are one value
    assert results.varying(recs, ["d", "a", "b"]) == ["d", "b"]
    assert results.varying([{"a": 1}, {}]) == ["a"]
    assert results.varying([]) == []


def test_fmt_number():
    assert results.fmt_number(0.25, ".3f", 1e3) == "250.000"
    assert results.fmt_number("1.5", ".2f") == "1.50"
    assert results.fmt_number(None, ".2f") == results.fmt_number(math.nan, ".2f") == results.fmt_number("", "g") == ""


# ------------------------------------------------------------------------- 80 columns, real runs' rows

FIX = Path(__file__).parent / "fixtures"


def _real(name: str) -> summary.Summary:
    """The summary `xlabench run` printed for a real CPU run (its CSV kept as a fixture)."""
    df = results.read_rows(FIX / name)
    rows = [{k: (None if v != v else v) for k, v in r.items()} for r in df.to_dict("records")]
    params = [{k: r[k] for k in results.CASE_COLUMN_NAMES if k in r and k != "workload"} for r in rows]
    return summary.build(rows, params)


def _render(renderable, width: int) -> list[str]:
    console = Console(width=width, record=True, file=io.StringIO())
    console.print(renderable)
    return [line.rstrip() for line in console.export_text().splitlines()]


@pytest.mark.parametrize("name", ["run_gpt2_cpu.csv", "train.csv", "run_paged_cpu.csv", "run_attention_cpu.csv"])
def test_summary_fits_80_columns_with_no_cell_wrapped(name):
    s = _real(name)
    lines = _render(s, 80)
    assert max(len(line) for line in lines) <= 80
    table = s.table_for(80)
    # The same table with all the room it wants renders the same lines: no cell was wrapped or cut.
    assert _render(table, 80) == _render(table, 400)
    assert not any("…" in line for line in lines)  # nothing is cut: a failure's error is whole under the table
    headers = [str(c.header) for c in table.columns]
    assert "ms" in headers and ("spread" in headers or name == "train.csv")  # hand-made rows: no quantiles
    assert lines[0].startswith("fixed: ")


def test_constant_parameters_go_to_the_fixed_line_and_kv_seq_len_equal_to_seq_len_is_hidden():
    s = _real("run_attention_cpu.csv")
    headers = [str(c.header).replace("\n", "_") for c in s.table.columns]
    assert "kv_seq_len" not in headers and "seq_len" in headers
    fixed = s.fixed_line()
    assert "kv_seq_len=seq_len" in fixed and "dtype=float32" in fixed and "head_dim=64" in fixed
    assert not any(h in headers for h in ("dtype", "head_dim", "num_heads"))
    assert "mode" in headers and "causal" in headers  # varying: kept


def test_paged_at_80_columns_gives_up_the_flop_columns_and_says_so():
    s = _real("run_paged_cpu.csv")
    t80 = s.table_for(80)
    headers = [str(c.header) for c in t80.columns]
    assert "GB/s" in headers and "MBU %" in headers and "TFLOP/s" not in headers
    assert "not shown at 80 columns: TFLOP/s, MFU %" in str(t80.caption)
    assert "TFLOP/s" in [str(c.header) for c in s.table_for(200).columns]  # room enough: all of them
    # a parameter that follows others (total_pages from batch, context and page size) is no column
    assert not any("pages" in h and "total" in h for h in headers)


def test_spread_is_p10_to_p90_over_the_median():
    assert summary.spread({"p10_s": 0.9, "p90_s": 1.35, "median_s": 1.0}) == "45%"
    assert summary.spread({"p10_s": None, "p90_s": 1.0, "median_s": 1.0}) == ""


def test_rows_are_grouped_by_backend_under_a_backend_line():
    rows = [_row("jax", "naive", 8), _row("torch_xla", "naive", 8), _row("jax", "naive", 16),
            _row("torch_xla", "naive", 16)]
    s = summary.build(rows, [{"global_batch": r["global_batch"]} for r in rows])
    lines = _render(s, 80)
    body = [line.split()[:2] for line in lines if line.strip()]
    assert ["jax:"] in body and ["torch_xla:"] in body
    jax, tx = body.index(["jax:"]), body.index(["torch_xla:"])
    assert body[jax + 1:jax + 3] == [["naive", "8"], ["naive", "16"]] and body[tx + 1:tx + 3] == [["naive", "8"], ["naive", "16"]]


def test_a_failures_error_is_printed_whole_under_the_table_wrapped_to_the_console():
    """The note cell cut a failed row's error at the console's width (issue 50, item 14): the cell names the
    error ('failed E1'), and each distinct error is printed once, whole, under the table, wrapped to the
    console (a word longer than a line folds: no character is lost)."""
    long = "XlaRuntimeError: RESOURCE_EXHAUSTED: " + " ".join(f"word{i}" for i in range(60)) + " /a/" + "p" * 120
    rows = [_row("jax", "naive", 8), _row("jax", "flash", 8, "failed", error=long),
            _row("jax", "flash", 16, "failed", error=long), _row("jax", "splash", 8, "failed", error="RuntimeError: boom")]
    s = summary.build(rows, [{"global_batch": r["global_batch"]} for r in rows])
    for width in (80, 60):
        lines = _render(s, width)
        assert max(len(line) for line in lines) <= width and not any("…" in line for line in lines), lines
        flat = "".join("".join(lines).split())
        assert flat.count("".join(long.split())) == 1, lines  # whole, and once for its two rows
        assert "E2RuntimeError:boom" in flat
        cells = [line for line in lines if line.lstrip().startswith(("flash", "splash"))]
        assert [line.split()[-2:] for line in cells] == [["failed", "E1"], ["failed", "E1"], ["failed", "E2"]], lines


def test_a_user_impl_that_failed_to_import_is_not_marked_interpreted():
    """A user impl's row says interpret=true on CPU before its worker imports it; when the import fails
    nothing ran, interpreted or not: no '*' and no interpreter note."""
    rows = [_row("jax", "naive", 8),
            _row("jax", "mypkg.kernels:attn", 8, "failed", interpret=True,
                 error="impl 'mypkg.kernels:attn': no module named 'mypkg'")]
    s = summary.build(rows, [{"global_batch": 8, "sharding": "fsdp"}] * 2)
    text = _text(s.table)
    assert "mypkg.kernels:attn*" not in text and "mypkg.kernels:attn" in text
    assert summary.INTERPRET_NOTE not in s.notes


def test_a_suspect_row_is_marked_and_its_reason_is_a_footnote():
    rows = [_row("jax", "naive", 8), _row("jax", "flash", 8, correct=False, suspect="mfu_range: mfu 1.78 outside (0, 1]"),
            _row("jax", "flash", 16, suspect="tune_best: median 38.44 ms is 10.43x its search's best"),
            _row("jax", "naive", 16, suspect=float("nan"))]  # read back from a CSV: empty is NaN
    s = summary.build(rows, [{"global_batch": r["global_batch"], "sharding": r["sharding"]} for r in rows])
    text = " ".join(_text(s.table).split())  # the caption wraps at the table's width
    assert "WRONG RESULT; suspect [1]" in text and "suspect [2]" in text and "suspect [3]" not in text
    assert "[1] flash global_batch=8: mfu_range: mfu 1.78 outside (0, 1]" in text
    assert "[2] flash global_batch=16: tune_best: median 38.44 ms is 10.43x its search's best" in text
    assert "suspect: the row breaks an invariant (docs/audit.md)" in text


def test_compiles_summary_prints_each_error_whole_under_its_table():
    """`compile`'s table cut a row's error at 200 characters (issue 50, item 14): the note names it ('E1') and
    each distinct error is printed once, whole, under the table, wrapped to the console."""
    from xlabench.cli import compile as compile_cli

    long = "XlaRuntimeError: RESOURCE_EXHAUSTED: " + " ".join(f"allocation{i}" for i in range(40)) + " (see the HLO)"
    rows = [{"case_id": str(i), "impl": "flash", "status": status, "error": long if status != "compiled" else None}
            for i, status in enumerate(["compiled", "oom", "failed"])]
    cases = {r["case_id"]: type("C", (), {"params": {"seq_len": 512 * (1 + int(r["case_id"]))}})() for r in rows}
    lines = _render(compile_cli.summary_table(rows, cases), 100)
    flat = "".join("".join(lines).split())
    assert flat.count("".join(long.split())) == 1 and "…" not in flat, lines
    assert sum(line.rstrip(" │").endswith("E1") for line in lines) == 2, lines
