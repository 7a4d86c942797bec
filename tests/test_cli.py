"""CLI commands through click's runner: info, list, help."""

from __future__ import annotations

import click
from click.testing import CliRunner

from xlabench.cli import main


def test_info_reports_platform_and_peak_source():
    res = CliRunner().invoke(main, ["info"])
    assert res.exit_code == 0, res.output
    assert "platform" in res.output and "cpu" in res.output
    assert "measured on this host" in res.output and "interpret mode" in res.output


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
