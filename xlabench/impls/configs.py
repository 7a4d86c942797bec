"""The built-in kernels' config bases and search builders: a kernel's module in impls/kernels/ derives its
typed config (a tune.space.KernelConfig) from one of these and builds its search space, beside it, with the
builders below. KernelBlocks is a blocked attention kernel's block_q and block_k, BackwardBlocks adds its
backward pass's, PagedBlocks is a paged kernel's pages per compute block: their fields are the workloads'
tuned parameters (attention.BLOCK_PARAMS, paged.PAGED_BLOCKS; checked here at import), spelled out so a
config shows every field it takes, with its search stage and constraints in its type."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Annotated, Any, Mapping, Optional, Sequence

from xlabench.tune.search import Stage
from xlabench.tune.space import BACKWARD, FORWARD, KernelConfig, Searched, diagonal, pow2_tiles
from xlabench.workloads.attention import BLOCK_PARAMS, AttentionParams
from xlabench.workloads.paged import DEFAULT_PAGES, PAGED_BLOCKS

# Pallas kernel block sizes: a case's block_q / block_k, default 128, clipped to the sequence.
DEFAULT_BLOCK = 128
# The block sizes a suite sets (case parameters: BLOCK_PARAMS), and the backward pass's, which the kernels
# that take them search in a second stage (the forward blocks fixed).
BWD_BLOCK_PARAMS = tuple(f"{name}_bwd" for name in BLOCK_PARAMS)


@dataclass(frozen=True)
class KernelBlocks(KernelConfig):
    """A blocked attention kernel's typed config: block_q and block_k, each at the case's, default
    DEFAULT_BLOCK, clipped to its sequence. A kernel's own config adds its fields (impls/kernels/:
    FlashConfig, SplashConfig, PallasGpuConfig)."""

    block_q: Optional[int] = None
    block_k: Optional[int] = None

    def with_defaults(self, sq: int, sk: int) -> "KernelBlocks":
        return dataclasses.replace(self, block_q=min(self.block_q or DEFAULT_BLOCK, sq),
                                   block_k=min(self.block_k or DEFAULT_BLOCK, sk))

    @classmethod
    def of(cls, cfg: Any, sq: int, sk: int) -> Any:
        """The kernel's config for a case: ``cfg``'s (AttnConfig) block_q, block_k and other blocks, the rest
        at the kernel's defaults for sequences ``sq`` x ``sk``; ValueError for a block it has no field for."""
        return cls.resolve({**{n: getattr(cfg, n) for n in BLOCK_PARAMS}, **dict(cfg.blocks)}, sq, sk)


@dataclass(frozen=True)
class BackwardBlocks(KernelBlocks):
    """KernelBlocks and the backward pass's block_q_bwd / block_k_bwd (its dkv and dq kernels), each
    default the forward one, searched in the BACKWARD stage."""

    block_q_bwd: Annotated[Optional[int], Searched(BACKWARD)] = None
    block_k_bwd: Annotated[Optional[int], Searched(BACKWARD)] = None

    def with_defaults(self, sq: int, sk: int) -> "BackwardBlocks":
        c = super().with_defaults(sq, sk)
        return dataclasses.replace(c, block_q_bwd=c.block_q if c.block_q_bwd is None else c.block_q_bwd,
                                   block_k_bwd=c.block_k if c.block_k_bwd is None else c.block_k_bwd)


@dataclass(frozen=True)
class PagedBlocks(KernelConfig):
    """A paged kernel's typed config: pages_per_compute_block, the case's, default DEFAULT_PAGES. A
    kernel's own config adds its fields (its module in impls/kernels/)."""

    pages_per_compute_block: Optional[int] = None

    def with_defaults(self) -> "PagedBlocks":
        pages = self.pages_per_compute_block
        return dataclasses.replace(self, pages_per_compute_block=DEFAULT_PAGES if pages is None else pages)

    @classmethod
    def of(cls, cfg: Any) -> Any:
        """The kernel's config for a case: ``cfg``'s (PagedConfig) pages per compute block and other blocks,
        the rest at the kernel's defaults; ValueError for a block it has no field for."""
        return cls.resolve({**{n: getattr(cfg, n) for n in PAGED_BLOCKS}, **dict(cfg.blocks)})


def _fields_are(config: type[KernelConfig], stage: Optional[str], names: Sequence[str]) -> None:
    """TypeError where ``config``'s fields (of ``stage``) are not the workload's ``names``, in order."""
    if config.names(stage) != tuple(names):
        raise TypeError(f"{config.__name__}'s fields {config.names(stage)} are not {tuple(names)}")


