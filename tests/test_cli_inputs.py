"""Bad input to every command is exit 2 with one line, never a traceback (issue 20, item 3); the run
options are declared once (issue 21); no markup eats user text (item 4); case selection (item 6)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import click
import numpy as np
import pytest
from click.testing import CliRunner

from _gate_data import case, draw, write_run
from conftest import TINY_SUITE
from xlabench.cli import main
from xlabench.run import suite_runner as run_session
from xlabench.run.session import open_run
from xlabench.run.run_options import LIMITS, RunOptions

ROOT = Path(__file__).resolve().parent.parent

SUITE = TINY_SUITE  # two impls x two sequence lengths, JAX on CPU


def _cli(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


def _one_line_exit_2(res: Any, *named: str) -> None:
    """Exit 2, no traceback, and the message names what was wrong (an option or its value)."""
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output and not isinstance(res.exception, (AttributeError, TypeError, OSError))
    assert any(n in res.output for n in named), (named, res.output)


@pytest.fixture
def files(tmp_path: Path) -> dict[str, Path]:
    suite = tmp_path / "suite.yaml"
    suite.write_text(SUITE)
    rng = np.random.default_rng(0)
    run = write_run(tmp_path / "res" / "tiny" / "20260101-000000-aaaa.csv",
                    [(case("naive", seq_len=s), draw(rng, 8)) for s in (64, 128)], run_id="good-run")
    a_dir = tmp_path / "a_dir"
    a_dir.mkdir()
    return {"suite": suite, "run": run, "file": suite, "dir": a_dir, "results": tmp_path / "res"}


# ------------------------------------------------------------------- every option of every command

# Options whose bad value depends on the command's input, not on the option's type.
BAD_STRINGS = {
    "--profile": "gpuu", "--impl": "nosuch", "-k": "nokey=1", "--shard": "3/2", "--target": "v99-8",
    "--format": "gif", "--kind": "nosuch", "--coordinator": "nohostport", "--baseline": "MISSING",
    "--resume": "MISSING", "--python-torch-xla": "MISSING", "--output": "DIR", "-o": "DIR",
    "--metric": "speed", "--history": "nosuch://store", "--alpha": "2",
    "--suite": "nosuch", "--backends": "jax",
    # tune's table options: refused without --export (--device-kind: without --export or --table)
    "--from": "MISSING", "--commit": "abc1234", "--date": "2026-12-07", "--libtpu": "0.0.42.1",
    "--device-kind": "TPU v6e",
}
# Option types whose bad value follows from the type.
TYPE_BAD = {click.IntRange: "RANGE", click.FloatRange: "RANGE", click.types.IntParamType: "abc",
            click.types.FloatParamType: "abc", click.Choice: "no-such-choice"}


def _args(cmd: str, f: dict[str, Path], tmp_path: Path) -> list[str]:
    """Arguments that make a command valid but for the option under test (runs stay cheap: --profile base)."""
    return {
        "run": [str(f["suite"]), "--profile", "base"], "list": [str(f["suite"]), "--profile", "base"],
        "tune": [str(f["suite"]), "--profile", "base"],
        "validate": [str(f["suite"])], "compile": [str(f["suite"]), "--target", "v4-8", "--profile", "base"],
        "gate": [str(f["suite"]), "--baseline", str(tmp_path / "new-base.csv"), "--save-baseline",
                 "--profile", "base"],
        "compare": [str(f["run"]), str(f["run"])], "merge": [str(f["run"]), "-o", str(tmp_path / "m.csv")],
        "best": [str(f["run"])], "plot": [str(f["run"])], "report": [str(f["run"])], "explain": [str(f["run"])],
        "info": [], "columns": [],
        **_history_args(cmd, f, tmp_path),
    }.get(cmd, [])  # a command added later: its options are still walked (add its valid arguments here)


def _history_args(cmd: str, f: dict[str, Path], tmp_path: Path) -> dict[str, list[str]]:
    """Valid arguments of the history commands: a store in tmp_path holding the fixture's run."""
    if not cmd.startswith("history"):
        return {}
    url = f"sqlite:///{tmp_path / 'history.sqlite'}"
    if cmd in ("history changes", "history html"):
        assert _cli("history", "add", str(f["run"]), "--history", url).exit_code == 0
    return {"history add": [str(f["run"]), "--history", url], "history rebuild": [str(f["results"]), "--history", url],
            "history changes": ["--history", url], "history html": ["--history", url, "-o", str(tmp_path / "site")]}


