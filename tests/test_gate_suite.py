"""The suite-wide test, "could not judge" and the samples a case needs (issue #17).

Synthetic tests use fixed seeds (deterministic). The real-run tests use tests/fixtures/gate_attention_cpu.csv
and its .samples.csv: a real `xlabench run` of suites/attention.yaml, cpu profile, JAX naive and xla_sdpa
(48 cases, 5 timed iterations each, as the profile ships), recorded on the 2-core development machine.
"""

from __future__ import annotations

import re

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy import stats

from conftest import ROOT
from tests._gate_data import case, draw, write_run
from xlabench import gate, results
from xlabench.cli import main
from xlabench.measure.sample_size import sample_shortfall
from xlabench.stats.bootstrap import geomean_interval
from xlabench.stats.power import min_samples_per_side, smallest_signed_rank_p
from xlabench.stats.rank import signed_rank_p

FIXTURE = ROOT / "tests" / "fixtures" / "gate_attention_cpu.csv"
_TIME_COLUMNS = ("median_s", "mean_s", "min_s", "p10_s", "p90_s", "stdev_s")
_RATE_COLUMNS = ("tflops_per_s", "mfu", "gbytes_per_s", "mbu", "tokens_per_s")


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def doctor(src: Path, dst: Path, factor: float, only: str | None = None) -> Path:
    """Copy a run with every time and per-iteration sample multiplied by ``factor`` (``only``: one case id),
    throughputs divided by it; compile times untouched."""
    rows = pd.read_csv(src, dtype=str, keep_default_na=False)
    sel = rows["case_id"] == only if only else pd.Series(True, index=rows.index)
    for col in _TIME_COLUMNS + _RATE_COLUMNS:
        scale = factor if col in _TIME_COLUMNS else 1 / factor
        rows.loc[sel, col] = [repr(float(v) * scale) if v else v for v in rows.loc[sel, col]]
    rows.to_csv(dst, index=False)
    samples = pd.read_csv(results.RunFiles(src).samples, dtype={"case_id": str, "run_id": str})
    ssel = samples["case_id"] == only if only else slice(None)
    samples.loc[ssel, "seconds"] = samples.loc[ssel, "seconds"] * factor
    samples.to_csv(results.RunFiles(dst).samples, index=False)
    return dst


def _pairs(rng: np.random.Generator, m: int, n: int, shift: float = 1.0, sigma: float = 0.1,
           spread: float = 0.3) -> list[tuple[np.ndarray, np.ndarray]]:
    """m cases of different sizes, n samples per side, the candidate scaled by shift."""
    out = []
    for _ in range(m):
        base_s = 1e-3 * math.exp(rng.normal(0, spread))
        out.append((draw(rng, n, 1.0, sigma, base_s=base_s), draw(rng, n, shift, sigma, base_s=base_s)))
    return out


# ---------------------------------------------------------------------------- samples a case needs


def test_min_samples_per_side_is_the_exact_mann_whitney_bound():
    for m in (1, 2, 6, 7, 23, 24, 48, 85, 86, 120):
        n = min_samples_per_side(0.05, m)
        p = lambda k: stats.mannwhitneyu(np.arange(k), np.arange(k, 2 * k), method="exact").pvalue  # noqa: E731
        assert p(n) <= 0.05 / m < p(n - 1), m
    assert [min_samples_per_side(0.05, m) for m in (1, 2, 7, 24, 48, 86, 322)] == [4, 5, 6, 7, 7, 8, 9]
    assert min_samples_per_side(0.01, 48) == 8
    assert min_samples_per_side.cache_info().hits > 0  # cached
    with pytest.raises(ValueError):
        min_samples_per_side(0.05, 0)


def test_sample_shortfall():
    assert sample_shortfall([5] * 48) == (5, 7)
    assert sample_shortfall([7] * 48) is None
    assert sample_shortfall([20, 3]) == (3, 5)
    assert sample_shortfall([]) is None


# ----------------------------------------------------------------------------- suite-wide statistics


