"""One module per kernel (issue 51): the catalogue, the attention rules and the paged rules and spaces are
collected from xlabench/impls/kernels/, and are what they were before the move (recorded by
tests/fixtures/record_impl_tables.py); a kernel's constraints are in its config's type."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.fixtures import record_impl_tables as record
from xlabench import impls
from xlabench.impls import attention_rules, kernels, paged_rules
from xlabench.impls.kernel import ATTENTION, ImplInfo, Kernel
from xlabench.impls.kernels.flash import FlashConfig
from xlabench.impls.kernels.splash import SplashConfig

RECORDED = json.loads((Path(__file__).parent / "fixtures" / "impl_tables.json").read_text())


def test_the_collected_tables_are_the_recorded_ones():
    now = record.tables()
    assert now["catalog"] == RECORDED["catalog"]  # every entry, in the same order
    changed = [k for k in RECORDED if now.get(k) != RECORDED[k]]
    assert sorted(now) == sorted(RECORDED) and not changed, changed


def test_the_old_names_are_the_collected_tables():
    assert impls.CATALOG is kernels.CATALOG and attention_rules.RULES is kernels.ATTENTION_RULES
    assert paged_rules.RULES is kernels.PAGED_RULES and paged_rules.SPACES is kernels.SPACES


def test_every_kernel_module_declares_its_entries_and_every_entry_is_registered_once():
    modules = {k.info.name for k in kernels.KERNELS}
    assert modules == {p.stem for p in Path(kernels.__file__).parent.glob("*.py")} - {"__init__"}
    assert len({(k.info.backend, k.info.name, k.info.workloads) for k in kernels.KERNELS}) == len(kernels.KERNELS)


@pytest.mark.parametrize("config, why", [
    (FlashConfig(block_q=128, block_k=96), "flash_attention needs block_k to be a multiple of 128 (got 96)"),
    (SplashConfig(block_k=512, block_kv_compute=384), "splash needs block_kv_compute to divide block_k (got 384 for 512)"),
])
def test_a_config_that_breaks_its_kernels_constraint_is_refused_saying_why(config, why):
    with pytest.raises(ValueError, match=why.replace("(", r"\(").replace(")", r"\)")):
        config.validate()
    assert why in config.problem()


def test_a_config_within_its_constraints_validates_and_has_no_problem():
    for c in (FlashConfig(block_k=256), FlashConfig(), SplashConfig(block_k=512, block_kv_compute=256)):
        assert c.validate() is c and c.problem() is None


def test_a_kernel_registered_twice_is_refused():
    twin = SimpleNamespace(__name__="twin", KERNELS=(Kernel(ImplInfo("flash", "jax", ATTENTION, ("tpu",), (), "")),))
    with pytest.raises(ValueError, match="twin: jax kernel 'flash' is registered already"):
        kernels.register(twin)
    assert len(kernels.KERNELS) == len({id(k) for k in kernels.KERNELS})
