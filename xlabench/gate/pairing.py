"""Pairing and verdicts: baseline and candidate matched case by case, each change judged, the suite-wide shift judged, and gate's re-run confirming what was flagged."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Callable, Iterable, Optional

import numpy as np

from xlabench import results
from xlabench.audit import marks
from xlabench.cells import clip
from xlabench.gate.config import (
    EXIT_FAIL, EXIT_NOTHING, EXIT_PASS, EXIT_UNJUDGED, num, CONFOUNDED, EnvMismatchError, FAILED, FAILING, GateConfig,
    GateInputError, IMPROVEMENT, INCONCLUSIVE, MISSING, NEW, REGRESSION, SKIPPED, UNCONFIRMED, UNJUDGED, UNJUDGED_FAILING,
    VERDICTS, metric_missing,
)
from xlabench.gate.run_data import RunData
from xlabench.gate.assessment import Assessment, assess, samples_needed
from xlabench.gate.suite_shift import EarlyInterval, SuiteShift, assess_suite
from xlabench.protocol import status as st


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
    n_baseline: int = 0  # the baseline's cases (of those compared: ``only``)

    def count(self, verdict: str) -> int:
        return sum(c.verdict == verdict for c in self.cases)

    @property
    def tested(self) -> int:
        """Cases that reached the statistics (Holm runs over them)."""
        return sum(c.p_holm is not None for c in self.cases)

    @property
    def compared(self) -> int:
        """Cases with measurements on both sides (the tested ones and those with too few samples): the
        family Holm runs over once each has enough samples."""
        return sum(bool(c.n_base and c.n_cand) for c in self.cases)

    @property
    def short(self) -> list[CaseVerdict]:
        """Compared cases left untested for having fewer samples than min_samples on a side."""
        return [c for c in self.cases if c.p_holm is None and c.n_base and c.n_cand
                and min(c.n_base, c.n_cand) < self.config.min_samples]

    @property
    def need_per_side(self) -> int:
        """Samples per side one case needs to be judged among the compared cases (min_samples at least)."""
        return samples_needed(self.config, self.compared)

    @property
    def unjudged(self) -> list[CaseVerdict]:
        """The cases the gate could not judge (inconclusive or underpowered)."""
        return [c for c in self.cases if c.verdict in UNJUDGED]

    @property
    def missing(self) -> list[CaseVerdict]:
        """Cases of the baseline the candidate does not have (they fail unless allow_missing)."""
        return [c for c in self.cases if c.verdict == MISSING]

    @property
    def regressed(self) -> bool:
        """A regression (a case or the suite-wide shift) or a failed case."""
        return any(c.verdict in FAILING for c in self.cases) or (
            self.suite is not None and self.suite.verdict == REGRESSION)

    @property
    def failed(self) -> bool:
        """A regression, a failed case, or a case missing from the candidate (unless allowed)."""
        return self.regressed or bool(self.missing and not self.config.allow_missing)

    @property
    def unjudged_failing(self) -> bool:
        """Something that looks like a regression but could not be judged: an underpowered case, or a
        case or suite-wide shift the host's own slowdown explains (confounded)."""
        return any(c.verdict in UNJUDGED_FAILING and self._bad_way(c.ratio) for c in self.cases) or (
            self.suite is not None and self.suite.verdict == CONFOUNDED and self._bad_way(self.suite.ratio))

    def _bad_way(self, ratio: Optional[float]) -> bool:
        """A change the bad way (slower; lower throughput): a confounded speed-up fails nothing."""
        if ratio is None:
            return True
        return ratio < 1 if self.config.metric_info.higher_is_better else ratio > 1

    @property
    def exit_code(self) -> int:
        """1 for a regression or failure; 2 when no case reached the statistics (a comparison of nothing
        must not pass); 1 for missing cases; 3 could not judge; else 0."""
        if self.regressed:
            return EXIT_FAIL
        if self.tested == 0:
            return EXIT_NOTHING
        if self.failed:
            return EXIT_FAIL
        if self.unjudged_failing and not self.config.allow_inconclusive:
            return EXIT_UNJUDGED
        return EXIT_PASS

    @property
    def outcome(self) -> str:
        return {EXIT_PASS: "passed", EXIT_FAIL: "failed", EXIT_NOTHING: "nothing compared",
                EXIT_UNJUDGED: "could not judge"}[self.exit_code]

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


