"""Each instruction of an optimized HLO module -> the category its device time goes to, with its FLOPs and
bytes from the HLO shapes (the text of ``compiled.as_text()``, parsed by measure/hlo_text.py).

Categories, in the order a rule is tried:

- ``collective``: all-reduce, all-gather, reduce-scatter, all-to-all, collective-permute and their async
  ``-start`` / ``-done`` halves (and an ``async-start`` whose computation holds one);
- ``attention``: a Pallas TPU kernel (a ``tpu_custom_call`` custom call, named by its ``kernel_name``);
  on CPU the kernels run in the Pallas interpreter, as ordinary ops: they land in the other categories;
- ``matmul``: a dot or convolution, or a fusion whose computation holds one;
- ``optimizer``: an op whose metadata ``op_name`` carries the train step's optimizer scope
  (OPTIMIZER_SCOPE, the ``jax.named_scope`` around the AdamW update in backends/jax/train_case.py);
- ``copy``: copies, transposes and layout changes (copy, transpose, reshape, bitcast, slices, concats,
  pads, and fusions made of nothing else);
- ``elementwise``: every other fusion and arithmetic op (elementwise and reductions);
- ``other``: the rest (control flow, sorts, other custom calls, host transfers).
"""

from __future__ import annotations

import re
from typing import Optional
from dataclasses import dataclass

from xlabench.measure import hlo_text
from xlabench.results.schema import EXPLAIN_CATEGORIES as CATEGORIES  # declared once, with their columns

OPTIMIZER_SCOPE = "xlabench_optimizer"
CATEGORY_KEYS = tuple(k for k, _ in CATEGORIES)

COLLECTIVE_OPCODES = {base + suffix for base in hlo_text.COLLECTIVE_KINDS for suffix in ("", "-start", "-done")}
_MOVES = {"copy", "copy-start", "copy-done", "transpose", "reshape", "bitcast", "bitcast-convert", "slice",
          "dynamic-slice", "dynamic-update-slice", "concatenate", "pad", "broadcast", "reverse", "gather", "scatter"}
_PLUMBING = {"parameter", "constant", "get-tuple-element", "tuple", "iota", "partition-id", "replica-id", "after-all"}
# Ops that take no device time of their own (nothing is launched, or their body's ops are counted instead).
NO_TIME = _PLUMBING | {"bitcast", "while", "conditional", "call", "opt-barrier", "optimization-barrier"}
_CONTROL = {"while", "conditional", "call", "async-start", "async-done", "async-update"}
_ARITH = {"add", "subtract", "multiply", "divide", "maximum", "minimum", "exponential", "exponential-minus-one",
          "log", "log-plus-one", "tanh", "logistic", "rsqrt", "sqrt", "cbrt", "power", "negate", "abs", "compare",
          "select", "clamp", "sign", "floor", "ceil", "round-nearest-even", "round-nearest-afz", "and", "or", "xor",
          "not", "remainder", "atan2", "sine", "cosine", "tan", "erf", "is-finite", "convert", "reduce-precision"}
_KERNEL = re.compile(r'kernel_name="([^"]+)"')
_OP_NAME = re.compile(r'op_name="([^"]*)"')
_DIMS = re.compile(r"(lhs_contracting_dims)=\{([0-9,]*)\}")
_LABELS = re.compile(r"dim_labels=(\w+)_(\w+)->")


@dataclass(frozen=True)
class OpInfo:
    """One instruction of the module: its category and its cost per execution from the HLO shapes."""

    name: str
    opcode: str
    category: str
    flops: float  # per execution, from the HLO shapes (0 where none)
    bytes: float  # operands + results, per execution
    kernel: str = ""  # attention: the Pallas kernel's name
    op_name: str = ""  # metadata op_name (the JAX scope path)
    computation: str = ""
    comm_bytes: float = 0.0  # a collective: bytes one device sends per execution (ring conventions)
    hbm_bytes: Optional[float] = None  # bytes it reads from and writes to HBM per execution; None: not known


# Ops whose boundary is not their HBM traffic: an async half (its time is a wait, the transfer runs between
# start and done), control flow (its time is its own, its body's ops are timed apart), a custom call other
# than the Pallas kernels; and, inside a fusion, ops that read or write a part of a buffer (the whole buffer
# is at the boundary).
_NO_HBM_COUNT = {"while", "conditional", "call", "custom-call", "send", "recv", "send-done", "recv-done",
                 "infeed", "outfeed"}
