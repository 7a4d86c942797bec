"""Issue 60: a run's time shown before it is spent, from recorded runs (run/estimate.py: a pure function of
planned and recorded cases; run/recorded.py reads run files; run/budget.py plans; the CLI prints)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from xlabench.run import estimate as est
from xlabench.run.estimate import PlannedCase, RecordedCase, RecordedRun

SLICE = "TPU v5 lite x1"


def rec(cid: str, impl: str, seconds: float, tune_s: float = 0.0, tuned: str = est.NONE, **params) -> RecordedCase:
    return RecordedCase(cid, "paged_attention", "jax", impl, params, seconds, tune_s, tuned)


def plan(cid: str, impl: str, tune=None, runs: bool = True, **params) -> PlannedCase:
    return PlannedCase(cid, "paged_attention", "jax", impl, params, runs, tune)


RUN = RecordedRun("20261207-213224-cf74", "paged_attention", SLICE, "2026-12-07", (
    rec("a", "naive", 3.0, batch=1, context_lens=1024),
    rec("b", "paged", 9.0, 7.0, est.SEARCH, batch=1, context_lens=1024),
    rec("c", "paged", 4.0, 1.0, est.TABLE, batch=16, context_lens=4096),
    rec("d", "paged", 12.0, 9.0, est.SEARCH, batch=64, context_lens=16384),
))
OLDER = RecordedRun("20261206-000000-aaaa", "attention", SLICE, "2026-12-06", (
    rec("a", "naive", 100.0, batch=1, context_lens=1024),  # the same case, older: the newer record wins
    RecordedCase("x", "attention", "jax", "flash", {"batch": 1}, 50.0),
))


def test_a_recorded_case_takes_its_recorded_seconds_and_a_skipped_one_none():
    e = est.estimate([plan("a", "naive"), plan("z", "naive", runs=False)], [RUN, OLDER])
    assert e.seconds == 3.0 and (e.same, e.skipped) == (1, 1) and e.slice == SLICE
    assert e.text("paged_attention") == (
        "estimate: about 0.1 min on TPU v5 lite x1, from 2026-12-07's run of this suite (1 case(s) recorded)")


def test_a_case_not_recorded_takes_the_nearest_of_its_impl_by_the_parameters_log_distance():
    assert est.distance({"batch": 16, "context_lens": "4096"}, {"batch": 8, "context_lens": 4096}) == 1.0
    assert est.distance({"scan_layers": False}, {"scan_layers": "false"}) == 0.0  # a CSV's cell, a case's bool
    e = est.estimate([plan("n", "paged", batch=32, context_lens=8192)], [RUN])
    assert e.seconds == 4.0 and e.near == 1  # batch 16 x 4096 is nearer than 64 x 16384 (log2: 2 against 3)


def test_the_table_swaps_a_recorded_search_for_the_recorded_check_and_back():
    """A case the shipped table now holds is not searched: its record's search time becomes the recorded
    median table check of its impl (and a case that will search gets the median search)."""
    medians_table, medians_search = 1.0, (7.0 + 9.0) / 2
    e = est.estimate([plan("b", "paged", tune=est.TABLE)], [RUN])
    assert e.seconds == pytest.approx(9.0 - 7.0 + medians_table)
    e = est.estimate([plan("c", "paged", tune=est.SEARCH)], [RUN])
    assert e.seconds == pytest.approx(4.0 - 1.0 + medians_search)
    assert est.estimate([plan("b", "paged", tune=None)], [RUN]).seconds == 9.0  # as recorded


def test_a_workload_never_recorded_on_the_slice_takes_its_workloads_median_and_no_record_no_estimate():
    e = est.estimate([PlannedCase("q", "attention", "torch_tpu", "flash", {}, True)], [RUN, OLDER])
    assert e.seconds == 50.0 and e.guessed == 1  # the only attention case recorded (OLDER's flash)
    assert "from 2026-12-06's run of this suite (1 as their workload's median)" in e.text("attention")
    e = est.estimate([plan("a", "naive"), PlannedCase("q", "attention", "torch_tpu", "flash", {}, True)], [RUN, OLDER])
    assert "from 2026-12-06 and 2026-12-07's runs of this and other suites" in e.text("attention")
    assert est.estimate([plan("a", "naive")], []) is None


def test_over_the_limit_the_advice_names_the_choices_under_it_else_the_slowest_impl():
    long = est.Estimate(900.0, SLICE, (RUN,), by_group={("p", "jax", "naive"): 100.0, ("p", "jax", "paged"): 800.0})
    alts = {"--profile tpu": est.Estimate(300.0, SLICE, (RUN,)), "--impl naive": est.Estimate(100.0, SLICE, (RUN,)),
            "--profile tpu_full": est.Estimate(2000.0, SLICE, (RUN,)), "--impl x": None}
    assert est.advice(long, alts) == "over 10 min: --profile tpu takes about 5.0 min; --impl naive takes about 1.7 min"
    assert est.advice(long, {}) == ("over 10 min: no profile of the suite comes under it; jax/paged takes about "
                                    "13 min of it (-k or --impl leaves it out)")
    assert est.advice(est.Estimate(599.0, SLICE, (RUN,)), alts) is None


def _write_run(folder: Path, run_id: str, started: str, rows: list[dict], kind: str = "TPU v5 lite") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    env = {"platform": "tpu", "device_kind": kind, "device_count": 1}
    (folder / f"{run_id}.meta.json").write_text(json.dumps({"run_id": run_id, "suite": "s", "started": started,
                                                            "env": env}))
    cols = ["case_id", "workload", "backend", "impl", "status", "timestamp", "tune_s", "tuned", "batch"]
    text = ",".join(cols) + "\n" + "".join(",".join(str(r.get(c, "")) for c in cols) + "\n" for r in rows)
    (folder / f"{run_id}.csv").write_text(text)


def test_recorded_cases_take_the_time_since_the_row_before_from_the_metas_start(tmp_path):
    from xlabench.run.recorded import recorded_runs

    rows = [dict(case_id="a", workload="paged_attention", backend="jax", impl="paged", status="ok", batch=1,
                 timestamp="2026-12-07T10:00:30+00:00", tune_s=7.5, tuned="search"),
            dict(case_id="b", workload="paged_attention", backend="jax", impl="naive", status="skipped", batch=4,
                 timestamp="2026-12-07T10:00:45+00:00")]
    _write_run(tmp_path / "x", "20261207-100000-aaaa", "2026-12-07T10:00:00Z", rows)
    (tmp_path / "y").mkdir()
    (tmp_path / "y" / "broken.meta.json").write_text("{")  # passed over
    (run,) = recorded_runs("s", "tpu", root=tmp_path)
    assert run.slice == SLICE and run.day == "2026-12-07"
    assert [(c.case_id, c.seconds, c.tune_s, c.tuned) for c in run.cases] == [("a", 30.0, 7.5, "search"),
                                                                             ("b", 15.0, 0.0, "none")]
    assert run.cases[0].params == {"batch": "1"}
    assert recorded_runs("s", "gpu", root=tmp_path) == []


def test_a_torch_tpu_run_of_the_same_chip_is_a_record_of_its_slice(tmp_path):
    """TorchTPU names the v5e 'TPU v5e', JAX 'TPU v5 lite': the torch_tpu train rows measured on the chip were
    no record of a run whose first worker (JAX) names the slice 'TPU v5 lite x1'."""
    from xlabench.run.recorded import recorded_runs

    row = dict(case_id="t", workload="train", backend="torch_tpu", impl="splash", status="ok", batch=8,
               timestamp="2026-12-08T03:02:30+00:00", tune_s=37.0, tuned="search")
    _write_run(tmp_path / "t", "20261208-030030-71d7", "2026-12-08T03:00:00Z", [row], kind="TPU v5e")
    _write_run(tmp_path / "j", "20261207-100000-aaaa", "2026-12-07T10:00:00Z",
               [dict(row, case_id="j", backend="jax", timestamp="2026-12-07T10:01:00+00:00")])
    runs = recorded_runs("s", "tpu", SLICE, root=tmp_path)
    assert [r.run_id for r in runs] == ["20261208-030030-71d7", "20261207-100000-aaaa"]
    assert [r.run_id for r in recorded_runs("s", "tpu", "TPU v5e x1", root=tmp_path)] == [r.run_id for r in runs]
    assert recorded_runs("s", "tpu", "TPU v6 lite x1", root=tmp_path) == []


ROOT = Path(__file__).resolve().parent.parent


def test_a_profile_is_for_the_platform_that_picks_it_or_that_its_name_starts_with():
    from xlabench import suite as suite_lib
    from xlabench.run.budget import profile_platform

    s = suite_lib.load(ROOT / "suites" / "paged_attention.yaml")
    assert [profile_platform(s, p, "cpu") for p in ("tpu", "tpu_full", "tpu_megacore", "gpu", "cpu")] == \
        ["tpu", "tpu", "tpu", "gpu", "cpu"]
    g = suite_lib.load(ROOT / "suites" / "gpt2.yaml")
    assert profile_platform(g, "", "cpu") == "tpu"  # base (""): the profile a TPU picks


def test_a_dry_runs_model_fit_is_the_recorded_runs():
    from xlabench.run.budget import recorded_fit

    run = RecordedRun("r", "gpt2", SLICE, "2026-12-07", (
        RecordedCase("a", "train", "jax", "naive", {"model": "gpt2-355m"}, 1.0),))
    fit = recorded_fit([run], "gpt2")
    probes = fit([{"model": "gpt2-2b"}, {"model": "gpt2-355m"}, {"model": "gpt2-124m"}], ["naive", "flash"])
    assert [(p.model, p.impl, p.fits) for p in probes] == [("gpt2-2b", "naive", False), ("gpt2-2b", "flash", False),
                                                          ("gpt2-355m", "naive", True), ("gpt2-355m", "flash", True)]
    assert recorded_fit([run], "llama") is None


def test_the_table_decides_which_planned_cases_search():
    from xlabench import suite as suite_lib
    from xlabench.run.budget import planned

    s = suite_lib.load(ROOT / "suites" / "attention.yaml")
    cases = [c for c in s.cases("tpu") if c.backend == "jax"]
    got = {(p.impl, p.tune) for p in planned(cases, "tpu", "TPU v5 lite")}
    assert ("naive", None) in got and ("flash", est.TABLE) in got and ("flash", est.SEARCH) not in got
    assert {p.tune for p in planned(cases, "tpu", "TPU v6e")} <= {None, est.SEARCH}  # no table shipped for it


def test_dry_run_prints_the_estimate_from_the_committed_runs_and_a_platform_without_any_says_so(monkeypatch):
    from click.testing import CliRunner

    from xlabench.cli import main

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    res = CliRunner().invoke(main, ["run", str(ROOT / "suites" / "gpt2.yaml"), "--profile", "base", "--dry-run"])
    assert res.exit_code == 0, res.output
    (line,) = [ln for ln in res.output.splitlines() if ln.startswith("estimate:")]
    assert " min on TPU v5 lite x1, from " in line and "run of this suite" in line
    res = CliRunner().invoke(main, ["run", str(ROOT / "suites" / "gpt2.yaml"), "--profile", "gpu", "--dry-run"])
    assert "estimate: none (no run recorded on gpu under docs/data/)" in res.output


class _OnlyJax:
    def missing(self, backend: str):
        return None if backend == "jax" else f"{backend} environment missing"


def test_a_run_over_ten_minutes_is_told_the_profile_that_fits_and_a_run_without_records_says_nothing():
    from xlabench import suite as suite_lib
    from xlabench.run.budget import lines

    s = suite_lib.load(ROOT / "suites" / "paged_attention.yaml")
    run = RecordedRun("r", "paged_attention", SLICE, "2026-12-07", tuple(
        RecordedCase(i, "paged_attention", "jax", i, {"batch": "16"}, 15.0) for i in ("naive", "paged", "ragged_paged")))
    said = lines(s, "tpu_full", s.cases("tpu_full"), "tpu", s.cases, _OnlyJax(), runs=[run])
    assert said[0].startswith("estimate: about 51 min on TPU v5 lite x1, from 2026-12-07's run of this suite")
    assert said[1].startswith("over 10 min: --profile tpu takes about 7.5 min")  # 30 JAX cases x 15 s
    assert lines(s, "tpu", s.cases("tpu"), "tpu", s.cases, _OnlyJax(), runs=[run]) == [
        "estimate: about 7.5 min on TPU v5 lite x1, from 2026-12-07's run of this suite (30 timed as the nearest "
        "recorded case)"]
    assert lines(s, "tpu", s.cases("tpu"), "tpu", s.cases, runs=[], quiet=True) == []  # a CPU run: nothing said