def _bad_value(opt: click.Option, f: dict[str, Path]) -> str | None:
    flag = max(opt.opts, key=len)
    if opt.is_flag or opt.name == "help":
        return None
    if isinstance(opt.type, click.Path) and not opt.type.file_okay:  # a folder option (history html -o): a file
        return str(f["file"])
    for name in opt.opts:
        if name in BAD_STRINGS:
            v = BAD_STRINGS[name]
            return {"MISSING": str(f["dir"] / "missing" / "x"), "DIR": str(f["dir"])}.get(v, v)
    t = opt.type
    if isinstance(t, click.Path):
        if not t.file_okay:
            return str(f["file"])
        if not t.dir_okay:
            return str(f["dir"])
    for kind, bad in TYPE_BAD.items():
        if isinstance(t, kind):
            if bad == "RANGE":
                low = t.min if t.min is not None else 0
                return str(low - 1)
            return bad
    if t.name == "fraction":
        return "five"
    raise AssertionError(f"{flag}: no bad value known for this option (add one to BAD_STRINGS)")


def _commands(group: click.Group = main, path: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], click.Command]]:
    """Every command under the group, subcommands of nested groups included, by its path of names."""
    ctx = click.Context(group)
    out: list[tuple[tuple[str, ...], click.Command]] = []
    for name in group.list_commands(ctx):
        cmd = group.get_command(ctx, name)
        out += _commands(cmd, path + (name,)) if isinstance(cmd, click.Group) else [(path + (name,), cmd)]
    return out


def _cases() -> list[tuple[str, str]]:
    return [(" ".join(path), p.name) for path, cmd in _commands() for p in cmd.params
            if isinstance(p, click.Option) and not p.is_flag and p.name != "help"]


@pytest.mark.parametrize("cmd, param", _cases())
def test_every_option_of_every_command_refuses_a_bad_value_with_exit_2(cmd, param, files, tmp_path):
    command = {" ".join(path): c for path, c in _commands()}[cmd]
    opt = next(p for p in command.params if p.name == param)
    bad = _bad_value(opt, files)
    flag = max(opt.opts, key=len)
    args = _args(cmd, files, tmp_path)
    if flag == "--profile":
        args = [a for a in args if a not in ("--profile", "base")]
    if flag in ("--target", "--baseline", "-o", "--output") and flag in args:  # replace the valid value
        i = args.index(flag)
        args = args[:i] + args[i + 2:]
    if cmd == "gate" and flag == "--baseline":
        args = [a for a in args if a != "--save-baseline"]
    res = _cli(*cmd.split(), *args, flag, bad)
    _one_line_exit_2(res, flag, f"'{flag}'", bad)


def test_the_walk_covers_every_command():
    cmds = {c for c, _ in _cases()}
    assert {"run", "tune", "gate", "compile", "list", "compare", "plot", "report", "best", "info", "merge"} <= cmds


@pytest.mark.parametrize("cmd", ["run", "tune", "gate", "compile", "list", "validate", "compare", "merge", "best",
                                 "plot", "report"])
def test_every_command_refuses_a_bad_path_argument_with_exit_2(cmd, files, tmp_path):
    missing = str(tmp_path / "nope" / "x.csv")
    args = {"run": [missing], "tune": [missing], "gate": [missing, "--baseline", str(files["run"])], "compile": [missing, "--target", "v4-8"],
            "list": [missing], "validate": [missing], "compare": [missing, str(files["run"])],
            "merge": [missing, "-o", str(tmp_path / "m.csv")], "best": [missing], "plot": [missing],
            "report": [missing]}[cmd]
    _one_line_exit_2(_cli(cmd, *args), missing, "no such file", "does not exist")


