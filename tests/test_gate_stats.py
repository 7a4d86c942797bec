"""The gate's statistics on synthetic samples of known distributions (fixed seeds: deterministic)."""

from __future__ import annotations

import numpy as np
import pytest

from tests._gate_data import draw
from xlabench import gate
from xlabench.stats.multiple import holm
from xlabench.stats.power import min_samples_per_side


def verdicts(shift: float, *, n: int = 20, sigma: float = 0.05, heavy: bool = False, trials: int = 50,
             seed: int = 7, cfg: gate.GateConfig = gate.GateConfig()) -> dict[str, int]:
    """Verdict counts over independent single-case comparisons: baseline vs candidate scaled by shift."""
    rng = np.random.default_rng(seed)
    out: dict[str, int] = {}
    for i in range(trials):
        pair = (draw(rng, n, 1.0, sigma, heavy), draw(rng, n, shift, sigma, heavy))
        v = gate.assess([pair], cfg, [f"case{i}"])[0].verdict
        out[v] = out.get(v, 0) + 1
    return out


def test_holm_matches_hand_computed_values():
    # sorted p * (m - rank), running max, capped at 1; returned in the input order
    got = holm([0.04, 0.01, 0.05, 0.03, 0.02])
    np.testing.assert_allclose(got, [0.09, 0.05, 0.09, 0.09, 0.08])
    np.testing.assert_allclose(holm([0.3]), [0.3])
    np.testing.assert_allclose(holm([0.5, 0.6]), [1.0, 1.0])
    assert holm([]).size == 0


def test_identical_samples_are_unchanged_with_ratio_one():
    x = draw(np.random.default_rng(0), 20)
    a = gate.assess([(x, x.copy())], gate.GateConfig())[0]
    assert a.verdict == gate.UNCHANGED
    assert a.ratio == 1.0 and a.ci_low <= 1.0 <= a.ci_high
    assert a.p_value > 0.9


def test_same_distribution_gives_no_false_alarm():
    assert verdicts(1.0, sigma=0.10) == {gate.UNCHANGED: 50}


def test_two_percent_shift_is_below_the_threshold():
    # real but smaller than the 5% threshold: never a regression, even when significant
    counts = verdicts(1.02, n=60, sigma=0.05)
    assert counts.get(gate.REGRESSION, 0) == 0
    assert counts.get(gate.UNCHANGED, 0) == 50


def test_ten_percent_shift_is_a_regression_with_enough_samples():
    counts = verdicts(1.10, n=60, sigma=0.05)
    assert counts.get(gate.REGRESSION, 0) >= 45
    assert counts.get(gate.IMPROVEMENT, 0) == 0


def test_ten_percent_shift_in_heavy_noise_is_not_overclaimed():
    # CV 20% with 10 samples: the interval is wider than the change; the gate must not call it either way
    counts = verdicts(1.10, n=10, sigma=0.20)
    assert counts.get(gate.IMPROVEMENT, 0) == 0
    assert counts.get(gate.REGRESSION, 0) < 25


def test_thirty_percent_shift_is_always_caught():
    assert verdicts(1.30, n=20, sigma=0.10) == {gate.REGRESSION: 50}


def test_thirty_percent_faster_is_an_improvement():
    assert verdicts(1 / 1.30, n=20, sigma=0.10) == {gate.IMPROVEMENT: 50}


@pytest.mark.slow  # a Monte-Carlo simulation
def test_heavy_tailed_outliers_neither_raise_false_alarms_nor_hide_a_shift():
    assert verdicts(1.0, n=30, heavy=True) == {gate.UNCHANGED: 50}
    assert verdicts(1.30, n=30, heavy=True) == {gate.REGRESSION: 50}


def test_too_few_samples_is_inconclusive():
    rng = np.random.default_rng(1)
    a = gate.assess([(draw(rng, 3), draw(rng, 3, 2.0))], gate.GateConfig())[0]
    assert a.verdict == gate.INCONCLUSIVE and "too few samples" in a.reason
    assert a.ratio is None


def test_five_samples_suffice_for_one_case_but_not_for_twelve():
    rng = np.random.default_rng(2)
    one = gate.assess([(draw(rng, 5), draw(rng, 5, 1.5))], gate.GateConfig())[0]
    assert one.verdict == gate.REGRESSION  # smallest p for 5 vs 5 is 0.0079 < 0.05
    many = gate.assess([(draw(rng, 5), draw(rng, 5, 1.5)) for _ in range(12)], gate.GateConfig())
    # 0.0079 > 0.05/12: Holm cannot reject; saying "unchanged" would be a lie, and since each interval
    # lies wholly beyond the threshold, so would "inconclusive": they look like regressions
    assert {a.verdict for a in many} == {gate.UNDERPOWERED}
    assert "cannot reach significance over 12" in many[0].reason and "need >= 6 per side" in many[0].reason
    same = gate.assess([(draw(rng, 5), draw(rng, 5)) for _ in range(12)], gate.GateConfig())
    assert {a.verdict for a in same} == {gate.INCONCLUSIVE}  # no change: could not judge, nothing beyond


