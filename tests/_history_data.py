"""Synthetic series of real runs for the history tests: the shipped cpu suite's real run file
(tests/fixtures/gate_attention_cpu.csv, 48 cases x 5 samples) re-drawn per run and written by
results.RowWriter, with a slowdown factor per run."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any, Optional, Sequence

import numpy as np

from xlabench import results
from xlabench.history import series
from xlabench.stats.summary import summarize

FIXTURE = Path(__file__).parent / "fixtures" / "gate_attention_cpu.csv"
RUN_SIGMA = 0.01  # the machine's speed from run to run (a dedicated runner; a shared 2-core host is far worse)


def creeping(n: int = 30, at: int = 20, step: float = 0.03, per_commit: float = 0.01, commits: int = 5) -> list[float]:
    """Slowdown factor per run: `step` at run `at`, then `per_commit` more for `commits` runs, then flat."""
    out = []
    for i in range(n):
        extra = 0.0 if i < at else step + per_commit * min(i - at, commits)
        out.append(1.0 + extra)
    return out


@functools.lru_cache(maxsize=1)
def _fixture() -> tuple[list[dict[str, Any]], dict[str, np.ndarray]]:
    """Read once per process (the Monte-Carlo tests draw ~100 series from it); callers never mutate it."""
    rows = results.read_rows(FIXTURE).to_dict("records")
    s = results.read_samples(FIXTURE)
    samples = {c: g.sort_values("iteration")["seconds"].to_numpy(float) for c, g in s.groupby("case_id")}
    return rows, samples


def draw(factors: Sequence[float], seed: int = 0, run_sigma: float = RUN_SIGMA,
         n_cases: Optional[int] = None) -> tuple[list[dict[str, Any]], list[list[np.ndarray]]]:
    """(the fixture's ok rows, per run per case the drawn samples): each case's real samples' log spread
    around its median, redrawn (plus 1% normal jitter), times the run's machine speed and its factor."""
    rows, samples = _fixture()
    rows = [r for r in rows if r["status"] == "ok"][:n_cases]
    medians = [float(np.median(samples[r["case_id"]])) for r in rows]
    logs = [np.log(samples[r["case_id"]] / m) for r, m in zip(rows, medians)]
    rng = np.random.default_rng(seed)
    out = []
    for f in factors:
        machine = float(np.exp(rng.normal(0, run_sigma)))
        out.append([m * np.exp(rng.choice(lg, len(lg)) + rng.normal(0, 0.01, len(lg))) * machine * f
                    for m, lg in zip(medians, logs)])
    return rows, out


def group(factors: Sequence[float], seed: int = 0, run_sigma: float = RUN_SIGMA,
          n_cases: Optional[int] = None) -> series.Group:
    """The same runs as write_series, straight into a series.Group (no files: for rates over many series)."""
    return _group(factors, *draw(factors, seed, run_sigma, n_cases))


def _group(factors: Sequence[float], rows: list[dict[str, Any]], drawn: list[list[np.ndarray]]) -> series.Group:
    runs = [{"run_id": f"r{i:06d}", "git_sha": f"c{i:09d}"} for i in range(len(factors))]
    samples = {r["case_id"]: [drawn[i][j] for i in range(len(factors))] for j, r in enumerate(rows)}
    env = series.Env("attention", "cpu", "cpu", "jax")
    return series.Group(env, runs, samples, {r["case_id"]: {"impl": r["impl"]} for r in rows})


def draw_scaled(factors: Sequence[float], seed: int = 0, run_sigma: float = RUN_SIGMA, impl: str = "naive",
                shared: float = 0.0) -> tuple[list[dict[str, Any]], list[list[np.ndarray]]]:
    """Runs made from one real run (the fixture's cases of ``impl``): each run's samples are the real run's
    samples of the case, times the case's own run-to-run noise (lognormal, run_sigma), a machine speed
    shared by the cases (lognormal, ``shared``) and the run's factor. A case's series has run_sigma noise
    whatever its samples' spread (the issue's 8 % step: 24 naive cases at 1 %)."""
    rows, samples = _fixture()
    rows = [r for r in rows if r["status"] == "ok" and r["impl"] == impl]
    rng = np.random.default_rng(seed)
    out = []
    for f in factors:
        machine = float(np.exp(rng.normal(0, shared))) if shared else 1.0
        out.append([samples[r["case_id"]] * np.exp(rng.normal(0, run_sigma)) * machine * f for r in rows])
    return rows, out


def scaled(factors: Sequence[float], seed: int = 0, run_sigma: float = RUN_SIGMA, impl: str = "naive",
           shared: float = 0.0) -> series.Group:
    """draw_scaled's runs straight into a series.Group."""
    return _group(factors, *draw_scaled(factors, seed, run_sigma, impl, shared))


def write_series(out: Path, factors: Sequence[float], seed: int = 0, run_sigma: float = RUN_SIGMA,
                 suite: str = "attention", shas: Optional[Sequence[str]] = None, n_cases: Optional[int] = None,
                 note: Optional[str] = None, impl: Optional[str] = None) -> list[Path]:
    """One run file per factor (run i at commit shas[i], started i minutes after midnight), samples from draw()
    (with ``impl``: from draw_scaled(), that impl's cases at run_sigma each)."""
    rows, drawn = draw(factors, seed, run_sigma, n_cases) if impl is None else draw_scaled(factors, seed, run_sigma, impl)
    out.mkdir(parents=True, exist_ok=True)
    paths = []
    for i in range(len(factors)):
        run_id = f"2026010{1 + i // 1000}-{i:06d}-h1st"
        sha = shas[i] if shas else f"c{i:09d}"
        started = f"2026-01-01T{i // 60 % 24:02d}:{i % 60:02d}:00Z"
        path = out / f"{run_id}.csv"
        with results.RowWriter(results.RunFiles(path)) as w:
            for r, samples in zip(rows, drawn[i]):
                row = {k: (None if isinstance(v, float) and np.isnan(v) else v) for k, v in r.items()}
                row.update(summarize(list(samples)), run_id=run_id, suite=suite, git_sha=sha, timestamp=started)
                if note is not None:
                    row["notes"] = note
                w.write(row, samples)
        results.write_meta(results.RunFiles(path), {"run_id": run_id, "suite": suite, "started": started,
                                                     "git_sha": sha, "schema_version": results.SCHEMA_VERSION})
        paths.append(path)
    return paths


def truth(factors: Sequence[float], start: int, k: int, end: int) -> float:
    """The size a change at k measured on runs start..end-1 should find: geometric mean after / before."""
    f = np.log(np.asarray(factors, float))
    return float(np.exp(f[k:end].mean() - f[start:k].mean()))


def read_json(path: Path) -> Any:
    return json.loads(Path(path).read_text())
