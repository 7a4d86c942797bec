"""``xlabench history``: record runs in the history store, rebuild it from the run files, list the change
points of every suite's series, write the static site (the logic is in xlabench/history).

Exit codes: 0 done; 2 bad input (a run file, a corrupt, foreign or newer store, an unreachable server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Callable, Optional

import click
from rich.table import Table
from rich.text import Text

from xlabench.cli.common import BadInput, console, examples, output_dir
from xlabench.history import ALPHA
from xlabench.history import store as store_lib
from xlabench.history.store import HistoryError

# ingest (pandas, through the gate's loader), series and changes (scipy) are imported in the commands
# that use them: `xlabench --help` and `history --help` stay light (tests/test_startup.py).


def history_option(f: Callable) -> Callable:
    """--history URL of the history commands (their store by default: DEFAULT_URL)."""
    return click.option("--history", "history_url", default=None, metavar="URL",
                        help=f"History store: sqlite:///PATH or postgresql://... [default: {store_lib.DEFAULT_URL}]")(f)


def record_option(also: str = "") -> Callable[[Callable], Callable]:
    """--history URL of run and gate: where to record the run (and ``also``), only when given: no default."""
    return click.option("--history", "history_url", default=None, metavar="URL",
                        help=f"Also record the run in this history store{also} (sqlite:///PATH or postgresql://...; "
                             f"e.g. {store_lib.DEFAULT_URL}, what `xlabench history` reads by default); "
                             "without it nothing is recorded.")


def open_store(url: Optional[str], create: bool = True) -> store_lib.Store:
    try:
        return store_lib.open_store(url or store_lib.DEFAULT_URL, create=create)
    except HistoryError as e:
        raise BadInput(str(e)) from None


def add_runs(url: Optional[str], paths: list[Path]) -> tuple[int, int]:
    """Record run files in the store (run --history, gate --history, history add): (added, already there)."""
    from xlabench.history import ingest

    notes: list[str] = []
    with open_store(url) as s:
        try:
            files = ingest.run_files(paths, notes)
            for note in notes:
                click.echo(f"note: {note}", err=True)
            return ingest.add_files(s, files)
        except HistoryError as e:
            raise BadInput(str(e)) from None


def judge_run(url: Optional[str], csv_path: Path, alpha: float, threshold: float) -> int:
    """Record a gate's candidate run and judge it by its history (gate --history): prints what the series
    says; returns 1 for a suite-wide slowdown (a change point or a creeping trend), else 0."""
    from xlabench.history import ingest, judge, series
    from xlabench.history.gitlog import GitLog

    add_runs(url, [csv_path])
    with open_store(url) as s:
        run = ingest.read_run(csv_path, GitLog())
        group = next(g for g in series.groups(s, run.suite) if any(r["run_id"] == run.run_id for r in g.runs))
    if group.runs[-1]["run_id"] != run.run_id:  # an older commit re-run: judge the series up to it
        at = [r["run_id"] for r in group.runs].index(run.run_id)
        group = series.Group(group.env, group.runs[:at + 1], {c: v[:at + 1] for c, v in group.samples.items()},
                             group.cases, group.ordered_by)
        group.samples = {c: v for c, v in group.samples.items() if any(x is not None for x in v)}
    verdict = judge.judge(group, run.run_id, alpha, threshold)
    for line in verdict.lines:
        console.print(Text(line, style="bold red" if verdict.regression else ""), soft_wrap=True)
    return 1 if verdict.regression else 0


@click.group(epilog=examples("xlabench history add results/", "xlabench history changes --suite attention",
                             "xlabench history html -o site/",
                             "xlabench gate suites/attention.yaml --history sqlite:///results/history.sqlite"))
def history() -> None:
    """Every run remembered: a store of runs, each case's series over the commits, its change points."""


@history.command("add", epilog=examples("xlabench history add results/attention/20261204-010203-abcd.csv",
                                         "xlabench history add results/ --history postgresql://ci@db/xlabench"))
@click.argument("csv_files", nargs=-1, required=True, type=click.Path())
@history_option
def add(csv_files: tuple[str, ...], history_url: Optional[str]) -> None:
    """Record runs (results CSVs with their samples and meta files; a directory: every run under it)."""
    added, same = add_runs(history_url, [Path(p) for p in csv_files])
    console.print(f"{added} run(s) added, {same} already recorded ({history_url or store_lib.DEFAULT_URL})")


@history.command("rebuild", epilog=examples("xlabench history rebuild results/"))
@click.argument("results_dir", type=click.Path(exists=True, file_okay=False))
@history_option
def rebuild(results_dir: str, history_url: Optional[str]) -> None:
    """Recreate the store from the run files under RESULTS_DIR (the run files are the source of truth)."""
    from xlabench.history import ingest
    from xlabench.history.gitlog import GitLog

    with open_store(history_url) as s:
        try:
            files = ingest.run_files([Path(results_dir)])
            git = GitLog()
            records = [ingest.read_run(p, git) for p in files]  # all read before the store is touched
            s.replace_all(records)
        except HistoryError as e:
            raise BadInput(str(e)) from None
    console.print(f"rebuilt {history_url or store_lib.DEFAULT_URL} from {len(records)} run(s) under {results_dir}")