def _rows(run: RunData, only: Optional[set[str]]) -> dict[str, dict[str, Any]]:
    rows = {str(r["case_id"]): r for r in run.rows.to_dict("records")}
    return rows if only is None else {k: v for k, v in rows.items() if k in only}


def _check_suites(base: RunData, cand: RunData) -> None:
    """Both files hold runs of one and the same suite (as `gate` checks its baseline before it runs)."""
    bs, cs = (sorted(set(r.rows["suite"].astype(str))) for r in (base, cand))
    if bs != cs:
        raise GateInputError(f"baseline {base.path} holds suite(s) {', '.join(bs)}, candidate {cand.path} "
                             f"holds {', '.join(cs)}: compare two runs of one suite")


def slice_of(run: RunData) -> Optional[str]:
    """'1 x TPU v5 lite': the slice a run's measured rows ran on (None: its rows do not say)."""
    rows = run.rows[run.rows["status"].astype(str) == st.OK] if "status" in run.rows else run.rows
    if "device_count" not in rows or rows.empty:
        return None
    counts = sorted({int(n) for n in rows["device_count"] if num(n)})
    kinds = sorted({str(k) for k in rows.get("device_kind", []) if isinstance(k, str) and k})
    return f"{'/'.join(map(str, counts))} x {'/'.join(kinds) or '?'}" if counts else None


def _check_slices(base: RunData, cand: RunData) -> None:
    """Runs on different slices are different studies: a suite fits its cases (devices, model, batches) to
    the slice found, so none pairs, and no verdict would mean anything."""
    b, c = slice_of(base), slice_of(cand)
    if b and c and b.split(" x ")[0] != c.split(" x ")[0]:
        raise GateInputError(f"baseline {base.path} ran on {b}, candidate {cand.path} on {c}: runs on different "
                             "slices are different studies (a suite fits its devices, model and batches to the "
                             "slice found); compare two runs of one slice")


def _check_ids(common: list[str], b_rows: dict, c_rows: dict, base: RunData, cand: RunData) -> None:
    for k in common:
        diff = [p for p in _ID_PARAMS if _norm(b_rows[k].get(p)) != _norm(c_rows[k].get(p))]
        if diff:
            p = diff[0]
            raise GateInputError(
                f"case {k}: the files disagree on {', '.join(diff)} ({p}={b_rows[k].get(p)!r} in "
                f"{base.path}, {c_rows[k].get(p)!r} in {cand.path}): the case ids are not comparable")


def _check_clocks(common: list[str], b_rows: dict, c_rows: dict, base: RunData, cand: RunData) -> None:
    """Both sides of every measured pair on one clock (the ``clock`` column): a wall-clock baseline and a
    device-clock candidate differ by the host's per-call cost, not by the change under test."""
    for k in common:
        if b_rows[k]["status"] != st.OK or c_rows[k]["status"] != st.OK:
            continue
        bc, cc = (str(r.get("clock") or "wall") for r in (b_rows[k], c_rows[k]))
        if bc != cc:
            raise GateInputError(
                f"case {k}: the baseline {base.path} times median_s and its samples on the {bc} clock, the "
                f"candidate {cand.path} on the {cc} clock (column 'clock'; schema-1 files are wall clock): "
                "re-record the baseline with this xlabench, or run the candidate with --timer "
                f"{'wallclock' if cc == 'device' else 'trace'} so that both use one clock")


def _input_warnings(common: list[str], b_rows: dict, c_rows: dict, cfg: GateConfig) -> list[str]:
    """Environment mismatch (refused unless allowed) and unequal repeats."""
    warn: list[str] = []
    problems = _env_problems([(b_rows[k], c_rows[k]) for k in common])
    if problems:
        msg = "baseline and candidate ran in different environments: " + "; ".join(problems)
        if not cfg.allow_env_mismatch:
            raise EnvMismatchError(msg + " (pass --allow-env-mismatch to compare anyway)")
        warn.append(msg + " (compared anyway: --allow-env-mismatch)")
    runs = {side: sorted({int(num(rows[k].get("repeats")) or 1) for k in common if rows[k]["status"] == st.OK})
            for side, rows in (("baseline", b_rows), ("candidate", c_rows))}
    if runs["baseline"] and runs["candidate"] and min(runs["baseline"]) < max(runs["candidate"]):
        warn.append(f"the baseline pooled {'/'.join(map(str, runs['baseline']))} run(s) per case, the candidate "
                    f"{'/'.join(map(str, runs['candidate']))}: the baseline's run-to-run drift dominates; record it "
                    "with at least as many --repeats (docs/gate.md: shared hosts)")
    return warn


