"""A study fitted to the slice it runs on: the device count, the model that fits, one program per mesh.

A suite describes a study; the run (or ``xlabench compile --target``) says which slice it has, and the cases
are planned for it (docs/train.md, "On the slice you have"):

- ``devices`` defaults to every device of the slice (a suite or profile may still pin it);
- a train ladder in ``per_device_batch`` (MaxText's per_device_batch_size) becomes global batches of
  per-device batch x devices, so the same suite scales from one chip to a pod;
- ``model: [a, b, c]``: the largest listed model whose step fits every impl at the ladder's smallest batch
  (XLA's memory analysis of the compiled step, as ``global_batch: auto`` uses), said in each row's notes;
- sharding modes that are one program on this slice run once (on one device every mode is one program);
- a train ladder with no ``scan_layers`` runs scanned (the step compiles one layer: seconds), and its best
  point runs again unrolled (the faster step, compiled once; see ``unroll_best``).

Framework-free: the fit itself is the worker's (``ModelFitter`` is the run's call into it).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, Callable, Optional, Sequence

from xlabench.protocol.status import OK
from xlabench.units import GIB, to_ms
from xlabench.workloads import model_presets as presets

# The keys whose values make a train ladder (a batch sweep)
LADDER_KEYS = ("global_batch", "per_device_batch")


@dataclass(frozen=True)
class Probe:
    """One candidate model's compiled step at the fit batch: per-device bytes (None: unknown) and the
    device's limit (None: the device reports none)."""

    model: str
    impl: str
    bytes: Optional[int]
    limit: Optional[int]
    error: str = ""

    @property
    def fits(self) -> bool:
        return self.limit is None or (self.bytes is not None and self.bytes <= self.limit)


# (candidate case params, impls) -> a Probe per model and impl, largest model first, stopping at the first
# model that fits every impl (the worker's op "fit")
ModelFitter = Callable[[list[dict[str, Any]], list[str]], list[Probe]]


@dataclass(frozen=True)
class Slice:
    """The devices a study is planned for: the run's first worker found them, or a compile target names
    them. ``fit``: how the run asks its worker which model fits (None: a plan without a worker, which
    takes the first listed model and says so)."""

    platform: str
    devices: int
    fit: Optional[ModelFitter] = None


def _gib(n: Optional[int]) -> str:
    return "?" if n is None else f"{n / GIB:.2f}"


def by_size(models: Sequence[str]) -> list[str]:
    """Candidate models, largest (parameter count) first."""
    return sorted(models, key=lambda m: -presets.param_count(presets.preset(m)))


def choose_model(models: Sequence[str], probes: Sequence[Probe], fit_batch: str) -> tuple[str, str]:
    """(the largest model every impl's probe fits, the note saying why); the smallest listed model when
    none fits (its rows then say what they need: the worker skips a step that does not fit)."""
    order = by_size(models)
    refused: list[str] = []
    for m in order:
        mine = [p for p in probes if p.model == m]
        if not mine:
            continue
        worst = max(mine, key=lambda p: p.bytes or 0)
        if worst.limit is None:
            return order[-1], (f"model {order[-1]}: the smallest of {', '.join(order)}; this device reports no "
                               "memory limit to fit the others against")
        if all(p.fits for p in mine):
            why = f" ({'; '.join(refused)})" if refused else ""
            return m, (f"model {m}: the largest of {', '.join(order)} whose step fits {fit_batch} "
                       f"({_gib(worst.bytes)} of {_gib(worst.limit)} GiB per device, {worst.impl}){why}")
        bad = next(p for p in mine if not p.fits)
        refused.append(f"{m} needs {_gib(bad.bytes)} GiB with {bad.impl}"
                       + (f": {bad.error}" if bad.error else ""))
    return order[-1], (f"model {order[-1]}: none of {', '.join(order)} fits {fit_batch} "
                       f"({'; '.join(refused)}): the smallest is planned")


