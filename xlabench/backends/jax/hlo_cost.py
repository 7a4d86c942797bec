"""XLA's figures of a compiled JAX program, per device per step, with while loops counted by their trip
count: FLOPs, bytes accessed, and the collectives (measure/hlo_text.py).

``compiled.cost_analysis()`` counts a loop body once, so a scanned 24-layer step reports the FLOPs of
about one layer. Here each loop body is cut out of the optimized module as a module of its own, costed by
XLA's HloCostAnalysis (through this host's CPU client: a compile-only TPU has none), and added
``trips - 1`` more times. HloCostAnalysis on CPU does not know a Pallas TPU kernel's cost, so a kernel
inside a loop body adds the ``cost_estimate`` that Mosaic put in its backend config, where it has one.
"""

from __future__ import annotations

import functools
import re
from typing import Any

import jax

from xlabench.explain import categories
from xlabench.measure import hlo_text

_ESTIMATE = re.compile(r'"cost_estimate":\{"flops":"(\d+)"[^}]*"bytes_accessed":"(\d+)"')


def _cost_dict(compiled: Any) -> dict[str, float]:
    ca = compiled.cost_analysis()
    if isinstance(ca, (list, tuple)):  # older jax: one dict per program
        ca = ca[0] if ca else {}
    return dict(ca or {})


@functools.lru_cache(maxsize=1)
def _cpu_client() -> Any:
    return jax.devices("cpu")[0].client


def _as_entry(text: str, name: str) -> str:
    """The module's text with computation ``name`` as its entry (a loop body, to cost it alone)."""
    header, _, body = text.partition("\n")
    # The header's layout, aliasing (donation) and schedule are the old entry's: keep the name and the
    # partition and replica counts only.
    kept = [m.group(0) for m in re.finditer(r"\b(num_partitions|replica_count)=\d+", header)]
    name_m = re.match(r"HloModule\s+([\w.\-]+)", header)
    header = ", ".join([f"HloModule {name_m.group(1) if name_m else 'body'}", *kept])
    body = re.sub(r"^ENTRY\s+", "", body, flags=re.M)
    body = re.sub(r"^(%?" + re.escape(name) + r"\s*\()", r"ENTRY \1", body, count=1, flags=re.M)
    return header + "\n" + body


def _body_cost(text: str, body: str, comps: dict[str, hlo_text.Computation]) -> tuple[float, float]:
    """(flops, bytes accessed) of one run of a loop body."""
    from jax._src.lib import xla_client
    import jaxlib._hlo as hlo

    module = hlo.hlo_module_from_text(_as_entry(text, body))
    cost = xla_client._xla.hlo_module_cost_analysis(_cpu_client(), module)
    flops, nbytes = float(cost.get("flops", 0.0)), float(cost.get("bytes accessed", 0.0))
    runs, _ = hlo_text.executions({k: hlo_text.Computation(c.name, k == body, c.instructions)
                                   for k, c in comps.items()})
    for name, times in runs.items():  # Pallas TPU kernels: Mosaic's own estimate
        for instr in comps[name].instructions:
            if instr.opcode == "custom-call" and "tpu_custom_call" in instr.rest:
                m = _ESTIMATE.search(instr.rest)
                if m:
                    flops += times * float(m.group(1))
                    nbytes += times * float(m.group(2))
    return flops, nbytes


def xla_figures(compiled: Any, devices: int) -> tuple[dict[str, Any], list[str]]:
    """Row fields xla_flops, xla_bytes_accessed, collective_bytes, collective_ops, collectives of a
    compiled program (per device, per step), and notes on what they could not count."""
    notes: list[str] = []
    try:
        cost = _cost_dict(compiled)
    except Exception as e:  # a backend without cost analysis
        return {}, [f"no XLA cost analysis ({type(e).__name__})"]
    flops, nbytes = cost.get("flops"), cost.get("bytes accessed")
    try:
        text = compiled.as_text()
    except Exception as e:
        return {"xla_flops": flops, "xla_bytes_accessed": nbytes}, [f"no HLO text ({type(e).__name__})"]
    comps = hlo_text.parse_module(text)
    _, loops = hlo_text.executions(comps)
    extra_f = extra_b = 0.0
    for loop in loops:
        if loop.trips is None:
            notes.append(f"loop {loop.body}: trip count unknown, counted once")
            continue
        if loop.trips * loop.runs <= 1:
            continue
        try:
            f, b = _body_cost(text, loop.body, comps)
        except Exception as e:
            notes.append(f"loop {loop.body}: not costed alone ({type(e).__name__}), counted once")
            continue
        # cost_analysis already counted the body once per run of its enclosing computation
        extra_f += (loop.trips - 1) * loop.runs * f
        extra_b += (loop.trips - 1) * loop.runs * b
    if extra_f or extra_b:
        notes.append(f"XLA flops/bytes: {len(loops)} while loop(s) counted x their trip count")
    coll = hlo_text.collectives(text, devices)
    try:
        hbm = categories.program_hbm_bytes(text, devices)
    except Exception as e:  # a text the explain reader cannot follow: the roofline keeps XLA's bytes
        hbm = None
        notes.append(f"no HBM byte count ({type(e).__name__})")
    fields = {"xla_flops": None if flops is None else flops + extra_f,
              "xla_bytes_accessed": None if nbytes is None else nbytes + extra_b, "xla_hbm_bytes": hbm,
              "collective_bytes": coll.bytes, "collective_ops": coll.ops, "collectives": coll.to_json()}
    return fields, notes
