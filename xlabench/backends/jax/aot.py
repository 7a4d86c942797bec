"""Compile for a device this host does not have: TPU topologies through libtpu's compile-only client,
CUDA by lowering only. Memory and FLOPs come from XLA's analyses of the compiled program.

A worker that compiles runs with ``JAX_PLATFORMS=cpu`` (xlabench/run/envs.py): the topology's devices are
asked for explicitly, so nothing here ever executes on them.
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import json
import os
import re
import time
from pathlib import Path
from typing import Any, Callable, Sequence

import jax
import jax.numpy as jnp

from xlabench.backends.jax import hlo_cost, jax_compile_cache, trace_timer
from xlabench.measure import figure_store
from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.protocol.worker_env import FIGURE_CACHE_VAR
from xlabench.protocol.target import TargetSpec
from xlabench.units import BINARY_SUFFIX, TIB

LIBTPU_HOWTO = ("compile-only TPU devices need libtpu, which this environment lacks: "
                "pip install -e '.[tpu-compile]' (or `make tpu-compile`)")


# Whether the last lower_and_compile's executable (or compile_analyzed's figures) came from a cache (None:
# no compile since take_compile_cached): the worker puts it in the case's row as compile_cached.
_last_cached: bool | None = None


# `xlabench compile --explain`: the folder each compile writes its optimized HLO text to (None: not kept),
# and the text of each compile's fields (by id) for keep_chosen.
_keep_dir: str | None = None
_kept_text: dict[int, str] = {}


def keep_hlo_in(folder: str | None) -> None:
    """Keep the optimized HLO text of the case's compiles in ``folder`` (None: keep none). A kept case
    is compiled afresh: the figure store holds figures, not the program's text."""
    global _keep_dir
    _keep_dir = folder
    _kept_text.clear()


def keep_chosen(fields: dict[str, Any]) -> None:
    """Of several compiles of one case (``global_batch: auto``'s probes), keep the text of the one whose
    ``fields`` make the row."""
    if _keep_dir and id(fields) in _kept_text:
        trace_timer.keep_hlo_text(_kept_text[id(fields)], _keep_dir)


def take_compile_cached() -> bool | None:
    """compile_cached of the case that just ran (and forget it for the next case)."""
    global _last_cached
    cached, _last_cached = _last_cached, None
    return cached


def set_compile_cached(cached: bool | None) -> None:
    """Say which compile the case's row reports, where it is not the last one made (a batch search)."""
    global _last_cached
    _last_cached = cached


class CompileOom(Exception):
    """The program compiles only past the device's HBM; carries libtpu's figures when it gives them."""

    def __init__(self, message: str, used: int | None, capacity: int | None):
        super().__init__(message)
        self.used, self.capacity = used, capacity


def libtpu_found() -> bool:
    """Whether this environment has libtpu where JAX looks for it: a ``TPU_LIBRARY_PATH`` file, else an
    importable ``libtpu`` package. Checked here, before JAX, so that a host without it always gets the
    same clear error, whatever else JAX's plugin discovery may find."""
    path = os.environ.get("TPU_LIBRARY_PATH")
    if path and os.path.isfile(path):
        return True
    try:
        import libtpu  # noqa: F401
    except ImportError:
        return False
    return True


@functools.lru_cache(maxsize=8)
def topology_devices(target: TargetSpec) -> tuple[Any, ...]:
    """The compile-only devices of a TPU topology (one per TensorCore, or per chip with megacore)."""
    from jax.experimental import topologies

    if not libtpu_found():
        raise RuntimeError(f"{LIBTPU_HOWTO}; no libtpu package to import and no TPU_LIBRARY_PATH file")

    kwargs = dict(target.options)
    if target.slices > 1:
        kwargs["num_slices"] = target.slices
    try:
        topo = topologies.get_topology_desc(platform="tpu", topology_name=target.topology, **kwargs)
    except Exception as e:
        text = f"{type(e).__name__}: {e}"
        if any(s in text for s in ("not installed", "libtpu", "Unknown backend")):
            raise RuntimeError(f"{LIBTPU_HOWTO}; JAX said: {text.splitlines()[0][:300]}") from None
        raise
    return tuple(topo.devices)


_SIZE = re.compile(r"([0-9.]+)\s*([KMGTP]?)i?B?\b")


def _bytes(text: str) -> int | None:
    """XLA's human-readable sizes ('15.75G', binary units) as bytes."""
    m = _SIZE.fullmatch(text.strip())
    return int(float(m.group(1)) * BINARY_SUFFIX[m.group(2)]) if m else None


