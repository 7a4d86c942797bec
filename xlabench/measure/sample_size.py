"""How many samples a case needs before the gate's test can call it significant: exact counting, no
scipy, so `validate` and `run` can warn about a suite that times too few without loading the gate's
statistics (gate.stats re-exports these).

The smallest two-sided Mann-Whitney p of n vs n samples is that of completely separated samples,
2 / C(2n, n); Holm over m cases rejects the most significant one when its p <= alpha / m.
"""

from __future__ import annotations

import functools
import math
from typing import Optional, Sequence

DEFAULT_ALPHA = 0.05  # the gate's family-wise significance level (GateConfig.alpha's default)


def separated_p(n: int) -> float:
    """The exact two-sided Mann-Whitney p-value of n vs n completely separated samples."""
    return min(1.0, 2 / math.comb(2 * n, n))


@functools.lru_cache(maxsize=None)
def min_samples_per_side(alpha: float, m: int) -> int:
    """The smallest n for which n vs n samples can make one case significant after Holm over m cases.

    alpha 0.05: 4 per side for 1 case, 5 for 2-6, 6 for 7-23, 7 for 24-85 (the attention suite's 48
    cpu cases), 8 for 86-321, 9 for 322-1215.
    """
    if not 0 < alpha < 1 or m < 1:
        raise ValueError(f"need 0 < alpha < 1 and m >= 1, got alpha={alpha}, m={m}")
    n = 2
    while separated_p(n) > alpha / m:
        n += 1
    return n


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


def shortfall_note(have: int, need: int) -> str:
    """The short form: a run's closing note and `validate`'s count of a profile (the long form warns the gate)."""
    return f"{have} sample(s) per case; `compare`/`gate` need >= {need} per side to judge a change (measure.iters)"
