"""The run options as click options, declared once: ``run``, ``gate``, ``compile`` and ``list`` take the
ones they need from ``run_options(...)`` and receive one frozen RunOptions (``run_opts``), so the same
flag has the same name, type, range and help everywhere. Ranges come from xlabench.run.run_options.LIMITS:
a bad value is exit 2 before anything starts."""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Optional

import click

from xlabench.run.run_options import FLAGS, LIMITS, Flag, OptionError, RunOptions, parse_where


def _range(name: str) -> click.ParamType:
    limit = LIMITS[name]
    kind = click.IntRange if limit.integer else click.FloatRange
    return kind(min=limit.low, max=limit.high, min_open=limit.open_low)


def _where(ctx: click.Context, param: click.Parameter, value: tuple[str, ...]) -> tuple[tuple[str, str], ...]:
    try:
        return parse_where(value)
    except OptionError as e:
        raise click.BadParameter(str(e), ctx, param) from None


def _onoff(ctx: click.Context, param: click.Parameter, value: Optional[bool]) -> Optional[bool]:
    """``--x/--no-x`` with no default: None unless typed (click before 8.2 turns a flag's None default into
    False, and on the v5e's package index `run` then read --no-tune and tuned nothing)."""
    from click.core import ParameterSource

    return None if ctx.get_parameter_source(param.name) in (ParameterSource.DEFAULT, None) else value


def _shard(ctx: click.Context, param: click.Parameter, value: Optional[str]) -> Optional[str]:
    from xlabench.run.shard import parse_shard

    if value is not None:
        try:
            parse_shard(value)
        except ValueError as e:
            raise click.BadParameter(str(e), ctx, param) from None
    return value


def _click(name: str, flag: Flag, default: Any) -> Callable:
    """The click option of a RunOptions field, from its one declaration (run_options.Flag)."""
    kw: dict[str, Any] = dict(help=flag.help, show_default=flag.show_default)
    if flag.metavar:
        kw["metavar"] = flag.metavar
    kind = flag.kind
    if kind == "flag":
        kw["is_flag"] = True
    else:
        kw["default"] = default
    if kind in ("multiple", "where") or (kind == "choice" and isinstance(default, tuple)):
        kw["multiple"] = True
    kw["type"] = {"number": lambda: _range(name), "path_dir": lambda: click.Path(file_okay=False),
                  "path_file": lambda: click.Path(dir_okay=False),
                  "choice": lambda: click.Choice(flag.choices)}.get(kind, lambda: None)()
    kw["callback"] = {"where": _where, "shard": _shard, "onoff": _onoff}.get(kind)
    return click.option(*flag.flags, name, **{k: v for k, v in kw.items() if v is not None})


# RunOptions field -> its click option, derived from the field's declaration (xlabench/run/run_options.py).
OPTIONS: dict[str, Callable[[], Callable]] = {
    f.name: functools.partial(_click, f.name, f.metadata["flag"], f.default)
    for f in dataclasses.fields(RunOptions) if "flag" in f.metadata}

_DEFAULTS = {f.name: f.default for f in dataclasses.fields(RunOptions)}


def run_options(*names: str, command: Optional[str] = None) -> Callable[[Callable], Callable]:
    """Add the named RunOptions fields as click options; the command receives them as one RunOptions,
    ``run_opts`` (a RunOptions check that fails is exit 2). ``command``: whose help to print, where an option
    does otherwise in that command (Flag.per_command: `compile --jobs` says what compile does, not run)."""
    unknown = set(names) - set(OPTIONS)
    if unknown:
        raise ValueError(f"no run option {sorted(unknown)}")

    def decorate(f: Callable) -> Callable:
        @functools.wraps(f)
        def wrapped(*args: Any, **kw: Any) -> Any:
            from xlabench.cli.common import BadInput

            given = {n: kw.pop(n) for n in names}
            try:
                kw["run_opts"] = RunOptions(**given)
            except OptionError as e:
                raise BadInput(str(e)) from None
            return f(*args, **kw)

        for name in reversed(names):
            flag = FLAGS[name]
            said = flag.help_for(command)
            opt = OPTIONS[name]() if said == flag.help else _click(name, dataclasses.replace(flag, help=said),
                                                                   _DEFAULTS[name])
            wrapped = opt(wrapped)
        return wrapped

    return decorate
