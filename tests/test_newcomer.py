"""What a new user tripped over in a fresh clone (issue 42, "Tried as a new user would"): each defect's
test, written to fail before its fix. Bad input is exit 2 with one line naming the file, never a traceback."""

from __future__ import annotations

import dataclasses
import os
import re
import sys
import warnings
from pathlib import Path
from typing import Any

import numpy as np
import click
import pytest
from click.testing import CliRunner

from _gate_data import case, draw, write_run
from conftest import TINY_SUITE, run_cli
from xlabench.cli import main

ROOT = Path(__file__).resolve().parent.parent


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args])


def _one_line_exit_2(res: Any, *named: str) -> None:
    assert res.exit_code == 2, (res.output, res.exception)
    assert "Traceback" not in res.output and (res.exception is None or isinstance(res.exception, SystemExit))
    assert all(n in res.output for n in named), (named, res.output)


@pytest.fixture
def run_csv(tmp_path: Path) -> Path:
    rng = np.random.default_rng(0)
    return write_run(tmp_path / "res" / "tiny" / "20260101-000000-aaaa.csv",
                     [(case("naive", seq_len=s), draw(rng, 8)) for s in (64, 128)], run_id="good-run")


# ------------------------------------------------------------------- 1: a CSV that is not UTF-8

def _latin1(run_csv: Path) -> Path:
    """The run with a Latin-1 byte in its last row's error cell (a file saved by another tool)."""
    data = run_csv.read_bytes().rstrip(b"\n")
    run_csv.write_bytes(data + b"\n" + data.splitlines()[-1].replace(b",ok,", b",failed,caf\xe9,", 1) + b"\n")
    return run_csv


@pytest.mark.parametrize("cmd", ["report", "plot", "compare", "best", "merge", "history add", "run --resume"])
def test_a_csv_that_is_not_utf8_is_one_line_and_exit_2(cmd, run_csv, tmp_path):
    bad = _latin1(run_csv)
    args = {"report": ["report", bad, "--out", tmp_path / "r.md"], "plot": ["plot", bad, "--out", tmp_path / "p"],
            "compare": ["compare", bad, bad], "best": ["best", bad], "merge": ["merge", bad, "-o", tmp_path / "m.csv"],
            "history add": ["history", "add", bad, "--history", f"sqlite:///{tmp_path / 'h.sqlite'}"],
            "run --resume": ["run", _suite(tmp_path), "--resume", bad]}[cmd]
    _one_line_exit_2(_cli(*args), str(bad), "UTF-8")


def _suite(tmp_path: Path) -> Path:
    p = tmp_path / "suite.yaml"
    p.write_text(TINY_SUITE)
    return p


@pytest.mark.parametrize("cmd", ["compare", "merge", "report"])
def test_a_samples_file_that_is_not_utf8_is_one_line_and_exit_2(cmd, run_csv, tmp_path):
    samples = run_csv.with_name(run_csv.name.replace(".csv", ".samples.csv"))
    samples.write_bytes(samples.read_bytes() + b"caf\xe9\n")
    args = {"compare": ["compare", run_csv, run_csv], "merge": ["merge", run_csv, "-o", tmp_path / "m.csv"],
            "report": ["report", run_csv, "--out", tmp_path / "r.md"]}[cmd]
    _one_line_exit_2(_cli(*args), str(samples), "UTF-8")


# ------------------------------------------------------------------- 3: an output that cannot be written

@pytest.fixture
def read_only_dir(tmp_path: Path):
    """A folder nobody may write in: a chmod 555 folder, or for root (whom chmod does not stop) /sys."""
    if os.geteuid() == 0:
        yield Path("/sys")
        return
    d = tmp_path / "ro"
    d.mkdir()
    d.chmod(0o555)
    yield d
    d.chmod(0o755)


@pytest.mark.parametrize("cmd", ["plot", "report", "report --no-charts", "history add", "run"])
def test_an_output_that_cannot_be_written_is_one_line_and_exit_2(cmd, run_csv, tmp_path, read_only_dir):
    url = f"sqlite:///{read_only_dir / 'h.sqlite'}"
    args, named = {"plot": (["plot", run_csv, "--out", read_only_dir], "--out"),
                   "report": (["report", run_csv, "--out", read_only_dir / "r.md"], "--out"),
                   "report --no-charts": (["report", run_csv, "--no-charts", "--out", read_only_dir / "r.md"], "--out"),
                   "history add": (["history", "add", run_csv, "--history", url], url),
                   "run": (["run", _suite(tmp_path), "--history", url, "--out", tmp_path / "out"], url)}[cmd]
    _one_line_exit_2(_cli(*args), named, str(read_only_dir))
    assert not (tmp_path / "out").exists()  # run: refused before any case ran


