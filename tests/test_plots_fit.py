"""The `fit` chart and the report's Fit section from `xlabench compile` rows (compile-only: per-device
memory, no timings): synthetic rows for the rules, plus a small real compile CSV
(tests/fixtures/compile_train.csv: gpt2-tiny compiled for v5e-4 by `xlabench compile`)."""

from __future__ import annotations

import itertools
import shutil
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from matplotlib.backends.backend_agg import FigureCanvasAgg
from test_plots_report import table_rows

from xlabench.report import chartdata as cd
from xlabench.report import inputs
from xlabench import results
from xlabench.report import markdown as report
from xlabench.report import plots
from xlabench.cli import main
from xlabench.units import GIB

FIX = Path(__file__).parent / "fixtures"
CAP = 15.75  # GiB: v5e's usable HBM per device as libtpu reports it
PANEL = "jax · v5e-4 · gpt2-tiny"
RUN_ID = "20261203-120000-c0de"


def compile_rows(spec: list[tuple], target: str = "v5e-4", topology: str = "v5e:2x2", cap: float = CAP,
                 backend: str = "jax", run_id: str = RUN_ID) -> pd.DataFrame:
    """Train compile rows as `xlabench compile` writes them: (sharding, impl, global_batch, status, GiB)."""
    out = []
    for sharding, impl, batch, status, gib in spec:
        params = {"model": "gpt2-tiny", "global_batch": batch, "seq_len": 256, "sharding": sharding,
                  "dtype": "bfloat16", "devices": 4}
        r = {**params, "schema_version": results.SCHEMA_VERSION, "run_id": run_id, "suite": "gpt2",
             "case_id": results.case_id("train", backend, impl, params), "workload": "train", "backend": backend,
             "impl": impl, "mesh": f"{sharding}=4", "platform": "tpu", "device_kind": "TPU v5 lite",
             "device_count": 4, "framework_version": "jax 0.10.2 / jaxlib 0.10.2", "interpret": False,
             "status": status, "target": target, "topology": topology, "hostname": "h", "git_sha": "g",
             "timestamp": "2026-12-03T12:00:00+00:00"}
        if status in ("compiled", "oom"):
            r.update(peak_memory_bytes=gib * GIB, hbm_capacity_bytes=cap * GIB, hbm_fraction=gib / cap)
        if status != "compiled":
            r["error"] = {"oom": f"needs {gib} GiB per device, has {cap} GiB", "failed": "boom: lowering",
                          "skipped": "torch_xla 2.9 has no compile-only TPU client"}[status]
        out.append(r)
    return pd.DataFrame(out).reindex(columns=results.COLUMN_NAMES)


# fsdp fits up to 4096, dp up to 1024 (naive) and 256 (flash); a failed 2d case leaves a gap.
SPEC = [
    ("fsdp", "naive", 256, "compiled", 0.5), ("fsdp", "naive", 1024, "compiled", 2.0),
    ("fsdp", "naive", 4096, "compiled", 8.0), ("fsdp", "naive", 16384, "oom", 32.0),
    ("dp", "naive", 256, "compiled", 2.0), ("dp", "naive", 1024, "compiled", 8.0),
    ("dp", "naive", 4096, "oom", 31.5), ("dp", "naive", 16384, "oom", 126.0),
    ("dp", "flash", 256, "compiled", 3.0), ("dp", "flash", 1024, "oom", 16.5),
    ("2d", "naive", 256, "compiled", 1.0), ("2d", "naive", 1024, "failed", None),
    ("2d", "naive", 4096, "compiled", 14.0),
]


@pytest.fixture(scope="module")
def comp() -> pd.DataFrame:
    return compile_rows(SPEC)


@pytest.fixture(scope="module")
def real() -> pd.DataFrame:
    return cd.load([FIX / "compile_train.csv"])


def same(a, b) -> bool:
    return np.allclose(np.asarray(a, dtype=float), np.asarray(b, dtype=float), equal_nan=True, rtol=1e-12)


