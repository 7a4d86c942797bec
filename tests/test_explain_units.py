"""`xlabench explain`'s pieces on synthetic data: the HLO categorizer (xlabench/explain/categories.py) on a
small module written the way a TPU prints one (operands by name, layouts with tiles), and the trace
reader (xlabench/explain/trace.py) on fake planes of both layouts."""

from __future__ import annotations

import csv
import json
from pathlib import Path
from types import SimpleNamespace as NS

import pandas as pd
import pytest

from xlabench import results
from xlabench.explain import breakdown, categories, report, runfile, trace
from xlabench.run.run_options import OptionError, RunOptions

# A scanned step in miniature: an entry with a matmul fusion, a transpose fusion, an all-gather, the
# optimizer's update and a while loop (3 trips) whose body holds a Pallas kernel and an add fusion.
HLO = """HloModule jit_step, is_scheduled=true

%fused_dot (p0: bf16[8,128], p1: bf16[128,256]) -> bf16[8,256] {
  %p0 = bf16[8,128]{1,0:T(8,128)(2,1)} parameter(0)
  %p1 = bf16[128,256]{1,0:T(8,128)(2,1)} parameter(1)
  ROOT %dot.1 = bf16[8,256]{1,0:T(8,128)(2,1)} dot(%p0, %p1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

%fused_transpose (p0.1: bf16[8,256]) -> bf16[256,8] {
  %p0.1 = bf16[8,256]{1,0} parameter(0)
  ROOT %transpose.1 = bf16[256,8]{1,0} transpose(%p0.1), dimensions={1,0}
}

%fused_adam (p0.2: f32[128,256], p1.2: f32[128,256]) -> f32[128,256] {
  %p0.2 = f32[128,256]{1,0} parameter(0)
  %p1.2 = f32[128,256]{1,0} parameter(1)
  ROOT %mul.9 = f32[128,256]{1,0} multiply(%p0.2, %p1.2), metadata={op_name="jit(step)/xlabench_optimizer/mul"}
}

%fused_add (p0.3: f32[8,256]) -> f32[8,256] {
  %p0.3 = f32[8,256]{1,0} parameter(0)
  ROOT %add.3 = f32[8,256]{1,0} add(%p0.3, %p0.3)
}

%body (arg: (s32[], f32[8,256])) -> (s32[], f32[8,256]) {
  %arg = (s32[], f32[8,256]) parameter(0)
  %i = s32[] get-tuple-element(%arg), index=0
  %x = f32[8,256]{1,0} get-tuple-element(%arg), index=1
  %flash_attention.7 = f32[8,256]{1,0} custom-call(%x), custom_call_target="tpu_custom_call", metadata={op_name="jit(step)/jit(flash_attention)/pallas_call"}, backend_config={"custom_call_config":{"body":"abc"}}
  %add_fusion.2 = f32[8,256]{1,0} fusion(%flash_attention.7), kind=kLoop, calls=%fused_add
  ROOT %tuple.2 = (s32[], f32[8,256]) tuple(%i, %add_fusion.2)
}

%cond (arg.1: (s32[], f32[8,256])) -> pred[] {
  %arg.1 = (s32[], f32[8,256]) parameter(0)
  %i.1 = s32[] get-tuple-element(%arg.1), index=0
  %constant.3 = s32[] constant(3)
  ROOT %lt = pred[] compare(%i.1, %constant.3), direction=LT
}

ENTRY %main (a: bf16[8,128], w: bf16[128,256], m: f32[128,256]) -> f32[128,256] {
  %a = bf16[8,128]{1,0} parameter(0)
  %w = bf16[128,256]{1,0} parameter(1)
  %m = f32[128,256]{1,0} parameter(2)
  %dot_fusion.1 = bf16[8,256]{1,0:T(8,128)(2,1)} fusion(%a, %w), kind=kOutput, calls=%fused_dot
  %transpose_fusion.1 = bf16[256,8]{1,0} fusion(%dot_fusion.1), kind=kLoop, calls=%fused_transpose
  %all-gather-start.1 = (f32[128,256]{1,0}, f32[512,256]{1,0}) all-gather-start(%m), replica_groups=[1,4]<=[4], dimensions={0}
  %all-gather-done.1 = f32[512,256]{1,0} all-gather-done(%all-gather-start.1)
  %adam_fusion.1 = f32[128,256]{1,0} fusion(%m, %m), kind=kLoop, calls=%fused_adam
  %zero = s32[] constant(0)
  %x0 = f32[8,256]{1,0} convert(%dot_fusion.1)
  %init = (s32[], f32[8,256]) tuple(%zero, %x0)
  %while.1 = (s32[], f32[8,256]) while(%init), condition=%cond, body=%body
  ROOT %copy.5 = f32[128,256]{1,0} copy(%adam_fusion.1)
}
"""


