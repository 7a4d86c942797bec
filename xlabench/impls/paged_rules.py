"""The built-in paged-attention kernels' rules as the worker and `run --dry-run` apply them: RULES ((backend,
impl) -> its rule) and SPACES ((backend, impl) -> its block-size search), collected from the kernel modules
(impls/kernels/: each kernel's typed config, skip rule and search space live in its own module), and how a
case's skip is predicted from them. A rule is ``unsupported(params, platform, device_kind)``
(impls.PagedRule); the parent knows no device kind (None): a rule that needs one leaves the case to its
worker.

Left to the worker: the Pallas ragged kernel's own head-tiling check (it imports the kernel)."""

from __future__ import annotations

from typing import Any, Optional

from xlabench.impls import kernels
from xlabench.workloads.paged import PagedParams

RULES = kernels.PAGED_RULES  # (backend, impl) -> its rule
SPACES = kernels.SPACES  # (backend, impl) -> its block-size search (xlabench/tune): the kernels that have one


def predict_skip(backend: str, impl: str, params: dict[str, Any], platform: str) -> Optional[str]:
    """Why a built-in paged impl will skip this case on ``platform``, by its worker's rule (no device kind
    known here); a kernel the CPU interpreter fails on is a skip there too. None for an unknown impl."""
    k = kernels.kernel(backend, impl, paged_family=True)
    if k is None:
        return None
    reason = k.unsupported(PagedParams(**params), platform, None)
    if reason is None and k.interpreter_fails and k.info.interpreted(platform):
        return k.interpreter_fails
    return reason
