"""The store's runs as series: per suite and environment (profile, device kind and framework version apart),
in commit order, one value per run for each case and for the suite's geometric mean; and the changes found
in them (xlabench.history.changes on each series, Holm over the cases of a suite and environment), and the
events: many cases changed at one commit."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from typing import Any, Optional

import numpy as np

from xlabench.history import changes as cp
from xlabench.history.gitlog import GitLog, bare_sha
from xlabench.history.store import Store
from xlabench.results.display import varying
from xlabench.stats.multiple import holm
from xlabench.stats.robust import log_median_var, mad
from xlabench.stats.summary import median, nanmedian

GEOMEAN = "geomean"  # the case_id of a suite's geometric-mean series


@dataclass(frozen=True)
class Env:
    suite: str
    profile: str
    device_kind: str
    framework_version: str

    def label(self) -> str:
        return f"{self.suite} ({self.profile or 'base'}; {self.device_kind}; {self.framework_version})"


@dataclass
class Group:
    """One suite in one environment: its runs in commit order and each case's samples per run."""

    env: Env
    runs: list[dict[str, Any]]                      # store.runs() dicts, in commit order
    samples: dict[str, list[Optional[np.ndarray]]]  # case_id -> per run: raw samples (None: no ok row)
    cases: dict[str, dict[str, Any]] = field(default_factory=dict)  # case_id -> workload, impl, params
    ordered_by: str = "started"                     # "git" (topological) or "started"

    _logs: dict[str, np.ndarray] = field(default_factory=dict, repr=False)
    _varying: Optional[list[str]] = field(default=None, repr=False)

    def log_medians(self, case_id: str) -> np.ndarray:
        """Per run the log of the case's median (nan: no ok row), computed once."""
        if case_id not in self._logs:
            self._logs[case_id] = np.log([median(s) if s is not None else np.nan for s in self.samples[case_id]])
        return self._logs[case_id]

    def refs(self, case_ids: list[str]) -> np.ndarray:
        """Each case's reference level: the median over runs of its log median (the geometric mean's unit)."""
        return np.array([nanmedian(self.log_medians(c)) for c in case_ids])

    def case_series(self, case_id: str) -> tuple[np.ndarray, np.ndarray]:
        """(run indices where the case has an ok row, their log medians)."""
        y = self.log_medians(case_id)
        idx = np.flatnonzero(~np.isnan(y))
        return idx, y[idx]

    def weights(self, case_ids: list[str]) -> np.ndarray:
        """Each case's weight in the suite's geometric mean: 1 / its run-to-run variance, taken robustly from
        the differences of consecutive runs (a step moves one difference, not the spread). Cases of a CPU
        suite differ 20-fold in noise; weighted, the geometric mean's noise falls about 3-fold."""
        out = []
        for c in case_ids:
            _, y = self.case_series(c)
            d = np.diff(y)
            sd = mad(d) / np.sqrt(2) if len(d) >= 2 else 0.0
            out.append(1.0 / max(sd, 1e-3) ** 2)
        return np.array(out)

    def geomean_series(self) -> tuple[np.ndarray, np.ndarray]:
        """(run indices with any ok case, the weighted mean of their cases' log medians relative to each
        case's level: the log of the suite's geometric mean)."""
        ids = sorted(self.samples)
        refs, w = self.refs(ids), self.weights(ids)
        total, weight = np.zeros(len(self.runs)), np.zeros(len(self.runs))
        for c, ref, wc in zip(ids, refs, w):
            y = self.log_medians(c)
            have = ~np.isnan(y)
            total[have] += wc * (y[have] - ref)
            weight[have] += wc
        idx = np.flatnonzero(weight > 0)
        return idx, total[idx] / weight[idx]

    def geomean_within(self, idx: np.ndarray) -> np.ndarray:
        """Per run of idx the variance of the geometric-mean series' value from the runs' own samples
        (each case's within-run variance of its log median, weighted as in geomean_series)."""
        ids = sorted(self.samples)
        w = self.weights(ids)
        num, den = np.zeros(len(idx)), np.zeros(len(idx))
        for c, wc in zip(ids, w):
            v = np.array([log_median_var(self.samples[c][j]) for j in idx])
            have = np.isfinite(v)
            num[have] += wc ** 2 * v[have]
            den[have] += wc
        return np.where(den > 0, num / np.where(den > 0, den, 1) ** 2, np.nan)

    def label(self, case_id: str) -> str:
        """A case for people: backend/impl and the parameters that differ between the group's cases."""
        if GEOMEAN == case_id:
            return "suite geometric mean"
        if self._varying is None:
            self._varying = varying([c.get("params", {}) for c in self.cases.values()])
        return case_label(self.cases.get(case_id, {}), self._varying)

    def new_commit(self, idx: np.ndarray) -> np.ndarray:
        """For the runs idx, True where a run's commit differs from the previous one's (splits go there)."""
        shas = [bare_sha(self.runs[i]["git_sha"]) for i in idx]
        return np.array([i == 0 or not shas[i] or shas[i] != shas[i - 1] for i in range(len(shas))])


