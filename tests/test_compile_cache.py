"""The persistent compilation cache (issue 25): a second run of the same program loads its executable
(compile_cached=true), --no-cache never does, a folder that cannot be written costs one warning and a
run without a cache, and a corrupt entry is compiled afresh. One tiny case; each test has its own cache
folder so that the first run's miss does not depend on what other tests compiled."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from xlabench import suite as suite_lib
from xlabench.run.run_options import RunOptions
from xlabench.run.suite_runner import RunHooks, run_suite

ONE_CASE = """
name: cachetiny
workload: attention
backends: [jax]
impls: [naive]
params: {num_heads: 1, head_dim: 16, dtype: float32, batch: 1, seq_len: 32}
measure: {warmup: 1, iters: 2, timeout_s: 120}
"""


def _run(suite: Path, out: Path, warnings: list[str] | None = None, **opts) -> dict:
    hooks = RunHooks(warning=(warnings if warnings is not None else []).append)
    outcome = run_suite(suite_lib.load(suite), RunOptions(out_dir=str(out), **opts), hooks)
    (row,) = outcome.rows
    assert row["status"] == "ok", row.get("error")
    assert row["correct"] is True
    return row


@pytest.mark.slow  # starts a process
def test_second_run_is_served_by_the_cache(write_suite, tmp_path: Path):
    suite, cache = write_suite(ONE_CASE), tmp_path / "cache"
    first = _run(suite, tmp_path / "r1", cache_dir=str(cache))
    second = _run(suite, tmp_path / "r2", cache_dir=str(cache))
    assert first["compile_cached"] is False
    assert second["compile_cached"] is True
    assert second["compile_s"] is not None and second["compile_s"] > 0  # still the measured time
    assert any(cache.iterdir())


@pytest.mark.slow  # starts a process
def test_no_cache_compiles_every_time(write_suite, tmp_path: Path):
    suite = write_suite(ONE_CASE)
    rows = [_run(suite, tmp_path / f"r{i}", no_cache=True) for i in (1, 2)]
    assert [r["compile_cached"] for r in rows] == [False, False]


@pytest.mark.slow  # starts a process
def test_unwritable_cache_dir_warns_once_and_runs(write_suite, tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    warnings: list[str] = []
    row = _run(write_suite(ONE_CASE), tmp_path / "r", warnings, cache_dir=str(blocker / "cache"))
    cache_warnings = [w for w in warnings if "compilation cache" in w]
    assert len(cache_warnings) == 1 and str(blocker / "cache") in cache_warnings[0], warnings
    assert row["compile_cached"] is False


@pytest.mark.slow  # starts a process
@pytest.mark.parametrize("damage", ["truncate", "garble"])
def test_corrupt_entry_is_recompiled(write_suite, tmp_path: Path, damage: str):
    suite, cache = write_suite(ONE_CASE), tmp_path / "cache"
    _run(suite, tmp_path / "r1", cache_dir=str(cache))
    entries = [p for p in cache.rglob("*") if p.is_file() and not p.name.startswith(".")]
    assert entries
    for p in entries:
        data = p.read_bytes()
        p.write_bytes(data[: len(data) // 3] if damage == "truncate" else bytes(b ^ 0x5A for b in data))
    again = _run(suite, tmp_path / "r2", cache_dir=str(cache))
    assert again["compile_cached"] is False


@pytest.mark.slow  # starts a process
def test_cache_dir_and_no_cache_together_is_exit_2(write_suite):
    r = run_cli("run", str(write_suite(ONE_CASE)), "--no-cache", "--cache-dir", "/tmp/x")
    assert r.returncode == 2
    assert "--no-cache" in r.stderr and "--cache-dir" in r.stderr and "Traceback" not in r.stderr


@pytest.mark.slow  # starts a process
def test_suite_cache_dir_is_used_and_cache_dir_overrides_it(write_suite, tmp_path: Path):
    suite = write_suite(ONE_CASE + "cache: {dir: suite-cache}\n")
    _run(suite, tmp_path / "r1")
    assert any((tmp_path / "suite-cache").iterdir())  # relative to the suite file
    row = _run(suite, tmp_path / "r2", cache_dir=str(tmp_path / "other"))
    assert row["compile_cached"] is False and any((tmp_path / "other").iterdir())


@pytest.mark.slow  # starts a process
def test_unknown_cache_key_is_exit_2(write_suite):
    r = run_cli("run", str(write_suite(ONE_CASE + "cache: {folder: x}\n")), "--dry-run")
    assert r.returncode == 2 and "folder" in r.stderr and "Traceback" not in r.stderr


# ------------------------------------------------------------------ compile-only targets: the figure store

COMPILE_SUITE = """
name: figtiny
workload: attention
backends: [jax]
impls: [naive, flash]
params: {num_heads: 2, head_dim: 128, dtype: bfloat16, batch: 1, seq_len: 256}
matrix:
  mode: [fwd, fwd_bwd]
