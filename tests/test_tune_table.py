"""The shipped block-size tables (xlabench/tune/table.py): the bucket rule, the lookup order (the user's cache,
then the table, verified on this machine, then the search) on a fake device clock, a stale entry sent to a
search, a damaged table file (one line, the search goes on), the export and re-import, and the v5e table
as committed (regenerable from the run files it came from)."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from xlabench.tune import table
from xlabench.tune.cache import TuneCache, cache_key
from xlabench.tune.search import Dropped, Stage, TuneOutcome, verify
from xlabench.impls.configs import tile_candidates

ROOT = Path(__file__).resolve().parent.parent
PAGED_CACHE = ROOT / "docs/data/tpu-v5e/2026-12-07-c/tune-cache"
RAGGED_32K_CACHE = ROOT / "docs/data/tpu-v5e/2026-12-07-d/tune-cache"
SUITES_CACHE = ROOT / "docs" / "data" / "tpu-v5e" / "2026-12-07-b" / "tune-cache"
RUN_CACHE = ROOT / "docs/data/tpu-v5e/2026-12-07/tune-cache"
TORCH_TPU_CACHE = ROOT / "docs/data/tpu-v5e/2026-12-08-b-torch-tpu-train/tune-cache"
KIND = "TPU v5 lite"
CASE = {"batch": 32, "causal": True, "dtype": "bfloat16", "head_dim": 128, "kv_seq_len": 1024, "mode": "fwd",
        "num_heads": 16, "num_kv_heads": 16, "seq_len": 1024}
DEFAULT = {"block_q": 128, "block_k": 128}


class Clock:
    """A fake device: seconds per call from the blocks (fastest at 512 x 256), every compile counted."""

    def __init__(self, factor: float = 1.0):
        self.factor, self.compiled = factor, []

    def cost(self, c):
        return (abs(c["block_q"] - 512) / 512 + abs(c["block_k"] - 256) / 256 + 1.0) * 1e-3 * self.factor

    def compile_many(self, program, cands):
        self.compiled += cands
        return [(program, c) if c["block_q"] * c["block_k"] <= 1024 * 1024 else Dropped("vmem") for c in cands]

    def time_many(self, handles, iters):
        return [self.cost(c) for _, c in handles], "device"


def _stages():
    return [Stage("fwd", tuple(tile_candidates(1024, 1024)), DEFAULT)]


def _entry(blocks=None, best_s=1e-3, default_s=None, case=None, impl="flash", commit="abc1234"):
    clock = Clock()
    blocks = blocks or {"block_q": 512, "block_k": 256}
    return table.TableEntry("jax", impl, dict(case or CASE), blocks, best_s,
                            clock.cost(DEFAULT) if default_s is None else default_s, "device", "", "ok", commit,
                            "2026-12-07", {"jax": "0.10.2"})


@pytest.fixture()
def tables(tmp_path, monkeypatch):
    """A folder of tables the process reads instead of the package's; write(entries) puts the v5e one."""
    folder = tmp_path / "tables"
    folder.mkdir()
    monkeypatch.setenv(table.ENV_TABLE_DIR, str(folder))

    def write(*entries, kind=KIND):
        return table.write_table(folder / f"{table.slug(kind)}.json", table.Table(kind, tuple(entries)))

    return SimpleNamespace(folder=folder, write=write)


@pytest.fixture()
def device(monkeypatch):
    from xlabench.backends.jax import tune_case

    dev = Clock()
    monkeypatch.setattr(tune_case, "compile_many", lambda build, program, cands: dev.compile_many(program, cands))
    monkeypatch.setattr(tune_case, "time_many", lambda handles, iters: dev.time_many(handles, iters))
    return dev


def _key(case=None):
    return cache_key(KIND, "jax", "flash", dict(case or CASE), {"jax": "0.10.3"})  # another version than the table's


# ------------------------------------------------------------------------------------------ bucket rule

def test_the_batch_bucket_is_the_next_power_of_two():
    assert [table.bucket(b) for b in (0, 1, 2, 3, 4, 5, 16, 17, 32, 33, 100)] == [1, 1, 2, 4, 4, 8, 16, 32, 32, 64, 128]
    assert table.slug("TPU v5 lite") == "tpu_v5_lite" and table.slug("TPU v6e") == "tpu_v6e"


