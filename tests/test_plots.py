"""Charts drawn from fixture rows: the data each artist holds must be the rows' figures, gaps included."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from matplotlib.colors import to_rgba

from _chart_overlaps import overlaps

from xlabench.impls import kernels
from xlabench.report import chartdata as cd
from xlabench.report import plots

FIX = Path(__file__).parent / "fixtures"
TRAIN_PANEL = "jax · cpu · gpt2-tiny"


def raw(name: str) -> pd.DataFrame:
    """The fixture as plain pandas reads it: the expected values, independent of chartdata."""
    return pd.read_csv(FIX / name, dtype={"case_id": str, "run_id": str})


@pytest.fixture(scope="module")
def train() -> pd.DataFrame:
    return cd.load([FIX / "train.csv"])


@pytest.fixture(scope="module")
def attention() -> pd.DataFrame:
    return cd.load([FIX / "attention_cpu.csv"])


@pytest.fixture(scope="module")
def paged() -> pd.DataFrame:
    return cd.load([FIX / "paged.csv"])


def expected(df: pd.DataFrame, where: dict, x: str, y: str, scale: float = 1.0) -> tuple[list, list]:
    """(x, y) of the rows matching `where`, sorted by x, y NaN unless the row is ok and correct."""
    sel = df
    for k, v in where.items():
        sel = sel[sel[k] == v]
    sel = sel.sort_values(x)
    ok = (sel["status"] == "ok") & (sel["correct"].astype(str).str.lower() != "false")
    return sel[x].astype(float).tolist(), [v * scale if good else np.nan for v, good in zip(sel[y], ok)]


def same(a, b) -> bool:
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True, rtol=1e-12)


# ---------------------------------------------------------------------------------------- MFU vs batch


def test_mfu_vs_batch_lines_hold_the_rows_mfu_in_percent(train):
    chart = plots.mfu_vs_batch(train)
    rows = raw("train.csv")
    for (sharding, impl, label) in [("dp", "naive", "dp · naive"), ("dp", "flash", "dp · flash (interpret)"),
                                    ("fsdp", "naive", "fsdp · naive"), ("tp", "naive", "tp · naive")]:
        line = chart.artists[(TRAIN_PANEL, label)]
        xs, ys = expected(rows, {"sharding": sharding, "impl": impl}, "global_batch", "mfu", 100)
        assert same(line.get_xdata(), xs) and same(line.get_ydata(), ys), label
        assert line.get_color() == plots.style(sharding).colour
        assert line.get_marker() == {"naive": "o", "flash": "s"}[impl]  # the kernel's, as its line style


def test_failed_and_skipped_points_are_gaps_never_zero(train):
    chart = plots.mfu_vs_batch(train)
    fsdp_flash = chart.artists[(TRAIN_PANEL, "fsdp · flash (interpret)")].get_ydata()
    assert list(np.isnan(fsdp_flash)) == [False, True, False]  # batch 16 failed: an interior gap
    tp = chart.artists[(TRAIN_PANEL, "tp · naive")].get_ydata()
    assert np.isnan(tp[-1]) and np.all(np.isfinite(tp[:-1]))
    # a series with no usable point is no line (#36 item 10): the footer names it, apart from the gaps
    assert not any("auto" in label for _, label in chart.artists)
    assert any(n.startswith("auto: no usable point (3 ") for n in chart.notes), chart.notes
    for line in chart.artists.values():
        assert not np.any(np.asarray(line.get_ydata(), dtype=float) == 0)
    assert any("2 point(s) failed, skipped or wrong" in n for n in chart.notes)


def test_single_point_series_is_drawn_with_a_marker(train):
    line = plots.mfu_vs_batch(train).artists[(TRAIN_PANEL, "2d · naive")]
    rows = raw("train.csv")
    assert list(line.get_xdata()) == [16.0]
    assert same(line.get_ydata(), [rows[(rows.sharding == "2d")]["mfu"].iloc[0] * 100])
    assert line.get_marker() == "o"


def test_line_style_follows_the_attention_impl(train):
    chart = plots.mfu_vs_batch(train)
    naive = chart.artists[(TRAIN_PANEL, "dp · naive")]
    flash = chart.artists[(TRAIN_PANEL, "dp · flash (interpret)")]
    assert naive.get_color() == flash.get_color()
    assert naive.get_linestyle() != flash.get_linestyle()


def test_title_names_suite_devices_and_interpret_the_footer_the_versions(train):
    chart = plots.mfu_vs_batch(train)
    title = chart.figure._suptitle.get_text()
    assert "gpt2" in title and "cpu ×8" in title and len(title.split("\n")) <= 2
    assert cd.INTERPRET_NOTE in title
    footer = chart.figure._supxlabel.get_text()
    assert "jax 0.10.2 / jaxlib 0.10.2" in footer and "xlabench " in footer and "jaxlib" not in title
    no_interp = plots.mfu_vs_batch(train[train["impl"] == "naive"]).figure._suptitle.get_text()
    assert cd.INTERPRET_NOTE not in no_interp


def test_one_panel_per_backend_and_device_kind(train):
    other = train.assign(backend="torch_xla", framework_version="torch_xla 2.9.0", interpret=False)
    chart = plots.mfu_vs_batch(pd.concat([train, other], ignore_index=True))
    panels = {p for p, _ in chart.artists}
    assert panels == {TRAIN_PANEL, "torch_xla · cpu · gpt2-tiny"}
    line = chart.artists[("torch_xla · cpu · gpt2-tiny", "dp · naive")]
    assert same(line.get_ydata(), chart.artists[(TRAIN_PANEL, "dp · naive")].get_ydata())
    assert "torch_xla 2.9.0" in chart.figure._supxlabel.get_text()


def test_backend_with_only_skipped_rows_gets_no_panel_and_no_nan_in_title(train):
    """A suite listing torch_xla on a machine without its environment: all its rows are skipped,
    planned by the parent (no device kind, no version)."""
    skipped = train.assign(backend="torch_xla", status="skipped", mfu=np.nan, median_s=np.nan,
                           device_kind=np.nan, device_count=np.nan, framework_version=np.nan)
    both = pd.concat([train, skipped], ignore_index=True)
    for chart in (plots.mfu_vs_batch(both), plots.sharding_bars(both)):
        assert {p.split(" · ")[0] for p, _ in chart.artists} == {"jax"}
        title = chart.figure._suptitle.get_text()
        assert "nan" not in title and "cpu ×8" in title
    notes = plots.mfu_vs_batch(both).notes
    # the hidden panel's rows are named apart from the gaps of the panels drawn (#36 item 10)
    assert f"none of its {len(skipped)} row(s) usable ({len(skipped)} skipped)" in " ".join(notes), notes
    assert not any(n.startswith(f"{len(skipped)} point(s)") for n in notes)


# ------------------------------------------------------------------------------------------- sharding


def test_sharding_bars_default_batch_is_largest_every_mode_has(train):
    chart = plots.sharding_bars(train)
    rows = raw("train.csv")
    at16 = rows[rows.global_batch == 16]
    modes = ["dp", "fsdp", "tp", "2d", "auto"]
    naive = chart.artists[(TRAIN_PANEL, "naive")]
    want = [at16[(at16.sharding == m) & (at16.impl == "naive")]["mfu"].iloc[0] * 100
            if ((at16.sharding == m) & (at16.impl == "naive") & (at16.status == "ok")).any() else np.nan
            for m in modes]
    assert same([b.get_height() for b in naive], want)
    assert np.isnan(want[-1])  # auto skipped: no bar, not a zero bar
    flash = chart.artists[(TRAIN_PANEL, "flash (interpret)")]
    heights = [b.get_height() for b in flash]
    assert np.isfinite(heights[0]) and np.isnan(heights[1:]).all()  # fsdp failed, tp/2d/auto: no row
    assert [b.get_facecolor() for b in naive] == [to_rgba(plots.style(m).colour) for m in modes]
    steps = chart.artists[(TRAIN_PANEL, "naive step time")].get_ydata()
    assert same(steps[:4], [at16[(at16.sharding == m) & (at16.impl == "naive")]["median_s"].iloc[0] * 1e3
                            for m in modes[:4]])  # in ms
    assert chart.figure.axes[0].figure.axes[1].get_ylabel() == "step time (ms)"
    ax = chart.figure.axes[0]
    texts = [t.get_text() for t in ax.texts]
    assert f"{want[0]:.1f}%" in texts and " failed" in texts and " skipped" in texts
    assert "global batch 16" in ax.get_title()


def test_sharding_bars_at_a_chosen_batch_and_an_absent_one(train):
    chart = plots.sharding_bars(train, global_batch=32)
    naive = [b.get_height() for b in chart.artists[(TRAIN_PANEL, "naive")]]
    rows = raw("train.csv")
    assert same(naive[:2], [rows[(rows.sharding == m) & (rows.impl == "naive") & (rows.global_batch == 32)]["mfu"].iloc[0] * 100
                            for m in ("dp", "fsdp")])
    assert np.isnan(naive[2:]).all()  # tp failed, 2d no row, auto skipped
    with pytest.raises(plots.NoData, match=r"global batch 12 \(have: 8, 16, 32\)"):
        plots.sharding_bars(train, global_batch=12)


# ------------------------------------------------------------------------------------------ attention


def test_attention_lines_hold_tflops_per_impl_by_mode_and_causal(attention):
    chart = plots.attention_tflops(attention)
    rows = raw("attention_cpu.csv")
    panels = {p for p, _ in chart.artists}
    assert panels == {"causal · fwd", "causal · fwd_bwd", "non-causal · fwd", "non-causal · fwd_bwd"}
    assert len(chart.artists) == 4 * 5  # batch moves with seq_len: it does not split series
    for causal, mode in [(True, "fwd"), (False, "fwd_bwd")]:
        panel = f"{'causal' if causal else 'non-causal'} · {mode}"
        for impl in ("naive", "flash", "splash"):
            lab = impl if impl == "naive" else f"{impl} (interpret)"
            line = chart.artists[(panel, lab)]
            xs, ys = expected(rows, {"impl": impl, "causal": causal, "mode": mode}, "seq_len", "tflops_per_s")
            assert same(line.get_xdata(), xs) and same(line.get_ydata(), ys)
            assert line.get_color() == plots.style(impl).colour
    ax = chart.figure.axes[0]
    assert ax.child_axes and ax.child_axes[0].get_ylabel() == "MFU (%)"
    assert cd.INTERPRET_NOTE in chart.figure._suptitle.get_text()


def test_attention_failed_row_is_a_gap(attention):
    df = attention.copy()
    hit = df.index[(df.impl == "flash") & (df.seq_len == 256) & (df.causal == True) & (df["mode"] == "fwd")]  # noqa: E712
    df["error"] = df["error"].astype(object)
    df.loc[hit, ["status", "error"]] = ["failed", "boom"]
    y = plots.attention_tflops(df).artists[("causal · fwd", "flash (interpret)")].get_ydata()
    assert list(np.isnan(y)) == [False, True, False]


def test_speedup_is_naive_median_over_impl_median(attention):
    chart = plots.attention_speedup(attention)
    rows = raw("attention_cpu.csv")
    key = ["seq_len", "causal", "mode"]
    naive = rows[rows.impl == "naive"].set_index(key)["median_s"]
    for impl in ("xla_sdpa", "flash", "splash", "pallas_gpu"):
        mine = rows[(rows.impl == impl) & (rows.causal == False) & (rows["mode"] == "fwd")].sort_values("seq_len")  # noqa: E712
        want = [naive[tuple(r[k] for k in key)] / r["median_s"] for _, r in mine.iterrows()]
        lab = impl if impl == "xla_sdpa" else f"{impl} (interpret)"
        assert same(chart.artists[("non-causal · fwd", lab)].get_ydata(), want)
    assert not any(lab.startswith("naive") for _, lab in chart.artists)
    assert all(ax.get_lines()[-1].get_ydata()[0] == 1.0 for ax in chart.figure.axes if ax.get_lines())


def test_speedup_needs_naive_rows(attention):
    with pytest.raises(plots.NoData, match="naive"):
        plots.attention_speedup(attention[attention.impl != "naive"])


def test_other_backend_splits_attention_series(attention):
    other = attention.assign(backend="torch_xla", framework_version="torch_xla 2.9.0")
    chart = plots.attention_tflops(pd.concat([attention, other], ignore_index=True))
    labels = {lab for p, lab in chart.artists if p == "causal · fwd"}
    assert len(labels) == 10
    assert "naive · backend=torch_xla" in labels  # framework_version follows backend: not repeated
    runs = attention.assign(run_id="20261203-000000-beef")
    labels = {lab for p, lab in plots.attention_tflops(pd.concat([attention, runs])).artists if p == "causal · fwd"}
    assert "flash · run_id=20261203-000000-beef (interpret)" in labels and len(labels) == 10


# ---------------------------------------------------------------------------------------------- paged


def test_paged_lines_hold_gbytes_per_s_with_gaps(paged):
    chart = plots.paged_bandwidth(paged)
    rows = raw("paged.csv")
    naive1 = chart.artists[("batch=1", "naive")]
    assert same(naive1.get_xdata(), [512, 2048, 8192])
    assert same(naive1.get_ydata(), rows[(rows.batch == 1) & (rows.impl == "naive")]["gbytes_per_s"])
    paged1 = chart.artists[("batch=1", "paged (interpret)")].get_ydata()
    assert list(np.isnan(paged1)) == [False, True, False]  # 2048: a wrong result is a gap, not a win
    naive4 = chart.artists[("batch=4", "naive")]
    assert same(naive4.get_xdata(), [640, 2048, 8192])  # uniform:256-1024 at its mean
    assert np.isnan(naive4.get_ydata()[-1])  # failed
    single = chart.artists[("batch=4", "paged (interpret)")]
    assert len(single.get_xdata()) == 1 and np.isfinite(single.get_ydata()[0])
    assert ("batch=1", "ragged_paged (interpret) (no usable point)") not in chart.artists  # no line: a footer note
    assert any(n.startswith("ragged_paged") and ": no usable point" in n for n in chart.notes), chart.notes
    ax4 = [ax for ax in chart.figure.axes if ax.get_title() == "batch=4"][0]
    assert [t.get_text() for t in ax4.get_xticklabels()] == ["256-1024", "2048", "8192"]  # the numbers of the spec
    assert ax4.child_axes[0].get_ylabel() == "MBU (%)"


def test_paged_plain_numeric_context_lengths(paged):
    df = paged[paged.context_lens.str.startswith("fixed")].copy()
    df["context_lens"] = df["context_lens"].str.removeprefix("fixed:")
    chart = plots.paged_bandwidth(df)
    ax = [ax for ax in chart.figure.axes if ax.get_title() == "batch=1"][0]
    assert ax.get_xscale() == "log"
    assert [t.get_text() for t in ax.get_xticklabels()] == ["512", "2048", "8192"]


# ------------------------------------------------------------------------------ styles, kinds, files


def test_colours_are_stable_across_charts_and_names(attention):
    a = plots.attention_tflops(attention).artists[("causal · fwd", "flash (interpret)")]
    s = plots.attention_speedup(attention).artists[("causal · fwd", "flash (interpret)")]
    assert a.get_color() == s.get_color() == kernels.STYLES["flash"].colour
    assert plots.style("some_new_kernel") == plots.style("some_new_kernel")
    assert plots.style("some_new_kernel").colour not in {kernels.STYLES[k].colour for k in ("naive",)}


def test_a_chart_without_its_figure_is_no_data(train):
    with pytest.raises(plots.NoData, match="train rows have no mfu values"):
        plots.mfu_vs_batch(train.assign(mfu=np.nan))


def test_kinds_follow_the_workloads(train, attention, paged):
    assert plots.kinds_for(train) == ["mfu_batch", "sharding"]
    assert plots.kinds_for(attention) == ["attention", "speedup"]
    assert plots.kinds_for(paged) == ["paged"]


def test_render_writes_png_and_svg(tmp_path, paged):
    written, left_out = plots.render(paged, tmp_path, ["png", "svg"])
    assert sorted(p.name for p in written) == ["paged.png", "paged.svg"] and not left_out
    assert (tmp_path / "paged.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "paged.svg").read_text()[:2000]


def test_render_leaves_out_an_automatic_kind_with_the_reason(tmp_path, attention):
    no_naive = attention[attention.impl != "naive"]
    written, left_out = plots.render(no_naive, tmp_path, ["png"])
    assert [p.name for p in written] == ["attention.png"]
    assert left_out and left_out[0].startswith("speedup:") and "naive" in left_out[0]
    with pytest.raises(plots.NoData):
        plots.render(no_naive, tmp_path, ["png"], kinds=["speedup"])


# ------------------------------------------------------------------------------- sharding: no overlaps


def _marker_boxes(line):
    """Display boxes of each drawn marker of a marker-only line (path extents x size, edge included)."""
    from matplotlib.markers import MarkerStyle
    from matplotlib.transforms import Bbox

    dpi = line.get_figure().dpi
    m = MarkerStyle(line.get_marker())
    ext = m.get_path().transformed(m.get_transform()).get_extents()
    size, edge = line.get_markersize() * dpi / 72, line.get_markeredgewidth() * dpi / 72 / 2
    pts = line.get_transform().transform(line.get_xydata())
    return [Bbox.from_extents(x + ext.x0 * size - edge, y + ext.y0 * size - edge,
                              x + ext.x1 * size + edge, y + ext.y1 * size + edge)
            for x, y in pts if np.isfinite(x) and np.isfinite(y)]


def _overlaps(chart) -> list[str]:
    """Every pair of (bar label or note, marker / tick label / other label) whose boxes intersect, and
    every label outside its axes, as measured on the laid-out figure."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    fig = chart.figure
    canvas = FigureCanvasAgg(fig)
    fig.draw_without_rendering()
    r = canvas.get_renderer()
    markers = [b for (_, lab), art in chart.artists.items() if lab.endswith("step time") for b in _marker_boxes(art)]
    problems = []
    for ax in [a for a in fig.axes if a.texts]:
        twins = [a for a in fig.axes if a is not ax and a.bbox.bounds == ax.bbox.bounds]
        ticks = [(t.get_text(), t.get_window_extent(r)) for a in [ax] + twins
                 for t in a.get_xticklabels() + a.get_yticklabels() if t.get_visible() and t.get_text()]
        frame = ax.get_window_extent(r)
        texts = [(t.get_text(), t.get_window_extent(r)) for t in ax.texts if t.get_text()]
        for i, (name, box) in enumerate(texts):
            if not (frame.x0 <= box.x0 and box.x1 <= frame.x1 and frame.y0 <= box.y0 and box.y1 <= frame.y1):
                problems.append(f"{name!r} leaves the axes")
            problems += [f"{name!r} on a step-time marker" for m in markers if box.overlaps(m)]
            problems += [f"{name!r} on tick label {t!r}" for t, b in ticks if box.overlaps(b)]
            problems += [f"{name!r} on {other!r}" for other, b in texts[i + 1:] if box.overlaps(b)]
    return problems


