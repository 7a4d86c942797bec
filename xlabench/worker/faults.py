"""Fault injection for the tests of the runner's recovery: cases matching XLABENCH_INJECT_FAULT raise, exit hard, die by SIGSEGV or hang."""

from __future__ import annotations

import json
import os
import signal
import time
from typing import Any

FAULT_ENV = "XLABENCH_INJECT_FAULT"


def inject_fault(req: Any) -> None:
    """Test hook: XLABENCH_INJECT_FAULT='[{"match": {"impl": "flash"}, "fault": "exit"}, ...]' makes
    matching cases raise, exit hard, die by SIGSEGV or hang, so the runner's recovery is tested for real."""
    raw = os.environ.get(FAULT_ENV)
    if not raw:
        return
    specs = json.loads(raw)
    fields = {"impl": req.impl, "backend": req.backend, **req.params}  # a RunRequest or CompileRequest
    for spec in specs if isinstance(specs, list) else [specs]:
        if all(fields.get(k) == v for k, v in spec.get("match", {}).items()):
            _fault(spec["fault"])


def _fault(fault: str) -> None:
    if fault == "raise":
        raise RuntimeError("injected fault: raise")
    if fault == "exit":
        os._exit(17)
    if fault == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if fault == "hang":
        while True:
            time.sleep(1)


