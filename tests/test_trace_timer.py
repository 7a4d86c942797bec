"""measure.timer: trace: device seconds from a JAX profiler trace (CPU here: the executable's XLA ops)."""

from __future__ import annotations

import json
import time
from pathlib import Path
from types import SimpleNamespace as NS

import jax
import numpy as np
import pytest
from conftest import run_cli

from xlabench import results
from xlabench.gate.config import METRICS
from xlabench.run.rows import measured
from xlabench.run.metrics import derive
from xlabench.protocol.worker_messages import CaseResult
from xlabench.measure.timing import TimingPlan, case_result

ENV = {"platform": "cpu", "device_kind": "cpu", "device_count": 1}
TINY = dict(batch=1, num_heads=2, seq_len=128, head_dim=32, dtype="float32", causal=False, mode="fwd")


def _ev(name, start, dur, **stats):
    return NS(name=name, start_ns=float(start), duration_ns=float(dur), stats=list(stats.items()))


def _plane(name, lines):
    return NS(name=name, lines=[NS(name=n, events=evs) for n, evs in lines.items()])


# ------------------------------------------------------------------------- parsing the trace's planes


def test_cpu_layout_gives_one_span_per_run_id():
    from xlabench.backends.jax.trace_timer import device_seconds

    ops = [_ev("fusion.1", 100, 50, hlo_module="jit_f", run_id=7), _ev("fusion.2", 160, 40, hlo_module="jit_f", run_id=7),
           _ev("fusion.1", 1000, 30, hlo_module="jit_f", run_id=8),
           _ev("fusion.9", 120, 500, hlo_module="jit_other", run_id=9)]  # another executable: not counted
    cpu = _plane("/host:CPU", {"python": [_ev("PjitFunction(jit(f))", 0, 400)],
                               "tf_XLAPjRtCpuClient/1": ops[:2], "tf_XLAPjRtCpuClient/2": ops[2:]})
    assert device_seconds([_plane("/host:metadata", {}), cpu], "jit_f") == [100e-9, 30e-9]


def test_device_planes_use_the_xla_modules_line_longest_device():
    from xlabench.backends.jax.trace_timer import device_seconds

    d0 = _plane("/device:TPU:0", {"XLA Modules": [_ev("jit_f(3)", 0, 10), _ev("jit_f(3)", 100, 12)],
                                  "XLA Ops": [_ev("fusion", 0, 5, hlo_module="jit_f", run_id=1)]})
    d1 = _plane("/device:TPU:1", {"XLA Modules": [_ev("jit_f(3)", 0, 11), _ev("jit_f(3)", 100, 9)]})
    assert device_seconds([d0, d1], "jit_f") == [11e-9, 12e-9]


def test_device_events_sharing_a_run_id_are_one_execution_their_span():
    from xlabench.backends.jax.trace_timer import device_seconds

    d0 = _plane("/device:TPU:0", {"XLA Modules": [_ev("jit_f(3)", 0, 10, run_id=1), _ev("jit_f(3)", 15, 5, run_id=1),
                                                  _ev("jit_f(3)", 100, 12, run_id=2)]})
    assert device_seconds([d0], "jit_f") == [20e-9, 12e-9]


def test_k_events_per_synced_call_are_one_execution_each_where_they_divide_exactly():
    """Issue 49: the ragged paged search on the v5e stopped at "6 executions of jit_..._8, called 3 times"."""
    from xlabench.backends.jax.trace_timer import device_seconds

    evs = [_ev("jit_f(3)", t, d) for t, d in ((0, 10), (10, 2), (100, 11), (111, 2), (200, 9), (209, 3))]
    d0 = _plane("/device:TPU:0", {"XLA Modules": evs})
    assert device_seconds([d0], "jit_f", calls=3) == [12e-9, 13e-9, 12e-9]
    assert device_seconds([d0], "jit_f") == [10e-9, 2e-9, 11e-9, 2e-9, 9e-9, 3e-9]  # no call count: as found
    assert len(device_seconds([d0], "jit_f", calls=4)) == 6  # not a multiple: left as found (the caller refuses)


def test_the_tuner_refuses_a_trace_whose_executions_outnumber_its_calls(monkeypatch):
    from xlabench.backends.jax import trace_timer, tune_case

    evs = [_ev("jit_c(1)", t, 10) for t in (0, 100, 200, 300)]
    monkeypatch.setattr(trace_timer, "profiled_planes", lambda run: [_plane("/device:TPU:0", {"XLA Modules": evs})])
    h = tune_case.Handle(compiled=lambda: None, args=(), module="jit_c")
    with pytest.raises(tune_case.PooledTrace, match="4 executions of jit_c, called 3 times"):
        tune_case.time_many([h], 3)
    evs[3:] = []
    assert tune_case.time_many([h], 3) == ([10e-9], "device")  # one per call: its median


