"""Workloads: what is computed (parameters, shapes, FLOP/byte counts, inputs). Framework-free."""

from __future__ import annotations

from typing import Type

from pydantic import BaseModel

from xlabench.tune.space import TUNED_PARAMS  # noqa: F401 (workloads.TUNED_PARAMS: declared with the tuner)
from xlabench.workloads import attention, paged
from xlabench.workloads.attention import AttentionParams
from xlabench.workloads.paged import PagedParams
from xlabench.workloads.train import TrainParams

PARAMS: dict[str, Type[BaseModel]] = {
    "attention": AttentionParams,
    "paged_attention": PagedParams,
    "train": TrainParams,
}


# What a tuned winner depends on, per workload that tunes: the case without its blocks (the tuning cache's key).
TUNE_KEY_FIELDS = {"attention": attention.tune_key_fields, "paged_attention": paged.tune_key_fields}


def params_model(workload: str) -> Type[BaseModel]:
    try:
        return PARAMS[workload]
    except KeyError:
        raise ValueError(f"unknown workload {workload!r}; expected one of {sorted(PARAMS)}") from None
