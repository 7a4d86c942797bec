"""The status words of a case, in one place: a worker's reply and a CSV row use the same ones."""

from __future__ import annotations

OK, FAILED, SKIPPED = "ok", "failed", "skipped"
COMPILED, OOM, LOWERED = "compiled", "oom", "lowered"

RUN_STATUSES = (OK, FAILED, SKIPPED)  # a run's rows
# a compile's rows: compiled (fits), oom (compiles only past the device's HBM), lowered (GPU targets:
# lowering only), failed, skipped
COMPILE_STATUSES = (COMPILED, OOM, LOWERED, FAILED, SKIPPED)
COMPILE_RESULTS = (COMPILED, LOWERED, OOM)  # what a CompileResult may say (failed / skipped have no result)