def test_the_same_bucket_is_exact_and_a_miss_takes_the_nearest_bucket_a_tie_the_larger():
    t = table.Table(KIND, (_entry(case={**CASE, "batch": 8}, commit="b8"), _entry(case={**CASE, "batch": 32}, commit="b32")),
                    "t.json")
    hit = t.find("jax", "flash", {**CASE, "batch": 24})  # bucket 32
    assert hit.exact and hit.entry.commit == "b32" and hit.scale == pytest.approx(24 / 32)
    assert t.find("jax", "flash", {**CASE, "batch": 5}).entry.commit == "b8"  # bucket 8: exact
    tie = t.find("jax", "flash", {**CASE, "batch": 16})  # 8 and 32 one doubling away each: the larger
    assert not tie.exact and tie.entry.commit == "b32" and tie.scale == pytest.approx(0.5)
    assert t.find("jax", "flash", {**CASE, "batch": 256}).entry.commit == "b32"  # nearest: 32
    assert t.find("jax", "flash", {**CASE, "batch": 2}).entry.commit == "b8"
    assert t.find("jax", "flash", {**CASE, "seq_len": 2048}) is None  # another field: no entry
    assert t.find("jax", "splash", CASE) is None


def test_the_paged_cache_size_is_keyed_per_sequence():
    paged = {"batch": 16, "context_lens": "4096", "dtype": "bfloat16", "head_dim": 128, "max_context": 4096,
             "megacore_mode": None, "num_heads": 32, "num_kv_heads": 8, "page_size": 64, "q_tokens": 1,
             "total_pages": 16 * 64}
    t = table.Table(KIND, (_entry(blocks={"pages_per_compute_block": 8}, case=paged, impl="paged"),))
    assert t.find("jax", "paged", {**paged, "batch": 12, "total_pages": 12 * 64}).exact
    assert not t.find("jax", "paged", {**paged, "batch": 64, "total_pages": 64 * 64}).exact
    assert t.find("jax", "paged", {**paged, "total_pages": 99}) is None


# ----------------------------------------------------------------------------------------- verification

def test_verify_keeps_a_winner_within_15_percent_that_beats_the_default():
    dev = Clock()
    out, why = verify(_stages(), {"block_q": 512, "block_k": 256}, 1.1e-3, dev.compile_many, dev.time_many)
    assert why == "" and out.best_s == pytest.approx(1e-3) and out.default_s == pytest.approx(dev.cost(DEFAULT))
    assert out.blocks == {"block_q": 512, "block_k": 256} and out.clock == "device" and len(dev.compiled) == 2


def test_verify_refuses_a_winner_off_its_record_or_slower_than_the_default():
    dev = Clock()
    out, why = verify(_stages(), {"block_q": 512, "block_k": 256}, 0.8e-3, dev.compile_many, dev.time_many)
    assert out is None and "more than 15% off its recorded 0.8 ms" in why
    slow = {"block_q": 1024, "block_k": 1024}  # 5 ms here, the default 3.25 ms
    out, why = verify(_stages(), slow, dev.cost(slow), dev.compile_many, dev.time_many)
    assert out is None and "slower than the default blocks" in why


# ---------------------------------------------------------------------------------------- lookup order

def test_a_table_hit_is_verified_written_to_the_cache_and_read_from_it_next(tables, device, tmp_path):
    from xlabench.backends.jax import tune_case

    tables.write(_entry())
    first = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert first.fields["tuned"] == "table" and first.blocks == {"block_q": 512, "block_k": 256}
    assert first.fields["tune_check"] == "ok" and first.fields["tune_tried"] == 0
    assert len(device.compiled) == 2  # the winner and the default, re-timed: no search
    assert "tpu_v5_lite.json: flash fwd causal bfloat16 S=1024 b=32 (abc1234, 2026-12-07)" in first.note
    again = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert again.fields["tuned"] == "cache" and again.blocks == first.blocks and len(device.compiled) == 2
    assert "verified from the tune table tpu_v5_lite.json" in again.note


def test_the_users_cache_comes_before_the_table(tables, device, tmp_path):
    from xlabench.backends.jax import tune_case

    tables.write(_entry(blocks={"block_q": 256, "block_k": 256}))
    folder = tmp_path / "tune"
    stages = _stages()
    from xlabench.tune.cache import space_fingerprint

    TuneCache(folder).store(_key(), space_fingerprint([c for s in stages for c in s.candidates]),
                            TuneOutcome({"block_q": 1024, "block_k": 128}, 2e-3, 3e-3, 5, 5, {}, 1.0, "device", "ok"))
    t = tune_case.tuned_blocks(stages, _key(), None, str(folder))
    assert t.fields["tuned"] == "cache" and t.blocks == {"block_q": 1024, "block_k": 128} and not device.compiled


