"""A study fitted to the slice it runs on (suite/slice_fit.py, issue 48): planned for 1, 4 and 8 devices, the
model chosen by the fit, one program per mesh, the ladder's best point unrolled, a case the slice cannot hold
skipped; and the compile plans for v5e-8 and v4-8. Plans only: nothing compiles or runs here."""

from __future__ import annotations

from typing import Any

import pytest

from xlabench import results
from xlabench import suite as suite_lib
from xlabench.run import compile_runner, scheduler
from xlabench.run.run_options import RunOptions
from xlabench.suite import slice_fit
from xlabench.protocol.status import SKIPPED
from xlabench.units import GIB
from xlabench.workloads.train import MODE_AXES

LIMIT = int(15.75 * GIB)
# per-device bytes at the ladder's smallest batch, as a v5e's fit would find them (2B does not fit one chip)
NEED = {"gpt2-2b": 20 * GIB, "gpt2-355m": 9 * GIB, "gpt2-124m": 4 * GIB}


def fake_fit(calls: list) -> slice_fit.ModelFitter:
    def fit(candidates: list[dict[str, Any]], impls: list[str]) -> list[slice_fit.Probe]:
        calls.append((candidates, impls))
        probes = []
        for c in candidates:
            per_device = NEED[c["model"]] // c.get("devices", 1) if c["model"] == "gpt2-2b" else NEED[c["model"]]
            probes += [slice_fit.Probe(c["model"], i, per_device, LIMIT) for i in impls]
            if per_device <= LIMIT:
                break
        return probes
    return fit