_PARTIAL = {"slice", "dynamic-slice", "dynamic-update-slice", "gather", "scatter"}


def hbm_bytes(instr: hlo_text.Instruction, inner: list[hlo_text.Instruction], shapes: dict[str, str]) -> Optional[float]:
    """The bytes an op moves between HBM and the chip per execution: its operands and results that live in
    HBM (a TPU layout's memory space S(1) is VMEM: not counted), read and written once. None where the op's
    boundary is not its traffic (_NO_HBM_COUNT, async halves, a fusion that slices or updates in place)."""
    op = instr.opcode
    if (op in _NO_HBM_COUNT or op.endswith(("-start", "-done", "-update")) or op.startswith("async")
            or op in COLLECTIVE_OPCODES or op in _PLUMBING or op == "bitcast"):
        return None
    if op in _PARTIAL or any(i.opcode in _PARTIAL for i in inner):
        return None
    operands = _operands(instr.rest)
    names = _NAME.findall(operands)
    read = (sum(hlo_text.hbm_array_bytes(shapes.get(n, "")) for n in names) if names
            else hlo_text.hbm_array_bytes(operands))
    return float(read + hlo_text.hbm_array_bytes(instr.shape))


def _operands(rest: str) -> str:
    """The operand list of an instruction's text (up to its closing parenthesis; layouts hold parens too)."""
    depth = 1
    for i, ch in enumerate(rest):
        depth += ch == "("
        depth -= ch == ")"
        if depth == 0:
            return rest[:i]
    return rest


def _conv_macs_per_output(rest: str, lhs: list[int], rhs: list[int]) -> float:
    """Multiply-adds per output element of a convolution: the kernel's size over its output features,
    each window dimension cut to the input it can reach (XLA on TPU writes a batched matmul as a
    convolution whose window slides over zero padding: only the unpadded input counts)."""
    m = _LABELS.search(rest)
    if not m:
        return _prod(rhs) / (max(rhs) or 1)
    lhs_labels, rhs_labels = m.group(1), m.group(2)
    macs = 1.0
    for i, label in enumerate(rhs_labels[: len(rhs)]):
        if label == "o":
            continue
        size = rhs[i]
        if label.isdigit() and label in lhs_labels and lhs_labels.index(label) < len(lhs):
            size = min(size, lhs[lhs_labels.index(label)])
        macs *= size
    return macs


def _operand_dims(instr: hlo_text.Instruction, shapes: dict[str, str]) -> list[list[int]]:
    """Each operand's dimensions: by its name where the module does not print operand shapes."""
    operands = _operands(instr.rest)
    names = _NAME.findall(operands)
    if names and all(n in shapes for n in names):
        return [(hlo_text.array_dims(shapes[n]) or [[]])[0] for n in names]
    return hlo_text.array_dims(operands)


def _prod(xs: list[int]) -> int:
    n = 1
    for x in xs:
        n *= x
    return n


def op_flops(instr: hlo_text.Instruction, shapes: dict[str, str] | None = None) -> float:
    """FLOPs of one execution of a (non-fusion) instruction from its shapes: 2 x M x N x K for a dot or a
    convolution, one per output element for arithmetic, one per input element for a reduction."""
    out = hlo_text.array_dims(instr.shape)
    if not out:
        return 0.0
    if instr.opcode in ("dot", "convolution"):
        ops = _operand_dims(instr, shapes or {})
        if len(ops) < 2:
            return 0.0
        if instr.opcode == "dot":
            m = _DIMS.search(instr.rest)
            k = _prod([ops[0][int(i)] for i in m.group(2).split(",") if i]) if m else 1
            return 2.0 * _prod(out[0]) * k
        return 2.0 * _prod(out[0]) * _conv_macs_per_output(instr.rest, ops[0], ops[1])
    if instr.opcode in _ARITH:
        return float(_prod(out[0]))
    if instr.opcode in ("reduce", "reduce-window"):
        ops = _operand_dims(instr, shapes or {})
        return float(_prod(ops[0])) if ops else 0.0
    return 0.0


_NAME = re.compile(r"%([\w.\-]+)")