def parse_oom(message: str) -> CompileOom | None:
    """libtpu's out-of-HBM compile error as CompileOom (with used / capacity bytes), or None if the error
    is something else. Two forms seen: 'Used 20.52G of 15.75G hbm' and 'the total memory required for
    ... (1.00T) exceeds available HBM (15.75G)'."""
    if "RESOURCE_EXHAUSTED" not in message and "exceeds available HBM" not in message:
        return None
    first = next((ln.strip() for ln in message.splitlines() if "RESOURCE_EXHAUSTED" in ln or "HBM" in ln),
                 message.strip().splitlines()[0])
    used = capacity = None
    if m := re.search(r"Used ([0-9.]+[KMGTP]?) of ([0-9.]+[KMGTP]?) hbm", message):
        used, capacity = _bytes(m.group(1)), _bytes(m.group(2))
    elif m := re.search(r"\(([0-9.]+[KMGTP]?)\) exceeds available HBM \(([0-9.]+[KMGTP]?)\)", message):
        used, capacity = _bytes(m.group(1)), _bytes(m.group(2))
    return CompileOom(first[:600], used, capacity)


@functools.lru_cache(maxsize=8)
def hbm_capacity(device: Any) -> tuple[int | None, str]:
    """Usable HBM bytes of one compile-only device and where the figure comes from. The devices do not
    report it, so an over-size program is compiled once per topology and libtpu's error names the limit."""
    sharding = jax.sharding.SingleDeviceSharding(device)
    try:
        jax.jit(lambda: jnp.zeros((TIB,), jnp.int8), out_shardings=sharding).trace().lower().compile()
    except Exception as e:
        oom = parse_oom(str(e))
        if oom is not None and oom.capacity:
            return oom.capacity, "libtpu's HBM limit, probed by compiling a 1 TiB buffer"
    return None, "libtpu did not report its HBM limit"


def _lower(fn: Callable, args: Sequence[Any], device: Any, **jit_kwargs: Any) -> tuple[Any, float]:
    """(lowered, seconds): trace and lower under ``device`` as the default device (Mosaic's lowering asks
    the default device which chip it targets)."""
    t0 = time.perf_counter()
    with jax.default_device(device) if device is not None else contextlib.nullcontext():
        lowered = jax.jit(fn, **jit_kwargs).trace(*args).lower()
    return lowered, time.perf_counter() - t0


def _compile(lowered: Any, lower_s: float) -> tuple[Any, float]:
    """(compiled, seconds); CompileOom (with ``lower_s`` / ``compile_s``) when XLA refuses the program
    for want of device memory."""
    t1 = time.perf_counter()
    try:
        compiled = lowered.compile()
    except Exception as e:
        oom = parse_oom(str(e))
        if oom is not None:
            oom.lower_s, oom.compile_s = lower_s, time.perf_counter() - t1  # type: ignore[attr-defined]
            raise oom from None
        raise
    return compiled, time.perf_counter() - t1


def lower_and_compile(fn: Callable, args: Sequence[Any], device: Any = None,
                      **jit_kwargs: Any) -> tuple[Any, float, float]:
    """(compiled, lower seconds, compile seconds) of ``jax.jit(fn, **jit_kwargs)`` for ``args``: the one
    timed AOT compile of every run's case, through JAX's persistent cache when the parent names one.
    Raises CompileOom when XLA refuses the program for want of device memory."""
    global _last_cached
    lowered, lower_s = _lower(fn, args, device, **jit_kwargs)
    cache_on = jax_compile_cache.configure()
    hits = jax_compile_cache.hits()
    compiled, compile_s = _compile(lowered, lower_s)
    _last_cached = (jax_compile_cache.hits() > hits) if cache_on else False
    return compiled, lower_s, compile_s


def _analyzed(compiled: Any, device: Any, devices: int) -> dict[str, Any]:
    """The figures of a compiled program that depend on the program alone (what the figure store keeps)."""
    ma = compiled.memory_analysis()
    total = ma.argument_size_in_bytes + ma.output_size_in_bytes + ma.temp_size_in_bytes - ma.alias_size_in_bytes
    xla, xla_notes = hlo_cost.xla_figures(compiled, devices)
    capacity, source = hbm_capacity(device)
    return {
        "mem_args_bytes": int(ma.argument_size_in_bytes), "mem_out_bytes": int(ma.output_size_in_bytes),
        "mem_temp_bytes": int(ma.temp_size_in_bytes), "mem_alias_bytes": int(ma.alias_size_in_bytes),
        "peak_memory_bytes": int(total), **xla, "hbm_capacity_bytes": capacity,
        "notes": "; ".join([f"peak memory: XLA memory_analysis (arguments+outputs+temps-aliases); HBM: {source}",
                            *xla_notes]),
    }