# ---------------------------------------------------------------------------------------------- chart


def test_fit_lines_hold_gib_per_device_and_oom_points_are_xs_at_the_needed_memory(comp):
    chart = plots.fit_memory(comp)
    line = chart.artists[(PANEL, "dp · naive")]
    assert same(line.get_xdata(), [256, 1024, 4096, 16384]) and same(line.get_ydata(), [2.0, 8.0, 31.5, 126.0])
    assert list(line.get_markevery()) == [0, 1]  # round markers on what compiled only
    assert line.get_color() == plots.style("dp").colour
    assert line.get_linestyle() != chart.artists[(PANEL, "dp · flash")].get_linestyle()  # impl: the dash
    oom = chart.artists[(PANEL, "dp · naive oom")]
    assert oom.get_marker() == "x" and oom.get_linestyle() == "None"
    assert same(oom.get_xdata(), [4096, 16384]) and same(oom.get_ydata(), [31.5, 126.0])
    assert (np.asarray(oom.get_ydata()) > CAP).all()
    assert same(chart.artists[(PANEL, "fsdp · naive oom")].get_xdata(), [16384])
    assert (PANEL, "2d · naive oom") not in chart.artists  # nothing of 2d failed to fit


def test_fit_capacity_is_a_labelled_dashed_line_and_oom_is_in_the_legend(comp):
    chart = plots.fit_memory(comp)
    cap = chart.artists[(PANEL, f"HBM {CAP:.2f} GiB")]
    assert same(cap.get_ydata(), [CAP, CAP]) and cap.get_linestyle() == "--"
    ax = chart.figure.axes[0]
    assert f"HBM {CAP:.2f} GiB per device" in [t.get_text() for t in ax.texts]
    legend = [t.get_text() for t in chart.figure.legends[0].get_texts()]
    assert plots.OOM_LABEL in legend and plots.CAPACITY_LABEL in legend
    assert legend.index("fsdp · naive") < legend.index(plots.CAPACITY_LABEL)
    assert ax.child_axes and ax.child_axes[0].get_ylabel() == "HBM (%)"
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"  # dp needs 8x the HBM at 16384: log2 GiB
    small = plots.fit_memory(comp[comp["global_batch"] < 16384]).figure.axes[0]
    assert small.get_yscale() == "linear" and small.get_ylim()[0] == 0


def test_fit_failed_case_is_a_gap_and_a_skipped_backend_has_no_panel(comp):
    skipped = compile_rows([(s, i, b, "skipped", None) for s, i, b, _, _ in SPEC], backend="torch_xla")
    chart = plots.fit_memory(pd.concat([comp, skipped], ignore_index=True))
    assert {p for p, _ in chart.artists} == {PANEL}
    assert list(np.isnan(chart.artists[(PANEL, "2d · naive")].get_ydata())) == [False, True, False]
    assert "1 point(s) failed or skipped" in chart.notes[0]  # the hidden panel's rows: a note of their own
    assert f"not drawn: torch_xla · v5e-4 · gpt2-tiny, none of its {len(SPEC)} row(s) usable ({len(SPEC)} skipped)" in chart.notes


def test_fit_title_names_target_topology_and_compile_only(comp):
    title = plots.fit_memory(comp).figure._suptitle.get_text()
    assert "HBM per device vs global batch: gpt2" in title and "TPU v5 lite ×4" in title
    assert "target v5e-4 (v5e:2x2)" in title and cd.COMPILE_NOTE in title


def test_fit_panel_per_target(comp):
    v4 = compile_rows(SPEC, target="v4-8", topology="v4:2x2x1", cap=31.0, run_id="20261203-130000-c0de")
    chart = plots.fit_memory(pd.concat([comp, v4], ignore_index=True))
    assert {p for p, _ in chart.artists} == {PANEL, "jax · v4-8 · gpt2-tiny"}
    assert same(chart.artists[("jax · v4-8 · gpt2-tiny", "HBM 31.00 GiB")].get_ydata(), [31.0, 31.0])


