"""Pure pieces of the compile path: libtpu's out-of-HBM messages parsed, the fit check a TPU run
applies before timing a case, and the target table."""

from __future__ import annotations

import types

import pytest
from conftest import NoWorkerPool

from xlabench import hardware
from xlabench.backends.jax.aot import parse_oom
from xlabench.backends.jax.common import check_fits
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.units import GIB



def test_parse_oom_reads_both_forms_libtpu_uses() -> None:
    a = parse_oom("RESOURCE_EXHAUSTED: Ran out of memory on HBM, the total memory required for HLO "
                  "temporaries (16.50G) exceeds available HBM (15.75G).")
    assert a is not None and a.used == int(16.5 * GIB) and a.capacity == int(15.75 * GIB)
    b = parse_oom("XlaRuntimeError: RESOURCE_EXHAUSTED: Ran out of memory in memory space hbm. Used 20.52G of "
                  "30.75G hbm. Exceeded hbm capacity by 4.77G.")
    assert b is not None and b.used == int(20.52 * GIB) and b.capacity == int(30.75 * GIB)
    c = parse_oom("RESOURCE_EXHAUSTED: something else entirely")
    assert c is not None and c.used is None and c.capacity is None
    assert parse_oom("INVALID_ARGUMENT: Mosaic kernels cannot be automatically partitioned") is None


def _compiled(total_gib: float):
    ma = types.SimpleNamespace(argument_size_in_bytes=int(total_gib * GIB), output_size_in_bytes=0,
                               temp_size_in_bytes=0, alias_size_in_bytes=0)
    return types.SimpleNamespace(memory_analysis=lambda: ma)


def _device(limit_gib: float | None):
    stats = None if limit_gib is None else {"bytes_limit": int(limit_gib * GIB)}
    return types.SimpleNamespace(memory_stats=lambda: stats)


def test_a_run_skips_a_case_whose_program_exceeds_the_device_limit() -> None:
    check_fits(_compiled(15.0), _device(15.75))  # fits: no exception
    check_fits(_compiled(99.0), _device(None))  # a CPU reports no limit: never skipped
    with pytest.raises(CaseSkipped, match=r"needs 16.00 GiB per device, has 15.75 GiB"):
        check_fits(_compiled(16.0), _device(15.75))


def test_targets_are_unique_and_found_by_name() -> None:
    names = [t.name for t in hardware.TARGETS]
    assert len(names) == len(set(names))
    t = hardware.find_target("V4-8")
    assert (t.topology, dict(t.options), t.devices) == ("v4:2x2x1", {"chip_config_name": "megacore"}, 4)
    assert hardware.find_target("tpu7x-8").devices == 8  # 4 chips, 2 devices each
    with pytest.raises(hardware.UnknownTarget, match="v5e-8"):
        hardware.find_target("v9-3")


def test_compile_workers_use_libtpu_compile_only_and_cpu_workers_skip_tpu_init(monkeypatch) -> None:
    from xlabench.run import envs

    env = envs.worker_environ("jax", 1, {"JAX_PLATFORMS": "tpu"}, envs.COMPILE_VARIANT)
    assert env["JAX_PLATFORMS"] == "cpu" and env["ALLOW_MULTIPLE_LIBTPU_LOAD"] == "1"
    assert env["TPU_LOG_DIR"] == "disabled"
    assert envs.worker_environ("jax", 1, {"TPU_LOG_DIR": "/logs"}, envs.COMPILE_VARIANT)["TPU_LOG_DIR"] == "/logs"
    monkeypatch.setattr(envs, "accelerator_present", lambda: False)
    assert envs.worker_environ("jax", 1, {})["JAX_PLATFORMS"] == "cpu"  # an installed libtpu stays quiet
    assert envs.worker_environ("jax", 1, {"JAX_PLATFORMS": "cuda"})["JAX_PLATFORMS"] == "cuda"  # the user's wins
    monkeypatch.setattr(envs, "accelerator_present", lambda: True)
    assert "JAX_PLATFORMS" not in envs.worker_environ("jax", 1, {})  # a TPU VM or GPU host: JAX picks