def compile_analyzed(fn: Callable, args: Sequence[Any], device: Any, target: TargetSpec,
                     analytic_flops_per_device: float | None, devices: int = 1, **jit_kwargs: Any) -> dict[str, Any]:
    """Lower and compile ``fn`` for the compile-only devices its shardings name; the row fields of a
    compiled case. A program compiled before (same fingerprint: figures_key) is not compiled again: its
    figures come from the figure store, and ``compile_s`` is the time the lookup took.

    Raises CompileOom when libtpu refuses the program for want of HBM (the parent makes that an ``oom``
    row, not a failure); a refusal is stored too."""
    global _last_cached
    lowered, lower_s = _lower(fn, args, device, **jit_kwargs)
    store = figure_store.from_folder(os.environ.get(FIGURE_CACHE_VAR))
    key = figures_key(lowered, target) if store else ""
    t1 = time.perf_counter()
    entry = store.get(key) if store and not _keep_dir else None
    _last_cached = entry is not None
    if entry is not None and "oom" in entry:
        oom = CompileOom(*entry["oom"])
        oom.lower_s, oom.compile_s = lower_s, time.perf_counter() - t1  # type: ignore[attr-defined]
        raise oom
    if entry is not None:
        figures, compile_s = entry["fields"], time.perf_counter() - t1
    else:
        try:
            compiled, compile_s = _compile(lowered, lower_s)
        except CompileOom as oom:
            if store:
                store.put(key, {"oom": [str(oom), oom.used, oom.capacity]})
            raise
        figures = _analyzed(compiled, device, devices)
        if store:
            store.put(key, {"fields": figures})
    fields: dict[str, Any] = {"lower_s": lower_s, "compile_s": compile_s, **figures}
    if _keep_dir and entry is None:
        text = compiled.as_text()
        trace_timer.keep_hlo_text(text, _keep_dir)
        _kept_text[id(fields)] = text
    if fields.get("xla_flops") and analytic_flops_per_device:
        fields["flops_ratio"] = fields["xla_flops"] / analytic_flops_per_device
    if fields.get("hbm_capacity_bytes"):
        fields["hbm_fraction"] = fields["peak_memory_bytes"] / fields["hbm_capacity_bytes"]
    return fields


def _versions() -> dict[str, str]:
    """The compiler's versions: jax, jaxlib and libtpu (or the TPU_LIBRARY_PATH file's size and time)."""
    from importlib import metadata

    import jaxlib

    out = {"jax": jax.__version__, "jaxlib": jaxlib.__version__}
    try:
        out["libtpu"] = metadata.version("libtpu")
    except metadata.PackageNotFoundError:
        path = os.environ.get("TPU_LIBRARY_PATH", "")
        if path and os.path.isfile(path):
            st = os.stat(path)
            out["libtpu"] = f"{path}:{st.st_size}:{st.st_mtime_ns}"
    return out


@functools.lru_cache(maxsize=1)
def _figures_code() -> str:
    """A digest of the code that turns a compiled program into figures: a change there invalidates entries."""
    from xlabench.measure import hlo_text

    h = hashlib.sha256()
    for path in (__file__, hlo_cost.__file__, hlo_text.__file__):
        h.update(Path(path).read_bytes())
    return h.hexdigest()


def figures_key(lowered: Any, target: TargetSpec) -> str:
    """What a compile-only program's figures depend on: the lowered StableHLO (shapes, shardings,
    donation and the kernels' Mosaic payloads are in it), the target, the compiler's versions and flags,
    and xlabench's figure code."""
    h = hashlib.sha256()
    for part in (lowered.as_text(), json.dumps(target.to_message(), sort_keys=True),
                 json.dumps(_versions(), sort_keys=True),
                 json.dumps({v: os.environ.get(v, "") for v in ("XLA_FLAGS", "LIBTPU_INIT_ARGS")}, sort_keys=True),
                 _figures_code(), str(figure_store.LAYOUT)):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def oom_fields(oom: CompileOom, device: Any) -> dict[str, Any]:
    """Row fields of an ``oom`` case: what libtpu said it needed against what the device has."""
    capacity = oom.capacity or hbm_capacity(device)[0]
    fields: dict[str, Any] = {"lower_s": getattr(oom, "lower_s", None), "compile_s": getattr(oom, "compile_s", None),
                              "peak_memory_bytes": oom.used, "hbm_capacity_bytes": capacity,
                              "notes": "peak memory: libtpu's out-of-HBM compile error"}
    if oom.used and capacity:
        fields["hbm_fraction"] = oom.used / capacity
    return fields


def lower_for_cuda(fn: Callable, args: Sequence[Any]) -> dict[str, Any]:
    """GPU targets: trace and lower for CUDA on this host (XLA cannot compile for a GPU it does not
    have), which checks shapes and the Pallas Triton lowering; no memory or cost figures."""
    t0 = time.perf_counter()
    try:
        jax.jit(fn).trace(*args).lower(lowering_platforms=("cuda",))
    except Exception as e:
        text = str(e)
        if "cuDNN" in text and "not detected" in text:
            raise CaseSkipped(f"lowering for CUDA on a host without a GPU: {text.splitlines()[0][:300]}") from None
        raise
    return {"lower_s": time.perf_counter() - t0,
            "notes": "lowered for CUDA only (no GPU here to compile for): shapes and kernel lowering checked"}