def test_fit_attention_and_paged_compile_rows_are_per_impl_vs_length():
    att = compile_rows([("dp", "naive", 1, "compiled", 1.0)] * 3).assign(
        workload="attention", sharding=np.nan, global_batch=np.nan, seq_len=[1024, 4096, 16384],
        impl=["naive", "naive", "flash"], causal=True, mode="fwd", status=["compiled", "oom", "compiled"],
        peak_memory_bytes=[2 * GIB, 40 * GIB, 0.5 * GIB])
    chart = plots.fit_memory(att)
    assert same(chart.artists[("v5e-4 · causal · fwd", "naive oom")].get_xdata(), [4096])
    assert same(chart.artists[("v5e-4 · causal · fwd", "flash")].get_ydata(), [0.5])
    assert plots.kinds_for(att) == ["fit"]
    paged = att.assign(workload="paged_attention", seq_len=np.nan, causal=np.nan, mode=np.nan, batch=8,
                       context_lens=["fixed:1024", "uniform:256-1024", "fixed:8192"])
    chart = plots.fit_memory(paged)
    assert same(chart.artists[("v5e-4 · batch=8", "naive")].get_xdata(), [640, 1024])


# ------------------------------------------------------------------ compile rows vs run charts and kinds


@pytest.fixture(scope="module")
def train_run() -> pd.DataFrame:
    return cd.load([FIX / "train.csv"])


def test_kinds_for_compile_rows(comp, train_run):
    assert plots.kinds_for(comp) == ["fit"]
    assert plots.kinds_for(train_run) == ["mfu_batch", "sharding"]
    both = pd.concat([train_run, comp], ignore_index=True)
    assert plots.kinds_for(both) == ["mfu_batch", "sharding", "fit"]


def test_run_charts_do_not_change_with_compile_rows_beside_them(comp, train_run):
    both = pd.concat([train_run, comp.assign(suite="gpt2")], ignore_index=True)
    for draw in (plots.mfu_vs_batch, plots.sharding_bars):
        alone, mixed = draw(train_run), draw(both)
        assert list(mixed.artists) == list(alone.artists)
        for k, a in alone.artists.items():
            m = mixed.artists[k]
            if hasattr(a, "get_ydata"):
                assert same(m.get_xdata(), a.get_xdata()) and same(m.get_ydata(), a.get_ydata()), k
            else:
                assert same([b.get_height() for b in m], [b.get_height() for b in a]), k
        assert mixed.notes == alone.notes
        assert mixed.figure._suptitle.get_text() == alone.figure._suptitle.get_text()
    with pytest.raises(plots.NoData, match="no train rows"):
        plots.mfu_vs_batch(comp)  # compile rows are never MFU data
    with pytest.raises(plots.NoData, match="no compile rows"):
        plots.fit_memory(train_run)


def test_render_draws_run_and_fit_charts_separately(tmp_path, comp, train_run):
    written, left_out = plots.render(pd.concat([train_run, comp], ignore_index=True), tmp_path, ["png"])
    assert sorted(p.name for p in written) == ["fit.png", "mfu_batch.png", "sharding.png"] and not left_out


# ------------------------------------------------------------------------------------- newest_runs, CLI


