"""Multi-process (multi-host) runs: how a launch is recognised and what the workers are told.

Framework-free. The parent passes the settings to its workers through environment variables; the JAX
worker calls ``jax.distributed.initialize`` with them (``backends/jax/env.py``) before anything else.
Every process runs the same cases in the same order; only process 0 writes results.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from typing import Mapping, Optional

from xlabench.protocol.worker_env import (  # noqa: F401 (named here for the parent: run.distributed.ENV_*)
    ENV_AUTO, ENV_COORDINATOR, ENV_INIT_TIMEOUT, ENV_NUM_PROCESSES, ENV_PROCESS_ID)


@dataclass(frozen=True)
class DistributedConfig:
    """Explicit (coordinator, num_processes, process_id) or ``auto`` (JAX's own cluster detection)."""

    coordinator: Optional[str] = None
    num_processes: Optional[int] = None
    process_id: Optional[int] = None
    auto: bool = False
    init_timeout_s: int = 120

    @property
    def is_primary(self) -> bool:
        """Process 0 writes the CSV; with auto detection the worker reports the real index."""
        return not self.process_id

    def worker_env(self) -> dict[str, str]:
        env = {ENV_INIT_TIMEOUT: str(self.init_timeout_s)}
        if self.auto:
            env[ENV_AUTO] = "1"
        else:
            env.update({ENV_COORDINATOR: str(self.coordinator), ENV_NUM_PROCESSES: str(self.num_processes),
                        ENV_PROCESS_ID: str(self.process_id)})
        return env


def from_options(coordinator: Optional[str], num_processes: Optional[int], process_id: Optional[int],
                 init_timeout_s: int = 120, environ: Mapping[str, str] = os.environ) -> Optional[DistributedConfig]:
    """The run's distributed settings: explicit options win; otherwise a cluster launch found in the
    environment (SLURM with several tasks, a multi-host TPU slice) means auto; otherwise None."""
    given = [coordinator is not None, num_processes is not None, process_id is not None]
    if any(given):
        if not all(given):
            raise ValueError("--coordinator, --num-processes and --process-id go together (give all three)")
        if not re.fullmatch(r"[^:\s]+:\d+", coordinator or ""):
            raise ValueError(f"--coordinator {coordinator!r}: expected HOST:PORT")
        if num_processes < 1 or not 0 <= process_id < num_processes:
            raise ValueError(f"--process-id {process_id} must be in 0..{num_processes - 1}")
        return DistributedConfig(coordinator, num_processes, process_id, False, init_timeout_s)
    if detect_cluster(environ):
        return DistributedConfig(auto=True, init_timeout_s=init_timeout_s,
                                 process_id=_env_int(environ, "SLURM_PROCID", "TPU_WORKER_ID"))
    return None


def _env_int(environ: Mapping[str, str], *names: str) -> Optional[int]:
    for n in names:
        if environ.get(n, "").isdigit():
            return int(environ[n])
    return None


def detect_cluster(environ: Mapping[str, str] = os.environ) -> Optional[str]:
    """Name of a multi-process launch visible in the environment, as JAX's cluster detection sees it."""
    if int(environ.get("SLURM_NTASKS", "1") or 1) > 1 and "SLURM_JOB_ID" in environ:
        return "slurm"
    hosts = environ.get("TPU_WORKER_HOSTNAMES", "")
    if "," in hosts:
        return "tpu-multihost"
    if "OMPI_MCA_orte_hnp_uri" in environ:
        return "openmpi"
    return None