def test_no_events_of_the_executable_is_an_error_naming_it():
    from xlabench.backends.jax.trace_timer import TraceTimerError, device_seconds

    cpu = _plane("/host:CPU", {"t": [_ev("fusion", 0, 5, hlo_module="jit_other", run_id=1)]})
    with pytest.raises(TraceTimerError, match="no profiler events of the executable jit_f"):
        device_seconds([cpu], "jit_f")


# ------------------------------------------------------------------------- rows: pooled, derived, piped


def _reply(samples, device=()):
    r = case_result(list(samples), TimingPlan(), None, 1.0, None, 0.0, 1.0, "")
    if device:
        r = r.replace(timer="trace", device_samples=tuple(device))
    return r


def test_every_result_says_its_timer_wallclock_unless_traced():
    assert _reply([1.0]).fields["timer"] == "wallclock"  # every backend's case_result (torch_xla too)
    assert "device_median_s" not in measured([_reply([1.0])]).fields


def test_device_samples_pool_cross_the_pipe_and_give_host_overhead():
    a, b = _reply([2.0, 2.0, 2.0], device=[1.0, 1.0, 1.0]), _reply([4.0, 4.0, 4.0], device=[2.0, 2.0, 2.0])
    out = measured([a, b])
    assert out.samples == (2.0,) * 3 + (4.0,) * 3 and out.fields["device_median_s"] == 1.5  # CPU: wall headline
    assert derive(out, ENV, 1, None)["host_overhead"] == pytest.approx(3.0 / 1.5)
    assert "host_overhead" not in derive(measured([_reply([1.0])]), ENV, 1, None)
    back = CaseResult.from_message(json.loads(json.dumps(a.to_message())))
    assert back == a


def test_with_timer_records_a_failed_trace_as_a_note_not_a_zero():
    from xlabench.measure.timing import with_timer

    r = with_timer(_reply([1.0]), TimingPlan(timer="trace"), "no profiler events of the executable jit_f")
    assert r.fields["timer"] == "trace" and "device_median_s" not in measured([r]).fields
    assert "trace timer: no device times (no profiler events of the executable jit_f)" in r.notes


def test_gate_judges_device_median_on_scaled_wallclock_samples():
    m = METRICS["device_median_s"]
    assert not m.higher_is_better
    s = np.array([2.0, 2.2, 1.8])
    assert np.allclose(m.per_iteration({"device_median_s": 1.0, "median_s": 2.0}, s), s / 2)
    assert m.per_iteration({"device_median_s": None, "median_s": 2.0}, s) is None  # wallclock row: not judged


# ------------------------------------------------------------------------- real JAX on CPU


def test_trace_of_a_real_attention_case_is_device_time_within_host_time():
    import jax
    import jax.numpy as jnp

    from xlabench.backends.jax import trace_timer
    from xlabench.backends.jax.attention_case import run_attention_case

    r = run_attention_case(TINY, "naive", TimingPlan(warmup=2, iters=10, timer="trace"), False, "cpu")
    f = measured([r]).fields
    assert f["timer"] == "trace" and len(r.device_samples) == f["n"] == 10
    assert 0 < f["device_p10_s"] <= f["device_median_s"] <= f["device_p90_s"]
    # The wallclock and the profiled pass are separate loops: on this 2-core host under other jobs' load
    # their medians drift apart (measured: device_median_s up to 1.4x median_s at load 5), so across the
    # passes only a loose bound holds ...
    assert f["device_median_s"] <= 3 * f["median_s"]

    # ... and the strict one inside one profiled pass, iteration by iteration: the ops' span lies inside
    # the host's call + sync.
    def naive(q, k, v):
        s = jnp.einsum("bqhd,bkhd->bhqk", q, k)
        return jnp.einsum("bhqk,bkhd->bqhd", jax.nn.softmax(s, -1), v)

    x = jnp.ones((1, 128, 2, 32))
    compiled = jax.jit(naive).lower(x, x, x).compile()
    jax.block_until_ready(compiled(x, x, x))
    host: list[float] = []

    def call():
        host.append(time.perf_counter())
        return compiled(x, x, x)

    def sync(out):
        jax.block_until_ready(out)
        host[-1] = time.perf_counter() - host[-1]

    device = trace_timer.profiled_seconds(call, sync, 8, trace_timer.module_name(compiled))
    assert len(device) == 8 and all(0 < d <= h for d, h in zip(device, host))
    assert np.median(device) <= np.median(host)
    with pytest.raises(trace_timer.TraceTimerError, match="no profiler events of the executable jit_nope"):
        trace_timer.profiled_seconds(call, sync, 1, "jit_nope")