def test_newest_runs_returns_the_newest_run_and_the_newest_compile_of_a_folder(tmp_path):
    suite = tmp_path / "results" / "gpt2"
    suite.mkdir(parents=True)
    names = ["20261201-000000-aaaa.csv", "20261202-000000-bbbb.csv",  # runs
             "20261130-000000-cccc.compile.csv", "20261203-000000-dddd.compile.csv"]  # compiles
    for n in names:
        shutil.copy(FIX / ("compile_train.csv" if "compile" in n else "train.csv"), suite / n)
    (suite / "20261203-000000-dddd.compile.samples.csv").write_text("run_id,case_id,iteration,seconds\n")
    found = inputs.newest_usable(tmp_path / "results")
    assert [p.name for p in found.files] == ["20261202-000000-bbbb.csv", "20261203-000000-dddd.compile.csv"]
    assert not [n for n in found.notes if n.startswith("skipped")]
    # a newer compile does not hide the run, and a newer run does not hide the compile
    shutil.copy(FIX / "train.csv", suite / "20261204-000000-eeee.csv")
    assert sorted(p.name for p in inputs.newest_usable(tmp_path / "results").files) == [
        "20261203-000000-dddd.compile.csv", "20261204-000000-eeee.csv"]


def test_plot_without_arguments_charts_the_newest_run_and_compile_of_a_suite(tmp_path):
    suite = tmp_path / "results" / "gpt2"
    suite.mkdir(parents=True)
    shutil.copy(FIX / "train.csv", suite / "20261202-100000-t001.csv")
    comp_file = suite / "20261203-114224-3d7d.compile.csv"
    shutil.copy(FIX / "compile_train.csv", comp_file)
    res = CliRunner().invoke(main, ["plot", "--results", str(tmp_path / "results"), "--out", str(tmp_path / "p"),
                                    "--format", "png"])
    assert res.exit_code == 0, res.output
    made = sorted(p.relative_to(tmp_path / "p").as_posix() for p in (tmp_path / "p").rglob("*.png"))
    suite_name = str(results.read_rows(comp_file)["suite"].iloc[0])
    want = {"gpt2/mfu_batch.png", "gpt2/sharding.png", f"{suite_name}/fit.png"}
    assert set(made) == want


def test_plot_kind_fit_needs_compile_rows(tmp_path):
    res = CliRunner().invoke(main, ["plot", str(FIX / "train.csv"), "--kind", "fit", "--out", str(tmp_path)])
    assert res.exit_code == 2 and "fit needs `xlabench compile` train or attention or paged_attention rows" \
        in res.output
    res = CliRunner().invoke(main, ["plot", str(FIX / "compile_train.csv"), "--kind", "mfu_batch",
                                    "--out", str(tmp_path)])
    assert res.exit_code == 2 and "mfu_batch needs train rows; these CSVs hold compile rows of train" in res.output


# --------------------------------------------------------------------------------------------- report


def test_report_fit_names_the_largest_batch_that_fits_per_mode(tmp_path, comp):
    md = report.build(comp, [Path("x.compile.csv")], {}, tmp_path / "r.md")
    rows = {(r[1], r[2]): r for r in table_rows(md, "### gpt2 (train)")}
    assert list(rows) == [("dp", "naive"), ("dp", "flash"), ("fsdp", "naive"), ("2d", "naive")]
    assert rows[("fsdp", "naive")] == ["v5e-4", "fsdp", "naive", "4096", "8.00", "51", "16384", "32.00", "15.75",
                                       "3 compiled, 1 oom"]
    assert rows[("dp", "naive")][3:8] == ["1024", "8.00", "51", "4096", "31.50"]
    assert rows[("dp", "flash")][3:8] == ["256", "3.00", "19", "1024", "16.50"]
    assert rows[("2d", "naive")][3:8] == ["4096", "14.00", "89", "none", ""]
    assert rows[("2d", "naive")][-1] == "2 compiled, 1 failed"
    assert "\n## gpt2 (train)" not in md  # no run rows: no best-impl summary of timings


