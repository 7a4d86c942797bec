"""One tuning story: `xlabench best`'s picks go into the tuning store's cache layer (tune/store.py: TuneStore.store_measured)
that `run --tune` reads, under the key (a TuneKey) and the candidate space the JAX worker computes for the same case,
so a later run on that device and those versions finds them current; the `tuned:` file is an export of
the entries so written (and of the picks the cache cannot hold, each named in a note).

A pick is cached where the worker would look for it: a JAX built-in kernel with a search space (a user
kernel's space is in its own code, which only a worker imports; torch_xla does not tune), of a run whose
meta records the versions the cache keys a winner by (``env.tune_versions``, written since schema 3).
Every pick left out says why, in one line.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any, Mapping, Optional, Sequence

from xlabench import tune
from xlabench.impls.workload_rules import search_space
from xlabench.report.best_config import Pick
from xlabench.suite.tuned import TunedConfig
from xlabench.tune.store import TuneKey, TuneStore
from xlabench.workloads import PARAMS, TUNE_KEY_FIELDS

TUNING_BACKEND = "jax"  # the backend whose workers tune (backends/jax/tune_case.py)


def _entry(p: Pick, envs: Mapping[str, Mapping[str, Any]]) -> tuple[Optional[tuple], str]:
    """((key, candidates, fields of store_measured) for the cache, "") or (None, why the pick cannot be cached)."""
    c = p.config
    assert c is not None
    if c.backend != TUNING_BACKEND:
        return None, f"{c.backend} does not tune (run --tune searches JAX kernels only)"
    space = search_space(c.workload, c.backend, c.impl)
    if space is None:
        return None, "no built-in search space (a user kernel's is in its own code)"
    runs = p.source.get("run_ids", [])
    versions = [envs.get(r, {}).get("tune_versions") for r in runs]
    if not versions or any(v != versions[0] for v in versions) or not isinstance(versions[0], dict):
        return None, (f"run(s) {', '.join(runs)}: no single env.tune_versions in the meta (a run written before "
                      "schema 3, or runs of different versions): run the sweep again")
    params = PARAMS[c.workload](**c.shape)
    stages = space(params)
    candidates = [dict(x) for st in stages for x in st.candidates]
    blocks = {k: int(v) for k, v in c.params.items() if v is not None} or dict(stages[0].default)
    if not any(set(blocks.items()) <= set(x.items()) for x in candidates):
        return None, (f"{' '.join(f'{k}={v}' for k, v in sorted(blocks.items()))} is not a candidate of the "
                      "kernel's search space (the tuner would take it as stale)")
    default_s = c.median_s * c.speedup_vs_default if c.median_s and c.speedup_vs_default else c.median_s
    measured = dict(blocks=blocks, best_s=float(c.median_s or 0.0), default_s=default_s,
                    configurations=int(p.source.get("configurations", 0)), clock=str(p.source.get("clock") or "wall"),
                    check=f"xlabench best: {p.verdict}")
    key = TuneKey.of(str(p.source.get("device_kind")), c.backend, c.impl, TUNE_KEY_FIELDS[c.workload](params),
                     versions[0])
    return (key, candidates, measured), ""


def store(picks: Sequence[Pick], envs: Mapping[str, Mapping[str, Any]], cache: tune.TuneCache
          ) -> tuple[list[TunedConfig], list[str]]:
    """Write each pick's configuration into ``cache`` (``envs``: run id -> its meta's env). Returns the
    `tuned:` file's configurations: those written, read back from the cache (a winner's blocks as the cache
    holds them; a kept default stays unset, so a later --tune may still search it), then those the cache
    cannot hold, as picked; and a note per pick not cached."""
    configs, uncached, notes = [], [], []
    into = TuneStore(cache)
    for p in picks:
        if p.config is None:
            continue
        entry, why = _entry(p, envs)
        if entry is None:
            notes.append(f"not cached: {p.config.backend}/{p.config.impl} {_shape(p.config)}: {why}")
            uncached.append(p.config)
            continue
        key, candidates, measured = entry
        blocks = into.store_measured(key, candidates, **measured)  # the export reads what the cache now holds
        kept = all(v is None for v in p.config.params.values())
        params = dict(p.config.params) if kept else {k: blocks[k] for k in p.config.params if k in blocks}
        configs.append(replace(p.config, params=params))
    return configs + uncached, notes


def _shape(c: TunedConfig) -> str:
    return " ".join(f"{k}={v}" for k, v in c.shape.items())