# ------------------------------------------------------------------- the reported defects, one by one


def test_list_with_an_unknown_profile_is_exit_2_not_a_traceback(files):
    _one_line_exit_2(_cli("list", str(files["suite"]), "--profile", "gpuu"), "no profile 'gpuu'")


def test_run_out_a_file_is_exit_2(files):
    res = _cli("run", str(files["suite"]), "--profile", "base", "--out", "/etc/passwd")
    _one_line_exit_2(res, "/etc/passwd")


def test_run_out_under_a_file_is_exit_2(files):
    """A folder that cannot be made (a file on the way) is one line too, from the library's check."""
    with pytest.raises(run_session.RunInputError, match="--out"):
        open_run(run_session.suite_lib.load(files["suite"]), str(files["file"] / "sub"), None)


def test_run_negative_timeout_is_exit_2_before_anything_runs(files, monkeypatch):
    started = []
    monkeypatch.setattr(run_session, "run_suite", lambda *a, **kw: started.append(1))
    res = _cli("run", str(files["suite"]), "--timeout", "-5")
    _one_line_exit_2(res, "--timeout")
    assert started == []


def test_info_unknown_backend_is_exit_2():
    _one_line_exit_2(_cli("info", "--backend", "pytorch"), "pytorch")


def test_best_takes_a_folder(files):
    res = _cli("best", str(files["results"]) + "/")
    assert "Traceback" not in res.output
    assert res.exit_code == 2 and "no sweep of a tuned parameter" in res.output  # read, and judged on its rows


def test_best_on_the_natural_glob_skips_the_samples_file(files):
    run = files["run"]
    globbed = sorted(str(p) for p in run.parent.glob("*.csv"))
    assert any(p.endswith(".samples.csv") for p in globbed)
    res = _cli("best", *globbed)
    assert "Traceback" not in res.output and "skipped" in res.output and "samples file" in res.output
    assert "no sweep of a tuned parameter" in res.output


def test_an_out_of_range_option_is_refused_by_run_options_too():
    for name, limit in LIMITS.items():
        with pytest.raises(ValueError, match=limit.flag):
            RunOptions(**{name: limit.low - 1})
    assert RunOptions(trace_dir="t").timer == "trace"


def test_an_integer_option_refuses_a_fraction_and_every_option_nan():
    """#36: Limit is a pydantic range; the hand-written check let --jobs 1.5 through."""
    with pytest.raises(ValueError, match=r"^--jobs 1.5: expected an integer >= 1$"):
        RunOptions(jobs=1.5)
    with pytest.raises(ValueError, match=r"^--timeout nan: expected a number > 0$"):
        RunOptions(timeout_s=float("nan"))
    assert RunOptions(jobs=2, timeout_s=0.5).jobs == 2


# ------------------------------------------------------------------- one set of run options


def _help_of(cmd: str) -> dict[str, str]:
    """option flag -> its help text, as `cmd --help` shows it."""
    command = main.get_command(click.Context(main), cmd)
    ctx = click.Context(command)
    out = {}
    for p in command.params:
        rec = p.get_help_record(ctx) if isinstance(p, click.Option) else None
        if rec:
            out[max(p.opts, key=len)] = " ".join(rec[1].split())
    return out


def test_run_and_gate_say_the_same_for_the_same_option():
    run, gate = _help_of("run"), _help_of("gate")
    shared = set(run) & set(gate) - {"--profile", "--history", "--help"}  # gate also judges by the history
    assert {"--timeout", "--peak-tflops", "--impl", "--repeats", "--timer", "--out", "--backend", "-k"} <= shared
    assert {k: run[k] for k in shared} == {k: gate[k] for k in shared}


def test_every_command_help_has_examples():
    for path, _ in _commands():
        res = _cli(*path, "--help")
        cmd = " ".join(path)
        assert res.exit_code == 0 and re.search(rf"Examples:\n +xlabench {cmd}\b", res.output), (cmd, res.output)


# ------------------------------------------------------------------- no markup in user text


