"""The worker process: one per (backend, device count, variant), started by the parent's pool as
``python -m xlabench.worker``; it imports one framework and answers probe / target / run / compile
requests over a pipe.

Its modules: README.md, Layout. What crosses the pipe is typed in ``xlabench.protocol.worker_messages``; the
parent imports ``measure``, never this package.
"""

from xlabench.worker.faults import FAULT_ENV

__all__ = ["FAULT_ENV"]
