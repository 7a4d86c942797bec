"""A backend's table of case runners, read from the workload records (workloads.WORKLOADS): each record names
its runner and its compiler as ``"module:function"`` in a backend's package; imported on first use."""

from __future__ import annotations

import importlib
from typing import Any, Callable

from xlabench.workloads import WORKLOADS

KINDS = ("runner", "compiler")  # the record's fields: the function that runs a case, the one that compiles it


def runner_table(package: str, kind: str) -> Callable[[str], Callable[..., Any]]:
    """A backend's ``runner_for`` (``kind`` "runner") / ``compiler_for`` ("compiler"): the function for
    ``workload`` in ``package``, as the workload's record names it (a worker imports only the workloads it runs)."""
    if kind not in KINDS:
        raise ValueError(f"a runner table's kind is one of {', '.join(KINDS)}, not {kind!r}")
    runners = {name: getattr(w, kind) for name, w in WORKLOADS.items() if getattr(w, kind)}

    def runner_for(workload: str) -> Callable[..., Any]:
        """The function that runs (or compiles) one case of ``workload``."""
        if workload not in runners:
            raise ValueError(f"the {package.rsplit('.', 1)[-1]} backend has no workload {workload!r} "
                             f"(it runs: {', '.join(runners)})")
        module, function = runners[workload].split(":")
        return getattr(importlib.import_module(f"{package}.{module}"), function)

    return runner_for
