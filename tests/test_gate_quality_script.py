"""benchmarks/gate_quality.py's analysis: both data layouts (passes, older back to back) are judged alike."""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest

from conftest import ROOT
from xlabench import gate

spec = importlib.util.spec_from_file_location("gate_quality", ROOT / "benchmarks" / "gate_quality.py")
gq = importlib.util.module_from_spec(spec)
spec.loader.exec_module(gq)


def _runs(rng: np.random.Generator, scale: float, k: int) -> list[list[float]]:
    return [list(scale * 1e-3 * rng.lognormal(0, 0.01, 30)) for _ in range(k)]


def _data(passes: bool, rounds: int = 4) -> dict:
    rng = np.random.default_rng(1)
    out = {"iters": 30, "warmup": 1, "repeats": 2, "base_repeats": 4, "rounds": [], "loadavg": [1.0] * rounds,
           "wall_s": 1.0}
    for _ in range(rounds):
        arms = {"0": [_runs(rng, 1.0, 2), _runs(rng, 1.0, 2)], "4": [_runs(rng, 1.3, 2), _runs(rng, 1.3, 2)]}
        base = {a: _runs(rng, 1.0, 4) for a in arms} if passes else _runs(rng, 1.0, 4)
        out["rounds"].append({"A": base, "arms": arms})
    return out


def test_analysis_flags_the_slow_arm_and_not_the_same_case_in_either_layout():
    cfg = gate.GateConfig(metric="p10_s", threshold=0.03, n_resamples=200)
    for passes in (True, False):
        res = gq.analyze(_data(passes), cfg, k_base=4, k=2)
        assert res["arms"]["0"]["gate"] == 0 and res["arms"]["4"]["gate"] == 4
        assert abs(res["arms"]["4"]["measured_slowdown"] - 0.3) < 0.02
        assert res["config"]["base_repeats"] == 4 and res["config"]["repeats"] == 2


def test_settings_include_the_recipe_and_what_was_measured():
    names = list(gq.settings(8, 4))
    assert any("baseline --repeats 6, candidate --repeats 3" in n for n in names)
    assert any("baseline --repeats 8, candidate --repeats 4" in n for n in names)
    assert not any("--repeats 6" in n for n in gq.settings(4, 2))  # not measured: not judged


def test_combine_pools_rounds_and_refuses_different_layouts():
    a, b = _data(True, rounds=2), _data(True, rounds=3)
    both = gq.combine([a, b])
    assert len(both["rounds"]) == 5 and len(both["loadavg"]) == 5 and both["wall_s"] == 2.0
    b["repeats"] = 3
    with pytest.raises(ValueError, match="differ in repeats"):
        gq.combine([a, b])


def _suite_index(tmp_path, runs: int = 4) -> dict:
    from tests._gate_data import case, draw, write_run

    rng = np.random.default_rng(3)
    cases = [case("naive", seq_len=64 * (i + 1)) for i in range(8)]
    index = {"label": "synthetic", "runs": []}
    for r in range(runs):
        path = write_run(tmp_path / f"run{r}.csv", [(c, draw(rng, 10, sigma=0.02)) for c in cases], f"r{r}",
                         compile_s=0.1)
        index["runs"].append({"csv": str(path), "start": float(r), "end": r + 0.5, "load_start": 1.0, "load_end": 1.0})
    return index


def test_suite_analysis_judges_every_pair_aa_and_doctored(tmp_path):
    res = gq.analyze_suite([_suite_index(tmp_path)], gate.GateConfig(n_resamples=200))
    pool = res["pools"][0]
    assert pool["runs"] == 4 and pool["pairs"] == 6 and pool["disjoint"] == 2 and pool["cases"] == 8
    aa, slow = pool["shifts"]["1.0"], pool["shifts"]["1.3"]
    assert all(r["suite"] == gate.UNCHANGED and r["exit"] != gate.EXIT_FAIL for r in aa)
    assert all(r["suite"] == gate.REGRESSION and r["host"] == 1.0 for r in slow)
    # gate: the next run stands in for the re-run; the last run has none
    assert [r["gate_exit"] is None for r in slow] == [r["j"] == 3 for r in slow]
    assert all(r["gate_exit"] == gate.EXIT_FAIL for r in slow if r["gate_exit"] is not None)
    text = gq.suite_report(res)
    assert "| A/A | all 6 | 0/6" in text and "| x 1.3 (doctored) | all 6 | 6/6" in text


def test_scaled_multiplies_times_and_samples_not_compile_times(tmp_path):
    run = gate.load_run(_suite_index(tmp_path, runs=1)["runs"][0]["csv"])
    slow = gq.scaled(run, 1.3)
    np.testing.assert_allclose(slow.samples["seconds"], run.samples["seconds"] * 1.3)
    np.testing.assert_allclose(slow.rows["median_s"], run.rows["median_s"] * 1.3)
    np.testing.assert_allclose(slow.rows["tflops_per_s"], run.rows["tflops_per_s"] / 1.3)
    assert (slow.rows["compile_s"] == run.rows["compile_s"]).all()