def test_a_chip_is_one_record() -> None:
    """TARGETS, the megacore chips and the shipped tuning table's file derive from hardware.CHIPS."""
    from xlabench.impls import paged_rules
    from xlabench.tune import table

    assert {t.name for t in hardware.TARGETS} == {name for c in hardware.CHIPS for name, _ in c.slices}
    assert hardware.MEGACORE_CHIPS == ("TPU v4", "TPU v5p") and not hasattr(paged_rules, "MEGACORE_CHIPS")
    assert table.table_name("TPU v5 lite") == "tpu_v5_lite.json" and table.table_name("TPU v6 lite") == "tpu_v6_lite.json"
    for chip in hardware.CHIPS:
        assert chip.tuning_table is None or (table.PACKAGE_DIR / chip.tuning_table).is_file(), chip.name


def _tpu_case(tmp_path, extra: str = ""):
    from xlabench import suite

    p = tmp_path / "s.yaml"
    p.write_text("name: s\nworkload: attention\nbackends: [jax]\nimpls: [naive]\n"
                 "params: {batch: 2, num_heads: 4, seq_len: 1024, head_dim: 128, dtype: bfloat16, causal: true}\n"
                 + extra)
    return suite.load(p).cases()[0]


# What a compile row and a run row of one case say differently by nature: what happened to it, and when.
_DIFFER_BY_NATURE = {"status", "timestamp"}


@pytest.mark.parametrize("extra", ["", "peak_tflops: 100\n"])
def test_a_case_compile_and_run_rows_agree_on_every_shared_column(tmp_path, extra: str) -> None:
    """The compile row is built by the run's row builder (run/rows.py), so a case's compile row and run row
    agree on the case, the platform and device, interpret, and the peak and the MFU it is rated against (the
    compile path derived its peak apart and ignored a suite's peak_tflops, which the run's rows use)."""
    from xlabench.protocol.status import COMPILED
    from xlabench.protocol.worker_messages import CaseResult
    from xlabench.run import rows as row_builder
    from xlabench.run.case_plan import plan_case
    from xlabench import impls as catalog
    from xlabench.run.scheduler import RunContext

    case = _tpu_case(tmp_path, extra)
    target = hardware.find_target("v5e-1")
    env = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 1, "process_count": 1,
           "framework_version": "jax 0.0 / jaxlib 0.0 / libtpu 0.0"}
    ctx = RunContext(run_id="r", platform="tpu", git_sha="x", hostname="h")
    flops, xla = 4.4e9, {"xla_flops": 4.4e9, "xla_bytes_accessed": 2e7}
    run, _ = row_builder.case_row(case, ctx, env, [CaseResult(samples=(1e-3,) * 5, correct=True,
                                                              metrics={"flops": flops, **xla})])
    plan = plan_case(case, catalog.find(case.backend, case.impl, case.workload), target.platform, ctx)
    compiled = row_builder.compile_row(case, ctx, plan, env, {"status": COMPILED, "error": None, "compile_s": 2.0,
                                                              "flops": flops, **xla}, target)
    shared = {k for k in set(run) & set(compiled) if run[k] is not None and compiled[k] is not None}
    assert {"case_id", "seq_len", "platform", "device_kind", "interpret", "peak_tflops", "peak_source",
            "peak_gbytes_per_s", "flops", "bound_by", "arith_intensity"} <= shared
    assert {k: compiled[k] for k in shared - _DIFFER_BY_NATURE} == {k: run[k] for k in shared - _DIFFER_BY_NATURE}
    assert compiled["peak_tflops"] == (100 if extra else hardware.device_peak("tpu", "TPU v5 lite").tflops)
    assert compiled["mfu_ceiling"] is not None and compiled["interpret"] is False and compiled["warmup"] is None