def _bars_frame(tmp_path, steps: dict) -> pd.DataFrame:
    """The real CPU run's layout: fsdp, 2d and tp ok for naive and flash at one batch, auto skipped."""
    template = raw("train.csv").iloc[2]
    mfu = {("fsdp", "naive"): 38.0, ("fsdp", "flash"): 25.1, ("2d", "naive"): 22.7, ("2d", "flash"): 18.8,
           ("tp", "naive"): 30.0, ("tp", "flash"): 10.0}
    rows = []
    for mode in ("fsdp", "2d", "tp", "auto"):
        for impl in ("naive", "flash"):
            row = template.copy()
            row["sharding"], row["impl"], row["interpret"] = mode, impl, impl == "flash"
            row["case_id"] = f"{mode}-{impl}"
            if mode == "auto":
                row["status"], row["mfu"], row["median_s"], row["error"] = "skipped", np.nan, np.nan, "no auto"
            else:
                row["mfu"], row["median_s"] = mfu[(mode, impl)] / 100, steps[(mode, impl)]
            rows.append(row)
    path = tmp_path / "bars.csv"
    pd.DataFrame(rows).to_csv(path, index=False)
    return cd.load([path])


@pytest.mark.parametrize("q", [0.3, 0.6, 0.8, 0.85, 0.9, 0.95, 1.0, 1.05, 1.1, 1.2])
def test_sharding_labels_clear_markers_ticks_and_axes(tmp_path, q):
    """Step-time diamonds put at about q x each bar's height, where the value labels go: no label may sit
    on a diamond, a tick label or another label, nor leave the axes."""
    slowest = 10.0  # tp/flash, the shortest bar: it sets the right axis to ~1.26 x this (margin, then x1.2)
    mfu = {("fsdp", "naive"): 38.0, ("fsdp", "flash"): 25.1, ("2d", "naive"): 22.7, ("2d", "flash"): 18.8,
           ("tp", "naive"): 30.0}
    steps = {k: min(q * v / (38.0 * 1.15) * 1.26 * slowest, slowest) for k, v in mfu.items()}
    steps[("tp", "flash")] = slowest
    chart = plots.sharding_bars(_bars_frame(tmp_path, steps))
    ax = chart.figure.axes[0]
    assert sorted(t.get_text() for t in ax.texts if t.get_text()) == sorted(
        ["38.0%", "25.1%", "22.7%", "18.8%", "30.0%", "10.0%", " skipped", " skipped"])
    assert _overlaps(chart) == []
    assert overlaps(chart) == []  # and the figure as a whole: titles, ticks, legend (every kind's check)


