"""`xlabench info` and `xlabench columns`: the machine as a worker sees it, the peak and target tables, the CSV schema."""

from __future__ import annotations

from typing import Optional

import click

from xlabench.cli.click_options import OPTIONS
from rich.table import Table

from xlabench import hardware, results
from xlabench.cli.common import BadInput, console, examples
from xlabench import impls as catalog
from xlabench.impls import BACKENDS


@click.command(epilog=examples("xlabench info", "xlabench info --backend torch_xla --devices 8",
                               "xlabench info --peaks", "xlabench info --impls"))
@click.option("--backend", default="jax", show_default=True, type=click.Choice(BACKENDS),
              help="Framework whose view of the machine to show.")
@click.option("--devices", default=1, show_default=True, type=click.IntRange(min=1),
              help="Virtual CPU devices for the probe.")
@click.option("--peaks", is_flag=True,
              help="Print the peak table and the compile targets, with sources, instead (no worker is started).")
@click.option("--impls", "list_impls", is_flag=True,
              help="List the impls a suite may name, built-in and installed (entry point group "
                   "xlabench.impls), with their source (no worker is started, nothing is imported).")
@OPTIONS["python_torch_xla"]()
@click.option("--remeasure-peak", is_flag=True,
              help="CPU: measure the host's peak afresh (best of 3 tries) and replace the cached one "
                   "(the same as XLABENCH_REMEASURE_PEAK=1 for a run).")
def info(backend: str, devices: int, peaks: bool, list_impls: bool, python_torch_xla: Optional[str],
         remeasure_peak: bool) -> None:
    """Platform, devices, framework versions and the peak FLOP/s used for MFU (with its source), as a
    worker of the backend sees them; --peaks: the tables of known peaks and compile targets; --impls:
    the impls, built-in and installed."""
    if peaks:
        _print_tables()
        return
    if list_impls:
        _print_impls()
        return
    from xlabench.run import workers
    from xlabench.run.envs import Interpreters

    interpreters = Interpreters(torch_xla_override=python_torch_xla)
    if python_torch_xla and interpreters.missing("torch_xla"):
        raise BadInput(f"--python-torch-xla: {interpreters.missing('torch_xla')}")
    if interpreters.missing(backend):
        raise BadInput(f"--backend {backend}: {interpreters.missing(backend)}")
    if remeasure_peak:
        import os

        from xlabench.measure.host_peak import ENV_REMEASURE

        os.environ[ENV_REMEASURE] = "1"  # the probe's worker inherits it
    try:
        env = workers.probe(backend, devices, interpreters)
    except workers.WorkerError as e:
        raise click.ClickException(f"could not start a {backend} worker: {e}") from None
    peak = hardware.device_peak(env["platform"], env["device_kind"], env.get("measured_cpu_tflops"),
                                env.get("measured_cpu_gbytes_per_s"), env["device_count"],
                                measured_note=env.get("cpu_peak_source"))
    t = Table(show_header=False, box=None)
    for k in ("backend", "platform", "device_kind", "device_count", "process_count", "framework_version"):
        t.add_row(k, str(env.get(k)))
    t.add_row("peak TFLOP/s per device", f"{peak.tflops:.3f}" if peak.tflops else "unknown")
    t.add_row("peak GB/s per device", f"{peak.gbytes_per_s:.1f}" if peak.gbytes_per_s else "unknown")
    t.add_row("peak source", peak.source)
    if env.get("cpu_bandwidth_probe"):
        t.add_row("bandwidth probe", str(env["cpu_bandwidth_probe"]))
    if env["platform"] == "cpu":
        t.add_row("note", "CPU: Pallas TPU/GPU kernels run in interpret mode (pipeline check, not kernel speed)")
    console.print(t)


def _print_impls() -> None:
    """Built-in impls, then installed ones (entry points: read from package metadata, not imported)."""
    clashes = catalog.entry_point_clashes()
    if clashes:
        raise BadInput(clashes[0])
    t = Table(title="impls (a suite's impls: names these, or an import path package.module:function)")
    for col in ("name", "backend", "workloads", "source", "what"):
        t.add_column(col)
    for i in catalog.CATALOG:
        t.add_row(i.name, i.backend, ", ".join(i.workloads), "built-in", i.doc)
    for e in catalog.entry_point_impls().values():
        t.add_row(e.name, ", ".join(catalog.USER_BACKENDS), ", ".join(catalog.USER_WORKLOADS),
                  f"{e.dist} (entry point {catalog.ENTRY_POINT_GROUP})", e.target)
    console.print(t)


def _print_tables() -> None:
    pt = Table(title="peak table (dense bf16, per chip)")
    for col in ("name", "TFLOP/s", "HBM GB/s", "devices/chip", "source"):
        pt.add_column(col)
    for p in hardware.CHIPS:
        pt.add_row(p.name, f"{p.bf16_tflops_per_chip:g}", f"{p.hbm_gbytes_per_s_per_chip:g}",
                   str(p.devices_per_chip), p.source)
    console.print(pt)
    tt = Table(title="compile targets (xlabench compile --target)")
    for col in ("name", "topology", "chips", "devices/chip", "HBM GiB/chip", "source"):
        tt.add_column(col)
    for t in hardware.TARGETS:
        opts = ", ".join(f"{k}={v}" for k, v in t.options)
        tt.add_row(t.name, t.topology + (f" ({opts})" if opts else ""), str(t.chips), str(t.devices_per_chip),
                   f"{t.hbm_gib_per_chip:g}", t.source)
    console.print(tt)


@click.command(epilog=examples("xlabench columns", "xlabench columns --markdown > docs/columns.md"))
@click.option("--markdown", is_flag=True, help="Print a markdown table (as in the README).")
def columns(markdown: bool) -> None:
    """Every CSV column with its type, unit and meaning (the schema in xlabench/results/schema.py)."""
    if markdown:
        from xlabench.results.display import columns_markdown

        click.echo(columns_markdown())
        return
    t = Table(title=f"results CSV columns (schema version {results.SCHEMA_VERSION})")
    for col in ("column", "type", "unit", "group", "meaning"):
        t.add_column(col)
    for c in results.COLUMNS:
        t.add_row(c.name, c.dtype, c.unit, c.group, c.doc)
    console.print(t)
