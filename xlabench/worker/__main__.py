"""`python -m xlabench.worker --backend B --parent-pid PID`: the worker loop (xlabench/worker/main.py)."""

import os
import sys

from xlabench.worker.main import main

code = main()
# main returned (the parent closed the pipe, or the backend did not import): nothing is left to do. Leave
# without the interpreter's teardown, where JAX's atexit hook destroys every compiled executable one by one
# (memory the OS takes back at once anyway).
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
