"""Attention workload: parameters (validated), inputs from a fixed seed, tolerances. Framework-free."""

from __future__ import annotations

import math

import functools
from dataclasses import dataclass
from typing import Any, Callable, Literal, Mapping, Optional, Sequence

import numpy as np
from pydantic import BaseModel, ConfigDict, model_validator

from xlabench import flops as flop_formulas
from xlabench.workloads import checks
from xlabench.measure.timing import TimingPlan, case_result
from xlabench.protocol.worker_messages import CaseResult
from xlabench.workloads.record import ATTENTION_KERNELS, FitChart, Workload
from xlabench.tune.space import with_blocks
from xlabench.units import GIB

DTYPES = ("bfloat16", "float32")
# An attention kernel's query and key/value block sizes: the case parameters a suite may set and the tuner
# searches (the workload's tuned parameters; the schema gives each a case column and a ``tuned_`` column).
BLOCK_PARAMS = ("block_q", "block_k")

# max |out - ref| allowed (outputs and gradients are normalised by max(1, max|ref|)); inputs are N(0, 1).
# bf16 has an 8-bit mantissa (eps 7.8e-3); float32 on TPU matmuls may run in reduced-precision passes.
ERR_TOL = {"bfloat16": 5e-2, "float32": 5e-3}


class AttentionParams(BaseModel):
    """One attention case. Layout-neutral: the backend arranges [B, S, H, D] as each kernel wants."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    batch: int
    num_heads: int
    num_kv_heads: Optional[int] = None
    seq_len: int
    kv_seq_len: Optional[int] = None
    head_dim: int
    causal: bool = True
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    mode: Literal["fwd", "fwd_bwd"] = "fwd"
    block_q: Optional[int] = None
    block_k: Optional[int] = None
    devices: int = 1

    @model_validator(mode="after")
    def _check(self) -> "AttentionParams":
        checks.at_least_one(self, ("batch", "num_heads", "seq_len", "head_dim", "devices"),
                            ("num_kv_heads", "kv_seq_len", *BLOCK_PARAMS))
        checks.heads_divide(self.num_heads, self.kv_heads)
        return self

    @property
    def kv_heads(self) -> int:
        return self.num_kv_heads if self.num_kv_heads is not None else self.num_heads

    @property
    def kv_len(self) -> int:
        return self.kv_seq_len if self.kv_seq_len is not None else self.seq_len

    def resolved(self) -> "AttentionParams":
        """The same case with defaults made explicit (what goes in the CSV and the case id)."""
        return self.model_copy(update={"num_kv_heads": self.kv_heads, "kv_seq_len": self.kv_len})

    def flops(self) -> float:
        return flop_formulas.attention_model_flops(
            self.batch, self.num_heads, self.seq_len, self.kv_len, self.head_dim, self.causal, self.mode)

    def kernel_flops(self) -> float:
        return flop_formulas.attention_kernel_flops(
            self.batch, self.num_heads, self.seq_len, self.kv_len, self.head_dim, self.causal, self.mode)

    def io_bytes(self) -> float:
        """Analytic HBM bytes per iteration (flops.py): Q, K, V, O (and gradients); every impl's row, the naive
        one's too (its S x S logits are not counted: ``io_bytes`` is the traffic a kernel cannot avoid)."""
        itemsize = 2 if self.dtype == "bfloat16" else 4
        return flop_formulas.attention_io_bytes(self.batch, self.num_heads, self.kv_heads, self.seq_len, self.kv_len,
                                                self.head_dim, itemsize, self.mode)

    def err_tol(self) -> float:
        return ERR_TOL[self.dtype]

    def attn_config(self, interpret: bool) -> "AttnConfig":
        """How any backend's impl runs this case."""
        return AttnConfig(causal=self.causal, sm_scale=default_scale(self.head_dim), block_q=self.block_q,
                          block_k=self.block_k, interpret=interpret)


def make_inputs(p: AttentionParams, seed: int = 0) -> dict[str, np.ndarray]:
    """q [B,Sq,Hq,D], k/v [B,Sk,Hkv,D] and the output cotangent, float32, N(0,1), from a fixed seed.

    numpy, not a framework RNG, so JAX and torch_xla see bit-identical inputs.
    """
    drawn = _drawn(tuple(input_shapes(p.model_copy(update={"mode": "fwd_bwd"})).items()), seed)
    return {name: drawn[name] for name in input_shapes(p)}