def test_no_entry_for_the_case_is_a_search(tables, device, tmp_path):
    from xlabench.backends.jax import tune_case

    tables.write(_entry(case={**CASE, "seq_len": 2048, "kv_seq_len": 2048}))
    t = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert t.fields["tuned"] == "search" and t.fields["tune_tried"] > 2 and "tune table" not in t.note


@pytest.mark.parametrize("entry, why", [
    (dict(best_s=0.5e-3), "more than 15% off"),  # the chip here takes 1 ms for it
    (dict(blocks={"block_q": 1024, "block_k": 1024}, best_s=5e-3), "slower than the default"),
    (dict(blocks={"block_q": 4096, "block_k": 128}), "not a candidate"),
])
def test_a_stale_table_entry_is_searched_and_the_row_says_why(tables, device, tmp_path, entry, why):
    from xlabench.backends.jax import tune_case

    tables.write(_entry(**entry))
    t = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert t.fields["tuned"] == "search" and t.blocks == {"block_q": 512, "block_k": 256}
    assert "tune table tpu_v5_lite.json: flash" in t.note and why in t.note and t.note.endswith("searched")


def test_a_nearest_bucket_hit_is_checked_against_its_time_scaled_by_the_batch(tables, device, tmp_path):
    from xlabench.backends.jax import tune_case

    tables.write(_entry(case={**CASE, "batch": 64}, best_s=2e-3))  # 2 ms at batch 64: 1 ms expected at 32
    t = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert t.fields["tuned"] == "table" and "nearest batch bucket" in t.note


def test_a_damaged_table_is_one_line_and_the_run_searches(tables, device, tmp_path):
    from xlabench.backends.jax import tune_case
    from xlabench.run.suite_runner import tune_table_warning

    (tables.folder / "tpu_v5_lite.json").write_text('{"format": 1, "device_kind": "TPU v5 lite", "entries": [{"imp')
    shipped, why = table.for_device(KIND)
    assert shipped is None and "\n" not in why and "not JSON" in why and "searched" in why
    t = tune_case.tuned_blocks(_stages(), _key(), None, str(tmp_path / "tune"))
    assert t.fields["tuned"] == "search"
    case = SimpleNamespace(workload="attention", backend="jax", impl="flash", params={})
    assert tune_table_warning([case, case], "tpu", KIND, None) == why


def test_a_chip_without_a_table_warns_once_where_a_case_searches(tables):
    from xlabench.run.suite_runner import tune_table_warning

    tables.write(_entry())
    flash = SimpleNamespace(workload="attention", backend="jax", impl="flash", params={})
    naive = SimpleNamespace(workload="attention", backend="jax", impl="naive", params={})
    fixed = SimpleNamespace(workload="attention", backend="jax", impl="flash", params={"block_q": 128})
    line = tune_table_warning([flash, flash], "tpu", "TPU v6e", None)
    assert line == "no shipped tuning table for TPU v6e (tpu_v6e.json): its kernels are searched"
    assert tune_table_warning([naive, fixed], "tpu", "TPU v6e", None) is None  # nothing searches
    assert tune_table_warning([flash], "tpu", "TPU v6e", False) is None  # --no-tune
    assert tune_table_warning([flash], "tpu", KIND, None) is None


def test_the_compile_path_reads_the_table_after_the_cache(tables):
    from xlabench.backends.jax import attention_impls as impls
    from xlabench.backends.jax.train_case import _cached_blocks
    from xlabench.workloads.attention import AttentionParams, tune_key_fields

    p = AttentionParams(batch=8, num_heads=16, seq_len=1024, head_dim=64, causal=True, dtype="bfloat16", mode="fwd_bwd")
    tables.write(_entry(case=tune_key_fields(p), impl="splash", blocks={"block_q": 512, "block_k": 1024,
                                                                         "block_kv_compute": 512}))
    acfg = impls.AttnConfig(causal=True, sm_scale=0.125)
    notes: dict = {}
    got = _cached_blocks(acfg, "splash", KIND, p, notes)
    assert (got.block_q, got.block_k) == (512, 1024) and "shipped tune table" in notes["notes"]
    assert _cached_blocks(acfg, "splash", "TPU v6e", p, notes).block_q is None  # no table: the defaults