def test_brackets_in_an_error_are_printed_as_written(files, monkeypatch):
    from xlabench.run import compile_runner as compile_session

    hint = "no libtpu: pip install -e '.[tpu-compile]' (or `make tpu-compile`)"

    def no_libtpu(*a: Any, **kw: Any) -> None:
        raise compile_session.CompileError(hint)

    monkeypatch.setattr(compile_session, "compile_suite", no_libtpu)
    res = _cli("compile", str(files["suite"]), "--target", "v4-8")
    assert res.exit_code == 2 and hint in res.output, res.output


def test_brackets_in_a_skip_line_and_a_warning_are_printed_as_written(files, monkeypatch):
    why = "q must be [batch, heads, head_dim] for [red]this[/] impl"
    s = run_session.suite_lib.load(files["suite"])
    c = s.cases("")[0]

    def fake_run(suite: Any, opts: RunOptions, hooks: Any) -> Any:
        hooks.warning(f"warning text [{why}]")
        hooks.start([f"suite {suite.name} [cpu]"], 1)
        row = {"status": "skipped", "error": why, "backend": c.backend, "impl": c.impl, **c.params}
        hooks.row(c, row)
        files_ = run_session.results.RunFiles(Path(opts.out_dir) / "x.csv")
        return run_session.RunOutcome(files_, "", [c], [row])

    monkeypatch.setattr(run_session, "run_suite", fake_run)
    res = _cli("run", str(files["suite"]), "--out", str(files["dir"]))
    assert res.exit_code == 0, res.output
    assert res.output.count(why) >= 2 and f"[{why}]" in res.output and "[cpu]" in res.output


def test_compile_prints_through_the_runs_progress_a_line_per_compiled_case(files, monkeypatch):
    """`compile` has no progress of its own: run's RunProgress with compile's line per case (memory, compile
    time, ceiling; none per skip: they are counted per reason at the end), one step per case."""
    from xlabench.run import compile_runner

    s = run_session.suite_lib.load(files["suite"])
    cases = s.cases("")[:2]

    def fake_compile(suite: Any, target: str, slices: int, opts: RunOptions, hooks: Any) -> Any:
        hooks.start([f"suite {suite.name} profile base compiled for {target}"], 2, cases, jobs=1)
        rows = [{"case_id": cases[0].case_id, "impl": cases[0].impl, "status": "compiled", "compile_s": 1.25,
                 "peak_memory_bytes": 2 ** 30, "hbm_capacity_bytes": 16 * 2 ** 30},
                {"case_id": cases[1].case_id, "impl": cases[1].impl, "status": "skipped", "error": "no such client"}]
        for c, row in zip(cases, rows):
            hooks.case_start(0, c)
            hooks.repeat(c)
            hooks.row(c, row)
        return run_session.RunOutcome(run_session.results.RunFiles(Path(opts.out_dir) / "x.compile.csv"), "", cases,
                                      rows, jobs=1, job_peak_bytes=[None])

    monkeypatch.setattr(compile_runner, "compile_suite", fake_compile)
    res = _cli("compile", str(files["suite"]), "--target", "v5e-8", "--out", str(files["dir"]))
    assert res.exit_code == 0, res.output
    assert f"suite {s.name} profile base compiled for v5e-8\n" in res.output
    assert f"compiled {cases[0].label()}  1.00 GiB of 16.00 per device, compile 1.2s, no MFU ceiling" in res.output
    assert not any(ln.startswith("skipped") for ln in res.output.splitlines())
    assert "1 skipped: no such client" in res.output and "1 compiled, 1 skipped in" in res.output


