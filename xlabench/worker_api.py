"""What workers and the parent share: framework-free message shapes and the skip signal."""

from __future__ import annotations

import importlib
from typing import Any, Callable


class CaseSkipped(Exception):
    """Raised by a backend when an impl cannot run a case (the message is the reason in the row)."""


def runner_table(package: str, runners: dict[str, str]) -> Callable[[str], Callable[..., dict[str, Any]]]:
    """A backend's ``runner_for``: workload -> ``"module:function"`` in ``package``, imported on first use
    (a worker imports only the workloads it runs)."""

    def runner_for(workload: str) -> Callable[..., dict[str, Any]]:
        """The function that runs one case of ``workload`` and returns row fields plus samples."""
        if workload not in runners:
            raise ValueError(f"the {package.rsplit('.', 1)[-1]} backend has no workload {workload!r} "
                             f"(it runs: {', '.join(runners)})")
        module, function = runners[workload].split(":")
        return getattr(importlib.import_module(f"{package}.{module}"), function)

    return runner_for
