"""An output path that cannot be written (a file where a folder must be) gives one error line naming the
option and exit 2 in every command that writes: report, plot, history html, as run --out does."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

import _history_data as hd
from xlabench.cli import main
from xlabench.results import OutputPathError, make_dir

FIX = Path(__file__).parent / "fixtures"


@pytest.fixture
def blocker(tmp_path) -> Path:
    f = tmp_path / "a-file"
    f.write_text("a file, not a folder")
    return f


def _one_error(res, option: str) -> str:
    assert res.exit_code == 2, res.output
    lines = [ln for ln in res.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), res.output
    assert option in lines[0] and "not a folder" in lines[0], lines[0]
    return lines[0]


def test_make_dir_names_the_file_in_the_way(blocker):
    with pytest.raises(OutputPathError, match=f"--out: {blocker} is not a folder"):
        make_dir(blocker / "sub" / "deeper", "--out", "charts go to OUT/<suite>/")
    assert make_dir(blocker.parent / "new" / "dir", "--out", "x").is_dir()


def test_report_plot_and_history_html_refuse_a_file_as_folder(blocker, tmp_path):
    runner = CliRunner()
    csv = str(FIX / "attention_cpu.csv")
    _one_error(runner.invoke(main, ["report", csv, "--out", str(blocker / "r.md"), "--no-charts"]), "--out")
    _one_error(runner.invoke(main, ["report", csv, "--out", str(tmp_path / "r.md"),
                                    "--plots-dir", str(blocker / "p")]), "--plots-dir")
    _one_error(runner.invoke(main, ["plot", csv, "--out", str(blocker / "p"), "--format", "png"]), "--out")
    store = f"sqlite:///{tmp_path / 'h.sqlite'}"
    hd.write_series(tmp_path / "results" / "attention", [1.0, 1.0, 1.0])
    res = runner.invoke(main, ["history", "add", "--history", store, str(tmp_path / "results" / "attention")])
    assert res.exit_code == 0, res.output
    _one_error(runner.invoke(main, ["history", "html", "--history", store, "-o", str(blocker / "site")]), "--output")


# ------------------------------------------------------------------ issue 50, item 7: before the work

def test_item7_every_writing_command_checks_its_output_before_the_work(blocker, tmp_path):
    """merge -o, compare --json/--markdown, gate --save-baseline, explain (its JSON beside the run) and run
    --trace: each gave a traceback, some after all the work. One helper (cli.common.output_file /
    output_dir) refuses them up front, one line naming the option, exit 2."""
    import shutil

    runner = CliRunner()
    gate_csv = str(FIX / "gate_attention_cpu.csv")
    _one_error(runner.invoke(main, ["merge", gate_csv, "-o", str(blocker / "m.csv")]), "-o")
    for opt in ("--json", "--markdown"):
        _one_error(runner.invoke(main, ["compare", gate_csv, gate_csv, opt, str(blocker / "v.out")]), opt)
    suite = tmp_path / "s.yaml"
    suite.write_text("name: s\nworkload: attention\nbackends: [jax]\nimpls: [naive]\n"
                     "params: {batch: 1, num_heads: 1, seq_len: 32, head_dim: 16, dtype: float32}\n")
    _one_error(runner.invoke(main, ["gate", str(suite), "--baseline", str(blocker / "b.csv"), "--save-baseline",
                                    "--out", str(tmp_path / "res")]), "--baseline")
    _one_error(runner.invoke(main, ["run", str(suite), "--trace", str(blocker / "t"), "--out",
                                    str(tmp_path / "res")]), "--trace")
    # explain writes RUN.explain.json beside the run: a folder in its way is refused before any trace is read
    run = tmp_path / "run"
    run.mkdir()
    shutil.copy(gate_csv, run / "r.csv")
    (run / "r.explain.json").mkdir()
    res = runner.invoke(main, ["explain", str(run / "r.csv")])
    assert res.exit_code == 2 and "Traceback" not in res.output and "r.explain.json" in res.output, res.output
