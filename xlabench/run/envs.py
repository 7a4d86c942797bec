"""Which Python interpreter runs each backend's workers, and what to do when its environment is missing.

JAX runs in the interpreter of the CLI itself. torch_xla and torch_tpu each live in an environment of their
own (ENVIRONMENTS: torch 2.9 for torch_xla, torch >= 2.11 for torch_tpu, neither weighing on the JAX one),
found in this order: ``--python-torch-xla PATH`` (torch_xla), the backend's environment variable
(``XLABENCH_TORCH_XLA_PYTHON``, ``XLABENCH_TORCH_TPU_PYTHON``), its default venv (``.venv-torch-xla``,
``.venv-torch-tpu``: what ``make torch-xla-env`` / ``make torch-tpu-env`` create). Framework-free: the
parent never imports torch or JAX.
"""

from __future__ import annotations

import glob
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Optional

from xlabench.protocol.worker_env import TORCH_XLA_SPMD_VAR
from xlabench.workloads import WORKLOADS

ROOT = Path(__file__).resolve().parents[2]  # the checkout: the folder holding the xlabench package


@dataclass(frozen=True)
class Environment:
    """A backend that lives in an environment of its own (its torch pins conflict with the JAX one's):
    where its python is found and how to make it."""

    backend: str
    env_var: str  # a python given by this environment variable
    default: Path  # else this one (what its make target creates)
    make: str  # the make target that creates it
    howto: str  # what it holds and the other ways to name it
    option: str = ""  # the CLI option that names a python (first)


ENVIRONMENTS = {e.backend: e for e in (
    Environment("torch_xla", "XLABENCH_TORCH_XLA_PYTHON", ROOT / ".venv-torch-xla" / "bin" / "python",
                "make torch-xla-env",
                "a venv at .venv-torch-xla with torch==2.9.0, torch_xla[pallas]==2.9.0 and torchax; ~4 GB "
                "download; or pass --python-torch-xla / set XLABENCH_TORCH_XLA_PYTHON to the python of an "
                "environment that has them", "--python-torch-xla"),
    Environment("torch_tpu", "XLABENCH_TORCH_TPU_PYTHON", ROOT / ".venv-torch-tpu" / "bin" / "python",
                "make torch-tpu-env",
                "on a TPU VM: a venv at .venv-torch-tpu with torch 2.13 (CPU build), torch-tpu==0.2.0 and JAX; "
                "or set XLABENCH_TORCH_TPU_PYTHON to the python of an environment that has them"),
)}
TORCH_XLA_ENV_VAR = ENVIRONMENTS["torch_xla"].env_var
TORCH_XLA_DEFAULT = ENVIRONMENTS["torch_xla"].default
TORCH_XLA_HOWTO = f"create it with `{ENVIRONMENTS['torch_xla'].make}` ({ENVIRONMENTS['torch_xla'].howto})"


@dataclass(frozen=True)
class Interpreters:
    """The resolved interpreter per backend; ``torch_xla_override`` is the --python-torch-xla option."""

    torch_xla_override: Optional[str] = None

    def resolve(self, backend: str) -> tuple[str, str]:
        """(path, where the path came from) of a backend with an environment of its own."""
        e = ENVIRONMENTS[backend]
        if backend == "torch_xla" and self.torch_xla_override:
            return self.torch_xla_override, e.option
        if os.environ.get(e.env_var):
            return os.environ[e.env_var], e.env_var
        return str(e.default), "the default location"

    def torch_xla(self) -> tuple[str, str]:
        """(path, where the path came from)."""
        return self.resolve("torch_xla")

    def python_for(self, backend: str) -> str:
        return self.resolve(backend)[0] if backend in ENVIRONMENTS else sys.executable

    def missing(self, backend: str) -> Optional[str]:
        """Why ``backend``'s workers cannot start (a row-ready reason with the fix), or None."""
        if backend not in ENVIRONMENTS:
            return None
        path, source = self.resolve(backend)
        if os.path.isfile(path) and os.access(path, os.X_OK):
            return None
        e = ENVIRONMENTS[backend]
        return (f"{backend} environment missing ({e.make}): {path} ({source}) is not an executable python; "
                f"create it with `{e.make}` ({e.howto})")


def tpu_chips_present() -> bool:
    """Google TPU chips on the PCI bus (how torch_xla itself decides PJRT_DEVICE=TPU), without importing it."""
    for vendor in glob.glob("/sys/bus/pci/devices/*/vendor"):
        try:
            if Path(vendor).read_text().strip() == "0x1ae0":
                return True
        except OSError:
            continue
    return False


def guess_device_count(platform: str, environ: Optional[dict[str, str]] = None) -> int:
    """The devices a run on ``platform`` would find, read from the host without starting a worker (``list``
    and ``run --dry-run``; a run asks its worker): TPU chips on the PCI bus, the GPUs' device nodes, else 1."""
    if platform == "tpu":
        n = sum(1 for v in glob.glob("/sys/bus/pci/devices/*/vendor") if _read(v) == "0x1ae0")
        return max(n, 1)
    if platform == "gpu":
        return max(len(glob.glob("/dev/nvidia[0-9]*")), 1)
    return 1


