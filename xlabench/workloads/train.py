"""Train workload: one full training step (forward, cross-entropy, backward, AdamW) of a decoder-only
transformer on synthetic tokens. Parameters (validated, with the device mesh), FLOPs, inputs.
Framework-free: the backends build the model and the mesh from these.
"""

from __future__ import annotations

import json
import math
from typing import Any, Callable, Literal, Optional, Sequence, Union, get_args

import numpy as np
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from xlabench import flops as flop_formulas
from xlabench.workloads import checks
from xlabench.measure.timing import TimingPlan, case_result, max_normalised_error
from xlabench.protocol.worker_messages import CaseResult
from xlabench.workloads import model_presets as presets
from xlabench.workloads.attention import BLOCK_PARAMS
from xlabench.workloads.record import ATTENTION_KERNELS, MFU_FIGURE, FitChart, SummaryFigure, Workload

MESH_AXES: tuple[str, ...] = ("data", "fsdp", "tensor")
SHARDINGS: tuple[str, ...] = ("dp", "fsdp", "tp", "2d", "auto")
# Mesh axes each mode may use with size > 1 (data parallelism can be added to every mode).
MODE_AXES: dict[str, tuple[str, ...]] = {
    "dp": ("data",),
    "fsdp": ("data", "fsdp"),
    "tp": ("data", "tensor"),
    "2d": ("data", "fsdp", "tensor"),
    "auto": MESH_AXES,
}
# Why JAX skips a sharding=auto case: its worker raises it (backends/jax/sharding.py), the dry run predicts it
# (case_skip below), so `run --dry-run` counts the skips the run has.
JAX_AUTO_REASON = ("JAX has no public XLA auto-sharding (jax.sharding.AUTO is gone in jax 0.10; jax 0.7.1's "
                   "private one aborts on CPU: 'auto-partitioner callback wasn't registered'); torch_xla runs auto")


def case_skip(backend: str, params: dict[str, Any]) -> Optional[str]:
    """Why ``backend`` cannot run a train case of these params at all, or None."""
    return JAX_AUTO_REASON if backend == "jax" and params.get("sharding") == "auto" else None

# Activation rematerialisation policies (the one list of names; backends/jax/model.py REMAT_POLICIES maps
# each to its jax.checkpoint policy; docs/train.md says what each keeps and buys):
#   none: keep everything (under scan_layers the JAX body keeps what dots_attention keeps);
#   full: keep each layer's input only; dots: also the weight matmuls' outputs; attention: also q, k, v and
#   the attention output; dots_attention: both (only elementwise work and attention's S x S recomputed).
Remat = Literal["none", "full", "dots", "attention", "dots_attention"]
REMAT: tuple[str, ...] = get_args(Remat)
# Sequence positions per chunk of the JAX and torch_tpu steps' cross-entropy (train param loss_chunk; 0: whole logits).
# The float32 logits of one chunk are global_batch x LOSS_CHUNK x vocab (gpt2, batch 8: 412 MB, not 1.6 GB).
LOSS_CHUNK = 256
# Steps per timing sample (train param steps_per_sample): dispatched back to back, one sync at the end.
STEPS_PER_SAMPLE = 4
DIM_FIELDS = ("arch", "vocab_size", "d_model", "num_layers", "num_heads", "num_kv_heads", "head_dim", "d_ff",
              "max_seq_len")

# |per-sequence loss of the step at its initial parameters - float32 naive reference| / max(1, |ref|).
# At initialisation the loss is near ln(vocab) whatever attention does, so this catches a broken step
# (NaN, wrong shapes or masks that blow up), not a subtly wrong kernel: the attention workload does that.
ERR_TOL = {"bfloat16": 2e-2, "float32": 2e-3}

# Seeds of every backend: both frameworks init from PARAM_SEED and train on the same TOKEN_SEED batch.
PARAM_SEED = 0
TOKEN_SEED = 1

# AdamW settings of every step (the study's optimizer; the values only need to be sane and fixed).
ADAMW = {"learning_rate": 3e-4, "b1": 0.9, "b2": 0.95, "eps": 1e-8, "weight_decay": 0.1}


