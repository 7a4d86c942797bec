"""Paged-attention decode workload: one attention step over a paged KV cache. Framework-free.

A batch of sequences, each with a context length drawn from a named distribution, has its K/V in
fixed-size pages scattered through one shared cache (pages handed out from a shuffled free list, as a
serving engine's allocator would). Each sequence brings ``q_tokens`` new query tokens (1 = decode),
which are the *last* ``q_tokens`` positions of its context and attend causally.

Conventions (the same for every impl, so rows compare):

* ``context_lens`` includes the new tokens: query t of sequence i (t = 0..q_tokens-1) sees keys
  0 .. L_i - q_tokens + t.
* The page table is ``max_context / page_size`` entries wide for every sequence; entries past a
  sequence's last page are 0 (never read by a correct kernel).
"""

from __future__ import annotations

import functools
import math
import re
from dataclasses import dataclass
from typing import Any, Literal, Mapping, Optional

import numpy as np
from pydantic import BaseModel, ConfigDict, field_validator, model_validator

from xlabench import flops as flop_formulas
from xlabench.workloads import checks
from xlabench.measure.timing import TimingPlan, case_result, max_normalised_error
from xlabench.protocol.worker_messages import CaseResult
from xlabench.tune.space import with_blocks
from xlabench.workloads.record import PAGED_KERNELS, FitChart, SummaryFigure, Workload
from xlabench.workloads.attention import DTYPES, ERR_TOL, default_scale

LENGTHS_SEED = 0  # context lengths are drawn from this seed: a case has the same lengths everywhere
INPUTS_SEED = 1  # page assignment and data
ITEMSIZE = {"bfloat16": 2, "float32": 4}
PAGED_BLOCKS = ("pages_per_compute_block",)  # the paged kernels' tuned block (the workload's tuned parameter)
DEFAULT_PAGES = 1  # pages per compute block where the suite and the tuner set none (the search's default too)
assert set(ITEMSIZE) == set(DTYPES)

_FIXED = re.compile(r"^\s*(\d+)\s*$")
_UNIFORM = re.compile(r"^\s*uniform\s*:\s*(\d+)\s*\.\.\s*(\d+)\s*$")
_LIST = re.compile(r"^\s*\d+(\s*,\s*\d+)+\s*$")
CONTEXT_LENS_FORMS = ("an int (every sequence that long)", "{uniform: [lo, hi]} or 'uniform:lo..hi' "
                      "(inclusive, drawn from a fixed seed)", "a list of ints or '1,16,33' (one per sequence)")


def canonical_context_lens(spec: Any) -> str:
    """The readable string form of a context-length spec: '1024', 'uniform:1..4096' or '1,16,33'."""
    if isinstance(spec, bool):
        raise ValueError(f"context_lens: expected {'; '.join(CONTEXT_LENS_FORMS)}; got {spec!r}")
    if isinstance(spec, int):
        return str(spec)
    if isinstance(spec, dict) and set(spec) == {"uniform"}:
        lo_hi = spec["uniform"]
        if (isinstance(lo_hi, (list, tuple)) and len(lo_hi) == 2
                and all(isinstance(x, int) and not isinstance(x, bool) for x in lo_hi)):
            return f"uniform:{lo_hi[0]}..{lo_hi[1]}"
    if isinstance(spec, (list, tuple)) and spec and all(isinstance(x, int) and not isinstance(x, bool) for x in spec):
        return str(spec[0]) if len(spec) == 1 else ",".join(str(x) for x in spec)
    if isinstance(spec, str):
        if _FIXED.match(spec):
            return str(int(spec))
        m = _UNIFORM.match(spec)
        if m:
            return f"uniform:{int(m.group(1))}..{int(m.group(2))}"
        if _LIST.match(spec):
            return ",".join(str(int(x)) for x in spec.split(","))
    raise ValueError(f"context_lens: expected {'; '.join(CONTEXT_LENS_FORMS)}; got {spec!r}")


