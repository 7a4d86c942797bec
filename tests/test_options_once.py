"""Each run option is declared once (issue 36): its type and default, flag, help, range and whether a
resume repeats it live on its RunOptions field; the click options, LIMITS and RESUME_FLAGS derive from it."""

from __future__ import annotations

import dataclasses
import re
from pathlib import Path

import click

from xlabench.cli.click_options import OPTIONS
from xlabench.run.run_options import FLAGS, LIMITS, RESUME_FLAGS, OptionError, RunOptions

PKG = Path(__file__).resolve().parent.parent / "xlabench"


def _option(name: str) -> click.Option:
    return OPTIONS[name]()(lambda **kw: None).__click_params__[0]


def test_every_click_option_is_the_fields_declaration():
    fields = {f.name: f for f in dataclasses.fields(RunOptions)}
    assert set(OPTIONS) == set(FLAGS)
    for name, flag in FLAGS.items():
        opt = _option(name)
        assert opt.name == name and opt.help == flag.help
        assert set(opt.opts) | set(opt.secondary_opts) == {w for f in flag.flags for w in f.split("/")}
        if not opt.is_flag and fields[name].default is not None:  # (click keeps None as its UNSET)
            assert opt.default == fields[name].default
    assert _option("timeout_s").type.min == 0 and _option("jobs").type.min == 1


def test_ranges_and_resume_flags_come_from_the_declarations():
    assert set(LIMITS) == {n for n, f in FLAGS.items() if f.low is not None}
    assert LIMITS["timeout_s"].flag == "--timeout" and LIMITS["jobs"].integer
    assert RESUME_FLAGS["where"] == "-k" and RESUME_FLAGS["tune"] == "--tune"
    try:
        RunOptions(repeats=0)
    except OptionError as e:
        assert "--repeats 0: expected an integer >= 1" in str(e)
    else:
        raise AssertionError("repeats=0 was accepted")


# Options of other commands that share a flag and mean something else: plot's and report's --out name their
# own output (a folder of charts, a markdown file); info's --backend picks the one framework to probe.
OWN = {("cli/plot.py", "--out"), ("cli/info.py", "--backend")}


def test_no_module_declares_a_run_option_by_hand():
    """grep: no click.option("<a run option's flag>" anywhere in the package (they are derived)."""
    flags = {w for f in FLAGS.values() for flag in f.flags for w in flag.split("/")}
    hand = []
    for path in PKG.rglob("*.py"):
        for m in re.finditer(r'click\.option\(\s*"([^"]+)"', path.read_text()):
            where = (str(path.relative_to(PKG)), m.group(1))
            if set(m.group(1).split("/")) & flags and where not in OWN:
                hand.append(f"{where[0]}: {where[1]}")
    assert hand == []


def test_an_on_off_option_left_out_is_none_whatever_clicks_flag_default():
    """Measured on the v5e: its package index's click (before 8.2) turned --tune/--no-tune's None default
    into False, so `run` on the chip read --no-tune and tuned nothing. Left out, it is None (the platform
    decides); typed, it is what was typed."""
    import click
    from click.core import ParameterSource

    from xlabench.cli.click_options import _onoff

    ctx = click.Context(click.Command("run"))
    param = click.Option(["--tune/--no-tune", "tune"])
    ctx.set_parameter_source("tune", ParameterSource.DEFAULT)
    assert _onoff(ctx, param, False) is None
    ctx.set_parameter_source("tune", ParameterSource.COMMANDLINE)
    assert _onoff(ctx, param, False) is False and _onoff(ctx, param, True) is True