def _untested(c: dict[str, Any], b: Optional[dict[str, Any]]) -> Optional[tuple[str, str]]:
    """(verdict, reason) of a candidate row that cannot reach the statistics, None for a pair to test."""
    if c["status"] == st.FAILED:
        return FAILED, f"candidate failed: {clip(str(c.get('error') or ''), 300)}"
    if c["status"] == st.OK and c.get("correct") is False:
        return FAILED, f"wrong result: max_abs_err {c.get('max_abs_err')} > tolerance {c.get('err_tol')}"
    if c["status"] == st.SKIPPED:
        was = "" if b is None else f" (baseline: {b['status']})"
        return SKIPPED, f"{clip(str(c.get('error') or ''), 200)}{was}"
    if b is None:
        return NEW, "not in the baseline"
    if b["status"] != st.OK:
        return NEW, f"no baseline measurement (baseline status {b['status']})"
    if suspect := marks.suspect(b):
        return INCONCLUSIVE, clip(f"refused as a baseline: the baseline row is suspect ({suspect})", 400)
    return None


def compare(base: RunData, cand: RunData, cfg: GateConfig,
            only: Optional[set[str]] = None) -> Comparison:
    """Pair the cases of two runs by case id and judge each pair (``only``: restrict to these ids)."""
    _check_suites(base, cand)
    _check_slices(base, cand)
    b_rows, c_rows = _rows(base, only), _rows(cand, only)
    common = [k for k in c_rows if k in b_rows]
    _check_ids(common, b_rows, c_rows, base, cand)
    _check_clocks(common, b_rows, c_rows, base, cand)
    if why := metric_missing([(b_rows[k], c_rows[k]) for k in common if _untested(c_rows[k], b_rows[k]) is None],
                             cfg.metric):
        raise GateInputError(why)
    warn = [f"{role}: {note}" for role, run in (("baseline", base), ("candidate", cand))
            if (note := results.incomplete_note(run.path))] + _input_warnings(common, b_rows, c_rows, cfg)
    labels = _labels(list(c_rows.values()) + [b_rows[k] for k in b_rows if k not in c_rows])
    verdicts: dict[str, CaseVerdict] = {}
    rescaled: dict[tuple[float, float], int] = {}
    to_test: list[str] = []
    pairs: list[tuple[np.ndarray, np.ndarray]] = []
    for k, c in c_rows.items():
        b = b_rows.get(k)
        untested = _untested(c, b)
        if untested is None:
            bv = cfg.metric_info.per_iteration(b, base.samples_of(b))
            cv = cfg.metric_info.per_iteration(c, cand.samples_of(c))
            if cv is not None and (scale := _peak_scale(b, c, cfg, rescaled)) is not None:
                cv = cv * scale
            if bv is not None and cv is not None:
                to_test.append(k)
                pairs.append((bv, cv))
                continue
            untested = INCONCLUSIVE, f"{cfg.metric} is empty in the {'baseline' if bv is None else 'candidate'} row"
        verdicts[k] = CaseVerdict(*untested, case_id=k, label=labels[k])
    warn += _rescale_warnings(rescaled, cfg)
    early = EarlyInterval(pairs, cfg, to_test)  # the suite-wide interval, drawn while the cases are judged
    assessed = assess(pairs, cfg, to_test, workers=1)  # the second core draws the suite's
    host = HostProbe.of([b_rows[k] for k in to_test], [c_rows[k] for k in to_test])
    for k, a in zip(to_test, assessed):
        verdicts[k] = CaseVerdict(**asdict(host.check_case(a, k, cfg)), case_id=k, label=labels[k])
    suite = _suite_shift(to_test, pairs, assessed, b_rows, c_rows, cfg, host, early)
    warn += host.warnings(suite, cfg)
    for k, b in b_rows.items():
        if k not in c_rows:
            verdicts[k] = CaseVerdict(MISSING, f"not in the candidate (baseline status {b['status']})",
                                      case_id=k, label=labels[k])
    order = list(c_rows) + [k for k in b_rows if k not in c_rows]
    return Comparison(str(base.path), str(cand.path), cfg, [verdicts[k] for k in order], warn, suite=suite,
                      n_baseline=len(b_rows))