def draw_lengths(spec: str, batch: int) -> np.ndarray:
    """int32[batch] context lengths for a canonical spec (deterministic: fixed seed)."""
    m = _UNIFORM.match(spec)
    if m:
        lo, hi = int(m.group(1)), int(m.group(2))
        return np.random.default_rng(LENGTHS_SEED).integers(lo, hi, endpoint=True, size=batch).astype(np.int32)
    values = [int(x) for x in spec.split(",")]
    if len(values) == 1:
        return np.full(batch, values[0], np.int32)
    return np.asarray(values, np.int32)


def _spec_bounds(spec: str) -> tuple[int, int]:
    """(smallest, largest) length the spec can produce."""
    m = _UNIFORM.match(spec)
    if m:
        return int(m.group(1)), int(m.group(2))
    values = [int(x) for x in spec.split(",")]
    return min(values), max(values)


@dataclass(frozen=True)
class PagedConfig:
    """How a backend's paged impl runs one case (shared by every backend, like AttnConfig)."""

    sm_scale: float
    pages_per_compute_block: int
    megacore_mode: Optional[str]
    interpret: bool  # run the Pallas kernel in the CPU interpreter
    platform: str
    device_kind: Optional[str] = None  # compile-only runs: the target's chip, for the kernels' tuned tables
    # The kernel's other block fields (tuned, e.g. ragged paged's queries per block), as sorted (name, size)
    # pairs; a kernel reads them through its typed config (impls.configs.PagedBlocks.of).
    blocks: tuple[tuple[str, int], ...] = ()

    def with_blocks(self, blocks: Mapping[str, int]) -> "PagedConfig":
        """This config at ``blocks`` (pages_per_compute_block to its field, the rest to ``blocks``)."""
        return with_blocks(self, blocks, PAGED_BLOCKS)


