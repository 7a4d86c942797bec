"""``xlabench compare`` and ``xlabench gate``: the regression gate's commands (the statistics are in xlabench/gate).

Exit codes: 0 pass; 1 a (confirmed) regression of a case or of the suite-wide shift, a candidate
case that failed or was wrong, or a case of the baseline missing from the candidate (unless
--allow-missing); 2 bad input (missing, empty, truncated or foreign file, schema mismatch, another
suite, environments differ) or nothing compared (no case measured on both sides); 3 could not
judge: a case too few samples can make significant whose interval lies wholly beyond the threshold
(underpowered), or a slowdown the host's own change of speed explains (confounded: the calibration
kernel or the compile times); --allow-inconclusive makes that 0; 130 / 143 (gate) interrupted by
SIGINT / SIGTERM: no verdict.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from pathlib import Path
from typing import Any, Callable, Optional

import click
from rich.text import Text

from xlabench import gate as gate_lib
from xlabench import results
from xlabench.run import interrupts
from xlabench.gate import report as gate_report
from xlabench import suite as suite_lib
from xlabench.cli import history as history_commands
from xlabench.cli.common import BadInput, console, err_console, examples, load_suite, output_file, warn
from xlabench.cli.click_options import run_options
from xlabench.run.run_options import RunOptions
from xlabench.cli.run import run_with_progress
from xlabench.gate import gate_steps
from xlabench.run.suite_runner import RunOutcome



class Fraction(click.ParamType):
    """A fraction written as '5%' or '0.05'."""

    name = "fraction"

    def convert(self, value: Any, param: Optional[click.Parameter], ctx: Optional[click.Context]) -> float:
        if isinstance(value, float):
            return value
        text = str(value).strip()
        try:
            f = float(text[:-1]) / 100 if text.endswith("%") else float(text)
        except ValueError:
            self.fail(f"{value!r} is not a fraction; write e.g. 5% or 0.05", param, ctx)
        if not 0 < f < 1:
            self.fail(f"{value!r} must be between 0 and 100% (exclusive); write e.g. 5% or 0.05", param, ctx)
        return f


def _judging_options(f: Callable) -> Callable:
    d = gate_lib.GateConfig()
    opts = [
        click.option("--metric", type=click.Choice(list(gate_lib.METRICS)), default=d.metric, show_default=True,
                     help="Column to compare; throughputs (TFLOP/s, MFU, GB/s, ...) are higher-is-better. "
                          "device_median_s (rows timed with --timer trace): the per-iteration samples are "
                          "wallclock only, so it is judged on them scaled to the row's device median (the "
                          "device times' own spread is not used)."),
        click.option("--threshold", type=Fraction(), default=f"{d.threshold:.0%}", show_default=True,
                     help="Smallest change that counts, at the confidence bound, per case and suite-wide (e.g. 5% or 0.05)."),
        click.option("--alpha", type=Fraction(), default=str(d.alpha), show_default=True,
                     help="Family-wise significance level (Holm over all cases; the suite-wide test at the same level)."),
        click.option("--confidence", type=Fraction(), default=str(d.confidence), show_default=True,
                     help="Confidence level of the bootstrap interval of the ratio."),
        click.option("--min-samples", type=int, default=d.min_samples, show_default=True,
                     help="Fewer samples on either side: 'inconclusive' (a case also needs enough to reach significance "
                          "after Holm: 7 per side for 24-85 cases; gate raises measure.iters to that)."),
        click.option("--allow-env-mismatch", is_flag=True,
                     help="Compare even if device kind or framework version differ (a warning is shown)."),
        click.option("--allow-inconclusive", is_flag=True,
                     help="Exit 0 instead of 3 when the gate could not judge (underpowered cases, a confounded "
                          "suite-wide shift); they are still reported."),
        click.option("--allow-missing", is_flag=True,
                     help="Do not fail on cases of the baseline the candidate lacks (they are still listed)."),
        click.option("--markdown", "markdown_path", type=click.Path(dir_okay=False), default=None,
                     help="Also write the result as markdown (e.g. $GITHUB_STEP_SUMMARY)."),
        click.option("--json", "json_path", type=click.Path(dir_okay=False), default=None,
                     help="Also write the verdicts as JSON."),
    ]
    for opt in reversed(opts):
        f = opt(f)
    return f


def _config(**judging: Any) -> gate_lib.GateConfig:
    """The GateConfig of the judging options (their names are its fields)."""
    try:
        return gate_lib.GateConfig(**judging)
    except ValueError as e:
        raise BadInput(str(e)) from None


def _load(path: str | Path, role: str) -> gate_lib.RunData:
    try:
        return gate_lib.load_run(path)
    except results.ResultsFileError as e:
        raise BadInput(f"{role}: {e}") from None


def _compare(base: gate_lib.RunData, cand: gate_lib.RunData, cfg: gate_lib.GateConfig,
             **kw: Any) -> gate_lib.Comparison:
    try:
        return gate_lib.compare(base, cand, cfg, **kw)
    except gate_lib.GateInputError as e:
        raise BadInput(str(e)) from None


def _check_outputs(markdown_path: Optional[str], json_path: Optional[str]) -> None:
    """--markdown and --json checked before the work (cli.common.output_file)."""
    for path, option in ((markdown_path, "--markdown"), (json_path, "--json")):
        if path:
            output_file(path, option, f"the {option[2:]} file")


def _write(path: Optional[str], text: str, option: str) -> None:
    if path:
        output_file(path, option, f"the {option[2:]} file")
        with open(path, "a" if path == "/dev/stdout" else "w", encoding="utf-8") as f:
            f.write(text)


def _print_table(cmp: gate_lib.Comparison) -> None:
    """The cases' table: on a terminal, fitted to its width; in a log (piped), a case per line at the table's
    own width (wrapped at 160 columns, 24 cases took 83 lines)."""
    log = not console.is_terminal and console.width >= gate_report.COMPACT_BELOW
    t = gate_report.table(cmp, console.width, log=log)
    width = console.width
    try:
        if log:
            console.width = max(width, console.measure(t).maximum)
        console.print(t)
    finally:
        console.width = width


def _report(cmp: gate_lib.Comparison, markdown_path: Optional[str], json_path: Optional[str], title: str) -> None:
    _print_table(cmp)
    for w in cmp.warnings:
        warn(w)
    one_line = not console.is_terminal  # a log keeps each line whole; a terminal wraps between words
    for line in gate_report.summary_lines(cmp):
        console.print(line, soft_wrap=one_line)
    colour = {gate_lib.EXIT_PASS: "green", gate_lib.EXIT_FAIL: "bold red"}.get(cmp.exit_code, "bold yellow")
    console.print(gate_report.headline(cmp), style=colour, soft_wrap=one_line)
    _write(markdown_path, gate_report.markdown(cmp, title), "--markdown")
    _write(json_path, gate_report.to_json(cmp), "--json")


@click.command(epilog=examples("xlabench compare results/attention/BASE.csv results/attention/NEW.csv",
                               "xlabench compare base.csv new.csv --threshold 10% --markdown $GITHUB_STEP_SUMMARY"))
@click.argument("baseline", type=click.Path(dir_okay=False))
@click.argument("candidate", type=click.Path(dir_okay=False), required=False)
@click.option("--backends", "pair", default=None, metavar="A,B",
              help="One framework against another on the same cases: the baseline's rows of backend A against "
                   "the candidate's (default: the same file's) rows of backend B, e.g. jax,torch_tpu.")
@_judging_options
def compare(baseline: str, candidate: Optional[str], pair: Optional[str], markdown_path: Optional[str],
            json_path: Optional[str], **judging: Any) -> None:
    """Compare two results CSVs case by case and suite-wide (or, with --backends A,B, two frameworks of one
    run or of two runs, on the same cases).

    Exit codes: 0 pass; 1 a regression (a case, or the suite-wide shift) or a failed/wrong candidate
    case; 2 bad input; 3 could not judge: an underpowered case (too few samples, interval beyond the
    threshold) or a slowdown the host's own explains (--allow-inconclusive: 0). Nothing compared (no case
    measured on both sides) is 2; a case of the baseline missing from the candidate is 1 (--allow-missing).
    """
    cfg = _config(**judging)
    _check_outputs(markdown_path, json_path)
    if candidate is None and pair is None:
        raise BadInput("compare needs a CANDIDATE results CSV (or --backends A,B to set two backends of one run "
                       "against each other)")
    base = _load(baseline, "baseline")
    cand = base if candidate is None else _load(candidate, "candidate")
    notes: list[str] = []
    if pair is not None:
        from xlabench.gate import across as gate_across  # the statistics' scipy: loaded when a command judges

        try:
            base, cand, notes = gate_across.across(base, cand, gate_across.parse_pair(pair))
        except gate_lib.GateInputError as e:
            raise BadInput(str(e)) from None
    cmp = _compare(base, cand, cfg)
    cmp.warnings[:0] = notes
    _report(cmp, markdown_path, json_path, "xlabench compare")
    sys.exit(cmp.exit_code)


def _first_baseline(outcome: RunOutcome, bpath: Path, markdown_path: Optional[str],
                    json_path: Optional[str]) -> int:
    """--save-baseline without a baseline: keep the run as the baseline unless a case failed."""
    ok = not (outcome.failed or outcome.wrong)
    if ok:
        gate_steps.write_baseline(outcome.files.csv, bpath)
    msg = (f"baseline {bpath} created from {outcome.files.csv}" if ok else
           f"baseline {bpath} NOT created: {len(outcome.failed)} failed, {len(outcome.wrong)} wrong case(s)")
    console.print(msg, style="green" if ok else "bold red", soft_wrap=True)
    _write(markdown_path, f"## {'✅' if ok else '❌'} xlabench gate: {msg}\n", "--markdown")
    _write(json_path, json.dumps({"passed": ok, "exit_code": 0 if ok else 1, "baseline": None,
                                  "candidate": str(outcome.files.csv), "baseline_saved": ok, "cases": []},
                                 indent=2) + "\n", "--json")
    return 0 if ok else 1


def _replace_baseline(cmp: gate_lib.Comparison, run_csv: Path, bpath: Path) -> None:
    """--save-baseline over an existing baseline: only a run that passed the gate replaces it."""
    if cmp.passed:
        gate_steps.write_baseline(run_csv, bpath)
        console.print(f"baseline {bpath} updated from {run_csv}", soft_wrap=True)
        return
    src, dst = results.RunFiles(run_csv), results.RunFiles(bpath)
    console.print(Text.assemble((f"baseline {bpath} NOT updated: the gate failed.", "bold red"),
                                f" To accept this run anyway: cp {src.csv} {dst.csv} && cp {src.samples} {dst.samples}"),
                  soft_wrap=True)


@click.command(epilog=examples("xlabench gate suites/attention.yaml --baseline baselines/attention.csv --save-baseline",
                               "xlabench gate suites/attention.yaml --baseline baselines/attention.csv -k impl=flash"))
@click.argument("suite_file", type=click.Path())
@click.option("--baseline", default=None, type=click.Path(dir_okay=False),
              help="Baseline results CSV (its .samples.csv must sit beside it); without it, --history judges.")
@history_commands.record_option(", and judge it by the store's series of the suite")
@click.option("--save-baseline", is_flag=True,
              help="Write this run as the baseline: creates it if absent, else replaces it when the gate passes.")
@click.option("--confirm/--no-confirm", default=True, show_default=True,
              help="Re-run the cases flagged as regressions; fail only if a regression reproduces.")
@run_options("profile", "only_impls", "backends", "where", "out_dir", "timeout_s", "peak_tflops", "repeats", "timer", "cache_dir", "no_cache",
             "tune", command="gate")
@_judging_options
def gate(suite_file: str, baseline: Optional[str], history_url: Optional[str], save_baseline: bool, confirm: bool,
         run_opts: RunOptions, markdown_path: Optional[str], json_path: Optional[str], **judging: Any) -> None:
    """Run a suite, compare it with a baseline, re-run flagged cases (all of them for a suite-wide
    regression); raises measure.iters for its runs to the samples a case needs to reach significance.

    Exit codes: 0 pass; 1 a confirmed regression (a case, or the suite-wide shift) or a failed/wrong
    case; 2 bad input; 3 could not judge: an underpowered case (too few samples, interval beyond the
    threshold) or a suite-wide shift the host's compile times explain (--allow-inconclusive: 0);
    130 / 143 interrupted (no verdict).

    --history URL records the run in the history store and judges it against the recent runs of its
    suite and environment (a suite-wide change point, or every commit a little slower): alone, that is
    the verdict; with --baseline, either failing fails the gate.
    """
    if baseline is None and history_url is None:
        raise BadInput("gate needs --baseline FILE (pairwise) or --history URL (against the recorded runs)")
    if baseline is None and save_baseline:
        raise BadInput("--save-baseline needs --baseline FILE (the file to write)")
    if history_url:
        history_commands.open_store(history_url).close()  # a bad store is refused before the run
    _check_outputs(markdown_path, json_path)
    if baseline is not None and save_baseline:
        output_file(baseline, "--baseline", "the baseline --save-baseline writes")
    try:
        with interrupts.interruptible():
            _gate(suite_file, baseline, save_baseline, confirm, run_opts, markdown_path, json_path,
                  _config(**judging), history_url)
    except interrupts.Interrupted as e:
        err_console.print(interrupted_message(e), soft_wrap=True)
        sys.exit(e.exit_code)


def interrupted_message(e: interrupts.Interrupted) -> str:
    """What an interrupted gate says: there is no verdict, and whether the baseline was written."""
    where = f" ({e.done} of {e.total} cases of {e.csv} done)" if e.total is not None and e.csv else ""
    baseline = f"the baseline {e.saved} was written just before" if e.saved else "the baseline is unchanged"
    return f"gate interrupted{where}: no verdict, {baseline}; run the gate again"


def _gate(suite_file: str, baseline: Optional[str], save_baseline: bool, confirm: bool, run_opts: RunOptions,
          markdown_path: str | None, json_path: str | None, cfg: gate_lib.GateConfig,
          history_url: str | None = None) -> None:
    """The body of `xlabench gate` (exits with the verdict's code)."""
    s = load_suite(suite_file)
    bpath = Path(baseline) if baseline else None
    profile = run_opts.profile
    base: Optional[gate_lib.RunData] = None
    if bpath is not None and (bpath.exists() or not save_baseline):
        if not bpath.exists():
            raise BadInput(f"baseline: {bpath}: no such file (create it with --save-baseline)")
        base = _load(bpath, "baseline")
        try:
            gate_steps.check_suite(base, s.name)
        except gate_lib.GateInputError as e:
            raise BadInput(str(e)) from None
        if profile is None:
            profile = gate_steps.baseline_profile(base)
    try:
        s, raised = gate_steps.raise_iters(s, profile, run_opts, base, cfg.alpha)
    except suite_lib.SuiteError as e:
        raise BadInput(str(e)) from None
    notes = [f"gate {r}" for r in raised]
    short = (gate_steps.baseline_shortfall(base, cfg.alpha, gate_steps.selected_ids(s, profile, run_opts))
             if base is not None else None)
    for msg in notes + ([short] if short else []):
        warn(msg)
    outcome = run_with_progress(s, run_opts.replace(profile=profile))
    cand = _load(outcome.files.csv, "candidate")
    by_history = (history_commands.judge_run(history_url, outcome.files.csv, cfg.alpha, cfg.threshold)
                  if history_url else 0)
    if bpath is None:  # judged by the history alone
        sys.exit(max(by_history, 1 if outcome.failed or outcome.wrong else 0))
    if base is None:  # first baseline: nothing to compare with
        sys.exit(max(by_history, _first_baseline(outcome, bpath, markdown_path, json_path)))

    # Only the cases this run selected (--impl) are judged; a selected case the run lost is missing.
    cmp = _compare(base, cand, cfg, only={c.case_id for c in outcome.cases})
    cmp = dataclasses.replace(cmp, warnings=notes + ([short] if short else []) + cmp.warnings)
    if confirm:
        def rerun(case_ids: list[str]) -> gate_lib.RunData:
            what = "a suite-wide regression and its cases" if cmp.suite is not None and \
                cmp.suite.verdict == gate_lib.REGRESSION else "regressions"
            console.print(f"{len(case_ids)} case(s) flagged ({what}): re-running them to confirm", style="yellow")
            again = run_with_progress(s, run_opts.replace(profile=outcome.profile or "base",
                                                          only_case_ids=tuple(case_ids),
                                                          run_id=f"{outcome.files.csv.stem}-confirm"))
            return _load(again.files.csv, "re-run")

        try:
            cmp = gate_lib.confirm(cmp, base, rerun, cfg)
        except gate_lib.GateInputError as e:
            raise BadInput(str(e)) from None
    _report(cmp, markdown_path, json_path, "xlabench gate")
    if save_baseline:
        _replace_baseline(cmp, outcome.files.csv, bpath)
    sys.exit(gate_lib.EXIT_FAIL if by_history else cmp.exit_code)