def test_each_op_gets_its_category() -> None:
    info = categories.categorize(HLO)
    got = {name: info[name].category for name in ("dot_fusion.1", "transpose_fusion.1", "all-gather-start.1",
                                                  "all-gather-done.1", "adam_fusion.1", "flash_attention.7",
                                                  "add_fusion.2", "copy.5", "x0", "while.1")}
    assert got == {"dot_fusion.1": "matmul", "transpose_fusion.1": "copy", "all-gather-start.1": "collective",
                   "all-gather-done.1": "collective", "adam_fusion.1": "optimizer", "flash_attention.7": "attention",
                   "add_fusion.2": "elementwise", "copy.5": "copy", "x0": "elementwise", "while.1": "other"}
    assert info["flash_attention.7"].kernel == "flash_attention"
    assert info["adam_fusion.1"].op_name == "jit(step)/xlabench_optimizer/mul"


def test_costs_come_from_the_shapes_of_operands_named_elsewhere() -> None:
    info = categories.categorize(HLO)
    assert info["dot_fusion.1"].flops == 2 * 8 * 256 * 128  # 2 M N K
    # bytes: the operands looked up by name (a TPU module prints none), and the result
    assert info["dot_fusion.1"].bytes == (8 * 128 + 128 * 256 + 8 * 256) * 2
    assert info["adam_fusion.1"].flops == 128 * 256
    assert info["transpose_fusion.1"].flops == 0


def test_scheduled_ops_count_a_loop_body_by_its_trips() -> None:
    runs = {op.name: n for op, n in categories.scheduled(HLO)}
    assert runs["flash_attention.7"] == 3 and runs["add_fusion.2"] == 3 and runs["dot_fusion.1"] == 1
    # what takes no device time of its own: plumbing, the loop itself, a -done half, a fusion's insides
    assert not {"while.1", "tuple.2", "i", "all-gather-done.1", "dot.1", "zero"} & set(runs)


def test_a_convolution_sliding_over_padding_counts_the_input_it_reaches() -> None:
    # XLA on TPU writes "bsd,dhk->bshk" as a convolution whose window (4) slides over 3 + 1 + 3 padded
    # positions: each output element reads one real input row, not four.
    conv = categories.hlo_text.Instruction(
        "convolution.1", "f32[8,256,4,32]{1,3,2,0}", "convolution",
        "f32[8,256,128,1]{3,2,1,0} %a, f32[128,4,32,1]{3,2,1,0} %b), window={size=1x4 pad=0_0x3_3 "
        "rhs_reversal=0x1}, dim_labels=0bf1_i1o0->0b1f")
    assert categories.op_flops(conv) == 2 * (8 * 256) * 128 * (4 * 32)


def _line(name: str, events: list[tuple[str, float, float, dict]]) -> NS:
    return NS(name=name, events=[NS(name=n, start_ns=s, duration_ns=d, stats=list(st.items()))
                                 for n, s, d, st in events])


def test_device_plane_ops_inside_the_module_windows_by_self_time() -> None:
    modules = _line("XLA Modules", [("jit_step(12)", 0, 100, {}), ("jit_other(3)", 150, 40, {}),
                                    ("jit_step(12)", 200, 100, {})])
    ops = _line("XLA Ops", [  # names as a profile may write them: plain, with the HLO's %, in the long form
        ("fusion.1", 0, 60, {"flops": 10}), ("%while.1", 60, 40, {}),
        ("%copy.2 = f32[8]{0} copy(%p)", 70, 10, {}),  # the copy runs inside the loop
        ("fusion.9", 150, 40, {}),  # another program's op
        ("fusion.1", 200, 70, {}), ("while.1", 270, 30, {}), ("copy.2", 280, 20, {})])
    planes = [NS(name="/host:CPU", lines=[]), NS(name="/device:TPU:1", lines=[modules, ops]),
              NS(name="/device:TPU:0", lines=[modules, ops])]
    t = trace.op_times(planes, "jit_step")
    assert t.source == "device plane /device:TPU:0" and t.executions == 2 and t.device_s == [1e-7, 1e-7]
    assert t.self_ns == {"fusion.1": 130, "while.1": 40, "copy.2": 30}  # the loop's own time, less its body's
    assert t.calls["fusion.1"] == 2 and t.stats["fusion.1"]["flops"] == 10
    assert t.op_s_per_step == pytest.approx(100e-9) and t.concurrency == pytest.approx(1.0)


