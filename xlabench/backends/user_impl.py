"""Import a user impl in the worker: ``package.module:attr`` (or an entry point naming one).

Every way it can go wrong (no such module, the module raising at import, no such attribute, a wrong
signature or hook) is an ``ImplLoadError`` whose message names the path and the problem: the case is a
failed row, the run goes on. Framework-free: each backend wraps what this returns in its impl record.
"""

from __future__ import annotations

import importlib
import inspect
import os
import sys
from typing import Any, Callable, Optional, Sequence

from xlabench import impls as catalog
from xlabench.impls import attention_rules as rules
from xlabench.impls.configs import declared_space
from xlabench.protocol.worker_env import IMPL_PATH_VAR
from xlabench.workloads import attention


class ImplLoadError(Exception):
    """A user impl that cannot be used; the message is the row's error."""


def search_path() -> list[str]:
    """The folders the parent asked for (its cwd, the suite's folder), put on sys.path once."""
    dirs = [d for d in os.environ.get(IMPL_PATH_VAR, "").split(os.pathsep) if d]
    for d in reversed(dirs):
        if d not in sys.path:
            sys.path.insert(0, d)
    return dirs


def load(name: str) -> tuple[str, Any]:
    """(import path, the object) of a user impl, imported now."""
    try:
        path = catalog.user_target(name)
    except ValueError as e:
        raise ImplLoadError(str(e)) from None
    problem = catalog.path_problem(path)
    if problem:
        raise ImplLoadError(f"impl {name!r}: {problem}")
    module_name, _, attr = path.partition(":")
    dirs = search_path()
    try:
        obj: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name and (module_name == e.name or module_name.startswith(e.name + ".")):
            raise ImplLoadError(f"impl {path!r}: no module named {e.name!r} (searched the installed packages, "
                                f"PYTHONPATH and {', '.join(dirs) or 'no extra folder'}; pip install the "
                                "package or run from the folder that holds it)") from None
        raise ImplLoadError(f"impl {path!r}: importing {module_name!r} failed: {type(e).__name__}: {e}") from None
    except (Exception, SystemExit) as e:  # the user's module runs code at import
        raise ImplLoadError(f"impl {path!r}: importing {module_name!r} raised {type(e).__name__}: {e}") from None
    for part in attr.split("."):
        if not hasattr(obj, part):
            public = sorted(n for n in dir(obj) if not n.startswith("_"))[:20]
            raise ImplLoadError(f"impl {path!r}: {module_name!r} has no attribute {part!r} (it has: "
                                f"{', '.join(public) or 'nothing public'})")
        obj = getattr(obj, part)
    return path, obj


def check_callable(path: str, fn: Any, args: Sequence[str], what: str = "the impl") -> Callable:
    """``fn``, if it can be called with ``args`` positionally; else an ImplLoadError showing both."""
    if not callable(fn):
        raise ImplLoadError(f"impl {path!r}: {what} is a {type(fn).__name__}, not a function")
    try:
        sig = inspect.signature(fn)
    except (TypeError, ValueError):
        return fn  # a builtin or C function: trust it
    try:
        sig.bind(*args)
    except TypeError as e:
        raise ImplLoadError(f"impl {path!r}: {what} must take ({', '.join(args)}); its signature is "
                            f"{getattr(fn, '__name__', what)}{sig} ({e})") from None
    return fn


def hook(path: str, obj: Any, name: str, args: Sequence[str]) -> Optional[Callable]:
    """An optional hook attribute of the impl, checked like the impl (None when absent)."""
    fn = getattr(obj, name, None)
    return None if fn is None else check_callable(path, fn, args, f"its {name!r} hook")


LAYOUTS = ("bshd", "bhsd")
BLOCK_PARAMS = attention.BLOCK_PARAMS


def attention_parts(path: str, obj: Any) -> dict[str, Any]:
    """The record fields an attention impl's optional attributes give (layout, block_params, hooks),
    each checked (any backend)."""
    layout = getattr(obj, "layout", "bshd")
    if layout not in LAYOUTS:
        raise ImplLoadError(f"impl {path!r}: layout {layout!r} is not one of {', '.join(LAYOUTS)}")
    blocks: Any = getattr(obj, "block_params", ())
    if isinstance(blocks, str) or not all(b in BLOCK_PARAMS for b in blocks):
        raise ImplLoadError(f"impl {path!r}: block_params {blocks!r} must be a tuple of names from "
                            f"{', '.join(BLOCK_PARAMS)}")
    candidates = getattr(obj, "tune_candidates", None)
    if candidates is not None and (isinstance(candidates, (str, dict)) or not all(
            isinstance(c, dict) and set(c) <= set(blocks) and all(isinstance(v, int) and v > 0 for v in c.values())
            for c in candidates)):
        raise ImplLoadError(f"impl {path!r}: tune_candidates must be a list of dicts of positive ints over its "
                            f"block_params {tuple(blocks)!r}")
    space = (lambda p: declared_space(p, tuple(blocks), candidates)) if blocks else None
    return dict(layout=layout, note=f"user impl {path}", block_params=tuple(blocks), source=path, tune_space=space,
                kernel_flops=hook(path, obj, "kernel_flops", ("params",)),
                params_rule=hook(path, obj, "unsupported", ("params", "platform")))


skip_reason = rules.skip_reason  # the contract's checks live with the built-in rules (xlabench/impls)
for_impl = rules.for_impl
