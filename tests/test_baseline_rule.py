"""One naive time per shape (#40 item 3): in a block-size sweep naive runs once per block setting, and the
summary's naive column, the speedups and the speedup chart must all use the same baseline time: the
median of the naive rows' pooled samples (else the median of their medians). Expected figures are
worked out by hand from the synthetic samples below."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests._gate_data import case, write_run
from xlabench import results
from xlabench.report import chartdata as cd
from xlabench.report import markdown, plots

MS = 1e-3
# naive, one row per block setting: the first ran slow (3.9 ms), the others about 1.2 ms
NAIVE = {128: [3.9, 3.9, 3.9], 256: [1.2, 1.1, 1.3], 512: [1.0, 1.4, 1.15]}
FLASH = {128: [0.65, 0.65, 0.65], 256: [0.52, 0.52, 0.52], 512: [0.5, 0.5, 0.5]}
# pooled naive samples, sorted: 1.0 1.1 1.15 1.2 1.3 1.4 3.9 3.9 3.9 -> the 5th of 9 is 1.3 ms
POOLED_MS = 1.3
# without samples: the median of the row medians 3.9, 1.2, 1.15 -> 1.2 ms
MEDIANS_MS = 1.2


@pytest.fixture
def sweep(tmp_path) -> Path:
    entries = [(case(impl, 1024, block_q=b, block_k=b), np.array(s) * MS)
               for impl, table in (("naive", NAIVE), ("flash", FLASH)) for b, s in table.items()]
    return write_run(tmp_path / "sweep.csv", entries)


def _flash(df: pd.DataFrame, values: pd.Series) -> dict[int, float]:
    f = df["impl"] == "flash"
    return dict(zip(pd.to_numeric(df.loc[f, "block_q"]).astype(int), values[f]))


def test_a_block_sweeps_speedups_use_the_pooled_naive_samples(sweep):
    df = cd.load([sweep])
    assert _flash(df, cd.baseline_seconds(df) / cd.metric(df, "median_s")) == pytest.approx({128: 1.3 / 0.65, 256: 1.3 / 0.52,
                                                                       512: 1.3 / 0.5})
    assert list(cd.baseline_seconds(df) / MS) == pytest.approx([POOLED_MS] * 6)  # every row, naive too


def test_without_samples_the_baseline_is_the_median_of_the_naive_medians(sweep):
    results.RunFiles(sweep).samples.unlink()
    df = cd.load([sweep])
    assert _flash(df, cd.baseline_seconds(df) / cd.metric(df, "median_s")) == pytest.approx({128: 1.2 / 0.65, 256: 1.2 / 0.52,
                                                                       512: 1.2 / 0.5})
    assert list(cd.baseline_seconds(df) / MS) == pytest.approx([MEDIANS_MS] * 6)


def test_the_summary_and_the_chart_show_the_same_naive_time_and_speedups(sweep):
    df = cd.load([sweep])
    md = markdown.summary(df[df["workload"] == "attention"])
    lines = [ln for ln in md.splitlines() if "| flash |" in ln]
    assert len(lines) == 3, md
    for line, sp in zip(lines, ("2.00x", "2.50x", "2.60x")):  # 1.3 / 0.65, 1.3 / 0.52, 1.3 / 0.5
        assert f"| {POOLED_MS:.4g} | {sp} |" in line, line
    chart = plots.attention_speedup(df)
    drawn = sorted(float(y) for line in chart.figure.axes[0].get_lines() if line.get_label().startswith("flash")
                   for y in line.get_ydata())
    assert drawn == pytest.approx([1.3 / 0.65, 1.3 / 0.52, 1.3 / 0.5])