"""
FIGURES = ["peak_memory_bytes", "mem_args_bytes", "mem_out_bytes", "mem_temp_bytes", "mem_alias_bytes",
           "hbm_capacity_bytes", "hbm_fraction", "xla_flops", "xla_bytes_accessed", "flops_ratio",
           "arith_intensity", "bound_s", "bound_by", "mfu_ceiling", "notes"]


def _compile(suite: Path, out: Path, *args: str, env: dict | None = None):
    from xlabench import results

    r = run_cli("compile", str(suite), "--target", "v5e-8", "--out", str(out), *args, env=env)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    rows = results.read_rows(sorted(out.rglob("*.compile.csv"))[-1]).set_index("case_id").sort_index()
    assert (rows["status"] == "compiled").all(), rows["error"].tolist()
    return r, rows


def _same_figures(a, b) -> None:
    for col in FIGURES:
        assert a[col].astype(str).tolist() == b[col].astype(str).tolist(), col  # bit for bit, as the CSV has them


@pytest.mark.slow  # starts a process
def test_compile_only_figures_are_served_by_the_cache_bit_for_bit(write_suite, tmp_path: Path):
    from conftest import require_libtpu

    require_libtpu()
    suite, cache = write_suite(COMPILE_SUITE), tmp_path / "cache"
    _, first = _compile(suite, tmp_path / "r1", "--cache-dir", str(cache))
    r2, second = _compile(suite, tmp_path / "r2", "--cache-dir", str(cache))
    assert first["compile_cached"].tolist() == [False] * 4 and second["compile_cached"].tolist() == [True] * 4
    _same_figures(first, second)
    assert (second["compile_s"] < first["compile_s"]).all() and (second["lower_s"] > 0).all()
    assert "figures from the cache" in r2.stdout
    entries = sorted((cache / "compile-only").glob("*.json"))
    assert len(entries) == 4
    # JAX's own cache stays off in a compile worker: libtpu's compile-only client cannot load its entries.
    assert not [p for p in cache.iterdir() if p.is_file()]

    # A damaged entry is a miss: compiled again, the same figures, the entry written anew.
    entries[0].write_text(entries[0].read_text()[:40])
    entries[1].write_text('{"layout": 0}')
    _, third = _compile(suite, tmp_path / "r3", "--cache-dir", str(cache))
    assert sorted(third["compile_cached"].tolist()) == [False, False, True, True]
    _same_figures(first, third)
    log = next((tmp_path / "r3").rglob("*.compile.log")).read_text()
    assert log.count("compiling again") == 2, log[-2000:]
    _, fourth = _compile(suite, tmp_path / "r4", "--cache-dir", str(cache))
    assert fourth["compile_cached"].tolist() == [True] * 4


@pytest.mark.slow  # starts a process
def test_compile_no_cache_and_unwritable_cache(write_suite, tmp_path: Path):
    from conftest import require_libtpu

    require_libtpu()
    # one naive fwd case: what is tested is where the compiled program is kept, not which kernel it is
    suite = write_suite(COMPILE_SUITE.replace("[fwd, fwd_bwd]", "[fwd]").replace("[naive, flash]", "[naive]"))
    home = {"XLABENCH_CACHE_DIR": str(tmp_path / "home")}  # the default cache's place, this test's own
    _compile(suite, tmp_path / "r1", env=home)
    # a compile uses the target's peaks, never the host CPU's: its worker did not measure them (~11 s of CPU
    # and 1.3 GiB of the host's memory for the bandwidth probe, on a machine with no cached peak)
    assert not (tmp_path / "home" / "host_peak.json").exists()
    _, cached = _compile(suite, tmp_path / "r2", env=home)
    assert cached["compile_cached"].tolist() == [True]  # the default cache serves it: what --no-cache turns off
    _, uncached = _compile(suite, tmp_path / "r2b", "--no-cache", env=home)
    assert uncached["compile_cached"].tolist() == [False]
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    r, rows = _compile(suite, tmp_path / "r3", "--cache-dir", str(blocker / "cache"))
    assert r.stderr.count("cannot be written") == 1 and "Traceback" not in r.stderr, r.stderr
    assert rows["compile_cached"].tolist() == [False]


def test_figure_store_misses_on_what_it_cannot_read(tmp_path: Path, capsys):
    from xlabench.measure.figure_store import FigureStore

    store = FigureStore(tmp_path / "s")
    assert store.get("k1") is None  # absent: a miss, quietly
    store.put("k1", {"fields": {"xla_flops": 0.1 + 0.2}})
    assert store.get("k1") == {"fields": {"xla_flops": 0.1 + 0.2}}
    store.path("k1").write_text("{not json")
    assert store.get("k1") is None
    store.path("k1").write_text('{"layout": 1, "key": "another", "value": {}}')  # a renamed file
    assert store.get("k1") is None
    assert capsys.readouterr().err.count("compiling again") == 2
    (tmp_path / "blocked").write_text("")
    FigureStore(tmp_path / "blocked" / "s").put("k2", {})  # cannot write: a warning, no exception
    assert "going on uncached" in capsys.readouterr().err
