"""JAX backend: probe the environment and run cases. Imported only inside a worker process."""

from __future__ import annotations

from typing import Any, Callable

from xlabench.backends.jax.env import init_distributed_from_env, probe

init_distributed_from_env()  # first thing in a worker: a multi-process run joins its peers here


def runner_for(workload: str) -> Callable[..., dict[str, Any]]:
    """The function that runs one case of ``workload`` and returns row fields plus samples."""
    if workload == "attention":
        from xlabench.backends.jax.attention_case import run_attention_case
        return run_attention_case
    if workload == "paged_attention":
        from xlabench.backends.jax.paged_case import run_paged_case
        return run_paged_case
    if workload == "train":
        from xlabench.backends.jax.train_case import run_train_case
        return run_train_case
    raise ValueError(f"the jax backend has no workload {workload!r}")


__all__ = ["probe", "runner_for"]