def test_smallest_signed_rank_p_matches_scipy_exact():
    for m in range(1, 12):
        want = stats.wilcoxon(np.arange(1, m + 1), method="exact").pvalue
        assert smallest_signed_rank_p(m) == pytest.approx(want)
    assert signed_rank_p(np.zeros(10)) == 1.0
    assert signed_rank_p(np.arange(1.0, 49.0)) < 1e-10


def test_geomean_interval_covers_a_shared_shift_and_is_reproducible():
    rng = np.random.default_rng(1)
    pairs = _pairs(rng, 48, 5, 1.3)
    g, lo, hi = geomean_interval(pairs, "median", 0.95, 2000, np.random.default_rng(0))
    assert lo < 1.3 < hi and 1.2 < lo and hi < 1.4 and lo < g < hi
    assert (g, lo, hi) == geomean_interval(pairs, "median", 0.95, 2000, np.random.default_rng(0))
    # two levels: wider than resampling cases alone when the cases themselves are exact copies
    exact = [(b, b * 1.3) for b, _ in pairs]
    g2, lo2, hi2 = geomean_interval(exact, "median", 0.95, 2000, np.random.default_rng(0))
    assert g2 == pytest.approx(1.3) and lo2 < 1.3 < hi2  # each case's samples are resampled on both sides


def test_suite_shift_of_every_case_is_a_regression_though_no_case_can_be_significant():
    rng = np.random.default_rng(2)
    pairs = _pairs(rng, 48, 5, 1.3)
    cases = gate.assess(pairs, gate.GateConfig())
    assert not any(a.verdict == gate.REGRESSION for a in cases)  # 5 vs 5 over 48 cases: no case can be
    s = gate.assess_suite(pairs, gate.GateConfig(), case_ids=[str(i) for i in range(48)])
    assert s.verdict == gate.REGRESSION and s.n_worse >= 46 and s.ci_low > 1.05 and s.p_value < 1e-6
    assert s.ratio == pytest.approx(1.3, rel=0.05)


def test_suite_aa_small_shift_and_the_threshold():
    rng = np.random.default_rng(3)
    verdicts = [gate.assess_suite(_pairs(rng, 48, 5), gate.GateConfig(n_resamples=1000)).verdict
                for _ in range(20)]
    assert verdicts == [gate.UNCHANGED] * 20
    # 2% shared by every case, many samples: significant across cases, but within the 5% threshold
    s = gate.assess_suite(_pairs(rng, 48, 40, 1.02, sigma=0.02), gate.GateConfig(n_resamples=1000))
    assert s.verdict == gate.UNCHANGED and s.p_value < 0.05 and "within the 5% threshold" in s.reason


def test_suite_shift_explained_by_slower_compile_times_is_confounded():
    rng = np.random.default_rng(4)
    pairs = _pairs(rng, 48, 5, 1.3)
    comp_b = 0.1 * np.exp(rng.normal(0, 0.3, 48))
    slower_host = gate.assess_suite(pairs, gate.GateConfig(), (comp_b, comp_b * 1.5 * np.exp(rng.normal(0, .05, 48))))
    assert slower_host.verdict == gate.CONFOUNDED and "host slowed down" in slower_host.reason
    assert slower_host.machine_low > 1.05
    same_host = gate.assess_suite(pairs, gate.GateConfig(), (comp_b, comp_b * np.exp(rng.normal(0, .05, 48))))
    assert same_host.verdict == gate.REGRESSION and same_host.machine_ratio == pytest.approx(1.0, abs=0.05)


def test_suite_test_needs_cases_and_flips_for_throughputs():
    rng = np.random.default_rng(5)
    assert gate.assess_suite(_pairs(rng, 1, 10, 1.3), gate.GateConfig()) is None
    few = gate.assess_suite(_pairs(rng, 5, 10, 1.3), gate.GateConfig())
    assert few.verdict == gate.INCONCLUSIVE and "5 cases cannot reach" in few.reason  # 2/2^5 > 0.05
    assert gate.assess_suite(_pairs(rng, 6, 10, 1.3), gate.GateConfig()).verdict == gate.REGRESSION
    # throughputs: 1 / (1.3x the time) is worse
    tput = [(1 / b, 1 / c) for b, c in _pairs(rng, 48, 5, 1.3)]
    s = gate.assess_suite(tput, gate.GateConfig(metric="tflops_per_s"))
    assert s.verdict == gate.REGRESSION and s.ratio < 0.8 and s.n_worse >= 46
    faster = gate.assess_suite(_pairs(rng, 48, 5, 1 / 1.3), gate.GateConfig())
    assert faster.verdict == gate.IMPROVEMENT