def test_cpu_threads_ops_of_one_device_grouped_by_run() -> None:
    st = lambda op, run, dev=0: {"hlo_op": op, "hlo_module": "jit_step", "run_id": run, "device_ordinal": dev}  # noqa: E731
    a = _line("tf_XLAEigen/1", [("ThunkExecutor::Execute", 0, 100, {}), ("dot.1", 0, 50, st("dot.1", 7)),
                                ("end: dot.1", 50, 1, {}), ("dot.1", 200, 40, st("dot.1", 8)),
                                ("dot.1", 0, 50, st("dot.1", 7, 1))])  # device 1's copy of the program
    b = _line("tf_XLAEigen/2", [("add.2", 10, 60, st("add.2", 7)), ("add.2", 240, 20, st("add.2", 8)),
                                ("jit_other_op", 0, 10, {"hlo_module": "jit_other", "run_id": 7})])
    t = trace.op_times([NS(name="/host:CPU", lines=[a, b])], "jit_step")
    assert t.executions == 2 and t.device_s == pytest.approx([70e-9, 60e-9]) and t.threads == 2
    assert t.self_ns == {"dot.1": 90, "add.2": 80}
    assert t.concurrency == pytest.approx((170 / 2) / 65)  # two threads overlapped
    assert t.source == "CPU host threads (device 0)"


def test_a_trace_without_the_module_is_one_clear_error() -> None:
    with pytest.raises(trace.TraceError, match="no op of the executable jit_step .*planes: /host:CPU"):
        trace.op_times([NS(name="/host:CPU", lines=[_line("python", [("f", 0, 1, {})])])], "jit_step")


def test_explain_keeps_the_trace_timer() -> None:
    assert RunOptions(explain=True).timer == "trace"
    with pytest.raises(OptionError, match="--explain keeps the trace timer's profiles"):
        RunOptions(explain=True, timer="wallclock")


# ------------------------------------------------------------------ breakdowns, the table, the run file

def _planes_of_hlo(gap_ns: float = 0) -> list[NS]:
    """Two executions of HLO's module on a TPU-like device plane (per execution: dot 40, transpose 10,
    all-gather 5, adam 15, 3 x (kernel 8 + add 2); then ``gap_ns`` of nothing)."""
    per_step = [("dot_fusion.1", 40, {"flops": 2 * 8 * 256 * 128}), ("transpose_fusion.1", 10, {}),
                ("all-gather-start.1", 5, {}), ("adam_fusion.1", 15, {}), ("x0", 0, {})]
    per_step += [(n, d, {}) for _ in range(3) for n, d in (("flash_attention.7", 8), ("add_fusion.2", 2))]
    ops, modules, t = [], [], 0.0
    for _ in range(2):
        start = t
        for name, dur, st in per_step:
            ops.append((name, t, dur, st))
            t += dur
        t += gap_ns
        modules.append(("jit_step(1)", start, t - start, {}))
    return [NS(name="/device:TPU:0", lines=[_line("XLA Modules", modules), _line("XLA Ops", ops)])]


ROOFS = breakdown.Roofs(flops_per_s=100e12, bytes_per_s=1e12, ici_bytes_per_s=50e9)


def test_measured_categories_are_the_ops_own_times() -> None:
    times = trace.op_times(_planes_of_hlo(), "jit_step")
    # nanosecond ops move bytes faster than any HBM: roofs that hold them (else a note says they are above)
    roofs = breakdown.Roofs(flops_per_s=100e12, bytes_per_s=1e16, ici_bytes_per_s=1e16)
    b = breakdown.measured("c1", times, HLO, roofs, wall_s=120e-9, attention_flops=1e6, devices=4)
    s = b.seconds()
    assert s == pytest.approx({"matmul": 40e-9, "attention": 24e-9, "elementwise": 6e-9, "copy": 10e-9,
                               "collective": 5e-9, "optimizer": 15e-9, "other": 0.0})
    assert b.step_s == pytest.approx(100e-9) and b.coverage == pytest.approx(1.0) and b.idle_s == pytest.approx(20e-9)
    cats = {c.key: c for c in b.categories}
    # the trace's own FLOPs stat where it has one; the analytic count for the Pallas kernel (no XLA cost)
    assert cats["matmul"].flops == 2 * 8 * 256 * 128
    assert cats["matmul"].roof_frac == pytest.approx(2 * 8 * 256 * 128 / 40e-9 / 100e12)
    assert cats["attention"].flops == 1e6 and cats["attention"].top[0].name == "flash_attention.7"
    assert cats["attention"].top[0].calls == 3 and cats["matmul"].share == pytest.approx(0.4)
    assert not [n for n in b.notes if "sum to" in n or "above their roof" in n]
    slow = breakdown.Roofs(flops_per_s=1e9, bytes_per_s=1e12)  # a roof below what the matmul reached
    notes = breakdown.measured("c1", times, HLO, slow, platform="cpu").notes
    assert [n for n in notes if n.startswith("matmul, ") and "above their roof" in n], notes
    # on an accelerator a rate above its roof cannot be: withheld, the figure in a note (issue 50 item 2)
    tpu = breakdown.measured("c1", times, HLO, slow, platform="tpu")
    assert {c.key: c.roof_frac for c in tpu.categories}["matmul"] is None
    assert [n for n in tpu.notes if n.startswith("matmul: ") and "no op can reach" in n], tpu.notes


