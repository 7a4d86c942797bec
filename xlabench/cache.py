"""xlabench's per-user cache: the one root folder ($XLABENCH_CACHE_DIR, default ~/.cache/xlabench) that the
compilation cache, the compile-only figures, the tuning cache and the host peak live under, and the one way
their JSON files are read and written (whole or not at all: two workers may write one file at once, the
last one wins and neither is torn). Imports nothing of xlabench: every floor, the workers too, may use it."""

from __future__ import annotations

import json
import os
import tempfile
from pathlib import Path
from typing import Any

ENV_CACHE_DIR = "XLABENCH_CACHE_DIR"


def root() -> Path:
    """The cache's root folder: $XLABENCH_CACHE_DIR, else ~/.cache/xlabench."""
    return Path(os.environ.get(ENV_CACHE_DIR) or str(Path.home() / ".cache" / "xlabench"))


def folder(kind: str) -> Path:
    """The default folder of one kind of entry (``compile``, ``compile-only``, ``tune``) under root()."""
    return root() / kind


def read_json(path: Path) -> Any:
    """A cache file's JSON; OSError when it cannot be read, ValueError when it is not JSON."""
    return json.loads(Path(path).read_text(encoding="utf-8"))


def write_json(path: Path, data: Any, **dump: Any) -> Path:
    """Write ``data`` as JSON to ``path`` atomically (a temporary file beside it, then renamed over it), its
    folder made first; ``dump``: json.dump's options (indent, sort_keys, default). Raises OSError."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.stem[:16]}-", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump(data, f, **dump)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
