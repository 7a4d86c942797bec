"""Pairing and verdicts: baseline and candidate matched case by case, each change judged, the suite-wide shift judged, and gate's re-run confirming what was flagged."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable, Optional

import numpy as np

from xlabench import results
from xlabench.gate.config import (
    EXIT_FAIL, EXIT_PASS, EXIT_UNJUDGED, num, CONFOUNDED, EnvMismatchError, FAILED, FAILING, GateConfig,
    GateInputError, INCONCLUSIVE, MISSING, NEW, REGRESSION, SKIPPED, UNCONFIRMED, UNDERPOWERED, UNJUDGED,
    VERDICTS,
)
from xlabench.gate.load import RunData
from xlabench.gate.stats import Assessment, assess, min_samples_per_side
from xlabench.gate.suite_shift import SuiteShift, assess_suite


@dataclass(frozen=True)
class CaseVerdict(Assessment):
    """One case's outcome in a comparison (an Assessment plus who the case is)."""

    case_id: str = ""
    label: str = ""
    confirmation: Optional[Assessment] = None  # gate's re-run of a flagged case


@dataclass
class Comparison:
    baseline: str
    candidate: str
    config: GateConfig
    cases: list[CaseVerdict]
    warnings: list[str] = field(default_factory=list)
    confirm_run: Optional[str] = None
    suite: Optional[SuiteShift] = None

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.cases)

    @property
    def tested(self) -> int:
        """Cases that reached the statistics (Holm runs over them)."""
        return sum(c.p_holm is not None for c in self.cases)

    @property
    def need_per_side(self) -> int:
        """Samples per side one case needs to be able to reach significance over the tested cases."""
        return min_samples_per_side(self.config.alpha, max(1, self.tested))

    @property
    def unjudged(self) -> list[CaseVerdict]:
        """The cases the gate could not judge (inconclusive or underpowered)."""
        return [c for c in self.cases if c.verdict in UNJUDGED]

    @property
    def failed(self) -> bool:
        """A regression (a case or the suite-wide shift) or a failed case."""
        return any(c.verdict in FAILING for c in self.cases) or (
            self.suite is not None and self.suite.verdict == REGRESSION)

    @property
    def unjudged_failing(self) -> bool:
        """Something that looks like a regression but could not be judged: an underpowered case or a
        confounded suite-wide shift."""
        return any(c.verdict == UNDERPOWERED for c in self.cases) or (
            self.suite is not None and self.suite.verdict == CONFOUNDED)

    @property
    def exit_code(self) -> int:
        if self.failed:
            return EXIT_FAIL
        if self.unjudged_failing and not self.config.allow_inconclusive:
            return EXIT_UNJUDGED
        return EXIT_PASS

    @property
    def outcome(self) -> str:
        return {EXIT_PASS: "passed", EXIT_FAIL: "failed", EXIT_UNJUDGED: "could not judge"}[self.exit_code]

    @property
    def passed(self) -> bool:
        return self.exit_code == EXIT_PASS

    def to_dict(self) -> dict[str, Any]:
        m = self.config.metric_info
        return {
            "passed": self.passed, "exit_code": self.exit_code, "outcome": self.outcome,
            "baseline": self.baseline, "candidate": self.candidate, "confirm_run": self.confirm_run,
            "metric": {"name": m.name, "unit": m.unit, "higher_is_better": m.higher_is_better,
                       "statistic": m.statistic},
            "config": asdict(self.config),
            "counts": {v: self.count(v) for v in VERDICTS},
            "suite": None if self.suite is None else asdict(self.suite),
            "could_not_judge": {"count": len(self.unjudged), "need_per_side": self.need_per_side,
                                "cases": [{"case_id": c.case_id, "label": c.label, "verdict": c.verdict,
                                           "n_base": c.n_base, "n_cand": c.n_cand, "reason": c.reason}
                                          for c in self.unjudged]},
            "warnings": self.warnings,
            "cases": [asdict(c) for c in self.cases],
        }