# --------------------------------------------------------------------------- could not judge: exit 3


def test_one_case_slower_among_48_with_5_samples_is_underpowered_not_passed(tmp_path):
    rng = np.random.default_rng(6)
    cases = [case("naive", seq_len=64 * (i + 1)) for i in range(48)]
    base = write_run(tmp_path / "base.csv", [(c, draw(rng, 5)) for c in cases], "b")
    cand = write_run(tmp_path / "cand.csv", [(c, draw(rng, 5, 1.3 if i == 0 else 1.0)) for i, c in enumerate(cases)],
                     "c")
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    assert cmp.cases[0].verdict == gate.UNDERPOWERED and "need >= 7 per side" in cmp.cases[0].reason
    assert {c.verdict for c in cmp.cases[1:]} == {gate.INCONCLUSIVE}
    assert cmp.suite.verdict == gate.UNCHANGED
    assert cmp.exit_code == gate.EXIT_UNJUDGED and not cmp.passed and cmp.outcome == "could not judge"
    js = tmp_path / "v.json"
    r = _cli("compare", str(base), str(cand), "--json", str(js))
    assert r.exit_code == 3, r.output
    assert "COULD NOT JUDGE: 1 underpowered, 47 inconclusive" in r.output
    assert "could not judge 48 case(s): too few samples; need >= 7 per side" in r.output
    assert "1 of them underpowered" in r.output and "seq_len=64" in r.output
    data = json.loads(js.read_text())
    assert data["exit_code"] == 3 and data["could_not_judge"]["count"] == 48
    assert data["could_not_judge"]["need_per_side"] == 7
    r = _cli("compare", str(base), str(cand), "--allow-inconclusive")
    assert r.exit_code == 0 and "allowed by --allow-inconclusive" in r.output


# ------------------------------------------------------------------------------------ a real run