def test_measured_says_what_is_missing_when_the_ops_fall_short() -> None:
    times = trace.op_times(_planes_of_hlo(gap_ns=25), "jit_step")
    b = breakdown.measured("c1", times, HLO, ROOFS)
    assert b.coverage == pytest.approx(100 / 125)
    assert [n for n in b.notes if n.startswith("op times sum to 80% of the device time") and "between ops" in n]
    assert b.idle_s is None  # no wall time given


def test_estimate_is_a_roofline_per_op() -> None:
    b = breakdown.estimated("c2", HLO, ROOFS, attention_flops=None, devices=4)
    s = b.seconds()
    assert b.estimate and "estimate" in b.source
    # the matmul fusion: max(2MNK / peak, bytes / bandwidth), once
    dot = max(2 * 8 * 256 * 128 / 100e12, (8 * 128 + 128 * 256 + 8 * 256) * 2 / 1e12)
    assert s["matmul"] == pytest.approx(dot)
    # the all-gather: a quarter of its 512x256 f32 output comes from each of 3 others, at the ICI bandwidth
    assert s["collective"] == pytest.approx(512 * 256 * 4 * 3 / 4 / 50e9)
    assert b.step_s == pytest.approx(sum(s.values())) and b.idle_s is None


def test_the_table_fits_80_columns_and_says_estimate() -> None:
    times = trace.op_times(_planes_of_hlo(), "jit_step")
    row = {"workload": "train", "impl": "flash", "model": "gpt2-tiny", "seq_len": 256, "global_batch": 8}
    for b, word in ((breakdown.measured("c1", times, HLO, ROOFS, wall_s=120e-9), "idle"),
                    (breakdown.estimated("c2", HLO, ROOFS), "ESTIMATE")):
        out = report.text(b, results.case_labels([row])[0])
        assert max(len(line) for line in out.splitlines()) <= report.WIDTH
        assert word in out and "flash_attention.7" in out


def test_update_rows_sets_columns_and_keeps_every_other_cell(tmp_path) -> None:
    csv_path = tmp_path / "run.csv"
    csv_path.write_text("schema_version,case_id,status,impl,median_s\n2,a,ok,naive,0.1000000001\n2,b,ok,flash,0.2\n")
    results.update_rows(csv_path, {"b": {"explain_source": "trace", "explain_matmul_s": 0.05}})
    rows = list(csv.DictReader(open(csv_path)))
    assert rows[0]["median_s"] == "0.1000000001" and rows[0]["explain_source"] == ""
    assert rows[1]["explain_source"] == "trace" and float(rows[1]["explain_matmul_s"]) == 0.05
    assert list(rows[0]) == results.COLUMN_NAMES


@pytest.mark.parametrize("content, meta, where, message", [
    ("a,b\n1,2\n", None, (), "not an xlabench results CSV"),
    (None, None, (), "kept no trace or HLO text .*run it with `xlabench run --explain`"),
    (None, {"trace_root": "NOWHERE"}, (), "case c1 has no HLO text under NOWHERE/c1"),
    (None, None, (("impl", "flash"),), "no row matches -k impl=flash"),
    (None, None, (("seq", "1"),), "has no column 'seq'"),
])
def test_bad_input_is_one_line(tmp_path, content, meta, where, message) -> None:
    csv_path = tmp_path / "run.csv"
    csv_path.write_text(content or "schema_version,case_id,status,workload,backend,impl\n2,c1,ok,train,jax,naive\n"
                                   "2,c2,skipped,train,jax,naive\n")
    if meta is not None:
        csv_path.with_name("run.meta.json").write_text(json.dumps(meta))
    with pytest.raises(runfile.ExplainError, match=message.replace("NOWHERE", ".*NOWHERE")):
        runfile.explain_run(csv_path, where, lambda p: [])


