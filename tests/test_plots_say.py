"""What the charts say (#36 item 10): roofline tick labels that never smear and a fill key in no impl's
colour, a note where measured points sit above the roof; mfu_batch names a series with no usable point
in the footer, not as a line, and says which peak its MFU is against; the sharding chart's footer counts
only the gaps of what it draws."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from _chart_overlaps import overlaps

from xlabench.report import chartdata as cd
from xlabench.report import plots
from xlabench.report.chart_parts import style

FIX = Path(__file__).parent / "fixtures"


def _footer(chart) -> str:
    return chart.figure._supxlabel.get_text().replace("\n", " ")


def _legend_labels(chart) -> list[str]:
    return [t.get_text() for leg in chart.figure.legends + [a.get_legend() for a in chart.figure.axes if a.get_legend()]
            for t in leg.get_texts()]


@pytest.fixture(scope="module")
def attention_roofline() -> pd.DataFrame:
    return cd.load([FIX / "run_attention_roofline_cpu.csv"])


@pytest.mark.parametrize("scale", [0.5, 1.0, 3.0])
def test_roofline_tick_labels_never_overlap_near_the_ridge(attention_roofline, scale):
    """Points about a decade around the ridge: matplotlib labelled minor ticks 2x10^1 3x10^1 4x10^1 into one smear."""
    df = attention_roofline.copy()
    ridge = float((pd.to_numeric(df["peak_tflops"]) * 1e3 / pd.to_numeric(df["peak_gbytes_per_s"])).median())
    x = pd.to_numeric(df["arith_intensity"], errors="coerce")
    df["arith_intensity"] = ridge * scale * (1 + x.rank(pct=True))  # all within 2x, at or above the ridge
    chart = plots.roofline_chart.roofline(df)
    assert overlaps(chart) == []
    ax = chart.figure.axes[0]
    assert not any(t.get_text() for t in ax.get_xticklabels(minor=True))
    assert sum(bool(t.get_text()) for t in ax.get_xticklabels()) >= 2


def test_roofline_fill_key_is_in_no_impls_colour_and_points_above_the_roof_are_explained(attention_roofline):
    # the fixture's rows, re-derived, are all at or under their roof (a CPU row that beat its floor of XLA's
    # bytes is held to the bytes it must move): two rows made to beat their floor 2x give the note its points
    df = attention_roofline.copy()
    beat = df.index[df["status"].eq("ok") & df["bound_s"].notna()][:2]
    df.loc[beat, "median_s"] = df.loc[beat, "bound_s"] / 2
    chart = plots.roofline_chart.roofline(df)
    impl_colours = {style(i).colour.lower() for i in df["impl"].unique()}
    for h in chart.key:
        if h.get_label() not in set(df["impl"].astype(str)):
            assert str(h.get_color()).lower() not in impl_colours, h.get_label()
    assert "measured" not in _legend_labels(chart)  # measured rows only: the footer says filled = measured
    assert "above the roof" not in _footer(plots.roofline_chart.roofline(attention_roofline))
    pts = plots.roofline_chart.points(df)
    peak_tf = float(pd.to_numeric(pts["peak_tflops"]).median())
    peak_gb = float(pd.to_numeric(pts["peak_gbytes_per_s"]).median())
    above = int((pts["y"] > np.minimum(peak_tf, pts["x"] * peak_gb / 1e3) * 1.05).sum())
    assert above == 2
    assert f"{above} of {len(pts)} measured point(s) above the roof" in _footer(chart)
    assert "against each other" in _footer(chart)


@pytest.fixture(scope="module")
def train_torch_xla_missing() -> pd.DataFrame:
    """The quick start without a torch_xla environment: every torch_xla row skipped; JAX's auto skipped."""
    df = cd.load([FIX / "run_gpt2_cpu.csv"])
    tx = df["backend"] == "torch_xla"
    df.loc[tx, "status"] = "skipped"
    df.loc[tx, "error"] = "torch_xla environment missing (make torch-xla-env)"
    for c in ("mfu", "median_s", "tflops_per_s"):
        df.loc[tx, c] = np.nan
    return df


