"""`python -m xlabench.worker --backend B --parent-pid PID`: the worker loop (xlabench/worker/main.py)."""

import sys

from xlabench.worker.main import main

sys.exit(main())