def test_a_run_with_nothing_to_explain_says_why(tmp_path) -> None:
    csv_path = tmp_path / "run.csv"
    csv_path.write_text("schema_version,case_id,status,workload,backend,impl,error\n"
                        "2,c1,skipped,train,jax,naive,needs 8 devices\n2,c2,ok,train,torch_xla,naive,\n")
    with pytest.raises(runfile.ExplainError, match="no row to explain .2 rows: .*backend torch_xla.*status skipped"):
        runfile.explain_run(csv_path, (), lambda p: [])


def _explained_rows() -> pd.DataFrame:
    base = {"suite": "s", "workload": "train", "backend": "jax", "status": "ok", "device_kind": "TPU v5 lite",
            "device_count": 1, "correct": True, "framework_version": "jax 0.10.2 / jaxlib 0.10.2", "git_sha": "ae98852",
            "model": "gpt2-124m"}
    cats = {f"explain_{k}_s": v for k, v in zip(categories.CATEGORY_KEYS, (4e-3, 2e-3, 1e-3, 5e-4, 0.0, 3e-4, 2e-4))}
    measured = {**base, "impl": "splash", "explain_source": "trace", "explain_step_s": 8.5e-3, "explain_idle_s": 1e-3,
                **cats}
    est = {**base, "impl": "flash", "status": "compiled", "target": "v4-8", "explain_source": "estimate",
           "explain_step_s": 8e-3, "explain_idle_s": None, **cats}
    return pd.DataFrame([measured, est], columns=results.COLUMN_NAMES)


def test_the_explain_chart_stacks_each_rows_categories() -> None:
    from xlabench.report import explain_chart, plots

    df = _explained_rows()
    assert "explain" in plots.kinds_for(df)
    chart = explain_chart.explain_bars(df)
    widths = {key: [b.get_width() for b in bars] for (_, key), bars in chart.artists.items()}
    assert widths["matmul"] == pytest.approx([4.0, 4.0]) and "collective" not in widths  # nothing to draw
    assert widths["gap"] == pytest.approx([0.5, 0.0])  # device time no op covers: shown, not spread
    assert widths["idle"] == pytest.approx([1.0, 0.0])
    hatched = [b.get_hatch() for b in chart.artists[("", "matmul")]]
    assert hatched == [None, "//"]  # the estimate
    ax = chart.figure.axes[0]
    labels = dict(zip(ax.get_yticks(), (t.get_text() for t in ax.get_yticklabels())))
    assert labels == {1: "splash", 0: "flash target=v4-8 (estimate)"}  # the first row on top


def test_no_explain_columns_no_chart() -> None:
    from xlabench.report import explain_chart, plots

    df = _explained_rows()
    df = df.drop(columns=[c for c in df if c.startswith("explain_")])
    assert "explain" not in plots.kinds_for(df)
    with pytest.raises(plots.NoData, match="run `xlabench explain RUN.csv` first"):
        explain_chart.explain_bars(df)


def test_a_run_copied_from_the_tpu_vm_is_explained_from_beside_its_csv(tmp_path) -> None:
    csv_path = tmp_path / "RUN.csv"
    csv_path.write_text("schema_version,case_id,status,workload,backend,impl,devices,clock,wall_median_s,"
                        "peak_tflops,peak_gbytes_per_s\n2,c1,ok,train,jax,splash,1,device,1.2e-7,197,819\n")
    # the meta names the folder where the TPU VM kept the files; the copy has them beside the CSV
    csv_path.with_name("RUN.meta.json").write_text(json.dumps({"trace_root": "/home/tpu/results/s/RUN.explain"}))
    case = tmp_path / "RUN.explain" / "c1"
    (case / "plugins" / "profile").mkdir(parents=True)
    (case / "jit_step.hlo.txt").write_text(HLO)
    (case / "plugins" / "profile" / "vm.xplane.pb").write_bytes(b"")
    loaded = []
    done = runfile.explain_run(csv_path, (), lambda p: loaded.append(p) or _planes_of_hlo())
    assert loaded == [case / "plugins" / "profile" / "vm.xplane.pb"]
    (b,) = done.breakdowns
    assert b.step_s == pytest.approx(100e-9) and b.idle_s == pytest.approx(20e-9)
    saved = runfile.write(done)
    row = list(csv.DictReader(open(csv_path)))[0]
    assert row["explain_source"] == "trace" and float(row["explain_matmul_s"]) == pytest.approx(40e-9)
    assert json.loads(saved.read_text())["c1"]["categories"][0]["key"] == "matmul"