# ------------------------------------------------------------------------ the row's timing checks the entry

def _decide(folder, dev, stages=None):
    from xlabench.tune import decide

    return decide.tuned_blocks(stages or _stages(), _key(), lambda program, cands: dev.compile_many(program, cands),
                               dev.time_many, str(folder), row_check=True)


def test_a_table_hit_runs_untimed_and_the_rows_own_timing_checks_it(tables, tmp_path):
    """The entry's blocks go straight to the row (nothing compiled or timed for them: on the v5e that re-timing
    cost 145 s of an 8-minute attention run); default_s and tune_best_s are the record's, said so; the row's
    time within 15% of the record keeps them and puts the entry in the user's cache."""
    from xlabench.tune.decide import ROW_OK

    tables.write(_entry(best_s=1e-3, default_s=3e-3))
    dev = Clock()
    t = _decide(tmp_path / "tune", dev)
    assert dev.compiled == [] and t.blocks == {"block_q": 512, "block_k": 256} and t.check is not None
    assert t.fields["tuned"] == "table" and t.fields["tune_best_s"] == 1e-3 and t.fields["default_s"] == 3e-3
    settled, again = t.check.settle({"device": 1.1e-3, "wall": 1.5e-3})
    assert not again and dev.compiled == [] and settled.blocks == t.blocks and settled.check is None
    assert settled.fields["tune_check"] == ROW_OK and settled.fields["tune_best_s"] == 1e-3
    assert "checked by the row's timing: 1.1 ms on the device clock against its record 1 ms" in settled.note
    assert "default_s and tune_best_s are the record's" in settled.note
    cached = _decide(tmp_path / "tune", dev)
    assert cached.fields["tuned"] == "cache" and cached.check is None and dev.compiled == []
    assert cached.fields["tune_check"] == ROW_OK and "tune table tpu_v5_lite.json" in cached.note


def test_the_rows_own_timing_is_not_counted_as_tuning_time(tables, tmp_path, monkeypatch):
    """tune_s is the seconds spent choosing the blocks: the decision and the check, not the row's timing
    between them (a fake clock: 100 s pass while the row runs)."""
    from xlabench.tune import decide

    now = [0.0]
    monkeypatch.setattr(decide.time, "perf_counter", lambda: now[0])
    tables.write(_entry(best_s=1e-3))
    t = _decide(tmp_path / "tune", Clock())
    now[0] += 100.0  # the row's compile and timing
    settled, _ = t.check.settle({"device": 1e-3})
    assert settled.fields["tune_s"] == t.fields["tune_s"] == 0.0


def test_a_row_more_than_15_percent_off_the_record_searches_and_is_timed_again(tables, tmp_path):
    tables.write(_entry(best_s=0.8e-3))  # the chip here takes 1 ms for it
    dev = Clock()
    t = _decide(tmp_path / "tune", dev)
    settled, again = t.check.settle({"device": 1e-3})
    assert again and settled.fields["tuned"] == "search" and settled.fields["tune_tried"] > 2
    assert settled.blocks == {"block_q": 512, "block_k": 256} and settled.check is None
    assert "tune table tpu_v5_lite.json: flash" in settled.note
    assert "the row timed it at 1 ms on the device clock, more than 15% off its record 0.8 ms" in settled.note
    assert "searched; the row timed again at the search's winner" in settled.note


def test_a_row_without_the_records_clock_has_the_entry_re_timed_as_before(tables, tmp_path):
    """The record is on the device clock and the row has only the wall clock's (its trace gave none): the
    entry and the default are compiled and timed side by side here (search.verify), once."""
    tables.write(_entry(best_s=1e-3))
    dev = Clock()
    t = _decide(tmp_path / "tune", dev)
    settled, again = t.check.settle({"wall": 5e-3})
    assert not again and len(dev.compiled) == 2 and settled.fields["tuned"] == "table"
    assert settled.fields["tune_check"] == "ok" and "no device-clock time" in settled.note
    assert "verified here at 1 ms" in settled.note


