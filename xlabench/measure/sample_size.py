"""Whether a suite times the samples a case needs before the gate's test can call it significant, and the
warnings that say so: no scipy, so `validate` and `run` can warn about a suite that times too few without
loading the gate's statistics. The counting itself (min_samples_per_side) is xlabench.stats.power's.
"""

from __future__ import annotations

from typing import Optional, Sequence

from xlabench.stats.power import min_samples_per_side

DEFAULT_ALPHA = 0.05  # the gate's family-wise significance level (GateConfig.alpha's default)


def sample_shortfall(samples_per_case: Sequence[int], alpha: float = DEFAULT_ALPHA) -> Optional[tuple[int, int]]:
    """(fewest samples a case gets, samples needed per side) when a suite's cases cannot all reach
    significance after Holm over its case count; None when they can (or there are no cases)."""
    if not samples_per_case:
        return None
    need = min_samples_per_side(alpha, len(samples_per_case))
    have = min(samples_per_case)
    return (have, need) if have < need else None


def shortfall_message(where: str, n_cases: int, have: int, need: int, alpha: float = DEFAULT_ALPHA) -> str:
    """The warning `validate`, `run` and `gate` print for sample_shortfall()."""
    return (f"{where}: {have} sample(s) per case (measure.iters x measure.repeats), but `compare`/`gate` need "
            f">= {need} per side for any of its {n_cases} case(s) to reach significance after Holm "
            f"(alpha {alpha:g}); with fewer every case is 'could not judge'. Set measure.iters >= "
            f"{need} (`xlabench gate` raises it for its own runs; see docs/gate.md)")


def samples_note(per_case: Sequence[int], suite_per_case: int, iters: int) -> Optional[str]:
    """What `validate`, `run` (up front and at its end) and its dry run say of cases that time too few samples
    for `compare` to judge them (``per_case``: each case's iters x repeats; ``iters``: the fewest iterations
    a case times), or None. A profile that cuts its suite's measure (``suite_per_case``) is a quick run by
    design (the shipped cpu profiles): it is told so, that two runs of it cannot be compared, and the
    ``--repeats`` that makes them comparable."""
    short = sample_shortfall(per_case)
    if short is None:
        return None
    have, need = short
    if have < suite_per_case:
        repeats = -(-need // max(1, iters))
        return (f"{have} sample(s) per case (a quick profile: its suite's measure times {suite_per_case}); "
                f"`compare` cannot judge two runs of it: it needs >= {need} per side (`--repeats {repeats}` "
                f"times {repeats * iters}; `gate` raises measure.iters for its own runs)")
    return shortfall_note(have, need)


def shortfall_note(have: int, need: int) -> str:
    """The short form: a run's closing note and `validate`'s count of a profile (the long form warns the gate)."""
    return f"{have} sample(s) per case; `compare`/`gate` need >= {need} per side to judge a change (measure.iters)"