def test_a_run_committed_with_its_kept_files_packed_is_explained_from_the_archive(tmp_path) -> None:
    """The committed 355M run keeps its trace and HLO text in RUN.explain.tgz beside the CSV; explain said
    'no HLO text ... run it with --explain' (issue 61 item 13)."""
    import tarfile

    csv_path = tmp_path / "RUN.csv"
    csv_path.write_text("schema_version,case_id,status,workload,backend,impl,devices,clock,wall_median_s,"
                        "peak_tflops,peak_gbytes_per_s\n2,c1,ok,train,jax,splash,1,device,1.2e-7,197,819\n")
    csv_path.with_name("RUN.meta.json").write_text(json.dumps({"trace_root": "$OUT/results/s/RUN.explain"}))
    case = tmp_path / "packed" / "RUN.explain" / "c1"
    (case / "plugins" / "profile").mkdir(parents=True)
    (case / "jit_step.hlo.txt").write_text(HLO)
    (case / "plugins" / "profile" / "vm.xplane.pb").write_bytes(b"")
    with tarfile.open(tmp_path / "RUN.explain.tgz", "w:gz") as tar:
        tar.add(tmp_path / "packed" / "RUN.explain", arcname="RUN.explain")
    loaded = []
    done = runfile.explain_run(csv_path, (), lambda p: loaded.append(p.name) or _planes_of_hlo())
    assert loaded == ["vm.xplane.pb"] and done.breakdowns[0].step_s == pytest.approx(100e-9)
    assert not (tmp_path / "RUN.explain").exists()  # read where it was unpacked for the while, nothing left
    (tmp_path / "RUN.explain.tgz").write_bytes(b"not a tar")
    with pytest.raises(runfile.ExplainError, match="RUN.explain.tgz: not a readable archive"):
        runfile.explain_run(csv_path, (), lambda p: _planes_of_hlo())


def test_top_ops_list_a_named_kernels_instances_together_and_generic_ops_apart():
    """An unrolled step runs each layer's copy of a kernel under its own name: one line for the kernel,
    while ops named only by their kind (fusion.N, copy.N) are different ops and stay apart."""
    from xlabench.explain.breakdown import _families

    ops = {"splash_mha_dkv.24": ("attention", 2e-3, 1, 0, 0), "splash_mha_dkv.25": ("attention", 2e-3, 1, 0, 0),
           "fusion.3": ("matmul", 1e-3, 1, 0, 0), "fusion.4": ("matmul", 3e-3, 1, 0, 0),
           "exponential_reduce_fusion.2": ("elementwise", 1e-3, 4, 0, 0)}
    fam = _families(ops)
    assert fam["splash_mha_dkv.* (2 ops)"] == pytest.approx((4e-3, 2))
    assert fam["fusion.3"] == pytest.approx((1e-3, 1)) and fam["fusion.4"] == pytest.approx((3e-3, 1))
    assert fam["exponential_reduce_fusion.2"] == pytest.approx((1e-3, 4))


def test_each_explained_row_is_named_by_what_tells_it_apart() -> None:
    """Issue 61 item 5: two tables read "case …: workload=attention impl=naive seq_len=256 batch=1 device_k...",
    their difference (causal) cut at 80 characters, and the explain chart labelled two bars "model=gpt2-355m
    global_batch=8" that differ by scan_layers. Each is named by what differs, and the header is never cut."""
    from xlabench.report import explain_chart

    attn = {"workload": "attention", "backend": "jax", "impl": "naive", "seq_len": 256, "kv_seq_len": 256,
            "batch": 1, "num_heads": 16, "head_dim": 128, "dtype": "bfloat16", "mode": "fwd_bwd",
            "device_kind": "TPU v5 lite"}
    rows = {"c1": {**attn, "case_id": "c1", "causal": True}, "c2": {**attn, "case_id": "c2", "causal": False}}
    done = runfile.Explained(Path("r.csv"), [], rows)
    labels = done.labels()
    assert labels == {"c1": "jax/naive causal=True", "c2": "jax/naive causal=False"}, labels
    times = trace.op_times(_planes_of_hlo(), "jit_step")
    b = breakdown.measured("c1", times, HLO, ROOFS, wall_s=120e-9)
    long = "jax/naive " + " ".join(f"{k}={v}" for k, v in attn.items() if k not in ("backend", "impl")) + " causal=True"
    out = report.text(b, long)
    assert max(len(line) for line in out.splitlines()) <= report.WIDTH
    head = " ".join(out.split("source:")[0].split())
    assert head == f"case c1: {long}", head  # wrapped, whole

    df = _explained_rows()
    df = pd.concat([df.iloc[[0]], df.iloc[[0]]], ignore_index=True)
    df["model"], df["global_batch"], df["scan_layers"] = "gpt2-355m", 8, [True, False]
    ax = explain_chart.explain_bars(df).figure.axes[0]
    ticks = [t.get_text() for t in ax.get_yticklabels()]
    assert len(set(ticks)) == 2 and all("scan_layers" in t for t in ticks), ticks


