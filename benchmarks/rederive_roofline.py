"""Re-derive the stored roofline columns of committed run files from their inputs (issue 50).

The roofline of a row (xlabench/roofline.py) is a function of the row's counts (``xla_flops``,
``xla_bytes_accessed``, ``flops``, ``bytes`` ...), its peaks, its case columns (``causal``) and its median.
Rows written before the row builder handed the roofline the full row (flash causal fwd: the causal rule
never applied, stored at roofline_frac 1.05-1.32) or before a memory floor of XLA's bytes that the row
beats gave way to the bytes it must move, carry stale figures. This rewrites only the roofline columns
(``arith_intensity``, ``bound_s``, ``collective_s``, ``bound_by``, ``roofline_frac``, ``mfu_ceiling``,
``roofline_source``, ``roofline_note``) of each ok or compiled row, and an accelerator row's ``suspect``
marks where its roofline changed; every other cell, the measurements included, stays byte for byte as it
was written.

    python benchmarks/rederive_roofline.py docs/data            # rewrite in place, one line per changed file
    python benchmarks/rederive_roofline.py --check docs/data    # exit 1 if a file would change

`xlabench audit` (rule ``roofline_columns``) checks that the stored columns equal this recomputation.
"""

from __future__ import annotations

import argparse
import csv
import io
import sys
from pathlib import Path

from xlabench import audit
from xlabench.audit import files as audit_files
from xlabench.audit.invariants import ROOFLINE_NUMBERS, _roof
from xlabench.protocol.status import COMPILED, OK
from xlabench.results.files import _cell

COLUMNS = (*ROOFLINE_NUMBERS, "bound_by", "roofline_source", "roofline_note")


def rederive(path: Path) -> tuple[str, int]:
    """The file's text with its roofline columns re-derived, and how many rows changed."""
    text = path.read_bytes().decode("utf-8")  # not read_text: it turns a written file's \r\n into \n
    raw = list(csv.DictReader(io.StringIO(text)))
    fields = list(csv.DictReader(io.StringIO(text)).fieldnames or [])
    typed = audit_files.read_run(path)
    assert len(raw) == len(typed), path
    changed = 0
    for cells, row in zip(raw, typed):
        if str(row.get("status")) not in (OK, COMPILED) or "bound_s" not in cells or not cells.get("bound_s"):
            continue
        roof = _roof(row)
        new = {c: _cell(roof.get(c)) for c in COLUMNS if c in cells}
        if any(cells[c] != v for c, v in new.items()):
            if "suspect" in cells and str(row.get("platform")) != "cpu":  # the row's marks follow its roofline
                new["suspect"] = _cell(audit.suspect_text(audit.check_row({**row, **roof}, audit.Host())))
            cells.update(new)
            changed += 1
    if not changed:
        return text, 0
    out = io.StringIO()
    w = csv.DictWriter(out, fieldnames=fields, lineterminator="\r\n" if "\r\n" in text else "\n")
    w.writeheader()
    w.writerows(raw)
    return out.getvalue(), changed


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--check", action="store_true", help="change nothing; exit 1 if a file would change")
    args = ap.parse_args(argv)
    stale = 0
    for path in audit_files.run_files(args.paths):
        text, changed = rederive(path)
        if not changed:
            continue
        stale += 1
        print(f"{path}: {changed} row(s) {'would change' if args.check else 're-derived'}")
        if not args.check:
            path.write_bytes(text.encode("utf-8"))
    return 1 if (stale and args.check) else 0


if __name__ == "__main__":
    sys.exit(main())
