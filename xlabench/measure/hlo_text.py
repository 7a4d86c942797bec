"""What a compiled program's HLO text says about one step, read without a framework: how often each
computation runs (while loops by their trip count) and the bytes each device moves in collectives.

XLA's ``cost_analysis`` counts a while loop's body once, and it has no collective figures. Both come
from the text of the optimized module (``compiled.as_text()`` in JAX), so a scanned step and the same
step unrolled give the same counts.

Bytes per device follow the ring algorithm's conventions (the scaling book, part 3, "Sharded
Matrices"): with a group of ``g`` devices and an array of ``A`` bytes per device,
all-gather ``A_out (g-1)/g``, reduce-scatter ``A_in (g-1)/g``, all-reduce ``2 A (g-1)/g``,
all-to-all ``A (g-1)/g``, collective-permute ``A``. They count what crosses the interconnect, not how
long it takes: links, torus wraparound and overlap are the roofline's business (xlabench/roofline.py).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field

COLLECTIVE_KINDS = ("all-gather", "reduce-scatter", "all-reduce", "all-to-all", "collective-permute")

_DTYPE_BYTES = {"pred": 1, "s4": 0.5, "u4": 0.5, "s8": 1, "u8": 1, "f8e4m3fn": 1, "f8e5m2": 1, "f8e4m3b11fnuz": 1,
                "f8e4m3fnuz": 1, "f8e5m2fnuz": 1, "bf16": 2, "f16": 2, "s16": 2, "u16": 2, "f32": 4, "s32": 4,
                "u32": 4, "f64": 8, "s64": 8, "u64": 8, "c64": 8, "c128": 16}
_ARRAY = re.compile(r"\b(" + "|".join(sorted(_DTYPE_BYTES, key=len, reverse=True)) + r")\[([0-9,]*)\]")
_COMP_HEAD = re.compile(r"^(ENTRY\s+)?%?([\w.\-]+)\s*\(.*\)\s*->\s*.*\{\s*$")
_INSTR = re.compile(r"^\s*(?:ROOT\s+)?%?([\w.\-]+)\s*=\s*(.*?)\s+([\w\-]+)\((.*)$")
_CALLED = re.compile(r"\b(?:condition|body|calls|to_apply|true_computation|false_computation)=%?([\w.\-]+)")
_BRANCHES = re.compile(r"branch_computations=\{([^}]*)\}")
_TRIP = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')


def array_bytes(shape_text: str) -> list[float]:
    """Bytes of each array in an HLO shape ('bf16[2,256]{1,0}' or a tuple of them)."""
    out = []
    for dtype, dims in _ARRAY.findall(shape_text):
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        out.append(n * _DTYPE_BYTES[dtype])
    return out


_LAID_OUT = re.compile(r"\b(" + "|".join(sorted(_DTYPE_BYTES, key=len, reverse=True)) + r")\[([0-9,]*)\](\{[^}]*\})?")
_SPACE = re.compile(r"S\((\d+)\)")


def hbm_array_bytes(shape_text: str) -> float:
    """Bytes of the arrays of an HLO shape that live in the device's main memory: a TPU layout that names a
    memory space other than 0 (``{1,0:T(8,128)S(1)}``: VMEM) holds its array on the chip, off HBM."""
    total = 0.0
    for dtype, dims, layout in _LAID_OUT.findall(shape_text):
        space = _SPACE.search(layout or "")
        if space and space.group(1) != "0":
            continue
        n = 1
        for d in filter(None, dims.split(",")):
            n *= int(d)
        total += n * _DTYPE_BYTES[dtype]
    return total


def array_dims(shape_text: str) -> list[list[int]]:
    """Dimensions of each array in an HLO shape ('bf16[2,256]{1,0}' -> [[2, 256]])."""
    return [[int(d) for d in filter(None, dims.split(","))] for _, dims in _ARRAY.findall(shape_text)]


@dataclass
class Instruction:
    name: str
    shape: str
    opcode: str
    rest: str  # operands and attributes


@dataclass
class Computation:
    name: str
    entry: bool
    instructions: list[Instruction] = field(default_factory=list)


def parse_module(text: str) -> dict[str, Computation]:
    """Computations of an HLO module's text, by name, in order."""
    comps: dict[str, Computation] = {}
    current: Computation | None = None
    for line in text.splitlines():
        if current is None:
            m = _COMP_HEAD.match(line.strip())
            if m:
                current = comps.setdefault(m.group(2), Computation(m.group(2), bool(m.group(1))))
            continue
        if line.strip() == "}":
            current = None
            continue
        m = _INSTR.match(line)
        if m:
            current.instructions.append(Instruction(m.group(1), m.group(2), m.group(3), m.group(4)))
    return comps


