"""A block-size sweep with the kernel's default among its configurations (null block sizes, as the README's
own sweep and autotuned rows have): charts, the report and `best` must take the NaN block values."""

from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest
from click.testing import CliRunner

from xlabench.cli import main

FIX = Path(__file__).parent / "fixtures"
BLOCKS = [(None, None), (128, 128), (64, 128), (128, 256)]


@pytest.fixture(scope="module")
def sweep_csv(tmp_path_factory) -> Path:
    """The attention fixture with its kernel rows swept over BLOCKS (the default, unset, first)."""
    raw = pd.read_csv(FIX / "attention_cpu.csv", dtype={"case_id": str, "run_id": str})
    out = [raw[raw["impl"] == "naive"]]
    kernels = raw[raw["impl"] != "naive"]
    for i, (bq, bk) in enumerate(BLOCKS):
        rows = kernels.copy()
        rows["block_q"], rows["block_k"] = bq, bk
        rows["case_id"] = rows["case_id"] + f"b{i}"
        out.append(rows)
    path = tmp_path_factory.mktemp("blocks") / "blocks.csv"
    pd.concat(out).to_csv(path, index=False)
    return path


def test_plot_and_report_take_a_sweep_with_null_blocks(sweep_csv, tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["plot", str(sweep_csv), "--out", str(tmp_path / "p"), "--format", "png"])
    assert res.exit_code == 0, res.output
    assert "file(s)" in res.output and not res.output.startswith("0 file")
    res = runner.invoke(main, ["report", str(sweep_csv), "--out", str(tmp_path / "r.md")])
    assert res.exit_code == 0, res.output
    md = (tmp_path / "r.md").read_text()
    assert "Best configuration" in md


def test_best_takes_a_sweep_with_null_blocks(sweep_csv, tmp_path):
    res = CliRunner().invoke(main, ["best", str(sweep_csv)])
    assert res.exit_code == 0, res.output


def test_report_gives_every_block_configuration_the_naive_baseline(sweep_csv, tmp_path):
    from xlabench.report import chartdata as cd
    from xlabench.report import markdown

    md = markdown.build(cd.load([sweep_csv]), [sweep_csv], {}, tmp_path / "r.md")
    body = md.split("## attention", 1)[1].split("## ", 1)[0]
    rows = [ln.split("|")[1:-1] for ln in body.splitlines() if ln.startswith("| ") and "---" not in ln][1:]
    assert {r[5].strip() for r in rows} == {"default", "128", "64"}  # block_q: the unset one reads "default"
    assert all(r[11].strip() for r in rows)  # naive ms on every row, not only the default configuration's


def test_a_block_sweep_runs_an_impl_that_takes_no_blocks_once_per_shape(tmp_path):
    """Issue 50 item 11: naive takes no block sizes, and a 2x2 block_q x block_k sweep ran 4 identical naive
    cases (its worker clears the blocks). Flash takes both: 4 cases; a user impl declares its own in its code
    (the parent never imports it): 4 cases, its worker decides."""
    from xlabench import suite

    p = tmp_path / "s.yaml"
    p.write_text("name: s\nworkload: attention\nbackends: [jax]\nimpls: [naive, xla_sdpa, flash, 'mymod:fn']\n"
                 "params: {batch: 1, num_heads: 2, head_dim: 32, dtype: float32}\n"
                 "matrix: {seq_len: [256, 512], block_q: [64, 128], block_k: [64, 128]}\n")
    cases = suite.load(p).cases()
    per_impl = {i: sum(c.impl == i for c in cases) for i in ("naive", "xla_sdpa", "flash", "mymod:fn")}
    assert per_impl == {"naive": 2, "xla_sdpa": 2, "flash": 8, "mymod:fn": 8}
    naive = [c for c in cases if c.impl == "naive"]
    assert all(c.params.get("block_q") is None and c.params.get("block_k") is None for c in naive)
    assert len({c.case_id for c in cases}) == len(cases)
