"""Where the workers' persistent compilation cache lives: --cache-dir, else the suite's ``cache.dir``, else
$XLABENCH_CACHE_DIR/compile (default ~/.cache/xlabench/compile); --no-cache turns it off. Checked here, in the parent, so that a
folder that cannot be written costs one warning and an uncached run, not a failure per case."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Optional

from xlabench import cache
from xlabench.run.run_options import RunOptions
from xlabench.suite import Suite

SUBDIR = "compile"


def default_dir() -> Path:
    return cache.folder(SUBDIR)


def resolve(opts: RunOptions, suite: Optional[Suite] = None) -> tuple[Optional[str], Optional[str]]:
    """(the cache folder the workers use or None, a warning for the user or None): --no-cache, else
    --cache-dir, else the suite's ``cache.dir`` (relative to the suite file), else default_dir()."""
    if opts.no_cache:
        return None, None
    if opts.cache_dir:
        folder = Path(opts.cache_dir).expanduser()
    elif suite is not None and suite.spec.cache.dir:
        folder = Path(suite.path).resolve().parent / Path(suite.spec.cache.dir).expanduser()
    else:
        folder = default_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile(dir=folder, prefix=".xlabench-write-check-"):
            pass
    except OSError as e:
        reason = e.strerror or type(e).__name__
        return None, f"compilation cache {folder} cannot be written ({reason}): compiling without a cache"
    return str(folder.resolve()), None


__all__ = ["default_dir", "resolve"]
