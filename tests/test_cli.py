"""CLI commands through click's runner: info, list, help."""

from __future__ import annotations

import pytest

import click
from click.testing import CliRunner

from xlabench.cli import main


@pytest.mark.slow  # starts a process
def test_info_reports_platform_and_the_hosts_cached_peak(tmp_path, monkeypatch):
    """The peak info prints is the host's cached one (a figure no measurement here would give), per
    device, with its date and where it is cached; --remeasure-peak replaces it with a measurement."""
    import datetime as dt
    import json

    import jax
    import jaxlib

    from xlabench import cache
    from xlabench.measure import host_peak

    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path))
    monkeypatch.setenv(host_peak.ENV_REMEASURE, "0")  # and undone after the test (info --remeasure-peak sets it)
    key = host_peak.host_key(f"jax {jax.__version__} / jaxlib {jaxlib.__version__}")
    today = dt.datetime.now(dt.timezone.utc).date().isoformat()
    (tmp_path / host_peak.FILE_NAME).write_text(json.dumps(
        {"hosts": {key: {"tflops": 123.4, "gbytes_per_s": 5678.0, "measured": today, "tries": 3,
                         "load_per_cpu": 0.0,  # measured on a quiet host: served from the cache at any load
                         "bandwidth": {"sizes": [128 << 20, 256 << 20], "gbytes_per_s": [5678.0, 5000.0]}}}}))
    res = CliRunner().invoke(main, ["info", "--devices", "2"])
    assert res.exit_code == 0, res.output
    assert "platform" in res.output and "cpu" in res.output and "interpret mode" in res.output
    out = " ".join(res.output.split())
    # the bandwidth is the probe sizes' lower median (5000.0 of 5678.0 and 5000.0), per device
    assert "peak TFLOP/s per device 61.700" in out and "peak GB/s per device 2500.0" in out, out
    assert f"best of 3 tries on {today} at load 0.00 per CPU, cached in" in out and "2 virtual device(s)" in out
    assert "128 MiB 5678.0, 256 MiB 5000.0 GB/s; chosen 5000.0 GB/s (256 MiB: the sizes' lower median)" in out, out
    res = CliRunner().invoke(main, ["info", "--remeasure-peak"])
    assert res.exit_code == 0, res.output
    cached = json.loads((tmp_path / host_peak.FILE_NAME).read_text())["hosts"][key]
    assert cached["tflops"] != 123.4 and f"{cached['tflops']:.3f}" in res.output


def test_list_shows_cases_of_picked_profile(write_suite):
    res = CliRunner().invoke(main, ["list", str(write_suite()), "--profile", "base"])
    assert res.exit_code == 0, res.output
    assert "4 cases" in res.output and "xla_sdpa" in res.output


def test_list_autodetects_platform(tmp_path, write_suite):
    text = """
    name: p
    workload: attention
    impls: [naive]
    params: {num_heads: 2, head_dim: 32, batch: 1, seq_len: 64}
    profiles:
      cpu:
        matrix: {seq_len: [16, 32, 48]}
    """
    res = CliRunner().invoke(main, ["list", str(write_suite(text))])
    assert res.exit_code == 0, res.output
    assert "3 cases (profile cpu, detected platform cpu)" in res.output


def test_run_rejects_unknown_impl_filter(write_suite):
    res = CliRunner().invoke(main, ["run", str(write_suite()), "--impl", "flash", "--profile", "base"])
    assert res.exit_code == 2 and "--impl flash: not in this suite" in res.output


def _help_commands(text: str) -> list[str]:
    """The command names of a click group's help: the first word of each line under 'Commands:'."""
    lines = text.split("\nCommands:\n", 1)[1].splitlines()
    names = []
    for line in lines:
        if not line.startswith("  "):
            break
        if not line.startswith("   "):  # a wrapped description is indented further
            names.append(line.split()[0])
    return names


def test_help_lists_commands():
    res = CliRunner().invoke(main, ["--help"])
    assert res.exit_code == 0
    listed = _help_commands(res.output)
    for cmd in ("info", "columns", "validate", "list", "run", "merge", "plot", "report", "compare", "gate"):
        assert cmd in listed, f"{cmd!r} missing from the help's commands {listed}"
    assert listed == sorted(main.list_commands(click.Context(main)))  # the help lists exactly the commands


@pytest.mark.slow  # starts a process
def test_results_path_is_printed_whole_past_80_columns(write_suite, tmp_path):
    """A long --out path is one line a user can copy, not wrapped at the terminal's width."""
    import re
    from pathlib import Path

    from conftest import run_cli

    out = tmp_path / ("a-results-folder-with-a-long-name-" * 3)
    r = run_cli("run", str(write_suite()), "-k", "seq_len=64", "--impl", "naive", "--out", str(out),
                env={"COLUMNS": "80"})
    assert r.returncode == 0, r.stderr[-2000:]
    printed = re.search(r"^results: (\S+\.csv)$", r.stdout, re.M)
    assert printed and len(printed.group(0)) > 80 and Path(printed.group(1)).is_file(), r.stdout[-1000:]