def test_a_row_timing_nothing_found_by_the_search_keeps_the_entry(tables, tmp_path):
    """Off its record, but no candidate of the search runs here: the row the entry ran stays, saying so."""
    tables.write(_entry(best_s=0.5e-3))
    dev = Clock()
    t = _decide(tmp_path / "tune", dev)
    dev.compile_many = lambda program, cands: [Dropped("vmem") for _ in cands]
    settled, again = t.check.settle({"device": 1e-3})
    assert not again and settled.fields["tuned"] == "table" and settled.blocks == t.blocks
    assert "no candidate of the search runs" in settled.note


def test_without_a_row_to_check_it_the_entry_is_verified_first_as_before(tables, tmp_path):
    """The train step's attention (the step's timing is not the kernel's): the entry is re-timed up front."""
    from xlabench.tune import decide

    tables.write(_entry())
    dev = Clock()
    t = decide.tuned_blocks(_stages(), _key(), dev.compile_many, dev.time_many, str(tmp_path / "tune"))
    assert t.check is None and len(dev.compiled) == 2 and t.fields["tune_check"] == "ok"

# ------------------------------------------------------------------------------------- build and export

def test_an_export_and_re_import_round_trips_exactly(tmp_path):
    folder = tmp_path / "cache"
    dev = Clock()
    cache = TuneCache(folder)
    cases = [{**CASE, "batch": b, "seq_len": s} for b in (4, 32) for s in (512, 1024)]
    for i, c in enumerate(cases):
        cache.store(cache_key(KIND, "jax", "flash", c, {"jax": "0.10.2", "jaxlib": "0.10.2", "runtime": "rt"}), "sp",
                    TuneOutcome({"block_q": 128 << i, "block_k": 256}, 1e-3 * (i + 1), dev.cost(DEFAULT), 7, 9, {},
                                3.0, "device", "ok"))
    first = table.build([folder], commit="abc1234", date="2026-12-07", libtpu="0.0.42.1")
    assert first.left_out == [] and len(first.table.entries) == 4
    out = table.write_table(tmp_path / "t.json", first.table)
    again = table.write_table(tmp_path / "t2.json", table.build([out]).table)
    assert again.read_bytes() == out.read_bytes()
    back = table.read_table(out)
    for c, e in zip(cases, sorted(first.table.entries, key=lambda e: (e.case["batch"], e.case["seq_len"]))):
        hit = back.find("jax", "flash", c)
        assert hit.exact and hit.entry == e and hit.entry.versions == {"jax": "0.10.2", "jaxlib": "0.10.2",
                                                                          "libtpu": "0.0.42.1", "runtime": "rt"}


def test_a_later_source_wins_a_key_and_a_folder_keeps_its_largest_batch(tmp_path):
    older = table.write_table(tmp_path / "old.json", table.Table(KIND, (_entry(commit="old"), _entry(
        case={**CASE, "seq_len": 4096, "kv_seq_len": 4096}, commit="old"))))
    folder = tmp_path / "cache"
    for b, blocks in ((17, {"block_q": 256, "block_k": 256}), (32, {"block_q": 1024, "block_k": 512})):
        TuneCache(folder).store(cache_key(KIND, "jax", "flash", {**CASE, "batch": b}, {"jax": "0.10.2"}), "sp",
                                TuneOutcome(blocks, 1e-3, 2e-3, 1, 1, {}, 1.0, "device", "ok"))
    built = table.build([older, folder], commit="new")
    got = {e.case["seq_len"]: (e.commit, dict(e.blocks)) for e in built.table.entries}
    assert got == {1024: ("new", {"block_q": 1024, "block_k": 512}), 4096: ("old", {"block_q": 512, "block_k": 256})}


def test_build_leaves_out_pooled_and_disagreeing_entries_saying_why(tmp_path):
    folder = tmp_path / "cache"
    key = cache_key(KIND, "jax", "flash", CASE, {"jax": "0.10.2"})
    TuneCache(folder).store(key, "sp", TuneOutcome(DEFAULT, 1e-3, 1e-3, 1, 1, {}, 1.0, "device", "disagrees after two"))
    old = dict(key, version=2)
    TuneCache(folder).store(old, "sp", TuneOutcome(DEFAULT, 1e-3, 1e-3, 1, 1, {}, 1.0, "device", "ok"))
    (folder / "junk.json").write_text("[1")
    with pytest.raises(table.TableError, match="no entries"):
        table.build([folder])
    built = table.build([folder], device_kind=KIND)
    assert built.table.entries == () and len(built.left_out) == 3
    assert any("entry version 2" in w for w in built.left_out) and any("disagreed" in w for w in built.left_out)


