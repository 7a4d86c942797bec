"""The catalog of implementations: names, where each runs, what it is. Framework-free on purpose.

The parent process validates suites and plans skipped rows from this table without importing a
framework; each backend module maps the same names to code (tests check the two agree).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Mapping, Optional, TypeVar

from xlabench.impls import kernels
from xlabench.impls.kernel import ATTENTION, BACKENDS, AttentionRule, ImplInfo, PagedRule, no_rule  # noqa: F401 (re-exported)


# The catalogue, collected from the kernel modules (impls/kernels/: one module per kernel, one registration
# line each; impls/kernel.py says what a module declares).
CATALOG = kernels.CATALOG

# ---------------------------------------------------------------------------------------------------
# The one contract of a backend's impl records (each backend subclasses these and adds its extras).

# kv_round(platform) -> the dtype the kernel rounds K/V to there (the reference rounds them too), or None
KvRound = Callable[[str], Optional[str]]


def no_kv_round(platform: str) -> Optional[str]:
    return None


def kv_round_to(dtype: str) -> KvRound:
    """The kernel rounds K/V to ``dtype`` on every platform."""
    return lambda platform: dtype


@dataclass(frozen=True)
class AttentionImplRecord:
    """One attention impl of a backend: q [B,Sq,Hq,D], k/v [B,Sk,Hkv,D] in ``layout``."""

    name: str
    layout: str  # "bshd" or "bhsd": what fn expects and returns
    fn: Callable  # fn(q, k, v, cfg) -> out (in `layout`)
    unsupported: AttentionRule
    note: str = ""  # goes into the row's notes (when the impl changes the case, e.g. repeats GQA heads)
    # The contract's optional parts (docs/kernels.md), shared by built-ins and user impls:
    block_params: tuple[str, ...] = ()  # the kernel parameters it takes (a case setting another is skipped)
    kernel_flops: Optional[Callable[[Any], float]] = None  # its own count per iteration (params -> FLOPs)
    params_rule: Optional[Callable[[Any, str], Optional[str]]] = None  # user hook unsupported(params, platform)
    source: str = "built-in"  # or the import path it came from
    # Its block-size search (xlabench/tune): params -> the stages (tune.Stage) to search; None: not tuned.
    tune_space: Optional[Callable[[Any], list]] = None


@dataclass(frozen=True)
class PagedImplRecord:
    """One paged-attention impl of a backend: shared inputs -> ``prepare`` -> ``fn`` -> [B, nq, Hq, D]."""

    name: str
    prepare: Callable[..., tuple]  # prepare(q, k_pages, v_pages, lengths, table, cfg) -> args
    fn: Callable[..., Any]  # fn(*args, cfg) -> out [B, nq, Hq, D]
    unsupported: PagedRule
    kv_round: KvRound = no_kv_round
    tune_space: Optional[Callable[[Any], list]] = None  # params -> its block-size search (tune.Stage list)


Record = TypeVar("Record")


def lookup(registry: Mapping[str, Record], name: str, what: str) -> Record:
    """``registry[name]``, or a ValueError naming ``what`` and the names there are."""
    try:
        return registry[name]
    except KeyError:
        raise ValueError(f"unknown {what} impl {name!r}; expected one of {sorted(registry)}") from None


def find(backend: str, name: str, workload: str | None = None) -> ImplInfo | None:
    """The catalog entry of an impl (of ``workload`` when given: one name may serve several workloads);
    a user impl (import path or entry point) gets one made up here: the parent never imports it."""
    if is_user(name) and backend in USER_BACKENDS and (workload is None or workload in USER_WORKLOADS):
        return ImplInfo(name, backend, USER_WORKLOADS, USER_PLATFORMS, ("cpu",), f"user impl {user_target(name)}")
    for info in CATALOG:
        if info.backend == backend and info.name == name and (workload is None or workload in info.workloads):
            return info
    return None


def names_for(workload: str, backend: str | None = None) -> list[str]:
    """Impl names valid for a workload (optionally one backend), in catalog order, without repeats."""
    out: list[str] = []
    for info in CATALOG:
        if workload in info.workloads and (backend is None or info.backend == backend):
            if info.name not in out:
                out.append(info.name)
    return out


# ---------------------------------------------------------------------------------------------------
# User impls: an import path ``package.module:attr`` in a suite's ``impls:``, or the name of an entry
# point of group ENTRY_POINT_GROUP (its value is such a path). The parent checks the syntax and reads
# entry-point metadata only; the worker imports (xlabench/backends/user_impl.py). The contract is in
# docs/kernels.md. On CPU a user impl is handed ``interpret=True`` (a Pallas kernel needs its interpreter;
# a plain-jnp one ignores it), so its CPU rows are marked interpreted.
ENTRY_POINT_GROUP = "xlabench.impls"
USER_WORKLOADS = ATTENTION  # a user impl is an attention kernel
USER_BACKENDS = ("jax", "torch_xla")
USER_PLATFORMS = ("tpu", "gpu")
_IDENT = r"[A-Za-z_][A-Za-z0-9_]*"
IMPL_PATH = re.compile(rf"^{_IDENT}(\.{_IDENT})*:{_IDENT}(\.{_IDENT})*$")


def is_path(name: str) -> bool:
    """Whether ``name`` means an import path (it has a colon) rather than a name."""
    return ":" in name


def path_problem(name: str) -> Optional[str]:
    """What is wrong with an import path's syntax, or None when it is ``module.sub:attr``."""
    if IMPL_PATH.match(name):
        return None
    return f"{name!r} is not an import path of the form package.module:function (dotted names, one colon)"


@dataclass(frozen=True)
class EntryPointImpl:
    name: str
    target: str  # module:attr
    dist: str  # the distribution that declares it ("name version")


@functools.lru_cache(maxsize=1)
def entry_point_impls() -> dict[str, EntryPointImpl]:
    """The impls installed packages declare under ENTRY_POINT_GROUP (metadata only: nothing imported)."""
    from importlib.metadata import entry_points

    out: dict[str, EntryPointImpl] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        dist = getattr(ep, "dist", None)
        source = f"{dist.metadata['Name']} {dist.version}" if dist is not None else "?"
        out.setdefault(ep.name, EntryPointImpl(ep.name, ep.value, source))
    return out


def entry_point_clashes() -> list[str]:
    """One line per entry-point impl whose name is a built-in impl's (refused: it would be ambiguous)."""
    builtin = {i.name for i in CATALOG}
    return [f"entry point {e.name!r} = {e.target!r} of {e.dist} (group {ENTRY_POINT_GROUP}) has the name of a "
            f"built-in impl; rename it" for e in entry_point_impls().values() if e.name in builtin]


def is_user(name: str) -> bool:
    """A user impl: an import path, or an entry point's name (never a built-in's)."""
    if is_path(name):
        return True
    if any(i.name == name for i in CATALOG):
        return False
    return name in entry_point_impls()


def user_target(name: str) -> str:
    """The import path of a user impl (an entry point's value, or the path itself)."""
    if is_path(name):
        return name
    ep = entry_point_impls().get(name)
    if ep is None:
        raise ValueError(f"unknown impl {name!r}: neither a built-in, an import path module:attr nor an entry "
                         f"point of group {ENTRY_POINT_GROUP}")
    return ep.target
