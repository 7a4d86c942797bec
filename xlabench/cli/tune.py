"""`xlabench tune SUITE`: the block-size search alone, to fill the tuning cache before a run."""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path
from typing import Any, Optional

import click
from rich.table import Table

from xlabench.cells import number
from xlabench.cli.common import BadInput, console, examples, load_suite
from xlabench.cli.click_options import run_options
from xlabench.results.schema import TUNED_PREFIX
from xlabench.run.run_options import RunOptions
from xlabench.units import to_ms
from xlabench.workloads import TUNED_PARAMS


@click.command(epilog=examples(
    "xlabench tune suites/attention.yaml", "xlabench tune suites/attention.yaml -k seq_len=4096 --impl flash",
    "XLABENCH_CACHE_DIR=/tmp/xb xlabench tune suites/paged_attention.yaml",
    "xlabench tune --table suites/attention.yaml --profile tpu",
    "xlabench tune --export tpu_v6e.json",
    "xlabench tune --export xlabench/tune/tables/tpu_v5_lite.json --from xlabench/tune/tables/tpu_v5_lite.json "
    "--from RUN/tune-cache --commit 1a2b3c4 --date 2026-12-09 --libtpu 0.0.42.1"))
@click.argument("suite_file", type=click.Path(), required=False)
@click.option("--table", "show_table", is_flag=True,
              help="list which of the suite's tuned cases the shipped tune table holds and which it lacks (no search)")
@click.option("--export", "export_file", type=click.Path(dir_okay=False), default=None,
              help="write the tuning cache (or the --from sources) as a tune table file, the shipped tables' format")
@click.option("--from", "sources", type=click.Path(exists=True), multiple=True,
              help="--export: a tune-cache folder or a table file to read (repeatable; a later one wins a key; "
                   "default: your tuning cache)")
@click.option("--commit", default="", help="--export: the xlabench commit the cache folders were measured at")
@click.option("--date", default="", help="--export: the day they were measured (default: each entry's own)")
@click.option("--libtpu", default="", help="--export: the libtpu version they were measured with")
@click.option("--device-kind", default="", help="--export / --table: the chip (default: the one the sources hold; "
                                                 "--table: every shipped table)")
@run_options("profile", "only_impls", "backends", "where", "timeout_s", "python_torch_xla")
def tune(suite_file: Optional[str], show_table: bool, export_file: Optional[str], sources: tuple[str, ...], commit: str,
         date: str, libtpu: str, device_kind: str, run_opts: RunOptions) -> None:
    """Search the block sizes of every Pallas case the suite does not fix, and keep the winners in the
    tuning cache ($XLABENCH_CACHE_DIR/tune), where `run` finds them. Each winner is then run once and
    checked against the reference; no results file is written. A case the shipped tune table holds is
    re-timed instead of searched (docs/tpu.md, "The shipped tune table")."""
    export_only = {"--from": sources, "--commit": commit, "--date": date, "--libtpu": libtpu}
    if export_file is None:
        given = [flag for flag, v in export_only.items() if v] + (["--device-kind"] if device_kind and not show_table else [])
        if given:
            raise BadInput(f"{', '.join(given)}: only with --export{' or --table' if given == ['--device-kind'] else ''}")
    if export_file is not None:
        if suite_file or show_table:
            raise BadInput("--export writes a table from the tuning cache: it takes no SUITE and no --table")
        return export(export_file, sources, commit, date, libtpu, device_kind)
    if suite_file is None:
        raise BadInput("give a SUITE (or --export FILE)")
    if show_table:
        return list_table(suite_file, device_kind, run_opts)
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
    return "-" if f is None else f"{to_ms(f):.3f}"


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


def export(file: str, sources: tuple[str, ...], commit: str, date: str, libtpu: str, device_kind: str) -> None:
    """`tune --export`: the sources (default: the tuning cache) as one table file."""
    from xlabench.tune import default_dir, table as tune_table

    if not sources and not default_dir().is_dir():
        raise BadInput(f"--export: your tuning cache ({default_dir()}) holds no entries: `xlabench tune SUITE` on the "
                       "chip fills it (or name folders with --from)")
    try:
        built = tune_table.build(list(sources) or [default_dir()], device_kind=device_kind, commit=commit, date=date,
                                 libtpu=libtpu)
        tune_table.write_table(Path(file), built.table)
    except tune_table.TableError as e:
        raise BadInput(f"--export: {e}") from None
    except OSError as e:
        raise BadInput(f"--export: cannot write {file}: {e.strerror or e}") from None
    t = built.table
    console.print(f"wrote {len(t.entries)} entries for {t.device_kind} to {file}", soft_wrap=True, markup=False)
    for line in built.left_out:
        console.print(f"left out {line}", style="yellow", soft_wrap=True, markup=False)
    if t.device_kind and Path(file).name != tune_table.table_name(t.device_kind):
        console.print(f"shipped, it is read as {tune_table.table_name(t.device_kind)}", soft_wrap=True, markup=False)


def list_table(suite_file: str, device_kind: str, run_opts: RunOptions) -> None:
    """`tune --table SUITE`: per shipped table, which of the suite's tuned cases it holds and which it lacks."""
    from xlabench.run import suite_runner
    from xlabench.tune import table as tune_table

    s = load_suite(suite_file)
    if device_kind:
        paths = [tune_table.table_path(device_kind)]
        if not paths[0].exists():
            raise BadInput(f"no shipped tune table for {device_kind} ({paths[0].name} in {paths[0].parent})")
    else:
        paths = sorted(tune_table.table_dir().glob("*.json"))
        if not paths:
            raise BadInput(f"no tune tables in {tune_table.table_dir()}")
    for path in paths:
        try:
            shipped = tune_table.read_table(path)
            prof, held = suite_runner.table_coverage(s, run_opts, shipped)
        except tune_table.TableError as e:
            raise BadInput(str(e)) from None
        except suite_runner.RunInputError as e:
            raise BadInput(str(e)) from None
        for line in coverage_lines(shipped, s.name, prof, held):
            console.print(line, soft_wrap=True, markup=False, highlight=False)


def coverage_lines(shipped: Any, suite: str, prof: str, held: list[Any]) -> list[str]:
    """The listing of table_coverage, one case a line, under 80 columns (the untuned counted by reason)."""
    from xlabench.tune.table import describe

    lines = [f"{shipped.device_kind} ({shipped.source}, {len(shipped.entries)} entries): suite {suite}, "
             f"profile {prof or 'base'}"]
    counts: dict[str, int] = {}
    for h in held:
        counts[h.status] = counts.get(h.status, 0) + 1
        if h.status in ("held", "nearest", "lacks"):
            more = f" (from b={h.hit.entry.batch})" if h.status == "nearest" else ""
            lines.append(f"  {h.status:<8}{describe(h.case.impl, h.case.params)}{more}")
    tuned = sum(counts.get(k, 0) for k in ("held", "nearest", "lacks"))
    lines.append(f"{counts.get('held', 0)} held, {counts.get('nearest', 0)} nearest, {counts.get('lacks', 0)} "
                 f"lacking (searched) of {tuned} tuned case(s)")
    why: dict[str, int] = {}
    for h in held:
        if h.status in ("fixed", "untuned", "off"):
            reason = "the suite sets the blocks" if h.status == "fixed" else (h.why or h.status)
            why[reason] = why.get(reason, 0) + 1
    lines += [f"{n} case(s) not tuned: {reason}" for reason, n in why.items()]
    return lines