def _io_bytes(instr: hlo_text.Instruction, shapes: dict[str, str]) -> float:
    """Bytes an op reads and writes: its operands (by name: a TPU module does not print their shapes) and
    its results."""
    operands = _operands(instr.rest)
    names = _NAME.findall(operands)
    read = (sum(sum(hlo_text.array_bytes(shapes.get(n, ""))) for n in names) if names
            else sum(hlo_text.array_bytes(operands)))
    return float(read + sum(hlo_text.array_bytes(instr.shape)))


def _fused(instr: hlo_text.Instruction, comps: dict[str, hlo_text.Computation]) -> list[hlo_text.Instruction]:
    """Every instruction of the computations a fusion (or async op) calls, nested ones included."""
    out: list[hlo_text.Instruction] = []
    todo, seen = list(hlo_text.called(instr)), set()
    while todo:
        name = todo.pop()
        if name in seen or name not in comps:
            continue
        seen.add(name)
        for sub in comps[name].instructions:
            out.append(sub)
            todo += hlo_text.called(sub)
    return out


def op_name(instr: hlo_text.Instruction) -> str:
    m = _OP_NAME.search(instr.rest)
    return m.group(1) if m else ""


def _is_pallas(instr: hlo_text.Instruction) -> bool:
    return instr.opcode == "custom-call" and ("tpu_custom_call" in instr.rest or "mosaic" in instr.rest.lower())


def kernel_name(instr: hlo_text.Instruction) -> str:
    """A Pallas kernel's name: its ``kernel_name`` attribute, else the instruction's name without its
    number (XLA names a kernel's call after the kernel: ``flash_attention.12``)."""
    m = _KERNEL.search(instr.rest)
    return m.group(1) if m else re.sub(r"\.\d+$", "", instr.name)


_FRAME_ID = re.compile(r"stack_frame_id=(\d+)")
_TABLE_ROW = re.compile(r'^(\d+) (?:"(.*)"|\{(.*)\})$')


def traced_in(text: str) -> dict[int, frozenset[str]]:
    """Stack frame id -> the names of the functions on its stack (itself and its parents), from the tables an HLO
    module prints before its computations where its ops were traced from Python (a torch.compile'd graph:
    FunctionNames, FileLocations, StackFrames); {} where it has none (JAX prints op_name scopes instead)."""
    tables: dict[str, dict[int, str]] = {}
    current = None
    for line in text.splitlines():
        if line in ("FileNames", "FunctionNames", "FileLocations", "StackFrames"):
            current = tables.setdefault(line, {})
        elif current is not None and (m := _TABLE_ROW.match(line)):
            current[int(m.group(1))] = m.group(2) if m.group(2) is not None else m.group(3)
        elif line.startswith(("HloModule", "%", "ENTRY")):  # the tables end where the module's text begins
            current = None
    fields = {k: {i: dict(f.split("=", 1) for f in v.split()) for i, v in rows.items()}
              for k, rows in tables.items() if k in ("FileLocations", "StackFrames")}
    names, locs, frames = tables.get("FunctionNames", {}), fields.get("FileLocations", {}), fields.get("StackFrames", {})
    out: dict[int, frozenset[str]] = {}
    for fid in frames:
        seen, f, chain = set(), fid, []
        while f in frames and f not in seen:
            seen.add(f)
            chain.append(names.get(int(locs.get(int(frames[f]["file_location_id"]), {}).get("function_name_id", 0)), ""))
            f = int(frames[f].get("parent_frame_id", 0))
        out[fid] = frozenset(chain)
    return out


def _traced_as_optimizer(instrs: list[hlo_text.Instruction], frames: dict[int, frozenset[str]]) -> bool:
    """Whether an op was traced inside a function named OPTIMIZER_SCOPE (the torch step's update)."""
    return any(OPTIMIZER_SCOPE in frames.get(int(m.group(1)), ()) for i in instrs if (m := _FRAME_ID.search(i.rest)))


