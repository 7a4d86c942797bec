"""The gate's judgement from the history: a candidate run against the recent runs of its suite and
environment, not one baseline file. Two findings fail it: a suite-wide change point that the candidate's
run lies after and that made the suite slower, and a creeping trend (every commit a little slower, each
step under the pairwise threshold) that ends at the candidate. The suite's change is judged twice: by the
run-to-run detector (xlabench.history.changes) and, as a floor, by the criterion the gate used before it
(xlabench.history.floor): the gate fails when either fails, so the new detector never makes it pass a
history it failed before (issue 35)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

import numpy as np

from xlabench.history import changes as cp
from xlabench.history import floor
from xlabench.history.series import GEOMEAN, Change, Group, detect
from xlabench.stats.ttest import hinge_fit

MIN_TREND_RUNS = 4   # a trend needs this many runs (3 commits of it)
MAX_TREND_RUNS = 20


@dataclass(frozen=True)
class Trend:
    per_commit: float  # geometric-mean ratio per commit (1.02: 2% slower each commit)
    commits: int       # commits it spans
    first: str         # git_sha of its first run
    last: str
    p: float           # slope t-test, Bonferroni over the windows tried

    def message(self, suite: str) -> str:
        word = "slower" if self.per_commit > 1 else "faster"
        return (f"this suite ({suite}) has been {abs(self.per_commit - 1) * 100:.1f}% {word} per commit for "
                f"{self.commits} commits ({self.first}..{self.last}, p {self.p:.2g})")


@dataclass
class HistoryVerdict:
    regression: bool
    lines: list[str] = field(default_factory=list)
    changes: list[Change] = field(default_factory=list)
    trend: Optional[Trend] = None


def trend(group: Group, alpha: float = cp.ALPHA) -> Optional[Trend]:
    """A creeping change ending at the newest run: the suite's geometric mean over its newest
    MAX_TREND_RUNS runs fitted as flat, then linear from a run on (hinge_fit); reported when the slope is
    significant."""
    idx, y = group.geomean_series()
    if len(y) < 2 * MIN_TREND_RUNS:
        return None
    y, idx = y[-MAX_TREND_RUNS:], idx[-MAX_TREND_RUNS:]
    fit = hinge_fit(y, MIN_TREND_RUNS)
    if fit is None or fit[2] > alpha:
        return None
    j, slope, p = fit
    runs = [group.runs[i] for i in idx[j:]]
    return Trend(float(np.exp(slope)), len(runs) - 1, runs[0]["git_sha"] or runs[0]["run_id"],
                 runs[-1]["git_sha"] or runs[-1]["run_id"], p)


def judge(group: Group, run_id: str, alpha: float = cp.ALPHA, threshold: float = 0.0) -> HistoryVerdict:
    """Judge the run ``run_id`` (the group's newest) by its history; a slowdown must exceed ``threshold``
    at its interval's lower bound (a change) or per commit (a trend) to fail it."""
    if not group.runs or group.runs[-1]["run_id"] != run_id:
        raise ValueError(f"run {run_id} is not the newest of {group.env.label()}")
    if len(group.runs) < 2 * cp.MIN_SIZE:
        return HistoryVerdict(False, [f"history: {len(group.runs)} run(s) of {group.env.label()}: "
                                      f"too few to judge (a change needs {cp.MIN_SIZE} runs either side)"])
    found = detect(group, alpha)
    suite = [c for c in found if c.case_id == GEOMEAN]
    out = HistoryVerdict(False, changes=found)
    last = suite[-1] if suite else None
    if last is not None and last.low > 1 + threshold:
        out.regression = True
        out.lines.append(f"history: {group.env.suite} is {(last.ratio - 1) * 100:+.1f}% "
                         f"({(last.low - 1) * 100:+.1f}% to {(last.high - 1) * 100:+.1f}%) since commit {last.first_bad} "
                         f"(last good {last.last_good}, p {last.p:.2g}), {last.runs_after} run(s) ago")
    else:  # the floor: what the gate failed before the run-to-run detector, it fails still
        old = floor.last_change(group, alpha)
        if old is not None and old[2].low > 1 + threshold:
            at, p, size = old
            out.regression = True
            out.lines.append(f"history: {group.env.suite} is {(size.ratio - 1) * 100:+.1f}% "
                             f"({(size.low - 1) * 100:+.1f}% to {(size.high - 1) * 100:+.1f}%) since commit "
                             f"{group.runs[at]['git_sha'] or group.runs[at]['run_id']} (last good "
                             f"{group.runs[at - 1]['git_sha'] or group.runs[at - 1]['run_id']}, rank test p {p:.2g}, "
                             f"the gate's earlier criterion), {len(group.runs) - at} run(s) ago")
    t = trend(group, alpha)
    if t is not None:
        out.trend = t
        if t.per_commit > 1 + threshold / max(t.commits, 1):
            out.regression = True
        out.lines.append("history: " + t.message(group.env.suite))
    cases = [c for c in found if c.case_id != GEOMEAN and c.ratio > 1 and c.position >= len(group.runs) - 5]
    if cases:
        out.lines.append(f"history: {len(cases)} case(s) changed in the last 5 runs, e.g. {cases[0].case} "
                         f"{(cases[0].ratio - 1) * 100:+.1f}% since {cases[0].first_bad}")
    if not out.lines:
        out.lines.append(f"history: no change in {len(group.runs)} runs of {group.env.label()}")
    return out
