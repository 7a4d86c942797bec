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
from xlabench.measure.worker_env import IMPL_PATH_VAR


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