# A suite runs every impl of a shape back to back, fwd and fwd_bwd, causal and not: the last shape's data
# is kept (16384 tokens x 16 heads x 128 take 2.3 s to draw per case on a 2-core host). Every shape draws
# the cotangent too, after q, k, v, so a fwd case's q, k, v are the fwd_bwd case's. Callers read the arrays.
@functools.lru_cache(maxsize=1)
def _drawn(shapes: tuple[tuple[str, tuple[int, ...]], ...], seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    return {name: rng.standard_normal(shape, dtype=np.float32) for name, shape in shapes}


def reference_twin(params: Mapping[str, Any]) -> tuple[tuple, str, str]:
    """(what a case's float32 reference depends on besides its mode: the inputs' shapes and the mask, the
    scale following head_dim; its mode; the mode whose reference covers both, fwd_bwd): a fwd and a fwd_bwd
    case of one twin share a reference, the fwd_bwd one's output being the fwd one's."""
    p = AttentionParams(**params)
    return (p.batch, p.seq_len, p.kv_len, p.num_heads, p.kv_heads, p.head_dim, p.causal), p.mode, "fwd_bwd"


def input_shapes(p: AttentionParams) -> dict[str, tuple[int, ...]]:
    """[B, S, H, D] shape of each input, in the order make_inputs draws them (compile-only runs need
    the shapes without the data)."""
    shape_q = (p.batch, p.seq_len, p.num_heads, p.head_dim)
    shape_kv = (p.batch, p.kv_len, p.kv_heads, p.head_dim)
    shapes = {"q": shape_q, "k": shape_kv, "v": shape_kv}
    if p.mode == "fwd_bwd":
        shapes["do"] = shape_q
    return shapes


@dataclass(frozen=True)
class AttnConfig:
    """How a backend's attention impl runs one case (shared by every backend, so one can call another's
    kernels with it: torch_xla runs the JAX kernels on CPU)."""

    causal: bool
    sm_scale: float
    block_q: Optional[int] = None
    block_k: Optional[int] = None
    interpret: bool = False  # run the Pallas kernel in the CPU interpreter
    # The kernel's other block fields (tuned, e.g. splash's block_kv_compute, the backward blocks), as
    # sorted (name, size) pairs; a kernel reads them through its typed config (impls.configs.KernelBlocks.of).
    blocks: tuple[tuple[str, int], ...] = ()

    def with_blocks(self, blocks: Mapping[str, int]) -> "AttnConfig":
        """This config at ``blocks`` (block_q / block_k to their fields, the rest to ``blocks``)."""
        return with_blocks(self, blocks, BLOCK_PARAMS)


def default_scale(head_dim: int) -> float:
    """Softmax scale 1/sqrt(D): the one convention every backend and model uses."""
    return 1.0 / math.sqrt(head_dim)


def tune_key_fields(p: "AttentionParams") -> dict[str, Any]:
    """What an attention winner depends on: the shape, dtype, causal and mode (not the blocks, not devices)."""
    return p.resolved().model_dump(exclude={*BLOCK_PARAMS, "devices"})


# An attention row is the kernel (its kernel_flops are its attention FLOPs); a built-in impl that takes no
# block runs once per shape of a block sweep; its fit is drawn against the sequence length, a column of
# panels per mode.
WORKLOAD = Workload("attention", AttentionParams, ATTENTION_KERNELS, tuned=BLOCK_PARAMS, tune_key=tune_key_fields,
                    runner="attention_case:run_attention_case", compiler="compile_case:compile_attention_case",
                    drops_untaken_blocks=True, attention_flops="kernel_flops", reference_twin=reference_twin,
                    fit=FitChart("seq_len", "sequence length (tokens)", "HBM per device vs sequence length",
                                 panels=("target", "causal", "mode"), columns_by="mode"))


# ------------------------------------------------------------------------------------------- reference
# Every backend checks its outputs against a float32 reference computed one chunk of queries at a
# time, so the score matrix of a chunk stays under REF_MAX_SCORE_BYTES (TPU-scale sequences fit in
# device memory). The chunking is here, once; each backend supplies the per-chunk math (on its device,
# differentiated by its autodiff); ``numpy_reference`` is that math, framework-free, as the spec.
REF_MAX_SCORE_BYTES = GIB


def reference_chunk(batch: int, num_heads: int, seq_len: int, kv_len: int, grad: bool,
                    max_score_bytes: int = REF_MAX_SCORE_BYTES) -> int:
    """Query rows per reference chunk: the float32 scores (x3 with gradients) stay under ``max_score_bytes``."""
    per_row = batch * num_heads * kv_len * 4 * (3 if grad else 1)
    return max(1, min(seq_len, max_score_bytes // max(per_row, 1)))


def chunked_reference(q: Any, k: Any, do: Any, fwd: Callable[[Any, int], Any],
                      fwd_bwd: Callable[[Any, Any, int], Sequence[Any]], concat: Callable[[list], Any],
                      max_score_bytes: int = REF_MAX_SCORE_BYTES) -> list:
    """out (and dq, dk, dv when ``do`` is given) over query chunks: ``fwd(q_chunk, offset)`` -> out,
    ``fwd_bwd(q_chunk, do_chunk, offset)`` -> (out, dq, dk, dv) of the chunk (dk, dv: its share, summed
    here); ``concat`` joins chunks on the sequence axis. Arrays of any framework ([B, S, H, D])."""
    b, sq, hq, _ = q.shape
    chunk = reference_chunk(b, hq, sq, k.shape[1], do is not None, max_score_bytes)
    outs, dqs = [], []
    dk = dv = None
    for start in range(0, sq, chunk):
        qc = q[:, start:start + chunk]
        if do is None:
            outs.append(fwd(qc, start))
            continue
        o, dq, dkc, dvc = fwd_bwd(qc, do[:, start:start + chunk], start)
        outs.append(o)
        dqs.append(dq)
        dk = dkc if dk is None else dk + dkc
        dv = dvc if dv is None else dv + dvc
    if do is None:
        return [concat(outs)]
    return [concat(outs), concat(dqs), dk, dv]


def numpy_reference(q: np.ndarray, k: np.ndarray, v: np.ndarray, do: Optional[np.ndarray], causal: bool,
                    sm_scale: float, q_offset: int = 0) -> list[np.ndarray]:
    """softmax(QK^T * scale) V in float64 (GQA by grouping query heads; causal top-left aligned, query
    i counted from ``q_offset``), and with ``do`` its gradients dq, dk, dv: the reference's math."""
    q, k, v = (np.asarray(x, np.float64) for x in (q, k, v))
    b, sq, hq, d = q.shape
    hkv, sk = k.shape[2], k.shape[1]
    qg = q.reshape(b, sq, hkv, hq // hkv, d)
    s = np.einsum("bqhgd,bkhd->bhgqk", qg, k) * sm_scale
    if causal:
        s = np.where(np.arange(sk)[None, :] <= np.arange(sq)[:, None] + q_offset, s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    probs = np.exp(s)
    probs /= probs.sum(-1, keepdims=True)
    out = np.einsum("bhgqk,bkhd->bqhgd", probs, v).reshape(b, sq, hq, d)
    if do is None:
        return [out]
    dog = np.asarray(do, np.float64).reshape(b, sq, hkv, hq // hkv, d)
    dv = np.einsum("bhgqk,bqhgd->bkhd", probs, dog)
    dp = np.einsum("bqhgd,bkhd->bhgqk", dog, v)
    ds = probs * (dp - (dp * probs).sum(-1, keepdims=True)) * sm_scale
    dq = np.einsum("bhgqk,bkhd->bqhgd", ds, k).reshape(b, sq, hq, d)
    dk = np.einsum("bhgqk,bqhgd->bkhd", ds, qg)
    return [out, dq, dk, dv]


def attention_result(p: AttentionParams, samples: list[float], plan: TimingPlan,
                     lower_s: Optional[float], compile_s: float, mem: Optional[int], err: float,
                     notes: Sequence[str]) -> CaseResult:
    """The end of an attention case, any backend: ``err``, the outputs' (and gradients') max_normalised_error
    against the reference (each backend reduces it where its arrays are), against the case's tolerance, and the
    counts."""
    return case_result(samples, plan, lower_s, compile_s, mem, err, p.err_tol(),
                       "; ".join(notes), flops=p.flops(), kernel_flops=p.kernel_flops(),
                       io_bytes=p.io_bytes())
