"""JAX backend: probe the environment and run cases. Imported only inside a worker process."""

from __future__ import annotations

from xlabench.backends.jax.env import init_distributed_from_env, probe
from xlabench.worker_api import runner_table

init_distributed_from_env()  # first thing in a worker: a multi-process run joins its peers here


runner_for = runner_table(__name__, {"attention": "attention_case:run_attention_case",
                                     "paged_attention": "paged_case:run_paged_case",
                                     "train": "train_case:run_train_case"})


__all__ = ["probe", "runner_for"]