def _peak_scale(b: dict, c: dict, cfg: GateConfig, seen: dict[tuple[float, float], int]) -> Optional[float]:
    """For a metric that is a fraction of the row's peak (mfu, mbu): the factor that rates the candidate's
    values against the baseline's peak (c_peak / b_peak), or None where the peaks agree or are missing. A
    peak belongs to a run: a CPU host's measured peak drifts between runs, and a fraction of two peaks is
    no comparison (2x the peak read as a 0.50 'regression' at identical times)."""
    col = cfg.metric_info.peak
    if col is None:
        return None
    bp, cp = num(b.get(col)), num(c.get(col))
    if not bp or not cp or math.isclose(bp, cp, rel_tol=1e-9):
        return None
    seen[(bp, cp)] = seen.get((bp, cp), 0) + 1
    return cp / bp


def _rescale_warnings(seen: dict[tuple[float, float], int], cfg: GateConfig) -> list[str]:
    col = cfg.metric_info.peak
    unit = "TFLOP/s" if col == "peak_tflops" else "GB/s"
    return [f"{cfg.metric}: {n} case(s) rated against different peaks (baseline {bp:.4g} {unit}, candidate "
            f"{cp:.4g} {unit}): the candidate's {cfg.metric} is rescaled to the baseline's peak (x{cp / bp:.3g}), "
            "so the verdict is on the time alone" for (bp, cp), n in seen.items()]


def _compile_time(row: dict) -> float:
    """The row's compile seconds as a probe of the host's speed; NaN (left out) when the executable came
    from the persistent compilation cache: loading it says nothing about how fast the host compiles."""
    if str(row.get("compile_cached")).lower() == "true":
        return np.nan
    return num(row.get("compile_s")) or np.nan


def _suite_shift(to_test: list[str], pairs: list[tuple[np.ndarray, np.ndarray]], assessed: list[Assessment],
                 b_rows: dict, c_rows: dict, cfg: GateConfig, host: "HostProbe",
                 early: Optional[EarlyInterval] = None) -> Optional[SuiteShift]:
    """The suite-wide test over every case that reached the statistics (a ratio), whatever its own verdict."""
    idx = [i for i, a in enumerate(assessed) if a.ratio is not None]
    compile_times = (np.array([_compile_time(b_rows[to_test[i]]) for i in idx]),
                     np.array([_compile_time(c_rows[to_test[i]]) for i in idx]))
    suite = assess_suite([pairs[i] for i in idx], cfg, compile_times, [to_test[i] for i in idx],
                         early.result(idx) if early else None)
    return None if suite is None else host.check_suite(suite, cfg)


