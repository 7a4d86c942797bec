"""Workloads: what is computed (parameters, shapes, FLOP/byte counts, inputs). Framework-free."""

from __future__ import annotations

from typing import Type

from pydantic import BaseModel

from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams
from xlabench.workloads.paged import PagedParams
from xlabench.workloads.train import TrainParams

PARAMS: dict[str, Type[BaseModel]] = {
    "attention": AttentionParams,
    "paged_attention": PagedParams,
    "train": TrainParams,
}

# Kernel parameters a suite may sweep to tune a kernel (empty: the kernel's default), per workload:
# `xlabench best` picks the fastest correct values per impl and shape, a suite's `tuned:` applies them.
TUNED_PARAMS: dict[str, tuple[str, ...]] = {
    "attention": BLOCK_PARAMS,
}


def params_model(workload: str) -> Type[BaseModel]:
    try:
        return PARAMS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; expected one of {sorted(PARAMS)}") from None
