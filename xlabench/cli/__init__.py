"""The ``xlabench`` command: one module per command group parses, calls the library, prints and picks
the exit code. No logic and no framework imports here; no library module imports from xlabench.cli.
The run options are declared once (click_options.py). Command modules import pandas, scipy and matplotlib
inside the commands that need them, so `--help`, `list`, `validate` and `info --peaks` start fast
(tests/test_startup.py).

Exit codes: 0 success; 1 a case failed or gave a wrong result (run), a confirmed regression (compare,
gate), a row that breaks an invariant not listed as an exception (audit); 2 bad input (suite file, CSV, option); 3 the gate could not judge; 130 / 143 interrupted by
SIGINT / SIGTERM (run, gate).
"""

from __future__ import annotations

from typing import Any

import click

from xlabench.cli import audit as audit_commands
from xlabench.cli import best as best_commands
from xlabench.cli import compile as compile_commands
from xlabench.cli import explain as explain_commands
from xlabench.cli import gate as gate_commands
from xlabench.cli import history as history_commands
from xlabench.cli import info as info_commands
from xlabench.cli import plot as plot_commands
from xlabench.cli import run as run_commands
from xlabench.cli import tune as tune_commands
from xlabench.cli.common import BadInput, console, err_console

__all__ = ["main", "BadInput", "console", "err_console"]


class _Main(click.Group):
    """The command group: a results file found unreadable deep in any command (a damaged run meta read by
    report, plot, compare, audit...: results.read_meta) is one error line and exit 2, as at the commands
    that catch it themselves."""

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except Exception as e:
            from xlabench import results

            if isinstance(e, results.ResultsFileError):
                raise BadInput(str(e)) from None
            raise


@click.group(cls=_Main, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="xlabench")
def main() -> None:
    """Benchmark attention kernels and training steps on XLA devices; report MFU; gate regressions."""


for command in (info_commands.info, info_commands.columns, run_commands.validate, run_commands.list_cases,
                run_commands.run, tune_commands.tune, run_commands.merge, plot_commands.plot, plot_commands.report,
                gate_commands.compare, gate_commands.gate, compile_commands.compile_cmd, best_commands.best,
                explain_commands.explain, history_commands.history, audit_commands.audit):
    main.add_command(command)

if __name__ == "__main__":
    main()
