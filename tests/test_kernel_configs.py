"""Each tuned built-in kernel's typed config (issue 42): its defaults are what the kernel ran at before it
had one, its search space is the one recorded before (tests/fixtures/record_kernel_configs.py, at
78df975: the tuning cache's space keys, the tuned_* and blocks columns depend on it), every candidate
round-trips through the config, and a block name the kernel does not have is refused, naming it."""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixtures import record_kernel_configs as record

ROOT = Path(__file__).resolve().parents[1]
RECORDED = json.loads((ROOT / "tests" / "fixtures" / "kernel_configs.json").read_text())


def test_every_search_space_is_the_recorded_one():
    now = record.spaces()
    assert sorted(now) == sorted(RECORDED["spaces"])
    changed = [k for k in now if now[k] != RECORDED["spaces"][k]]
    assert not changed, f"{len(changed)} spaces changed, e.g. {changed[:3]}"


def test_every_kernel_hands_its_pallas_kernel_the_recorded_block_sizes():
    """The configs none, the case's block_q/block_k and every candidate of the kernel's fwd_bwd search."""
    now = record.kernel_sizes()
    assert sorted(now) == sorted(RECORDED["kernel_sizes"])
    changed = [k for k in now if now[k] != RECORDED["kernel_sizes"][k]]
    assert not changed, f"{len(changed)} configs changed, e.g. {changed[:3]}"
