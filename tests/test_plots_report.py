"""`xlabench report` content and the plot/report commands (CliRunner), including bad input (exit 2)."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from xlabench.report import chartdata as cd
from xlabench.report import markdown as report
from xlabench.cli import main

FIX = Path(__file__).parent / "fixtures"
ALL = [FIX / "attention_cpu.csv", FIX / "train.csv", FIX / "paged.csv"]


def table_rows(md: str, section: str) -> list[list[str]]:
    """The body rows of the first markdown table after a heading, as lists of cells."""
    lines, started = [], False
    for ln in md.split(section, 1)[1].splitlines()[1:]:
        if ln.startswith("|"):
            started = True
            lines.append(ln)
        elif started:
            break
    return [[c.strip() for c in re.split(r"(?<!\\)\|", ln)[1:-1]] for ln in lines[2:]]


@pytest.fixture(scope="module")
def md(tmp_path_factory) -> str:
    df = cd.load(ALL)
    out = tmp_path_factory.mktemp("rep") / "report.md"
    return report.build(df, ALL, {}, out)


def test_report_environment_has_one_line_per_run(md):
    rows = table_rows(md, "## Environment")
    assert [r[0] for r in rows] == ["attention", "gpt2", "paged_attention"]
    train = rows[1]
    assert train[4] == "cpu ×8" and train[5] == "jax 0.10.2 / jaxlib 0.10.2"
    assert train[-1] == "14 ok, 2 failed, 3 skipped"
    assert "interpreter: a pipeline check, not kernel speed" in md


def test_report_attention_best_impl_per_shape_and_speedup(md):
    rows = table_rows(md, "## attention")
    raw = pd.read_csv(FIX / "attention_cpu.csv")
    assert len(rows) == 12  # 3 sequence lengths x causal x mode
    for r in rows:
        batch, seq, _kv, causal, mode = r[:5]
        sel = raw[(raw.seq_len == int(seq)) & (raw.causal == (causal == "causal")) & (raw["mode"] == mode)]
        best = sel.loc[sel.median_s.idxmin()]
        naive = sel[sel.impl == "naive"].median_s.iloc[0]
        assert r[5].split(" ")[0] == best.impl
        assert float(r[6]) == pytest.approx(best.median_s * 1e3, rel=1e-3)
        assert float(r[8]) == pytest.approx(best.mfu * 100, abs=0.006)
        assert float(r[10].rstrip("x")) == pytest.approx(naive / best.median_s, abs=0.006)
        assert r[-1] == "5/5"


def test_report_train_rows_without_a_usable_case(md):
    rows = {(r[0], r[1]): r for r in table_rows(md, "## gpt2 (train)")}
    assert rows[("32", "tp")][3] == "(none usable)" and rows[("32", "tp")][-1] == "0/1"
    assert rows[("16", "fsdp")][3] == "naive" and rows[("16", "fsdp")][-1] == "1/2"  # flash failed there


def test_report_lists_failed_skipped_and_wrong_cases_with_reasons(md):
    section = md.split("## Failed, skipped and wrong cases", 1)[1]
    assert "| failed | flash (interpret) | global_batch=16, sharding=fsdp, mesh=fsdp=8 | XlaRuntimeError: " \
           "RESOURCE_EXHAUSTED: out of memory allocating 1.2GiB |" in section
    assert section.count("JAX has no public auto-sharding") == 1  # three skipped rows, one reason: one line
    assert "| 3 cases skipped | naive | <details><summary>3 case ids</summary>" in section
    assert "| skipped | ragged_paged (interpret) | batch=1, context_lens=fixed:512 |" in section
    assert "| wrong result | paged (interpret) | batch=1, context_lens=fixed:2048 | max_abs_err 0.3 > err_tol 0.01 |" \
           in section
    assert "### attention" not in section  # every attention case ran


def test_report_cells_stay_on_one_line():
    assert report.table(["a"], [["x | y\nz"]]).splitlines()[-1] == "| x \\| y z |"


# ------------------------------------------------------------------------------------------------ CLI


def test_plot_command_writes_charts_per_suite(tmp_path):
    res = CliRunner().invoke(main, ["plot", str(FIX / "train.csv"), str(FIX / "paged.csv"), "--out", str(tmp_path)])
    assert res.exit_code == 0, res.output
    for f in ("gpt2/mfu_batch.png", "gpt2/mfu_batch.svg", "gpt2/sharding.png", "gpt2/sharding.svg",
              "paged_attention/paged.png", "paged_attention/paged.svg"):
        assert (tmp_path / f).stat().st_size > 1000, f
    assert "6 file(s) from 30 row(s) of 2 run file(s)" in res.output


def test_plot_kind_and_format(tmp_path):
    res = CliRunner().invoke(main, ["plot", str(FIX / "train.csv"), "--out", str(tmp_path), "--kind", "sharding",
                                    "--format", "svg", "--global-batch", "32"])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in (tmp_path / "gpt2").iterdir()) == ["sharding.svg"]


def test_plot_without_arguments_takes_the_newest_run_of_every_suite(tmp_path):
    results = tmp_path / "results"
    (results / "attention").mkdir(parents=True)
    (results / "gpt2").mkdir()
    shutil.copy(FIX / "paged.csv", results / "attention" / "20200101-000000-0000.csv")  # older run
    shutil.copy(FIX / "attention_cpu.csv", results / "attention" / "20261202-111244-7e06.csv")
    shutil.copy(FIX / "train.csv", results / "gpt2" / "20261202-100000-t001.csv")
    (results / "gpt2" / "notes.csv").write_text("a,b\n1,2\n")
    (results / "attention" / "20261202-111244-7e06.samples.csv").write_text("run_id,case_id,iteration,seconds\n")
    res = CliRunner().invoke(main, ["plot", "--results", str(results), "--out", str(tmp_path / "plots"),
                                    "--format", "png"])
    assert res.exit_code == 0, res.output
    made = sorted(p.relative_to(tmp_path / "plots").as_posix() for p in (tmp_path / "plots").rglob("*.png"))
    assert made == ["attention/attention.png", "attention/speedup.png", "gpt2/mfu_batch.png", "gpt2/sharding.png"]
    assert "notes.csv: not an xlabench results CSV" in res.output


def test_report_command_writes_markdown_with_relative_image_links(tmp_path):
    out = tmp_path / "ci" / "report.md"
    res = CliRunner().invoke(main, ["report", *map(str, ALL), "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = out.read_text()
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    assert len(links) == 5 and all(not Path(link).is_absolute() for link in links)
    assert all((out.parent / link).is_file() for link in links)
    assert "report_plots/gpt2/mfu_batch.png" in links
    assert "## Failed, skipped and wrong cases" in text


@pytest.mark.parametrize("args, message", [
    (["plot", "missing.csv"], "missing.csv: no such file"),
    (["plot", "pyproject.toml"], "not an xlabench results CSV"),
    (["report", "missing.csv"], "missing.csv: no such file"),
    (["plot", str(FIX / "train.csv"), "--kind", "paged"], "paged needs paged_attention rows"),
    (["plot", str(FIX / "train.csv"), "--kind", "pie"], "--kind pie: unknown"),
    (["plot", str(FIX / "train.csv"), "--format", "gif"], "--format 'gif'"),
    (["plot", str(FIX / "train.csv"), "--global-batch", "12"], "no train rows at global batch 12"),
])
def test_bad_input_exits_2_with_a_clear_message(tmp_path, args, message):
    res = CliRunner().invoke(main, [*args, "--out", str(tmp_path / "out.md" if args[0] == "report" else tmp_path)])
    assert res.exit_code == 2, res.output
    assert message in res.output
    assert "Traceback" not in res.output


def test_empty_inputs_exit_2(tmp_path):
    header_only = tmp_path / "run.csv"
    header_only.write_text((FIX / "train.csv").read_text().splitlines()[0] + "\n")
    res = CliRunner().invoke(main, ["plot", str(header_only), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no rows" in res.output
    res = CliRunner().invoke(main, ["plot", "--results", str(tmp_path / "nothing-here"), "--out", str(tmp_path)])
    assert res.exit_code == 2 and "no such folder" in res.output


@pytest.mark.slow  # starts a process
def test_module_entry_point_reports_bad_input(tmp_path):
    """`python -m xlabench.cli` runs cli.py as __main__: the plot command must still be there and exit 2."""
    proc = subprocess.run([sys.executable, "-m", "xlabench", "plot", str(tmp_path / "x.csv")],
                          capture_output=True, text=True, timeout=120, cwd=Path(__file__).parent.parent)
    assert proc.returncode == 2, proc.stderr
    assert "x.csv: no such file" in proc.stderr


def test_report_folds_identical_skip_rows_into_one_line_with_the_case_ids_collapsed():
    """The real CPU attention run: 24 flash cases skipped for GQA, 12 pallas_gpu ones, one line each."""
    df = cd.load([FIX / "run_attention_cpu.csv"])
    section = report.problems(df)
    lines = [line for line in section.splitlines() if line.startswith("| ") and "skipped" in line]
    assert len(lines) == 2
    flash = next(line for line in lines if "flash_attention needs num_kv_heads" in line)
    assert flash.startswith("| 24 cases skipped | flash (interpret) | <details><summary>24 case ids</summary>")
    skipped = df[(df["status"] == "skipped") & (df["impl"] == "flash")]
    assert len(skipped) == 24 and all(f"`{c}`" in flash for c in skipped["case_id"])
    assert "</details> | Pallas TPU flash_attention needs num_kv_heads == num_heads" in flash
    assert "| 12 cases skipped | pallas_gpu (interpret) |" in section


def test_report_marks_a_suspect_row_and_gives_its_reason(tmp_path):
    df = pd.read_csv(FIX / "attention_cpu.csv", dtype={"case_id": str, "run_id": str})
    best = df[df["status"] == "ok"].sort_values("median_s").index[0]
    df["suspect"] = None
    df.loc[best, "suspect"] = "tune_best: median 38.44 ms (device clock) is 10.43x its search's best"
    path = tmp_path / "attention.csv"
    df.to_csv(path, index=False)
    md = report.build(cd.load([path]), [path], {}, tmp_path / "report.md")
    marked = [r for r in table_rows(md, "## attention") if "(suspect)" in r[5]]
    assert len(marked) == 1 and marked[0][5].startswith(f"{df.loc[best, 'impl']}")
    assert "break an invariant (docs/audit.md)" in md
    (row,) = table_rows(md, "## Suspect rows")
    assert row[0] == df.loc[best, "impl"] and row[2] == "tune_best: median 38.44 ms (device clock) is 10.43x its search's best"
    assert f"seq_len={int(df.loc[best, 'seq_len'])}" in row[1]
    clean = report.build(cd.load([FIX / "attention_cpu.csv"]), [FIX / "attention_cpu.csv"], {}, tmp_path / "r.md")
    assert "(suspect)" not in clean and "## Suspect rows" not in clean


def test_a_frame_made_from_a_loaded_one_shares_its_attrs_uncopied():
    # pandas deep-copies attrs into every derived frame (issue 61 item 6: 2 s of a report's 11 s)
    df = cd.load(ALL)
    sub = df[df["status"] == "ok"].reset_index(drop=True)
    assert sub.attrs["sources"] is df.attrs["sources"] and sub.attrs["published"] is df.attrs["published"]
    assert list(sub.attrs["sources"]) == [str(p) for p in ALL]
