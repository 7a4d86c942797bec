"""A workload's kernel rules, from its record (workloads.WORKLOADS): which family its kernels are, whether
the parent predicts their skips, whether it tunes. The run's dry-run and `xlabench tune` (predict_skip,
search_space) and `xlabench best` (search_space) ask here, never by a workload's name."""

from __future__ import annotations

from typing import Any, Callable, Optional

from xlabench.impls import attention_rules, kernels, paged_rules
from xlabench.workloads import WORKLOADS
from xlabench.workloads.record import ATTENTION_KERNELS, PAGED_KERNELS

# A kernel family's skip prediction: (backend, impl, params, platform) -> the skip reason, or None.
PREDICT_SKIP: dict[str, Callable[[str, str, dict[str, Any], str], Optional[str]]] = {
    ATTENTION_KERNELS: attention_rules.predict_skip, PAGED_KERNELS: paged_rules.predict_skip}


def predict_skip(workload: str, backend: str, impl: str, params: dict[str, Any], platform: str) -> Optional[str]:
    """The skip a built-in kernel's own rule gives a case of ``workload`` in its worker, or a backend's that
    cannot run the case at all (the workload's case_skip), or None (a workload whose skips its worker
    decides, or an unknown one)."""
    w = WORKLOADS.get(workload)
    if w is None:
        return None
    if w.case_skip is not None and (reason := w.case_skip(backend, params)):
        return reason
    if not w.predicts_skips:
        return None
    return PREDICT_SKIP[w.kernels](backend, impl, params, platform)


def search_space(workload: str, backend: str, impl: str) -> Optional[Callable[[Any], list]]:
    """The block-size search a built-in kernel of ``workload`` declares (params -> tune.Stage list), or None:
    the workload does not tune (its record has no tuned parameters) or the kernel has no search."""
    w = WORKLOADS.get(workload)
    if w is None or not w.tuned:
        return None
    k = kernels.kernel(backend, impl, paged_family=w.kernels == PAGED_KERNELS)
    return k.tune_space if k is not None else None