def test_mfu_batch_names_an_empty_series_in_the_footer_and_says_its_peak(train_torch_xla_missing):
    chart = plots.mfu_vs_batch(train_torch_xla_missing)
    labels = _legend_labels(chart)
    assert not any("no usable point" in x for x in labels) and "auto" not in labels, labels
    foot = _footer(chart)
    assert "auto: no usable point (6 skipped" in foot, foot
    assert "not drawn: torch_xla" in foot and "18 skipped" in foot, foot
    peak = pd.to_numeric(train_torch_xla_missing.loc[train_torch_xla_missing["status"] == "ok", "peak_tflops"]).median()
    assert f"MFU against {peak:.3g} TFLOP/s per cpu device" in foot, foot
    assert "point(s) failed" not in foot  # the only gaps were the empty series and the dropped panel


def test_sharding_footer_counts_the_gaps_it_draws(train_torch_xla_missing):
    chart = plots.sharding_bars(train_torch_xla_missing)
    foot = _footer(chart)
    assert foot.startswith("2 point(s) failed, skipped or wrong"), foot  # auto's naive and flash at batch 32
    assert "not drawn: torch_xla" in foot and "MFU against" in foot, foot


TPU_TRAIN = Path(__file__).parent.parent / "docs/data/tpu-v5e/2026-12-06-b/train-mfu/20261206-072438-467d.csv"


def test_lone_points_of_different_kernels_have_their_own_markers_and_the_key_shows_them():
    """The v5e's train rows have one batch per model: naive, flash and splash were three identical dots
    (only line styles told them apart, and a lone point draws no line)."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' PerformanceWarning reached the user's terminal
        chart = plots.mfu_vs_batch(cd.load([TPU_TRAIN]))
    ax = chart.figure.axes[0]
    markers = {line.get_label(): line.get_marker() for line in ax.get_lines() if line.get_label() in
               ("naive", "flash", "splash") or "fsdp" in line.get_label()}
    assert len(set(markers.values())) == 3, markers
    key = {t.get_text(): h for leg in chart.figure.legends for t, h in zip(leg.get_texts(), leg.legend_handles)}
    assert {key[k].get_marker() for k in ("naive", "flash", "splash")} == set(markers.values())


def test_a_train_charts_footer_says_its_steps_were_dispatched_back_to_back():
    chart = plots.mfu_vs_batch(cd.load([TPU_TRAIN]))
    foot = _footer(chart)
    assert "host time around each synced call" not in foot, foot
    assert "steps dispatched back to back" in foot, foot


def _run_and_compile_rows() -> pd.DataFrame:
    """A folder's rows (#40 item 5): a CPU run whose 3 naive points sit 3x above their roof (the host's
    caches), then a compile for a TPU target (3 points, hollow) whose version names libtpu too."""
    from xlabench import results
    from xlabench import roofline as rl

    out = []
    for target, kind, peak, bw in (("", "cpu", 0.2, 6.9), ("v5e-8", "TPU v5 lite", 197.0, 819.0)):
        for seq in (512, 1024, 2048):
            flops = 4e9 * seq / 512
            nbytes = flops / (0.05 * seq / 4)
            r = {"workload": "attention", "backend": "jax", "impl": "naive", "seq_len": seq, "batch": 16 * 512 // seq,
                 "num_heads": 8, "head_dim": 64, "causal": True, "mode": "fwd", "dtype": "bfloat16", "devices": 1,
                 "device_kind": kind, "device_count": 1, "platform": "tpu" if target else "cpu", "peak_tflops": peak,
                 "peak_gbytes_per_s": bw, "flops": flops, "xla_flops": flops, "xla_bytes_accessed": nbytes, "correct": True,
                 "framework_version": "jax 0.10.2 / jaxlib 0.10.2" + (" / libtpu 0.0.42" if target else ""),
                 "git_sha": "abc123", "run_id": "r", "suite": "attention"}
            if target:
                r.update(target=target, status="compiled")
            else:
                r.update(status="ok", median_s=max(flops / (peak * 1e12), nbytes / (bw * 1e9)) / 3)
            r.update(rl.roofline(r, None))
            r["case_id"] = results.case_id("attention", "jax", "naive", {"seq_len": seq, "t": target})
            out.append(r)
    return pd.DataFrame(out).reindex(columns=results.COLUMN_NAMES)


def test_roofline_of_run_and_compile_rows_counts_the_measured_points_and_prints_its_versions_once():
    chart = plots.roofline_chart.roofline(_run_and_compile_rows())
    foot = _footer(chart)
    assert "3 of 3 measured point(s) above the roof" in foot, foot
    assert foot.count("jax 0.10.2 / jaxlib 0.10.2") == 1, foot
    assert "libtpu 0.0.42" in foot and "xlabench abc123" in foot, foot
