"""`xlabench explain`: where each row's step time goes, by category of HLO op (xlabench/explain/)."""

from __future__ import annotations

from pathlib import Path

import click

from xlabench.cli.common import BadInput, console, examples, output_file
from xlabench.cli.click_options import run_options
from xlabench.run.run_options import RunOptions


@click.command(epilog=examples("xlabench explain results/gpt2/RUN.csv -k impl=flash   # after: run ... --explain",
                               "xlabench explain results/gpt2/RUN.compile.csv   # after: compile ... --explain"))
@click.argument("csv_file", type=click.Path(dir_okay=False))
@run_options("where")
def explain(csv_file: str, run_opts: RunOptions) -> None:
    """Break each row's step into matmuls, attention kernels, elementwise, copies, collectives, the
    optimizer update and idle: measured from the profile a `run --explain` kept, or estimated from the
    HLO of a `compile --explain` row. Prints a table per row, writes RUN.explain.json and the explain_*
    columns of the CSV."""
    from xlabench.explain import report, runfile

    def load_planes(path: Path) -> list:
        from xlabench.backends.jax.trace_timer import load_planes as load

        try:
            return load(str(path))
        except Exception as e:  # a truncated or foreign file
            raise runfile.ExplainError(f"{path}: not a readable profile ({type(e).__name__}: {str(e)[:120]})") from None

    csv = Path(csv_file)
    if csv.name.endswith(".csv") and csv.is_file():  # RUN.explain.json and the CSV's explain_* columns: checked before any trace
        output_file(csv.with_name(csv.name[:-4] + runfile.JSON_SUFFIX), "explain", "the breakdowns beside the run")
        output_file(csv, "explain", "the run's explain_* columns")
    try:
        done = runfile.explain_run(Path(csv_file), run_opts.where, load_planes)
    except runfile.ExplainError as e:
        raise BadInput(str(e)) from None
    labels = done.labels()
    for b in done.breakdowns:
        console.print(report.text(b, labels[b.case_id]) + "\n", markup=False, highlight=False, soft_wrap=True)
    for line in done.not_explained:
        console.print(line, markup=False, highlight=False, soft_wrap=True)
    path = runfile.write(done)
    console.print(f"wrote {path} and the explain_* columns of {csv_file}", markup=False, soft_wrap=True)
