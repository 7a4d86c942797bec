"""Per-op device times of one executable from a profiler trace's planes (``jax.profiler.ProfileData``
planes, or anything with the same ``name`` / ``lines`` / ``events`` / ``stats`` shape; framework-free).

Two layouts (backends/jax/trace_timer.py describes both):

- device (TPU, GPU): a plane ``/device:<kind>:<n>`` with the lines ``XLA Modules`` (one event per
  execution of a program, named ``<module>(<program id>)`` or carrying an ``hlo_module`` stat) and
  ``XLA Ops`` (one event per HLO op, named by the HLO instruction). The ops of an execution are those
  starting inside its module event. The first device with events of the module is read: on a sharded
  program every device runs the same ops.
- host (CPU): the ``/host:CPU`` plane's thread lines hold one event per op with the stats ``hlo_op``,
  ``hlo_module`` and ``run_id`` (one per execution), on several threads at once: the thunk executor runs
  independent ops concurrently. An execution's device time is its ops' span; the sum of their times can
  exceed it (``concurrency`` says by how much).

An op's time is its self time: its event's duration less the events nested inside it on the same line
(a loop's event holds its body's ops), so nothing is counted twice.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable

from xlabench.units import ns_to_s


class TraceError(Exception):
    """The trace holds nothing of the executable (the message says what it holds)."""


@dataclass
class OpTimes:
    """What a trace says of one executable: per op, its total self time over every execution seen."""

    module: str
    source: str  # where the events came from: 'device plane /device:TPU:0' or 'CPU host threads'
    executions: int
    device_s: list[float]  # each execution's device seconds (its module event, or its ops' span)
    self_ns: dict[str, float] = field(default_factory=dict)  # op name -> self time summed over executions
    calls: dict[str, int] = field(default_factory=dict)  # op name -> events
    stats: dict[str, dict[str, Any]] = field(default_factory=dict)  # op name -> the stats of its first event
    threads: int = 1  # lines the ops ran on

    @property
    def device_s_per_step(self) -> float:
        return sum(self.device_s) / len(self.device_s) if self.device_s else 0.0

    @property
    def op_s_per_step(self) -> float:
        """The ops' self times summed, per execution."""
        return ns_to_s(sum(self.self_ns.values())) / max(self.executions, 1)

    @property
    def concurrency(self) -> float:
        """Op time over device time: 1 when ops run one after another (a TPU core), above 1 when a CPU
        runs several at once."""
        d = self.device_s_per_step
        return self.op_s_per_step / d if d else 0.0


@dataclass(frozen=True)
class _Event:
    name: str
    start: float
    dur: float
    stats: dict[str, Any]


def _events(line: Any) -> list[_Event]:
    return [_Event(e.name, float(e.start_ns), float(e.duration_ns), dict(e.stats)) for e in line.events]


def _self_times(events: list[_Event]) -> dict[int, float]:
    """Index -> self time of each event of one line (its duration less its direct children's)."""
    order = sorted(range(len(events)), key=lambda i: (events[i].start, -events[i].dur))
    self_t = {i: events[i].dur for i in order}
    stack: list[int] = []
    for i in order:
        e = events[i]
        while stack and events[stack[-1]].start + events[stack[-1]].dur <= e.start:
            stack.pop()
        if stack:
            parent = stack[-1]
            self_t[parent] -= min(e.dur, events[parent].start + events[parent].dur - e.start)
        stack.append(i)
    return {i: max(t, 0.0) for i, t in self_t.items()}


def instruction_name(text: Any) -> str:
    """An event's HLO instruction name: ``fusion.12`` of ``fusion.12``, ``%fusion.12`` or of the long form
    ``%fusion.12 = bf16[8,128]{1,0} fusion(...)``."""
    text = str(text).strip().lstrip("%")
    return text.split(" = ", 1)[0].split()[0] if text else text


def _is_module(e: _Event, module: str) -> bool:
    return e.name == module or e.name.startswith(module + "(") or e.stats.get("hlo_module") == module


def _add(out: OpTimes, events: list[_Event], keep: list[bool]) -> None:
    """Add the kept events' self times (nesting among the kept ones only: the executor's own events and
    other programs' ops take nothing from them)."""
    events = [e for e, k in zip(events, keep) if k]
    selfs = _self_times(events)
    for i, e in enumerate(events):
        name = instruction_name(e.stats.get("hlo_op") or e.name)
        out.self_ns[name] = out.self_ns.get(name, 0.0) + selfs[i]
        out.calls[name] = out.calls.get(name, 0) + 1
        out.stats.setdefault(name, e.stats)


def _from_device(plane: Any, module: str) -> OpTimes | None:
    lines = {line.name: _events(line) for line in plane.lines}
    windows = sorted((e.start, e.start + e.dur) for e in lines.get("XLA Modules", []) if _is_module(e, module))
    ops = lines.get("XLA Ops", [])
    if windows:
        keep = [any(lo <= e.start < hi for lo, hi in windows) for e in ops]
        device_s = [ns_to_s(hi - lo) for lo, hi in windows]
    else:  # no module line: the ops that name the module, one execution per run_id
        keep = [e.stats.get("hlo_module") == module for e in ops]
        runs = _spans([e for e, k in zip(ops, keep) if k])
        device_s = [ns_to_s(hi - lo) for lo, hi in runs]
    if not any(keep):
        return None
    out = OpTimes(module, f"device plane {plane.name}", len(device_s), device_s)
    _add(out, ops, keep)
    return out


