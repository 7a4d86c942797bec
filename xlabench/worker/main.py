"""Worker process: imports one framework, answers probe/run requests from the parent over a pipe.

Protocol: one JSON object per line. The parent writes requests to stdin; replies go to the original
stdout, while everything else anyone prints (Python or C++) is sent to stderr, i.e. the run's log.
The parent never imports a framework; a crash or hang here costs one case, not the run.
"""

from __future__ import annotations

import argparse
import importlib
import json
import os
import sys
import time
import traceback
from typing import Any, Optional

from xlabench.protocol.replies import Reply
from xlabench.protocol.worker_messages import CaseResult, CaseSkipped, CompileRequest, ProtocolError, RunRequest
from xlabench.protocol.target import TargetSpec
from xlabench.worker.faults import inject_fault
from xlabench.worker.parent_watch import die_with_parent
from xlabench.protocol.status import FAILED, OK, SKIPPED


def _failed(e: Exception) -> Reply:
    """One case's failure: a failed row with the exception's text; the worker lives on."""
    traceback.print_exc(file=sys.stderr)
    return Reply(status=FAILED, error=f"{type(e).__name__}: {e}".strip()[:2000])


def _compile_cached(backend: Any) -> Optional[bool]:
    """Whether the case's timed compile was served by the persistent cache (None: the backend cannot
    tell); reading it clears it."""
    take = getattr(backend, "take_compile_cached", None)
    return take() if take is not None else None


def with_other_phase(result: CaseResult, elapsed: float) -> CaseResult:
    """``result`` with its phase seconds completed: the case's time in the worker that none of the runner's
    phases named (all of it for a runner that names none), as ``other``."""
    rest = elapsed - sum(result.phase_s.values())
    return result.replace(phase_s={**result.phase_s, "other": round(rest, 3)}) if rest >= 0.0005 else result


def _run(backend: Any, msg: dict[str, Any]) -> Reply:
    """Op ``run``: the reply's ``result`` is the case's CaseResult (status ok), else skipped / failed."""
    try:
        req = RunRequest.from_message(msg)
    except ProtocolError as e:  # a parent of another xlabench version
        return Reply(status=FAILED, error=f"request: {e}")
    try:
        inject_fault(req)
        runner = backend.runner_for(req.workload)
        _compile_cached(backend)  # forget an earlier case's
        t0 = time.perf_counter()
        result = runner(dict(req.params), req.impl, req.plan, req.interpret, req.platform)
        result = with_other_phase(result, time.perf_counter() - t0)
        cached = _compile_cached(backend)
        if cached is not None:
            result = result.replace(compile_cached=cached)
        return Reply(status=OK, result=result.to_message())
    except CaseSkipped as e:
        return Reply(status=SKIPPED, error=str(e))
    except Exception as e:  # any failure of one case becomes a failed row
        return _failed(e)


def _compile(backend: Any, msg: dict[str, Any]) -> Reply:
    """Op ``compile`` (``xlabench compile``): the reply's ``result`` is a CompileResult (compiled / oom /
    lowered), else skipped / failed."""
    try:
        req = CompileRequest.from_message(msg)
    except ProtocolError as e:
        return Reply(status=FAILED, error=f"request: {e}")
    if not hasattr(backend, "compiler_for"):
        return Reply(status=SKIPPED, error=f"the {req.backend} backend cannot compile for a target "
                                           "without its devices (see docs/compile.md)")
    try:
        inject_fault(req)
        _compile_cached(backend)
        if hasattr(backend, "keep_hlo_in"):
            backend.keep_hlo_in(req.keep_dir)
        result = backend.compiler_for(req.workload)(dict(req.params), req.impl, req.target, req.plan, req.interpret)
        cached = _compile_cached(backend)
        if cached is not None:
            result = result.with_fields(compile_cached=cached)
        return Reply(status=result.status, result=result.to_message())
    except CaseSkipped as e:
        return Reply(status=SKIPPED, error=str(e))
    except Exception as e:  # one case's failure is a failed row
        return _failed(e)


def _fit(backend: Any, msg: dict[str, Any]) -> Reply:
    """Op ``fit`` (suite/slice_fit.py): the memory probes of a suite's candidate models, or an error."""
    if not hasattr(backend, "fit_models"):
        return Reply(error="this backend cannot fit a model to its devices")
    try:
        return Reply(fit=backend.fit_models(msg["candidates"], msg["impls"], msg.get("platform", ""), msg.get("target")))
    except Exception as e:
        traceback.print_exc()
        return Reply(error=f"{type(e).__name__}: {e}"[:1000])


def _target_env(msg: dict[str, Any]) -> dict[str, Any]:
    """The target's devices as the row's environment (and the check that this host can compile for it)."""
    from xlabench.backends.jax.compile_case import target_env

    return target_env(TargetSpec.from_message(msg["target"]))


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m xlabench.worker")
    ap.add_argument("--backend", required=True)
    ap.add_argument("--parent-pid", type=int, default=None,
                    help="Die when this process (the runner that started the worker) dies.")
    args = ap.parse_args(argv)
    if args.parent_pid is not None:  # first, before the framework import (seconds) and any compile
        die_with_parent(args.parent_pid)

    proto = os.fdopen(os.dup(1), "w", buffering=1, encoding="utf-8")
    os.dup2(2, 1)  # stray prints (Python or C) go to the log, never into the protocol
    sys.stdout = sys.stderr

    def reply(obj: Reply) -> None:
        proto.write(json.dumps(obj.to_message(), default=float) + "\n")
        proto.flush()

    try:
        backend = importlib.import_module(f"xlabench.backends.{args.backend}")
    except Exception as e:
        traceback.print_exc()
        reply(Reply(fatal=f"cannot import backend {args.backend!r}: {type(e).__name__}: {e}"))
        return 3
    for line in sys.stdin:
        msg = json.loads(line)
        op = msg.get("op")
        if op == "probe":
            try:
                reply(Reply(env=backend.probe(measure_peaks=msg.get("measure_peaks", True))))
            except Exception as e:
                traceback.print_exc()
                reply(Reply(fatal=f"probe failed: {type(e).__name__}: {e}"))
        elif op == "target":
            try:
                reply(Reply(env=_target_env(msg)))
            except Exception as e:
                traceback.print_exc()
                reply(Reply(fatal=f"{type(e).__name__}: {e}".strip()[:1000]))
        elif op == "fit":
            reply(_fit(backend, msg))
        elif op == "compile":
            print(f"--- compile {msg.get('case_id')} {msg.get('impl')} {msg.get('params')}", file=sys.stderr, flush=True)
            reply(_compile(backend, msg))
        elif op == "run":
            print(f"--- case {msg.get('case_id')} {msg.get('impl')} {msg.get('params')}", file=sys.stderr, flush=True)
            reply(_run(backend, msg))
        else:
            reply(Reply(fatal=f"unknown op {op!r}"))
    return 0