def test_run_out_that_cannot_be_written_says_its_error_on_the_first_line(tmp_path, read_only_dir):
    """It printed a blank line before its error (issue 61 item 13): the progress bar, never started, was stopped."""
    res = _cli("run", _suite(tmp_path), "--out", read_only_dir / "out")
    _one_line_exit_2(res, "--out", str(read_only_dir))
    assert res.output.startswith("error: --out"), repr(res.output)


# ------------------------------------------------------------------- 2: history add/rebuild of a results folder

def _results_folder(run_csv: Path) -> Path:
    """A run, a second run, a `xlabench compile` file and a run's log and meta, as a results folder holds them."""
    rng = np.random.default_rng(1)
    write_run(run_csv.with_name("20260102-000000-bbbb.csv"), [(case("naive", seq_len=256), draw(rng, 8))],
              run_id="second")
    write_run(run_csv.with_name("20260103-000000-cccc.compile.csv"), [(case("naive", seq_len=64), None)],
              run_id="compiled-run", status={0: "compiled"})
    run_csv.with_name(run_csv.stem + ".log").write_text("case 1/2 ok\n")
    run_csv.with_name(run_csv.stem + ".meta.json").write_text("{}\n")
    return run_csv.parent.parent


def test_history_add_and_rebuild_of_a_results_folder_pass_over_compile_files(run_csv, tmp_path):
    root = _results_folder(run_csv)
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    res = _cli("history", "add", root, "--history", url)
    assert res.exit_code == 0 and "2 run(s) added" in res.output, res.output
    res = _cli("history", "rebuild", root, "--history", url)
    assert res.exit_code == 0 and "from 2 run(s)" in res.output, res.output


def test_history_add_of_a_run_glob_passes_over_its_log_meta_and_samples(run_csv, tmp_path):
    _results_folder(run_csv)
    url = f"sqlite:///{tmp_path / 'h.sqlite'}"
    res = _cli("history", "add", *sorted(run_csv.parent.glob("2026*")), "--history", url)
    assert res.exit_code == 0, res.output
    for skipped in (".log", ".meta.json", ".samples.csv", ".compile.csv"):
        assert f"skipped {run_csv.parent}" in res.output and skipped in res.output, (skipped, res.output)


# ------------------------------------------------------------------- 9: merge dir/*.csv

def test_merge_of_a_folder_glob_passes_over_samples_and_compile_files_with_a_note(run_csv, tmp_path):
    _results_folder(run_csv)
    out = tmp_path / "merged.csv"
    res = _cli("merge", *sorted(run_csv.parent.glob("*.csv")), "-o", out)
    assert res.exit_code == 0, res.output
    assert "merged 2 file(s), 3 rows" in res.output
    assert "a samples file" in res.output and "compile" in res.output


# ------------------------------------------------------------------- 4: run --dry-run on the paged suite

def test_dry_run_of_the_paged_suite_predicts_the_kernels_own_skips(monkeypatch):
    """It said "would run 48, skip 0" where the run skipped 24: the one-token kernels at q_tokens 4, and
    ragged_paged, which the CPU interpreter fails on."""
    from xlabench.run import suite_runner

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setattr(suite_runner, "run_suite", lambda *a, **kw: pytest.fail("a dry run ran"))
    res = _cli("run", ROOT / "suites" / "paged_attention.yaml", "--dry-run", "--backend", "jax")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith(("run ", "skip ")) and "/" in ln.split()[1]]
    for ln in lines:
        one_token = "jax/paged " in ln or "jax/paged_gpu " in ln
        skips = "jax/ragged_paged " in ln or (one_token and "q_tokens=4" in ln)
        assert ln.startswith("skip" if skips else "run"), ln
    skipped = sum(ln.startswith("skip") for ln in lines)
    assert skipped and f"would run {len(lines) - skipped} case(s)" in res.output and f"skip {skipped};" in res.output


