"""`python -m xlabench.cli ...`: the same CLI as `python -m xlabench` and the `xlabench` script."""

from xlabench.cli import main

main()
