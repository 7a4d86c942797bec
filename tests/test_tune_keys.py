"""The tuning cache's keys, the space fingerprints and the cache files a search writes, byte for byte as
recorded before the kernels moved into one module each (tests/fixtures/record_tune_keys.py): a user's
existing cache and the shipped tables must still hit (issue 51)."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures import record_tune_keys as record
from xlabench.tune.table import PACKAGE_DIR

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "tune_keys.json").read_text())


def test_every_cache_key_fingerprint_and_stored_entry_is_the_recorded_one():
    now = record.keys()
    assert sorted(now) == sorted(RECORDED["keys"])
    for part in ("key", "file", "space", "entry"):
        changed = [k for k in now if now[k][part] != RECORDED["keys"][k][part]]
        assert not changed, f"{part} changed for {len(changed)} cases, e.g. {changed[:3]}"


def test_every_shipped_table_entry_was_searched_over_the_space_its_case_has_now():
    """Each entry's own ``space`` (the fingerprint when it was searched) is its case's space's today, and its
    blocks are a candidate (else the tuner would search instead of verifying it)."""
    now = record.tables()
    assert now == RECORDED["tables"]
    for path in sorted(PACKAGE_DIR.glob("*.json")):
        for i, e in enumerate(json.loads(path.read_text())["entries"]):
            assert now[record.entry_label(path.name, e)] == {"space": e["space"], "in_space": True}, (path.name, i)
