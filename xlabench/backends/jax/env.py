"""What the JAX worker runs on: platform, devices, versions, and (on CPU) the host's measured peak, cached per host."""

from __future__ import annotations

import functools
import os
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from xlabench.measure import host_peak
from xlabench.measure.timing import best_seconds
from xlabench.units import tflops_per_s


def measure_cpu_peak_tflops(n: int = 2048, reps: int = 5) -> float:
    """Best-of-``reps`` float32 matmul throughput of the whole host (all virtual devices share it)."""
    a = jnp.ones((n, n), jnp.float32)
    f = jax.jit(lambda x: x @ x)
    return tflops_per_s(2.0 * n**3, best_seconds(lambda: f(a), jax.block_until_ready, reps))


def stream_pass(nbytes: int) -> Callable[[], None]:
    """One synced pass of ``b = a + 1`` over float32 arrays of ``nbytes`` each, allocated here once: b is
    donated (kept although unused, so jit does not drop it), so its buffer is the output's and every pass
    writes the same memory, as numpy's ``np.add(a, 1.0, out=b)`` does; nothing is allocated per pass."""
    n = nbytes // 4
    add = jax.jit(lambda a, b: a + 1.0, donate_argnums=1, keep_unused=True)
    buf = {"a": jnp.ones((n,), jnp.float32), "b": jnp.zeros((n,), jnp.float32)}

    def one() -> None:
        buf["b"] = add(buf["a"], buf["b"])
        buf["b"].block_until_ready()

    return one


def measure_cpu_bandwidth(sizes: Sequence[int] | None = None) -> host_peak.Bandwidth:
    """The host's streaming bandwidth per array size (host_peak.stream_bandwidth; default sizes: 4, 8
    and 16x the last-level cache)."""
    return host_peak.stream_bandwidth(stream_pass, sizes or host_peak.stream_sizes(host_peak.llc_bytes()))


def measure_cpu() -> tuple[float, host_peak.Bandwidth]:
    """One try of the host's peak: (matmul TFLOP/s, the bandwidth probe's figures)."""
    return measure_cpu_peak_tflops(), measure_cpu_bandwidth()


@functools.lru_cache(maxsize=1)
def cpu_peak() -> host_peak.HostPeak:
    """The host's peak: cached per host (measure/host_peak.py), else the best of several tries, cached."""
    return host_peak.get(measure_cpu, host_peak.jax_framework())


def cpu_peak_env() -> dict[str, Any]:
    """host_peak.env_keys of the host's CPU peak."""
    return host_peak.env_keys(cpu_peak())


def init_distributed_from_env() -> None:
    """jax.distributed.initialize from the parent's settings (xlabench/run/distributed.py), with a timeout so an
    unreachable coordinator or a missing peer fails the worker instead of hanging it."""
    from xlabench.protocol import worker_env as d

    timeout = int(os.environ.get(d.ENV_INIT_TIMEOUT, "120"))
    if os.environ.get(d.ENV_AUTO) == "1":
        jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(initialization_timeout=timeout)
    elif os.environ.get(d.ENV_COORDINATOR):
        jax.config.update("jax_cpu_collectives_implementation", "gloo")  # CPU collectives across processes
        jax.distributed.initialize(coordinator_address=os.environ[d.ENV_COORDINATOR],
                                   num_processes=int(os.environ[d.ENV_NUM_PROCESSES]),
                                   process_id=int(os.environ[d.ENV_PROCESS_ID]),
                                   initialization_timeout=timeout)


def versions() -> str:
    import jaxlib

    return f"jax {jax.__version__} / jaxlib {jaxlib.__version__}"


def probe(measure_peaks: bool = True) -> dict[str, Any]:
    from xlabench.backends.jax.tune_case import versions as tune_versions

    devs = jax.devices()
    platform = devs[0].platform
    env: dict[str, Any] = {
        "backend": "jax",
        "platform": platform,
        "device_kind": devs[0].device_kind,
        "device_count": len(devs),
        "process_count": jax.process_count(),
        "process_index": jax.process_index(),
        "framework_version": versions(),
        "numpy_version": np.__version__,
        "tune_versions": tune_versions(),  # what the tuning cache keys a winner by (`xlabench best` writes there)
    }
    if platform == "cpu" and measure_peaks:
        env.update(cpu_peak_env())
    return env