def _detect(s: store_lib.Store, suite: Optional[str], alpha: float,
            family: str = "auto") -> tuple[list, dict[int, list], dict[int, list]]:
    """Every series (group) of the suite(s) in the store, its change points and its events (many cases
    changed at one commit)."""
    from xlabench.history import series

    groups = series.groups(s, suite)
    found = {i: series.detect(g, alpha, family) for i, g in enumerate(groups)}
    return groups, found, {i: series.events(g, found[i]) for i, g in enumerate(groups)}


def _pct(x: float) -> str:
    return f"{(x - 1) * 100:+.1f}%"


@history.command("changes", epilog=examples("xlabench history changes", "xlabench history changes --suite gpt2 --json changes.json"))
@history_option
@click.option("--suite", default=None, help="Only this suite.")
@click.option("--alpha", type=float, default=ALPHA, show_default=True,
              help="Significance per series (cases: family-wise over a suite's cases, Holm).")
@click.option("--family", type=click.Choice(["auto", "mean", "rank"]), default="auto", show_default=True,
              help="The detector's test: mean (clipped runs, t; runs in two bands: their two-band likelihood), "
                   "rank (ranks, Mann-Whitney); auto: rank on heavy-tailed series or runs that stray from their "
                   "neighbours far more than run to run.")
@click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
              help="Also write the events and every change as JSON ({\"events\": [...], \"changes\": [...]}: "
                   "case_id, last_good and first_bad git_sha, ratio, interval, p; event: commit, cases, case_ids).")
def changes_cmd(history_url: Optional[str], suite: Optional[str], alpha: float, family: str,
                json_path: Optional[str]) -> None:
    """The change points of every suite's series, per case and of the suite's geometric mean, in commit order;
    many cases changed at one commit are one event, its cases beneath it."""
    if not 0 < alpha < 1:
        raise BadInput(f"--alpha {alpha}: expected a number between 0 and 1")
    with open_store(history_url, create=False) as s:
        groups, found, events = _detect(s, suite, alpha, family)
    if not groups:
        raise BadInput(f"{history_url or store_lib.DEFAULT_URL}: no runs" + (f" of suite {suite}" if suite else ""))
    every, every_event = [], []
    for i, g in enumerate(groups):
        t = Table(title=f"{g.env.label()}: {len(g.runs)} runs, {len(events[i])} event(s), {len(found[i])} change(s)",
                  title_justify="left")
        t.add_column("case", overflow="fold", ratio=1)
        for col in ("last good", "first bad"):
            t.add_column(col, no_wrap=True)
        t.add_column("change (95%)", no_wrap=True)
        t.add_column("p", no_wrap=True)
        event_of = {id(c): len(every_event) + n for n, ev in enumerate(events[i]) for c in ev.changes}
        for ev in events[i]:
            t.add_row(Text(f"event: {ev.cases} of {ev.of} cases ({ev.slower} slower)", style="bold"), ev.last_good,
                      ev.first_bad, f"{_pct(ev.ratio)} median\n{_pct(ev.low)}..{_pct(ev.high)}", "")
            for c in ev.changes:
                t.add_row(f"  {c.case}", c.last_good, c.first_bad, f"{_pct(c.ratio)} {_pct(c.low)}..{_pct(c.high)}",
                          f"{c.p_holm:.2g}")
        for c in found[i]:
            if id(c) not in event_of:
                t.add_row(c.case, c.last_good, c.first_bad, f"{_pct(c.ratio)}\n{_pct(c.low)}..{_pct(c.high)}",
                          f"{c.p_holm:.2g}")
        console.print(t)
        for ev in events[i]:
            console.print(f"{g.env.suite}: {ev.line()}", soft_wrap=True)
        every += [dict(c.as_json(), event=event_of.get(id(c))) for c in found[i]]
        every_event += [ev.as_json() for ev in events[i]]
    if json_path:
        output_dir(Path(json_path).parent, "--json", "the folder of the JSON file")
        Path(json_path).write_text(json.dumps({"events": every_event, "changes": every}, indent=2) + "\n")
        console.print(f"wrote {len(every_event)} event(s) and {len(every)} change(s) to {json_path}")


@history.command("html", epilog=examples("xlabench history html -o site/", "xlabench history html -o site/ --suite attention"))
@history_option
@click.option("-o", "--output", "out_dir", required=True, type=click.Path(file_okay=False),
              help="Directory of the site (index.html and a page per suite).")
@click.option("--suite", default=None, help="Only this suite.")
def html_cmd(history_url: Optional[str], out_dir: str, suite: Optional[str]) -> None:
    """Write the history as a static site (offline: no script, nothing from a CDN) a CI job can publish."""
    from xlabench.history import html

    with open_store(history_url, create=False) as s:
        groups, found, events = _detect(s, suite, ALPHA)
        if not groups:
            raise BadInput(f"{history_url or store_lib.DEFAULT_URL}: no runs" + (f" of suite {suite}" if suite else ""))
        index = html.write_site(s, groups, found, output_dir(out_dir, "--output", "the site's folder"), events)
    console.print(f"wrote {index} ({len(groups)} suite page(s))")
