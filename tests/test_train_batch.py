"""The largest batch that fits (train `global_batch: auto`): the search itself, on a CPU memory budget,
and compiled for a TPU v5e (libtpu's compile-only devices) through `xlabench compile`."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from xlabench.protocol.worker_messages import CaseSkipped
from xlabench.protocol.timing_plan import TimingPlan
from xlabench.units import GIB
from xlabench.workloads.train import TrainParams, largest_batch

from conftest import require_libtpu
from test_compile import _compile



def _truth(peak, limit: int, step: int, cap: int = 1 << 16) -> int:
    best, b = 0, step
    while b <= cap and peak(b) <= limit:
        best, b = b, b + step
    return best


@pytest.mark.parametrize("seed", range(3))
def test_search_finds_the_boundary_of_any_growing_memory(seed: int) -> None:
    """Linear (activations), curved and stepped (XLA changing its plan) memory, any batch step; probes
    that fail without a figure (None); the cap; a batch step that does not fit at all."""
    rng = random.Random(seed)
    for _ in range(300):
        step, fixed, per = rng.choice([1, 2, 8]), rng.randint(0, 10**9), rng.randint(1, 10**8)
        shape = rng.choice(["linear", "curved", "stepped"])

        def peak(b: int) -> int:
            return fixed + per * b + {"linear": 0, "curved": per * b * b // 400, "stepped": (b // 64) * 10**8}[shape]

        limit = rng.randint(0, 2 * 10**10)
        silent = lambda b: None if peak(b) > limit and b % 3 == 0 else peak(b)  # noqa: E731
        got, seen = largest_batch(silent, limit, step)
        assert got == _truth(peak, limit, step), (shape, step, fixed, per, limit)
        assert got == 0 or seen[got] <= limit


def test_search_needs_few_compiles_where_memory_is_linear() -> None:
    rng = random.Random(0)
    probes = []
    for _ in range(200):
        fixed, per = rng.randint(10**8, 10**9), rng.randint(10**5, 10**7)
        got, seen = largest_batch(lambda b: fixed + per * b, 16 * GIB, 1)
        assert got == min((16 * GIB - fixed) // per, 1 << 16)  # the search's cap
        probes.append(len(seen))
    assert max(probes) <= 8, max(probes)  # a doubling search then bisection: ~2 log2(batch) = 20-28


def test_search_bisects_where_memory_is_flat_then_jumps() -> None:
    """The v5e compile of gpt2-tiny at seq 256: ~3.0 MB per device up to batch 26, then 12 MB at 27 and
    165 MB at 64 (XLA keeps small temporaries off HBM). The line through two probes misleads there; once
    an interpolated probe leaves the bracket open, the search bisects (13 compiles before, 11 now)."""
    def peak(b: int) -> int:
        return 3_000_000 + 1_000 * b if b <= 26 else 12_000_000 + 4_000_000 * (b - 27)

    got, seen = largest_batch(peak, int(0.005 * GIB), 1)
    assert got == 26 and len(seen) <= 11, sorted(seen)


def _cpu_params(**kw) -> TrainParams:
    return TrainParams(**{**dict(model="gpt2-tiny", global_batch="auto", seq_len=128, dtype="float32",
                                 sharding="dp", devices=1, steps_per_sample=1), **kw})


@pytest.mark.slow  # a batch search: compiles many train steps (~45 s)
def test_cpu_budget_boundary_on_a_small_model() -> None:
    """The budget set between two batches' needs: the search lands on the boundary, and the step at
    one more sequence needs more than the budget. Each batch's step is compiled once: the search's probes
    at 6 and 7 are the figures the budget was set from (9 compiles of ~2 s before, 5 now); the search's own
    default (resolve_batch compiling each probe) runs below, for the batch that does not fit, and in
    test_auto_batch_row_carries_the_batch_it_found."""
    import functools

    from xlabench.backends.jax import train_case

    @functools.cache
    def need_at(b: int) -> int:
        return train_case.program(_cpu_params().with_batch(b), "naive", False, "cpu").peak_bytes(donate=False)

    limit = (need_at(6) + need_at(7)) // 2
    p, note = train_case.resolve_batch(_cpu_params(memory_limit_gib=limit / GIB), "naive", False, "cpu", None,
                                       donate=False, need=lambda q: need_at(q.global_batch))
    assert p.global_batch == 6 and need_at(6) <= limit < need_at(7)
    assert "global_batch auto: 6" in note
    with pytest.raises(CaseSkipped, match="needs a memory limit"):
        train_case.resolve_batch(_cpu_params(), "naive", False, "cpu", None)
    with pytest.raises(CaseSkipped, match="not even batch 1 fits"):
        train_case.resolve_batch(_cpu_params(memory_limit_gib=1e-4), "naive", False, "cpu", None, donate=False)


@pytest.mark.slow  # a batch search: compiles many train steps (~45 s)
def test_auto_batch_row_carries_the_batch_it_found() -> None:
    from xlabench.backends.jax import train_case

    limit = train_case.program(_cpu_params().with_batch(4), "naive", False, "cpu").peak_bytes(donate=False)
    result = train_case.run_train_case(_cpu_params(memory_limit_gib=limit / GIB).model_dump(), "naive",
                                       TimingPlan(warmup=0, iters=1), False, "cpu")
    assert result.metrics["global_batch"] == result.metrics["max_batch"] == 4
    assert result.tokens_per_step == 4 * 128 and "global_batch auto: 4" in result.notes
    assert result.correct


def test_auto_batch_note_gives_small_budgets_in_mib() -> None:
    """A budget under 1 GiB (a CPU run, a test) read "fits 0.00 GiB per device (GiB by batch: 1: 0.00, ...)":
    its figures are now in MiB, where they differ."""
    from xlabench.backends.jax import train_case

    need = lambda q: 3_000_000 + 8192 * q.batch()  # noqa: E731
    p, note = train_case.resolve_batch(_cpu_params(memory_limit_gib=3_140_000 / GIB), "naive", False, "cpu", None,
                                       need=need)
    assert p.global_batch == 17
    assert "fits 2.99 MiB per device (compile-only MiB by batch: 1: 2.87, 8: 2.92, " in note, note
    assert "17: 2.99, 18: 3.00)" in note, note
    p, note = train_case.resolve_batch(_cpu_params(memory_limit_gib=15.75), "naive", False, "cpu", None,
                                       need=lambda q: int(0.36 * GIB) * q.batch())
    assert p.global_batch == 43 and "fits 15.75 GiB per device (compile-only GiB by batch: 1: 0.36, " in note, note


def test_auto_batch_is_validated_like_a_number() -> None:
    with pytest.raises(ValueError, match="global_batch"):
        TrainParams(model="gpt2-tiny", global_batch="max", seq_len=128)
    with pytest.raises(ValueError, match="memory_limit_gib must be > 0"):
        _cpu_params(memory_limit_gib=0)
    with pytest.raises(ValueError, match="known once the worker"):
        _cpu_params().flops()
    assert _cpu_params().resolved().global_batch == "auto"


SUITE = """
name: batch_auto
workload: train
backends: [jax]
impls: [naive]
params: {{model: gpt2-tiny, seq_len: 128, dtype: bfloat16, remat: none, devices: 1, sharding: fsdp, scan_layers: false,
          memory_limit_gib: {limit!r}}}
