"""How differently two training runs moved the weights (shared by the train tests and their worker)."""

from __future__ import annotations

import math

import numpy as np


def update_rel_diff(ua: list[np.ndarray], ub: list[np.ndarray]) -> float:
    """|update_a - update_b| / |update_b| over all parameters (L2), updates = final - initial weights.

    Robust where single elements are not: AdamW's first steps move each weight by about
    lr * sign(grad), so a gradient near zero whose sign is decided by rounding moves by lr either way.
    """
    num = math.sqrt(sum(float(np.sum((a - b) ** 2)) for a, b in zip(ua, ub)))
    return num / math.sqrt(sum(float(np.sum(b ** 2)) for b in ub))


def unstack_layers(layers: dict) -> list[dict]:
    """The inverse of backends/jax/model.stack_layers: one dict per layer (to compare a scanned model's
    parameters with the unrolled one's)."""
    import jax

    n = jax.tree.leaves(layers)[0].shape[0]
    return [jax.tree.map(lambda x, i=i: x[i], layers) for i in range(n)]