def fit_batch(params: dict[str, Any], matrix: dict[str, list[Any]]) -> tuple[dict[str, Any], str]:
    """The ladder's smallest point as case params (per_device_batch or global_batch), and its text."""
    for key in LADDER_KEYS:
        values = [v for k, vals in matrix.items() if k == key for v in vals]
        values += [params[key]] if key in params and params[key] is not None else []
        ints = [v for v in values if isinstance(v, int)]
        if ints:
            word = "per-device batch" if key == "per_device_batch" else "global batch"
            return {key: min(ints)}, f"the ladder's smallest {word}, {min(ints)}"
    return {}, "its batch"


def is_ladder(matrix: dict[str, list[Any]]) -> bool:
    return any(k in LADDER_KEYS and len(v) > 1 for k, v in matrix.items())


def program_key(params: dict[str, Any], mode_axes: dict[str, tuple[str, ...]]) -> Any:
    """A train case's program, whatever its sharding mode is called: on a mesh of one device every mode is
    the same program; elsewhere a mode counts by the mesh axes it uses that have more than one device
    (2d with tensor=1 is fsdp). torch_xla's and JAX's ``auto`` stay apart from the others."""
    mesh = params.get("mesh") or ""
    sizes = dict(part.split("=") for part in mesh.split(",") if "=" in part)
    wide = frozenset(a for a, n in sizes.items() if int(n) > 1)
    mode = params.get("sharding")
    if not wide:
        used: Any = "one device"
    elif mode == "auto" or mode not in mode_axes:
        used = mode
    else:
        used = frozenset(mode_axes[mode]) & wide
    rest = tuple(sorted((k, str(v)) for k, v in params.items() if k != "sharding"))
    return used, rest


def same_program_note(kept: str, dropped: Sequence[str], devices: int, mesh: str) -> str:
    names = ", ".join([kept, *dropped])
    where = f"{devices} device" + ("" if devices == 1 else "s")
    return f"sharding {names} are one program on {where} (mesh {mesh}): run once, as {kept}"


def devices_pinned(params: dict[str, Any], matrix: dict[str, list[Any]]) -> bool:
    return "devices" in params or any("devices" in k.split(",") for k in matrix)


def unrolled_best(cases: Sequence[Any], rows: Sequence[dict[str, Any]], case_id: Callable[..., str]) -> Optional[Any]:
    """The scanned ladder's best point (highest ``mfu`` among its ok rows) as an unrolled case: the unrolled
    step runs faster (one program per layer, fused across layers) but compiles for a minute where the scanned
    one takes seconds, so a ladder compiles scanned and its best point once unrolled. None: no ladder point
    ran ok. ``case_id(workload, backend, impl, params)``: results.case_id."""
    ladder = {c.case_id: c for c in cases if getattr(c, "unroll_best", False)}
    ok = [r for r in rows if r.get("case_id") in ladder and r.get("status") == OK and _number(r.get("mfu"))]
    if not ok:
        return None
    best = max(ok, key=lambda r: float(r["mfu"]))
    c = ladder[best["case_id"]]
    params = {**c.params, "scan_layers": False}
    note = (f"the ladder's best point (scanned: {float(best['mfu']):.1%} MFU, {to_ms(float(best['median_s'])):.1f} ms) "
            "again unrolled: the faster step, compiled once")
    return dataclasses.replace(c, params=params, case_id=case_id(c.workload, c.backend, c.impl, params),
                               unroll_best=False, note="; ".join(filter(None, [c.note, note])), index=len(cases))


def _number(v: Any) -> bool:
    try:
        return v is not None and float(v) == float(v)
    except (TypeError, ValueError):
        return False


__all__ = ["LADDER_KEYS", "ModelFitter", "Probe", "Slice", "by_size", "choose_model", "devices_pinned",
           "fit_batch", "is_ladder", "program_key", "same_program_note", "unrolled_best"]
