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


def test_every_candidate_of_a_built_in_search_is_a_hashable_config_that_reads_as_its_blocks():
    from xlabench.tune.space import Candidate
    from xlabench.workloads.attention import AttentionParams

    p = AttentionParams(batch=1, num_heads=2, seq_len=1024, head_dim=128, mode="fwd_bwd")
    for k in kernels.KERNELS:
        if k.tune_space is None or k.paged:
            continue
        for st in k.tune_space(p):
            assert all(isinstance(c, Candidate) and c.kernel is k.config for c in st.candidates), k.key
            assert len(set(st.candidates)) == len(st.candidates)  # hashable, and no two alike
            for c in st.candidates:
                assert c == dict(c) and dict(c) == c and hash(c) == hash(Candidate.of(dict(reversed(list(c.items())))))
                config = c.kernel.resolve(c, p.seq_len, p.kv_len)
                assert isinstance(config, k.config) and config.blocks(c) == dict(c)


def test_a_stage_makes_the_dicts_it_is_given_hashable_candidates():
    from xlabench.tune.search import Stage
    from xlabench.tune.space import Candidate

    st = Stage("fwd", ({"block_q": 128, "block_k": 256}, {"block_k": 256, "block_q": 128}), seeds=({"block_q": 128},))
    assert all(isinstance(c, Candidate) for c in (*st.candidates, *st.seeds))
    assert len(set(st.candidates)) == 1 and st.candidates[0] == {"block_q": 128, "block_k": 256}
    assert list(st.candidates[0]) == ["block_q", "block_k"]  # the order given: a dict of it is the old candidate
    assert st.candidates[0].kernel is None  # a user kernel's: no typed config


# Strings equal to a kernel's name that are not that kernel: each with what it is.
NOT_KERNEL_NAMES = {
    ("xlabench/backends/jax/attention_impls.py", "cudnn"): "jax.nn.dot_product_attention's implementation argument",
    ("xlabench/report/plots.py", "paged"): "the paged decode chart's kind (`plot --kind paged`)",
    ("xlabench/workloads/record.py", "paged"): "the paged kernels' family",
}


def test_kernel_names_are_spelled_only_in_their_kernel_modules():
    """A kernel's name is a string in its module (impls/kernels/<name>.py: NAME) and nowhere else in xlabench/:
    code that needs it imports the module's NAME (a renamed kernel is one edit; a new one touches no other
    module). Docstrings may name kernels."""
    import ast

    from xlabench.impls import kernels

    names = {k.info.name for k in kernels.KERNELS}
    root = Path(__file__).resolve().parent.parent
    found = []
    for path in sorted((root / "xlabench").rglob("*.py")):
        rel = str(path.relative_to(root))
        if rel.startswith("xlabench/impls/kernels/"):
            continue
        tree = ast.parse(path.read_text())
        docs = {id(n.body[0].value) for n in ast.walk(tree)
                if isinstance(n, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and n.body
                and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
        found += [f"{rel}:{n.lineno}: {n.value!r}" for n in ast.walk(tree)
                  if isinstance(n, ast.Constant) and isinstance(n.value, str) and n.value in names
                  and id(n) not in docs and (rel, n.value) not in NOT_KERNEL_NAMES]
    assert found == [], "\n".join(found)
