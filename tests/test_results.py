"""The CSV schema is the one list of columns; rows survive kills; foreign files are refused clearly."""

from __future__ import annotations

import pandas as pd
import pytest

from xlabench import results
from xlabench.workloads import PARAMS


@pytest.mark.parametrize("workload", sorted(PARAMS))
def test_every_workload_param_has_a_column(workload):
    # a field the model does not dump (train's per_device_batch: it resolves into global_batch) has no column
    missing = {n for n, f in PARAMS[workload].model_fields.items() if not f.exclude} - set(results.CASE_COLUMN_NAMES)
    assert not missing, f"{workload} params without a CSV column: {missing}"


def test_column_names_unique_and_documented():
    assert len(results.COLUMN_NAMES) == len(set(results.COLUMN_NAMES))
    assert all(c.doc for c in results.COLUMNS)


def _row(i: int, **kw):
    return {"schema_version": results.SCHEMA_VERSION, "run_id": "r1", "suite": "s", "case_id": f"c{i}",
            "status": "ok", "median_s": 0.5 + i, "causal": True, **kw}


def test_writer_roundtrip_and_samples(tmp_path):
    files = results.RunFiles(tmp_path / "s" / "r1.csv")
    with results.RowWriter(files) as w:
        w.write(_row(0), [0.4, 0.5, 0.6])
        w.write(_row(1, status="failed", error="boom, with a comma\nand a newline"), [])
    df = results.read_rows(files.csv)
    assert list(df.columns) == results.COLUMN_NAMES
    assert df.loc[1, "error"] == "boom, with a comma\nand a newline"
    assert df["causal"].dtype == bool and df.loc[0, "causal"]  # read back as a boolean, not the text "True"
    s = results.read_samples(files.csv)
    assert list(s.seconds) == [0.4, 0.5, 0.6] and set(s.case_id) == {"c0"}


def test_appending_to_existing_file_keeps_one_header(tmp_path):
    files = results.RunFiles(tmp_path / "r1.csv")
    with results.RowWriter(files) as w:
        w.write(_row(0))
    with results.RowWriter(files) as w:
        w.write(_row(1))
    assert len(results.read_rows(files.csv)) == 2


def test_truncated_last_line_keeps_complete_rows(tmp_path):
    files = results.RunFiles(tmp_path / "r1.csv")
    with results.RowWriter(files) as w:
        for i in range(3):
            w.write(_row(i))
    text = files.csv.read_text()
    files.csv.write_text(text[: len(text) - 40])  # a kill in the middle of the last row
    df = results.read_rows(files.csv, cut_last=True)  # what --resume reads
    assert list(df.case_id) == ["c0", "c1"]
    with pytest.raises(results.ResultsFileError, match=r"r1\.csv: results CSV is truncated"):
        results.read_rows(files.csv)  # what report, plot and compare read


def test_unknown_column_in_row_is_a_bug_not_silently_dropped(tmp_path):
    with results.RowWriter(results.RunFiles(tmp_path / "r.csv")) as w:
        with pytest.raises(ValueError, match="not in the schema"):
            w.write(_row(0, colour="blue"))


@pytest.mark.parametrize("content,message", [
    ("", "empty file"),
    ("a,b\n1,2\n", "not an xlabench results CSV"),
])
def test_foreign_files_refused(tmp_path, content, message):
    p = tmp_path / "x.csv"
    p.write_text(content)
    with pytest.raises(results.ResultsFileError, match=message):
        results.read_rows(p)


def test_schema_version_mismatch_refused(tmp_path):
    files = results.RunFiles(tmp_path / "r.csv")
    with results.RowWriter(files) as w:
        w.write(_row(0))
    df = pd.read_csv(files.csv)
    df["schema_version"] = 99
    df.to_csv(files.csv, index=False)
    with pytest.raises(results.ResultsFileError, match="schema version"):
        results.read_rows(files.csv)


def test_case_id_ignores_none_and_order():
    a = results.case_id("attention", "jax", "naive", {"seq_len": 128, "batch": 2, "block_q": None})
    b = results.case_id("attention", "jax", "naive", {"batch": 2, "seq_len": 128})
    c = results.case_id("attention", "jax", "flash", {"batch": 2, "seq_len": 128})
    assert a == b != c


def test_readme_documents_every_column():
    """The README's table is generated from the schema (benchmarks/update_readme_columns.py)."""
    from pathlib import Path

    import benchmarks.update_readme_columns as upd

    readme = (Path(__file__).resolve().parent.parent / "README.md").read_text()
    assert upd.table() in readme, "README column table is stale: run python benchmarks/update_readme_columns.py"


@pytest.mark.parametrize("text", ["0123456789", "12345e6789", "1234567", "007", "1e5"])
def test_text_columns_read_back_as_written(tmp_path, text):
    """A short sha of digits (or digits around an 'e') is text, not a number: read as written, leading zero
    and all. It flaked CI: a random commit sha made history order runs by start time."""
    files = results.RunFiles(tmp_path / "r1.csv")
    with results.RowWriter(files) as w:
        w.write(_row(0, git_sha=text, hostname=text, suite=text, run_id=text, profile=text))
    r = results.read_rows(files.csv).iloc[0]
    assert [r.git_sha, r.hostname, r.suite, r.run_id, r.profile] == [text] * 5
