"""The run summary (xlabench/report/summary.py): ok / failed / wrong rows in the table, skipped rows folded into
one line per reason with a count; and the shared 'which keys vary' and number helpers it uses."""

from __future__ import annotations

import io
import math

import numpy as np
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
    assert "WRONG RESULT" in text and "interpret" in text and "RuntimeError: boom" in text
    assert "250.000" in text and "40.00" in text  # median ms, MFU %
    headers = [c.header for c in s.table.columns]
    assert "global_batch" in headers and "sharding" not in headers  # only the varying params are columns


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
