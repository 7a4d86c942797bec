"""`python -m xlabench ...` runs the CLI (same as the `xlabench` script)."""

from xlabench.cli import main

main()
