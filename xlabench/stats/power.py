"""The smallest p-values samples of a size can reach, and the samples a case needs to be significant:
exact counting, no scipy, so that `validate` and `run` can count the samples a suite needs without loading
the gate's tests (measure/sample_size.py words the warning).
"""

from __future__ import annotations

import functools
import math


def separated_p(n: int) -> float:
    """The exact two-sided Mann-Whitney p-value of n vs n completely separated samples: 2 / C(2n, n)."""
    return min(1.0, 2 / math.comb(2 * n, n))


@functools.lru_cache(maxsize=None)
def min_samples_per_side(alpha: float, m: int) -> int:
    """The smallest n for which n vs n samples can make one case significant after Holm over m cases (Holm
    rejects the most significant of m when its p <= alpha / m).

    alpha 0.05: 4 per side for 1 case, 5 for 2-6, 6 for 7-23, 7 for 24-85 (the attention suite's 48
    cpu cases), 8 for 86-321, 9 for 322-1215.
    """
    if not 0 < alpha < 1 or m < 1:
        raise ValueError(f"need 0 < alpha < 1 and m >= 1, got alpha={alpha}, m={m}")
    n = 2
    while separated_p(n) > alpha / m:
        n += 1
    return n


def smallest_signed_rank_p(m: int) -> float:
    """The smallest two-sided exact Wilcoxon signed-rank p over m nonzero differences: all of one sign."""
    return min(1.0, 2.0 / 2.0 ** m) if m > 0 else 1.0
