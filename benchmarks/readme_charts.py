"""Regenerate the README's GPT-2 CPU charts and MFU table from one run (`make readme-charts`).

`make run` writes only to untracked folders (results/, plots/); the README's own charts live in
docs/img/ and change only when this script is run on purpose, so the charts and the MFU table beside
them always come from the same run.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pandas as pd

from xlabench.report import chartdata as cd
from xlabench.report import inputs
from xlabench.report import plots

ROOT = Path(__file__).resolve().parent.parent
IMG = ROOT / "docs" / "img"
START, END = "<!-- gpt2-mfu:start -->", "<!-- gpt2-mfu:end -->"


def mfu_table(df: pd.DataFrame) -> str:
    """Markdown table: MFU in % per global batch (rows) and sharding x impl (columns), JAX ok rows."""
    ok = df[(df["status"] == "ok") & (df["backend"] == "jax")]
    if ok.empty:
        raise SystemExit("no ok JAX rows in the run: nothing to tabulate")
    cols = sorted({(str(s), str(i)) for s, i in zip(ok["sharding"], ok["impl"])})
    batches = sorted({int(b) for b in ok["global_batch"]})
    lines = ["| global batch | " + " | ".join(f"{s} {i}" for s, i in cols) + " |",
             "|---|" + "---|" * len(cols)]
    for b in batches:
        cells = []
        for s, i in cols:
            hit = ok[(ok["global_batch"].astype(int) == b) & (ok["sharding"] == s) & (ok["impl"] == i)]
            cells.append(f"{100 * float(hit['mfu'].iloc[0]):.1f}" if len(hit) else "-")
        lines.append(f"| {b} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def replace_block(text: str, table: str) -> str:
    """The README with the table between the markers replaced (the markers must be there)."""
    if START not in text or END not in text:
        raise SystemExit(f"README.md lacks the markers {START} ... {END}")
    block = f"{START}\n{table}\n{END}"
    return re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("csv", nargs="?", help="gpt2 run CSV (default: the newest under results/gpt2/)")
    args = ap.parse_args()
    if args.csv:
        csv = Path(args.csv)
    else:
        found = inputs.newest_usable(ROOT / "results" / "gpt2", compiles=False).files
        if not found:
            raise SystemExit("no run with an ok row under results/gpt2/: run `xlabench run suites/gpt2.yaml` first")
        csv = found[0]
    df = cd.load([csv])
    files, _ = plots.render(df, IMG / "gpt2", ["png"], ["mfu_batch", "sharding"])
    readme = ROOT / "README.md"
    readme.write_text(replace_block(readme.read_text(), mfu_table(df)))
    for f in files:
        print(f"chart: {f.relative_to(ROOT)}")
    print(f"README MFU table: from {csv}")


if __name__ == "__main__":
    main()