def _read(path: str) -> str:
    try:
        return Path(path).read_text().strip()
    except OSError:
        return ""


def accelerator_present() -> bool:
    """A TPU on the PCI bus or a GPU driver's device node: JAX has something besides the CPU to find."""
    return tpu_chips_present() or any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/kfd"))


COMPILE_VARIANT = "compile"  # a JAX worker that compiles for a TPU topology (xlabench compile)
# libtpu's compile-only client, quiet and without its one-process lock (no chip is opened; the
# accelerator type only silences its host-bounds warning: the topology is always named explicitly).
COMPILE_ENV = {"JAX_PLATFORMS": "cpu", "TPU_SKIP_MDS_QUERY": "1", "TPU_WORKER_HOSTNAMES": "localhost",
               "TPU_ACCELERATOR_TYPE": "v4-8", "ALLOW_MULTIPLE_LIBTPU_LOAD": "1"}


def worker_variant(backend: str, workload: str, params: dict[str, Any]) -> str:
    """The process-global mode a case's worker must be in. torch_xla's ``xr.use_spmd()`` (and its
    ``auto=True`` form) cannot be undone in a process: cases of a sharded workload (its record's sharded:
    train) run in SPMD workers, auto-sharded ones in their own; attention and paged cases in plain workers."""
    if backend == "torch_xla" and workload in WORKLOADS and WORKLOADS[workload].sharded:
        return "spmd-auto" if params.get("sharding") == "auto" else "spmd"
    return ""


# A torch_tpu worker's compiled programs (TorchTPU names each torch.compile'd graph tt_jit_export_...) dumped as
# optimized HLO text where a run keeps traces: a case keeps its step's programs beside its trace (xlabench explain)
TORCH_TPU_HLO_DUMP = ("--xla_dump_hlo_as_text", "--xla_dump_hlo_module_re=tt_jit_export.*")


def worker_environ(backend: str, devices: int, env: dict[str, str], variant: str = "",
                   hlo_dump: Optional[str] = None) -> dict[str, str]:
    """Framework-specific variables of a worker: virtual CPU device counts, torch_xla's PJRT device
    and SPMD mode; ``hlo_dump``: where a torch_tpu worker's libtpu dumps its compiled programs' HLO text
    (XLA_FLAGS: libtpu reads it when TorchTPU starts it, and refuses --xla_dump_to in LIBTPU_INIT_ARGS)."""
    env = dict(env)
    env.pop(TORCH_XLA_SPMD_VAR, None)
    if variant:
        env[TORCH_XLA_SPMD_VAR] = variant
    flags = [f for f in env.get("XLA_FLAGS", "").split() if "xla_force_host_platform_device_count" not in f]
    flags.append(f"--xla_force_host_platform_device_count={devices}")  # JAX on CPU; no-op elsewhere
    if backend == "torch_tpu" and hlo_dump:
        flags += [f"--xla_dump_to={hlo_dump}", *TORCH_TPU_HLO_DUMP]
    env["XLA_FLAGS"] = " ".join(flags)
    if backend == "jax" and variant == COMPILE_VARIANT:
        env.update(COMPILE_ENV)
        env.setdefault("TPU_LOG_DIR", "disabled")  # else libtpu leaves log files in /tmp/tpu_logs per worker
    elif backend == "jax" and "JAX_PLATFORMS" not in env and not accelerator_present():
        env["JAX_PLATFORMS"] = "cpu"  # an installed libtpu would otherwise try (and log) a TPU init first
    if backend == "torch_tpu":
        env["JAX_PLATFORMS"] = "cpu"  # JAX only traces kernels there: TorchTPU holds the chip
    if backend == "torch_xla":
        env["CPU_NUM_DEVICES"] = str(devices)  # torch_xla's virtual CPU devices (XLA_FLAGS has no effect)
        if "PJRT_DEVICE" not in env and not tpu_chips_present():
            env["PJRT_DEVICE"] = "CPU"  # a user's PJRT_DEVICE (e.g. TPU) is left alone
    return env


def guess_platform(environ: Optional[dict[str, str]] = None) -> str:
    """The platform a JAX worker would find, read from the host without starting one (``list`` and
    ``run --dry-run`` use it; a run asks its worker): JAX_PLATFORMS' first entry if set, else a TPU on the
    PCI bus, else a GPU driver's device node, else the CPU (worker_environ pins a worker there)."""
    env = os.environ if environ is None else environ
    first = env.get("JAX_PLATFORMS", "").split(",")[0].strip().lower()
    if first:
        return {"cuda": "gpu", "rocm": "gpu"}.get(first, first)
    if tpu_chips_present():
        return "tpu"
    return "gpu" if any(os.path.exists(p) for p in ("/dev/nvidiactl", "/dev/kfd")) else "cpu"