def test_mfu_vs_batch_rings_the_largest_batch_that_fits(train):
    """A row of global_batch auto (max_batch set): a ring on its line's point, and a footer note."""
    rows = train.copy()
    ok = rows[(rows["sharding"] == "dp") & (rows["impl"] == "naive") & (rows["status"] == "ok")]
    last = ok["global_batch"].astype(float).idxmax()
    rows["max_batch"] = np.nan
    rows.loc[last, "max_batch"] = rows.loc[last, "global_batch"]
    chart = plots.mfu_vs_batch(rows)
    ring = chart.artists[(TRAIN_PANEL, "largest batch: dp · naive")]
    line = chart.artists[(TRAIN_PANEL, "dp · naive")]
    assert same(ring.get_xdata(), [rows.loc[last, "global_batch"]])
    assert same(ring.get_ydata(), [100 * float(rows.loc[last, "mfu"])])
    assert ring.get_markeredgecolor() == line.get_color() and ring.get_markerfacecolor() == "none"
    assert [k for k in chart.artists if k[1].startswith("largest batch")] == [(TRAIN_PANEL, "largest batch: dp · naive")]
    assert "the largest batch that fits" in chart.notes[-1]
    assert not any(k[1].startswith("largest batch") for k in plots.mfu_vs_batch(train).artists)