def test_the_plan_and_the_jax_worker_decide_a_paged_skip_by_the_same_rule():
    from xlabench import impls as catalog
    from xlabench.backends.jax import paged_impls as registry
    from xlabench.impls import paged_rules
    from xlabench.workloads.paged import PagedParams

    grid = [dict(q_tokens=q, head_dim=d, megacore_mode=m) for q in (1, 4) for d in (64, 128) for m in (None, "batch")]
    for impl in catalog.names_for("paged_attention", "jax"):
        im, info = registry.get(impl), catalog.find("jax", impl, "paged_attention")
        for platform in ("cpu", "gpu"):  # the platforms whose rules need no device kind
            for extra in grid:
                params = PagedParams(batch=2, num_heads=8, num_kv_heads=2, context_lens=64, page_size=16, **extra)
                worker = im.unsupported(params, platform, platform)
                if worker is None and im.interpreter_fails and info.interpreted(platform):
                    worker = im.interpreter_fails  # the worker tries it, and skips on the interpreter's error
                plan = paged_rules.predict_skip("jax", impl, params.model_dump(), platform)
                assert plan is not None and worker is not None and worker.startswith(plan) or plan == worker, \
                    (impl, platform, extra, plan, worker)


def test_the_paged_plan_skips_what_a_recorded_cpu_run_skipped():
    """tests/fixtures/run_paged_cpu.csv is a real CPU run of the shipped suite's cpu profile, both backends:
    the plan predicts a skip for exactly its skipped rows."""
    import pandas as pd

    from xlabench import suite as suite_lib
    from xlabench.run import suite_runner
    from xlabench.run.scheduler import platform_skip

    recorded = pd.read_csv(ROOT / "tests" / "fixtures" / "run_paged_cpu.csv", dtype={"case_id": str})
    status = dict(zip(recorded["case_id"], recorded["status"]))
    cases = suite_lib.load(ROOT / "suites" / "paged_attention.yaml").cases("cpu")
    assert {c.case_id for c in cases} == set(status)
    for c in cases:
        why = platform_skip(c, "cpu") or suite_runner.predict_skip(c, "cpu")
        assert (why is not None) == (status[c.case_id] == "skipped"), (c.backend, c.impl, c.params, why)


# ------------------------------------------------------------------- 5: two --resume runs of one CSV at once

def test_a_second_resume_of_a_csv_being_written_is_refused(run_csv, tmp_path):
    """Two concurrent --resume runs both ran the missing case (9 rows for 8 cases): the first holds the file
    from reading what is done until its last row; the second is one line, exit 2, before any case."""
    from xlabench import suite as suite_lib
    from xlabench.run import session, suite_runner

    s = suite_lib.load(_suite(tmp_path))
    first = session.open_run(s, str(tmp_path), str(run_csv))
    with pytest.raises(suite_runner.RunInputError, match=f"--resume: .*{run_csv.name}.* another run"):
        session.open_run(s, str(tmp_path), str(run_csv))
    res = _cli("run", _suite(tmp_path), "--resume", run_csv, "--profile", "base")
    _one_line_exit_2(res, str(run_csv), "another run")
    first[0].release()
    assert session.open_run(s, str(tmp_path), str(run_csv))[1] == first[1]  # free again once released


def _with_rows(run_csv: Path, edit) -> Path:
    lines = run_csv.read_text().splitlines(keepends=True)
    run_csv.write_text("".join(edit(lines)))
    return run_csv


# ------------------------------------------------------------------- 5 and 8: report accepts what compare refuses

