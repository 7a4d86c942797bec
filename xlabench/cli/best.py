"""`xlabench best`: per impl and shape of a block-size sweep, the configuration that significantly beats the
kernel's default, printed and written into the tuning cache that `run --tune` reads; `-o` exports those
entries as a tuned file a later suite applies with `tuned: FILE`."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import click
from rich.table import Table

from xlabench import results
from xlabench.cli.common import BadInput, console, examples, output_dir
from xlabench.report import inputs as inputs_lib


@click.command(epilog=examples("xlabench best results/attention/", "xlabench best results/attention/*.csv -o tuned.yaml"))
@click.argument("csv_files", nargs=-1, required=True, type=click.Path())
@click.option("-o", "--output", default=None, type=click.Path(dir_okay=False),
              help="Export the configurations written to the tuning cache as YAML (use it in a suite as `tuned: FILE`).")
@click.option("--tune-dir", default=None, type=click.Path(file_okay=False),
              help="The tuning cache to write into. Default: the one `run --tune` reads ($XLABENCH_CACHE_DIR/tune).")
def best(csv_files: tuple[str, ...], output: Optional[str], tune_dir: Optional[str]) -> None:
    """Best block sizes per impl and shape: the fastest ok, correct configuration of each sweep (>= 2
    configurations) that beats the kernel's default (block sizes unset) by the gate's test on the raw
    samples; else "no significant winner" (the default is kept). Interpreted rows are never tuned from.
    Each is written into the tuning cache, where `run --tune` on the same device and versions finds it."""
    from xlabench.report import best_config as best_lib
    from xlabench.report import chartdata as cd

    found = inputs_lib.collect(csv_files, compiles=False)  # folders, and the glob's .samples.csv left out
    for note in found.notes:
        click.echo(f"note: {note}", err=True)
    if not found.files:
        raise BadInput(f"{', '.join(csv_files)}: no results CSV of a run here (pass run CSVs or their folder)")
    try:
        df = cd.load(found.files)
        samples = cd.load_samples(found.files)
    except results.ResultsFileError as e:
        raise BadInput(str(e)) from None
    picks = best_lib.best_configs(df, samples)
    if not picks:
        raise BadInput(f"{', '.join(csv_files)}: no sweep of a tuned parameter (e.g. attention's block_q / block_k "
                       "with >= 2 values per impl and shape, ok and correct) to choose from")
    headers, rows = best_lib.table_rows(picks)
    t = Table(title="best configuration per shape: a significant win over the default, else the default")
    for h in headers:
        t.add_column(h)
    for r in rows:
        t.add_row(*map(str, r))
    console.print(t)
    for line in best_lib.notes(picks):
        console.print(line, markup=False, soft_wrap=True)
    configs = _cache(picks, found.files, tune_dir)
    if output:
        _write(picks, configs, output)


def _cache(picks: list, files: list, tune_dir: Optional[str]) -> list:
    """Write the picks into the tuning cache; the configurations written (the tuned file's), notes printed."""

    from xlabench import tune
    from xlabench.report import best_to_tuning

    envs = {}
    for f in files:
        try:
            m = results.read_meta(f)
        except results.ResultsFileError as e:
            raise BadInput(str(e)) from None
        envs[str(m.get("run_id") or results.RunFiles(f).csv.stem)] = m.get("env") or {}
    folder = Path(tune_dir) if tune_dir else tune.default_dir()
    output_dir(folder, "--tune-dir", "the tuning cache")
    configs, notes = best_to_tuning.store(picks, envs, tune.TuneCache(folder))
    for line in notes:
        console.print(line, markup=False, soft_wrap=True)
    cached = len(configs) - len(notes)
    if cached:
        console.print(f"wrote {cached} configuration(s) into the tuning cache {folder}", soft_wrap=True)
    return configs


def _write(picks: list, configs: list, output: str) -> None:
    """The tuned file: an export of the entries written to the cache (one workload), or exit 2 saying why
    there is none."""
    from xlabench.suite import tuned

    if not configs:
        verdicts = ", ".join(sorted({p.verdict for p in picks}))
        raise BadInput(f"-o: nothing to tune from: {verdicts}")
    workloads = sorted({c.workload for c in configs})
    if len(workloads) > 1:
        raise BadInput(f"-o: these rows tune {', '.join(workloads)}; a tuned file holds one workload "
                       "(pass one workload's CSVs)")
    output_dir(Path(output).parent, "-o", "the folder of the tuned file")
    Path(output).write_text(tuned.dump(configs))
    console.print(f"wrote {len(configs)} configuration(s) to {output} (use it in a suite: `tuned: {output}`)",
                  soft_wrap=True)
