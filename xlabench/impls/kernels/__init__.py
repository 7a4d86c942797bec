"""The built-in kernels, one module each: a module's ``KERNELS`` are its Kernel records (impls/kernel.py:
catalogue entry, skip rule, block parameters, typed config, search space). The tables the parent and the
workers read are collected here from the registered modules: CATALOG (impls.CATALOG), ATTENTION_RULES
(attention_rules.RULES), PAGED_RULES and SPACES (paged_rules'), STYLES (the charts'). The workers import
each kernel's code from its record (impls.attention_record, impls.paged_record). A new kernel: one module
in this folder and one ``register`` line below."""

from __future__ import annotations

from types import ModuleType
from typing import Any, Optional

from xlabench.impls.kernel import BACKENDS, FAMILIES, ImplInfo, Kernel, Style
from xlabench.impls.kernels import (cudnn, flash, multi_queries_paged, naive, paged, paged_gpu, pallas_gpu,
                                    ragged_paged, sdpa, splash, xla_sdpa)

KERNELS: list[Kernel] = []  # in registration order
CATALOG: list[ImplInfo] = []  # by backend, then attention before paged, then registration order
ATTENTION_RULES: dict[tuple[str, str], dict[str, Any]] = {}  # (backend, impl) -> the registry record's parts
PAGED_RULES: dict[tuple[str, str], Any] = {}  # (backend, impl) -> its PagedRule
SPACES: dict[tuple[str, str], Any] = {}  # (backend, impl) -> a paged kernel's search space
STYLES: dict[str, Style] = {}  # impl name -> its chart style (the records' ``style``)


def _collect() -> None:
    """Every table above from KERNELS, in place (callers hold the objects)."""
    order = {k.info: i for i, k in enumerate(KERNELS)}
    CATALOG[:] = sorted(order, key=lambda info: (BACKENDS.index(info.backend), FAMILIES.index(info.workloads),
                                                 order[info]))
    for table in (ATTENTION_RULES, PAGED_RULES, SPACES, STYLES):
        table.clear()
    for k in KERNELS:
        if k.style is not None:
            STYLES.setdefault(k.info.name, k.style)
        if k.paged:
            PAGED_RULES[k.key] = k.unsupported
            if k.tune_space is not None:
                SPACES[k.key] = k.tune_space
        else:
            ATTENTION_RULES[k.key] = dict(unsupported=k.unsupported, block_params=k.block_params,
                                          tune_space=k.tune_space)


def register(module: ModuleType) -> None:
    """Add a kernel module's KERNELS to every table; ValueError for a (backend, name, workload) taken."""
    taken = {(k.info.backend, k.info.name, k.info.workloads) for k in KERNELS}
    for k in module.KERNELS:
        if (k.info.backend, k.info.name, k.info.workloads) in taken:
            raise ValueError(f"{module.__name__}: {k.info.backend} kernel {k.info.name!r} is registered already")
        if k.style is not None and STYLES.get(k.info.name, k.style) != k.style:
            raise ValueError(f"{module.__name__}: kernel {k.info.name!r} has another chart style already")
    KERNELS.extend(module.KERNELS)
    _collect()


def unregister(module: ModuleType) -> None:
    """Take a module's kernels out of every table again (a test's fake kernel)."""
    KERNELS[:] = [k for k in KERNELS if k not in module.KERNELS]
    _collect()


def kernel(backend: str, name: str, paged_family: bool) -> Optional[Kernel]:
    """The registered kernel of ``backend`` named ``name`` (a paged one, or an attention one), or None."""
    return next((k for k in KERNELS if k.key == (backend, name) and k.paged == paged_family), None)


register(naive)
register(xla_sdpa)
register(sdpa)
register(flash)
register(splash)
register(pallas_gpu)
register(cudnn)
register(paged)
register(multi_queries_paged)
register(ragged_paged)
register(paged_gpu)