def test_report_compile_rows_failures_and_skips_with_reasons_not_compiled_or_oom(tmp_path, comp):
    skipped = compile_rows([("fsdp", "naive", 256, "skipped", None)], backend="torch_xla")
    md = report.build(pd.concat([comp, skipped], ignore_index=True), [], {}, tmp_path / "r.md")
    probs = table_rows(md, "## Failed, skipped and wrong cases")
    assert sorted(r[0] for r in probs) == ["failed", "skipped"]
    assert any(r[0] == "failed" and "boom: lowering" in r[3] for r in probs)
    assert any(r[0] == "skipped" and "no compile-only TPU client" in r[3] for r in probs)
    env = table_rows(md, "## Environment")[0]
    assert env[-1] == "8 compiled, 4 oom, 1 failed, 1 skipped" and "compile-only for v5e-4" in env[3]
    assert [r[1] for r in table_rows(md, "### gpt2 (train)")] == ["dp", "dp", "fsdp", "2d"]  # torch_xla: no line


def test_report_fit_for_attention_counts_per_impl_and_lists_oom_cases(tmp_path):
    att = compile_rows([("dp", "naive", 1, "compiled", 1.0)] * 4).assign(
        workload="attention", suite="attention", sharding=np.nan, global_batch=np.nan,
        seq_len=[1024, 4096, 16384, 16384], impl=["naive", "naive", "flash", "splash"], causal=True, mode="fwd",
        status=["compiled", "oom", "compiled", "skipped"], peak_memory_bytes=[2 * GIB, 40 * GIB, 0.5 * GIB, np.nan])
    md = report.build(att, [], {}, tmp_path / "r.md")
    counts = {r[1]: r[2:] for r in table_rows(md, "### attention")}
    assert counts == {"naive": ["1", "1", "0", "0", "0"], "flash": ["1", "0", "0", "0", "0"],
                      "splash": ["0", "0", "0", "0", "1"]}
    oom = table_rows(md, "Does not fit (oom):")
    assert oom == [["v5e-4", "naive", "seq_len=4096", "40.00", "15.75"]]


def test_report_of_run_and_compile_csvs_keeps_the_run_summary(tmp_path, comp, train_run):
    md = report.build(pd.concat([train_run, comp], ignore_index=True), [], {}, tmp_path / "r.md")
    alone = report.build(train_run, [], {}, tmp_path / "r.md")
    assert table_rows(md, "## gpt2 (train)") == table_rows(alone, "## gpt2 (train)")
    probs = table_rows(md, "## Failed, skipped and wrong cases")
    assert any(r[0] == "failed (compile for v5e-4)" for r in probs)


# ------------------------------------------------------------------------------- the real compile CSV


def test_real_compile_csv_chart_has_its_oom_points_and_capacity(real):
    raw = pd.read_csv(FIX / "compile_train.csv")
    chart = plots.fit_memory(real)
    jax = raw[raw.backend == "jax"]
    cap = float(jax["hbm_capacity_bytes"].dropna().iloc[0]) / GIB
    panel = f"jax · {jax.target.iloc[0]} · gpt2-tiny"
    assert same(chart.artists[(panel, f"HBM {cap:.2f} GiB")].get_ydata(), [cap, cap])
    ooms = jax[jax.status == "oom"]
    assert len(ooms) and len(jax[jax.status == "compiled"])
    for (sharding, impl), g in ooms.groupby(["sharding", "impl"]):
        pts = chart.artists[(panel, f"{sharding} · {impl} oom")]
        g = g.sort_values("global_batch")
        assert same(pts.get_xdata(), g.global_batch) and same(pts.get_ydata(), g.peak_memory_bytes / GIB)
        assert (np.asarray(pts.get_ydata()) > cap).all()
    for (sharding, impl), g in jax.groupby(["sharding", "impl"]):
        g = g.sort_values("global_batch")
        line = chart.artists[(panel, f"{sharding} · {impl}")]
        assert same(line.get_ydata(), (g.peak_memory_bytes / GIB).where(g.status.isin(["compiled", "oom"])))


