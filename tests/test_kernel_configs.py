"""Each tuned built-in kernel's typed config (issue 42): its defaults are what the kernel ran at before it
had one, its search space is the one recorded before (tests/fixtures/record_kernel_configs.py, at
78df975: the tuning cache's space keys, the tuned_* and blocks columns depend on it), every candidate
round-trips through the config, and a block name the kernel does not have is refused, naming it."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import typing
from pathlib import Path
from typing import Annotated, Optional

import pytest

from tests.fixtures import record_kernel_configs as record
from xlabench.impls import attention_rules, configs, paged_rules
from xlabench.impls.kernels.flash import FlashConfig
from xlabench.impls.kernels.paged import PagedKernelConfig
from xlabench.impls.kernels.pallas_gpu import PallasGpuConfig
from xlabench.impls.kernels.ragged_paged import RaggedPagedConfig
from xlabench.impls.kernels.splash import SplashConfig
from xlabench.tune.space import Divides, KernelConfig, MultipleOf, Searched
from xlabench.workloads import TUNED_PARAMS
from xlabench.workloads.attention import AttnConfig
from xlabench.workloads.paged import PagedConfig, PagedParams

ROOT = Path(__file__).resolve().parents[1]
RECORDED = json.loads((ROOT / "tests" / "fixtures" / "kernel_configs.json").read_text())
ATTENTION = {"flash": FlashConfig, "splash": SplashConfig,
             "pallas_gpu": PallasGpuConfig}
PAGED = {"paged": PagedKernelConfig, "ragged_paged": RaggedPagedConfig}


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


# each config field -> the Pallas BlockSizes field the kernel passes it as (None: a flag, not a size)
PALLAS_FIELD = {"flash": {"block_q": "block_q", "block_k": "block_k", "block_q_bwd": "block_q_dkv",
                          "block_k_bwd": "block_k_dkv"},
                "splash": {"block_q": "block_q", "block_k": "block_kv", "block_kv_compute": "block_kv_compute",
                           "block_q_bwd": "block_q_dkv", "block_k_bwd": "block_kv_dkv",
                           "fused_bwd": "use_fused_bwd_kernel"},
                "pallas_gpu": {"block_q": "block_q", "block_k": "block_k"}}


@pytest.mark.parametrize("kernel, s, causal, mode", list(itertools.product(
    ATTENTION, (128, 512, 4096), (True, False), ("fwd", "fwd_bwd"))))
def test_the_configs_defaults_are_what_the_kernel_ran_at(kernel, s, causal, mode):
    """The config of a case that sets no blocks is what the kernel passed to Pallas before (recorded), and
    the search's default (its stages' defaults together) is that config too."""
    got = ATTENTION[kernel].of(AttnConfig(causal=causal, sm_scale=0.1), s, s)
    ran = RECORDED["kernel_sizes"][f"{kernel} {s}x{s} causal={causal} none"]
    assert {f: int(ran[PALLAS_FIELD[kernel][f]]) for f in ATTENTION[kernel].names()} == got.blocks()
    stages = attention_rules.RULES["jax", kernel]["tune_space"](record._attn_params(s, s, causal, mode))
    default = {n: v for st in stages for n, v in st.default.items()}
    assert default == (got.blocks() if mode == "fwd_bwd" else got.blocks(ATTENTION[kernel].names("fwd")))


def test_the_case_blocks_are_clipped_and_the_backward_follows_them():
    c = SplashConfig.of(AttnConfig(causal=True, sm_scale=0.1, block_q=512, block_k=1024), 256, 512)
    assert (c.block_q, c.block_k, c.block_kv_compute, c.block_q_bwd, c.block_k_bwd, c.fused_bwd) == (256, 512, 512,
                                                                                                      256, 512, 0)


def _attn_candidates():
    for kernel, (sq, sk), mode in itertools.product(ATTENTION, record.SHAPES, ("fwd", "fwd_bwd")):
        for st in attention_rules.RULES["jax", kernel]["tune_space"](record._attn_params(sq, sk, True, mode)):
            yield ATTENTION[kernel], (sq, sk), st


def test_every_candidate_round_trips_through_its_config():
    seen = set()
    for cls, case, st in _attn_candidates():
        for c in (*st.candidates, st.default):
            assert cls.resolve(c, *case).blocks(c) == c, (cls.__name__, case, c)
            seen.add(cls)
    for (backend, kernel), space in paged_rules.SPACES.items():
        for kw in record.PAGED:
            for st in space(PagedParams(**kw)):
                for c in (*st.candidates, st.default):
                    assert PAGED[kernel].resolve(c).blocks(c) == c
                    seen.add(PAGED[kernel])
    assert seen == {*ATTENTION.values(), *PAGED.values()}  # every kernel's space had candidates


@pytest.mark.parametrize("cls, name", [(FlashConfig, "block_kv_compute"),
                                       (PallasGpuConfig, "block_q_bwd"),
                                       (SplashConfig, "block_kv"),
                                       (PagedKernelConfig, "queries_per_block")])
def test_a_block_the_kernel_does_not_have_is_refused_naming_it(cls, name):
    with pytest.raises(ValueError, match=rf"{cls.__name__}.*'{name}'.*takes"):
        cls.resolve({name: 128}, 512, 512) if cls in ATTENTION.values() else cls.resolve({name: 8})
    with pytest.raises(ValueError, match=rf"'{name}'"):
        cls.candidate(**{name: 128})


def test_a_kernel_refuses_a_config_with_another_kernels_block():
    import jax.numpy as jnp

    from xlabench.backends.jax import attention_impls as impls

    q = jnp.zeros((1, 1, 128, 128), jnp.float32)
    cfg = AttnConfig(causal=True, sm_scale=0.1, interpret=True).with_blocks({"block_kv_compute": 128})
    with pytest.raises(ValueError, match="FlashConfig has no block 'block_kv_compute'"):
        impls.flash(q, q, q, cfg)


def test_ragged_paged_takes_its_queries_per_block_from_its_config():
    from xlabench.backends.jax import paged_impls

    args = (_Shaped((32, 4, 128)), _Shaped((8, 16, 8, 128)), None, _Shaped((4, 2)))
    cfg = PagedConfig(sm_scale=0.1, pages_per_compute_block=2, megacore_mode=None, interpret=True, platform="cpu")
    assert paged_impls._ragged_blocks(args, cfg) == {"num_kv_pages_per_block": 2, "num_queries_per_block": 32}
    tuned = cfg.with_blocks({"pages_per_compute_block": 1, "queries_per_block": 16})
    assert paged_impls._ragged_blocks(args, tuned) == {"num_kv_pages_per_block": 1, "num_queries_per_block": 16}


@dataclasses.dataclass
class _Shaped:
    shape: tuple


def test_each_kernel_block_is_declared_once_and_spelled_as_a_string_nowhere():
    """A config field is the name the tuner, the cache and the blocks column use: declared once (a field of
    one config; the case's own parameters are TUNED_PARAMS, declared in their workload's module and spelled as
    the fields of impls.configs' bases, which are checked against them at import, as the backward blocks are),
    never spelled again as a string for a kernel to look up."""
    names = {n for cls in (*ATTENTION.values(), *PAGED.values()) for n in cls.names()}
    own = names - {n for ns in TUNED_PARAMS.values() for n in ns} - {f"{n}_bwd" for n in TUNED_PARAMS["attention"]}
    assert own == {"block_kv_compute", "fused_bwd", "queries_per_block"}
    declared: dict[str, list[str]] = {n: [] for n in names}
    for path in (ROOT / "xlabench").rglob("*.py"):
        tree = ast.parse(path.read_text())
        strings = {n.value for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        assert not strings & (names - {n for ns in TUNED_PARAMS.values() for n in ns}), path
        for cls in (n for n in ast.walk(tree) if isinstance(n, ast.ClassDef)):
            for stmt in cls.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id in own:
                    declared[stmt.target.id].append(f"{path.relative_to(ROOT)}:{cls.name}")
    assert {n: len(v) for n, v in declared.items() if n in own} == dict.fromkeys(own, 1), declared


def test_a_kernel_config_shows_its_fields_and_their_constraints_in_their_types():
    assert [f.name for f in dataclasses.fields(SplashConfig)] == [
        *TUNED_PARAMS["attention"], *(f"{n}_bwd" for n in TUNED_PARAMS["attention"]), "block_kv_compute", "fused_bwd"]
    hints = {cls: typing.get_type_hints(cls, include_extras=True) for cls in (*ATTENTION.values(), *PAGED.values())}
    block_k = TUNED_PARAMS["attention"][1]
    assert MultipleOf(128) in hints[FlashConfig][block_k].__metadata__
    assert Divides(block_k) in hints[SplashConfig]["block_kv_compute"].__metadata__
    assert SplashConfig.names("bwd")[-1] == "fused_bwd"
    for cls, h in hints.items():  # every Divides names a field of its config; a stage is fwd or bwd
        for name, hint in h.items():
            for mark in getattr(hint, "__metadata__", ()):
                assert not isinstance(mark, Divides) or mark.other in cls.names(), (cls, name)
                assert not isinstance(mark, Searched) or mark.stage in ("fwd", "bwd"), (cls, name)


@dataclasses.dataclass(frozen=True)
class Toy(KernelConfig):
    """A config of two constrained fields (module-level: a config's types are read in its module's names)."""

    a: Annotated[Optional[int], MultipleOf(8)] = None
    b: Annotated[Optional[int], Divides("a")] = None


def test_the_constraints_are_checked_in_one_place_on_the_set_fields_only():
    assert Toy().validate() == Toy() and Toy(b=3).problem() is None  # unset: not checked
    assert Toy(a=12).problem() == "Toy needs a to be a multiple of 8 (got 12)"
    assert Toy(a=16, b=3).problem() == "Toy needs b to divide a (got 3 for 16)"
    assert Toy.names() == ("a", "b") and Toy.names("bwd") == ()


def test_a_config_base_whose_fields_are_not_the_workloads_tuned_parameters_is_refused():
    with pytest.raises(TypeError, match="KernelBlocks's fields .* are not"):
        configs._fields_are(configs.KernelBlocks, None, ("block_q",))
