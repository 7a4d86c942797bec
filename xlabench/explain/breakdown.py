"""A step's device time by category: from a trace's per-op times (measured), or from the HLO alone under a
roofline (an estimate, for compile-only rows).

Measured: each op's self time (explain/trace.py) goes to its instruction's category (explain/categories.py);
the categories are sums of the trace's own op times, never a remainder. Their sum is checked against the
trace's device time per step; where it is more than 5% off, ``notes`` say why (gaps between ops, ops the
HLO does not name, a CPU running several ops at once). Idle is apart: the row's wall time per step less
its device time.

Estimated: each scheduled op (loop bodies times their trips) costs max(FLOPs / peak FLOP/s, bytes / HBM
bandwidth), a collective its interconnect bytes / ICI bandwidth; nothing overlaps.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Mapping

from xlabench.explain import categories
from xlabench.explain.trace import OpTimes
from xlabench.units import GIGA, TERA, ns_to_s, to_ms

COVERAGE_TOLERANCE = 0.05  # the categories' sum against the device time: within this, or notes say why
TOP_OPS = 3
ABOVE_ROOF = 1.05  # CPU: a category's rate over its roof beyond this: the output says the measured peak is low
# Which roof a category is held against: FLOP/s for compute, HBM bytes/s for the rest.
COMPUTE = {"matmul", "attention"}
MIN_RATE_SHARE = 0.5  # a byte rate over less of a category's time than this says nothing of it: time only


@dataclass
class TopOp:
    name: str
    seconds: float  # per step
    calls: float  # per step


@dataclass
class Category:
    key: str
    label: str
    seconds: float  # per step
    share: float  # of the step's device time
    flops: float | None  # per step
    bytes: float | None  # per step
    flops_per_s: float | None = None
    bytes_per_s: float | None = None
    roof_frac: float | None = None  # achieved / the category's roof (FLOP/s or bytes/s)
    roof: str = ""  # 'FLOP/s' | 'HBM B/s' | 'ICI B/s'
    top: list[TopOp] = field(default_factory=list)
    rate_share: float = 1.0  # of its time, the share whose bytes are known: the byte rate is over that time only


@dataclass
class Breakdown:
    """One row explained."""

    case_id: str
    estimate: bool  # True: from the HLO under a roofline (compile-only), no trace
    source: str
    step_s: float  # device seconds per step (measured), or the estimate's sum
    categories: list[Category]
    wall_s: float | None = None  # the row's wall seconds per step
    notes: list[str] = field(default_factory=list)

    @property
    def sum_s(self) -> float:
        return sum(c.seconds for c in self.categories)

    @property
    def idle_s(self) -> float | None:
        """Wall time per step less device time per step (None: no wall time, or an estimate)."""
        if self.estimate or self.wall_s is None:
            return None
        return max(self.wall_s - self.step_s, 0.0)

    @property
    def coverage(self) -> float:
        return self.sum_s / self.step_s if self.step_s else 0.0

    def seconds(self) -> dict[str, float]:
        return {c.key: c.seconds for c in self.categories}


@dataclass(frozen=True)
class Roofs:
    """Per-device peaks: FLOP/s, HBM bytes/s, interconnect bytes/s (None: unknown)."""

    flops_per_s: float | None
    bytes_per_s: float | None
    ici_bytes_per_s: float | None = None


def _rates(c: Category, roofs: Roofs) -> None:
    if c.seconds <= 0:
        return
    if c.flops:
        c.flops_per_s = c.flops / c.seconds
    if c.bytes and c.rate_share >= MIN_RATE_SHARE:
        c.bytes_per_s = c.bytes / (c.seconds * c.rate_share)
    if c.key in COMPUTE:
        c.roof, achieved, peak = "FLOP/s", c.flops_per_s, roofs.flops_per_s
    elif c.key == "collective":
        c.roof, achieved, peak = "ICI B/s", c.bytes_per_s, roofs.ici_bytes_per_s
    else:
        c.roof, achieved, peak = "HBM B/s", c.bytes_per_s, roofs.bytes_per_s
    if achieved and peak:
        c.roof_frac = achieved / peak


def _rate_words(c: Category) -> str:
    if c.roof == "FLOP/s":
        return f"{(c.flops_per_s or 0) / TERA:.3g} TFLOP/s"
    return f"{(c.bytes_per_s or 0) / GIGA:.3g} GB/s"


_SERIAL = re.compile(r"\.\d+$")
# Names XLA gives any op of a kind (fusion.12, copy.4): instances of these are listed one by one.
_GENERIC = re.compile(r"^(%?)(fusion|copy|copy-start|copy-done|slice|slice-start|slice-done|bitcast|transpose|"
                      r"reshape|convert|add|multiply|dynamic-slice|dynamic-update-slice|while|custom-call)$")


def _families(ops: dict[str, tuple]) -> dict[str, tuple[float, float]]:
    """name -> (seconds, calls) per step, the instances of one named kernel together: an unrolled step runs
    each layer's copy of a kernel under its own HLO name (splash_mha_dkv_no_residuals.24, .25, ...), which
    are listed as one line, ``<name>.* (N ops)``; ops named only by their kind (fusion.12) stay apart."""
    groups: dict[str, list[tuple[str, float, float]]] = defaultdict(list)
    for name, v in ops.items():
        stem = _SERIAL.sub("", name)
        groups[name if _GENERIC.match(stem) or stem == name else stem].append((name, v[1], v[2]))
    out = {}
    for stem, members in groups.items():
        label = members[0][0] if len(members) == 1 else f"{stem}.* ({len(members)} ops)"
        out[label] = (sum(m[1] for m in members), sum(m[2] for m in members))
    return out


def _assemble(per_op: dict[str, tuple[str, float, float, float, float | None]], step_s: float, roofs: Roofs,
              attention_flops: float | None) -> tuple[list[Category], list[str]]:
    """per_op: name -> (category, seconds, calls, flops, bytes), all per step; bytes None: not known (the
    category's byte rate is then over the time of its ops whose bytes are known, ``rate_share``)."""
    notes: list[str] = []
    out = []
    for key, label in categories.CATEGORIES:
        ops = {n: v for n, v in per_op.items() if v[0] == key}
        seconds = sum(v[1] for v in ops.values())
        flops = sum(v[3] for v in ops.values()) or None
        known = [v for v in ops.values() if v[4] is not None]
        nbytes = sum(v[4] for v in known) or None
        known_s = sum(v[1] for v in known)
        if key == "attention" and ops and attention_flops:
            flops = attention_flops  # a Pallas call has no XLA cost: the analytic count (xlabench/flops.py)
        top = sorted(_families(ops).items(), key=lambda kv: -kv[1][0])[:TOP_OPS]
        c = Category(key, label, seconds, seconds / step_s if step_s else 0.0, flops, nbytes,
                     top=[TopOp(n, v[0], v[1]) for n, v in top], rate_share=known_s / seconds if seconds else 1.0)
        _rates(c, roofs)
        out.append(c)
    if attention_flops and any(v[0] == "attention" for v in per_op.values()):
        notes.append("attention FLOPs: the analytic count (xlabench/flops.py): a Pallas call has no XLA cost")
    return out, notes


def program_info(hlo: str | Mapping[str, str], devices: int = 1) -> dict[str, Any]:
    """Each op's category and counts (categories.categorize) of one HLO text, or of a step's several programs
    (label -> HLO text; trace.program_times keys their ops ``label/op``)."""
    if isinstance(hlo, str):
        return categories.categorize(hlo, devices)
    return {f"{label}/{name}": op for label, text in hlo.items() for name, op in categories.categorize(text, devices).items()}


def measured(case_id: str, times: OpTimes, hlo: str | Mapping[str, str], roofs: Roofs, wall_s: float | None = None,
             attention_flops: float | None = None, interpret: bool = False, devices: int = 1,
             platform: str = "", info: Mapping[str, Any] | None = None) -> Breakdown:
    """The breakdown of a traced row: ``times`` of its executable, ``hlo`` its optimized HLO text (or its step's
    programs' texts by label: trace.program_times; ``info``: program_info of it, where the caller has it);
    ``attention_flops``: the analytic FLOPs of its attention per device per step.

    A byte rate is held against the HBM roof only from bytes that reach HBM: each op's operands and
    results that live there (categories.hbm_bytes), never the trace's ``bytes_accessed`` (XLA's count of
    every access inside a fusion, VMEM included). Where an op's count is not known (async halves, control
    flow, a fusion that slices), its time is shown without a rate. On an accelerator a rate above its roof
    cannot be (exact peaks, exact op times): the rate is withheld and a note gives the figure."""
    per_op, unknown = _per_op(times, program_info(hlo, devices) if info is None else info)
    step_s = times.device_s_per_step
    cats, notes = _assemble(per_op, step_s, roofs, attention_flops)
    b = Breakdown(case_id, False, f"trace ({times.source}, {times.executions} steps)", step_s, cats, wall_s, notes)
    if unknown:
        b.notes.append(f"{to_ms(unknown):.3f} ms per step of ops the HLO text does not name (in 'other')")
    if interpret:
        b.notes.append("interpreted Pallas kernels (CPU): the kernel runs as ordinary ops, spread over the "
                       "other categories; 'attention' stays empty")
    partial = [f"{c.key} over {c.rate_share:.0%} of its time" for c in b.categories
               if c.bytes_per_s is not None and c.rate_share < 1 and c.roof != "FLOP/s"]
    if partial:
        b.notes.append("byte rates only over the ops whose HBM bytes are known (" + ", ".join(partial) + "); "
                       "async halves, control flow and fusions that slice have their time, no rate")
    if platform == "cpu":
        above = [c.key for c in b.categories if c.roof_frac is not None and c.roof_frac > ABOVE_ROOF]
        if above:
            b.notes.append(f"{', '.join(above)}: above their roof: the host's peak is one measurement on a shared "
                           "host, and caches serve working sets that fit in them faster (cache-resident)")
    else:
        for c in b.categories:
            if c.roof_frac is not None and c.roof_frac > 1:
                what = ("the FLOPs counted are not what these ops ran" if c.roof == "FLOP/s" else
                        "the bytes counted are not all traffic to that memory")
                b.notes.append(f"{c.key}: {_rate_words(c)} counted, {c.roof_frac:.0%} of its {c.roof} roof, which "
                               f"no op can reach: {what}; time only, no rate")
                c.flops_per_s = None if c.roof == "FLOP/s" else c.flops_per_s
                c.bytes_per_s = None if c.roof != "FLOP/s" else c.bytes_per_s
                c.roof_frac = None
    _coverage_note(b, times, step_s)
    return b


def _per_op(times: OpTimes, info: Any) -> tuple[dict[str, tuple[str, float, float, float, Any]], float]:
    """Per op of the trace, per step: (category, seconds, calls, FLOPs, bytes: HBM, or sent for a collective;
    None where not known); and the seconds of ops the HLO text does not name."""
    n = max(times.executions, 1)
    per_op: dict[str, tuple[str, float, float, float, Any]] = {}
    unknown = 0.0
    for name, ns in times.self_ns.items():
        op = info.get(name)
        if op is None:
            unknown += ns_to_s(ns) / n
        calls = times.calls.get(name, 0) / n
        st = times.stats.get(name, {})
        flops = float(st.get("flops") or (op.flops if op else 0.0)) * calls
        if op is None:
            nbytes = None
        elif op.category == "collective":
            nbytes = op.comm_bytes * calls
        else:
            nbytes = None if op.hbm_bytes is None else op.hbm_bytes * calls
        per_op[name] = (op.category if op else "other", ns_to_s(ns) / n, calls, flops, nbytes)
    return per_op, unknown


def _coverage_note(b: Breakdown, times: OpTimes, step_s: float) -> None:
    """A note where the op times do not sum to the device time: threads at once (CPU), time between ops,
    or ops that overlap."""
    gap = b.sum_s - step_s
    if step_s and abs(gap) > COVERAGE_TOLERANCE * step_s:
        if times.threads > 1 and gap > 0:
            b.notes.append(f"op times sum to {b.coverage:.0%} of the device time: the CPU ran ops on "
                           f"{times.threads} threads at once (shares are of the device time, so they add up "
                           "to more than 100%)")
        elif gap < 0:
            b.notes.append(f"op times sum to {b.coverage:.0%} of the device time: {to_ms(-gap):.3f} ms per step "
                           "between ops, with no op of the program running"
                           + (" (the CPU executor's scheduling)" if not times.source.startswith("device") else ""))
        else:
            b.notes.append(f"op times sum to {b.coverage:.0%} of the device time (ops overlap)")


def estimated(case_id: str, hlo: str, roofs: Roofs, attention_flops: float | None = None,
              devices: int = 1) -> Breakdown:
    """The roofline estimate of a compile-only row from its optimized HLO text."""
    per_op: dict[str, tuple[str, float, float, float, float]] = {}
    missing = set()
    for op, runs in categories.scheduled(hlo, devices):
        if op.category == "collective":
            seconds = op.comm_bytes / roofs.ici_bytes_per_s if roofs.ici_bytes_per_s else 0.0
            if not roofs.ici_bytes_per_s and op.comm_bytes:
                missing.add("interconnect bandwidth")
        else:
            t_flops = op.flops / roofs.flops_per_s if roofs.flops_per_s else 0.0
            t_bytes = op.bytes / roofs.bytes_per_s if roofs.bytes_per_s else 0.0
            seconds = max(t_flops, t_bytes)
        prev = per_op.get(op.name)
        calls = runs + (prev[2] if prev else 0)
        per_op[op.name] = (op.category, seconds * calls, calls, op.flops * calls,
                           (op.comm_bytes if op.category == "collective" else op.bytes) * calls)
    notes = [f"no {m}: those ops count 0 s" for m in sorted(missing)]
    if attention_flops and roofs.flops_per_s:  # Pallas kernels: at least their analytic FLOPs at the peak
        kernels = {n: v for n, v in per_op.items() if v[0] == "attention"}
        t = sum(v[1] for v in kernels.values())
        floor = attention_flops / roofs.flops_per_s
        if kernels and t < floor:
            for n, v in kernels.items():
                per_op[n] = (v[0], v[1] * floor / t if t else floor / len(kernels), *v[2:])
            notes.append("attention kernels: their analytic FLOPs at the peak (no XLA cost for a Pallas call)")
    step_s = sum(v[1] for v in per_op.values())
    cats, more = _assemble(per_op, step_s, roofs, attention_flops)
    return Breakdown(case_id, True, "estimate: the optimized HLO's ops under a roofline, max(FLOPs / peak, "
                     "bytes / HBM bandwidth) each, collectives at the ICI bandwidth, no overlap",
                     step_s, cats, None, notes + more)


def to_json(b: Breakdown) -> dict[str, Any]:
    return {"case_id": b.case_id, "estimate": b.estimate, "source": b.source, "step_s": b.step_s,
            "sum_s": b.sum_s, "coverage": b.coverage, "wall_s": b.wall_s, "idle_s": b.idle_s, "notes": b.notes,
            "categories": [{**{k: getattr(c, k) for k in ("key", "label", "seconds", "share", "flops", "bytes",
                                                            "flops_per_s", "bytes_per_s", "roof_frac", "roof",
                                                            "rate_share")},
                            "top": [vars(t) for t in c.top]} for c in b.categories]}