def parse_mesh(value: Union[str, dict[str, Any]]) -> dict[str, int]:
    """``{data: 4, fsdp: 2}`` or ``"data=4,fsdp=2"`` -> {data, fsdp, tensor} sizes (missing axes = 1)."""
    if isinstance(value, str):
        items: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in value.split(","))):
            name, sep, size = part.partition("=")
            if not sep:
                raise ValueError(f"mesh {value!r}: expected axis=size pairs like 'data=4,fsdp=2', got {part!r}")
            items[name.strip()] = size.strip()
    elif isinstance(value, dict):
        items = dict(value)
    else:
        raise ValueError(f"mesh must be a mapping like {{data: 4, fsdp: 2}} or a string 'data=4,fsdp=2', "
                         f"got {value!r}")
    out = {a: 1 for a in MESH_AXES}
    for name, size in items.items():
        if name not in MESH_AXES:
            raise ValueError(f"mesh axis {name!r} is not one of: {', '.join(MESH_AXES)}")
        try:
            n = int(size)
        except (TypeError, ValueError):
            n = 0
        if n < 1 or str(n) != str(size).strip():
            raise ValueError(f"mesh axis {name}: size must be an integer >= 1, got {size!r}")
        out[name] = n
    return out


def mesh_str(mesh: dict[str, int]) -> str:
    return ",".join(f"{a}={mesh[a]}" for a in MESH_AXES)