@pytest.mark.parametrize("devices", [1, 4, 8])
def test_a_suite_planned_for_1_4_and_8_devices_runs_each_program_once(devices: int) -> None:
    calls: list = []
    cases = suite_lib.load("suites/gpt2.yaml").cases("", slice_fit.Slice("tpu", devices, fake_fit(calls)))
    assert {c.devices for c in cases} == {devices}
    per_device = {c.params["global_batch"] // devices for c in cases}
    assert per_device == {2, 4, 8, 12}
    keys = [(c.backend, c.impl, slice_fit.program_key(c.params, MODE_AXES)) for c in cases]
    assert len(keys) == len(set(keys)), "a program is planned twice"
    # the fit compiles the candidates at the ladder's smallest batch, for every JAX impl
    (candidates, impls), = calls
    assert impls == ["naive", "flash", "splash"]
    assert {(c["per_device_batch"], c["devices"]) for c in candidates} == {(2, devices)}
    model = {c.params["model"] for c in cases}
    if devices == 1:
        assert model == {"gpt2-355m"}
        assert {c.params["sharding"] for c in cases} == {"fsdp"}
        assert all("fsdp, 2d, auto are one program on 1 device" in c.note for c in cases)
        assert all("gpt2-2b needs 20.00 GiB with naive" in c.note for c in cases)
        assert all("model gpt2-355m: the largest of gpt2-2b, gpt2-355m, gpt2-124m" in c.note for c in cases)
    else:  # fsdp shards the 2B model's 20 GiB over the devices
        assert model == {"gpt2-2b"}
        assert {c.params["sharding"] for c in cases} == {"fsdp", "2d", "auto"}
    assert all(c.unroll_best and c.params["scan_layers"] is True for c in cases)


def test_modes_that_are_one_mesh_run_once_where_the_mesh_has_more_devices() -> None:
    """On 2 devices 2d has tensor=1: the fsdp program under another name."""
    params = {"mesh": "data=1,fsdp=2,tensor=1", "model": "m"}
    fsdp = slice_fit.program_key({**params, "sharding": "fsdp"}, MODE_AXES)
    assert slice_fit.program_key({**params, "sharding": "2d"}, MODE_AXES) == fsdp
    assert slice_fit.program_key({**params, "sharding": "auto", "mesh": "data=2,fsdp=1,tensor=1"}, MODE_AXES) != fsdp
    four = {"mesh": "data=1,fsdp=2,tensor=2", "model": "m"}
    assert slice_fit.program_key({**four, "sharding": "2d"}, MODE_AXES) != fsdp


def test_no_model_fits_plans_the_smallest_and_says_what_each_needs() -> None:
    probes = [slice_fit.Probe("gpt2-2b", "naive", 30 * GIB, LIMIT), slice_fit.Probe("gpt2-355m", "naive", 17 * GIB, LIMIT),
              slice_fit.Probe("gpt2-124m", "flash", 16 * GIB, LIMIT)]
    model, note = slice_fit.choose_model(["gpt2-124m", "gpt2-2b", "gpt2-355m"], probes, "the ladder's smallest")
    assert model == "gpt2-124m"
    assert "none of gpt2-2b, gpt2-355m, gpt2-124m fits" in note and "gpt2-355m needs 17.00 GiB with naive" in note


def test_a_device_without_a_memory_limit_takes_the_smallest_listed_model() -> None:
    model, note = slice_fit.choose_model(["gpt2-2b", "gpt2-tiny"], [slice_fit.Probe("gpt2-2b", "naive", None, None)], "x")
    assert model == "gpt2-tiny" and "reports no memory limit" in note


def test_a_case_the_slice_cannot_hold_is_skipped_not_failed() -> None:
    """A suite that pins devices: 4, run on one chip: a skipped row naming both counts (it was 'failed')."""
    s = suite_lib.load("suites/gpt2.yaml")
    case = s.cases("v4-8")[0]

    class Pool:
        def missing(self, backend: str) -> None:
            return None

    state = scheduler.start_case(case, Pool(), scheduler.RunContext(run_id="r", platform="tpu", device_count=1))
    assert state.ended is not None and state.ended[0] == SKIPPED
    assert "needs 4 devices; this slice has 1" in str(state.ended[1])
    fits = scheduler.start_case(case, Pool(), scheduler.RunContext(run_id="r", platform="tpu", device_count=4))
    assert fits.ended is None


def test_the_ladders_best_point_runs_again_unrolled() -> None:
    cases = suite_lib.load("suites/gpt2.yaml").cases("", slice_fit.Slice("tpu", 1, fake_fit([])))
    jax = [c for c in cases if c.backend == "jax"]
    rows = [{"case_id": c.case_id, "status": "ok", "mfu": 0.1 * (i % 5), "median_s": 0.2} for i, c in enumerate(jax)]
    rows[2]["status"] = "failed"
    best = slice_fit.unrolled_best(cases, rows, results.case_id)
    top = max((r for r in rows if r["status"] == "ok"), key=lambda r: r["mfu"])
    was = next(c for c in jax if c.case_id == top["case_id"])
    assert best is not None and best.params == {**was.params, "scan_layers": False}
    assert best.case_id == results.case_id("train", was.backend, was.impl, best.params) != was.case_id
    assert not best.unroll_best and "again unrolled" in best.note
    assert slice_fit.unrolled_best(cases, [dict(r, status="failed") for r in rows], results.case_id) is None


@pytest.mark.parametrize("suite", ["suites/gpt2.yaml", "suites/llama.yaml"])
def test_compile_plans_a_v5e_8_on_all_its_devices_and_the_v4_8_study(suite: str) -> None:
    s = suite_lib.load(suite)
    target, prof, cases = compile_runner._checked(s, "v5e-8", 1, RunOptions())
    assert prof == "" and {c.devices for c in cases} == {8}
    assert {c.params["sharding"] for c in cases} == {"fsdp", "2d", "auto"}
    assert compile_runner.mesh_note(cases, target, 1) is None  # no "4 of the 8"
    target, prof, cases = compile_runner._checked(s, "v4-8", 1, RunOptions())
    assert prof == "v4-8" and {c.devices for c in cases} == {4}
    assert {c.params["model"] for c in cases} == {"gpt2-2b" if "gpt2" in suite else "llama2-2b"}
    assert max(c.params["global_batch"] for c in cases) in (136, 128)
    assert compile_runner.mesh_note(cases, target, 1) is None


def test_compare_refuses_to_pair_runs_of_different_slices(tmp_path) -> None:
    """The same suite on 1 device and on 8 is two studies: compare and gate say so (exit 2), naming both."""
    import pandas as pd
    from click.testing import CliRunner

    from xlabench.cli import main

    run = "docs/data/tpu-v5e/2026-12-07/attention-s4096/20261207-010832-2228"
    base, cand = tmp_path / "base.csv", tmp_path / "cand.csv"
    rows = pd.read_csv(f"{run}.csv", dtype=str, keep_default_na=False)
    rows.to_csv(base, index=False)
    rows.assign(device_count="8").to_csv(cand, index=False)
    for side in ("base", "cand"):
        (tmp_path / f"{side}.samples.csv").write_text(open(f"{run}.samples.csv").read())
    out = CliRunner().invoke(main, ["compare", str(base), str(cand)])
    assert out.exit_code == 2, out.output
    assert "ran on 1 x TPU v5 lite" in out.output and "on 8 x TPU v5 lite" in out.output
    assert "different studies" in out.output
    same = CliRunner().invoke(main, ["compare", str(base), str(base)])
    assert "different studies" not in same.output


LADDER = """name: ladder
workload: train
backends: [jax]
impls: [naive]
params:
  model: [gpt2-124m, gpt2-tiny]
  seq_len: 64
  dtype: float32
  steps_per_sample: 1
matrix:
  per_device_batch: [1, 2]
  sharding: [fsdp, 2d, auto]
measure:
  warmup: 1
  iters: 2
  timeout_s: 300
"""


@pytest.mark.slow
def test_a_run_fits_its_ladder_to_the_slice_and_unrolls_the_best_point(tmp_path) -> None:
    """The plumbing, on the CPU: the worker's op fit (no memory limit: the smallest model), the three
    modes one program on one device, the scanned ladder, then its best point unrolled as one more row."""
    from tests.conftest import run_cli

    suite = tmp_path / "ladder.yaml"
    suite.write_text(LADDER)
    out = run_cli("run", str(suite), "--out", str(tmp_path / "res"))
    assert out.returncode == 0, out.stdout + out.stderr
    assert "the ladder's best point again unrolled" in out.stdout
    rows = results.read_rows(next((tmp_path / "res" / "ladder").glob("*[0-9a-f].csv")))
    assert list(rows["status"]) == ["ok"] * 3 and set(rows["model"]) == {"gpt2-tiny"}
    assert [str(v).lower() for v in rows["scan_layers"]] == ["true", "true", "false"]
    assert list(rows["global_batch"].astype(int)) == [1, 2, int(rows["global_batch"].iloc[2])]
    assert set(rows["sharding"]) == {"fsdp"}
    assert all("fsdp, 2d, auto are one program on 1 device" in n for n in rows["notes"])
    assert "model gpt2-tiny: the smallest of gpt2-124m, gpt2-tiny" in rows["notes"].iloc[0]
    assert "again unrolled" in rows["notes"].iloc[2]


@pytest.mark.slow
def test_compile_fits_the_model_list_to_the_target_and_says_so_in_each_row(tmp_path) -> None:
    """`xlabench compile --target v5e-1` of a suite with a model list: the compiling worker's op fit compiles
    the candidates for the target's compile-only device (libtpu), the largest that fits is compiled, and
    every row's notes say so with the GiB of the fit."""
    from tests.test_compile import _compile

    suite = tmp_path / "ladder.yaml"
    suite.write_text(LADDER.replace("[gpt2-124m, gpt2-tiny]", "[gpt2-tiny, llama-tiny]").replace(
        "dtype: float32", "dtype: bfloat16").replace("seq_len: 64", "seq_len: 128"))
    res, rows = _compile(tmp_path / "out", str(suite), "--target", "v5e-1", "-k", "global_batch=1")
    assert res.returncode == 0, res.stdout + res.stderr
    assert rows is not None and list(rows["status"]) == ["compiled"]
    assert rows["model"].iloc[0] == "llama-tiny"  # the larger of the two (param count)
    assert "model llama-tiny: the largest of llama-tiny, gpt2-tiny whose step fits the ladder's smallest " \
           "per-device batch, 1 (" in rows["notes"].iloc[0]
    assert "GiB per device, naive)" in rows["notes"].iloc[0]


def test_a_cpu_run_starts_its_workers_with_the_virtual_devices_a_case_asks_for(tmp_path) -> None:
    """The CPU's first worker sees 1 device, but a worker is started with a case's virtual devices: the
    slice's device count is no limit there (an 8-device cpu profile was planned as 12 skipped rows)."""
    from xlabench.run import suite_runner

    class Worker:
        env = {"device_count": 1, "device_kind": "cpu", "framework_version": "jax"}

    class Sess:
        opts = RunOptions()
        run_id = "r"
        files = None
        done: set = set()

        def trace_root(self) -> None:
            return None

    ctx = suite_runner._context(Sess(), dict(Worker.env), "cpu", 1)
    assert ctx.device_count is None
    assert suite_runner._context(Sess(), {**Worker.env, "device_kind": "TPU v5 lite"}, "tpu", 1).device_count == 1
