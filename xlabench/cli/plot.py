"""`xlabench plot` and `xlabench report`: charts and a markdown report from results CSVs.

Registered on the main group in xlabench/cli/__init__.py. pandas and matplotlib are imported when a
command runs, not when the CLI starts (`xlabench --help` stays fast).
"""

from __future__ import annotations

import contextlib
from pathlib import Path
from typing import TYPE_CHECKING, Any, Iterator, Optional

import click

from xlabench import results
from xlabench.cli.common import BadInput, examples, output_dir
from xlabench.report import inputs as inputs_lib

if TYPE_CHECKING:
    import pandas as pd

    from xlabench.report import plots

FORMATS = ("png", "svg", "pdf")


def _bad(message: str) -> click.ClickException:
    return BadInput(message)


def _inputs(paths: tuple[str, ...], results_dir: str) -> list[Path]:
    """CSV files as given (a run's .samples.csv left out); a folder (or nothing: the results folder) means
    its newest run per suite that has an ok row, and its newest compile; says on stderr which it took."""
    if not paths and not Path(results_dir).is_dir():
        raise _bad(f"{results_dir}: no such folder (pass CSV files, or run `xlabench run SUITE.yaml` first)")
    found = inputs_lib.collect(paths or (results_dir,))
    for note in found.notes:
        click.echo(f"note: {note}", err=True)
    if not found.files:
        where = ", ".join(paths or (results_dir,))
        raise _bad(f"{where}: no xlabench results CSV with an ok row here (run `xlabench run SUITE.yaml` first)")
    return found.files


@contextlib.contextmanager
def _file_errors() -> Iterator[None]:
    """A run's file that turns out bad only when read for a chart or a table (its samples): exit 2, one line."""
    try:
        yield
    except results.ResultsFileError as e:
        raise _bad(str(e)) from None


def _load(files: list[Path]) -> "pd.DataFrame":
    from xlabench.report import chartdata as cd

    try:
        df = cd.load(files)
    except results.ResultsFileError as e:
        raise _bad(str(e)) from None
    if df.empty:
        raise _bad(f"no rows in {', '.join(map(str, files))} (a run that ended before its first case?)")
    return df


def _formats(spec: str) -> list[str]:
    fmts = [f.strip().lower() for f in spec.split(",") if f.strip()]
    unknown = [f for f in fmts if f not in FORMATS]
    if unknown or not fmts:
        raise _bad(f"--format {spec!r}: expected a comma list of {', '.join(FORMATS)}")
    return fmts


def _kinds(spec: tuple[str, ...], df: "pd.DataFrame") -> Optional[list[str]]:
    """--kind values (repeatable or comma lists) checked against the registry and the rows' workloads."""
    from xlabench.report import plots

    names = [k.strip() for s in spec for k in s.split(",") if k.strip()]
    if not names:
        return None
    unknown = [k for k in names if k not in plots.KINDS]
    if unknown:
        raise _bad(f"--kind {', '.join(unknown)}: unknown; expected one of {', '.join(plots.KINDS)}")
    callable_kinds = plots.kinds_for(df)
    absent = [k for k in names if k not in callable_kinds]
    if absent:
        need = ", ".join(f"{k} needs {_needs(plots.KINDS[k])}" for k in absent)
        raise _bad(f"--kind: {need}; these CSVs hold {_holds(df)}")
    return names


def _needs(kind: "plots.Kind") -> str:
    rows = " or ".join(kind.workloads) + " rows"
    return f"`xlabench compile` {rows}" if kind.source == "compile" else rows


def _holds(df: "pd.DataFrame") -> str:
    from xlabench.report import chartdata as cd

    comp = cd.is_compile(df)
    run = sorted(set(cd.text(df.loc[~comp, "workload"])))
    compiled = sorted(set(cd.text(df.loc[comp, "workload"])))
    return "; ".join(p for p in (", ".join(run), f"compile rows of {', '.join(compiled)}" if compiled else "") if p)


def render_suites(df: "pd.DataFrame", out_dir: Path, formats: list[str], kinds: Optional[list[str]],
                  global_batch: Optional[float]) -> dict[str, list[Path]]:
    """Charts of every suite in the rows under out_dir/<suite>/; prints what was left out and why."""
    from xlabench.report import chartdata as cd
    from xlabench.report import plots

    written: dict[str, list[Path]] = {}
    for suite in cd.distinct(df["suite"]):
        rows = df[df["suite"] == suite]
        wanted = [k for k in kinds if k in plots.kinds_for(rows)] if kinds else None
        if kinds and not wanted:
            continue
        try:
            files, left_out = plots.render(rows, out_dir / str(suite), formats, wanted, global_batch)
        except plots.NoData as e:
            raise _bad(f"suite {suite}: {e}") from None
        for why in left_out:
            click.echo(f"note: {suite}: no {why}", err=True)
        written[str(suite)] = files
    return written


