"""The catalog of implementations: names, where each runs, what it is. Framework-free on purpose.

The parent process validates suites and plans skipped rows from this table without importing a
framework; a backend's worker makes its records from the kernels' (``attention_record``, ``paged_record``:
the code each Kernel record names, imported then).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import Any, Callable, Optional

from xlabench.impls import kernels
from xlabench.impls.kernel import ATTENTION, BACKENDS, AttentionRule, ImplInfo, PagedRule, no_rule  # noqa: F401 (re-exported)
from xlabench.impls.kernel import Kernel, KvRound, kv_round_to, no_kv_round, resolve  # noqa: F401 (re-exported)


# The catalogue, collected from the kernel modules (impls/kernels/: one module per kernel, one registration
# line each; impls/kernel.py says what a module declares).
CATALOG = kernels.CATALOG

# ---------------------------------------------------------------------------------------------------
# The one contract of a backend's impl records, made from the kernel records (attention_record, paged_record).

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
    interpreter_fails: str = ""  # set: an error in the CPU interpreter is this skip, not a failure
    cpu_note: str = ""  # what its CPU rows ran, when that is not the kernel


def shared_inputs(q, k_pages, v_pages, lengths, table, cfg) -> tuple:
    """A paged kernel's ``prepare`` when its record names none: the shared inputs as they are."""
    return q, k_pages, v_pages, lengths, table


def _built_in(backend: str, name: str, paged: bool, what: str) -> Kernel:
    """The registered kernel whose code ``backend``'s worker runs, or a ValueError naming ``what`` and the others."""
    k = kernels.kernel(backend, name, paged_family=paged)
    if k is None or not k.code:
        known = sorted(k.info.name for k in kernels.KERNELS if k.info.backend == backend and k.paged == paged and k.code)
        raise ValueError(f"unknown {what} impl {name!r}; expected one of {known}")
    return k


def attention_record(backend: str, name: str, what: str, cls: type = AttentionImplRecord) -> Any:
    """A built-in attention kernel of ``backend`` as its Kernel record declares it (impls/kernels/): its code,
    imported now, in its layout, with its rule, block parameters, search and note."""
    k = _built_in(backend, name, False, what)
    return cls(name, k.layout, resolve(k.code), k.unsupported, note=k.note, block_params=k.block_params,
               tune_space=k.tune_space)


def paged_record(backend: str, name: str, what: str) -> PagedImplRecord:
    """A built-in paged kernel of ``backend`` as its Kernel record declares it: its prepare and code, imported
    now; its rule, then the rule only a worker can apply; its K/V rounding, search and CPU facts."""
    k = _built_in(backend, name, True, what)
    rule = k.unsupported
    if k.worker_rule:
        extra = resolve(k.worker_rule)
        rule = lambda p, platform, kind: k.unsupported(p, platform, kind) or extra(p, platform, kind)  # noqa: E731
    return PagedImplRecord(name, resolve(k.prepare) if k.prepare else shared_inputs, resolve(k.code), rule,
                           k.kv_round, k.tune_space, k.interpreter_fails, k.cpu_note)


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
