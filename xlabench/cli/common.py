"""What every command module shares: the consoles (markup off), the bad-input exception (exit 2), the
examples epilog and loading a suite.

Markup is off on both consoles: every message, path, note and error is printed as written, brackets
and all (`pip install -e '.[tpu-compile]'`, `[batch, heads, head_dim]`). Colour is a ``style=`` or a
rich Text, never a tag inside the text.
"""

from __future__ import annotations

import os
import sys
import textwrap
from typing import Any, Optional

import click
from rich.console import Console
from rich.text import Text

# Piped output (CI logs) gets a wide console instead of rich's 80-column default, unless COLUMNS says.
console = Console(highlight=False, markup=False,
                  width=None if sys.stdout.isatty() or os.environ.get("COLUMNS") else 160)
err_console = Console(stderr=True, highlight=False, markup=False)


class BadInput(click.ClickException):
    """Bad user input: a clear message and exit code 2, never a traceback."""

    exit_code = 2

    def show(self, file: Any = None) -> None:
        err_console.print(Text.assemble(("error:", "bold red"), " ", self.message), soft_wrap=True)


def output_dir(folder: Any, option: str, holds: str) -> Any:
    """The folder an output option names, created (results.make_dir); a file in its way or no
    permission is one error line naming the option, exit 2."""
    from xlabench import results

    try:
        return results.make_dir(folder, option, holds)
    except results.OutputPathError as e:
        raise BadInput(str(e)) from None


def output_file(path: Any, option: str, holds: str) -> Any:
    """The one check of an output file an option names, before any work: its folder can be made and written
    (output_dir), and the path is not a folder. Every command that writes a file calls it up front
    (merge -o, compare/gate --json/--markdown, gate --save-baseline, explain's JSON beside the run), so a
    path that cannot be written is one error line naming the option, exit 2, never a traceback after the
    work. A character device (/dev/stdout) passes as it is."""
    from pathlib import Path

    p = Path(path)
    if str(p).startswith("/dev/"):
        return p
    output_dir(p.parent, option, holds)
    if p.is_dir():
        raise BadInput(f"{option}: {p} is a folder, not a file ({holds})")
    if p.exists() and not os.access(p, os.W_OK):
        raise BadInput(f"{option}: cannot write {p}: permission denied ({holds})")
    return p


def load_suite(path: str) -> Any:
    """The suite at ``path`` (BadInput naming the file and the problem when it is not one)."""
    from xlabench import suite as suite_lib

    try:
        return suite_lib.load(path)
    except suite_lib.SuiteError as e:
        raise BadInput(str(e)) from None


def warn(text: str) -> None:
    """A warning on stderr: one line in a log or a pipe; on a terminal, wrapped between words at its width
    (the terminal's own wrap broke words: 'r|epeats')."""
    err_console.print(Text.assemble(("warning:", "yellow"), " ", text), soft_wrap=not err_console.is_terminal)


_WHOLE = "\u00a0"  # joins the words of a figure ("167.413 ms"): textwrap breaks only at ASCII whitespace


def status_line(status: str, style: Optional[str], width: int, rest: str, columns: Optional[int] = None,
                tail: str = "") -> Text:
    """``status`` coloured, padded to ``width``, then ``rest`` and ``tail`` (a case's progress line).

    With ``columns`` (the console's width) a line too long for it breaks between words, never inside a
    figure, and goes on under ``rest``; ``tail`` (e.g. "167.413 ms") is never broken. Without, as written.
    """
    text = f"{rest}  {tail.replace(' ', _WHOLE)}" if tail else rest
    if columns is not None and width + 1 + len(text) > columns:
        indent = " " * (width + 1)
        text = "\n".join(textwrap.wrap(text, max(20, columns - width - 1), subsequent_indent=indent,
                                        break_long_words=False, break_on_hyphens=False)).lstrip()
    return Text.assemble((f"{status:{width}}", style or ""), " ", text.replace(_WHOLE, " "))


def examples(*lines: str) -> str:
    """A command's --help epilog: an Examples section, kept as written (click's \\b: no rewrapping)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)
