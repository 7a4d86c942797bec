"""Candidate spaces: a candidate is a mapping of block parameter -> size; each kernel declares its own space
beside its constraint checks (backends/*/attention_impls.py, paged_impls.py) from the pieces here."""

from __future__ import annotations

from typing import Iterable, Mapping

Blocks = Mapping[str, int]

# The kernel parameters a suite may set and the tuner searches, per workload: the one list of them. The
# results schema gives each a case column (the suite's value) and a ``tuned_<name>`` column (what the tuner
# chose); `xlabench best`, a suite's `tuned:` file, the charts and the impl rules derive theirs from it.
TUNED_PARAMS: dict[str, tuple[str, ...]] = {
    "attention": ("block_q", "block_k"),
    "paged_attention": ("pages_per_compute_block",),
}
BLOCK_PARAMS = TUNED_PARAMS["attention"]  # an attention kernel's query and key/value block sizes

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