def trip_count(instr: Instruction, comps: dict[str, Computation]) -> int | None:
    """A while loop's trip count: XLA's ``known_trip_count`` where the backend keeps it (CPU, GPU), else
    the one integer constant its condition compares the counter against (TPU drops the annotation;
    scan loops count from 0 by 1)."""
    m = _TRIP.search(instr.rest)
    if m:
        return int(m.group(1))
    cond = re.search(r"condition=%?([\w.\-]+)", instr.rest)
    if not cond or cond.group(1) not in comps:
        return None
    consts = [re.match(r"\s*(-?\d+)\)", i.rest) for i in comps[cond.group(1)].instructions
              if i.opcode == "constant" and re.match(r"[su](32|64)\[\]", i.shape)]
    values = {int(m.group(1)) for m in consts if m}
    return values.pop() if len(values) == 1 else None


def called(instr: Instruction) -> list[str]:
    names = _CALLED.findall(instr.rest)
    for group in _BRANCHES.findall(instr.rest):
        names += [n.strip().lstrip("%") for n in group.split(",") if n.strip()]
    return names


@dataclass(frozen=True)
class Loop:
    body: str
    trips: int | None  # None: unknown, counted once
    runs: int  # how often the loop itself runs per step (an inner loop of an outer one: the outer's trips)


def executions(comps: dict[str, Computation]) -> tuple[dict[str, int], list[Loop]]:
    """How many times each computation runs per execution of the entry, and every while loop met."""
    runs: dict[str, int] = {}
    loops: list[Loop] = []

    def visit(name: str, times: int) -> None:
        if name not in comps:
            return
        runs[name] = runs.get(name, 0) + times
        for instr in comps[name].instructions:
            if instr.opcode == "while":
                n = trip_count(instr, comps)
                body = re.search(r"body=%?([\w.\-]+)", instr.rest)
                if body:
                    loops.append(Loop(body.group(1), n, times))
                for sub in called(instr):
                    visit(sub, times * (n or 1))
            else:
                for sub in called(instr):
                    visit(sub, times)

    for comp in comps.values():
        if comp.entry:
            visit(comp.name, 1)
    return runs, loops


def _group_size(rest: str, devices: int) -> int:
    m = re.search(r"replica_groups=\[(\d+),(\d+)\]<=", rest)  # iota form: [groups, size]<=[...]
    if m:
        return int(m.group(2))
    m = re.search(r"replica_groups=\{\{([^}]*)\}", rest)
    if m:
        return len([x for x in m.group(1).split(",") if x.strip()])
    m = re.search(r"source_target_pairs=\{(.*?)\}\}", rest)
    if m:
        return 2
    return devices


def collective_kind(opcode: str) -> str | None:
    """The collective an opcode is ('all-gather' of 'all-gather-start'), or None."""
    base = opcode[:-6] if opcode.endswith("-start") else opcode
    return base if base in COLLECTIVE_KINDS else None


def collective_bytes(instr: Instruction, kind: str, devices: int) -> float:
    """Bytes one device sends over the interconnect for one execution of a collective (ring conventions)."""
    sizes = array_bytes(instr.shape)
    if not sizes:
        return 0.0
    g = max(_group_size(instr.rest, devices), 1)
    share = (g - 1) / g
    if kind == "collective-permute":
        # -start returns (operand, output, contexts...): the output is the second array
        return float(sizes[1] if instr.opcode.endswith("-start") and len(sizes) > 1 else sizes[0])
    if kind == "all-gather":
        out = max(sizes) if instr.opcode.endswith("-start") else sum(sizes)
        return out * share
    if kind == "reduce-scatter":
        operands = array_bytes(instr.rest.split(")", 1)[0])  # the operand shapes, when the text names them
        total_in = sum(operands) if operands else sum(sizes) * g
        return total_in * share
    if kind == "all-reduce":
        return 2.0 * sum(sizes) * share
    return sum(sizes) * share  # all-to-all


@dataclass(frozen=True)
class Collectives:
    """Per device, per step: bytes and counts of each collective kind (trip-count aware)."""

    by_kind: dict[str, dict[str, float]]

    @property
    def bytes(self) -> float:
        return sum(v["bytes"] for v in self.by_kind.values())

    @property
    def ops(self) -> int:
        return int(sum(v["count"] for v in self.by_kind.values()))

    def to_json(self) -> str:
        return json.dumps({k: {"count": int(v["count"]), "bytes": int(v["bytes"])}
                           for k, v in sorted(self.by_kind.items())}, sort_keys=True)


def collectives(text: str, devices: int) -> Collectives:
    """The collectives of an optimized HLO module's text, per device per step."""
    comps = parse_module(text)
    runs, _ = executions(comps)
    by_kind: dict[str, dict[str, float]] = {}
    for name, times in runs.items():
        for instr in comps[name].instructions:
            kind = collective_kind(instr.opcode)
            if kind is None:
                continue
            entry = by_kind.setdefault(kind, {"count": 0, "bytes": 0.0})
            entry["count"] += times
            entry["bytes"] += times * collective_bytes(instr, kind, devices)
    return Collectives(by_kind)
