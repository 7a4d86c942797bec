"""The CSV schema: the one place every column of a results file is declared (name, unit, group, meaning), the statuses, and the case id."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from typing import Any, Mapping

from xlabench.flops import BWD_KERNEL_FACTOR, BWD_MODEL_FACTOR
from xlabench.protocol.status import COMPILE_STATUSES, RUN_STATUSES  # noqa: F401 (results.COMPILE_STATUSES)
from xlabench.workloads import TUNED_PARAMS
from xlabench.workloads.attention import BLOCK_PARAMS

# 2: the headline is the device clock on accelerators (clock, wall_median_s); tuning columns.
# 3: the tuner's blocks in their own columns (tuned_block_q ...): a case's block_q is the suite's.
SCHEMA_VERSION = 3
# A case's phase seconds (inputs, tune, compile, timing, reference, check ..., measure/phases.py) are not
# columns: they say where the worker's time went, not what was measured, and their names differ by
# workload. The CaseResult carries them (phase_s), the run's log has one line per case, and the run's
# meta sums them per phase (``phase_s``, results/files.py finish_meta); compile_s and tune_s stay columns.
CELL_TYPES = ("text", "int", "float", "bool")  # a cell as read back: str, a number, true | false; empty: missing


@dataclass(frozen=True)
class Column:
    name: str
    dtype: str  # one of CELL_TYPES: what files.read_rows makes of the column's cells
    unit: str
    group: str  # id | case | env | measure | metric | tune | compile | roofline | explain
    doc: str
    tuned: str = ""  # the workload whose kernels tune this case parameter (workloads.TUNED_PARAMS), else ""


def _c(group: str, rows: list[tuple[str, str, str, str]]) -> list[Column]:
    tuned = {name: workload for workload, names in TUNED_PARAMS.items() for name in names}
    return [Column(name, dtype, unit, group, doc, tuned.get(name, "")) for name, dtype, unit, doc in rows]


TUNED_PREFIX = "tuned_"  # the tuner's choice of a tuned parameter NAME is column tuned_NAME


# Case parameters of every workload. A workload's params model must have a column for each of its
# fields (tests/test_results.py checks this).
CASE_COLUMNS = _c("case", [
    ("workload", "text", "", "attention | train | paged_attention"),
    ("backend", "text", "", "framework that ran the case: jax | torch_xla | torch_tpu"),
    ("impl", "text", "", "implementation name from the impl catalog (xlabench/impls/)"),
    ("batch", "int", "", "attention/paged: batch size (sequences)"),
    ("num_heads", "int", "", "query heads"),
    ("num_kv_heads", "int", "", "key/value heads (== num_heads: MHA; 1: MQA; otherwise GQA)"),
    ("seq_len", "int", "tokens", "query sequence length (train: sequence length)"),
    ("kv_seq_len", "int", "tokens", "key/value sequence length (defaults to seq_len)"),
    ("head_dim", "int", "", "per-head dimension"),
    ("causal", "bool", "", "causal mask, top-left aligned: query i sees keys 0..i"),
    ("dtype", "text", "", "input/compute dtype: bfloat16 | float32"),
    ("mode", "text", "", "fwd | fwd_bwd (forward and the gradients of q, k, v)"),
    *[(name, "int", "", f"kernel {what} block size (empty: the kernel's default)")
      for name, what in zip(BLOCK_PARAMS, ("query", "key/value"))],
    ("model", "text", "", "train: model preset name (or 'custom')"),
    ("arch", "text", "", "train: gpt2 | llama"),
    ("vocab_size", "int", "", "train: vocabulary (embedding tables are padded to a multiple of 128)"),
    ("d_model", "int", "", "train: model width"),
    ("num_layers", "int", "", "train: decoder layers"),
    ("d_ff", "int", "", "train: MLP hidden width"),
    ("max_seq_len", "int", "tokens", "train: gpt2: rows of the learned position table; llama: the longest sequence allowed"),
    ("global_batch", "int", "sequences", "train: global batch size"),
    ("sharding", "text", "", "train: dp | fsdp | tp | 2d | auto"),
    ("mesh", "text", "", "train: device mesh as axis=size,..."),
    ("remat", "text", "", "train: activation rematerialisation policy: none | full | dots | attention | dots_attention"),
    ("loss_chunk", "int", "tokens", "train (JAX, torch_tpu): sequence positions per cross-entropy chunk (0: the whole logits at once)"),
    ("memory_limit_gib", "float", "GiB", "train, global_batch auto: per-device memory to fit the step into (empty: the device's HBM)"),
    ("steps_per_sample", "int", "", "train: steps dispatched back to back per timing sample (one sync; sample = time / steps)"),
    ("scan_layers", "bool", "", ("train: true: layer weights stacked, JAX runs the layers as one jax.lax.scan "
                         "(torch_xla always loops); default: on for the 2B-and-up presets")),
    ("context_lens", "text", "tokens", "paged: context lengths: 'N' (all N), 'uniform:lo..hi' (fixed seed) or 'a,b,c'"),
    ("page_size", "int", "tokens", "paged: tokens per KV-cache page"),
    ("pages_per_compute_block", "int", "", "paged: pages per kernel compute block"),
    ("max_context", "int", "tokens", "paged: page-table capacity per sequence (pages_per_sequence * page_size)"),
    ("total_pages", "int", "", "paged: pages in the KV cache"),
    ("megacore_mode", "text", "", "paged: megacore mode (TPU)"),
    ("q_tokens", "int", "", "paged: query tokens per sequence (1 = decode)"),
    ("devices", "int", "", "devices the case ran on"),
])

ID_COLUMNS = _c("id", [
    ("schema_version", "int", "", "version of this column list"),
    ("run_id", "text", "", "identifier of the run (also the file name)"),
    ("suite", "text", "", "suite name"),
    ("profile", "text", "", "suite profile used (cpu | gpu | tpu | empty: base)"),
    ("case_id", "text", "", "hash of workload, backend, impl and the case parameters: stable across runs and hosts"),
])

ENV_COLUMNS = _c("env", [
    ("platform", "text", "", "cpu | gpu | tpu"),
    ("device_kind", "text", "", "device kind reported by the framework (e.g. 'TPU v5 lite')"),
    ("device_count", "int", "", "devices visible to the worker"),
    ("process_count", "int", "", "processes in the run (multi-host)"),
    ("framework_version", "text", "", "e.g. jax 0.10.2 / jaxlib 0.10.2"),
    ("interpret", "bool", "", "true: Pallas kernel ran in the CPU interpreter: a pipeline check, not kernel speed"),
    ("hostname", "text", "", "host that ran the case"),
    ("git_sha", "text", "", "xlabench git commit (+dirty)"),
    ("timestamp", "text", "UTC", "when the case ended, ISO 8601"),
])

MEASURE_COLUMNS = _c("measure", [
    ("status", "text", "", "run: ok | failed | skipped; compile: compiled | oom | lowered | failed | skipped"),
    ("error", "text", "", "why the case failed or was skipped"),
    ("lower_s", "float", "s", "time to trace and lower"),
    ("compile_s", "float", "s", "time to compile the lowered program"),
    ("compile_cached", "bool", "", "true: the executable came from the persistent compilation cache (compile_s is still "
                           "the time it took); empty: the backend cannot tell (torch_xla)"),
    ("warmup", "int", "", "untimed iterations before timing"),
    ("n", "int", "", "timed iterations"),
    ("clock", "text", "", ("which clock median_s .. cv, the samples and every rate (TFLOP/s, MFU, GB/s, MBU, tokens/s, "
                   "roofline_frac) are: device (TPU/GPU with the trace timer: the device's seconds per iteration) | "
                   "wall (host clock around each call and its sync: CPU, or no device times)")),
    ("median_s", "float", "s", "median seconds per iteration on the row's clock (the headline)"),
    ("wall_median_s", "float", "s", "median wall-clock seconds per call, each call synced (equals median_s when clock is wall)"),
    ("mean_s", "float", "s", "mean seconds per iteration"),
    ("min_s", "float", "s", "fastest iteration"),
    ("p10_s", "float", "s", "10th percentile"),
    ("p90_s", "float", "s", "90th percentile"),
    ("stdev_s", "float", "s", "sample standard deviation"),
    ("cv", "float", "", "coefficient of variation stdev/mean"),
    ("repeats", "int", "", "independent runs of the case pooled into this row (measure.repeats); n counts all"),
    ("timer", "text", "", ("measure.timer: wallclock (host clock around call + sync) | trace (also device seconds from a "
                   "profiler trace, a separate pass; on an accelerator they become the headline: see clock)")),
    ("device_median_s", "float", "s", ("trace timer: median device seconds per iteration (TPU/GPU: the device's XLA "
                              "module; CPU: span of the executable's XLA ops), from a separate profiled pass")),
    ("device_p10_s", "float", "s", "trace timer: 10th percentile of the device seconds"),
    ("device_p90_s", "float", "s", "trace timer: 90th percentile of the device seconds"),
    ("host_overhead", "float", "", "trace timer: wall_median_s / device_median_s (1 = no host cost beyond the device's)"),
    ("host_calib_s", "float", "s", ("median seconds of a fixed host matmul timed by the runner just before and after each "
                           "of the case's repeats: the host's speed beside the case (the gate's load check)")),
])

METRIC_COLUMNS = _c("metric", [
    ("flops", "float", "FLOP", "model FLOPs per iteration (see README: FLOP conventions)"),
    ("kernel_flops", "float", "FLOP", "FLOPs the kernel executes (attention's backward recomputes QK^T: backward "
     f"{BWD_KERNEL_FACTOR:g}x forward, fwd_bwd {1 + BWD_KERNEL_FACTOR:g}x forward; flops counts {BWD_MODEL_FACTOR:g}x "
     f"and {1 + BWD_MODEL_FACTOR:g}x)"),
    ("tflops_per_s", "float", "TFLOP/s", "flops / median_s / 1e12"),
    ("peak_tflops", "float", "TFLOP/s", "peak dense FLOP/s per device used for MFU"),
    ("peak_source", "text", "", "where peak_tflops comes from (datasheet, measured, or --peak-tflops)"),
    ("mfu", "float", "", "flops / (median_s * devices * peak): model FLOPs utilisation, 0..1"),
    ("bytes", "float", "B", "bytes moved per iteration (memory-bound workloads)"),
    ("io_bytes", "float", "B", ("attention: analytic HBM bytes of Q, K, V, O (and gradients) per iteration, the traffic of "
                       "a kernel that never writes its logits (flops.attention_io_bytes)")),
    ("gbytes_per_s", "float", "GB/s", "bytes / median_s / 1e9"),
    ("peak_gbytes_per_s", "float", "GB/s", "peak memory bandwidth per device"),
    ("mbu", "float", "", "gbytes_per_s / (devices * peak_gbytes_per_s): bandwidth utilisation, 0..1"),
    ("flops_palm", "float", "FLOP", "train: PaLM 6N + 12LHQT model FLOPs per step (non-causal attention)"),
    ("mfu_palm", "float", "", ("train: flops_palm / (median_s * devices * peak): MFU under PaLM's convention (the one "
                      "published MFU figures use); mfu counts causal attention's visible half, as MaxText")),
    ("params_count", "int", "", "train: model parameters N (true vocabulary, published-checkpoint count)"),
    ("tokens_per_s", "float", "tokens/s", "train: global tokens per second; paged: query tokens (batch * q_tokens) per second"),
    ("tokens_per_s_per_device", "float", "tokens/s", "train: tokens_per_s / devices"),
    ("max_batch", "int", "sequences", ("train, global_batch auto: the largest global batch whose step fits the device's "
                                "memory (or memory_limit_gib), found by compiling the step at a few batches "
                                "(XLA memory_analysis; nothing runs); global_batch then holds it")),
    ("loss_first", "float", "nats", "train: loss of the first timed step"),
    ("loss_last", "float", "nats", "train: loss of the last timed step"),
    ("losses", "text", "nats", "train: JSON list of the loss of every timed step (same batch: it falls)"),
    ("peak_memory_bytes", "float", "B", "peak device memory per device (see notes for the source)"),
    ("max_abs_err", "float", "", "max abs error of the output (and gradients) vs the float32 reference"),
    ("err_tol", "float", "", "tolerance for max_abs_err at this dtype"),
    ("correct", "bool", "", "max_abs_err <= err_tol: a wrong kernel is never counted as a win"),
    ("notes", "text", "", "free-text remarks (e.g. the source of peak memory, a recompilation)"),
    ("suspect", "text", "", ("the invariants the row breaks ('rule: reason', joined by '; '; docs/audit.md), checked where "
                     "the row is built; empty: clean. The numbers are kept as measured")),
])

# Block-size tuning (xlabench/tune): how the kernel's blocks were chosen and what it bought.
TUNE_COLUMNS = _c("tune", [
    ("blocks", "text", "", "the kernel's other block fields, NAME=SIZE (splash block_kv_compute, backward blocks ...)"),
    ("tuned", "text", "", ("search (tuned in this run) | cache (a winner from the tuning cache) | table (the shipped tune "
                   "table's entry, checked by the row's own timing: notes name it) | fixed (the suite sets the blocks) | off (--no-tune, "
                   "CPU, or refused: see notes); empty: the impl has no blocks")),
    ("tune_s", "float", "s", "seconds this run spent choosing the blocks (search: compiling and timing candidates)"),
    ("tune_tried", "int", "", "candidates compiled or pruned by the search (0: from the cache or the table)"),
    ("tune_dropped", "text", "", "candidates dropped, by reason: constraint, vmem, oom, compile, run"),
    ("tune_clock", "text", "", "the clock the search timed candidates on: device | wall"),
    ("tune_check", "text", "", ("the search's winner and the default compiled again and timed side by side after the search: "
                        "ok | searched twice (the first search's figures did not hold within 15%) | disagrees ... "
                        "(kept the faster of the two, re-timed) | row ok (recorded figures): a table entry the row's "
                        "own timing held within 15% of its record, tune_best_s and default_s the record's")),
    ("tune_best_s", "float", "s", ("the winner's median seconds in the search (tune_clock; default_s beside it); a table "
                           "entry's: its record, scaled by the batch")),
    ("default_s", "float", "s", ("the same kernel at its default blocks (128 x 128), timed in the same search on the same clock: "
                        "default_s / tune_best_s is what tuning bought (a table entry's: its record)")),
    *[(TUNED_PREFIX + name, "int", "", (f"the {name} the kernel ran at where the tuner chose it (tuned: search | cache | "
                                         f"table | off, the kernel's default); the case's own {name} stays the suite's"))
      for name in dict.fromkeys(n for names in TUNED_PARAMS.values() for n in names)],
])

# `xlabench compile` rows (AOT compilation for a TPU topology on any host): per-device figures from
# XLA's memory_analysis and cost_analysis of the compiled program, next to the analytic FLOPs.
COMPILE_COLUMNS = _c("compile", [
    ("target", "text", "", "compile: slice compiled for (xlabench/hardware.py TARGETS, e.g. v4-8)"),
    ("topology", "text", "", "compile: libtpu topology it stands for (e.g. v4:2x2x1 megacore; x2 slices)"),
    ("mem_args_bytes", "float", "B", "compile: per-device argument bytes (memory_analysis)"),
    ("mem_out_bytes", "float", "B", "compile: per-device output bytes"),
    ("mem_temp_bytes", "float", "B", "compile: per-device temporaries (activations, workspace)"),
    ("mem_alias_bytes", "float", "B", "compile: per-device bytes of outputs aliased to donated arguments"),
    ("hbm_capacity_bytes", "float", "B", "compile: usable HBM per device (libtpu's limit, probed by an over-size compile)"),
    ("hbm_fraction", "float", "", "compile: peak_memory_bytes / hbm_capacity_bytes (> 1: does not fit)"),
    ("xla_flops", "float", "FLOP", ("XLA cost_analysis flops per device per step, while loops x their trip count (Pallas "
                           "kernels: the kernel's own estimate); JAX run rows too")),
    ("xla_bytes_accessed", "float", "B", "XLA cost_analysis bytes accessed per device per step, loop-aware likewise"),
    ("xla_hbm_bytes", "float", "B", "of those, the operands and results of the program's ops that live in HBM (a TPU's VMEM-resident ones left out), per device per step; empty where an op's traffic is unknown (a Pallas kernel, a collective): the roofline's memory floor where set"),
    ("collective_bytes", "float", "B", ("bytes one device sends over the interconnect per step: the compiled HLO's "
                               "all-gather, reduce-scatter, all-reduce, all-to-all, collective-permute, ring "
                               "conventions (measure/hlo_text.py)")),
    ("collective_ops", "int", "", "collective ops executed per step (loop bodies x their trip count)"),
    ("collectives", "text", "", 'JSON per kind: {"all-gather": {"count": n, "bytes": b}, ...}'),
    ("flops_ratio", "float", "", "compile: xla_flops / (flops / devices): > 1 counts recompute (remat) or masked work"),
])

# The roofline of every row, run and compile alike (xlabench/roofline.py): per device, per step.
ROOFLINE_COLUMNS = _c("roofline", [
    ("arith_intensity", "float", "FLOP/B", "xla_flops / xla_bytes_accessed (else the analytic counts: see roofline_source)"),
    ("bound_s", "float", "s", "roofline time: max(FLOPs / peak FLOP/s, bytes / HBM bandwidth) per device"),
    ("collective_s", "float", "s", "collective_bytes / ici_gbytes_per_s: interconnect time, no overlap with compute assumed"),
    ("bound_by", "text", "", "compute | memory | collective: the largest of the three times"),
    ("roofline_frac", "float", "", "run rows: max(bound_s, collective_s) / median_s, 0..1 (1: at the roofline)"),
    ("mfu_ceiling", "float", "", ("compile rows: (flops / devices) / peak FLOP/s / max(bound_s, collective_s): the MFU "
                         "the roofline allows; empty for a kernel XLA cannot count")),
    ("ici_gbytes_per_s", "float", "GB/s", "interconnect bandwidth per device used for collective_s (hardware.interconnect)"),
    ("ici_source", "text", "", "where ici_gbytes_per_s comes from (links, wraparound, table source)"),
    ("roofline_source", "text", "", "where the FLOPs and bytes come from (XLA, or analytic counts)"),
    ("roofline_note", "text", "", "why a roofline_frac is above 1 plus its allowance (the timer noise; CPU: 5%)"),
])

# explain's categories (xlabench/explain/categories.py sorts ops into them), declared once with their columns: (key, what the output calls it). Idle is not one: it is reported apart.
EXPLAIN_CATEGORIES: tuple[tuple[str, str], ...] = (
    ("matmul", "matmuls (dot/convolution fusions)"),
    ("attention", "attention kernels (Pallas calls)"),
    ("elementwise", "elementwise and reduction fusions"),
    ("copy", "copies, transposes, layout changes"),
    ("collective", "collectives"),
    ("optimizer", "optimizer update"),
    ("other", "other ops"),
)


# `xlabench explain` (xlabench/explain/): the step's device time by category of HLO op, per device per step.
EXPLAIN_COLUMNS = _c("explain", [
    ("explain_source", "text", "", ("trace (measured: the kept profile's op times) | estimate (compile rows: the optimized "
                            "HLO's ops under a roofline, no trace: every explain_* figure is an estimate)")),
    ("explain_step_s", "float", "s", "explain: device seconds per step the categories are shares of (the estimate's sum)"),
    *[(f"explain_{key}_s", "float", "s", f"explain: {label}, seconds per step (summed from the ops' own times)")
      for key, label in EXPLAIN_CATEGORIES],
    ("explain_idle_s", "float", "s", "explain: idle, the step's wall time less its device time (empty for an estimate)"),
])

COLUMNS: list[Column] = (ID_COLUMNS + CASE_COLUMNS + ENV_COLUMNS + MEASURE_COLUMNS + METRIC_COLUMNS
                         + TUNE_COLUMNS + COMPILE_COLUMNS + ROOFLINE_COLUMNS + EXPLAIN_COLUMNS)
COLUMN_NAMES: list[str] = [c.name for c in COLUMNS]
CASE_COLUMN_NAMES: list[str] = [c.name for c in CASE_COLUMNS]
# Text cells are read back as written, never parsed, even where they look like numbers (a short sha of digits,
# '1e5', a hostname '007': a sha read as a number lost its leading zero and history its commit order).
DTYPE_OF: dict[str, str] = {c.name: c.dtype for c in COLUMNS}
UNIT_OF: dict[str, str] = {c.name: c.unit for c in COLUMNS}  # the one declaration of a column's unit (gate's metrics too)
TEXT_COLUMN_NAMES: frozenset[str] = frozenset(n for n, t in DTYPE_OF.items() if t == "text")
# Case parameters that choose a kernel's blocks or mode: empty means the kernel's default (a chart's legend
# says 'default'), and they are not the shape of a case.
KERNEL_OPTIONS: tuple[str, ...] = tuple(c.name for c in CASE_COLUMNS if c.tuned or c.name == "megacore_mode")
SAMPLE_COLUMNS = ["run_id", "case_id", "iteration", "seconds"]
STATUSES = RUN_STATUSES  # a run's rows (protocol/status.py: the words a worker's reply uses too)

# Columns that do not identify a case: excluded from the case hash.
_NOT_IDENTIFYING = {"devices"}


def case_id(workload: str, backend: str, impl: str, params: Mapping[str, Any]) -> str:
    """Stable id of a case: same parameters, same id, on any host and in any run."""
    key = {"workload": workload, "backend": backend, "impl": impl}
    key.update({k: v for k, v in params.items() if v is not None and k not in _NOT_IDENTIFYING})
    blob = json.dumps(key, sort_keys=True, default=str)
    return hashlib.sha1(blob.encode()).hexdigest()[:12]