def test_a_case_line_names_only_the_parameters_that_tell_the_run_s_cases_apart(files, monkeypatch):
    """gpt2's 20 constant parameters made each progress line wrap over four lines at 80 columns."""
    s = run_session.suite_lib.load(files["suite"])
    cases = s.cases("")

    def fake_run(suite: Any, opts: RunOptions, hooks: Any) -> Any:
        hooks.start([f"suite {suite.name}"], len(cases), cases)
        rows = []
        for c in cases:
            rows.append({"status": "skipped", "error": "why", "backend": c.backend, "impl": c.impl, **c.params})
            hooks.row(c, rows[-1])
        return run_session.RunOutcome(run_session.results.RunFiles(Path(opts.out_dir) / "x.csv"), "", cases, rows)

    monkeypatch.setattr(run_session, "run_suite", fake_run)
    res = _cli("run", str(files["suite"]), "--out", str(files["dir"]))
    assert res.exit_code == 0, res.output
    lines = [ln for ln in res.output.splitlines() if ln.startswith("skipped")]
    assert len(lines) == 4 and "jax/xla_sdpa seq_len=128" in res.output
    assert not any("head_dim" in ln or "num_heads" in ln for ln in lines)
    res = _cli("run", str(files["suite"]), "--dry-run", "--profile", "base")
    assert "jax/naive seq_len=64" in res.output and "head_dim=" not in res.output


# ------------------------------------------------------------------- selecting cases


def test_list_filters_by_backend_impl_and_parameter(files):
    res = _cli("list", str(files["suite"]), "--profile", "base", "-k", "seq_len=64", "--impl", "naive", "--json")
    assert res.exit_code == 0, res.output
    got = json.loads(res.output)
    assert [(c["impl"], c["params"]["seq_len"]) for c in got["cases"]] == [("naive", 64)]
    res = _cli("list", str(files["suite"]), "--profile", "base", "-k", "seq_len=64", "-k", "seq_len=128",
               "-k", "impl=xla_sdpa", "--json")
    assert sorted(c["params"]["seq_len"] for c in json.loads(res.output)["cases"]) == [64, 128]
    res = _cli("list", str(files["suite"]), "--profile", "base", "--backend", "torch_xla")
    _one_line_exit_2(res, "--backend torch_xla: not in this suite")


def test_an_unknown_key_names_the_valid_keys(files):
    res = _cli("list", str(files["suite"]), "--profile", "base", "-k", "seqlen=64")
    _one_line_exit_2(res, "unknown key 'seqlen'")
    assert "seq_len" in res.output and "impl" in res.output


def test_a_value_no_case_has_says_which_there_are(files):
    res = _cli("run", str(files["suite"]), "--profile", "base", "-k", "seq_len=512")
    _one_line_exit_2(res, "-k seq_len=512: no case has it (seq_len: 64, 128)")


def test_dry_run_lists_what_would_run_and_what_would_skip_and_runs_nothing(files, tmp_path, monkeypatch):
    monkeypatch.setattr(run_session, "run_suite", lambda *a, **kw: pytest.fail("a dry run ran"))
    out = tmp_path / "out"
    suite = tmp_path / "two.yaml"
    suite.write_text(SUITE.replace("backends: [jax]", "backends: [jax, torch_xla]").replace(
        "impls: [naive, xla_sdpa]", "impls: [naive, flash]"))
    res = _cli("run", str(suite), "--profile", "base", "--out", str(out), "--dry-run",
               "--python-torch-xla", str(tmp_path / "no-python"), "-k", "seq_len=64")
    assert res.exit_code == 0, res.output
    assert "run  jax/naive" in res.output
    assert "skip torch_xla/naive" in res.output and "torch_xla environment missing" in res.output
    assert "nothing was run" in res.output and not out.exists()


def test_plot_and_report_without_arguments_pass_over_a_run_with_no_ok_row(files, tmp_path):
    rng = np.random.default_rng(1)
    failed = write_run(files["results"] / "tiny" / "20260102-000000-bbbb.csv",
                       [(case("naive", seq_len=64), draw(rng, 8))], run_id="bad", status={0: "failed"})
    res = _cli("report", "--results", str(files["results"]), "--no-charts", "--out", str(tmp_path / "r.md"))
    assert res.exit_code == 0, res.output
    assert f"took {files['run']}" in res.output and failed.name in res.output
    text = (tmp_path / "r.md").read_text()
    assert "good-run" in text and "bad" not in text.split("good-run")[0][-40:]