def _spans(events: list[_Event]) -> list[tuple[float, float]]:
    spans: dict[Any, list[float]] = defaultdict(lambda: [float("inf"), float("-inf")])
    for e in events:
        s = spans[e.stats.get("run_id")]
        s[0], s[1] = min(s[0], e.start), max(s[1], e.start + e.dur)
    return sorted((lo, hi) for lo, hi in spans.values())


def _device_number(name: str) -> tuple[int, str]:
    tail = name.rsplit(":", 1)[-1]
    return (int(tail), name) if tail.isdigit() else (1 << 30, name)


def op_times(planes: Iterable[Any], module: str) -> OpTimes:
    """The per-op self times of ``module``'s executions in a trace (see the module docstring); TraceError
    when the trace has no op of it."""
    planes = list(planes)
    for plane in sorted((p for p in planes if p.name.startswith("/device:")), key=lambda p: _device_number(p.name)):
        found = _from_device(plane, module)
        if found is not None:
            return found
    per_line = []
    for plane in planes:
        if plane.name.startswith("/device:"):
            continue
        for line in plane.lines:
            events = _events(line)
            mine = [e.stats.get("hlo_module") == module and "run_id" in e.stats for e in events]
            if any(mine):
                per_line.append((events, mine))
    if not per_line:
        raise TraceError(f"the trace has no op of the executable {module} (planes: "
                         f"{', '.join(sorted(p.name for p in planes)) or 'none'})")
    ordinals = {e.stats.get("device_ordinal") for events, mine in per_line for e, m in zip(events, mine) if m}
    first = min(ordinals, key=lambda o: (o is None, o if o is not None else 0))
    kept = [(events, [m and e.stats.get("device_ordinal") == first for e, m in zip(events, mine)])
            for events, mine in per_line]
    kept = [(events, keep) for events, keep in kept if any(keep)]
    spans = _spans([e for events, keep in kept for e, k in zip(events, keep) if k])
    out = OpTimes(module, "CPU host threads" + (f" (device {first})" if len(ordinals) > 1 else ""), len(spans),
                  [ns_to_s(hi - lo) for lo, hi in spans], threads=len(kept))
    for events, keep in kept:
        _add(out, events, keep)
    return out


MATCH = 0.9  # the share of an execution's op names one program's HLO must hold to be that program


def program_times(planes: Iterable[Any], programs: dict[str, set[str]]) -> OpTimes:
    """The per-op self times of a step run as several programs (a torch.compile'd step: forward, backward,
    the optimizer's update), each ``programs[label]`` the instruction names of one program's HLO text. Every
    execution on the first device plane is matched to a program whose HLO names at least MATCH of its ops, the
    one its ops fill most (program names are not unique: TorchTPU gives every compiled graph the same one);
    its ops are keyed
    ``label/op``. A step is one execution of the program that ran least often; the device seconds of a step
    are all matched executions' over the steps. TraceError when no execution matches."""
    plane = min((p for p in planes if p.name.startswith("/device:")), key=lambda p: _device_number(p.name),
                default=None)
    lines = {line.name: _events(line) for line in plane.lines} if plane is not None else {}
    ops = lines.get("XLA Ops", [])
    runs: dict[str, list[tuple[float, float]]] = {label: [] for label in programs}
    keep: dict[str, list[bool]] = {label: [False] * len(ops) for label in programs}
    for m in lines.get("XLA Modules", []):
        inside = [i for i, e in enumerate(ops) if m.start <= e.start < m.start + m.dur]
        names = {instruction_name(ops[i].stats.get("hlo_op") or ops[i].name) for i in inside}
        # of the programs that hold its ops, the one they fill most (two programs may share op names)
        fits = [(len(names & held) / len(names | held), lb) for lb, held in programs.items()
                if names and len(names & held) >= MATCH * len(names)]
        if fits:
            label = max(fits)[1]
            runs[label].append((m.start, m.start + m.dur))
            for i in inside:
                keep[label][i] = True
    ran = {label: spans for label, spans in runs.items() if spans}
    if not ran:
        raise TraceError(f"no program execution in the trace matches the HLO texts ({', '.join(sorted(programs))}; "
                         f"planes: {', '.join(sorted(p.name for p in planes)) or 'none'})")
    steps = min(len(spans) for spans in ran.values())
    total = sum(hi - lo for spans in ran.values() for lo, hi in spans)
    out = OpTimes("+".join(sorted(ran)), f"device plane {plane.name}, {len(ran)} programs", steps,
                  [ns_to_s(total / steps)] * steps)
    for label in ran:
        part = OpTimes(label, "", 0, [])
        _add(part, ops, keep[label])
        for name, ns in part.self_ns.items():
            out.self_ns[f"{label}/{name}"] = ns
            out.calls[f"{label}/{name}"] = part.calls[name]
            out.stats[f"{label}/{name}"] = part.stats[name]
    return out