SUITE = """
name: traced
workload: attention
backends: [jax]
impls: [naive]
params: {num_heads: 2, head_dim: 32, dtype: float32, batch: 1, causal: false}
matrix:
  seq_len: [64, 128]
measure: {warmup: 1, iters: 5, timeout_s: 120, timer: trace}
"""


def _rows(out: Path):
    found = [p for p in sorted(out.glob("*/*.csv")) if not p.name.endswith(".samples.csv")]
    assert len(found) == 1, found
    return results.read_rows(found[0])


@pytest.mark.slow  # starts a process
def test_a_trace_suite_runs_end_to_end_and_timer_overrides_it(write_suite, tmp_path):
    suite = write_suite(SUITE)
    proc = run_cli("run", str(suite), "--out", str(tmp_path / "trace"))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    df = _rows(tmp_path / "trace")
    assert list(df["status"]) == ["ok", "ok"] and set(df["timer"]) == {"trace"}
    assert (df["device_median_s"] > 0).all() and (df["host_overhead"] > 0).all()
    assert np.allclose(df["host_overhead"], df["median_s"] / df["device_median_s"])
    csv = next(p for p in (tmp_path / "trace").glob("*/*.csv") if not p.name.endswith(".samples.csv"))
    proc = run_cli("compare", str(csv), str(csv), "--metric", "device_median_s")
    assert proc.returncode == 0, proc.stdout + proc.stderr  # the same rows: no regression

    proc = run_cli("run", str(suite), "--out", str(tmp_path / "wall"), "--timer", "wallclock")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    df = _rows(tmp_path / "wall")
    assert set(df["timer"]) == {"wallclock"}  # filled in every ok row
    assert df["device_median_s"].isna().all() and df["host_overhead"].isna().all()


@pytest.mark.slow  # starts a process
def test_bad_timer_option_is_exit_2(write_suite):
    proc = run_cli("run", str(write_suite(SUITE)), "--timer", "gpu")
    assert proc.returncode == 2 and "--timer" in proc.stderr
    proc = run_cli("gate", str(write_suite(SUITE)), "--baseline", "nope.csv", "--timer", "host")
    assert proc.returncode == 2 and "--timer" in proc.stderr


def test_device_time_above_wallclock_is_said_in_the_notes():
    from xlabench.measure.timing import with_timer

    f = measured([with_timer(_reply([1.0, 1.0]), TimingPlan(timer="trace"), (2.0, 2.0))]).fields
    assert f["device_median_s"] == 2.0 and "device_median_s above median_s" in f["notes"]
    assert not measured([with_timer(_reply([1.0, 1.0]), TimingPlan(timer="trace"), (0.5, 0.5))]).fields["notes"]