def test_real_run_against_itself_passes(tmp_path):
    md, js = tmp_path / "s.md", tmp_path / "v.json"
    r = _cli("compare", str(FIXTURE), str(FIXTURE), "--markdown", str(md), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "suite: 0/48 slower, 0/48 faster, geometric mean 1.00" in r.output and "unchanged" in r.output
    assert "PASSED: 48 inconclusive; suite-wide unchanged" in r.output
    data = json.loads(js.read_text())
    assert data["suite"]["verdict"] == "unchanged" and data["suite"]["n_cases"] == 48


def test_real_run_doctored_1_3x_fails_compare_with_the_suite_line(tmp_path):
    slow = doctor(FIXTURE, tmp_path / "slow.csv", 1.3)
    md, js = tmp_path / "s.md", tmp_path / "v.json"
    r = _cli("compare", str(FIXTURE), str(slow), "--allow-env-mismatch", "--markdown", str(md), "--json", str(js))
    assert r.exit_code == 1, r.output
    assert "suite: 48/48 slower, 0/48 faster, geometric mean 1.30 [" in r.output
    assert ": regression (significant, interval beyond the 5% threshold)" in r.output
    assert "FAILED:" in r.output and "suite-wide regression" in r.output
    assert "could not judge 48 case(s): too few samples; need >= 7 per side" in r.output
    data = json.loads(js.read_text())
    s = data["suite"]
    assert s["verdict"] == "regression" and s["ci_low"] > 1.05 and s["ratio"] == pytest.approx(1.3)
    assert s["machine_ratio"] == pytest.approx(1.0)
    assert data["exit_code"] == 1 and data["could_not_judge"]["count"] == 48
    text = md.read_text()
    assert text.startswith("## ❌ xlabench compare: FAILED") and "**suite: 48/48 slower" in text
    assert "**could not judge 48 case(s)" in text
    # the copy made faster instead: an improvement, not a failure
    fast = doctor(FIXTURE, tmp_path / "fast.csv", 1 / 1.3)
    r = _cli("compare", str(FIXTURE), str(fast))
    assert r.exit_code == 0 and "suite-wide improvement" in r.output, r.output


def test_real_run_doctored_with_slower_compile_times_is_confounded(tmp_path):
    slow = doctor(FIXTURE, tmp_path / "slow.csv", 1.3)
    rows = pd.read_csv(slow, dtype=str, keep_default_na=False)
    rows["compile_s"] = [repr(float(v) * 1.6) for v in rows["compile_s"]]  # the host slowed down as well
    rows.to_csv(slow, index=False)
    r = _cli("compare", str(FIXTURE), str(slow))
    assert r.exit_code == 3, r.output
    assert "confounded" in r.output and "compile times 1.60" in r.output
    assert "warning: the host compiled 1.60x as long as for the baseline" in r.output


def test_cached_compiles_are_no_probe_of_the_host_speed(tmp_path):
    slow = doctor(FIXTURE, tmp_path / "slow.csv", 1.3)
    rows = pd.read_csv(slow, dtype=str, keep_default_na=False)
    rows["compile_s"] = [repr(float(v) * 0.02) for v in rows["compile_s"]]  # loaded from the cache, not compiled
    rows["compile_cached"] = "true"
    rows.to_csv(slow, index=False)
    js = tmp_path / "v.json"
    r = _cli("compare", str(FIXTURE), str(slow), "--json", str(js))
    assert r.exit_code == 1 and "suite-wide regression" in r.output, r.output
    assert json.loads(js.read_text())["suite"]["machine_ratio"] is None
    assert "compiled 0.02x" not in r.output


def test_real_run_one_case_doctored_1_3x_is_underpowered(tmp_path):
    rows = pd.read_csv(FIXTURE, dtype={"case_id": str})
    cid = str(rows.sort_values("cv")["case_id"].iloc[0])  # the steadiest case: 5 samples give a tight interval
    one = doctor(FIXTURE, tmp_path / "one.csv", 1.3, only=cid)
    js = tmp_path / "v.json"
    r = _cli("compare", str(FIXTURE), str(one), "--json", str(js))
    assert r.exit_code == 3, r.output
    data = json.loads(js.read_text())
    verdicts = {c["case_id"]: c["verdict"] for c in data["cases"]}
    assert verdicts[cid] == "underpowered" and data["suite"]["verdict"] == "unchanged"


# 4 shapes x 2 impls: 8 cases, 3 samples each (Holm over 8 needs 6 per side)
FOUR_SHAPES = """
        name: f
        workload: attention
        impls: [naive, xla_sdpa]
        params: {num_heads: 2, head_dim: 32, batch: 1}
        matrix: {seq_len: [64, 128, 192, 256]}
        measure: {iters: 3}
"""


def test_every_profile_too_short_to_compare_is_said_by_validate_and_run(write_suite):
    """The README says `validate` and `run` warn when a measure gives too few samples; they said nothing of
    the shipped cpu profiles (quick runs, 3-5 samples per case), and `compare` of two of their runs then
    said "could not judge 96 case(s)" and exit 3 (issue 61 item 3). A quick profile is told too, and told
    that two runs of it cannot be compared; a measure with enough samples is told nothing."""
    from xlabench import suite
    from xlabench.run.suite_runner import samples_note

    r = _cli("validate", *(str(p) for p in sorted((ROOT / "suites").glob("*.yaml"))))
    assert r.exit_code == 0, r.output
    out = " ".join(r.output.split())
    for name in ("attention", "gpt2", "llama", "paged_attention"):
        s = suite.load(ROOT / "suites" / f"{name}.yaml")
        note = samples_note(s.cases("cpu"), s.spec.measure)  # what `run --profile cpu` says up front
        assert note and "a quick profile" in note and "cannot judge two runs of it" in note, (name, note)
        assert f"cpu: {len(s.cases('cpu'))} ({note})" in out, (name, out)
        assert samples_note(s.cases(""), s.spec.measure) is None, name  # the suite's own measure is enough
    s = suite.load(write_suite(FOUR_SHAPES + """        profiles:
          quick: {measure: {iters: 2}}
          same: {description: keeps the suite's measure}
          more: {measure: {iters: 4}}
        """))
    for prof in ("", "same", "more"):  # 8 cases need 6 per side: the suite's own measure is short, and said so
        said = samples_note(s.cases(prof), s.spec.measure)
        assert said.startswith(f"{3 if prof != 'more' else 4} sample(s)") and "quick" not in said
    assert samples_note(s.cases("quick"), s.spec.measure).startswith("2 sample(s) per case (a quick profile")
    r = _cli("validate", str(s.path))
    assert "base: 8 (3 sample(s) per case; `compare`/`gate` need >= 6 per side" in r.output, r.output
    assert re.search(r"quick: 8 \(2 sample\(s\) per case \(a quick profile.*`--repeats 3` times 6", r.output), r.output


def test_the_dry_run_and_the_run_say_up_front_that_a_quick_profile_cannot_be_compared(tmp_path):
    from types import SimpleNamespace

    from xlabench import suite
    from xlabench.run import suite_runner

    r = _cli("run", str(ROOT / "suites" / "attention.yaml"), "--profile", "cpu", "--dry-run")
    assert r.exit_code == 0, r.output
    s = suite.load(ROOT / "suites" / "attention.yaml")
    note = suite_runner.samples_note(s.cases("cpu"), s.spec.measure)
    head = " ".join(r.output.split("\nrun ")[0].split())  # before the first case
    assert f"plan: {note}" in head, r.output
    sess = SimpleNamespace(done=set(), suite=s)
    env = {"device_kind": "cpu", "framework_version": "jax 0"}
    lines = suite_runner._start_lines(sess, "cpu", "cpu", env, 216, 1, note=note)
    assert lines[-1] == f"note: {note}"
    assert not any("sample(s)" in ln for ln in suite_runner._start_lines(sess, "", "cpu", env, 144, 1))


def test_the_gate_raises_iters_for_the_cases_its_filters_select(write_suite):
    """Holm runs over the cases the gate compares: -k / --backend / --impl shrink that family, so fewer
    samples per case are needed (8 cases need 6 per side at alpha 0.05, 2 cases need 5)."""
    from xlabench import suite
    from xlabench.gate import gate_steps as gate_session
    from xlabench.run.run_options import RunOptions

    s = suite.load(write_suite(FOUR_SHAPES))
    _, said = gate_session.raise_iters(s, "base", RunOptions(), None, 0.05)
    assert "from 3 to 6" in said[0] and "8 compared case(s)" in said[0]
    _, said = gate_session.raise_iters(s, "base", RunOptions(where=(("seq_len", "64"),)), None, 0.05)
    assert "from 3 to 5" in said[0] and "2 compared case(s)" in said[0]
    _, said = gate_session.raise_iters(s, "base", RunOptions(backends=("jax",), only_impls=("naive",),
                                                             where=(("seq_len", "64"),)), None, 0.05)
    assert "from 3 to 4" in said[0] and "1 compared case(s)" in said[0]


def test_the_baseline_shortfall_counts_the_cases_the_gate_compares(tmp_path):
    """Issue 61 item 12: with -k selecting 8 of the baseline's 24 cases, gate warned "24 cases need >= 7"
    and then judged with Holm over 8 (which needs 6): the warning counts the cases the gate compares."""
    from xlabench.gate import gate_steps

    cases = [case(i, s, causal=c) for i in ("naive", "xla_sdpa") for s in (64, 128, 192, 256, 320, 384)
             for c in (True, False)]
    rng = np.random.default_rng(0)
    base = gate.load_run(write_run(tmp_path / "b.csv", [(c, draw(rng, 5)) for c in cases]))
    every = gate_steps.baseline_shortfall(base, 0.05)
    assert f"its 24 ok case(s) need >= {min_samples_per_side(0.05, 24)} per side" in every, every
    some = {results.case_id(c["workload"], c["backend"], c["impl"], c["params"]) for c in cases[:8]}
    eight = gate_steps.baseline_shortfall(base, 0.05, some)
    assert f"the 8 case(s) the gate compares need >= {min_samples_per_side(0.05, 8)} per side" in eight, eight
    assert "24" not in eight.split("per case;")[1]
