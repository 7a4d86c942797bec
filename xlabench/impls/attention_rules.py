"""The built-in attention kernels' rules as the worker and `run --dry-run` apply them: RULES ((backend,
impl) -> the registry record's rule, block parameters and search), collected from the kernel modules
(impls/kernels/: each kernel's typed config, skip rule and search space live in its own module), and how
a case's skip is decided from them. Framework-free, so the worker (through each backend's registry) and
the parent (without a framework) decide a case's skip by the same code.

A rule is ``unsupported(batch, seq_len, kv_len, num_heads, kv_heads, dtype, cfg, platform)`` (impls.AttentionRule).
"""

from __future__ import annotations

import dataclasses
import functools
from typing import Any, Callable, Mapping, Optional

from xlabench import impls as catalog
from xlabench.impls import kernels
from xlabench.results.schema import TUNED_PREFIX
from xlabench.tune import blocks_text
from xlabench.tune.decide import Settle
from xlabench.tune.search import Dropped
from xlabench.units import to_ms
from xlabench.workloads.attention import BLOCK_PARAMS
from xlabench.workloads.attention import AttentionParams, tune_key_fields

# (backend, impl) -> the registry record's rule, block parameters and search (kernels.ATTENTION_RULES)
RULES = kernels.ATTENTION_RULES


def rule(backend: str, impl: str) -> dict[str, Any]:
    """The registry record's ``unsupported`` and ``block_params`` of a built-in (keyword arguments)."""
    return RULES.get((backend, impl), dict(unsupported=catalog.no_rule))


def predict_skip(backend: str, impl: str, params: dict[str, Any], platform: str) -> Optional[str]:
    """Why a built-in attention impl will skip this attention case on ``platform``, decided as its worker
    decides it (for_impl and skip_reason on the case's config); None for a user impl (its rule
    is its own code, which only the worker imports)."""
    info = catalog.find(backend, impl, "attention")
    if info is None or catalog.is_user(impl):
        return None
    im = catalog.AttentionImplRecord(impl, "", None, **rule(backend, impl))
    p = AttentionParams(**params)
    cfg, _ = for_impl(im, p.attn_config(info.interpreted(platform)))
    return skip_reason(im, p, cfg, platform)


def skip_reason(im: catalog.AttentionImplRecord, p: Any, cfg: Any, platform: str) -> Optional[str]:
    """Why attention impl ``im`` (a built-in or a user impl, any backend) cannot run case ``p``
    (AttentionParams) here (its rule), or None."""
    if im.params_rule is not None:
        return im.params_rule(p, platform)
    return im.unsupported(p.batch, p.seq_len, p.kv_len, p.num_heads, p.kv_heads, p.dtype, cfg, platform)


def for_impl(im: catalog.AttentionImplRecord, cfg: Any) -> tuple[Any, str]:
    """(``cfg`` with the block sizes ``im`` does not take cleared, the row's note saying so or ''): an impl
    sees only the block parameters it declares, and a sweep of the others runs it with its defaults."""
    ignored = [b for b in BLOCK_PARAMS if getattr(cfg, b) is not None and b not in im.block_params]
    if not ignored:
        return cfg, ""
    return dataclasses.replace(cfg, **{b: None for b in ignored}), f"{' and '.join(ignored)} not taken by {im.name}"


# decide(space, key_fields, build, hints) -> tune.decide.Tuned: a backend's tuning decision (its compile and clock)
Decide = Callable[[Any, dict[str, Any], Callable[[str, dict[str, int]], Any], list[dict[str, Any]]], Any]


def tune_blocks(p: Any, im: catalog.AttentionImplRecord, cfg: Any, platform: str, decide: Decide,
                make: Callable[[Any, Any, str], Any]) -> tuple[Any, dict[str, Any], str, Optional[Settle]]:
    """(the config to run at, the row's tuning columns, a note, the row's check or None) of attention case ``p``
    (AttentionParams) and impl ``im``, any backend: ``decide`` is the backend's (the cache, the table, a search
    on its device); ``make(case, config, program)`` what one candidate runs. A candidate its rule refuses is
    dropped as a constraint; a fwd_bwd search starts from the fwd case's winner when the cache has it (a suite
    runs fwd first). The check (a table entry taken untimed) is called with the row's times once it ran."""
    def build(program: str, blocks: dict[str, int]) -> Any:
        c, q = cfg.with_blocks(blocks), p.model_copy(update={"mode": program})
        reason = skip_reason(im, q, c, platform)
        if reason:
            raise Dropped("constraint", reason)
        return make(q, c, program)

    space = None if im.tune_space is None else functools.partial(im.tune_space, p)
    hints = [tune_key_fields(p.model_copy(update={"mode": "fwd"}))] if p.mode == "fwd_bwd" else []
    t = decide(space, tune_key_fields(p), build, hints)
    check = getattr(t, "check", None)

    def settle(row_s: Mapping[str, float]) -> tuple[Any, dict[str, Any], str, bool]:
        settled, again = check.settle(row_s)
        return (*_at_blocks(cfg, settled), again)

    return (*_at_blocks(cfg, t), settle if check is not None else None)


def _at_blocks(cfg: Any, t: Any) -> tuple[Any, dict[str, Any], str]:
    """(``cfg`` at the decision's blocks, the row's tuning columns, the note) of a tune.decide.Tuned."""
    if not t.blocks:
        return cfg, t.fields, t.note
    cfg = cfg.with_blocks(t.blocks)
    return cfg, {**t.fields, **{TUNED_PREFIX + n: getattr(cfg, n) for n in BLOCK_PARAMS},
                 "blocks": blocks_text(dict(cfg.blocks))}, t.note


def shape_text(case: AttentionParams) -> str:
    """An attention shape as the rows' notes name it: batch x sequence x heads x head_dim."""
    return f"{case.batch}x{case.seq_len}x{case.num_heads}x{case.head_dim}"


def step_tuning(case: AttentionParams, fields: Mapping[str, Any], note: str,
                batch_note: str = "") -> tuple[dict[str, Any], str]:
    """A train step's attention tuned at its per-shard shape ``case`` (fwd_bwd), as the step's row carries it,
    any backend: (the tuning columns, less tune_best_s and default_s, which time the kernel, not the step; the
    note, with the search's best against the default blocks at that shape; ``batch_note`` says at which other
    global batch's shape, for global_batch auto)."""
    fields = dict(fields)
    best, default = fields.pop("tune_best_s", None), fields.pop("default_s", None)
    said = (f"attention tuned at its per-shard shape {shape_text(case)} (fwd_bwd{batch_note}): "
            f"{to_ms(best):.3f} ms against {to_ms(default):.3f} ms at the default blocks") if best and default else ""
    return fields, "; ".join(filter(None, [note, said]))