_fields_are(KernelBlocks, None, BLOCK_PARAMS)
_fields_are(BackwardBlocks, BACKWARD, BWD_BLOCK_PARAMS)
_fields_are(PagedBlocks, None, PAGED_BLOCKS)


def default_blocks(p: AttentionParams) -> dict[str, int]:
    """The kernels' default blocks for case ``p``: DEFAULT_BLOCK each, clipped to the query / key sequence."""
    return KernelBlocks.resolve({}, p.seq_len, p.kv_len).blocks()


def kernel_blocks(cfg: Any, sq: int, sk: int) -> tuple[int, int]:
    """(block_q, block_k) a blocked kernel runs case config ``cfg`` at (KernelBlocks' defaults)."""
    b = KernelBlocks.resolve({n: getattr(cfg, n) for n in BLOCK_PARAMS}, sq, sk)
    return b.block_q, b.block_k


def block_unsupported(kernel: str, sq: int, sk: int, cfg: Any) -> Optional[str]:
    """Why a blocked kernel cannot run this case (blocks must tile both sequences), or None."""
    bq, bk = kernel_blocks(cfg, sq, sk)
    if sq % bq or sk % bk:
        return f"{kernel} needs seq_len % block_q == 0 and kv_seq_len % block_k == 0 (got {sq}/{bq}, {sk}/{bk})"
    return None


def tile_candidates(sq: int, sk: int, names: tuple[str, str] = BLOCK_PARAMS) -> list[dict[str, int]]:
    """Every (query block, key block) pair of powers of two from 128 to min(S, 2048) that tile the sequences."""
    return [{names[0]: bq, names[1]: bk} for bq in pow2_tiles(sq) for bk in pow2_tiles(sk)]


def block_stages(p: AttentionParams, config: type[KernelBlocks], fwd: list[dict[str, int]],
                 bwd: Optional[list[dict[str, int]]] = None) -> list[Stage]:
    """Kernel ``config``'s search for case ``p``: the forward blocks (``fwd``, every field of the kernel's
    forward together: splash's block_kv_compute too) on the case's own program, descending from the square
    blocks (every field one size: block_kv_compute = block_kv); for fwd_bwd, then the backward blocks
    (``bwd``) on it, the forward ones fixed, descending from the forward winner's sizes. The forward stage
    of a fwd_bwd case runs the fwd_bwd program, not the forward one: a forward winner can exceed VMEM there
    (on the v5e, flash's 2048 x 1024 forward blocks at S=4096 fit the forward program and not the
    forward-with-residuals kernel of fwd_bwd). The default is the config's defaults for the case (128 x 128,
    clipped, the backward blocks equal to the forward ones: what ``default_s`` times): its forward fields
    for the forward stage, all of them for the backward one. Every candidate is checked against
    ``config``'s fields and made one of its hashable candidates (tune.space.Candidate)."""
    fwd, bwd = [config.candidate(**c) for c in fwd], [config.candidate(**c) for c in bwd or ()]
    default = config.resolve({}, p.seq_len, p.kv_len)
    stages = [Stage(p.mode, tuple(fwd), default.blocks(config.names(FORWARD)),
                    diagonal(fwd, sorted({n for c in fwd for n in c})))]
    if p.mode != "fwd" and bwd:
        stages.append(Stage(p.mode, tuple(bwd), default.blocks(), diagonal(bwd, BWD_BLOCK_PARAMS),
                            dict(zip(BWD_BLOCK_PARAMS, BLOCK_PARAMS))))
    return stages


def declared_space(p: AttentionParams, block_params: Sequence[str],
                   candidates: Optional[Sequence[Mapping[str, int]]] = None) -> list[Stage]:
    """The search of a kernel that declares only its ``block_params`` (a user impl, docs/kernels.md): its
    own ``tune_candidates`` when it lists them, else the powers of two that tile S for each parameter;
    searched on the case's own program."""
    if candidates is None:
        sizes = dict(zip(BLOCK_PARAMS, (pow2_tiles(p.seq_len), pow2_tiles(p.kv_len))))
        candidates = [{}]
        for name in block_params:
            candidates = [{**c, name: b} for c in candidates for b in sizes[name]]
    cands = [dict(c) for c in candidates]
    default = {k: v for k, v in default_blocks(p).items() if k in block_params}
    return [Stage(p.mode, tuple(cands), default)]
