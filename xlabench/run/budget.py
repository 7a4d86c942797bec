"""A run's time before it is spent: the planned cases (which would be skipped at once, which would take
their blocks from the shipped table, which would search) estimated from the runs recorded on the slice
(run/recorded.py, run/estimate.py), and where that passes LIMIT_S, the profile or filter that comes under
it. ``run --dry-run`` and the run's first lines print ``lines``."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from xlabench import results
from xlabench import suite as suite_lib
from xlabench.impls import workload_rules
from xlabench.run import estimate as est
from xlabench.run.envs import Interpreters
from xlabench.run.recorded import recorded_runs
from xlabench.run.scheduler import platform_skip
from xlabench.run.table_held import case_held
from xlabench.suite import slice_fit
from xlabench.tune import table

PLATFORMS = ("tpu", "gpu", "cpu")
Select = Callable[[str], list]  # a profile's name -> its cases under the run's filters (RunInputError if none)


def profile_platform(s: suite_lib.Suite, prof: str, guessed: str) -> str:
    """The platform a profile is for: the one that picks it (the guessed platform first), else the one its
    name starts with (tpu_full: tpu), else the guessed one."""
    for p in (guessed, *PLATFORMS):
        try:
            if s.pick_profile(p) == prof:
                return p
        except (ValueError, suite_lib.SuiteError):
            continue
    head = prof.split("_")[0].split("-")[0]
    return head if head in PLATFORMS else guessed


def planned(cases: Sequence[suite_lib.Case], platform: str, device_kind: str,
            interpreters: Optional[Interpreters] = None) -> list[est.PlannedCase]:
    """What each case would cost on ``platform``: nothing where it is skipped before a worker, a search or a
    table entry's check where it chooses blocks; the ladder's best point again unrolled, where it has one."""
    shipped = table.for_device(device_kind)[0] if device_kind else None
    out = []
    for c in cases:
        skip = (platform_skip(c, platform) or (interpreters.missing(c.backend) if interpreters else None)
                or workload_rules.predict_skip(c.workload, c.backend, c.impl, c.params, platform))
        held = case_held(c, shipped, platform).status if shipped is not None and not skip else ""
        tune = {"held": est.TABLE, "nearest": est.TABLE, "lacks": est.SEARCH}.get(held)
        out.append(est.PlannedCase(c.case_id, c.workload, c.backend, c.impl,
                                   {k: v for k, v in c.params.items() if v is not None}, not skip, tune))
    ladder = [p for p, c in zip(out, cases) if c.unroll_best and p.runs]
    if ladder:  # its best point is known once it has run: the last (largest) point stands for it
        last = ladder[-1]
        params = {**last.params, "scan_layers": False}
        out.append(est.PlannedCase(results.case_id(last.workload, last.backend, last.impl, params), last.workload,
                                   last.backend, last.impl, params, True, last.tune))
    return out


def alternatives(s: suite_lib.Suite, prof: str, platform: str, device_kind: str, plan: Sequence[est.PlannedCase],
                 select: Select, interpreters: Optional[Interpreters], runs: Sequence[est.RecordedRun]
                 ) -> dict[str, Optional[est.Estimate]]:
    """The run's other choices on the same platform -> their estimates: each other profile of the suite for
    it, and each impl or backend of the planned run alone (--impl, --backend)."""
    out: dict[str, Optional[est.Estimate]] = {}
    for other in s.spec.profiles:
        if other == prof or profile_platform(s, other, platform) != platform:
            continue
        try:
            cases = select(other)
        except Exception:  # the run's filters name nothing there
            continue
        out[f"--profile {other}"] = est.estimate(planned(cases, platform, device_kind, interpreters), runs)
    running = [p for p in plan if p.runs]
    for option, key in (("--impl", lambda p: p.impl), ("--backend", lambda p: p.backend)):
        values = list(dict.fromkeys(key(p) for p in running))
        if len(values) > 1:
            for v in values:
                out[f"{option} {v}"] = est.estimate([p for p in plan if key(p) == v], runs)
    return out


def recorded_fit(runs: Sequence[est.RecordedRun], suite: str) -> Optional[slice_fit.ModelFitter]:
    """A model fit without a worker (a dry run's): the model the newest recorded run of ``suite`` ran fits,
    the larger candidates do not; None where no recorded run of it names a model."""
    chosen = next((c.params["model"] for r in runs if r.suite == suite for c in r.cases if c.params.get("model")),
                  None)
    if chosen is None:
        return None

    def fit(candidates: list[dict[str, Any]], impls: list[str]) -> list[slice_fit.Probe]:
        out = []
        for cand in candidates:  # largest first, stopping at the first that fits
            fits = cand.get("model") == chosen
            out += [slice_fit.Probe(str(cand.get("model")), i, 0 if fits else 2, 1,
                                    "" if fits else f"the recorded run fitted {chosen}") for i in impls]
            if fits:
                break
        return out

    return fit


def lines(s: suite_lib.Suite, prof: str, cases: Sequence[suite_lib.Case], platform: str, select: Select,
          interpreters: Optional[Interpreters] = None, slice: Optional[str] = None,
          runs: Optional[Sequence[est.RecordedRun]] = None, quiet: bool = False) -> list[str]:
    """The estimate's line, and the advice's where the run passes est.LIMIT_S; where nothing was recorded
    on the platform, a line saying so (none if ``quiet``: a run on a CPU says nothing of it). ``slice``: the
    run's device kind and count, where a worker said them; ``runs``: the records, where the caller read them."""
    runs = recorded_runs(s.name, platform, slice) if runs is None else runs
    if not runs:
        return [] if quiet else [f"estimate: none (no run recorded on {slice or platform} under docs/data/)"]
    device_kind = runs[0].slice.rsplit(" x", 1)[0]
    plan = planned(cases, platform, device_kind, interpreters)
    whole = est.estimate(plan, runs)
    if whole is None:
        return []
    out = [whole.text(s.name)]
    if whole.seconds > est.LIMIT_S:
        alt = alternatives(s, prof, platform, device_kind, plan, select, interpreters, runs)
        out.append(est.advice(whole, alt) or "")
    return [x for x in out if x]