@pytest.mark.parametrize("kind", ["duplicate case", "truncated", "status OK", "median_s abc"])
def test_report_and_plot_refuse_what_compare_refuses(kind, run_csv, tmp_path):
    bad = _with_rows(run_csv, {
        "duplicate case": lambda ls: ls + ls[-1:],  # what two concurrent resumes wrote
        "truncated": lambda ls: ls[:-1] + [ls[-1][: len(ls[-1]) // 2]],  # cut mid-row, then no newline
        "status OK": lambda ls: ls[:-1] + [ls[-1].replace(",ok,", ",OK,", 1)],
        "median_s abc": lambda ls: ls[:-1] + [_cell_replaced(ls[0], ls[-1], "median_s", "abc")],
    }[kind])
    named = {"duplicate case": "more than one row", "truncated": "truncated", "status OK": "'OK'",
             "median_s abc": "median_s"}[kind]
    compare = _cli("compare", bad, bad)
    _one_line_exit_2(compare, str(bad), named)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' raw ParserWarning on the user's terminal fails here
        report = _cli("report", bad, "--out", tmp_path / "r.md", "--no-charts")
    _one_line_exit_2(report, str(bad), named)
    _one_line_exit_2(_cli("plot", bad, "--out", tmp_path / "p"), str(bad), named)


def _cell_replaced(header: str, line: str, column: str, value: str) -> str:
    import csv
    import io

    names = next(csv.reader(io.StringIO(header)))
    cells = next(csv.reader(io.StringIO(line)))
    cells[names.index(column)] = value
    out = io.StringIO()
    csv.writer(out, lineterminator="\n").writerow(cells)
    return out.getvalue()


# ------------------------------------------------------------------- 10: validate an impl of none of the backends

@pytest.mark.parametrize("where", ["base", "profile"])
def test_validate_refuses_an_impl_that_runs_on_none_of_the_suites_backends(where, tmp_path):
    text = TINY_SUITE.replace("impls: [naive, xla_sdpa]", "impls: [naive, sdpa]")  # sdpa: torch_xla's
    if where == "profile":
        text = TINY_SUITE + "profiles:\n  cpu:\n    impls: [naive, sdpa]\n"
    path = tmp_path / "s.yaml"
    path.write_text(text)
    line = next(i for i, ln in enumerate(text.splitlines(), 1) if "sdpa]" in ln and "xla_sdpa" not in ln)
    _one_line_exit_2(_cli("validate", path), f"{path}:{line}:", "'sdpa'", "torch_xla", "backends")


# ------------------------------------------------------------------- 13 and 14: a reason on every progress line

def _fake_run(monkeypatch, rows_of):
    """`run` with the suite's cases given rows by ``rows_of(case) -> row`` (no worker)."""
    from xlabench.run import suite_runner

    def fake_run(suite: Any, opts: Any, hooks: Any) -> Any:
        cases = suite.cases("")
        hooks.start([f"suite {suite.name}"], len(cases), cases)
        rows = []
        for c in cases:
            rows.append({"backend": c.backend, "impl": c.impl, **c.params, **rows_of(c)})
            hooks.row(c, rows[-1])
        return suite_runner.RunOutcome(suite_runner.results.RunFiles(Path(opts.out_dir) / "x.csv"), "", cases, rows)

    monkeypatch.setattr(suite_runner, "run_suite", fake_run)


def test_a_skip_reason_shared_by_many_cases_is_printed_whole_once(monkeypatch, tmp_path):
    """The torch_xla-missing reason was printed on 18 progress lines, each cut at 120 characters."""
    why = ("torch_xla environment missing (make torch-xla-env): /x/.venv-torch-xla/bin/python (default) is not an "
           "executable; create it with make torch-xla-env or point --python-torch-xla at one")
    _fake_run(monkeypatch, lambda c: {"status": "skipped", "error": why})
    res = _cli("run", _suite(tmp_path), "--profile", "base", "--out", tmp_path / "o")
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("skipped")]
    assert len(lines) == 4 and sum(why in ln for ln in lines) == 1 and all("reason 1" in ln for ln in lines)


def test_a_failed_rows_error_is_printed_whole(monkeypatch, tmp_path):
    """A failed row's error was cut at 120 characters in the terminal ("(searc")."""
    errors = {}

    def rows_of(c):
        errors[c.case_id] = f"RuntimeError: case {c.case_id} " + "x" * 150 + " (searched 12 candidates)"
        return {"status": "failed", "error": errors[c.case_id]}

    _fake_run(monkeypatch, rows_of)
    res = _cli("run", _suite(tmp_path), "--profile", "base", "--out", tmp_path / "o")
    assert all(e in res.output for e in errors.values()), res.output


def test_a_run_with_too_few_samples_ends_with_a_one_line_note_not_a_warning(monkeypatch, tmp_path):
    from xlabench.run import suite_runner

    cases = suite_runner.suite_lib.load(_suite(tmp_path)).cases("")  # 3 iterations each
    note = suite_runner.samples_note(cases, suite_runner.suite_lib.load(_suite(tmp_path)).spec.measure)
    assert note and note.startswith("3 sample(s) per case")
    _fake_run(monkeypatch, lambda c: {"status": "ok", "median_s": 1e-3})
    real = suite_runner.run_suite
    monkeypatch.setattr(suite_runner, "run_suite", lambda *a, **kw: dataclasses.replace(real(*a, **kw), samples_note=note))
    res = _cli("run", _suite(tmp_path), "--profile", "base", "--out", tmp_path / "o")
    assert res.exit_code == 0 and "warning" not in res.output, res.output
    assert f"note: {note}" in res.output.splitlines()


# ------------------------------------------------------------------- 14: help and messages

def _help(*cmd: str) -> str:
    return " ".join(_cli(*cmd, "--help").output.split())


def test_run_help_shows_no_history_default_it_does_not_use_and_compile_out_names_its_suffix():
    from xlabench.history import store

    assert "[default: " + store.DEFAULT_URL not in _help("run") and "without it nothing is recorded" in _help("run")
    assert "[default: " + store.DEFAULT_URL in _help("history", "add")  # the history commands do use it
    compile_help = _help("compile").replace(" ", "")  # a wrapped "<run-\nid>" too
    assert "<run-id>.compile.csv" in compile_help and "<run-id>.csv." not in compile_help


def _option_helps(cmd: str) -> dict[str, str]:
    """Each option's help text as `cmd --help` prints it (whitespace collapsed)."""
    from xlabench.cli import main

    ctx = click.Context(main.commands[cmd], info_name=cmd)
    return {max(p.opts, key=len): " ".join((p.help or "").split()) for p in main.commands[cmd].get_params(ctx)
            if isinstance(p, click.Option)}


def test_each_commands_help_describes_its_own_behaviour_not_the_others():
    """The help shared by `run` and `compile` (--cache-dir, --jobs, --explain, --resume) said what each did for
    both, and compile's --resume said RUN.csv (issue 50, item 14): each command's help says its own."""
    run, comp, gate = _option_helps("run"), _option_helps("compile"), _option_helps("gate")
    shared = sorted(set(run) & set(comp) - {"--help"})
    assert {"--cache-dir", "--jobs", "--explain", "--resume"} <= set(shared)
    for mine, other in ((run, "compile"), (comp, "run"), (gate, "compile")):
        for flag, text in mine.items():
            assert not re.search(rf"\b{other}(:| keeps)|for {other}\b", text), (flag, text)
    assert "figure cache" not in " ".join(run.values()) and "--timer trace" not in " ".join(comp.values())
    assert ".compile.csv" in comp["--resume"] and ".compile.csv" not in run["--resume"]
    assert "refused" in run["--jobs"] and "refused" not in comp["--jobs"] and "free memory" in comp["--jobs"]
    assert "HLO" in comp["--explain"] and "profile" in run["--explain"] and "profile" not in comp["--explain"]
    assert run["--cache-dir"] == gate["--cache-dir"] and "executable" in run["--cache-dir"]
    assert "memory" in comp["--cache-dir"] and "executable" not in comp["--cache-dir"]


@pytest.mark.parametrize("text, said", [("", "got nothing"), ("# only a comment\n", "got nothing"),
                                        ("- a\n- b\n", "got a list")])
def test_a_suite_that_is_no_mapping_says_what_it_is(text, said, tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text(text)
    res = _cli("validate", path)
    _one_line_exit_2(res, str(path), said, "workload")
    assert "NoneType" not in res.output


def test_a_parameter_in_params_and_matrix_names_the_matrix_key_it_repeats(tmp_path):
    path = tmp_path / "s.yaml"
    path.write_text("name: s\nworkload: attention\nimpls: [naive]\nparams: {num_heads: 2, seq_len: 64}\n"
                    "matrix:\n  head_dim: [32]\n  seq_len: [64, 128]\n")
    _one_line_exit_2(_cli("validate", path), f"{path}:7: matrix.seq_len:", "also in params.seq_len")


def test_make_run_plots_only_the_suite_it_ran():
    import subprocess

    out = subprocess.run(["make", "-n", "run", "SUITE=suites/llama.yaml"], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    plot = [ln for ln in out.splitlines() if "xlabench plot" in ln]
    assert plot and all(ln.rstrip().endswith("results/llama") for ln in plot), out


def test_report_writes_under_plots_not_into_the_working_folder(run_csv, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = _cli("report", run_csv, "--no-charts")
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "report.md").exists() and (tmp_path / "plots" / "report.md").exists()


def test_a_one_run_history_chart_does_not_label_run_1_twice():
    from xlabench.history.html import line_chart

    assert line_chart([0.0], 200, 60).count(">run 1<") == 1
    assert line_chart([0.0, 0.1, 0.2], 200, 60).count(">run 3<") == 1


def test_after_a_resume_the_counts_are_the_whole_files(monkeypatch, run_csv, tmp_path):
    """It counted only the cases the resume ran: "1 ok" for a file of 3 ok rows."""
    from xlabench.run import suite_runner

    def fake_run(suite: Any, opts: Any, hooks: Any) -> Any:
        c = suite.cases("")[0]
        row = {"backend": c.backend, "impl": c.impl, **c.params, "status": "skipped", "error": "why"}
        hooks.start(["suite"], 1, [c])
        hooks.row(c, row)
        return suite_runner.RunOutcome(suite_runner.results.RunFiles(Path(opts.resume_csv)), "", [c], [row])

    monkeypatch.setattr(suite_runner, "run_suite", fake_run)
    res = _cli("run", _suite(tmp_path), "--resume", run_csv)
    assert res.exit_code == 0, res.output
    assert f"2 ok, 0 failed, 0 skipped in {run_csv.name} (1 case(s) run now" in res.output, res.output


# ------------------------------------------------------------------- 6: xlabench tune on CPU

def test_tune_on_cpu_runs_nothing_and_says_why(monkeypatch):
    """It ran 32 cases, naive included, then printed an empty table: on CPU every kernel is interpreted."""
    from xlabench.run import suite_runner

    monkeypatch.setenv("JAX_PLATFORMS", "cpu")
    monkeypatch.setattr(suite_runner, "run_suite", lambda *a, **kw: pytest.fail("tune ran cases on CPU"))
    res = _cli("tune", ROOT / "suites" / "attention.yaml", "--backend", "jax")
    assert res.exit_code == 0, res.output
    assert "nothing to tune in profile cpu on cpu" in res.output
    assert "not searched: no block sizes to search" in res.output and "interpreted on cpu" in res.output


def test_tune_searches_only_the_kernels_with_a_search(monkeypatch):
    from xlabench.run import suite_runner

    monkeypatch.setenv("JAX_PLATFORMS", "tpu")
    ran = {}

    def fake_run(suite: Any, opts: Any, hooks: Any) -> Any:
        ran["ids"] = opts.only_case_ids
        return suite_runner.RunOutcome(suite_runner.results.RunFiles(Path(opts.out_dir) / "x.csv"), "", [], [])

    monkeypatch.setattr(suite_runner, "run_suite", fake_run)
    res = _cli("tune", ROOT / "suites" / "attention.yaml", "--backend", "jax", "--profile", "tpu")
    assert res.exit_code == 0, res.output
    from xlabench import suite as suite_lib

    cases = {c.case_id: c for c in suite_lib.load(ROOT / "suites" / "attention.yaml").cases("tpu")}
    assert ran["ids"] and {cases[i].impl for i in ran["ids"]} <= {"flash", "splash"}


# ------------------------------------------------------------------- 7: best shows naive as a block sweep

def test_best_passes_over_an_impl_that_takes_no_block_sizes(tmp_path):
    """naive ignores block_q/block_k: its rows at 256 x 256 and at the default are one configuration, but the
    table showed '256 256' as a pick while -o wrote block_q: null."""
    from xlabench.report import best_config as best
    from xlabench.report import chartdata as cd

    rng = np.random.default_rng(0)
    entries = [(case(impl, seq_len=256, **blocks), draw(rng, 12, scale=scale))
               for impl in ("naive", "flash")
               for blocks, scale in (({}, 1.0), ({"block_q": 256, "block_k": 256}, 0.5))]
    path = write_run(tmp_path / "sweep.csv", entries)
    picks = best.best_configs(cd.load([path]), cd.load_samples([path]))
    assert [p.shown.impl for p in picks] == ["flash"]
    res = _cli("best", path, "-o", tmp_path / "tuned.yaml")
    assert res.exit_code == 0, res.output
    assert "naive" not in res.output.split("impl", 1)[-1] and "naive" not in (tmp_path / "tuned.yaml").read_text()


# ------------------------------------------------------------------- 12: compare's repeated note

@pytest.mark.slow  # a process: its console takes COLUMNS=80 whatever the test runner's terminal is
def test_compare_writes_a_note_every_case_shares_once(tmp_path):
    """The attention profile's compare printed 1,263 lines at 80 columns: one 10-line note on each of 96 rows."""
    rng = np.random.default_rng(0)
    cases = [case(impl, seq_len=s) for impl in ("naive", "xla_sdpa") for s in (64, 128, 256, 512, 1024, 2048)]
    a = write_run(tmp_path / "a.csv", [(c, draw(rng, 3)) for c in cases], run_id="a")
    b = write_run(tmp_path / "b.csv", [(c, draw(rng, 3)) for c in cases], run_id="b")
    res = run_cli("compare", str(a), str(b), env={"COLUMNS": "80"})  # a process: its console reads COLUMNS
    out = res.stdout + res.stderr
    rows = [ln for ln in out.splitlines() if "  jax/" in ln]  # a case's line (compact at 80 columns)
    assert len(rows) == len(cases) and all(ln.rstrip().endswith(" 1") for ln in rows), out
    assert out.count("#1:") == 1 and "too few samples" in out.split("#1:")[1]


# ------------------------------------------------------------------- 11: compile --target

def test_compile_says_when_the_cases_mesh_is_not_the_targets_and_picks_the_targets_profile(tmp_path):
    from xlabench import hardware
    from xlabench import suite as suite_lib
    from xlabench.run import compile_runner
    from xlabench.run.run_options import RunOptions

    s = suite_lib.load(ROOT / "suites" / "gpt2.yaml")
    target, prof, cases = compile_runner._checked(s, "v5e-8", 1, RunOptions())
    assert prof == "" and {c.devices for c in cases} == {8}  # the base suite, fitted to the target's devices
    assert compile_runner.mesh_note(cases, target, 1) is None
    # a profile that pins devices (the seed study's 4) still says what it leaves out of a bigger slice
    target, prof, cases = compile_runner._checked(s, "v5e-8", 1, RunOptions(profile="v4-8"))
    assert prof == "v4-8" and {c.devices for c in cases} == {4}
    note = compile_runner.mesh_note(cases, target, 1)
    assert note and "mesh of 4 device(s), not the 8 of v5e-8" in note
    assert compile_runner.mesh_note(cases, hardware.find_target("v4-8"), 1) is None
    assert compile_runner._checked(s, "h100", 1, RunOptions())[1] == ("gpu" if "gpu" in s.spec.profiles else "base")


def test_a_compile_charts_title_counts_the_devices_its_mesh_spans():
    import pandas as pd

    from xlabench.report import chartdata as cd

    df = pd.DataFrame({"suite": ["gpt2"], "device_kind": ["TPU v5 lite"], "device_count": [8], "devices": [4],
                       "target": ["v5e-8"], "interpret": [False]})
    assert "TPU v5 lite ×4" in cd.title(df, "compile") and "×8" not in cd.title(df, "compile")


# ------------------------------------------------------------------- CI: pytest's exit 5 is a failure

@pytest.mark.slow  # starts make and pytest (~3 s)
def test_the_ci_pytest_step_fails_when_no_test_runs():
    """`make test` and `make test-fast` run pytest through `make pytest-run`: no test selected (exit 5) fails
    the step with a line saying so (.ci/run runs `make test` under set -e)."""
    import subprocess

    proc = subprocess.run(["make", "-s", "pytest-run", "TEST_JOBS=0", "PYTEST_ARGS=tests/test_flops.py -k no_such_test",
                           f"BIN={Path(sys.executable).parent}"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode != 0 and "pytest ran no tests (exit 5)" in proc.stderr, proc.stdout + proc.stderr
    for target in ("test", "test-fast"):
        dry = subprocess.run(["make", "-n", target], cwd=ROOT, capture_output=True, text=True).stdout
        assert "pytest-run" in dry and "-m pytest" not in dry.split("pytest-run")[0], (target, dry)