def test_compile_reports_through_the_runs_hooks_and_outcome(tmp_path, monkeypatch) -> None:
    """`compile` has no hooks or outcome of its own: compile_suite takes the run's RunHooks (start with its
    line and cases, case_start per job, row per case) and returns a RunOutcome, its rows built by the run's
    row builder (fake workers: the target probe and each compile are stubbed)."""
    from xlabench import suite as suite_lib
    from xlabench.protocol.status import COMPILED
    from xlabench.run import compile_runner, session
    from xlabench.run.run_options import RunOptions
    from xlabench.run.suite_runner import RunHooks, RunOutcome

    env = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 8, "framework_version": "x"}
    monkeypatch.setattr(session, "WorkerPool", NoWorkerPool)  # the target probe and compiles are stubbed
    monkeypatch.setattr(compile_runner, "_target_env", lambda sess, target, spec: (env, {}))
    monkeypatch.setattr(compile_runner, "_compile_one", lambda case, *a, **kw: {
        "status": COMPILED, "error": None, "flops": 1e9, "xla_flops": 1e9, "xla_bytes_accessed": 1e7})
    p = tmp_path / "s.yaml"
    p.write_text("name: c\nworkload: attention\nimpls: [naive]\n"
                 "params: {num_heads: 2, head_dim: 128, dtype: bfloat16, batch: 1}\nmatrix:\n  seq_len: [256, 512]\n")
    seen: list[tuple] = []
    hooks = RunHooks(start=lambda lines, runs, cases, jobs: seen.append(("start", lines, runs, len(cases), jobs)),
                     case_start=lambda job, case: seen.append(("case", job)),
                     row=lambda case, row: seen.append(("row", row["seq_len"], row["status"])))
    out = compile_runner.compile_suite(suite_lib.load(p), "v5e-8", opts=RunOptions(
        out_dir=str(tmp_path / "out"), jobs=1, no_cache=True), hooks=hooks)
    assert isinstance(out, RunOutcome) and out.count(COMPILED) == 2 and out.target.name == "v5e-8"
    assert seen[0] == ("start", ["suite c profile base compiled for v5e-8 (8 x TPU v5 lite, x): 2 case(s)"], 2, 2, 1)
    assert seen[1:] == [("case", 0), ("row", 256, COMPILED), ("case", 0), ("row", 512, COMPILED)]
    assert all(r["peak_tflops"] == hardware.device_peak("tpu", "TPU v5 lite").tflops for r in out.rows)


def test_compile_runs_on_the_runs_loop_with_a_compile_only_action(tmp_path, monkeypatch) -> None:
    """No compile-only case loop: compile_suite hands its cases to scheduler.run_cases (the run's loop) with
    the CompileOnly action; a backend with no compile-only client is a skipped row decided at start (no
    worker asked, no job taken), two jobs compile the rest and note their workers' peak memory, and the
    outcome's rows are in suite order whichever job finished first."""
    from xlabench import suite as suite_lib
    from xlabench.protocol.status import COMPILED, SKIPPED
    from xlabench.run import compile_runner, scheduler, session
    from xlabench.run.run_options import RunOptions
    from xlabench.run.suite_runner import RunHooks

    class Pool(NoWorkerPool):
        def peak_rss_bytes(self) -> int:
            return 7

    actions: list[str] = []
    loop = scheduler.run_cases

    def run_cases(*a, **kw):
        actions.append(type(kw["action"]).__name__)
        return loop(*a, **kw)

    asked: list[str] = []
    env = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 8, "framework_version": "x"}
    monkeypatch.setattr(session, "WorkerPool", Pool)
    monkeypatch.setattr(scheduler, "run_cases", run_cases)
    monkeypatch.setattr(compile_runner, "_target_env", lambda sess, target, spec: (env, {}))
    monkeypatch.setattr(compile_runner, "_compile_one", lambda case, *a, **kw: asked.append(case.backend) or {
        "status": COMPILED, "error": None, "flops": 1e9, "xla_flops": 1e9, "xla_bytes_accessed": 1e7})
    p = tmp_path / "s.yaml"
    p.write_text("name: c\nworkload: attention\nbackends: [jax, torch_xla]\nimpls: [naive]\n"
                 "params: {num_heads: 2, head_dim: 128, dtype: bfloat16, batch: 1}\nmatrix:\n  seq_len: [256, 512]\n")
    started: list[int] = []
    out = compile_runner.compile_suite(suite_lib.load(p), "v5e-8", opts=RunOptions(
        out_dir=str(tmp_path / "out"), jobs=2, no_cache=True), hooks=RunHooks(case_start=lambda job, c: started.append(job)))
    assert actions == ["CompileOnly"] and asked == ["jax", "jax"] and len(started) == 2
    assert [(r["backend"], r["seq_len"], r["status"]) for r in out.rows] == [(c.backend, c.params["seq_len"], (
        COMPILED if c.backend == "jax" else SKIPPED)) for c in out.cases]
    assert all(compile_runner.NO_COMPILE_ONLY["torch_xla"] == r["error"] for r in out.rows if r["status"] == SKIPPED)
    assert out.jobs == 2 and out.job_peak_bytes == [7, 7]