# A torch_tpu step: its forward and backward are two programs of one name (TorchTPU names every compiled graph
# alike) whose op names overlap (both have a dot_fusion.1); a stray eager op runs between them.
BWD = """HloModule tt_jit_export, is_scheduled=true

%fused_dot.b (q0: bf16[8,128], q1: bf16[128,256]) -> bf16[8,256] {
  %q0 = bf16[8,128]{1,0} parameter(0)
  %q1 = bf16[128,256]{1,0} parameter(1)
  ROOT %dot.2 = bf16[8,256]{1,0} dot(%q0, %q1), lhs_contracting_dims={1}, rhs_contracting_dims={0}
}

ENTRY %main (a: bf16[8,128], b: bf16[128,256]) -> bf16[8,256] {
  %a = bf16[8,128]{1,0} parameter(0)
  %b = bf16[128,256]{1,0} parameter(1)
  ROOT %dot_fusion.1 = bf16[8,256]{1,0} fusion(%a, %b), kind=kOutput, calls=%fused_dot.b
}
"""


def _planes_of_two_programs() -> list[NS]:
    """Two steps, each: the forward (HLO's ops: 100 ns), a stray eager op (3 ns), the backward (dot 30 ns)."""
    fwd = [("dot_fusion.1", 40), ("transpose_fusion.1", 10), ("all-gather-start.1", 5), ("adam_fusion.1", 15)]
    fwd += [(n, d) for _ in range(3) for n, d in (("flash_attention.7", 8), ("add_fusion.2", 2))]
    ops, modules, t = [], [], 0.0
    for _ in range(2):
        for program, body in (("tt_jit_export(5)", fwd), ("tt_jit_mean(9)", [("reduce.4", 3)]),
                              ("tt_jit_export(5)", [("dot_fusion.1", 30)])):
            start = t
            for name, dur in body:
                ops.append((name, t, dur, {}))
                t += dur
            modules.append((program, start, t - start, {}))
    return [NS(name="/device:TPU:0", lines=[_line("XLA Modules", modules), _line("XLA Ops", ops)])]


def test_a_step_of_several_programs_is_matched_program_by_program() -> None:
    programs = {"fwd": HLO, "bwd": BWD}
    times = trace.program_times(_planes_of_two_programs(),
                                {k: set(breakdown.program_info(v)) for k, v in programs.items()})
    assert times.executions == 2 and times.device_s == pytest.approx([130e-9, 130e-9])  # the stray op is no program's
    assert times.self_ns["bwd/dot_fusion.1"] == 60 and times.self_ns["fwd/dot_fusion.1"] == 80
    assert "reduce.4" not in " ".join(times.self_ns)
    roofs = breakdown.Roofs(flops_per_s=100e12, bytes_per_s=1e16, ici_bytes_per_s=1e16)
    b = breakdown.measured("c1", times, programs, roofs, wall_s=140e-9, attention_flops=1e6)
    s = b.seconds()
    assert s["matmul"] == pytest.approx(70e-9) and s["attention"] == pytest.approx(24e-9)
    assert b.step_s == pytest.approx(130e-9) and b.coverage == pytest.approx(1.0)
    with pytest.raises(trace.TraceError, match="no program execution in the trace matches"):
        trace.program_times(_planes_of_two_programs(), {"other": {"fusion.99"}})


def test_a_torch_tpu_row_is_explained_from_its_programs_hlo_and_its_trace(tmp_path) -> None:
    """A torch_tpu case keeps one HLO text per compiled program of its step (forward, backward) beside its
    trace; the row is explained over both (explain said: 'only JAX rows keep their trace and HLO text')."""
    csv_path = tmp_path / "RUN.csv"
    csv_path.write_text("schema_version,case_id,status,workload,backend,impl,devices,clock,wall_median_s,"
                        "peak_tflops,peak_gbytes_per_s\n2,c1,ok,train,torch_tpu,splash,1,device,1.4e-7,197,819\n")
    case = tmp_path / "RUN.explain" / "c1"
    (case / "plugins" / "profile").mkdir(parents=True)
    csv_path.with_name("RUN.meta.json").write_text(json.dumps({"trace_root": str(tmp_path / "RUN.explain")}))
    (case / "module_0296.tt_jit_export.hlo.txt").write_text(HLO)
    (case / "module_0386.tt_jit_export.hlo.txt").write_text(BWD)
    (case / "plugins" / "profile" / "vm.xplane.pb").write_bytes(b"")
    (b,) = runfile.explain_run(csv_path, (), lambda p: _planes_of_two_programs()).breakdowns
    assert b.step_s == pytest.approx(130e-9) and b.seconds()["matmul"] == pytest.approx(70e-9)
    assert "2 programs" in b.source


