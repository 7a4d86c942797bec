"""`xlabench audit FILE|DIR...`: every row of the run files against the invariants (xlabench/audit), one
line per broken rule; exit 1 when a row breaks one that is not a listed exception, 2 on bad input."""

from __future__ import annotations

import sys
from typing import Optional

import click

from xlabench.cli.common import BadInput, console, examples, warn


@click.command(epilog=examples("xlabench audit docs/data", "xlabench audit results/gpt2/20261206-101010-ab12.csv",
                               "xlabench audit results/ --exceptions my-exceptions.yaml"))
@click.argument("paths", nargs=-1, required=True, type=click.Path())
@click.option("--exceptions", "exceptions_file", default=None, type=click.Path(dir_okay=False),
              help="The known exceptions (YAML) instead of each file's nearest audit-exceptions.yaml.")
def audit(paths: tuple[str, ...], exceptions_file: Optional[str]) -> None:
    """Check every row of run files (any schema version) against the invariants: 0 < MFU, MBU <= 1; at
    most the roofline (tolerance in docs/audit.md); derived columns equal their recomputation; a tuned
    row's median and default_s within 15% of its search's. One line per broken rule; exit 1 if any is not
    a listed exception (audit-exceptions.yaml beside the data), 0 when clean."""
    from pathlib import Path

    from xlabench.audit import files as audit_files

    try:
        found = audit_files.audit(paths, Path(exceptions_file) if exceptions_file else None)
    except audit_files.AuditInputError as e:
        raise BadInput(str(e)) from None
    for f in found.findings:
        line = f"{f.path}: {f.case} (case {f.case_id}): {f.rule}: {f.reason}"
        console.print(line + (f"  [known exception: {f.exception}]" if f.exception else ""), soft_wrap=True)
    for entry in found.unused:
        warn(f"{entry} matched no finding (stale?)")
    broken = len(found.broken)
    console.print(f"audit: {len(found.files)} file(s), {found.rows} ok row(s): {broken} broken rule(s), "
                  f"{len(found.findings) - broken} known exception(s), {found.cache_resident} cache-resident row(s)"
                  + (f"; {found.wrong} WRONG RESULT row(s) not audited (their figures are not the work's)"
                     if found.wrong else ""),
                  soft_wrap=True)
    if broken:
        sys.exit(1)
