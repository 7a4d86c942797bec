"""The mean family's two-band model (stats/bands.py) on synthetic series with known truth (seeded,
deterministic): its parameters recovered; a step in runs that lie in two bands found more often than by
the plain scan; noise-only banded series at the false-alarm rate of alpha; normal noise left to the plain
scan (the band model is tried only where the runs show bands, and kept only where it explains them)."""

from __future__ import annotations

import pytest

import numpy as np

from xlabench.history import changes as cp
from xlabench.stats import bands


def _banded(rng: np.random.Generator, n: int, at: int = 0, size: float = 0.0, gap: float = 3.0,
            p: float = 1 / 3, sigma: float = 0.01) -> np.ndarray:
    """n runs in 1% noise, a share p of them gap sigma up (the upper band), and a step of size at run at."""
    y = rng.normal(0, sigma, n) + (rng.random(n) < p) * gap * sigma
    y[at:] += np.log1p(size)
    return y


def test_a_runs_upper_band_probability_is_its_posterior_under_the_two_densities():
    """EM's weights (bands._upper, the logistic form) against the posterior of the upper band computed from
    the two joint log-densities (bands._bands), at levels given per run and per row, over band parameters from
    a thin upper band to an even split and spreads 1000x apart."""
    rng = np.random.default_rng(3)
    x = rng.normal(0, 0.05, 40)
    for b in (bands.Bands(0.02, 0.0, 0.01), bands.Bands(0.3, 0.03, 0.01), bands.Bands(0.5, 0.2, 1e-4),
              bands.Bands(0.1, 0.05, 0.1)):
        for mu in (rng.normal(0, 0.05, 40), 0.01):
            lo, hi = bands._bands(x, mu, b)
            np.testing.assert_allclose(bands._upper(x, mu, b), np.exp(hi - np.logaddexp(lo, hi)), rtol=1e-9, atol=1e-12)
        mus = rng.normal(0, 0.05, 3)[:, None]  # the shape levels() passes: a row per candidate level
        lo, hi = bands._bands(x[None, :], mus, b)
        np.testing.assert_allclose(bands._upper(x[None, :], mus, b), np.exp(hi - np.logaddexp(lo, hi)),
                                   rtol=1e-9, atol=1e-12)


def test_the_bands_are_recovered():
    rng = np.random.default_rng(11)
    fits = [bands.fit(y, [30], bands.start(y)) for y in (_banded(rng, 60, 30, 0.05) for _ in range(100))]
    p, d, s = (np.median([getattr(b, f) for b in fits]) for f in ("p", "d", "s"))
    assert abs(p - 1 / 3) < 0.04 and abs(d - 0.03) < 0.003 and abs(s - 0.01) < 0.001, (p, d, s)


@pytest.mark.slow  # a Monte-Carlo simulation
def test_a_step_in_two_bands_is_found_more_often_than_by_the_plain_scan(monkeypatch):
    """A 3% step 40 runs into 60, a third of the runs 4 sigma up: the plain scan measures a level to the
    runs' whole spread (2.1 sigma), the band model to about sigma."""
    rng = np.random.default_rng(12)
    ys = [_banded(rng, 60, 40, 0.03, gap=4.0) for _ in range(200)]
    with_bands = np.mean([any(abs(s.index - 40) <= 1 for s in cp.segment(y)) for y in ys])
    monkeypatch.setattr(cp, "prefer_bands", lambda *a, **k: False)
    plain = np.mean([any(abs(s.index - 40) <= 1 for s in cp.segment(y)) for y in ys])
    assert with_bands >= 0.65 and with_bands >= plain + 0.15, (with_bands, plain)


@pytest.mark.slow  # a Monte-Carlo simulation
def test_noise_only_banded_series_stay_under_alpha():
    rng = np.random.default_rng(13)
    alarms = [bool(cp.segment(_banded(rng, 60, gap=float(rng.uniform(2, 4))))) for _ in range(1000)]
    assert np.mean(alarms) <= cp.ALPHA


@pytest.mark.slow  # a Monte-Carlo simulation (200 random series)
def test_normal_noise_is_left_to_the_plain_scan(monkeypatch):
    """Normal noise with a step: the band model is tried on a few series (bands_likely) and its changes
    replace the plain scan's on fewer still."""
    rng = np.random.default_rng(14)
    ys = [np.log1p(np.r_[np.zeros(30), np.full(30, 0.04)]) + rng.normal(0, 0.01, 60) for _ in range(200)]
    tried = np.mean([cp.bands_likely(y, [30]) for y in ys])
    got = [[s.index for s in cp.segment(y)] for y in ys]
    monkeypatch.setattr(cp, "prefer_bands", lambda *a, **k: False)
    changed = np.mean([g != [s.index for s in cp.segment(y)] for g, y in zip(got, ys)])
    assert tried < 0.3 and changed < 0.05, (tried, changed)