def test_real_compile_csv_capacity_label_is_clear_of_lines_and_markers(real):
    chart = plots.fit_memory(real)
    canvas = FigureCanvasAgg(chart.figure)
    canvas.draw()  # lays the figure out as saving does
    renderer = canvas.get_renderer()
    for ax in chart.figure.axes:
        for t in ax.texts:
            box = t.get_window_extent(renderer).expanded(1.05, 1.2)
            for line in ax.get_lines():
                if line.get_linestyle() == "--":  # the capacity line it labels
                    continue
                xy = ax.transData.transform(np.column_stack([line.get_xdata(), line.get_ydata()]).astype(float))
                xy = xy[np.isfinite(xy).all(axis=1)]
                dense = [p + f * (q - p) for p, q in itertools.pairwise(xy) for f in np.linspace(0, 1, 50)]
                pts = np.array(list(xy) + dense).reshape(-1, 2)
                assert box.count_contains(pts) == 0, (t.get_text(), line.get_label())


def test_real_compile_csv_report_names_the_largest_batch_that_fits_per_mode(real, tmp_path):
    raw = pd.read_csv(FIX / "compile_train.csv")
    md = report.build(real, [FIX / "compile_train.csv"], {}, tmp_path / "r.md")
    suite = raw.suite.iloc[0]
    rows = {(r[1], r[2]): r for r in table_rows(md, f"### {suite} (train)")}
    jax = raw[raw.backend == "jax"]
    assert set(rows) == set(zip(jax.sharding, jax.impl))
    for (sharding, impl), g in jax.groupby(["sharding", "impl"]):
        fits, oom = g[g.status == "compiled"], g[g.status == "oom"]
        r = rows[(sharding, impl)]
        best = fits.loc[fits.global_batch.idxmax()]
        assert r[3] == str(int(best.global_batch)) and r[4] == f"{best.peak_memory_bytes / GIB:.2f}"
        assert r[5] == f"{best.hbm_fraction * 100:.0f}"
        if len(oom):
            worst = oom.loc[oom.global_batch.idxmin()]
            assert r[6] == str(int(worst.global_batch)) and r[7] == f"{worst.peak_memory_bytes / GIB:.2f}"
        else:
            assert r[6] == "none"


def test_a_compile_title_says_how_many_of_the_targets_devices_a_case_spans():
    """Issue 61 item 10: attention compile charts for --target v5e-8 said "TPU v5 lite ×1" under "target v5e-8
    (v5e:2x4)": the one device each case's mesh spans, read as the target's count."""
    df = pd.DataFrame({"suite": ["attention"], "device_kind": ["TPU v5 lite"], "device_count": [8], "devices": [1],
                       "target": ["v5e-8"], "topology": ["2x4"], "interpret": [False]})
    assert "TPU v5 lite ×1 of 8" in cd.compile_title(df, "HBM per device")
    df["devices"] = 8
    assert "TPU v5 lite ×8 ·" in cd.compile_title(df, "HBM per device") + " ·"


def test_a_point_drawn_on_an_earlier_lines_point_leaves_it_in_sight():
    """Issue 61 item 10: in the attention fit chart flash's points (0.25 GiB) hid under splash's, drawn after
    them at the same size: a later line's markers are smaller than those of every earlier line they sit on."""
    chart = plots.fit_memory(results.read_rows(FIX / "compile_attention_v5e8.compile.csv"))
    lines = [(k, a) for k, a in chart.artists.items() if not k[1].endswith("oom") and "HBM" not in k[1]
             and np.isfinite(np.asarray(a.get_ydata(), dtype=float)).any()]
    covered = 0
    for (k1, a), (k2, b) in itertools.combinations(lines, 2):  # a drawn before b
        ya, yb = np.asarray(a.get_ydata(), dtype=float), np.asarray(b.get_ydata(), dtype=float)
        if k1[0] == k2[0] and len(ya) == len(yb) and np.any(np.abs(ya - yb) <= 0.05 * np.maximum(ya, yb)):
            covered += 1
            assert a.get_markersize() > b.get_markersize(), (k1, k2)
    assert covered >= 2  # flash under splash in the fwd panels
