"""Regenerate the README's CSV column table from xlabench/results/schema.py (the one place for the schema)."""

from __future__ import annotations

import re
from pathlib import Path

from xlabench.results.display import columns_markdown

START, END = "<!-- columns:start -->", "<!-- columns:end -->"


def table() -> str:
    return columns_markdown()


def main() -> None:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    text = readme.read_text()
    block = f"{START}\n{table()}\n{END}"
    if START in text:
        text = re.sub(re.escape(START) + ".*?" + re.escape(END), lambda _: block, text, flags=re.S)
    else:
        text = text.replace("COLUMNS_TABLE", block)
    readme.write_text(text)


if __name__ == "__main__":
    main()