def groups(store: Store, suite: Optional[str] = None, git: Optional[GitLog] = None) -> list[Group]:
    """Every suite-and-environment of the store with its runs in commit order: git's topological order
    where the checkout knows every run's commit, else start time."""
    git = git or GitLog()
    by_env: dict[Env, list[dict[str, Any]]] = {}
    for r in store.runs(suite):
        env = Env(r["suite"], r["profile"] or "", r["device_kind"] or "", r["framework_version"] or "")
        by_env.setdefault(env, []).append(r)
    case_info = store.cases()
    out = []
    for env in sorted(by_env, key=lambda e: (e.suite, e.profile, e.device_kind, e.framework_version)):
        runs = by_env[env]
        commits = [git.get(r["git_sha"] or "") for r in runs]
        if all(commits):
            order = sorted(range(len(runs)), key=lambda i: (commits[i].position, runs[i]["started"] or "", runs[i]["run_id"]))
            how = "git"
        else:
            order = sorted(range(len(runs)), key=lambda i: (runs[i]["started"] or "", runs[i]["run_id"]))
            how = "started"
        runs = [runs[i] for i in order]
        where = {r["run_id"]: i for i, r in enumerate(runs)}
        samples: dict[str, list[Optional[np.ndarray]]] = {}
        logs: dict[str, np.ndarray] = {}
        for run_id, case_id, status, median_s, raw in store.results(list(where)):
            if status != "ok" or median_s is None or not median_s > 0:
                continue
            s = np.asarray(json.loads(raw), dtype=float)
            if not len(s):
                s = np.array([median_s])
            samples.setdefault(case_id, [None] * len(runs))[where[run_id]] = s
            logs.setdefault(case_id, np.full(len(runs), np.nan))[where[run_id]] = np.log(median_s)
        # the row's median_s is its samples' median (one place: the run file), not recomputed per run
        out.append(Group(env, runs, samples, {c: case_info.get(c, {}) for c in samples}, how, _logs=logs))
    return out


@dataclass
class Change:
    """One change point: where (the last good and first bad run and commit), how big, how sure."""

    suite: str
    profile: str
    device_kind: str
    framework_version: str
    case_id: str            # GEOMEAN for the suite-wide series
    case: str               # impl and parameters, for people
    last_good: str          # git_sha of the last run before the change
    first_bad: str          # git_sha of the first run after it
    last_good_run: str
    first_bad_run: str
    position: int           # index of the first bad run in the suite's runs
    ratio: float            # geometric mean after / before (a time: > 1 slower)
    low: float
    high: float
    p: float                # the scan's p, corrected over the splits and windows of the series
    p_holm: float           # Holm over the suite's cases (the geomean series: its own p)
    runs_before: int
    runs_after: int

    def as_json(self) -> dict[str, Any]:
        return asdict(self)


def case_label(info: dict[str, Any], keys: Optional[list[str]] = None) -> str:
    """impl and the parameters (``keys``: those that tell the suite's cases apart), short."""
    params = info.get("params", {})
    bits = [f"{k}={params[k]}" for k in (keys if keys is not None else list(params)) if k in params]
    return " ".join([f"{info.get('backend', '?')}/{info.get('impl', '?')}"] + bits)