class _KindOption(click.Option):
    """--kind, whose help lists the chart kinds only when help is shown (the registry imports matplotlib)."""

    def get_help_record(self, ctx: click.Context) -> Any:
        from xlabench.report import plots

        self.help = ("Chart kind(s) (repeatable or comma list; default: every kind the rows call for): "
                     f"{', '.join(plots.KINDS)}.")
        return super().get_help_record(ctx)


_CSV_ARG = click.argument("csv_files", nargs=-1, type=click.Path())
_RESULTS_OPT = click.option("--results", "results_dir", default="results", show_default=True,
                            type=click.Path(file_okay=False),
                            help="Folder searched for the newest run and compile of every suite when no CSV is given.")
_BATCH_OPT = click.option("--global-batch", type=click.FloatRange(min=0, min_open=True), default=None,
                          help="Global batch of the sharding chart (default: the largest every mode has a row for).")


@click.command(epilog=examples("xlabench plot", "xlabench plot results/attention/ --kind speedup --format png",
                               "xlabench plot results/attention/RUN.csv --out plots"))
@_CSV_ARG
@click.option("--out", "out_dir", default="plots", show_default=True, type=click.Path(file_okay=False),
              help="Charts go to OUT/<suite>/<kind>.<format>.")
@click.option("--format", "format_spec", default="png,svg", show_default=True, help="Comma list: png, svg, pdf.")
@click.option("--kind", "kind_spec", multiple=True, cls=_KindOption)
@_BATCH_OPT
@_RESULTS_OPT
def plot(csv_files: tuple[str, ...], out_dir: str, format_spec: str, kind_spec: tuple[str, ...],
         global_batch: Optional[float], results_dir: str) -> None:
    """Charts from results CSVs (or folders; none: the newest run and compile of every suite under results/)."""
    formats = _formats(format_spec)
    files = _inputs(csv_files, results_dir)
    df = _load(files)
    output_dir(out_dir, "--out", "charts go to OUT/<suite>/<kind>.<format>")
    with _file_errors():
        written = render_suites(df, Path(out_dir), formats, _kinds(kind_spec, df), global_batch)
    n = sum(len(v) for v in written.values())
    for suite, paths in written.items():
        for p in paths:
            click.echo(f"{suite}: {p}")
    click.echo(f"{n} file(s) from {len(df)} row(s) of {len(files)} run file(s)")


@click.command(epilog=examples("xlabench report", "xlabench report results/gpt2/ --out gpt2.md --no-charts"))
@_CSV_ARG
@click.option("--out", "out_file", default="plots/report.md", show_default=True, type=click.Path(dir_okay=False),
              help="Markdown file to write (plots/ beside the charts: git ignores it).")
@click.option("--plots-dir", default=None, type=click.Path(file_okay=False),
              help="Where the report's PNG charts go (default: <report name>_plots/ beside the report).")
@click.option("--no-charts", is_flag=True, help="Tables only.")
@_BATCH_OPT
@_RESULTS_OPT
def report(csv_files: tuple[str, ...], out_file: str, plots_dir: Optional[str], no_charts: bool,
           global_batch: Optional[float], results_dir: str) -> None:
    """Markdown report: environment, best impl per shape, failed/skipped cases with reasons, charts."""
    from xlabench.report import markdown as report_lib

    files = _inputs(csv_files, results_dir)
    df = _load(files)
    out = Path(out_file)
    output_dir(out.parent, "--out", "the folder of the report file")
    charts: dict[str, list[Path]] = {}
    if not no_charts:
        pdir = Path(plots_dir) if plots_dir else out.with_name(out.stem + "_plots")
        output_dir(pdir, "--plots-dir" if plots_dir else "--out", "the report's charts go to <report name>_plots/")
        with _file_errors():
            charts = render_suites(df, pdir, ["png"], None, global_batch)
    with _file_errors():
        text = report_lib.build(df, files, charts, out)
    try:
        out.write_text(text + "\n", encoding="utf-8")
    except OSError as e:
        raise _bad(f"--out: cannot write {out}: {e.strerror or e}") from None
    click.echo(f"report: {out} ({len(df)} row(s), {sum(len(v) for v in charts.values())} chart(s))")
