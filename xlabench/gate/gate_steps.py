"""The gate's steps around a run: the baseline's checks, the iterations a suite needs to be judged, and
the baseline written whole. `xlabench gate` sequences these with run_suite, compare and confirm."""

from __future__ import annotations

import dataclasses
import math
import shutil
from pathlib import Path
from typing import Optional

from xlabench import results
from xlabench import suite as suite_lib
from xlabench.gate.config import GateInputError
from xlabench.gate.run_data import RunData
from xlabench.measure.sample_size import sample_shortfall
from xlabench.stats.power import min_samples_per_side
from xlabench.run import interrupts
from xlabench.protocol.status import OK
from xlabench.run.run_options import Filter, OptionError, RunOptions


def write_baseline(run_csv: Path, baseline: Path) -> None:
    """Copy a run's CSV, samples and metadata to the baseline path (the samples are what the gate needs)."""
    src, dst = results.RunFiles(run_csv), results.RunFiles(baseline)
    dst.csv.parent.mkdir(parents=True, exist_ok=True)
    try:
        with interrupts.uninterrupted():  # Ctrl-C waits for the copy: never a CSV of one run beside another's samples
            for a, b in ((src.csv, dst.csv), (src.samples, dst.samples), (src.meta, dst.meta)):
                if a.exists():
                    shutil.copyfile(a, b)
    except interrupts.Interrupted as e:  # raised as the copy ended: the baseline is written
        e.saved = dst.csv
        raise


def check_suite(base: RunData, suite_name: str) -> None:
    """The baseline must hold this suite's cases only."""
    suites = set(base.rows["suite"].astype(str))
    if suites != {suite_name}:
        raise GateInputError(f"baseline: {base.path} holds suite(s) {', '.join(sorted(suites))}, not {suite_name!r}")


def baseline_profile(base: RunData) -> Optional[str]:
    """The profile the baseline ran with ('base' for none), if it is one."""
    profiles = {p if isinstance(p, str) else "" for p in base.rows["profile"]}  # empty cell: NaN
    return (profiles.pop() or "base") if len(profiles) == 1 else None


def _selected(s: suite_lib.Suite, profile: Optional[str], opts: RunOptions) -> list[tuple[str, list]]:
    """(profile, the cases the run's filters select) of each profile the run may take (``profile`` None:
    not known before the platform is detected, every profile), those with no case left out."""
    targets = [s.pick_profile(None, profile)] if profile is not None else [""] + s.profile_names()
    out = []
    for prof in targets:
        try:
            cases = Filter(opts).apply(s.cases(prof))
        except OptionError:  # a filter this profile has no case for: the run says so, if it is the run's
            continue
        if cases:
            out.append((prof, cases))
    return out


def selected_ids(s: suite_lib.Suite, profile: Optional[str], opts: RunOptions) -> set[str]:
    """The ids of the cases the gate's run selects (--impl / --backend / -k): those it compares."""
    return {c.case_id for _, cases in _selected(s, profile, opts) for c in cases}


def raise_iters(s: suite_lib.Suite, profile: Optional[str], opts: RunOptions,
                base: Optional[RunData], alpha: float) -> tuple[suite_lib.Suite, list[str]]:
    """The suite with measure.iters raised, where needed, so that every case gets the samples per side
    one case needs to reach significance after Holm over the cases the gate will compare (those the run's
    filters, --impl / --backend / -k, select); and what was raised, in words. ``profile`` None (not known
    before the platform is detected): every profile."""
    ok_ids = set() if base is None else set(base.rows.loc[base.rows["status"] == OK, "case_id"].astype(str))
    spec = s.spec.model_copy(deep=True)
    said = []
    for prof, cases in _selected(s, profile, opts):
        paired = [c for c in cases if c.case_id in ok_ids]
        m = len(paired) or len(cases)
        need = min_samples_per_side(alpha, m)
        measure = cases[0].measure  # one measure per suite and profile
        runs = opts.repeats or measure.repeats
        want = math.ceil(need / runs)
        if measure.iters * runs >= need:
            continue
        if prof:
            spec.profiles[prof].measure.iters = want
        else:
            spec.measure.iters = want
        said.append(f"raised measure.iters from {measure.iters} to {want} (profile {prof or 'base'}"
                    + (f", x {runs} repeats" if runs > 1 else "") + f"): {m} compared case(s) need >= {need} "
                    f"samples per side for a case to reach significance after Holm (alpha {alpha:g})")
    return dataclasses.replace(s, spec=spec), said


def baseline_shortfall(base: RunData, alpha: float, only: Optional[set[str]] = None) -> Optional[str]:
    """A warning when the stored baseline has too few samples per case to judge any case; ``only``: the
    ids of the cases the gate compares (its run's filters), the family Holm runs over."""
    ok = base.rows[base.rows["status"] == OK]
    if only is not None:
        ok = ok[ok["case_id"].astype(str).isin(only)]
    short = sample_shortfall([int(n) for n in ok["n"]], alpha) if len(ok) else None
    if short is None:
        return None
    have, need = short
    which = f"the {len(ok)} case(s) the gate compares" if only is not None else f"its {len(ok)} ok case(s)"
    return (f"the baseline {base.path} has as few as {have} sample(s) per case; {which} need >= {need} "
            "per side to reach significance after Holm: such cases cannot be judged. Re-record it with these "
            "settings (gate --save-baseline with a new --baseline path)")