def test_dry_run_predicts_the_kernels_own_skips(tmp_path, monkeypatch):
    """flash on GQA, a block size a kernel cannot take: skipped in the plan as the run skips them (it said
    "would run 20" where the run skipped 4)."""
    monkeypatch.setattr(run_session, "run_suite", lambda *a, **kw: pytest.fail("a dry run ran"))
    suite = tmp_path / "gqa.yaml"
    suite.write_text(SUITE.replace("impls: [naive, xla_sdpa]", "impls: [naive, flash, splash]").replace(
        "num_heads: 2,", "num_heads: 4,").replace("seq_len: [64, 128]", "num_kv_heads: [4, 2]\n  block_k: [null, 64]"
                                                   ).replace("batch: 1}", "batch: 1, seq_len: 128}"))
    res = _cli("run", str(suite), "--profile", "base", "--dry-run")
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    flash = [ln for ln in lines if "jax/flash" in ln]
    assert len(flash) == 4 and all(ln.startswith("skip") for ln in flash if "num_kv_heads=2" in ln), flash
    assert [ln.startswith("run") for ln in flash if "num_kv_heads=4" in ln] == [True, False]  # block_k 64: % 128
    assert "needs num_kv_heads == num_heads" in res.output and "block_k to be a multiple of 128" in res.output
    assert all(ln.startswith("run") for ln in lines if "jax/splash" in ln or "jax/naive" in ln)
    # naive takes no block sizes: once per shape (2), not once per block_k (issue 50, item 11)
    assert "would run 7 case(s)" in res.output and "skip 3" in res.output


@pytest.mark.parametrize("backend", ["jax"])
def test_the_plan_and_the_worker_decide_a_skip_by_the_same_rule(backend):
    """The dry run's prediction is the registry's rule as the worker applies it, over a grid of cases."""
    from xlabench import impls as catalog
    from xlabench.backends import user_impl
    from xlabench.backends.jax import attention_impls as registry
    from xlabench.workloads.attention import AttentionParams
    from xlabench.impls.attention_rules import predict_skip

    for impl in catalog.names_for("attention", backend):
        for platform in ("cpu", "tpu", "gpu"):
            for kv, bk, dtype, skv in [(4, None, "float32", 128), (2, None, "bfloat16", 128), (4, 64, "float32", 256),
                                       (4, 96, "bfloat16", 128)]:
                params = dict(batch=1, num_heads=4, num_kv_heads=kv, seq_len=128, kv_seq_len=skv, head_dim=32,
                              dtype=dtype, block_k=bk)
                info = catalog.find(backend, impl, "attention")
                p = AttentionParams(**params)
                im = registry.get(impl)
                cfg, _ = user_impl.for_impl(im, p.attn_config(info.interpreted(platform)))
                assert predict_skip(backend, impl, params, platform) == user_impl.skip_reason(im, p, cfg, platform)


# ------------------------------------------------------------------ issue 50 item 9: a CSV saved by Excel

def _bom(src: Path, dst: Path) -> Path:
    dst.write_bytes(b"\xef\xbb\xbf" + src.read_bytes())
    return dst


def test_a_results_csv_with_a_utf8_bom_reads_like_one_without(tmp_path):
    """Excel saves 'CSV UTF-8' with a byte-order mark: the first column read as '\\ufeffschema_version', and
    every command said 'not an xlabench results CSV (no column(s) schema_version)'."""
    from xlabench import results
    from xlabench.report import inputs

    fix = ROOT / "tests" / "fixtures"
    folder = tmp_path / "results" / "attention"
    folder.mkdir(parents=True)
    run = _bom(fix / "attention_cpu.csv", folder / "20261201-000000-aaaa.csv")
    assert len(results.read_rows(run)) == 60
    assert inputs.newest_usable(tmp_path / "results").files == [run]
    res = _cli("report", str(run), "--no-charts", "--out", str(tmp_path / "r.md"))
    assert res.exit_code == 0, res.output
    base = _bom(fix / "gate_attention_cpu.csv", tmp_path / "base.csv")
    _bom(fix / "gate_attention_cpu.samples.csv", tmp_path / "base.samples.csv")
    res = _cli("compare", str(base), str(base))
    assert res.exit_code == 0 and "schema_version" not in res.output, res.output
    res = _cli("merge", str(base), "-o", str(tmp_path / "m.csv"))
    assert res.exit_code == 0, res.output


