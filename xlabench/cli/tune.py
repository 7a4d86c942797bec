"""`xlabench tune SUITE`: the block-size search alone, to fill the tuning cache before a run."""

from __future__ import annotations

import sys
import tempfile
from typing import Any

import click
from rich.table import Table

from xlabench.protocol.cells import number
from xlabench.cli.common import BadInput, console, examples, load_suite
from xlabench.cli.click_options import run_options
from xlabench.results.schema import TUNED_PREFIX
from xlabench.run.run_options import RunOptions
from xlabench.tune.space import TUNED_PARAMS


@click.command(epilog=examples(
    "xlabench tune suites/attention.yaml", "xlabench tune suites/attention.yaml -k seq_len=4096 --impl flash",
    "XLABENCH_CACHE_DIR=/tmp/xb xlabench tune suites/paged_attention.yaml"))
@click.argument("suite_file", type=click.Path())
@run_options("profile", "only_impls", "backends", "where", "timeout_s", "python_torch_xla")
def tune(suite_file: str, run_opts: RunOptions) -> None:
    """Search the block sizes of every Pallas case the suite does not fix, and keep the winners in the
    tuning cache ($XLABENCH_CACHE_DIR/tune), where `run` finds them. Each winner is then run once and
    checked against the reference; no results file is written."""
    from xlabench.cli.run import run_with_progress
    from xlabench.run import suite_runner

    s = load_suite(suite_file)
    try:
        suite_runner.check_torch_xla_option(run_opts)
        plan = suite_runner.plan_run(s, run_opts)
    except suite_runner.RunInputError as e:
        raise BadInput(str(e)) from None
    passed: dict[str, int] = {}  # why a case is not searched -> how many
    keep = []
    for c, skip in plan.cases:
        why = skip or suite_runner.untunable(c, plan.platform)
        if why:
            passed[why] = passed.get(why, 0) + 1
        else:
            keep.append(c.case_id)
    for why, n in passed.items():
        console.print(f"{n} case(s) not searched: {why}", style="yellow", soft_wrap=True, markup=False)
    if not keep:
        console.print(f"nothing to tune in profile {plan.profile or 'base'} on {plan.platform}", soft_wrap=True)
        return
    with tempfile.TemporaryDirectory(prefix="xlabench-tune-") as out:
        opts = run_opts.replace(out_dir=out, tune_only=True, tune=True, only_case_ids=tuple(keep))
        outcome = run_with_progress(s, opts, summary=False)
    rows = [r for r in outcome.rows if r.get("tuned") in ("search", "cache", "table")]
    console.print(table(rows))
    off = [r for r in outcome.rows if r.get("tuned") in ("off", "fixed")]
    if off:
        console.print(f"{len(off)} case(s) not tuned (fixed blocks, or an interpreted kernel: see `xlabench run`'s "
                      "notes)", style="yellow", soft_wrap=True)
    searched = sum(r.get("tuned") == "search" for r in rows)
    shipped = sum(r.get("tuned") == "table" for r in rows)
    console.print(f"{searched} searched, {shipped} from the shipped table (verified), {len(rows) - searched - shipped} "
                  "from the cache, "
                  f"{sum(float(r.get('tune_s') or 0) for r in rows):.1f} s tuning", soft_wrap=True)
    if outcome.failed or outcome.wrong:
        sys.exit(1)


def _ms(v: Any) -> str:
    f = number(v)
    return "-" if f is None else f"{f * 1e3:.3f}"


def table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="tuned block sizes (ms on the search's clock)")
    for col, kw in (("impl", {}), ("case", {}), ("blocks", {}), ("source", {}), ("tried", {"justify": "right"}),
                    ("best ms", {"justify": "right"}), ("default ms", {"justify": "right"}),
                    ("speedup", {"justify": "right"})):
        t.add_column(col, overflow="fold", **kw)
    for r in rows:
        case = " ".join(f"{k}={r[k]}" for k in ("seq_len", "batch", "mode", "causal", "context_lens") if r.get(k) is not None)
        sizes = [r.get(TUNED_PREFIX + n) for n in TUNED_PARAMS.get(str(r.get("workload")), ())]
        sizes_text = "x".join(str(v) for v in sizes if v not in (None, ""))
        blocks = " ".join(filter(None, [sizes_text, r.get("blocks") or ""]))
        best, default = r.get("tune_best_s"), r.get("default_s")
        speed = f"{float(default) / float(best):.2f}x" if best and default else "-"
        t.add_row(str(r["impl"]), case, blocks, str(r.get("tuned")), str(r.get("tune_tried") or 0), _ms(best),
                  _ms(default), speed)
    return t
