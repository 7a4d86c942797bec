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