def classify(instr: hlo_text.Instruction, comps: dict[str, hlo_text.Computation],
             frames: dict[int, frozenset[str]] | None = None) -> tuple[str, str]:
    """(category, kernel name) of one instruction (the rules of the module docstring, in order); ``frames``: the
    module's stack frames (traced_in), where its ops were traced from Python."""
    inner = _fused(instr, comps) if instr.opcode in ("fusion", "async-start", "async-done", "async-update") else []
    opcodes = {instr.opcode} | {i.opcode for i in inner}
    if opcodes & COLLECTIVE_OPCODES:
        return "collective", ""
    pallas = [i for i in [instr, *inner] if _is_pallas(i)]
    if pallas:
        return "attention", kernel_name(pallas[0])
    if opcodes & {"dot", "convolution"}:
        return "matmul", ""
    names = [op_name(instr)] + [op_name(i) for i in inner]
    if any(OPTIMIZER_SCOPE in n for n in names) or (frames and _traced_as_optimizer([instr, *inner], frames)):
        return "optimizer", ""
    if instr.opcode in _MOVES or (instr.opcode == "fusion" and inner
                                   and {i.opcode for i in inner} <= _MOVES | _PLUMBING):
        return "copy", ""
    if instr.opcode == "fusion" or instr.opcode in _ARITH or instr.opcode in ("reduce", "reduce-window", "map",
                                                                               "select-and-scatter"):
        return "elementwise", ""
    return "other", ""


def categorize(text: str, devices: int = 1) -> dict[str, OpInfo]:
    """Every instruction of the module's text, by name (names are unique in a module), with its category
    and cost; an instruction inside a fusion keeps its own opcode's rules (the trace names the fusion).
    ``devices``: the program's devices (a collective's group, where its text names none)."""
    comps = hlo_text.parse_module(text)
    shapes = {i.name: i.shape for c in comps.values() for i in c.instructions}
    frames = traced_in(text)
    out: dict[str, OpInfo] = {}
    for comp in comps.values():
        for instr in comp.instructions:
            category, kernel = classify(instr, comps, frames)
            inner = _fused(instr, comps) if instr.opcode == "fusion" else []
            flops = sum(op_flops(i, shapes) for i in inner) if inner else op_flops(instr, shapes)
            out[instr.name] = OpInfo(instr.name, instr.opcode, category, flops, _io_bytes(instr, shapes), kernel,
                                     op_name(instr) or next((op_name(i) for i in inner if op_name(i)), ""),
                                     comp.name, _comm_bytes(instr, devices), hbm_bytes(instr, inner, shapes))
    return out


def _comm_bytes(instr: hlo_text.Instruction, devices: int) -> float:
    kind = hlo_text.collective_kind(instr.opcode)
    return hlo_text.collective_bytes(instr, kind, devices) if kind else 0.0


def scheduled(text: str, devices: int = 1) -> list[tuple[OpInfo, int]]:
    """The ops that take device time, each with how often it runs per execution of the module: the
    instructions of the entry and of the computations control flow runs (while bodies by their trip
    count, conditional branches, calls), never a fusion's insides."""
    comps = hlo_text.parse_module(text)
    infos = categorize(text, devices)
    runs: dict[str, int] = {}

    def visit(name: str, times: int) -> None:
        if name not in comps:
            return
        runs[name] = runs.get(name, 0) + times
        for instr in comps[name].instructions:
            if instr.opcode not in _CONTROL:
                continue
            n = (hlo_text.trip_count(instr, comps) or 1) if instr.opcode == "while" else 1
            for sub in hlo_text.called(instr):
                visit(sub, times * n)

    for comp in comps.values():
        if comp.entry:
            visit(comp.name, 1)
    return [(infos[i.name], times) for name, times in runs.items() for i in comps[name].instructions
            if i.opcode not in NO_TIME and not i.opcode.endswith("-done")]


def program_hbm_bytes(text: str, devices: int = 1) -> Optional[float]:
    """The bytes one execution of the module moves between HBM and the chip: every timed op's operands and
    results that live in HBM (hbm_bytes), by how often it runs; an async copy its source and destination
    in HBM (a cross-program prefetch into VMEM is left out: the last execution's re-prefetch serves it).
    XLA's bytes_accessed counts VMEM-resident operands too (TPU memory space S(1): the prefetched q, a
    softmax's row max and sum): on v5e naive attention fwd it read 2.56 GB where the chip moved at most
    2.35 GB (819 GB/s x 2.87 ms). None where an op's traffic is not known (a Pallas kernel, a collective,
    a fusion that slices): the caller keeps XLA's count."""
    instrs = {i.name: i for c in hlo_text.parse_module(text).values() for i in c.instructions}
    total = 0.0
    for info, times in scheduled(text, devices):
        if info.hbm_bytes is not None:
            total += info.hbm_bytes * times
        elif info.opcode == "copy-start":
            instr = instrs[info.name]
            total += 0.0 if "cross_program_prefetch" in instr.rest else hlo_text.hbm_array_bytes(instr.shape) * times
        else:
            return None
    return total
