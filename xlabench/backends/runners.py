"""A backend's table of case runners: workload -> ``"module:function"``, imported on first use."""

from __future__ import annotations

import importlib
from typing import Any, Callable


def runner_table(package: str, runners: dict[str, str]) -> Callable[[str], Callable[..., Any]]:
    """A backend's ``runner_for`` / ``compiler_for``: the function for ``workload`` in ``package``
    (a worker imports only the workloads it runs)."""

    def runner_for(workload: str) -> Callable[..., Any]:
        """The function that runs (or compiles) one case of ``workload``."""
        if workload not in runners:
            raise ValueError(f"the {package.rsplit('.', 1)[-1]} backend has no workload {workload!r} "
                             f"(it runs: {', '.join(runners)})")
        module, function = runners[workload].split(":")
        return getattr(importlib.import_module(f"{package}.{module}"), function)

    return runner_for