def test_a_case_keeps_the_programs_dumped_since_it_began_and_clears_the_dump(tmp_path) -> None:
    import os

    from xlabench.explain import kept

    dump, case = tmp_path / "dump", tmp_path / "RUN.explain" / "c1"
    dump.mkdir()
    old = dump / "module_0007.tt_jit_export_x.after_optimizations.txt"  # an earlier case's, left behind
    old.write_text("HloModule old")
    os.utime(old, (100.0, 100.0))
    for n in ("0296", "0386"):
        (dump / f"module_{n}.tt_jit_export_x.after_optimizations.txt").write_text(f"HloModule m{n}")
        (dump / f"module_{n}.tt_jit_export_x.before_optimizations.txt").write_text("HloModule before")
    assert kept.dump_dir("--xla_force_host_platform_device_count=1 --xla_dump_to=/d/x --xla_dump_hlo_as_text") \
        == Path("/d/x") and kept.dump_dir("--xla_dump_hlo_as_text") is None
    assert kept.keep_dumped(dump, str(case), since=1000.0) == ["module_0296.hlo.txt", "module_0386.hlo.txt"]
    assert (case / "module_0386.hlo.txt").read_text() == "HloModule m0386" and list(dump.iterdir()) == []
    assert kept.keep_dumped(dump, None, 0.0) == [] and kept.keep_dumped(None, str(case), 0.0) == []


def test_a_torch_programs_ops_traced_in_the_optimizer_are_the_optimizers() -> None:
    """A torch.compile'd program's HLO prints the Python stack each op was traced in (FunctionNames,
    FileLocations, StackFrames; ops carry stack_frame_id): an op traced inside the function named
    OPTIMIZER_SCOPE (torch_shared/optim.py's) is the optimizer's, as a JAX op in that named scope is."""
    optim = Path(categories.__file__).parents[1] / "backends" / "torch_shared" / "optim.py"  # (torch: not here)
    assert f"def {categories.OPTIMIZER_SCOPE}(" in optim.read_text()
    text = """HloModule tt_jit_export, is_scheduled=true

FileNames
1 "/x/optim.py"
FunctionNames
1 "step"
2 "xlabench_optimizer"
3 "adamw_update"
FileLocations
1 {file_name_id=1 function_name_id=1 line=9 end_line=9 column=0 end_column=0}
2 {file_name_id=1 function_name_id=2 line=10 end_line=10 column=0 end_column=0}
3 {file_name_id=1 function_name_id=3 line=30 end_line=30 column=0 end_column=0}
StackFrames
1 {file_location_id=1 parent_frame_id=1}
2 {file_location_id=2 parent_frame_id=1}
3 {file_location_id=3 parent_frame_id=2}

%fused_upd (p0: f32[128,256], p1: f32[128,256]) -> f32[128,256] {
  %p0 = f32[128,256]{1,0} parameter(0)
  %p1 = f32[128,256]{1,0} parameter(1)
  ROOT %mul.1 = f32[128,256]{1,0} multiply(%p0, %p1), metadata={op_name="mul" stack_frame_id=3}
}

ENTRY %main (a: f32[128,256], b: f32[128,256]) -> (f32[128,256], f32[128,256]) {
  %a = f32[128,256]{1,0} parameter(0)
  %b = f32[128,256]{1,0} parameter(1)
  %upd_fusion.1 = f32[128,256]{1,0} fusion(%a, %b), kind=kLoop, calls=%fused_upd
  %add.2 = f32[128,256]{1,0} add(%a, %b), metadata={op_name="add" stack_frame_id=1}
  ROOT %t = (f32[128,256], f32[128,256]) tuple(%upd_fusion.1, %add.2)
}
"""
    assert categories.traced_in(text)[3] == {"adamw_update", "xlabench_optimizer", "step"}
    got = categories.categorize(text)
    assert got["upd_fusion.1"].category == "optimizer" and got["add.2"].category == "elementwise"
    assert categories.traced_in(HLO) == {}
