"""Candidate spaces and kernel configs. A candidate is a mapping of block parameter -> size; each tuned
kernel declares its typed config (a KernelConfig: the block fields it takes, their defaults from the case,
the search stage each belongs to) and its search space beside its rules (its module in impls/kernels/), from
the pieces here. A config's field names are the names the tuner, the tuning
cache and the results' ``tuned_*`` and ``blocks`` columns use, so a candidate is a partial config."""

from __future__ import annotations

import dataclasses
from typing import Any, Iterable, Iterator, Mapping, Optional, TypeVar

Blocks = Mapping[str, int]

FORWARD, BACKWARD = "fwd", "bwd"  # the search stage a config field belongs to (field metadata "stage")

@dataclasses.dataclass(frozen=True, eq=False)
class Candidate(Mapping[str, int]):
    """One candidate of a kernel's search: some fields of its config (``kernel``, a KernelConfig class; None
    for a user kernel's), hashable and order-free. It reads as the mapping of those fields to their sizes
    (equal to a dict of the same pairs), so the cache's fingerprint and stored blocks are those pairs'."""

    pairs: tuple[tuple[str, int], ...]  # in the order given (a dict of them is the old candidate, key order too)
    kernel: Optional[type] = dataclasses.field(default=None, repr=False)

    @classmethod
    def of(cls, blocks: Mapping[str, int], kernel: Optional[type] = None) -> "Candidate":
        if isinstance(blocks, Candidate) and kernel in (None, blocks.kernel):
            return blocks
        return cls(tuple((str(n), int(v)) for n, v in blocks.items()), kernel)

    def __getitem__(self, name: str) -> int:
        for n, v in self.pairs:
            if n == name:
                return v
        raise KeyError(name)

    def __iter__(self) -> Iterator[str]:
        return (n for n, _ in self.pairs)

    def __len__(self) -> int:
        return len(self.pairs)

    def __hash__(self) -> int:
        return hash(frozenset(self.pairs))

C = TypeVar("C", bound="KernelConfig")


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """A kernel's typed config, tokamax-style: a frozen dataclass of the block fields the kernel takes.
    A field at None is unset (``with_defaults`` fills it from the case, as the kernel's default); a kernel
    reads its sizes as attributes of its resolved config, never by name."""

    @classmethod
    def names(cls, stage: Optional[str] = None) -> tuple[str, ...]:
        """The field names (of one search ``stage``: FORWARD, the default, or BACKWARD)."""
        return tuple(f.name for f in dataclasses.fields(cls) if stage in (None, f.metadata.get("stage", FORWARD)))

    @classmethod
    def refuse_unknown(cls, names: Iterable[str]) -> None:
        """ValueError naming each of ``names`` this kernel has no field for, and the fields it has."""
        unknown = sorted(set(names) - set(cls.names()))
        if unknown:
            raise ValueError(f"{cls.__name__} has no block {', '.join(map(repr, unknown))}: it takes "
                             f"{', '.join(cls.names())}")

    @classmethod
    def candidate(cls, **blocks: int) -> Candidate:
        """One candidate of the kernel's search: some of its fields, checked (an unknown name is refused)."""
        cls.refuse_unknown(blocks)
        return Candidate.of(blocks, cls)

    @classmethod
    def resolve(cls: type[C], blocks: Mapping[str, Optional[int]], *case: Any) -> C:
        """The config at ``blocks`` (a case's or a candidate's; None: unset), the rest at their defaults for
        ``case`` (what ``with_defaults`` takes); ValueError for a name the kernel has no field for."""
        cls.refuse_unknown(blocks)
        return cls(**{n: int(v) for n, v in blocks.items() if v is not None}).with_defaults(*case)

    def with_defaults(self: C, *case: Any) -> C:
        """This config with its unset fields at the kernel's defaults for ``case`` (a subclass's)."""
        return self

    def validate(self: C) -> C:
        """This config, or a ValueError saying which of the kernel's constraints its set fields break (a
        subclass's: e.g. flash's block_k a multiple of 128)."""
        return self

    def problem(self) -> Optional[str]:
        """What ``validate`` refuses in this config (the kernel's skip reason), or None."""
        try:
            self.validate()
        except ValueError as e:
            return str(e)
        return None

    def blocks(self, names: Optional[Iterable[str]] = None) -> dict[str, int]:
        """{field: size} of the set fields (of ``names``): a candidate, the search's default, a cache entry."""
        return {n: getattr(self, n) for n in (self.names() if names is None else names) if getattr(self, n) is not None}


