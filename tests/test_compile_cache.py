"""The persistent compilation cache (issue 25): a second run of the same program loads its executable
(compile_cached=true), --no-cache never does, a folder that cannot be written costs one warning and a
run without a cache, and a corrupt entry is compiled afresh. One tiny case; each test has its own cache
folder so that the first run's miss does not depend on what other tests compiled."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli
from xlabench import suite as suite_lib
from xlabench.run.options import RunOptions
from xlabench.run.session import RunHooks, run_suite

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


def test_second_run_is_served_by_the_cache(write_suite, tmp_path: Path):
    suite, cache = write_suite(ONE_CASE), tmp_path / "cache"
    first = _run(suite, tmp_path / "r1", cache_dir=str(cache))
    second = _run(suite, tmp_path / "r2", cache_dir=str(cache))
    assert first["compile_cached"] is False
    assert second["compile_cached"] is True
    assert second["compile_s"] is not None and second["compile_s"] > 0  # still the measured time
    assert any(cache.iterdir())


def test_no_cache_compiles_every_time(write_suite, tmp_path: Path):
    suite = write_suite(ONE_CASE)
    rows = [_run(suite, tmp_path / f"r{i}", no_cache=True) for i in (1, 2)]
    assert [r["compile_cached"] for r in rows] == [False, False]


def test_unwritable_cache_dir_warns_once_and_runs(write_suite, tmp_path: Path):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    warnings: list[str] = []
    row = _run(write_suite(ONE_CASE), tmp_path / "r", warnings, cache_dir=str(blocker / "cache"))
    cache_warnings = [w for w in warnings if "compilation cache" in w]
    assert len(cache_warnings) == 1 and str(blocker / "cache") in cache_warnings[0], warnings
    assert row["compile_cached"] is False


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


def test_cache_dir_and_no_cache_together_is_exit_2(write_suite):
    r = run_cli("run", str(write_suite(ONE_CASE)), "--no-cache", "--cache-dir", "/tmp/x")
    assert r.returncode == 2
    assert "--no-cache" in r.stderr and "--cache-dir" in r.stderr and "Traceback" not in r.stderr


def test_suite_cache_dir_is_used_and_cache_dir_overrides_it(write_suite, tmp_path: Path):
    suite = write_suite(ONE_CASE + "cache: {dir: suite-cache}\n")
    _run(suite, tmp_path / "r1")
    assert any((tmp_path / "suite-cache").iterdir())  # relative to the suite file
    row = _run(suite, tmp_path / "r2", cache_dir=str(tmp_path / "other"))
    assert row["compile_cached"] is False and any((tmp_path / "other").iterdir())


def test_unknown_cache_key_is_exit_2(write_suite):
    r = run_cli("run", str(write_suite(ONE_CASE + "cache: {folder: x}\n")), "--dry-run")
    assert r.returncode == 2 and "folder" in r.stderr and "Traceback" not in r.stderr