def test_a_suspect_row_is_drawn_as_measured_and_named_in_the_footer(train):
    """One footer line counts the suspect points by rule and says where the reasons are: the quick start's
    CPU run (its peak measured under load) once had 8 rows of 4-line reasons covering the plot."""
    df = train.copy()
    df["suspect"] = None
    ok = df.index[(df["status"] == "ok") & (df["sharding"] == "dp")]
    df.loc[ok[0], "suspect"] = "mfu_range: mfu 1.78 outside (0, 1]"
    df.loc[ok[1], "suspect"] = "mfu_range: mfu 1.2 outside (0, 1]; roofline: roofline_frac 1.3 > 1.05"
    chart = plots.mfu_vs_batch(df)
    (line,) = [n for n in chart.notes if "suspect" in n]
    assert line.startswith(f"2 of {len(df)} point(s) suspect (mfu_range x2, roofline x1)"), line
    assert "(docs/audit.md)" in chart.figure._supxlabel.get_text().replace("\n", " ")
    assert not any("suspect" in n for n in plots.mfu_vs_batch(train).notes)  # the fixture: clean rows


def test_one_device_draws_mfu_per_kernel_and_no_sharding_chart() -> None:
    """A one-chip train run (every mode one program: one sharding value) has no sharding axis: the MFU
    chart's lines are the impls, and the sharding chart is not called for."""
    import pandas as pd

    from xlabench.report import plots

    rows = pd.DataFrame([{"workload": "train", "backend": "jax", "device_kind": "TPU v5 lite", "model": "m",
                          "impl": impl, "sharding": "fsdp", "global_batch": b, "mfu": 0.1 * b, "status": "ok"}
                         for impl in ("naive", "splash") for b in (2, 4)])
    assert "sharding" not in plots.kinds_for(rows) and "mfu_batch" in plots.kinds_for(rows)
    two = pd.concat([rows, rows.assign(sharding="2d")], ignore_index=True)
    assert "sharding" in plots.kinds_for(two)