# --------------------------------------------------------------------------------------- the v5e table

def _paged_cache(impl: str) -> list[Path]:
    return [p for p in sorted(PAGED_CACHE.glob("*.json")) if json.loads(p.read_text())["key"]["impl"] == impl]


def test_the_shipped_v5e_table_is_the_chips_runs_rebuilt(monkeypatch, tmp_path):
    """The 49 entries of the attention profile's cold search (7683fc5), then the 15 the shipped suites'
    first run on the chip added (e526ab6578: the train steps' attention shapes; where it verified an entry
    of the first run, that entry stays as the search measured it), then the paged profile's page-size-64,
    batch-16 search: paged's 4 contexts (9f82006b80), ragged paged's 1k, 4k and 16k (9e80b94827) and its 32k
    (1fcdc0c); then TorchTPU's splash at the GPT-2 124M and 355M train steps' attention shapes (2ff8ad7,
    2026-12-08)."""
    monkeypatch.delenv(table.ENV_TABLE_DIR, raising=False)
    shipped, why = table.for_device(KIND)
    assert why == "" and len(shipped.entries) == 74
    assert {(e.commit, e.date, e.versions["jax"], e.versions["libtpu"]) for e in shipped.entries} == {
        (c, "2026-12-07", "0.10.2", "0.0.42.1") for c in ("7683fc5", "e526ab6578", "9f82006b80", "9e80b94827", "1fcdc0c")
    } | {("2ff8ad7", "2026-12-08", "0.10.2", "0.0.42.1")}
    merged: dict[str, dict] = {}
    for files, commit in ((sorted(SUITES_CACHE.glob("*.json")), "e526ab6578"),
                          (sorted(RUN_CACHE.glob("*.json")), "7683fc5"),
                          (_paged_cache("paged"), "9f82006b80"), (_paged_cache("ragged_paged"), "9e80b94827"),
                          (sorted(RAGGED_32K_CACHE.glob("*.json")), "1fcdc0c"),
                          (sorted(TORCH_TPU_CACHE.glob("*.json")), "2ff8ad7")):
        folder = tmp_path / commit  # one export's sources, in the order they were exported (a later one wins)
        folder.mkdir()
        for p in files:
            (folder / p.name).write_text(p.read_text())
        day = "2026-12-08" if commit == "2ff8ad7" else "2026-12-07"
        built = table.build([folder], commit=commit, date=day, libtpu="0.0.42.1").table
        merged.update({json.dumps(e.to_json()["key"], sort_keys=True): e.to_json() for e in built.entries})
    on_disk = table.read_table(table.table_path(KIND)).to_json()["entries"]
    assert {json.dumps(e["key"], sort_keys=True): e for e in on_disk} == merged
    for p in sorted(RUN_CACHE.glob("*.json")) + _paged_cache("ragged_paged") + sorted(RAGGED_32K_CACHE.glob("*.json")):
        k = json.loads(p.read_text())
        hit = shipped.find(k["key"]["backend"], k["key"]["impl"], k["key"]["case"])
        assert hit.exact and dict(hit.entry.blocks) == k["blocks"] and hit.entry.best_s == k["best_s"]


# -------------------------------------------------------------------------------------------------- CLI

def _cli(*args, env=None):
    from click.testing import CliRunner

    from xlabench.cli import main

    return CliRunner().invoke(main, ["tune", *map(str, args)], env=env)


def test_tune_table_lists_what_the_table_holds_and_lacks_in_80_columns(tables):
    tables.write(_entry(case={**CASE, "batch": 16, "seq_len": 1024, "kv_seq_len": 1024, "mode": "fwd"}))
    res = _cli("--table", ROOT / "suites/attention.yaml", "--profile", "tpu", "-k", "seq_len=1024", "--backend", "jax",
               "--impl", "flash")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    assert lines[0].startswith("TPU v5 lite (tpu_v5_lite.json, 1 entries): suite attention, profile tpu")
    assert "  held    flash fwd causal bfloat16 S=1024 b=16" in lines
    assert "  lacks   flash fwd_bwd causal bfloat16 S=1024 b=16" in lines
    assert "1 held, 0 nearest, 3 lacking (searched) of 4 tuned case(s)" in lines
    assert max(map(len, lines)) <= 80
    res = _cli("--table", ROOT / "suites/attention.yaml", "--device-kind", "TPU v6e")
    assert res.exit_code == 2 and "no shipped tune table for TPU v6e" in res.output