def _norm(v: Any) -> Any:
    """A cell value comparable across files (pandas may read 64 as 64.0 or '64')."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return None
    if isinstance(v, (bool, np.bool_)):
        return bool(v)
    f = num(v)
    if f is not None:
        return int(f) if f.is_integer() else f
    return str(v)


_ID_PARAMS = [c for c in results.CASE_COLUMN_NAMES if c != "devices"]  # what case_id hashes
_ENV_KEYS = ("device_kind", "framework_version")


def _labels(rows: Iterable[dict[str, Any]]) -> dict[str, str]:
    rows = list(rows)
    params = [c for c in _ID_PARAMS if c not in ("workload", "backend", "impl")]
    varying = [c for c in params if len({_norm(r.get(c)) for r in rows}) > 1]
    shown = varying or params
    out = {}
    for r in rows:
        kv = " ".join(f"{c}={_norm(r.get(c))}" for c in shown if _norm(r.get(c)) is not None)
        out[str(r["case_id"])] = f"{r['backend']}/{r['impl']} {kv}".strip()
    return out


def _env_problems(pairs: list[tuple[dict, dict]]) -> list[str]:
    problems: dict[str, tuple[set, set]] = {}
    for b, c in pairs:
        for k in _ENV_KEYS:
            bv, cv = _norm(b.get(k)), _norm(c.get(k))
            if bv is not None and cv is not None and bv != cv:
                sb, sc = problems.setdefault(k, (set(), set()))
                sb.add(str(bv))
                sc.add(str(cv))
    return [f"{k}: baseline {', '.join(sorted(b))!r} vs candidate {', '.join(sorted(c))!r}"
            for k, (b, c) in problems.items()]


def compare(base: RunData, cand: RunData, cfg: GateConfig,
            only: Optional[set[str]] = None) -> Comparison:
    """Pair the cases of two runs by case id and judge each pair (``only``: restrict to these ids)."""
    b_rows = {str(r["case_id"]): r for r in base.rows.to_dict("records")}
    c_rows = {str(r["case_id"]): r for r in cand.rows.to_dict("records")}
    if only is not None:
        b_rows = {k: v for k, v in b_rows.items() if k in only}
        c_rows = {k: v for k, v in c_rows.items() if k in only}
    common = [k for k in c_rows if k in b_rows]
    for k in common:
        diff = [p for p in _ID_PARAMS if _norm(b_rows[k].get(p)) != _norm(c_rows[k].get(p))]
        if diff:
            p = diff[0]
            raise GateInputError(
                f"case {k}: the files disagree on {', '.join(diff)} ({p}={b_rows[k].get(p)!r} in "
                f"{base.path}, {c_rows[k].get(p)!r} in {cand.path}): the case ids are not comparable")
    warn: list[str] = []
    problems = _env_problems([(b_rows[k], c_rows[k]) for k in common])
    if problems:
        msg = "baseline and candidate ran in different environments: " + "; ".join(problems)
        if not cfg.allow_env_mismatch:
            raise EnvMismatchError(msg + " (pass --allow-env-mismatch to compare anyway)")
        warn.append(msg + " (compared anyway: --allow-env-mismatch)")

    runs = {side: sorted({int(num(rows[k].get("repeats")) or 1) for k in common if rows[k]["status"] == "ok"})
            for side, rows in (("baseline", b_rows), ("candidate", c_rows))}
    if runs["baseline"] and runs["candidate"] and min(runs["baseline"]) < max(runs["candidate"]):
        warn.append(f"the baseline pooled {'/'.join(map(str, runs['baseline']))} run(s) per case, the candidate "
                    f"{'/'.join(map(str, runs['candidate']))}: the baseline's run-to-run drift dominates; record it "
                    "with at least as many --repeats (docs/gate.md: shared hosts)")
    labels = _labels(list(c_rows.values()) + [b_rows[k] for k in b_rows if k not in c_rows])
    metric = cfg.metric_info
    verdicts: dict[str, CaseVerdict] = {}
    to_test: list[str] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []

    def put(k: str, verdict: str, reason: str, **kw: Any) -> None:
        verdicts[k] = CaseVerdict(verdict, reason, case_id=k, label=labels[k], **kw)

    for k, c in c_rows.items():
        b = b_rows.get(k)
        if c["status"] == "failed":
            put(k, FAILED, f"candidate failed: {str(c.get('error') or '')[:300]}")
        elif c["status"] == "ok" and c.get("correct") is False:
            put(k, FAILED, f"wrong result: max_abs_err {c.get('max_abs_err')} > tolerance {c.get('err_tol')}")
        elif c["status"] == "skipped":
            was = "" if b is None else f" (baseline: {b['status']})"
            put(k, SKIPPED, f"{str(c.get('error') or '')[:200]}{was}")
        elif b is None:
            put(k, NEW, "not in the baseline")
        elif b["status"] != "ok":
            put(k, NEW, f"no baseline measurement (baseline status {b['status']})")
        else:
            bv = metric.per_iteration(b, base.samples_of(b))
            cv = metric.per_iteration(c, cand.samples_of(c))
            if bv is None or cv is None:
                side = "baseline" if bv is None else "candidate"
                put(k, INCONCLUSIVE, f"{cfg.metric} is empty in the {side} row")
                continue
            to_test.append(k)
            pairs.append((bv, cv))
    assessed = assess(pairs, cfg, to_test)
    for k, a in zip(to_test, assessed):
        verdicts[k] = CaseVerdict(**asdict(a), case_id=k, label=labels[k])
    # The suite-wide test: every case that reached the statistics (a ratio), whatever its own verdict.
    idx = [i for i, a in enumerate(assessed) if a.ratio is not None]
    compile_times = (np.array([num(b_rows[to_test[i]].get("compile_s")) or np.nan for i in idx]),
                     np.array([num(c_rows[to_test[i]].get("compile_s")) or np.nan for i in idx]))
    suite = assess_suite([pairs[i] for i in idx], cfg, compile_times, [to_test[i] for i in idx])
    if suite is not None and suite.machine_ratio is not None and (
            suite.machine_low > 1 + cfg.threshold or suite.machine_high < 1 - cfg.threshold):
        warn.append(f"the host compiled {suite.machine_ratio:.2f}x as long as for the baseline "
                    f"[{suite.machine_low:.2f}, {suite.machine_high:.2f}] (geometric mean over {suite.n_cases} cases): "
                    "its speed changed (load?), and every case's time with it; per-case verdicts cannot see that "
                    "(docs/gate.md: the host's speed)")
    for k, b in b_rows.items():
        if k not in c_rows:
            put(k, MISSING, f"not in the candidate (baseline status {b['status']})")
    order = list(c_rows) + [k for k in b_rows if k not in c_rows]
    return Comparison(str(base.path), str(cand.path), cfg, [verdicts[k] for k in order], warn, suite=suite)


def confirm(first: Comparison, base: RunData, rerun: Callable[[list[str]], RunData],
            cfg: GateConfig) -> Comparison:
    """Re-measure the cases flagged as regressions and keep only those that regress again.

    ``rerun(case_ids)`` runs just those cases afresh and returns the new run. A case stays a
    regression if the re-run alone is again judged one (Holm over the re-run cases only: a new,
    independent experiment); a case that fails in the re-run is a failure. A suite-wide regression
    re-runs every case of the suite-wide test, and stays one only if the re-run's is again one.
    """
    flagged = [c.case_id for c in first.cases if c.verdict == REGRESSION]
    regressed = set(flagged)
    suite_flagged = first.suite is not None and first.suite.verdict == REGRESSION
    if suite_flagged:
        flagged = list(dict.fromkeys(flagged + list(first.suite.case_ids)))
    if not flagged:
        return first
    again_run = rerun(flagged)
    again = compare(base, again_run, cfg, only=set(flagged))
    by_id = {c.case_id: c for c in again.cases}
    cases = []
    for c in first.cases:
        w = by_id.get(c.case_id) if c.case_id in regressed else None
        if w is not None:
            conf = Assessment(**{k: v for k, v in asdict(w).items() if k in Assessment.__dataclass_fields__})
            if w.verdict in (REGRESSION, FAILED, MISSING):
                verdict = REGRESSION if w.verdict == REGRESSION else FAILED
                c = replace(c, verdict=verdict, confirmation=conf, reason=f"{c.reason}; re-run: {w.reason}")
            else:
                c = replace(c, verdict=UNCONFIRMED, confirmation=conf,
                            reason=f"{c.reason}; re-run did not reproduce it: {w.reason}")
        cases.append(c)
    suite = first.suite
    if suite_flagged:
        w = again.suite
        if w is not None and w.verdict == REGRESSION:
            suite = replace(suite, confirmation=w, reason=f"{suite.reason}; re-run: {w.reason}")
        else:
            why = w.reason if w is not None else "too few cases in the re-run"
            suite = replace(suite, verdict=UNCONFIRMED, confirmation=w,
                            reason=f"{suite.reason}; re-run did not reproduce it: {why}")
    warn = first.warnings + [w for w in again.warnings if w not in first.warnings]
    return replace(first, cases=cases, warnings=warn, confirm_run=str(again_run.path), suite=suite)