class PagedParams(BaseModel):
    """One paged decode case. The backend arranges pages as each kernel wants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int
    context_lens: str
    num_heads: int
    num_kv_heads: Optional[int] = None
    head_dim: int
    page_size: int
    pages_per_compute_block: Optional[int] = None  # None: tuned on TPU/GPU (xlabench/tune), else 1
    max_context: Optional[int] = None  # page-table capacity per sequence (tokens); default: see resolved()
    total_pages: Optional[int] = None  # pages in the cache; default: batch * pages_per_sequence
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    megacore_mode: Optional[Literal["kv_head", "batch"]] = None
    q_tokens: int = 1
    devices: int = 1

    @field_validator("context_lens", mode="before")
    @classmethod
    def _context_lens(cls, v: Any) -> str:
        return canonical_context_lens(v)

    @model_validator(mode="after")
    def _check(self) -> "PagedParams":
        checks.at_least_one(self, ("batch", "num_heads", "head_dim", "page_size", "q_tokens"),
                            ("num_kv_heads", "max_context", "total_pages", "pages_per_compute_block"))
        if self.devices != 1:
            raise ValueError(f"devices must be 1: paged_attention runs on one device (got {self.devices})")
        checks.heads_divide(self.num_heads, self.kv_heads)
        lo, hi = _spec_bounds(self.context_lens)
        if self.context_lens.startswith("uniform:") and lo > hi:
            raise ValueError(f"context_lens {self.context_lens}: lo ({lo}) must be <= hi ({hi})")
        if "," in self.context_lens and len(self.context_lens.split(",")) != self.batch:
            raise ValueError(f"context_lens lists {len(self.context_lens.split(','))} lengths but batch is "
                             f"{self.batch}; give one per sequence")
        if lo < self.q_tokens:
            raise ValueError(f"every context length must be >= q_tokens ({self.q_tokens}): the new tokens are "
                             f"part of the context; context_lens {self.context_lens} allows {lo}")
        if self.max_context is not None:
            if self.max_context % self.page_size:
                raise ValueError(f"page_size ({self.page_size}) must divide max_context ({self.max_context}): "
                                 "the page table holds whole pages")
            if self.pages_per_sequence % self.compute_pages:
                raise ValueError(
                    f"pages_per_compute_block ({self.pages_per_compute_block}) must divide the pages per "
                    f"sequence (max_context / page_size = {self.pages_per_sequence}): kernels walk the page "
                    "table in whole compute blocks")
            if hi > self.max_context:
                raise ValueError(f"context_lens {self.context_lens} reaches {hi} tokens but max_context is "
                                 f"{self.max_context}")
        if self.megacore_mode == "kv_head" and self.kv_heads % 2:
            raise ValueError(f"megacore_mode 'kv_head' needs an even num_kv_heads (got {self.kv_heads})")
        if self.megacore_mode == "batch" and self.batch % 2:
            raise ValueError(f"megacore_mode 'batch' needs an even batch (got {self.batch})")
        needed = self.pages_needed()
        if needed > self.cache_pages:
            raise ValueError(f"the sequences need {needed} pages of {self.page_size} tokens but the cache has "
                             f"total_pages={self.cache_pages}; raise total_pages or shorten context_lens")
        return self

    # ------------------------------------------------------------------------------------ derived shape

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    @property
    def context_max(self) -> int:
        """Page-table capacity in tokens: given, or the longest possible length rounded up to a whole
        compute block (page_size * pages_per_compute_block)."""
        if self.max_context is not None:
            return self.max_context
        block = self.page_size * self.compute_pages
        return math.ceil(_spec_bounds(self.context_lens)[1] / block) * block

    @property
    def compute_pages(self) -> int:
        """Pages per kernel compute block: the case's, else DEFAULT_PAGES (what an untuned run uses)."""
        return DEFAULT_PAGES if self.pages_per_compute_block is None else self.pages_per_compute_block

    @property
    def pages_per_sequence(self) -> int:
        """Width of the page table."""
        return self.context_max // self.page_size

    @property
    def cache_pages(self) -> int:
        return self.total_pages if self.total_pages is not None else self.batch * self.pages_per_sequence

    def lengths(self) -> np.ndarray:
        return draw_lengths(self.context_lens, self.batch)

    def pages_needed(self) -> int:
        return int(np.sum(-(-self.lengths() // self.page_size)))

    def resolved(self) -> "PagedParams":
        """Defaults made explicit (what goes in the CSV and the case id)."""
        return self.model_copy(update={"num_kv_heads": self.kv_heads, "max_context": self.context_max,
                                       "total_pages": self.cache_pages})

    # ---------------------------------------------------------------------------------------- counts

    def flops(self) -> float:
        return flop_formulas.paged_decode_flops(self.lengths(), self.q_tokens, self.num_heads, self.head_dim)

    def bytes(self) -> float:
        return flop_formulas.paged_decode_bytes(
            self.lengths(), self.page_size, self.kv_heads, self.num_heads, self.head_dim,
            ITEMSIZE[self.dtype], self.q_tokens, self.pages_per_sequence)

    def err_tol(self) -> float:
        return ERR_TOL[self.dtype]

    def paged_config(self, interpret: bool, platform: str) -> PagedConfig:
        """How any backend's impl runs this case (the run and the compile-only path share it)."""
        return PagedConfig(sm_scale=default_scale(self.head_dim), pages_per_compute_block=self.compute_pages,
                           megacore_mode=self.megacore_mode, interpret=interpret, platform=platform)


def tune_key_fields(p: PagedParams) -> dict[str, Any]:
    """What a paged winner depends on: the case without its block (and devices)."""
    return p.resolved().model_dump(exclude={*PAGED_BLOCKS, "devices"})


# A decode kernel is bound by memory: its figures are bandwidth; its fit is drawn against the context lengths
# (a spec of them), a panel per batch.
WORKLOAD = Workload("paged_attention", PagedParams, PAGED_KERNELS, tuned=PAGED_BLOCKS, tune_key=tune_key_fields,
                    runner="paged_case:run_paged_case", compiler="compile_case:compile_paged_case",
                    figures=(SummaryFigure("GB/s", "gbytes_per_s", 1, ".4g"), SummaryFigure("MBU %", "mbu", 100, ".2f")),
                    fit=FitChart("context_lens", "context length (tokens)", "HBM per device vs context length",
                                 panels=("target", "batch"), named=("batch",), x_is_spec=True))


def megacore_only_paged(p: PagedParams, platform: str = "", device_kind: str = "") -> Optional[str]:
    """The rule of every impl but the Pallas TPU paged kernel (a PagedRule): megacore_mode is that kernel's."""
    if p.megacore_mode is not None:
        return "megacore_mode applies to the Pallas TPU paged kernel only"
    return None


def make_inputs(p: PagedParams, seed: int = INPUTS_SEED) -> dict[str, np.ndarray]:
    """Inputs in float32/int32 numpy (bit-identical for every framework), from a fixed seed.

    * ``lengths`` int32[B]; ``page_table`` int32[B, pages_per_sequence]: sequence i's pages are the next
      ceil(L_i / page_size) pages of a shuffled free list, so they are scattered through the cache;
    * ``k_pages``, ``v_pages`` float32[Hkv, total_pages, page_size, D]: N(0, 1) in pages that are in use,
      0 in free pages (never read);
    * ``q`` float32[B, q_tokens, Hq, D].
    """
    rng = np.random.default_rng(seed)
    lengths = p.lengths()
    free = rng.permutation(p.cache_pages).astype(np.int32)
    table = np.zeros((p.batch, p.pages_per_sequence), np.int32)
    used = 0
    for i, n in enumerate(-(-lengths // p.page_size)):
        table[i, :n] = free[used:used + n]
        used += n
    shape = input_shapes(p)["k_pages"][0]
    k_pages, v_pages = np.zeros(shape, np.float32), np.zeros(shape, np.float32)
    in_use = np.sort(free[:used])
    for pages in (k_pages, v_pages):
        pages[:, in_use] = rng.standard_normal((p.kv_heads, used, p.page_size, p.head_dim), dtype=np.float32)
    q = rng.standard_normal((p.batch, p.q_tokens, p.num_heads, p.head_dim), dtype=np.float32)
    return {"lengths": lengths, "page_table": table, "k_pages": k_pages, "v_pages": v_pages, "q": q}


def input_shapes(p: PagedParams) -> dict[str, tuple[tuple[int, ...], str]]:
    """(shape, dtype) of each input of make_inputs, in the kernels' argument order (q, K pages, V pages,
    lengths, page table): compile-only runs need the shapes without the data. Floats take ``p.dtype``."""
    pages = (p.kv_heads, p.cache_pages, p.page_size, p.head_dim)
    return {"q": ((p.batch, p.q_tokens, p.num_heads, p.head_dim), p.dtype), "k_pages": (pages, p.dtype),
            "v_pages": (pages, p.dtype), "lengths": ((p.batch,), "int32"),
            "page_table": ((p.batch, p.pages_per_sequence), "int32")}


def round_to_bfloat16(x: np.ndarray) -> np.ndarray:
    """float32 values rounded to the nearest bfloat16 (ties to even), kept as float32."""
    u = np.ascontiguousarray(x, np.float32).view(np.uint32)
    rounded = (u + np.uint32(0x7FFF) + ((u >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000)
    return rounded.view(np.float32)


def reference(inputs: dict[str, np.ndarray], page_size: int, kv_round: Optional[str] = None) -> np.ndarray:
    """Attention output [B, q_tokens, Hq, D] in float64 on the host, cast to float32.

    ``kv_round='bfloat16'`` first rounds K/V to bfloat16, for kernels that do so internally (the Pallas
    TPU paged kernel casts its K/V pages to bfloat16 whatever their dtype).
    """
    q, k_pages, v_pages = inputs["q"], inputs["k_pages"], inputs["v_pages"]
    if kv_round not in (None, "bfloat16"):
        raise ValueError(f"kv_round: expected None or 'bfloat16', got {kv_round!r}")
    rounded = round_to_bfloat16 if kv_round else np.asarray  # per sequence: never a copy of the whole cache
    b, nq, hq, d = q.shape
    hkv = k_pages.shape[0]
    out = np.empty(q.shape, np.float32)
    scale = 1.0 / math.sqrt(d)
    for i in range(b):
        n = int(inputs["lengths"][i])
        pages = inputs["page_table"][i, : -(-n // page_size)]
        k = rounded(k_pages[:, pages].reshape(hkv, -1, d)[:, :n]).astype(np.float64)  # [Hkv, L, D]
        v = rounded(v_pages[:, pages].reshape(hkv, -1, d)[:, :n]).astype(np.float64)
        g = hq // hkv
        qi = q[i].astype(np.float64).reshape(nq, hkv, g, d).transpose(1, 0, 2, 3).reshape(hkv, nq * g, d)
        logits = (qi @ k.transpose(0, 2, 1)) * scale  # [Hkv, nq*g, L]: batched BLAS matmul
        visible = np.arange(n)[None, :] <= (n - nq + np.arange(nq))[:, None]  # [nq, L]
        logits = np.where(np.repeat(visible, g, axis=0)[None], logits, -np.inf)
        logits -= logits.max(axis=-1, keepdims=True)
        probs = np.exp(logits)
        probs /= probs.sum(axis=-1, keepdims=True)
        o = (probs @ v).reshape(hkv, nq, g, d)
        out[i] = o.transpose(1, 0, 2, 3).reshape(nq, hq, d)
    return out


# A suite runs every impl (and backend) of a case back to back: keep the last case's host inputs and
# references (at TPU scale they take seconds to draw and compute), keyed by what shapes the data.
def _data_key(p: PagedParams) -> PagedParams:
    """The case without the knobs that do not change the data (dtype: inputs are drawn in float32)."""
    return p.model_copy(update={"pages_per_compute_block": 1, "megacore_mode": None, "dtype": "float32",
                                "max_context": p.context_max})


@functools.lru_cache(maxsize=1)
def _inputs_of(key: PagedParams) -> dict[str, np.ndarray]:
    return make_inputs(key)


@functools.lru_cache(maxsize=2)
def _reference_of(key: PagedParams, kv_round: Optional[str]) -> np.ndarray:
    return reference(_inputs_of(key), key.page_size, kv_round=kv_round)


def cached_inputs(p: PagedParams) -> dict[str, np.ndarray]:
    """``make_inputs`` of the case's data (shared by cases that differ only in kernel knobs or dtype)."""
    return _inputs_of(_data_key(p))


def cached_reference(p: PagedParams, kv_round: Optional[str] = None) -> np.ndarray:
    """``reference`` of ``cached_inputs(p)``."""
    return _reference_of(_data_key(p), kv_round)


def paged_result(p: PagedParams, samples: list[float], plan: TimingPlan,
                 lower_s: Optional[float], compile_s: float, mem: Optional[int], out: np.ndarray,
                 kv_round: Optional[str], notes: list[str]) -> CaseResult:
    """The end of a paged case, any backend: ``out`` checked against the reference (K/V rounded to
    ``kv_round`` where the kernel casts them, which the notes say), and the counts."""
    err = max_normalised_error([out], [cached_reference(p, kv_round)])
    if kv_round:
        notes = [*notes, f"reference with K/V rounded to {kv_round} (the kernel casts them)"]
    return case_result(samples, plan, lower_s, compile_s, mem, err, p.err_tol(), "; ".join(filter(None, notes)),
                       tokens_per_step=p.batch * p.q_tokens, flops=p.flops(), kernel_flops=p.flops(), bytes=p.bytes())