def test_tune_export_writes_the_cache_as_a_table_and_says_what_it_left_out(tmp_path):
    cache = tmp_path / "cache"
    TuneCache(cache / "tune").store(_key(), "sp", TuneOutcome(DEFAULT, 1e-3, 1e-3, 1, 1, {}, 1.0, "device", "ok"))
    (cache / "tune" / "junk.json").write_text("[")
    out = tmp_path / "mine.json"
    res = _cli("--export", out, env={"XLABENCH_CACHE_DIR": str(cache)})
    assert res.exit_code == 0, res.output
    assert "wrote 1 entries for TPU v5 lite" in res.output and "left out junk.json" in res.output
    assert table.read_table(out).find("jax", "flash", CASE).exact
    assert _cli("--export", out, env={"XLABENCH_CACHE_DIR": str(tmp_path / "none")}).exit_code == 2
    bad = _cli("--export", out, "--from", out, ROOT / "suites/attention.yaml")
    assert bad.exit_code == 2 and "takes no SUITE" in bad.output
    (tmp_path / "broken.json").write_text("{")
    res = _cli("--export", out, "--from", tmp_path / "broken.json")
    assert res.exit_code == 2 and "not JSON" in res.output and "Traceback" not in res.output


# ------------------------------------------------------------------------------------ phase cost: inputs

def test_one_shapes_device_inputs_are_put_once_for_every_impl_and_mode(monkeypatch):
    """naive, flash and splash of one shape, fwd then fwd_bwd: q, k, v copied to the device once; another shape
    replaces them; a shape over the size bound is put every time and not kept."""
    import jax

    from xlabench.backends.jax import attention_case as ac
    from xlabench.workloads.attention import AttentionParams, make_inputs

    puts = []
    real = jax.device_put
    monkeypatch.setattr(ac.jax, "device_put", lambda x, d=None: puts.append(x.shape) or real(x, d))
    monkeypatch.setattr(ac, "_DEVICE_INPUTS", {})
    dev = jax.local_devices()[0]
    p = AttentionParams(batch=1, num_heads=2, seq_len=64, head_dim=16, dtype="float32", mode="fwd")
    fwd = [ac.device_inputs(p, make_inputs(p), "float32", dev) for _ in range(3)]
    assert len(puts) == 3 and all(a is b for run in fwd[1:] for a, b in zip(run, fwd[0]))
    pb = p.model_copy(update={"mode": "fwd_bwd"})
    both = ac.device_inputs(pb, make_inputs(pb), "float32", dev)
    assert len(puts) == 4 and both[:3] == fwd[0]  # only the cotangent is new
    p128 = p.model_copy(update={"seq_len": 128})
    ac.device_inputs(p128, make_inputs(p128), "float32", dev)
    assert len(puts) == 7 and len(ac._DEVICE_INPUTS) == 3  # another shape: the first one's are dropped
    monkeypatch.setattr(ac, "MAX_KEPT_INPUT_BYTES", 0)
    ac.device_inputs(p, make_inputs(p), "float32", dev)
    ac.device_inputs(p, make_inputs(p), "float32", dev)
    assert len(puts) == 13 and ac._DEVICE_INPUTS == {}


def test_device_inputs_of_another_draw_are_not_reused_though_a_shape_is_the_same(monkeypatch):
    """The cotangent of q's shape differs with the K/V heads drawn before it (a reuse keyed by each array's
    own shape gave naive fwd_bwd with 2 KV heads the 4-head case's cotangent: error 1.69)."""
    import jax
    import numpy as np

    from xlabench.backends.jax import attention_case as ac
    from xlabench.workloads.attention import AttentionParams, make_inputs

    monkeypatch.setattr(ac, "_DEVICE_INPUTS", {})
    dev = jax.local_devices()[0]
    for kv in (4, 2):
        p = AttentionParams(batch=1, num_heads=4, num_kv_heads=kv, seq_len=64, head_dim=16, dtype="float32",
                            mode="fwd_bwd")
        host = make_inputs(p)
        for got, want in zip(ac.device_inputs(p, host, "float32", dev), host.values()):
            assert np.array_equal(np.asarray(got), want)