def detect(group: Group, alpha: float = cp.ALPHA, family: str = "auto") -> list[Change]:
    """The changes of a group's cases (Holm over every change of its cases) and of its geometric mean.

    Two stages, as the gate's: a change is significant (its p after Holm <= alpha) and its size's
    interval excludes 1 (the runs either side say it moved)."""
    found: list[tuple[str, np.ndarray, cp.Split]] = []
    for case_id in sorted(group.samples):
        idx, y = group.case_series(case_id)
        for s in cp.segment(y, alpha, group.new_commit(idx), family=family):
            found.append((case_id, idx, s))
    # Holm over every case tested: a case without a change counts as a p of 1 (its series was searched too)
    silent = len(group.samples) - len({c for c, _, _ in found})
    adjusted = holm([s.p for _, _, s in found] + [1.0] * silent)[:len(found)] if found else np.zeros(0)
    out: list[Change] = []
    kept: dict[str, list[int]] = {}
    for (case_id, idx, s), p_adj in zip(found, adjusted):
        if p_adj <= alpha:
            kept.setdefault(case_id, []).append(s.index)
    lookup = {(c, s.index): (s, p_adj, idx) for (c, idx, s), p_adj in zip(found, adjusted)}
    for case_id, bounds in kept.items():
        for i, k in enumerate(bounds):
            s, p_adj, idx = lookup[(case_id, k)]
            y = group.log_medians(case_id)[idx]
            within = np.array([log_median_var(group.samples[case_id][j]) for j in idx])
            out.append(_change(group, case_id, idx, y, within, bounds, i, s.p, float(p_adj)))
    idx, y = group.geomean_series()
    splits = cp.segment(y, alpha, group.new_commit(idx), family=family)
    within = group.geomean_within(idx) if splits else None
    bounds = [s.index for s in splits]
    for i, s in enumerate(splits):
        out.append(_change(group, GEOMEAN, idx, y, within, bounds, i, s.p, s.p))
    out = [c for c in out if c.low > 1 or c.high < 1]
    return sorted(out, key=lambda c: (c.case_id != GEOMEAN, c.position, c.case_id))


def _change(group: Group, case_id: str, idx: np.ndarray, y: np.ndarray, within: Optional[np.ndarray],
            bounds: list[int], i: int, p: float, p_adj: float) -> Change:
    start, k, end = cp.window_of(bounds, i, len(idx), cp.WINDOW)
    size = cp.size(y, start, k, end, within)
    good, bad = group.runs[idx[k - 1]], group.runs[idx[k]]
    label = group.label(case_id)
    e = group.env
    return Change(e.suite, e.profile, e.device_kind, e.framework_version, case_id, label,
                  good["git_sha"] or "", bad["git_sha"] or "", good["run_id"], bad["run_id"], int(idx[k]),
                  size.ratio, size.low, size.high, p, p_adj, k - start, end - k)


MIN_EVENT_CASES = 3  # cases that move at one commit (+-1 run) to make one event of them


@dataclass
class Event:
    """Many cases that changed at one commit: one line for one cause, the cases beneath."""

    suite: str
    profile: str
    device_kind: str
    framework_version: str
    last_good: str
    first_bad: str
    position: int             # index of the first bad run in the suite's runs
    cases: int                # cases that changed there
    of: int                   # cases in the suite's series
    slower: int               # of them, slower (ratio > 1)
    ratio: float              # the median of the cases' ratios
    low: float                # the smallest of the cases' ratios
    high: float               # the largest
    case_ids: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list, repr=False, compare=False)  # the cases' changes

    def as_json(self) -> dict[str, Any]:
        return {k: v for k, v in asdict(self).items() if k != "changes"}

    def line(self) -> str:
        return (f"{self.cases} of {self.of} cases changed at commit {self.first_bad or '?'} (last good "
                f"{self.last_good or '?'}): median {(self.ratio - 1) * 100:+.1f}%, cases "
                f"{(self.low - 1) * 100:+.1f}% to {(self.high - 1) * 100:+.1f}% ({self.slower} slower, {self.cases - self.slower} faster)")


def events(group: Group, changes: list[Change], min_cases: int = MIN_EVENT_CASES) -> list[Event]:
    """The group's cases' changes gathered by commit: the commit where the most cases changed, with the
    changes of other cases within one run of it, is an event when at least min_cases cases are in it; then
    the next commit, among the changes left. Events in run order."""
    left = [c for c in changes if c.case_id != GEOMEAN]
    out: list[Event] = []
    while left:
        counts: dict[int, int] = {}
        for c in left:
            counts[c.position] = counts.get(c.position, 0) + 1
        at = min(counts, key=lambda p: (-counts[p], p))
        near = sorted((c for c in left if abs(c.position - at) <= 1), key=lambda c: (c.position != at, c.case_id))
        members: dict[str, Change] = {}
        for c in near:
            members.setdefault(c.case_id, c)
        if len(members) < min_cases:
            break
        chosen = list(members.values())
        ratios = np.array([c.ratio for c in chosen])
        anchor = next(c for c in chosen if c.position == at)
        e = group.env
        out.append(Event(e.suite, e.profile, e.device_kind, e.framework_version, anchor.last_good, anchor.first_bad,
                         at, len(chosen), len(group.samples), int(np.sum(ratios > 1)), median(ratios),
                         float(ratios.min()), float(ratios.max()), sorted(members),
                         sorted(chosen, key=lambda c: c.case)))
        taken = {id(c) for c in chosen}
        left = [c for c in left if id(c) not in taken]
    return sorted(out, key=lambda ev: ev.position)