def test_a_compile_request_carries_the_case_plan_and_the_worker_reads_its_tuning_folder(tmp_path, monkeypatch) -> None:
    """Issue 51: compile's request carries the case plan (interpret and the timing plan with the tuning
    folder), as a run's does, instead of the worker choosing them; compile_runner sends the plan_case of
    each case with the session's tuning folder, and a train step's attention reads that folder."""
    from xlabench import suite as suite_lib
    from xlabench import tune
    from xlabench.protocol.status import COMPILED
    from xlabench.protocol.timing_plan import TimingPlan
    from xlabench.protocol.worker_messages import CompileRequest, CompileResult
    from xlabench.run import compile_runner, session
    from xlabench.run.run_options import RunOptions
    from xlabench.run.suite_runner import RunHooks

    target = compile_runner.target_spec(hardware.find_target("v5e-8"), 1)
    case = type("C", (), dict(case_id="c1", workload="train", backend="jax", impl="flash", params={"seq_len": 128}))
    req = CompileRequest.from_case(case, target, TimingPlan(tune="search", tune_dir="/x/tune"), interpret=False)
    back = CompileRequest.from_message(req.to_message())
    assert back == req and back.plan.tune_dir == "/x/tune" and back.interpret is False

    sent: list = []

    def ask(pool, key, make, timeout_s, parse):
        sent.append(CompileRequest.from_message(make(None)))
        return parse(CompileResult(COMPILED, {}).to_message())

    env = {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 8, "framework_version": "x"}
    monkeypatch.setattr(session, "WorkerPool", NoWorkerPool)  # the target probe and compiles are stubbed
    monkeypatch.setattr(compile_runner, "_target_env", lambda sess, target, spec: (env, {}))
    monkeypatch.setattr(compile_runner.workers, "ask", ask)
    monkeypatch.setattr(tune, "default_dir", lambda: tmp_path / "tune-here")
    p = tmp_path / "s.yaml"
    p.write_text("name: c\nworkload: attention\nimpls: [naive, splash]\n"
                 "params: {num_heads: 2, head_dim: 128, dtype: bfloat16, batch: 1, seq_len: 512}\n")
    compile_runner.compile_suite(suite_lib.load(p), "v5e-8", opts=RunOptions(
        out_dir=str(tmp_path / "out"), jobs=1, no_cache=True), hooks=RunHooks())
    assert [(r.impl, r.interpret, r.plan.tune, r.plan.tune_dir) for r in sent] == [
        ("naive", False, "search", str(tmp_path / "tune-here")), ("splash", False, "search", str(tmp_path / "tune-here"))]


def test_a_compiled_train_step_takes_its_attention_blocks_from_the_plans_tuning_folder(tmp_path, monkeypatch) -> None:
    """The folder the compile request's plan names, not the worker's own default, holds the blocks a
    compile-only train step's attention uses."""
    from xlabench import tune
    from xlabench.backends.jax import train_case
    from xlabench.tune.search import TuneOutcome
    from xlabench.workloads.attention import AttentionParams, tune_key_fields
    from xlabench.workloads.train import TrainParams

    monkeypatch.setattr(tune, "default_dir", lambda: tmp_path / "empty")
    case = AttentionParams(batch=2, num_heads=4, num_kv_heads=4, seq_len=128, head_dim=32, causal=True,
                           dtype="float32", mode="fwd_bwd")
    key = tune.cache_key("TPU v5 lite", "jax", "flash", tune_key_fields(case), {"jax": "0.10.2"})
    tune.TuneCache(tmp_path / "planned").store(key, "space", TuneOutcome(
        blocks={"block_q": 64, "block_k": 128}, best_s=1e-3, default_s=2e-3, tried=1, timed=1, dropped={},
        tune_s=1.0, clock="device"))
    p = TrainParams(model="gpt2-tiny", global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    notes: dict = {}
    train_case.program(p, "flash", True, "cpu", tuned=notes, cached_for="TPU v5 lite",
                       cache_dir=str(tmp_path / "planned"))
    assert "block_k=128 block_q=64" in notes["notes"], notes
    train_case.program(p, "flash", True, "cpu", tuned=notes, cached_for="TPU v5 lite")  # no plan: the default
    assert "holds no winner" in notes["notes"] and str(tmp_path / "empty") in notes["notes"], notes
