"""What every command module shares: the consoles, the bad-input exception (exit 2) and loading a suite."""

from __future__ import annotations

import sys
from typing import Any

import click
from rich.console import Console

from xlabench import suite as suite_lib

# Piped output (CI logs) gets a wide console instead of rich's 80-column default.
console = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err_console = Console(stderr=True, highlight=False)


class BadInput(click.ClickException):
    """Bad user input: a clear message and exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        err_console.print(f"[bold red]error:[/] {self.message}", markup=True, soft_wrap=True)


def load_suite(path: str) -> suite_lib.Suite:
    try:
        return suite_lib.load(path)
    except suite_lib.SuiteError as e:
        raise BadInput(str(e)) from None


def warn(text: str) -> None:
    """A warning line on stderr (markup-free: the text may hold brackets)."""
    err_console.print("[yellow]warning:[/] ", end="", markup=True)
    err_console.print(text, markup=False, soft_wrap=True)
