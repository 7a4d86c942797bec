"""Workloads: what is computed (parameters, shapes, FLOP/byte counts, inputs). Framework-free.

WORKLOADS is the one registry of them (workloads/record.py): each module declares its record beside its
params model, and the tables below derive from it."""

from __future__ import annotations

from typing import Any, Callable, Type

from pydantic import BaseModel

from xlabench.workloads import attention, paged, train
from xlabench.workloads.record import Workload

WORKLOADS: dict[str, Workload] = {w.name: w for w in (attention.WORKLOAD, paged.WORKLOAD, train.WORKLOAD)}

PARAMS: dict[str, Type[BaseModel]] = {n: w.params for n, w in WORKLOADS.items()}

# The kernel parameters a suite may set and the tuner searches, per workload that tunes. The results schema
# gives each a case column (the suite's value) and a ``tuned_<name>`` column (what the tuner chose);
# `xlabench best`, a suite's `tuned:` file, the charts and the impl rules derive theirs from it.
TUNED_PARAMS: dict[str, tuple[str, ...]] = {n: w.tuned for n, w in WORKLOADS.items() if w.tuned}

# What a tuned winner depends on, per workload that tunes: the case without its blocks (the tuning cache's key).
TUNE_KEY_FIELDS: dict[str, Callable[[Any], dict[str, Any]]] = {n: w.tune_key for n, w in WORKLOADS.items()
                                                                if w.tune_key is not None}


def family(kernels: str) -> tuple[str, ...]:
    """The workloads whose impls are kernels of family ``kernels`` (record.ATTENTION_KERNELS, PAGED_KERNELS)."""
    return tuple(n for n, w in WORKLOADS.items() if w.kernels == kernels)


def workload(name: str) -> Workload:
    """The record of workload ``name``; ValueError naming the workloads there are."""
    try:
        return WORKLOADS[name]
    except KeyError:
        raise ValueError(f"unknown workload {name!r}; expected one of {sorted(WORKLOADS)}") from None


def params_model(name: str) -> Type[BaseModel]:
    return workload(name).params