def test_holm_makes_a_weak_change_insignificant_among_many_cases():
    rng = np.random.default_rng(3)
    base, cand = draw(rng, 8, sigma=0.05), draw(rng, 8, 1.12, sigma=0.05)
    alone = gate.assess([(base, cand)], gate.GateConfig())[0]
    assert alone.p_holm == pytest.approx(alone.p_value)
    crowd = gate.assess([(base, cand)] + [(draw(rng, 8), draw(rng, 8)) for _ in range(19)], gate.GateConfig())
    assert crowd[0].p_value == pytest.approx(alone.p_value)
    assert crowd[0].p_holm == pytest.approx(min(1.0, 20 * alone.p_value))


def test_higher_is_better_metric_flips_the_direction():
    rng = np.random.default_rng(4)
    base, cand = draw(rng, 20), draw(rng, 20, 1.3)  # 30% slower
    flops = 1e9
    cfg = gate.GateConfig(metric="tflops_per_s")
    m = cfg.metric_info
    b = m.per_iteration({"tflops_per_s": flops / np.median(base) / 1e12, "median_s": np.median(base)}, base)
    c = m.per_iteration({"tflops_per_s": flops / np.median(cand) / 1e12, "median_s": np.median(cand)}, cand)
    np.testing.assert_allclose(b, flops / base / 1e12)  # per-iteration TFLOP/s
    slower = gate.assess([(b, c)], cfg)[0]
    assert slower.verdict == gate.REGRESSION and slower.ratio < 0.8
    faster = gate.assess([(c, b)], cfg)[0]
    assert faster.verdict == gate.IMPROVEMENT and faster.ratio > 1.25


def test_same_data_same_verdict_and_interval():
    rng = np.random.default_rng(5)
    pair = (draw(rng, 15, sigma=0.1), draw(rng, 15, 1.08, sigma=0.1))
    a1 = gate.assess([pair], gate.GateConfig(), ["abc"])[0]
    a2 = gate.assess([pair], gate.GateConfig(), ["abc"])[0]
    assert a1 == a2


def test_mean_metric_uses_the_mean():
    rng = np.random.default_rng(6)
    base, cand = draw(rng, 20), draw(rng, 20, 1.2)
    a = gate.assess([(base, cand)], gate.GateConfig(metric="mean_s"))[0]
    assert a.baseline == pytest.approx(base.mean()) and a.candidate == pytest.approx(cand.mean())


@pytest.mark.parametrize("kw, msg", [
    ({"metric": "speed"}, "unknown metric"),
    ({"threshold": 0.0}, "threshold must be between 0 and 1"),
    ({"alpha": 1.5}, "alpha must be between 0 and 1"),
    ({"min_samples": 1}, "min_samples must be >= 2"),
])
def test_bad_config_is_refused(kw, msg):
    with pytest.raises(ValueError, match=msg):
        gate.GateConfig(**kw)


# Issue 50, item 15: a case whose whole interval lies beyond the threshold, but whose rank test is not
# significant after Holm over its 20 cases (8 samples a side: enough to reach it), was called "unchanged".
_BASE = np.array([1.00, 1.02, 0.98, 1.01, 0.99, 1.03, 1.12, 1.25])
_SLOW = np.array([1.35, 1.09, 1.30, 1.40, 1.25, 1.08, 1.33, 1.28])


def _with_19_quiet_cases(pair):
    rng = np.random.default_rng(3)
    return [(draw(rng, 8), draw(rng, 8)) for _ in range(19)] + [pair]


@pytest.mark.parametrize("pair, way", [((_BASE, _SLOW), "slower"), ((_SLOW, _BASE), "faster")])
def test_an_interval_wholly_beyond_the_threshold_without_significance_is_inconclusive_not_unchanged(pair, way):
    a = gate.assess(_with_19_quiet_cases(pair), gate.GateConfig(), [f"c{i}" for i in range(20)])[-1]
    assert a.p_holm > 0.05 and a.n_base == a.n_cand == 8 >= min_samples_per_side(0.05, 20)
    assert (a.ci_low > 1.05) if way == "slower" else (a.ci_high < 1 / 1.05), (a.ci_low, a.ci_high)
    assert a.verdict == gate.INCONCLUSIVE, (a.verdict, a.reason)
    assert "not significant" in a.reason and f"wholly beyond the 5% threshold ({way})" in a.reason, a.reason


def test_a_suite_wide_interval_wholly_beyond_the_threshold_without_significance_is_inconclusive():
    rng = np.random.default_rng(5)
    pairs = [(draw(rng, 8, 1.0, 0.02), draw(rng, 8, s, 0.02)) for s in (1.3, 1.3, 1.25, 1.35, 1.3, 0.97)]
    sh = gate.assess_suite(pairs, gate.GateConfig(), case_ids=[str(i) for i in range(6)])
    assert sh.p_value > 0.05 and sh.ci_low > 1.05, (sh.p_value, sh.ci_low)
    assert sh.verdict == gate.INCONCLUSIVE and "wholly beyond the 5% threshold (slower)" in sh.reason, sh.reason