def default_mesh(sharding: str, devices: int) -> dict[str, int]:
    """All devices on the mode's own axis; ``2d``: tensor = largest divisor <= sqrt(devices)."""
    mesh = {a: 1 for a in MESH_AXES}
    if sharding == "2d":
        tensor = max(t for t in range(1, math.isqrt(devices) + 1) if devices % t == 0)
        mesh.update(fsdp=devices // tensor, tensor=tensor)
    else:
        mesh[{"dp": "data", "fsdp": "fsdp", "tp": "tensor", "auto": "data"}[sharding]] = devices
    return mesh


class TrainParams(BaseModel):
    """One training-step case: a model (preset, optionally with dims overridden, or 'custom'), the
    batch, precision, attention impl (the case's impl), and how the step is sharded over the mesh."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    model: str
    arch: Optional[Literal["gpt2", "llama"]] = None
    vocab_size: Optional[int] = None
    d_model: Optional[int] = None
    num_layers: Optional[int] = None
    num_heads: Optional[int] = None
    num_kv_heads: Optional[int] = None
    head_dim: Optional[int] = None
    d_ff: Optional[int] = None
    max_seq_len: Optional[int] = None  # gpt2: rows of the position table (a longer one for longer sequences)
    # auto: the largest batch whose step fits (largest_batch); None: per_device_batch x devices
    global_batch: Union[int, Literal["auto"], None] = None
    # MaxText's per_device_batch_size: the global batch is this times devices (a ladder that scales with the slice)
    # (not dumped: a resolved case holds the global batch it makes, so its id is that of the same global batch)
    per_device_batch: Optional[int] = Field(default=None, exclude=True)
    seq_len: int
    dtype: Literal["bfloat16", "float32"] = "bfloat16"
    sharding: Literal["dp", "fsdp", "tp", "2d", "auto"] = "fsdp"
    mesh: Optional[Union[str, dict[str, Any]]] = None
    remat: Remat = "none"
    # None: unrolled for a case on its own; a suite's batch ladder runs scanned and its best point again
    # unrolled (suite/slice_fit.py: the scanned step compiles in seconds, the unrolled one runs faster)
    scan_layers: bool | None = None
    loss_chunk: int = LOSS_CHUNK  # JAX, torch_tpu: cross-entropy over this many positions at a time; 0: whole logits
    block_q: Optional[int] = None  # Pallas attention blocks in the step (None: the kernel's default)
    block_k: Optional[int] = None
    steps_per_sample: int = STEPS_PER_SAMPLE
    memory_limit_gib: Optional[float] = None  # global_batch auto: fit into this (default: the device's HBM)
    devices: int = 1

    @field_validator("model")
    @classmethod
    def _model(cls, v: str) -> str:
        if v != "custom":
            presets.preset(v)  # raises with the list of presets
        return v

    @model_validator(mode="before")
    @classmethod
    def _global_batch(cls, data: Any) -> Any:
        """global_batch from per_device_batch x devices; exactly one of the two is given (or both, agreeing)."""
        if not isinstance(data, dict):
            return data
        per, given = data.get("per_device_batch"), data.get("global_batch")
        if per is None:
            if given is None:
                raise ValueError("give global_batch (or per_device_batch: the global batch is it x devices)")
            return data
        if not isinstance(per, int) or isinstance(per, bool) or per < 1:
            raise ValueError(f"per_device_batch must be an integer >= 1, got {per!r}")
        devices = data.get("devices", 1)
        want = per * devices if isinstance(devices, int) else None
        if given is not None and given != want:
            raise ValueError(f"global_batch {given!r} and per_device_batch {per} x devices {devices} disagree: "
                             "give one of them")
        return {**data, "global_batch": want} if want is not None else data

    @model_validator(mode="after")
    def _check(self) -> "TrainParams":
        checks.at_least_one(self, ("seq_len", "devices", "steps_per_sample") + (() if self.auto_batch else
                                                                               ("global_batch",)),
                            DIM_FIELDS[1:-1] + BLOCK_PARAMS + ("max_seq_len",))
        if self.memory_limit_gib is not None and self.memory_limit_gib <= 0:
            raise ValueError(f"memory_limit_gib must be > 0, got {self.memory_limit_gib}")
        if self.loss_chunk < 0:
            raise ValueError(f"loss_chunk must be >= 0 (0: the whole logits at once), got {self.loss_chunk}")
        cfg = self.config()
        checks.heads_divide(cfg.num_heads, cfg.num_kv_heads)
        if cfg.arch == "gpt2" and self.seq_len > cfg.max_seq_len:
            raise ValueError(f"seq_len {self.seq_len} exceeds the {cfg.max_seq_len} learned positions of "
                             f"{self.model} (gpt2 has a position table; max_seq_len: {self.seq_len} gives it "
                             f"{self.seq_len} rows)")
        mesh = self.mesh_shape()
        size = math.prod(mesh.values())
        if size != self.devices:
            raise ValueError(f"mesh {mesh_str(mesh)} spans {size} devices but devices is {self.devices}; "
                             f"the product of the mesh axes must equal devices")
        extra = [a for a in MESH_AXES if mesh[a] > 1 and a not in MODE_AXES[self.sharding]]
        if extra:
            raise ValueError(f"sharding {self.sharding!r} uses mesh axes {', '.join(MODE_AXES[self.sharding])}; "
                             f"axis {', '.join(f'{a}={mesh[a]}' for a in extra)} must be 1 (use 2d to combine "
                             f"fsdp and tensor)")
        batch_shards = self.batch_step()
        if not self.auto_batch and self.global_batch % batch_shards:
            raise ValueError(f"global_batch {self.global_batch} must be divisible by data x fsdp = "
                             f"{batch_shards} (the batch is split over both)")
        t = mesh["tensor"]
        for name in ("num_heads", "num_kv_heads", "d_ff"):
            if getattr(cfg, name) % t:
                raise ValueError(f"{name} ({getattr(cfg, name)}) must be divisible by mesh tensor={t} "
                                 f"(tensor parallelism splits heads and the MLP)")
        if cfg.d_model % mesh["fsdp"]:
            raise ValueError(f"d_model ({cfg.d_model}) must be divisible by mesh fsdp={mesh['fsdp']} "
                             f"(fsdp splits the model dimension of every weight)")
        return self

    def config(self) -> presets.ModelConfig:
        """The model shape: the preset with any explicitly given dimension replacing its own."""
        given = {k: getattr(self, k) for k in DIM_FIELDS if getattr(self, k) is not None}
        if self.model == "custom":
            missing = [k for k in ("arch", "vocab_size", "d_model", "num_layers", "num_heads", "d_ff")
                       if k not in given]
            if missing:
                raise ValueError(f"model 'custom' needs {', '.join(missing)} (or name a preset: "
                                 f"{', '.join(presets.PRESETS)})")
            base = None
        else:
            base = presets.preset(self.model)
        # A changed width or head count re-derives head_dim (and MHA stays MHA) unless given.
        d = given.get("d_model", base.d_model if base else 0)
        heads = given.get("num_heads", base.num_heads if base else 0)
        if "head_dim" not in given and ("d_model" in given or "num_heads" in given):
            if d % heads:
                raise ValueError(f"d_model ({d}) is not divisible by num_heads ({heads}); give head_dim")
            given["head_dim"] = d // heads
        if "num_kv_heads" not in given and (base is None or base.num_kv_heads == base.num_heads):
            given["num_kv_heads"] = heads
        if base is None:
            return presets.ModelConfig(**{"max_seq_len": max(self.seq_len, 1024), **given})
        return base.replace(**given)

    def mesh_shape(self) -> dict[str, int]:
        return parse_mesh(self.mesh) if self.mesh is not None else default_mesh(self.sharding, self.devices)

    @property
    def auto_batch(self) -> bool:
        return self.global_batch == "auto"

    def batch_step(self) -> int:
        """The batch must be a multiple of this: data x fsdp (the batch is split over both)."""
        mesh = self.mesh_shape()
        return mesh["data"] * mesh["fsdp"]

    def with_batch(self, global_batch: int) -> "TrainParams":
        return TrainParams(**{**self.model_dump(), "global_batch": global_batch})

    def scan(self) -> bool:
        """Whether the step runs its layers as one scan over stacked weights (False: a Python loop)."""
        return bool(self.scan_layers)

    def resolved(self) -> "TrainParams":
        """Every model dimension, the full mesh and scan_layers made explicit (what goes in the CSV and
        the case id)."""
        cfg = self.config()
        return self.model_copy(update={**{k: getattr(cfg, k) for k in DIM_FIELDS},
                                       "mesh": mesh_str(self.mesh_shape()), "scan_layers": self.scan()})

    def batch(self) -> int:
        """The global batch; ValueError while it is ``auto`` (the worker finds it: largest_batch)."""
        if isinstance(self.global_batch, int):
            return self.global_batch
        raise ValueError("global_batch auto: the batch (and its tokens and FLOPs) is known once the worker has "
                         "found the largest that fits")

    @property
    def tokens(self) -> int:
        return self.batch() * self.seq_len

    def flops(self) -> float:
        return flop_formulas.train_step_flops(self.config(), self.batch(), self.seq_len, causal=True)

    def attention_flops(self) -> float:
        """The attention share of the step's model FLOPs (flops() less its weight matmuls: flops.py's convention)."""
        matmul = flop_formulas.TRAIN_FACTOR * self.batch() * self.seq_len * \
            flop_formulas.train_matmul_flops_per_token(self.config())
        return self.flops() - matmul

    def flops_palm(self) -> float:
        return flop_formulas.train_step_flops_palm(self.config(), self.batch(), self.seq_len,
                                                  presets.matmul_param_count(self.config()))

    def params_count(self) -> int:
        return presets.param_count(self.config())

    def err_tol(self) -> float:
        return ERR_TOL[self.dtype]


# A train step is not tuned (its layers' blocks are the suite's, or the kernel's defaults), keeps the wall
# clock's headline (steps dispatched back to back, one sync: what a training loop pays), and its kernels'
# skips are decided in its worker, over the model's layers. A step is sharded over a mesh, studied on a slice,
# counted in tokens; its fit sweeps the global batch to the capacity, a line per sharding mode and impl.
WORKLOAD = Workload("train", TrainParams, ATTENTION_KERNELS, headline="wall", fixes_blocks=BLOCK_PARAMS,
                    predicts_skips=False, case_skip=case_skip, runner="train_case:run_train_case",
                    compiler="compile_case:compile_train_case", wall_clock="steps", sharded=True, fits_slice=True,
                    attention_flops="params",
                    figures=(SummaryFigure("tokens/s", "tokens_per_s", 1, ".4g"), MFU_FIGURE),
                    fit=FitChart("global_batch", "global batch (sequences)", "HBM per device vs global batch",
                                 lines=("sharding", "impl"), panels=("backend", "target", "model"),
                                 colour_by="sharding", largest_fit=True))


def largest_batch(peak_bytes: Callable[[int], Optional[int]], limit: int, step: int, cap: int = 1 << 16
                  ) -> tuple[int, dict[int, Optional[int]]]:
    """The largest multiple of ``step`` (at most ``cap``) whose step needs at most ``limit`` bytes per device,
    0 if not even ``step`` fits; and every probe's bytes. ``peak_bytes(batch)`` compiles the step at that
    batch and returns its per-device bytes (None: it does not fit, size unknown).

    Memory grows about linearly with the batch (activations). Growing, each probe aims where the line
    through two fitting probes far apart crosses the limit (at most 8x the largest fit), and checks the
    next multiple; once a probe fails, interpolation and bisection alternate, so the bracket at least
    halves every second probe, and once an aimed probe leaves the bracket open the line misleads there (XLA
    changes its plan with the batch: memory flat, then a jump) and the search only bisects.
    """
    seen: dict[int, Optional[int]] = {}

    def fits(b: int) -> bool:
        if b not in seen:
            seen[b] = peak_bytes(b)
        return seen[b] is not None and seen[b] <= limit  # type: ignore[operator]

    def aim(a: int, b: int) -> Optional[int]:
        """Where the line through probes a < b crosses the limit (a multiple of step), None if it does not."""
        ya, yb = seen[a], seen[b]
        if ya is None or yb is None or yb <= ya:
            return None
        return int((a + (limit - ya) * (b - a) / (yb - ya)) // step) * step

    def probe(guess: int, lo: int, hi: Optional[int], check_next: bool) -> tuple[int, Optional[int]]:
        """Probe ``guess`` (and, when it fits and ``check_next``, the next multiple): the new bracket."""
        if not fits(guess):
            return lo, guess
        if check_next and guess + step <= cap and (hi is None or guess + step < hi):
            return (guess + step, hi) if fits(guess + step) else (guess, guess + step)
        return guess, hi

    if not fits(step):
        return 0, seen
    lo, hi = step, None  # lo fits; hi, once known, does not
    while hi is None and lo < cap:
        wide = [b for b in seen if b <= lo // 2] or [b for b in seen if b < lo]  # a far fitting probe
        target = aim(max(wide), lo) if wide else None
        guess = min(8 * lo, cap) if target is None else max(lo + step, min(target, 8 * lo, cap))
        lo, hi = probe(guess, lo, hi, check_next=guess == target)
    turn, linear = 0, True
    while hi is not None and hi - lo > step:
        target = aim(lo, hi) if linear and turn % 2 == 0 else None
        guess = (target if target is not None else (lo + hi) // 2 // step * step)
        guess = max(lo + step, min(guess, hi - step))
        lo, hi = probe(guess, lo, hi, check_next=target is not None)
        # on a line the aimed probe and the next close the bracket; where they did not, the line misleads
        linear = linear and (target is None or hi is None or hi - lo <= step)
        turn += 1
    return lo, seen


def make_tokens(p: TrainParams, seed: int = 0) -> np.ndarray:
    """[global_batch, seq_len + 1] int32 token ids, uniform over the vocabulary, from a fixed seed.

    Inputs are ``[:, :-1]``, targets ``[:, 1:]``. The same batch every step: the benchmark measures the
    step, not a data pipeline, and a model that memorises it shows a falling loss (a live step).
    """
    rng = np.random.default_rng(seed)
    return rng.integers(0, p.config().vocab_size, size=(p.batch(), p.seq_len + 1), dtype=np.int32)


def train_result(p: TrainParams, samples: list[float], plan: TimingPlan,
                 lower_s: Optional[float], compile_s: float, mem: Optional[int], losses: Sequence[float],
                 timed_from: int, first_seq: np.ndarray, ref: np.ndarray, notes: Sequence[str],
                 remarks: Sequence[str] = ()) -> CaseResult:
    """The end of a train case, any backend: the check of the step-0 per-sequence losses ``first_seq``
    against the float32 reference ``ref`` (the same sequences), the finite check over every step's loss,
    notes (``notes``, the losses line, ``remarks``) and the counts; ``losses[timed_from:]`` were timed."""
    timed = list(losses[timed_from:])
    err = max_normalised_error([first_seq], [ref])
    finite = all(math.isfinite(x) for x in losses)
    lines = [*notes, f"step 0 loss of the first {len(ref)} sequences {float(first_seq.mean()):.4f}, "
                     f"float32 naive reference {float(ref.mean()):.4f}", *remarks]
    if not finite:
        lines.append("NON-FINITE LOSS")
    return case_result(samples, plan, lower_s, compile_s, mem, err if finite else math.inf,
                       p.err_tol(), "; ".join(lines), tokens_per_step=p.tokens, tokens_global=True,
                       flops=p.flops(), flops_palm=p.flops_palm(), params_count=p.params_count(),
                       loss_first=timed[0], loss_last=timed[-1], losses=json.dumps([round(x, 6) for x in timed]))
