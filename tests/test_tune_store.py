"""The tuning store (xlabench/tune/store.py, issue 59): one key type whose conversions give each source's key
byte for byte as before, and the layers in one order: suite-pinned (``fixed``) > the user's cache
(``cache``) > the shipped table (``table``), else a search; the row's ``tuned`` column names the layer."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path
from types import SimpleNamespace

import pytest

from xlabench import suite
from xlabench.impls.configs import tile_candidates
from xlabench.results import schema
from xlabench.run.case_plan import tuning
from xlabench.suite import tuned as tuned_file
from xlabench.tune import decide, table
from xlabench.tune.cache import TuneCache, cache_key, space_fingerprint
from xlabench.tune.search import Stage, TuneOutcome
from xlabench.tune.store import CACHE, FIXED, LAYERS, SEARCH, TABLE, TuneKey, TuneStore, as_key
from xlabench.workloads.attention import AttentionParams, tune_key_fields

FIXTURES = Path(__file__).parent / "fixtures"
KIND = "TPU v5 lite"
VERSIONS = {"jax": "0.10.3", "runtime": "libtpu 1"}
CASE = {"batch": 32, "causal": True, "dtype": "bfloat16", "head_dim": 128, "kv_seq_len": 1024, "mode": "fwd",
        "num_heads": 16, "num_kv_heads": 16, "seq_len": 1024}
DEFAULT = {"block_q": 128, "block_k": 128}
TABLE_BLOCKS, CACHE_BLOCKS = {"block_q": 512, "block_k": 256}, {"block_q": 1024, "block_k": 128}


def _stages():
    return [Stage("fwd", tuple(tile_candidates(1024, 1024)), DEFAULT)]


def _space(stages):
    cands = [c for s in stages for c in s.candidates]
    return space_fingerprint(cands), cands


class Clock:
    """A fake device: fastest at 512 x 256, 1 ms there."""

    def cost(self, c):
        return (abs(c["block_q"] - 512) / 512 + abs(c["block_k"] - 256) / 256 + 1.0) * 1e-3

    def compile_many(self, program, cands):
        return [(program, c) for c in cands]

    def time_many(self, handles, iters):
        return [self.cost(c) for _, c in handles], "device"


@pytest.fixture()
def layers(tmp_path, monkeypatch):
    """A table folder read instead of the package's and a cache folder; put_table / put_cache fill them."""
    folder = tmp_path / "tables"
    folder.mkdir()
    monkeypatch.setenv(table.ENV_TABLE_DIR, str(folder))

    def put_table(case=CASE, blocks=TABLE_BLOCKS):
        entry = table.TableEntry("jax", "flash", dict(case), dict(blocks), 1e-3, Clock().cost(DEFAULT), "device", "",
                                 "ok", "abc1234", "2026-12-07", {"jax": "0.10.2"})
        table.write_table(folder / table.table_name(KIND), table.Table(KIND, (entry,)))

    def put_cache(key, blocks=CACHE_BLOCKS, space=None):
        TuneCache(tmp_path / "tune").store(key.cache_key(), space or _space(_stages())[0],
                                           TuneOutcome(dict(blocks), 2e-3, 3e-3, 5, 5, {}, 1.0, "device", "ok"))

    return SimpleNamespace(cache=tmp_path / "tune", put_table=put_table, put_cache=put_cache)


# ------------------------------------------------------------------------------------------------ the key

def test_the_keys_cache_key_and_file_are_the_recorded_ones_byte_for_byte():
    recorded = json.loads((FIXTURES / "tune_keys.json").read_text())["keys"]
    for label, rec in recorded.items():
        key = TuneKey.from_cache_key(json.loads(rec["key"]))
        assert json.dumps(key.cache_key(), sort_keys=True) == rec["key"], label
        assert key.cache_file() == rec["file"], label


def test_the_key_is_the_cache_key_of_its_fields_and_a_cache_keys_dict_converts():
    key = TuneKey.of(KIND, "jax", "flash", dict(reversed(list(CASE.items()))), VERSIONS)
    assert key.cache_key() == cache_key(KIND, "jax", "flash", CASE, VERSIONS)
    assert as_key(cache_key(KIND, "jax", "flash", CASE, VERSIONS)) == key and as_key(key) is key
    with pytest.raises(ValueError, match="entry version 2"):
        TuneKey.from_cache_key({**key.cache_key(), "version": 2})


def test_the_keys_table_key_and_file_are_every_shipped_entrys():
    for path in sorted(table.PACKAGE_DIR.glob("*.json")):
        shipped = table.read_table(path)
        for e in shipped.entries:
            key = TuneKey.of(shipped.device_kind, e.backend, e.impl, e.case)
            assert key.table_key() == e.key() and key.table_file() == path.name, (path.name, e.key_text())


def test_the_table_key_buckets_the_batch_and_names_a_standing_in_backend():
    key = TuneKey.of(KIND, "torch_tpu", "splash", {**CASE, "batch": 24})
    assert key.table_key()["batch_bucket"] == 32 and "batch" not in key.table_key()
    assert key.table_key("jax")["backend"] == "jax"


# ---------------------------------------------------------------------------------------------- the order

def test_the_layers_are_declared_once_in_order_and_are_the_tuned_columns_values():
    assert LAYERS == (FIXED, CACHE, TABLE) == ("fixed", "cache", "table") and SEARCH == "search"
    described = next(c.doc for c in schema.TUNE_COLUMNS if c.name == "tuned")
    for value in (*LAYERS, SEARCH, "off"):
        assert f"{value} (" in described, value


