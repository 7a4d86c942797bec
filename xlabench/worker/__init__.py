"""The worker process: one per (backend, device count, variant), started by the parent's pool as
``python -m xlabench.worker``; it imports one framework and answers probe / target / run / compile
requests over a pipe.

Modules: ``main`` (the request loop and its ops), ``parent_watch`` (dying with the parent), ``faults``
(fault injection for tests). What crosses the pipe is typed in ``xlabench.measure.worker_messages``; the
parent imports ``measure``, never this package.
"""

from xlabench.worker.faults import FAULT_ENV

__all__ = ["FAULT_ENV"]