@dataclass(frozen=True)
class HostProbe:
    """The host's own change of speed between the two runs, from the calibration kernel timed beside
    every case (``host_calib_s``, xlabench.run.calibrate): per case candidate / baseline, and their
    geometric mean over the run. A slowdown that the host's slowdown explains is ``confounded``."""

    per_case: dict[str, float] = field(default_factory=dict)
    run: Optional[float] = None

    @classmethod
    def of(cls, b_rows: list[dict[str, Any]], c_rows: list[dict[str, Any]]) -> "HostProbe":
        per_case = {}
        for b, c in zip(b_rows, c_rows):
            bc, cc = num(b.get("host_calib_s")), num(c.get("host_calib_s"))
            if bc and cc and bc > 0 and cc > 0:
                per_case[str(c["case_id"])] = cc / bc
        run = float(np.exp(np.mean(np.log(list(per_case.values()))))) if per_case else None
        return cls(per_case, run)

    def slowdown(self, case_id: Optional[str] = None) -> Optional[float]:
        """How much slower the host ran (the larger of the case's bracket and the run's), None unknown."""
        got = [h for h in (self.per_case.get(case_id) if case_id else None, self.run) if h is not None]
        return max(got) if got else None

    def speedup(self, case_id: Optional[str] = None) -> Optional[float]:
        """How much faster the host ran (the smaller of the case's bracket and the run's), None unknown."""
        got = [h for h in (self.per_case.get(case_id) if case_id else None, self.run) if h is not None]
        return min(got) if got else None

    def explains(self, lo: float, hi: float, h: Optional[float], cfg: GateConfig, worse: bool = True) -> bool:
        """Whether the interval [lo, hi] of a change (``worse``: the bad way, else the good way), with the
        host's change of speed h taken out, reaches back within the threshold."""
        if h is None or (h <= 1 if worse else h >= 1):
            return False
        t, hib = cfg.threshold, cfg.metric_info.higher_is_better
        if hib:  # a slower host lowers throughput, a faster one raises it
            return hi * h >= 1 - t if worse else lo * h <= 1 + t
        return lo / h <= 1 + t if worse else hi / h >= 1 - t

    @staticmethod
    def _because(h: float) -> str:
        how = "slowed down" if h > 1 else "sped up"
        return f"the host {how} by as much; two runs cannot tell that from the code"

    def check_case(self, a: Assessment, case_id: str, cfg: GateConfig) -> Assessment:
        """A regression the host's slowdown explains, or an improvement its speed-up explains: confounded."""
        h = self.slowdown(case_id) if a.verdict == REGRESSION else self.speedup(case_id)
        if a.verdict not in (REGRESSION, IMPROVEMENT) or not self.explains(
                a.ci_low, a.ci_high, h, cfg, worse=a.verdict == REGRESSION):
            return a
        return replace(a, verdict=CONFOUNDED, reason=(
            f"{a.reason}, but the host's calibration kernel ran {h:.2f}x as long (beside this case "
            f"{self.per_case.get(case_id, float('nan')):.2f}x, over the run {self.run:.2f}x): {self._because(h)}"))

    def check_suite(self, s: SuiteShift, cfg: GateConfig) -> SuiteShift:
        s = replace(s, calib_ratio=self.run)
        if s.verdict not in (REGRESSION, IMPROVEMENT) or not self.explains(
                s.ci_low, s.ci_high, self.run, cfg, worse=s.verdict == REGRESSION):
            return s
        return replace(s, verdict=CONFOUNDED, reason=(  # the figure itself is the suite line's "host calibration"
            f"beyond the {cfg.threshold:.0%} threshold, but by its calibration kernel {self._because(self.run)}"))

    def moved(self, cfg: GateConfig) -> bool:
        """Whether the run's calibration ratio lies beyond the threshold: the host's speed changed."""
        return self.run is not None and not 1 - cfg.threshold < self.run < 1 + cfg.threshold

    def warnings(self, suite: Optional[SuiteShift], cfg: GateConfig) -> list[str]:
        out = []
        t = cfg.threshold
        if suite is not None and suite.machine_ratio is not None and (
                suite.machine_low > 1 + t or suite.machine_high < 1 - t):
            out.append(f"the host compiled {suite.machine_ratio:.2f}x as long as for the baseline "
                       f"[{suite.machine_low:.2f}, {suite.machine_high:.2f}] (geometric mean over {suite.n_cases} "
                       "cases): its speed changed (load?), and every case's time with it; per-case verdicts cannot "
                       "see that (docs/gate.md: the host's speed)")
        if suite is None and self.moved(cfg):  # a suite line says it (gate.report.suite_line), once
            out.append(f"the host's calibration kernel ran {self.run:.2f}x as long as beside the baseline (geometric "
                       f"mean over {len(self.per_case)} cases): the host's speed changed (load?); regressions it "
                       "explains are 'confounded' (docs/gate.md: the host's speed)")
        return out


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
            if w.verdict in (REGRESSION, FAILED, MISSING, CONFOUNDED):
                verdict = w.verdict if w.verdict in (REGRESSION, CONFOUNDED) else FAILED
                c = replace(c, verdict=verdict, confirmation=conf, reason=f"{c.reason}; re-run: {w.reason}")
            else:
                c = replace(c, verdict=UNCONFIRMED, confirmation=conf,
                            reason=f"{c.reason}; re-run did not reproduce it: {w.reason}")
        cases.append(c)
    suite = first.suite
    if suite_flagged:
        w = again.suite
        if w is not None and w.verdict in (REGRESSION, CONFOUNDED):
            suite = replace(suite, verdict=w.verdict, confirmation=w, reason=f"{suite.reason}; re-run: {w.reason}")
        else:
            why = w.reason if w is not None else "too few cases in the re-run"
            suite = replace(suite, verdict=UNCONFIRMED, confirmation=w,
                            reason=f"{suite.reason}; re-run did not reproduce it: {why}")
    warn = first.warnings + [f"the re-run {again_run.path}: {w}" for w in again.warnings if w not in first.warnings]
    return replace(first, cases=cases, warnings=warn, confirm_run=str(again_run.path), suite=suite)