def test_the_readme_counts_the_shipped_tables_entries_as_the_file_holds_them():
    """Issue 61 item 11: the README said "72 entries" in one place and "49 attention winners" in another; the
    file holds 64 attention and 8 paged entries. Every count the README gives of it is the file's."""
    import re

    t = table.read_table(table.table_path("TPU v5 lite"))
    paged = sum(1 for e in t.entries if "page_size" in e.case)
    attention = len(t.entries) - paged
    readme = " ".join((ROOT / "README.md").read_text().split())
    said = re.findall(r"tpu_v5_lite\.json`[,:] ([^.;]*?entries|[^.;]*?winners)", readme)
    assert len(said) >= 2, said
    for s in said:
        counts = [int(n) for n in re.findall(r"(\d+) (?:attention|paged)?\s*(?:entries|winners)", s)]
        assert counts and set(counts) <= {len(t.entries), attention, paged}, s
        assert f"{attention} attention" in s and f"{paged} paged" in s, s


def test_one_reference_serves_a_shapes_fwd_and_fwd_bwd_cases_when_the_plan_says_the_twin_follows(monkeypatch):
    """The float32 reference (110 s of a v5e attention run): a fwd case told its fwd_bwd twin follows
    (plan.reference) computes the fwd_bwd reference, whose output is its own; the twin's cases reuse it. Without
    the hint a fwd case computes only the forward; a fwd case after its twin's reference reuses that."""
    import numpy as np

    from xlabench.backends.jax import attention_case as ac
    from xlabench.workloads.attention import AttentionParams, make_inputs

    made = []
    real = ac.impls.reference_outputs
    monkeypatch.setattr(ac.impls, "reference_outputs", lambda q, k, v, do, *a: made.append(do is not None) or
                        real(q, k, v, do, *a))
    monkeypatch.setattr(ac, "_REFERENCE", {})
    fwd = AttentionParams(batch=1, num_heads=2, seq_len=64, head_dim=16, dtype="float32", mode="fwd")
    both = fwd.model_copy(update={"mode": "fwd_bwd"})
    alone = ac.reference(fwd, make_inputs(fwd), 0.25)
    assert ac.reference(fwd, make_inputs(fwd), 0.25, "fwd_bwd")[0] is alone[0]  # kept: no other computed
    ac._REFERENCE.clear()
    shared = ac.reference(fwd, make_inputs(fwd), 0.25, "fwd_bwd")
    assert made == [False, True] and len(alone) == len(shared) == 1
    np.testing.assert_allclose(np.asarray(shared[0]), np.asarray(alone[0]), rtol=1e-5, atol=1e-6)
    twin = ac.reference(both, make_inputs(both), 0.25)
    assert made == [False, True] and len(twin) == 4 and twin[0] is shared[0]
    assert ac.reference(fwd, make_inputs(fwd), 0.25)[0] is twin[0] and made == [False, True]
    ac.reference(fwd.model_copy(update={"causal": False}), make_inputs(fwd), 0.25, "fwd_bwd")
    assert made == [False, True, True]  # another mask: another reference


def test_an_export_takes_the_entries_of_one_chip_under_either_frameworks_name(tmp_path):
    """TorchTPU names the v5e 'TPU v5e', JAX 'TPU v5 lite': a torch_tpu tuning cache exported into the shipped
    table joins it under the table's name (the export refused: 'several device kinds')."""
    folder = tmp_path / "cache"
    folder.mkdir()
    for p in sorted(TORCH_TPU_CACHE.glob("*.json")):
        (folder / p.name).write_text(p.read_text())
    shipped = table.table_path(KIND)
    built = table.build([shipped, folder], commit="2ff8ad7", date="2026-12-08", libtpu="0.0.42.1").table
    assert built.device_kind == KIND
    assert len([e for e in built.entries if e.backend == "torch_tpu"]) == 2
    assert {e.key_text() for e in table.read_table(shipped).entries} <= {e.key_text() for e in built.entries}
    with pytest.raises(table.TableError, match="several device kinds"):
        other = tmp_path / "other"
        other.mkdir()
        raw = json.loads(next(iter(sorted(TORCH_TPU_CACHE.glob("*.json")))).read_text())
        raw["key"]["device_kind"] = "TPU v6 lite"
        (other / "x.json").write_text(json.dumps(raw))
        table.build([shipped, other])
