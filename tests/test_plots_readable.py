"""Every chart kind, drawn from real CPU runs (and compile rows shaped like the v4-8 gpt2 compile), read
as a reader would: nothing collides (measured on the laid-out figure, tests/_chart_overlaps.py), titles
are at most two lines with the versions in the footer, axes have units, the speedup axis is log with
the 1x line in view, the p10-p90 spread is drawn, and the paged chart has lines and one panel per slot."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.collections import PolyCollection
from matplotlib.figure import Figure
from _chart_overlaps import overlaps, title_lines
from test_explain_units import _explained_rows
from test_plots_fit import compile_rows

from xlabench.report import chartdata as cd
from xlabench.report import plots

FIX = Path(__file__).parent / "fixtures"
# The v4-8 gpt2-2b compile of docs/img/gpt2/fit-v4-8.png: GiB per device per (sharding, impl) and batch.
V4_BATCHES = [32, 48, 64, 80, 96, 112, 128, 136]
V4_GIB = {("fsdp", "naive"): [7.6, 9.8, 11.6, 13.6, 15.4, 17.5, 19.3, 20.3],
          ("fsdp", "flash"): [7.1, 8.9, 10.6, 12.4, 14.2, 16.0, 17.8, 18.7],
          ("2d", "naive"): [10.3, 13.3, 16.2, 19.1, 21.7, 24.6, 26.8, 28.1],
          ("2d", "flash"): [8.5, 11.2, 13.9, 16.5, 19.1, 22.5, 25.4, 26.8]}
V4_TOPOLOGY = "v4:2x2x1 (chip_config_name=megacore)"


@pytest.fixture(scope="module")
def attention() -> pd.DataFrame:
    return cd.load([FIX / "run_attention_cpu.csv"])


@pytest.fixture(scope="module")
def paged() -> pd.DataFrame:
    return cd.load([FIX / "run_paged_cpu.csv"])


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return cd.load([FIX / "run_gpt2_cpu.csv"])


@pytest.fixture(scope="module")
def v4() -> pd.DataFrame:
    spec = [(s, i, b, "compiled", g) for (s, i), gib in V4_GIB.items() for b, g in zip(V4_BATCHES, gib)]
    spec += [("auto", i, b, "skipped", None) for i in ("naive", "flash") for b in V4_BATCHES]
    return compile_rows(spec, target="v4-8", topology=V4_TOPOLOGY, cap=30.75)


def _charts(attention, paged, train, v4):
    return {"attention": plots.attention_tflops(attention), "speedup": plots.attention_speedup(attention),
            "paged": plots.paged_bandwidth(paged), "mfu_batch": plots.mfu_vs_batch(train),
            "sharding": plots.sharding_bars(train), "fit": plots.fit_memory(v4),
            # a real CPU run and a real v5e-8 compile of the attention suite; a real llama v4-8 compile
            "roofline": plots.roofline_chart.roofline(cd.load([FIX / "run_attention_roofline_cpu.csv",
                                                               FIX / "compile_attention_v5e8.compile.csv"])),
            "mfu_ceiling": plots.roofline_chart.mfu_ceiling(cd.load([FIX / "compile_llama_v4_8.compile.csv"])),
            "explain": plots.explain_chart.explain_bars(_explained_rows())}


@pytest.fixture(scope="module")
def charts(attention, paged, train, v4):
    return _charts(attention, paged, train, v4)


KINDS = ["attention", "speedup", "paged", "mfu_batch", "sharding", "fit", "roofline", "mfu_ceiling", "explain"]


def test_every_kind_is_checked():
    assert sorted(KINDS) == sorted(plots.KINDS)


@pytest.mark.parametrize("kind", KINDS)
def test_nothing_collides(charts, kind):
    assert overlaps(charts[kind]) == []


def test_the_overlap_check_sees_a_legend_on_a_panel_and_touching_ticks():
    """The helper must fail a chart that collides: a legend drawn over the panel, ticks 128 and 136 level."""
    fig = Figure(figsize=(4, 3))
    ax = fig.subplots()
    ax.plot([128, 136], [1, 2], label="a line")
    ax.set_xticks([128, 136], ["128", "136"])
    ax.set_xlim(0, 1000)
    ax.legend(loc="center")
    chart = plots.Chart("bad", fig)
    found = overlaps(chart)
    assert "tick '128' on tick '136'" in found and any(p.startswith("legend on the panel") for p in found)


@pytest.mark.parametrize("kind", KINDS)
def test_titles_have_two_lines_at_most_and_the_versions_are_in_the_footer(charts, kind):
    chart = charts[kind]
    assert title_lines(chart) <= 2
    title, footer = chart.figure._suptitle.get_text(), chart.figure._supxlabel.get_text()
    assert "jax 0.10.2 / jaxlib 0.10.2" in footer and "xlabench " in footer
    assert "jaxlib" not in title and "((" not in title.replace(" ", "") and "))" not in title.replace(" ", "")


@pytest.mark.parametrize("kind", KINDS)
def test_no_tick_label_is_rotated(charts, kind):
    for ax in charts[kind].figure.axes:
        assert all(t.get_rotation() == 0 for t in ax.get_xticklabels()), kind


@pytest.mark.parametrize("kind, xlabel, ylabel", [
    ("attention", "sequence length (tokens)", "TFLOP/s"), ("speedup", "sequence length (tokens)", "speedup over naive (×, log)"),
    ("paged", "batch (sequences) / context length (tokens)", "GB/s"), ("mfu_batch", "global batch (sequences)", "MFU (%)"),
    ("fit", "global batch (sequences)", "memory per device (GiB)")])
def test_axes_have_units(charts, kind, xlabel, ylabel):
    ax = charts[kind].figure.axes[0]
    assert (ax.get_xlabel(), ax.get_ylabel()) == (xlabel, ylabel)


def test_sharding_step_time_is_in_ms(charts):
    fig = charts["sharding"].figure
    twin = [a for a in fig.axes if a is not fig.axes[0] and a.bbox.bounds == fig.axes[0].bbox.bounds]
    assert [a.get_ylabel() for a in twin] == ["step time (ms)"]


def test_speedup_axis_is_log_with_the_1x_line_in_view(charts):
    for ax in [a for a in charts["speedup"].figure.axes if a.axison]:
        assert ax.get_yscale() == "log"
        lo, hi = ax.get_ylim()
        assert lo < 1 < hi
        points = [v for line in ax.get_lines() for v in np.asarray(line.get_ydata(), dtype=float) if np.isfinite(v)]
        assert lo <= min(points) and max(points) <= hi  # every point in view too


@pytest.mark.parametrize("kind", ["attention", "speedup", "paged", "mfu_batch"])
def test_the_p10_p90_spread_is_drawn_and_brackets_the_line(charts, kind, attention, paged, train):
    chart = charts[kind]
    bands = [c for ax in chart.figure.axes for c in ax.collections if isinstance(c, PolyCollection)]
    assert bands, kind
    legend = [t.get_text() for lg in chart.figure.legends + [a.get_legend() for a in chart.figure.axes if a.get_legend()]
              for t in lg.get_texts()]
    assert "p10-p90 of the iterations" in legend


def test_attention_band_is_the_rate_at_the_p90_and_p10_times(attention):
    rows = attention[attention["impl"] == "naive"].reset_index(drop=True)
    y = cd.metric(rows, "tflops_per_s")
    lo, hi = plots.spread_band(rows, y)
    ok = y.notna()
    flops = pd.to_numeric(rows["flops"])
    assert np.allclose(lo[ok], (flops / rows["p90_s"] / 1e12)[ok], rtol=1e-3)
    assert np.allclose(hi[ok], (flops / rows["p10_s"] / 1e12)[ok], rtol=1e-3)
    assert (lo[ok] <= y[ok]).all() and (y[ok] <= hi[ok]).all()


def test_legend_is_a_key_not_every_combination(charts):
    labels = [t.get_text() for t in charts["attention"].figure.legends[0].get_texts()]
    assert len(labels) == len(set(labels)) <= 12  # the real run draws 18 series per panel
    assert "backend=torch_xla" in labels and "num_kv_heads=2" in labels and "flash (interpret)" in labels
    mfu = [t.get_text() for t in charts["mfu_batch"].figure.legends[0].get_texts()]
    assert "naive" in mfu and "flash (interpret)" in mfu and not any(m.startswith("fsdp (interpret") for m in mfu)


def test_paged_has_lines_unique_legend_numeric_panels_and_no_empty_slot(charts, paged):
    chart = charts["paged"]
    panels = [a for a in chart.figure.axes if a.axison and a.get_title()]
    assert [a.get_title() for a in panels] == ["q_tokens=1 · page_size=16", "q_tokens=1 · page_size=64",
                                               "q_tokens=4 · page_size=16", "q_tokens=4 · page_size=64"]
    assert not [a for a in chart.figure.axes if not a.axison]  # four panels, a 2x2 grid: no empty slot
    for line in chart.artists.values():
        assert np.isfinite(np.asarray(line.get_ydata(), dtype=float)).sum() >= 2 or "(no usable point)" in str(
            line.get_label()) or len(line.get_xdata()) >= 2
    drawn = [ln for ln in chart.artists.values() if np.isfinite(np.asarray(ln.get_ydata(), dtype=float)).sum() >= 2]
    assert len(drawn) >= 10  # lines, not dots
    ticks = [t.get_text() for t in panels[0].get_xticklabels()]
    assert ticks == ["1\n256", "4\n4..512", "16\n4..1024"]  # batch, and its context under it
    labels = [t.get_text() for t in chart.figure.legends[0].get_texts()]
    assert len(labels) == len(set(labels))


def test_paged_panels_sort_numerically_when_contexts_vary_per_batch():
    rows = cd.load([FIX / "paged.csv"])  # batch 1 and 4, three contexts each: context on x
    more = rows.assign(batch=16, case_id=rows["case_id"] + "x")
    chart = plots.paged_bandwidth(pd.concat([rows, more], ignore_index=True))
    titles = [a.get_title() for a in chart.figure.axes if a.axison]
    assert titles == ["batch=1", "batch=4", "batch=16"]
    assert chart.figure.axes[0].get_xlabel() == "context length (tokens)"


def test_grid_leaves_no_empty_slot_where_a_width_fills_it():
    assert plots.grid(4, 2) == (2, 2) and plots.grid(3, 2) == (1, 3) and plots.grid(6, 4) == (2, 3)
    assert plots.grid(1, 2) == (1, 1) and plots.grid(2, 2) == (1, 2)
    assert plots.grid(7, 2) == (4, 2)  # nothing fills 7: the spare slot takes the legend


def test_fit_v4_8_ticks_128_and_136_do_not_collide_and_title_has_no_nested_brackets(charts):
    chart = charts["fit"]
    title = chart.figure._suptitle.get_text()
    assert "target v4-8 (v4:2x2x1, megacore)" in title and cd.COMPILE_NOTE in title
    ax = chart.figure.axes[0]
    labels = [t.get_text() for t in ax.get_xticklabels() if t.get_visible()]
    assert "128" in labels and "136" in labels
    assert overlaps(chart) == []


def _two_ticks(x: tuple[float, float], xlim: tuple[float, float]) -> Figure:
    fig = Figure(figsize=(4, 3), layout="constrained")
    ax = fig.subplots()
    ax.plot(x, [1, 2])
    ax.set_xticks(x, [str(int(v)) for v in x])
    ax.set_xlim(*xlim)
    return fig


def _drawn(monkeypatch) -> list[Figure]:
    drawn: list[Figure] = []
    real = Figure.draw_without_rendering
    monkeypatch.setattr(Figure, "draw_without_rendering", lambda self: (drawn.append(self), real(self))[1])
    return drawn


def test_ticks_far_apart_are_not_measured_and_near_ones_are(monkeypatch):
    """Measuring tick labels takes a draw of the whole figure (a third of a chart's time): a chart whose
    labels cannot touch however far the layout narrows its panels is not measured; one that may is."""
    from xlabench.report import chart_parts

    drawn = _drawn(monkeypatch)
    far, near = _two_ticks((100, 900), (0, 1000)), _two_ticks((128, 136), (0, 1000))
    chart_parts._stagger_ticks(far)
    assert drawn == []
    chart_parts._stagger_ticks(near)
    assert drawn == [near]
    assert overlaps(plots.Chart("near", near)) == []


def test_a_saved_chart_is_checked_on_its_own_layout(monkeypatch, tmp_path):
    """Should the layout narrow a panel more than the first look allows for, the saved figure is measured
    on its own layout and saved again with its tick labels apart."""
    from xlabench.report import chart_parts

    monkeypatch.setattr(chart_parts, "LAYOUT_NARROWS_TO", 100.0)  # a first look that is always fooled
    fig = _two_ticks((128, 136), (0, 1000))
    chart = plots.Chart("near", fig)
    chart_parts._stagger_ticks(fig)
    assert "tick '128' on tick '136'" in overlaps(plots.Chart("copy", _two_ticks((128, 136), (0, 1000))))
    chart.save(tmp_path / "near", ["png", "svg"])
    assert overlaps(chart) == []
    assert (tmp_path / "near.png").stat().st_size > 0 and (tmp_path / "near.svg").stat().st_size > 0


@pytest.mark.parametrize("kind", KINDS)
def test_legend_entries_are_unique(charts, kind):
    fig = charts[kind].figure
    labels = [t.get_text() for lg in fig.legends + [a.get_legend() for a in fig.axes if a.get_legend()]
              for t in lg.get_texts()]
    bases = [lab.removesuffix(" (no usable point)") for lab in labels]
    assert len(bases) == len(set(bases)), labels