def config_fields(name: str, names: Iterable[str], base: type = KernelConfig, stage: str = FORWARD) -> type:
    """A KernelConfig subclass with one optional int field per name in ``names``: the fields of a list
    declared elsewhere (a workload's tuned parameters) without spelling them again."""
    return dataclasses.make_dataclass(name, [(n, Optional[int], dataclasses.field(default=None, metadata={"stage": stage}))
                                             for n in names], bases=(base,), frozen=True)


def with_blocks(cfg: Any, blocks: Mapping[str, int], own: Iterable[str]) -> Any:
    """``cfg`` (a backend's AttnConfig or PagedConfig) at ``blocks``: the ones it has a field for (``own``,
    the case's parameters) to those fields, the rest to its ``blocks`` pairs (sorted), which each kernel's
    config reads (KernelConfig.resolve)."""
    own = tuple(own)
    rest = frozen({k: v for k, v in blocks.items() if k not in own})
    return dataclasses.replace(cfg, **{n: blocks.get(n, getattr(cfg, n)) for n in own}, blocks=rest)


# The powers of two a block size is searched over (issue: 128 .. min(S, 2048)).
SMALLEST_BLOCK = 128
LARGEST_BLOCK = 2048


def pow2_tiles(n: int, low: int = SMALLEST_BLOCK, high: int = LARGEST_BLOCK) -> list[int]:
    """The powers of two from ``low`` to min(n, ``high``) that tile ``n`` (divide it); [n] when n < low."""
    if n < low:
        return [n]
    out, b = [], low
    while b <= min(n, high):
        if n % b == 0:
            out.append(b)
        b *= 2
    return out or [n]


def diagonal(candidates: Iterable[Blocks], names: Iterable[str]) -> tuple[Blocks, ...]:
    """The candidates whose ``names`` are all one size (the square blocks: 128 x 128 .. 2048 x 2048): where a
    descent over block sizes starts, one seed per scale."""
    names = tuple(names)
    return tuple(c for c in candidates if len({c[n] for n in names if n in c}) == 1)


def near(blocks: Blocks, candidates: Iterable[Blocks]) -> tuple[Blocks, ...]:
    """``blocks`` (restricted to the candidates' fields) and, one at a time, each of its fields one size
    smaller, where they are candidates: the seeds of a descent that starts from a related case's winner
    (a fwd_bwd search from its fwd case's blocks: the forward kernel there also writes the softmax
    residuals, so the fwd winner can exceed VMEM, and a smaller neighbour fits)."""
    cands = [dict(c) for c in candidates]
    names = sorted({n for c in cands for n in c})
    start = {n: int(blocks[n]) for n in names if n in blocks}
    if len(start) != len(names) or start not in cands:
        return ()
    out = [start]
    for n in names:
        smaller = [c[n] for c in cands if c[n] < start[n] and {**start, n: c[n]} in cands]
        if smaller:
            out.append({**start, n: max(smaller)})
    return tuple(out)


def frozen(blocks: Blocks) -> tuple[tuple[str, int], ...]:
    """A hashable, order-free form of a candidate (dict keys, cache entries, AttnConfig.blocks)."""
    return tuple(sorted((str(k), int(v)) for k, v in blocks.items()))


def blocks_text(blocks: Blocks, leave_out: Iterable[str] = ()) -> str:
    """'block_kv_compute=512 block_q_bwd=1024' (sorted; empty for none): the row's ``blocks`` column."""
    skip = set(leave_out)
    return " ".join(f"{k}={v}" for k, v in frozen(blocks) if k not in skip)


def parse_blocks(text: str) -> dict[str, int]:
    """The inverse of blocks_text; ValueError naming the bad word."""
    out: dict[str, int] = {}
    for word in str(text or "").split():
        key, sep, value = word.partition("=")
        if not sep or not key or not value.isdigit():
            raise ValueError(f"blocks: {word!r} is not NAME=INTEGER")
        out[key] = int(value)
    return out