@pytest.mark.slow  # starts a process
def test_trace_dir_keeps_a_profile_per_case_listed_in_the_meta_and_linked_by_the_report(write_suite, tmp_path):
    """`run --trace DIR`: a wallclock suite is traced anyway, each case's .xplane.pb (parseable by JAX's own
    reader) and Perfetto trace land in DIR/<case_id>/, the meta JSON lists them, `report` links them."""
    suite = write_suite(SUITE.replace(", timer: trace}", "}"))
    out, traces = tmp_path / "res", tmp_path / "traces"
    proc = run_cli("run", str(suite), "--out", str(out), "--trace", str(traces))
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = _rows(out)
    assert set(rows["timer"]) == {"trace"} and rows["device_median_s"].notna().all()
    csv = next(p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv"))
    kept = json.loads(results.RunFiles(csv).meta.read_text())["traces"]
    assert set(kept) == set(rows["case_id"])
    for case_id, files in kept.items():
        xplane = [f for f in files if f.endswith(".xplane.pb")]
        assert len(xplane) == 1 and Path(xplane[0]).is_relative_to(traces / case_id)
        assert any(f.endswith("perfetto_trace.json.gz") for f in files)
        planes = [p.name for p in jax.profiler.ProfileData.from_file(xplane[0]).planes]
        assert "/host:CPU" in planes
    report = tmp_path / "report.md"
    proc = run_cli("report", str(csv), "--out", str(report))
    assert proc.returncode == 0, proc.stderr
    text = report.read_text()
    assert "## Traces" in text and text.count(".xplane.pb](") == len(kept)


def test_where_the_device_clock_is_the_headline_min_time_goes_to_the_device_pass():
    """On an accelerator a kernel's headline is its device seconds: the wall loop (the column beside it)
    takes ``iters`` synced calls, and the device pass the calls that ``min_time_s`` asks for."""
    import dataclasses

    from xlabench.measure.timing import device_iters, passes
    from xlabench.run.case_plan import headline

    plan = TimingPlan(warmup=1, iters=20, min_time_s=1.0, max_iters=1000, timer="trace")
    assert headline("tpu", "attention", plan) == headline("gpu", "paged_attention", plan) == "device"
    assert headline("cpu", "attention", plan) == "wall"  # CPU: the wall clock stays the headline
    assert headline("tpu", "train", plan) == "wall"  # a train step: its pipelined loop's wall time
    assert headline("tpu", "attention", TimingPlan(min_time_s=1.0, timer="wallclock")) == "wall"
    head = dataclasses.replace(plan, headline="device")  # the parent's decision, in the plan it sends
    assert passes(head).min_time_s == 0.0 and passes(head).iters == 20
    assert passes(plan) == plan
    wall = [4e-3] * 20
    assert device_iters(head, wall) == 250  # 1 s at 4 ms a call
    assert device_iters(plan, wall) == 20  # as many as the wall loop took
    assert device_iters(head, [1e-5] * 20) == 1000  # at most max_iters
    assert device_iters(head, [2.0] * 20) == 20  # at least the wall loop's


def test_a_pipelined_pass_dispatches_before_it_syncs_and_times_every_call():
    import jax
    import jax.numpy as jnp

    from xlabench.backends.jax import trace_timer

    compiled = jax.jit(lambda x: jnp.tanh(x @ x)).lower(jnp.ones((64, 64))).compile()
    x = jnp.ones((64, 64))
    events: list[str] = []

    def call():
        events.append("call")
        return compiled(x)

    def sync(out):
        events.append("sync")
        jax.block_until_ready(out)

    device = trace_timer.profiled_seconds(call, sync, 5, trace_timer.module_name(compiled), pipelined=True)
    assert len(device) == 5 and all(d > 0 for d in device)
    assert events == ["call", "call", "sync", "call", "sync", "call", "sync", "call", "sync", "sync"]


def test_cases_of_one_shape_share_their_inputs_and_each_mask_and_mode_its_reference(monkeypatch):
    """A suite runs naive, flash and splash of a case back to back: the inputs are drawn once per shape
    (fwd's q, k, v are fwd_bwd's) and the float32 reference computed once per shape, mode and mask."""
    from xlabench.backends.jax import attention_case, attention_impls
    from xlabench.workloads.attention import AttentionParams, make_inputs

    p = AttentionParams(**{**TINY, "mode": "fwd_bwd"})
    fwd = make_inputs(p.model_copy(update={"mode": "fwd"}))
    both = make_inputs(p)
    assert set(fwd) == {"q", "k", "v"} and set(both) == {"q", "k", "v", "do"}
    assert all(fwd[n] is both[n] for n in fwd)
    calls = []
    real = attention_impls.reference_outputs
    monkeypatch.setattr(attention_impls, "reference_outputs", lambda *a, **k: calls.append(1) or real(*a, **k))
    first = attention_case.reference(p, both, 0.125)
    again = attention_case.reference(p, both, 0.125)
    assert len(calls) == 1 and all(a is b for a, b in zip(first, again)) and len(first) == 4
    assert all(isinstance(r, jax.Array) for r in first)  # kept on the device: the check reduces it there
    attention_case.reference(p.model_copy(update={"causal": not p.causal}), both, 0.125)
    assert len(calls) == 2
    want = real(*(np.asarray(both[n]) for n in ("q", "k", "v", "do")), p.causal, 0.125)
    np.testing.assert_allclose(attention_case.reference(p, both, 0.125)[1], np.asarray(want[1]), rtol=1e-6)


def test_a_case_logs_where_its_time_went_phase_by_phase():
    import io

    from xlabench.measure.phases import Phases

    ticks = iter([0.0, 1.5, 1.5, 1.75, 2.0, 3.0])
    phase = Phases(clock=lambda: next(ticks))
    with phase("inputs"):
        pass
    with phase("tune"):
        pass
    with phase("inputs"):  # a phase entered twice adds up
        pass
    out = io.StringIO()
    phase.log("flash S=4096", out)
    assert out.getvalue() == "flash S=4096: inputs 2.50 s, tune 0.25 s (total 2.75 s)\n"