def test_the_paged_charts_text_says_its_batch_axis_where_it_is_described():
    """Issue 61 item 11: README's paged chart read "vs context length", leaving out the x axis of batches that
    docs/plots.md describes (the CPU profile zips one context per batch). The README and the kind's own
    text (plot --help) say it too."""
    root = Path(__file__).resolve().parent.parent
    rows = {name: next(x for x in (root / name).read_text().splitlines() if x.startswith("| `paged` |"))
            for name in ("README.md", "docs/plots.md")}
    for said in (*rows.values(), plots.KINDS["paged"].doc):
        assert "one context" in said and "the batch" in said, said


def test_one_chips_mfu_of_both_frameworks_shares_a_panel_per_model(tmp_path) -> None:
    """Issue 58: the gpt2 suite's MFU chart on a v5e drew JAX and torch_tpu in panels of their own, with y axes of
    their own (0-60% beside 0-9%), titled 'TPU v5 lite' and 'TPU v5e' for one chip. One panel per chip and
    model now holds both frameworks' lines (a dash per framework), under one chip name."""
    rows = pd.DataFrame([{"workload": "train", "backend": be, "device_kind": kind, "model": "gpt2-124m", "impl": impl,
                          "sharding": "fsdp", "global_batch": b, "mfu": m * b, "status": "ok", "correct": True}
                         for be, kind, m in (("jax", "TPU v5 lite", 0.05), ("torch_tpu", "TPU v5e", 0.02))
                         for impl in ("naive", "splash") for b in (4, 8)])
    from xlabench import results

    rows.reindex(columns=results.COLUMN_NAMES).assign(suite="gpt2", schema_version=results.SCHEMA_VERSION,
                                                      case_id=[f"c{i}" for i in range(len(rows))]).to_csv(
        tmp_path / "run.csv", index=False)
    chart = plots.mfu_vs_batch(cd.load([tmp_path / "run.csv"]))
    panels = {p for p, _ in chart.artists}
    assert panels == {"TPU v5e · gpt2-124m"}, panels
    lines = {lab: a for (_, lab), a in chart.artists.items()}
    assert set(lines) == {"naive · jax", "splash · jax", "naive · torch_tpu", "splash · torch_tpu"}, set(lines)
    assert lines["splash · jax"].get_linestyle() != lines["splash · torch_tpu"].get_linestyle()
    assert lines["splash · jax"].get_color() == lines["splash · torch_tpu"].get_color()
    assert same(lines["splash · torch_tpu"].get_ydata(), [8.0, 16.0])
    # a lone point draws no dash: the second framework's markers are hollow
    assert lines["splash · torch_tpu"].get_markerfacecolor() == "white"
    assert lines["splash · jax"].get_markerfacecolor() == lines["splash · jax"].get_color()
