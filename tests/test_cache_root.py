"""One cache root and one atomic JSON writer serve the compilation cache, the compile-only figures, the tuning
cache and the host peak (xlabench/cache.py); no other module names the root's default or its variable."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from xlabench import cache

ROOT = Path(__file__).resolve().parent.parent


def test_every_cache_lives_under_the_one_root(tmp_path, monkeypatch):
    from xlabench import tune
    from xlabench.measure import figure_store, host_peak
    from xlabench.run import compile_cache_dir

    monkeypatch.setenv(cache.ENV_CACHE_DIR, str(tmp_path))
    assert cache.root() == tmp_path
    homes = [tune.default_dir(), compile_cache_dir.default_dir(), host_peak.cache_path(),
             figure_store.from_folder(str(compile_cache_dir.default_dir())).folder]
    assert all(p.is_relative_to(tmp_path) for p in homes), homes
    assert len(set(homes)) == len(homes)


def test_write_json_is_whole_or_not_at_all(tmp_path):
    path = tmp_path / "sub" / "entry.json"
    cache.write_json(path, {"a": 1})
    assert cache.read_json(path) == {"a": 1}
    with pytest.raises(TypeError):
        cache.write_json(path, {"a": object()})  # fails half-way through the dump
    assert json.loads(path.read_text()) == {"a": 1}  # the old entry stands
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]  # no temporary file left behind


def _constants(path: Path) -> set[str]:
    return {n.value for n in ast.walk(ast.parse(path.read_text())) if isinstance(n, ast.Constant)
            and isinstance(n.value, str)}


def test_the_cache_root_is_declared_once():
    named = sorted(str(p.relative_to(ROOT)) for p in (ROOT / "xlabench").rglob("*.py")
                   if {".cache", cache.ENV_CACHE_DIR} & _constants(p))
    assert named == ["xlabench/cache.py"]
