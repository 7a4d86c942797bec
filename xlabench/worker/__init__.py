"""The worker process: one per (backend, device count, variant), started by the parent's pool as
``python -m xlabench.worker``; it imports one framework and answers probe / target / run / compile
requests over a pipe.

Modules: ``main`` (the request loop and its ops), ``protocol`` (what worker and parent share: the
CaseResult reply, the skip signal, the backend runner table), ``timing`` (warm-up, timed iterations,
statistics), ``parent_watch`` (dying with the parent), ``faults`` (fault injection for tests). The
parent imports only ``protocol`` (framework-free).
"""

from xlabench.worker.faults import FAULT_ENV

__all__ = ["FAULT_ENV"]