matrix: {{global_batch: {batches}}}
measure: {{timeout_s: 900}}
"""


def _compile_rows(tmp_path: Path, write_suite, name: str, batches: str, limit: float):
    res, rows = _compile(tmp_path / name, str(write_suite(SUITE.format(batches=batches, limit=limit), f"{name}.yaml")),
                         "--target", "v5e-1")
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    assert len(list((tmp_path / name).rglob("*.compile.csv"))) == 1
    return rows


@pytest.mark.slow
def test_compile_only_v5e_boundary_on_a_small_model(tmp_path: Path, write_suite) -> None:
    """`xlabench compile --target v5e-1` with global_batch auto, the budget set just over what batch 8
    needs and under batch 9 (both compiled first, as a user would): the row holds batch 8, and the search
    probed 9. The probes at 8 and 9 are served from the figure store the first run filled, which holds
    only where the search compiles the very program `xlabench compile` compiles for a batch.
    CI time: the v5e compile's time grows with the tokens (gpt2-tiny at seq 128: 1.4 s at batch 1, 4.6 s at
    16, 12.9 s at 64). A boundary at 65 at seq 256 took 5 probes of up to 17 s (117-156 s in CI); one at 16
    took 45 s (probes 1 and 8 compiled, 16 and 17 from the store), one at 8 takes 31 s (only probe 1
    compiled). Memory grows here by 1 KB per sequence in steps of 8 (batch 9 needs what 16 does): just over
    batch 8's needs, the line through the probes at 1 and 8 aims at 8 and the search checks 9."""
    require_libtpu()
    rows = _compile_rows(tmp_path, write_suite, "fixed", "[8, 9]", 1.0)
    need = {int(b): int(v) for b, v in zip(rows["global_batch"], rows["peak_memory_bytes"])}
    assert need[8] < need[9], need  # memory grows with the batch, however little
    budget = (need[8] + min(256, (need[9] - need[8]) // 2)) / GIB
    auto = _compile_rows(tmp_path, write_suite, "auto", "[auto]", budget).iloc[0]
    assert auto["status"] == "compiled" and auto["global_batch"] == auto["max_batch"] == 8, auto.to_dict()
    assert auto["peak_memory_bytes"] == need[8] and auto["compile_cached"]
    probes = auto["notes"].split("MiB by batch: ")[1].split(")")[0]
    assert "global_batch auto: 8" in auto["notes"] and "9: " in probes, auto["notes"]


def test_auto_batch_probes_and_the_run_use_the_blocks_tuned_at_the_smallest_batch(monkeypatch) -> None:
    """Issue 41: the run compiled flash at its tuned 1024 x 1024 blocks (16.12 GiB) where the search had
    probed the untuned 128 x 128 program (15.37 GiB). Every probe of global_batch auto now tunes (or reads
    from the cache) the attention of one and the same per-shard shape, the smallest batch's, and the run
    uses those blocks too: what was measured is what runs."""
    from xlabench.backends.jax import attention_case, train_case

    seen: list[int] = []

    def tuned_config(case, impl, acfg, plan, platform):
        seen.append(case.batch)
        return acfg.with_blocks({"block_q": 64, "block_k": 64}), {"tuned": "cache", "tune_best_s": 1e-3,
                                                                   "default_s": 2e-3}, ""

    monkeypatch.setattr(attention_case, "tuned_config", tuned_config)
    flash = train_case.impls.get("flash")
    monkeypatch.setattr(train_case.impls, "get", lambda impl: flash)
    p = TrainParams(model="gpt2-tiny", global_batch="auto", seq_len=128, dtype="float32", sharding="dp",
                    devices=1, memory_limit_gib=0.05)
    plan = TimingPlan(tune=True)
    bytes_by_batch = {}

    def fake_peak(self, donate, device=None):
        bytes_by_batch[self.params.batch()] = self.params.batch() * (1 << 20)
        return bytes_by_batch[self.params.batch()]

    monkeypatch.setattr(train_case.StepProgram, "peak_bytes", fake_peak)
    found, note = train_case.resolve_batch(p, "flash", True, "tpu", None, tune=plan)
    assert found.batch() == 51 and len(bytes_by_batch) >= 2  # 51 MiB of the 51.2 MiB limit
    assert seen and set(seen) == {1}  # every probe: the per-shard shape at the smallest batch (1)
    tuned: dict = {}
    train_case.program(found, "flash", True, "tpu", tune=plan, tuned=tuned, tune_batch=p.batch_step())
    assert seen[-1] == 1 and "the blocks of global batch 1, for global_batch auto" in tuned["notes"]


def test_a_compile_only_step_uses_the_blocks_the_tuning_cache_holds_for_the_target(tmp_path, monkeypatch) -> None:
    """Issue 41: `xlabench compile` (no device to tune on) compiled flash at its default blocks while a run
    on the chip compiles the tuned ones, so the memory it printed was another program's. The step now takes
    the tuning cache's newest winner for the target's device kind and the per-shard shape (whatever jax /
    libtpu tuned it), and says which blocks it used, or that the cache had none."""
    from xlabench import tune
    from xlabench.backends.jax import train_case
    from xlabench.tune.search import TuneOutcome
    from xlabench.workloads.attention import AttentionParams, tune_key_fields

    monkeypatch.setattr(tune, "default_dir", lambda: tmp_path)
    p = TrainParams(model="gpt2-tiny", global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    notes: dict = {}
    train_case.program(p, "flash", True, "cpu", tuned=notes, cached_for="TPU v5 lite")
    assert "default blocks" in notes["notes"] and "holds no winner" in notes["notes"]
    case = AttentionParams(batch=2, num_heads=4, num_kv_heads=4, seq_len=128, head_dim=32, causal=True,
                           dtype="float32", mode="fwd_bwd")
    cache = tune.TuneCache(tmp_path)
    for jax_version, blocks, created in (("0.10.2", {"block_q": 64, "block_k": 128}, "2026-12-06T10:00:00Z"),
                                         ("0.10.1", {"block_q": 128, "block_k": 128}, "2026-12-05T10:00:00Z")):
        key = tune.cache_key("TPU v5 lite", "jax", "flash", tune_key_fields(case), {"jax": jax_version})
        path = cache.store(key, "space", TuneOutcome(blocks=blocks, best_s=1e-3, default_s=2e-3, tried=1, timed=1,
                                                     dropped={}, tune_s=1.0, clock="device"))
        path.write_text(path.read_text().replace(path.read_text().split('"created": "')[1].split('"')[0], created))
    notes.clear()
    train_case.program(p, "flash", True, "cpu", tuned=notes, cached_for="TPU v5 lite")
    assert "block_k=128 block_q=64" in notes["notes"] and "jax 0.10.2" in notes["notes"]
    notes.clear()
    train_case.program(p, "flash", True, "cpu", tuned=notes, cached_for="TPU v4")  # another chip: none
    assert "holds no winner" in notes["notes"]
