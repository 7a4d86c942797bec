"""Candidate spaces and kernel configs. A candidate is a mapping of block parameter -> size; each tuned
kernel declares its typed config (a KernelConfig: the block fields it takes, their defaults from the case,
the search stage and the constraints of each in its type) and its search space beside its rules (its module
in impls/kernels/), from the pieces here. A config's field names are the names the tuner, the tuning
cache and the results' ``tuned_*`` and ``blocks`` columns use, so a candidate is a partial config."""

from __future__ import annotations

import dataclasses
import functools
import typing
from typing import Any, ClassVar, Iterable, Iterator, Mapping, Optional, TypeVar

Blocks = Mapping[str, int]

FORWARD, BACKWARD = "fwd", "bwd"  # the search stage a config field belongs to (its type's Searched; FORWARD)

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


# What a config field's type declares besides its values (tokamax-style: ``Annotated[Optional[int],
# MultipleOf(128)]``): the search stage it belongs to, and its constraints, which KernelConfig.validate checks,
# in one place, on the fields that are set. A constraint's ``problem`` says what the value breaks, or None.
@dataclasses.dataclass(frozen=True)
class Searched:
    """The search stage of a field (FORWARD or BACKWARD): ``Annotated[Optional[int], Searched(BACKWARD)]``;
    a field without one is searched in the FORWARD stage."""

    stage: str


@dataclasses.dataclass(frozen=True)
class MultipleOf:
    """Constraint: the field's value is a multiple of ``n`` (flash's block_k, a whole number of lanes)."""

    n: int

    def problem(self, name: str, value: int, config: Any) -> Optional[str]:
        return None if value % self.n == 0 else f"needs {name} to be a multiple of {self.n} (got {value})"


@dataclasses.dataclass(frozen=True)
class Divides:
    """Constraint: the field's value divides the config's field ``other``, where that is set (splash's
    block_kv_compute, a part of block_k)."""

    other: str

    def problem(self, name: str, value: int, config: Any) -> Optional[str]:
        of = getattr(config, self.other)
        return None if of is None or of % value == 0 else f"needs {name} to divide {self.other} (got {value} for {of})"


@functools.lru_cache(maxsize=None)
def declared(cls: type) -> dict[str, tuple[Any, ...]]:
    """{field: what its type declares besides its values (Searched, constraints)} of config class ``cls``,
    in field order. The types are read in the names of each class's module (``from __future__ import
    annotations`` makes them strings), so a config and what its types name are declared at module level."""
    hints = typing.get_type_hints(cls, include_extras=True)
    return {f.name: tuple(getattr(hints[f.name], "__metadata__", ())) for f in dataclasses.fields(cls)}


def _stage(marks: tuple[Any, ...]) -> str:
    return next((m.stage for m in marks if isinstance(m, Searched)), FORWARD)


@dataclasses.dataclass(frozen=True)
class KernelConfig:
    """A kernel's typed config, tokamax-style: a frozen dataclass of the block fields the kernel takes, each
    with its search stage and constraints in its type (Searched, MultipleOf, Divides). A field at None is
    unset (``with_defaults`` fills it from the case, as the kernel's default); a kernel reads its sizes as
    attributes of its resolved config, never by name."""

    kernel_name: ClassVar[str] = ""  # what a broken constraint's message calls the kernel (default: the class's name)

    @classmethod
    def names(cls, stage: Optional[str] = None) -> tuple[str, ...]:
        """The field names (of one search ``stage``: FORWARD, the default, or BACKWARD)."""
        return tuple(n for n, marks in declared(cls).items() if stage in (None, _stage(marks)))

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
        """This config, or a ValueError saying which of the constraints in its fields' types a set field
        breaks: "<kernel> needs block_k to be a multiple of 128 (got 96)"."""
        for name, marks in declared(type(self)).items():
            value = getattr(self, name)
            for mark in marks:
                why = None if value is None or not hasattr(mark, "problem") else mark.problem(name, value, self)
                if why:
                    raise ValueError(f"{self.kernel_name or type(self).__name__} {why}")
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