# ---------------------------------------------- issue 50 item 10: a resume whose samples file is gone

@pytest.mark.parametrize("dry", [False, True])
def test_resume_of_a_run_whose_samples_file_is_missing_is_refused_naming_it(tmp_path, dry):
    """It exited 0 and wrote a header-only samples file; `compare` then said '0 samples but its row says n=5'."""
    import shutil

    run = tmp_path / "r.csv"
    shutil.copy(ROOT / "tests" / "fixtures" / "gate_attention_cpu.csv", run)
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)
    res = _cli("run", str(suite), "--resume", str(run), *(["--dry-run"] if dry else []))
    assert res.exit_code == 2, res.output
    line = " ".join(res.output.split())
    assert f"--resume: {tmp_path / 'r.samples.csv'}: no such file" in line and "48 ok row(s)" in line, res.output
    assert "Traceback" not in res.output and not (tmp_path / "r.samples.csv").exists()


# ---------------------------------------------- issue 50: a dry run of a resume checks the file's suite

@pytest.mark.parametrize("dry", [False, True])
def test_resume_of_another_suites_run_is_refused_by_the_dry_run_as_by_the_run(tmp_path, dry):
    """`run --resume X.csv --dry-run` of another suite's CSV printed '48 already done'; the run refused it."""
    import shutil

    src = ROOT / "tests" / "fixtures" / "gate_attention_cpu.csv"  # suite 'attention' (48 ok rows)
    run = tmp_path / "r.csv"
    shutil.copy(src, run)
    shutil.copy(src.with_name("gate_attention_cpu.samples.csv"), tmp_path / "r.samples.csv")
    suite = tmp_path / "s.yaml"
    suite.write_text(SUITE)  # suite 'tiny'
    res = _cli("run", str(suite), "--resume", str(run), *(["--dry-run"] if dry else []))
    _one_line_exit_2(res, f"--resume: {run} holds suite 'attention', not 'tiny'")
    assert "already done" not in res.output and len(res.output.strip().splitlines()) == 1, res.output


# ---------------------------------------------- issue 61 item 4: the dry run counts the run's JAX auto skips

def test_dry_run_of_the_gpt2_suite_skips_the_jax_auto_cases_as_the_run_does(tmp_path, monkeypatch):
    """It said 'would run 18 case(s) ... skip 18'; the run then skipped the 6 JAX sharding=auto cases too
    (12 ok, 24 skipped)."""
    monkeypatch.setattr(run_session, "run_suite", lambda *a, **kw: pytest.fail("a dry run ran"))
    res = _cli("run", str(ROOT / "suites" / "gpt2.yaml"), "--profile", "cpu", "--dry-run",
               "--python-torch-xla", str(tmp_path / "no-python"))
    assert res.exit_code == 0, res.output
    jax_auto = [ln for ln in res.output.splitlines() if " jax/" in f" {ln}" and "sharding=auto" in ln]
    assert len(jax_auto) == 6 and all(ln.startswith("skip jax/") for ln in jax_auto), jax_auto
    assert "would run 12 case(s)" in res.output and "skip 24" in res.output, res.output


def test_the_worker_skips_a_jax_auto_case_for_the_reason_the_plan_gives():
    from xlabench.backends.jax import train_case
    from xlabench.impls import workload_rules
    from xlabench.protocol.worker_messages import CaseSkipped
    from xlabench.workloads.train import TrainParams

    params = dict(model="gpt2-tiny", seq_len=128, dtype="float32", global_batch=8, devices=8, sharding="auto")
    predicted = workload_rules.predict_skip("train", "jax", "naive", params, "cpu")
    with pytest.raises(CaseSkipped) as skipped:
        train_case.program(TrainParams(**params), "naive", interpret=True, platform="cpu")
    assert predicted and str(skipped.value) == predicted
    assert workload_rules.predict_skip("train", "torch_xla", "naive", params, "cpu") is None  # torch_xla runs auto
    assert workload_rules.predict_skip("train", "jax", "naive", {**params, "sharding": "fsdp"}, "cpu") is None