def test_the_cache_beats_the_table_which_beats_a_search(layers):
    key = TuneKey.of(KIND, "jax", "flash", CASE, VERSIONS)
    space, cands = _space(_stages())
    store = TuneStore(layers.cache)
    assert store.lookup(key, space, cands).layer == ""  # nothing anywhere: search
    layers.put_table()
    found = store.lookup(key, space, cands)
    assert (found.layer, found.blocks, found.cached.status) == (TABLE, TABLE_BLOCKS, "miss")
    layers.put_cache(key)
    found = store.lookup(key, space, cands)
    assert (found.layer, found.blocks, found.hit) == (CACHE, CACHE_BLOCKS, None)  # the table not even read
    stale = TuneStore(layers.cache).lookup(key, "another space", cands)
    assert (stale.layer, stale.cached.status, stale.blocks) == (TABLE, "stale", TABLE_BLOCKS)
    assert TuneStore(layers.cache, order=(TABLE, CACHE)).lookup(key, space, cands).layer == TABLE  # the order rules


def test_a_table_entry_off_the_search_does_not_answer_and_says_why(layers):
    layers.put_table(blocks={"block_q": 4096, "block_k": 128})
    space, cands = _space(_stages())
    found = TuneStore(layers.cache).lookup(TuneKey.of(KIND, "jax", "flash", CASE), space, cands)
    assert found.layer == "" and found.hit is not None and "not a candidate" in found.why
    assert TuneStore(layers.cache).lookup(TuneKey.of(KIND, "jax", "flash", CASE), space, None).hit is None


def test_another_backend_stands_in_where_the_keys_has_no_table_entry(layers):
    layers.put_table()
    space, cands = _space(_stages())
    key = TuneKey.of(KIND, "torch_tpu", "flash", CASE)
    assert TuneStore(layers.cache).lookup(key, space, cands).layer == ""
    assert TuneStore(layers.cache, ("jax",)).lookup(key, space, cands).layer == TABLE


@pytest.mark.parametrize("filled, column, blocks", [((), SEARCH, TABLE_BLOCKS), (("table",), TABLE, TABLE_BLOCKS),
                                                    (("table", "cache"), CACHE, CACHE_BLOCKS)])
def test_the_rows_tuned_column_names_the_layer_that_answered(layers, filled, column, blocks):
    key = TuneKey.of(KIND, "jax", "flash", CASE, VERSIONS)
    if "table" in filled:
        layers.put_table()
    if "cache" in filled:
        layers.put_cache(key)
    clock = Clock()
    got = decide.tuned_blocks(_stages(), key, clock.compile_many, clock.time_many, str(layers.cache))
    assert got.fields["tuned"] == column and got.blocks == blocks
    again = decide.tuned_blocks(_stages(), key.cache_key(), clock.compile_many, clock.time_many, str(layers.cache))
    assert again.fields["tuned"] == CACHE and again.blocks == blocks  # the winner went into the cache


def test_the_compile_path_takes_the_newest_cache_entry_of_any_versions_before_the_table(layers):
    key = TuneKey.of(KIND, "jax", "flash", CASE)
    layers.put_table()
    assert TuneStore(layers.cache).latest(key).layer == TABLE
    layers.put_cache(TuneKey.of(KIND, "jax", "flash", CASE, VERSIONS))
    found = TuneStore(layers.cache).latest(key)
    assert (found.layer, found.blocks) == (CACHE, CACHE_BLOCKS)


def test_a_suite_pinned_block_beats_the_cache_and_the_table(layers, tmp_path):
    """The suite's tuned: file pins the case's blocks at expansion (their values are case parameters, in its
    id); the parent's plan says ``fixed`` and the worker takes the case's own blocks, not the cache's or the
    table's, though both hold an entry for the same key."""
    params = dict(batch=32, num_heads=16, num_kv_heads=16, head_dim=128, causal=True, dtype="bfloat16", mode="fwd",
                  seq_len=1024)
    shape = {k: v for k, v in AttentionParams(**params).resolved().model_dump().items()
             if k not in ("block_q", "block_k") and v is not None}
    pinned = tuned_file.TunedConfig("attention", "jax", "flash", shape, {"block_q": 256, "block_k": 512})
    (tmp_path / "tuned.yaml").write_text(tuned_file.dump([pinned]))
    spec = tmp_path / "s.yaml"
    spec.write_text(textwrap.dedent(f"""\
        name: pinned
        workload: attention
        impls: [flash]
        tuned: tuned.yaml
        params: {json.dumps(params)}
        """))
    (case,) = suite.load(spec).cases("")
    assert (case.params["block_q"], case.params["block_k"]) == (256, 512)
    key = TuneKey.of(KIND, "jax", "flash", tune_key_fields(AttentionParams(**case.params)), VERSIONS)
    layers.put_table(case=key.fields())
    layers.put_cache(key)
    assert TuneStore(layers.cache).lookup(key, *_space(_stages())).layer == CACHE  # what an unpinned case gets
    mode, _ = tuning(case, False, "tpu", True)
    assert mode == FIXED
    from xlabench.backends.jax import tune_case

    plan = SimpleNamespace(tune=mode, tune_note="", tune_dir=str(layers.cache))
    got = tune_case.decide(plan, _stages, "flash", key.fields(), build=None)
    assert got.fields == {"tuned": FIXED} and got.blocks == {}  # the case's own (pinned) blocks
