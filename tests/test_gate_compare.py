"""compare(): pairing, statuses, environments, confirmation, file checks, and the `compare` command."""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import numpy as np
import pytest
from click.testing import CliRunner

from tests._gate_data import case, draw, write_run
from xlabench import gate, results
from xlabench.cli import main


@pytest.fixture
def rng():
    return np.random.default_rng(11)


def _cli(*args: str):
    return CliRunner().invoke(main, list(args))


def _by_label(cmp: gate.Comparison) -> dict[str, gate.CaseVerdict]:
    return {c.label.split(" ")[0]: c for c in cmp.cases}


def test_cases_pair_by_parameters_not_by_order_or_run(tmp_path, rng):
    a, b, c = case("naive"), case("xla_sdpa"), case("flash")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20)), (c, draw(rng, 20))], "r1")
    # candidate: other order, other run id; b 40% slower; c gone; d new
    d = case("splash")
    cand = write_run(tmp_path / "cand.csv", [(b, draw(rng, 20, 1.4)), (d, draw(rng, 20)), (a, draw(rng, 20))], "r2")
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    v = _by_label(cmp)
    assert v["jax/xla_sdpa"].verdict == gate.REGRESSION and v["jax/xla_sdpa"].ratio > 1.3
    assert v["jax/naive"].verdict == gate.UNCHANGED
    assert v["jax/splash"].verdict == gate.NEW
    assert v["jax/flash"].verdict == gate.MISSING
    assert not cmp.passed and cmp.exit_code == 1
    # Holm ran over the two tested cases only
    tested = [x for x in cmp.cases if x.p_value is not None]
    assert len(tested) == 2


def test_candidate_failure_wrong_result_and_skips(tmp_path, rng):
    a, b, c = case("naive"), case("xla_sdpa"), case("flash")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20)), (c, draw(rng, 20))])
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20)), (b, draw(rng, 20)), (c, None)],
                     status={0: "failed"})
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    v = _by_label(cmp)
    assert v["jax/naive"].verdict == gate.FAILED and "failed on purpose" in v["jax/naive"].reason
    assert v["jax/flash"].verdict == gate.SKIPPED and "baseline: ok" in v["jax/flash"].reason
    assert cmp.exit_code == 1
    wrong = write_run(tmp_path / "wrong.csv", [(b, draw(rng, 20))], correct=False, max_abs_err=0.3)
    cmp = gate.compare(gate.load_run(base), gate.load_run(wrong), gate.GateConfig())
    assert _by_label(cmp)["jax/xla_sdpa"].verdict == gate.FAILED
    assert "wrong result" in _by_label(cmp)["jax/xla_sdpa"].reason


def test_baseline_without_a_measurement_makes_the_case_new(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))], status={0: "failed"})
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20))])
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    assert cmp.cases[0].verdict == gate.NEW and "baseline status failed" in cmp.cases[0].reason
    assert cmp.exit_code == gate.EXIT_NOTHING and cmp.outcome == "nothing compared"  # the only case: nothing judged


def test_parameters_that_disagree_under_one_case_id_are_refused(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))])
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20))], head_dim=64)  # row edited, id unchanged
    with pytest.raises(gate.GateInputError, match="disagree on head_dim"):
        gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())


def test_different_environments_are_refused_unless_allowed(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))], env={"device_kind": "TPU v5 lite"})
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20))],
                     env={"device_kind": "TPU v6 lite", "framework_version": "jax 0.7.1"})
    b, c = gate.load_run(base), gate.load_run(cand)
    with pytest.raises(gate.EnvMismatchError, match="device_kind: baseline 'TPU v5 lite' vs candidate 'TPU v6 lite'"):
        gate.compare(b, c, gate.GateConfig())
    cmp = gate.compare(b, c, gate.GateConfig(allow_env_mismatch=True))
    assert cmp.cases[0].verdict == gate.UNCHANGED
    assert "framework_version" in cmp.warnings[0] and "--allow-env-mismatch" in cmp.warnings[0]


def test_a_wall_clock_baseline_and_a_device_clock_candidate_are_refused_naming_the_column(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))], clock="wall")
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20))], clock="device")
    with pytest.raises(gate.GateInputError, match="column 'clock'.*--timer wallclock"):
        gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    res = _cli("compare", str(base), str(cand))
    assert res.exit_code == 2 and "wall clock" in res.output and "Traceback" not in res.output


def test_a_schema_1_baseline_reads_as_wall_clock_and_compares_with_a_wall_clock_run(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))], schema_version=1)
    lines = base.read_text().splitlines(keepends=True)
    drop = lines[0].rstrip("\r\n").split(",").index("clock")  # version 1 had no clock column
    base.write_text("".join(",".join(f for i, f in enumerate(ln.rstrip("\r\n").split(",")) if i != drop) + "\n"
                            for ln in lines))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # pandas' PerformanceWarning reached the terminal (CI's log, 2026-12-06)
        assert list(gate.load_run(base).rows["clock"]) == ["wall"]
    wall = write_run(tmp_path / "wall.csv", [(a, draw(rng, 20))], clock="wall")
    assert gate.compare(gate.load_run(base), gate.load_run(wall), gate.GateConfig()).cases[0].verdict == gate.UNCHANGED
    dev = write_run(tmp_path / "dev.csv", [(a, draw(rng, 20))], clock="device")
    with pytest.raises(gate.GateInputError, match="schema-1 files are wall clock"):
        gate.compare(gate.load_run(base), gate.load_run(dev), gate.GateConfig())


def test_throughput_metric_reads_rows_and_flags_the_slower_candidate(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 21))])  # odd n: the median is one sample
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 21, 1.3))])
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig(metric="tflops_per_s"))
    v = cmp.cases[0]
    assert v.verdict == gate.REGRESSION and v.ratio < 0.8 and v.ci_high < 0.95
    # the per-iteration values really are TFLOP/s: the median equals the row's column
    assert v.baseline == pytest.approx(gate.load_run(base).rows["tflops_per_s"].iloc[0], rel=1e-9)


def test_missing_throughput_column_is_inconclusive(tmp_path, rng):
    """A case without the metric, where another case has it (a metric no case has: the test below)."""
    a, b = case("naive"), case("flash")
    runs = [gate.load_run(write_run(tmp_path / f"{side}.csv", [(a, draw(rng, 20)), (b, draw(rng, 20))], side))
            for side in ("base", "cand")]
    for run in runs:  # flash has an MFU on both sides, naive on neither
        run.rows["mfu"] = run.rows["impl"].map({"flash": 0.5}).astype(float)
    cmp = gate.compare(*runs, gate.GateConfig(metric="mfu"))
    v = _by_label(cmp)
    assert v["jax/naive"].verdict == gate.INCONCLUSIVE and "mfu is empty" in v["jax/naive"].reason
    assert "mfu is empty" not in v["jax/flash"].reason


def test_different_repeats_on_the_two_sides_give_a_warning(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))])
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 60))], repeats=3)
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    assert cmp.warnings == ["the baseline pooled 1 run(s) per case, the candidate 3: the baseline's run-to-run "
                            "drift dominates; record it with at least as many --repeats (docs/gate.md: shared hosts)"]
    more = gate.compare(gate.load_run(cand), gate.load_run(base), gate.GateConfig())  # baseline 3, candidate 1
    assert more.warnings == []


def _regressing_pair(tmp_path, rng):
    a, b = case("naive"), case("xla_sdpa")
    base = gate.load_run(write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20))], "b"))
    cand = gate.load_run(write_run(tmp_path / "cand.csv", [(a, draw(rng, 20, 1.5)), (b, draw(rng, 20))], "c"))
    return a, base, cand


def test_confirmation_keeps_only_reproduced_regressions(tmp_path, rng):
    a, base, cand = _regressing_pair(tmp_path, rng)
    first = gate.compare(base, cand, gate.GateConfig())
    assert [c.verdict for c in first.cases] == [gate.REGRESSION, gate.UNCHANGED]
    asked: list[list[str]] = []

    def rerun_fast(ids):  # the slowdown was noise: the re-run is back to normal
        asked.append(ids)
        return gate.load_run(write_run(tmp_path / "again.csv", [(a, draw(rng, 20))], "again"))

    cmp = gate.confirm(first, base, rerun_fast, gate.GateConfig())
    assert asked == [[first.cases[0].case_id]]  # only the flagged case is re-run
    assert cmp.cases[0].verdict == gate.UNCONFIRMED and cmp.cases[0].confirmation.verdict == gate.UNCHANGED
    assert cmp.passed and cmp.confirm_run.endswith("again.csv")

    def rerun_slow(ids):
        return gate.load_run(write_run(tmp_path / "again2.csv", [(a, draw(rng, 20, 1.5))], "again2"))

    cmp = gate.confirm(first, base, rerun_slow, gate.GateConfig())
    assert cmp.cases[0].verdict == gate.REGRESSION and cmp.cases[0].confirmation.verdict == gate.REGRESSION
    assert cmp.exit_code == 1

    def rerun_crash(ids):
        return gate.load_run(write_run(tmp_path / "again3.csv", [(a, draw(rng, 20))], "again3", status={0: "failed"}))

    assert gate.confirm(first, base, rerun_crash, gate.GateConfig()).cases[0].verdict == gate.FAILED


def test_nothing_flagged_means_no_rerun(tmp_path, rng):
    a = case("naive")
    base = gate.load_run(write_run(tmp_path / "base.csv", [(a, draw(rng, 20))]))
    first = gate.compare(base, base, gate.GateConfig())

    def boom(ids):
        raise AssertionError("must not re-run")

    assert gate.confirm(first, base, boom, gate.GateConfig()) is first


# ------------------------------------------------------------------------------------ bad input files


@pytest.fixture
def good(tmp_path, rng) -> Path:
    return write_run(tmp_path / "good.csv", [(case("naive"), draw(rng, 20)), (case("xla_sdpa"), draw(rng, 20))])


def _rewrite(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def bad_files(tmp_path: Path, good: Path) -> dict[str, tuple[Path, str]]:
    text = good.read_text()
    lines = text.splitlines(keepends=True)
    header = lines[0].rstrip("\r\n").split(",")
    foreign = _rewrite(tmp_path / "foreign.csv", "date,open,close\n2024-01-01,1,2\n")
    empty = _rewrite(tmp_path / "empty.csv", "")
    header_only = _rewrite(tmp_path / "header.csv", lines[0])
    truncated = _rewrite(tmp_path / "truncated.csv", "".join(lines[:2]) + lines[2][: len(lines[2]) // 3])
    short_row = _rewrite(tmp_path / "shortrow.csv", "".join(lines[:2]) + lines[2][: len(lines[2]) // 3] + "\n")
    v3 = _rewrite(tmp_path / "v3.csv", "".join([lines[0]] + [ln.replace(f"{results.SCHEMA_VERSION},", "99,", 1)
                                                              for ln in lines[1:]]))
    drop = header.index("device_kind")
    old = _rewrite(tmp_path / "old.csv", "".join(
        ",".join(f for i, f in enumerate(ln.rstrip("\r\n").split(",")) if i != drop) + "\n" for ln in lines))
    nos = tmp_path / "nosamples.csv"
    nos.write_text(text)
    cut_s = tmp_path / "cutsamples.csv"
    cut_s.write_text(text)
    s_text = results.RunFiles(good).samples.read_text()
    results.RunFiles(cut_s).samples.write_text(s_text[: len(s_text) - 12])
    short_s = tmp_path / "shortsamples.csv"
    short_s.write_text(text)
    s_lines = s_text.splitlines(keepends=True)
    results.RunFiles(short_s).samples.write_text("".join(s_lines[:-3]))  # cut at a line end
    return {
        "missing": (tmp_path / "nope.csv", "no such file"),
        "empty": (empty, "empty file"),
        "header only": (header_only, "no result rows"),
        "truncated": (truncated, "truncated"),
        "short row": (short_row, "shortrow.csv:3: results CSV is truncated"),
        "foreign": (foreign, "not an xlabench results CSV"),
        "schema version": (v3, "schema version [99]"),
        "schema columns": (old, "schema mismatch: no column(s) device_kind"),
        "no samples": (nos, "nosamples.samples.csv: no such file"),
        "truncated samples": (cut_s, "truncated"),
        "samples cut at a line end": (short_s, "has 17 samples but its row says n=20"),
    }


def test_bad_files_are_refused_with_the_reason(tmp_path, good):
    for name, (path, msg) in bad_files(tmp_path, good).items():
        with pytest.raises(results.ResultsFileError) as e:
            gate.load_run(path)
        assert msg in str(e.value), name
        assert path.stem in str(e.value), name


def test_a_file_from_before_a_column_was_added_still_compares(tmp_path, good):
    lines = good.read_text().splitlines(keepends=True)
    drop = lines[0].rstrip("\r\n").split(",").index("max_context")
    older = _rewrite(tmp_path / "older.csv", "".join(
        ",".join(f for i, f in enumerate(ln.rstrip("\r\n").split(",")) if i != drop) + "\n" for ln in lines))
    results.RunFiles(older).samples.write_text(results.RunFiles(good).samples.read_text())
    cmp = gate.compare(gate.load_run(older), gate.load_run(good), gate.GateConfig())
    assert [c.verdict for c in cmp.cases] == [gate.UNCHANGED, gate.UNCHANGED]


def test_compare_command_exits_2_on_each_bad_file(tmp_path, good):
    for name, (path, msg) in bad_files(tmp_path, good).items():
        for args, role in (([str(path), str(good)], "baseline"), ([str(good), str(path)], "candidate")):
            r = _cli("compare", *args)
            assert r.exit_code == 2, (name, r.output)
            assert f"error: {role}:" in r.output and msg in r.output, (name, r.output)
            assert "Traceback" not in r.output


# ------------------------------------------------------------------------------------------ command


def test_compare_command_passes_identical_runs_and_writes_reports(tmp_path, good):
    md, js = tmp_path / "out" / "s.md", tmp_path / "v.json"
    r = _cli("compare", str(good), str(good), "--markdown", str(md), "--json", str(js))
    assert r.exit_code == 0, r.output
    assert "PASSED: 2 unchanged" in r.output
    data = json.loads(js.read_text())
    assert data["passed"] is True and data["counts"]["unchanged"] == 2
    assert {c["ratio"] for c in data["cases"]} == {1.0}
    text = md.read_text()
    assert text.startswith("## ✅ xlabench compare: PASSED") and "| unchanged | `jax/naive" in text


def test_compare_command_fails_on_regression_and_reports_it(tmp_path, rng):
    a, b = case("naive"), case("xla_sdpa")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20))])
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20, 1.25)), (b, draw(rng, 20))])
    md, js = tmp_path / "s.md", tmp_path / "v.json"
    r = _cli("compare", str(base), str(cand), "--threshold", "5%", "--markdown", str(md), "--json", str(js))
    assert r.exit_code == 1, r.output
    assert "FAILED: 1 regression, 1 unchanged" in r.output
    case_ = next(c for c in json.loads(js.read_text())["cases"] if c["verdict"] == "regression")
    assert case_["label"].startswith("jax/naive") and case_["ci_low"] > 1.05
    assert "❌ regression" in md.read_text()
    # the same change under a 40% threshold is not a regression
    r = _cli("compare", str(base), str(cand), "--threshold", "0.4")
    assert r.exit_code == 0, r.output


def test_compare_command_env_mismatch_exit_2_then_warning(tmp_path, rng):
    a = case("naive")
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20))])
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20))], env={"device_kind": "TPU v5 lite"})
    r = _cli("compare", str(base), str(cand))
    assert r.exit_code == 2 and "different environments" in r.output and "--allow-env-mismatch" in r.output
    md = tmp_path / "s.md"
    r = _cli("compare", str(base), str(cand), "--allow-env-mismatch", "--markdown", str(md))
    assert r.exit_code == 0 and "warning:" in r.output
    assert "> ⚠️ baseline and candidate ran in different environments" in md.read_text()


@pytest.mark.parametrize("args, msg", [
    (["--threshold", "5"], "must be between 0 and 100%"),
    (["--threshold", "five"], "is not a fraction"),
    (["--metric", "speed"], "Invalid value for '--metric'"),
    (["--min-samples", "1"], "min_samples must be >= 2"),
])
def test_compare_command_bad_options_exit_2(good, args, msg):
    r = _cli("compare", str(good), str(good), *args)
    assert r.exit_code == 2 and msg in r.output, r.output


# ------------------------------------------------- judging only what was seen (issue 20, item 1)


def _cases(n: int) -> list[dict]:
    return [case(impl, s, head_dim=h) for impl in ("naive", "xla_sdpa") for s in (64, 128, 256, 512)
            for h in (16, 32, 64, 128, 256, 512)][:n]


def test_runs_of_two_suites_are_refused_by_compare(tmp_path, rng):
    """Before: `compare attention.csv gpt2.csv` said 'PASSED: 12 new, 96 missing', exit 0."""
    base = write_run(tmp_path / "a.csv", [(c, draw(rng, 8)) for c in _cases(6)], suite="attention")
    other = write_run(tmp_path / "g.csv", [(case("naive", 64, head_dim=96), draw(rng, 8))], suite="gpt2")
    with pytest.raises(gate.GateInputError, match="holds suite.s. attention, candidate .* holds gpt2"):
        gate.compare(gate.load_run(base), gate.load_run(other), gate.GateConfig())
    r = _cli("compare", str(base), str(other))
    assert r.exit_code == 2 and "error:" in r.output and "compare two runs of one suite" in r.output, r.output
    assert "PASSED" not in r.output and "Traceback" not in r.output


def test_a_comparison_in_which_nothing_was_tested_is_exit_2_with_the_counts(tmp_path, rng):
    base = write_run(tmp_path / "a.csv", [(c, draw(rng, 8)) for c in _cases(3)])
    cand = write_run(tmp_path / "b.csv", [(case("flash", 64), draw(rng, 8)), (case("splash", 64), None)])
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig(allow_missing=True))
    assert cmp.tested == 0 and cmp.exit_code == gate.EXIT_NOTHING and not cmp.passed
    r = _cli("compare", str(base), str(cand))
    assert r.exit_code == 2, r.output
    assert "NOTHING COMPARED: 3 missing, 1 new, 1 skipped" in r.output and "nothing was compared" in r.output


def test_cases_missing_from_the_candidate_fail_and_are_listed_unless_allowed(tmp_path, rng):
    """Before: a 96-case baseline against a candidate holding 6 of them: 'PASSED', exit 0."""
    cases = _cases(48)
    base = write_run(tmp_path / "a.csv", [(c, draw(rng, 8)) for c in cases])
    cand = write_run(tmp_path / "b.csv", [(c, draw(rng, 8)) for c in cases[:6]])
    cmp = gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig())
    assert cmp.count(gate.MISSING) == 42 and cmp.count(gate.UNCHANGED) == 6
    assert cmp.exit_code == gate.EXIT_FAIL and cmp.failed
    r = _cli("compare", str(base), str(cand))
    assert r.exit_code == 1, r.output
    assert "FAILED: 42 missing, 6 unchanged" in r.output
    assert "missing from the candidate: 42 of the baseline's 48 case(s)" in r.output and "34 more" in r.output
    r = _cli("compare", str(base), str(cand), "--allow-missing")
    assert r.exit_code == 0 and "PASSED: 42 missing, 6 unchanged" in r.output, r.output
    assert "allowed by --allow-missing" in r.output


def test_a_regression_the_hosts_own_slowdown_explains_is_confounded(tmp_path, rng):
    """A/A on a loaded host: every case and the calibration kernel beside it 1.3x slower."""
    cases = _cases(8)
    base = gate.load_run(write_run(tmp_path / "a.csv", [(c, draw(rng, 20)) for c in cases], host_calib_s=0.010))
    loaded = gate.load_run(write_run(tmp_path / "b.csv", [(c, draw(rng, 20, 1.3)) for c in cases],
                                     host_calib_s=0.013))
    cmp = gate.compare(base, loaded, gate.GateConfig())
    assert {c.verdict for c in cmp.cases} == {gate.CONFOUNDED}
    assert "calibration kernel ran 1.30x as long" in cmp.cases[0].reason
    assert cmp.suite.verdict == gate.CONFOUNDED and cmp.suite.calib_ratio == pytest.approx(1.3)
    from xlabench.gate.report import suite_line  # the figure is said once: the suite line's, not a warning too
    assert cmp.exit_code == gate.EXIT_UNJUDGED and "host calibration 1.30 (candidate / baseline, beyond" in suite_line(cmp)
    assert gate.compare(base, loaded, gate.GateConfig(allow_inconclusive=True)).exit_code == gate.EXIT_PASS
    # the same slowdown on a host whose speed did not change is a regression
    same = gate.load_run(write_run(tmp_path / "c.csv", [(c, draw(rng, 20, 1.3)) for c in cases], host_calib_s=0.010))
    assert {c.verdict for c in gate.compare(base, same, gate.GateConfig()).cases} == {gate.REGRESSION}
    # and a slowdown well beyond the host's is still one: 1.8x where the host is 1.3x
    worse = gate.load_run(write_run(tmp_path / "d.csv", [(c, draw(rng, 20, 1.8)) for c in cases], host_calib_s=0.013))
    cmp = gate.compare(base, worse, gate.GateConfig())
    assert {c.verdict for c in cmp.cases} == {gate.REGRESSION} and cmp.exit_code == gate.EXIT_FAIL


def test_a_rerun_the_hosts_slowdown_explains_stays_could_not_judge(tmp_path, rng):
    """gate's re-run under a host that slowed down as much: confounded (exit 3), neither confirmed nor passed."""
    a, b = case("naive"), case("xla_sdpa")
    base = gate.load_run(write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20))], "b",
                                   host_calib_s=0.01))
    cand = gate.load_run(write_run(tmp_path / "cand.csv", [(a, draw(rng, 20, 1.5)), (b, draw(rng, 20))], "c",
                                   host_calib_s=0.01))
    first = gate.compare(base, cand, gate.GateConfig())
    assert first.cases[0].verdict == gate.REGRESSION

    def rerun_loaded(ids):
        return gate.load_run(write_run(tmp_path / "again.csv", [(a, draw(rng, 20, 1.5))], "again", host_calib_s=0.016))

    cmp = gate.confirm(first, base, rerun_loaded, gate.GateConfig())
    assert cmp.cases[0].verdict == gate.CONFOUNDED and cmp.cases[0].confirmation.verdict == gate.CONFOUNDED
    assert cmp.exit_code == gate.EXIT_UNJUDGED


def test_an_improvement_passes_the_same_multiplicity_correction_as_a_regression():
    """#36 item 14: one case at raw p 0.035 is a change alone, and no change among ten cases (Holm), either way."""
    from xlabench.gate.assessment import assess
    b = np.linspace(1.0, 1.2, 12)
    c = b * 0.7
    c[-3:] = b[-3:] * 1.02  # overlaps enough that the raw p is 0.035
    same = [(b, b.copy()) for _ in range(9)]
    cfg = gate.GateConfig()
    for pair, alone in (((b, c), gate.IMPROVEMENT), ((c, b), gate.REGRESSION)):
        assert assess([pair], cfg)[0].verdict == alone
        among = assess([pair] + same, cfg)[0]
        # neither a change nor "unchanged": its whole interval lies beyond the threshold (issue 50, item 15)
        assert among.p_value < cfg.alpha < among.p_holm and among.verdict == gate.INCONCLUSIVE, among


def test_an_aa_improvement_the_hosts_own_speedup_explains_is_confounded_not_listed(tmp_path, rng):
    """#36 item 14: an A/A compare whose baseline ran on a loaded host (its calibration kernel 1.7x as long)
    listed 'significant improvement' (0.586x); the host's speed-up explains it, as a slowdown explains a
    regression. It is confounded, listed as such, and does not fail the comparison."""
    cases = _cases(8)
    loaded = gate.load_run(write_run(tmp_path / "a.csv", [(c, draw(rng, 20, 1.7)) for c in cases],
                                     host_calib_s=0.017))
    idle = gate.load_run(write_run(tmp_path / "b.csv", [(c, draw(rng, 20)) for c in cases], host_calib_s=0.010))
    cmp = gate.compare(loaded, idle, gate.GateConfig())
    assert {c.verdict for c in cmp.cases} == {gate.CONFOUNDED}, [c.reason for c in cmp.cases]
    assert "sped up" in cmp.cases[0].reason and "0.59x as long" in cmp.cases[0].reason
    assert cmp.suite.verdict == gate.CONFOUNDED and "sped up" in cmp.suite.reason
    assert cmp.count(gate.IMPROVEMENT) == 0 and cmp.exit_code == gate.EXIT_PASS
    # a speed-up well beyond the host's is still an improvement: 0.3x where the host is 0.59x
    fast = gate.load_run(write_run(tmp_path / "c.csv", [(c, draw(rng, 20, 0.5)) for c in cases], host_calib_s=0.010))
    assert {c.verdict for c in gate.compare(loaded, fast, gate.GateConfig()).cases} == {gate.IMPROVEMENT}


def test_two_quick_start_runs_with_too_few_samples_say_so_with_one_case_count(tmp_path, rng):
    """#40 item 6: 12 cases ok on both sides, 3 samples each against min_samples 5: compare said 'no case
    has an ok measurement on both sides', 'Holm over 0 tested case(s)' and 'need >= 4 per side over 1'."""
    cases = _cases(12)
    base = write_run(tmp_path / "a.csv", [(c, draw(rng, 3)) for c in cases])
    cand = write_run(tmp_path / "b.csv", [(c, draw(rng, 3)) for c in cases])
    r = _cli("compare", str(base), str(cand))
    assert r.exit_code == 2, r.output
    out = " ".join(r.output.split())
    assert "no case has an ok measurement" not in out and "over 0 tested" not in out, out
    assert "over 1 tested" not in out, out
    # Holm over 12 cases needs 6 per side (min_samples_per_side(0.05, 12)); min_samples is 5
    assert ("12 case(s) are ok on both sides but have too few samples: 3 baseline, 3 candidate per case; "
            "the test needs >= 6 per side") in out, out
    assert "measure.iters" in out and "--repeats" in out, out
    assert "Holm over 12 case(s), none tested" in out, out
    assert "need >= 6 per side over 12 case(s) (have 3/3)" in out, out


def test_a_suspect_baseline_row_is_refused_naming_the_rule(tmp_path, rng):
    """A baseline whose row breaks an invariant (its `suspect` column) is no baseline: the case is not
    judged, and compare (and gate, which compares through it) says which rule the row broke."""
    a, b = case("naive"), case("flash")
    why = "tune_best: median 38.44 ms (device clock) is 10.43x its search's best tune_best_s 3.686 ms"
    base = write_run(tmp_path / "base.csv", [(a, draw(rng, 20)), (b, draw(rng, 20))], "r1")
    df = results.read_rows(base)
    suspect = tmp_path / "suspect.csv"
    write_run(suspect, [(a, draw(rng, 20)), (b, draw(rng, 20))], "r1", suspect=None)
    rows = results.read_rows(suspect)
    rows["suspect"] = rows["impl"].map({"flash": why})
    rows.to_csv(suspect, index=False)
    cand = write_run(tmp_path / "cand.csv", [(a, draw(rng, 20)), (b, draw(rng, 20, 1.5))], "r2")
    assert _by_label(gate.compare(gate.load_run(base), gate.load_run(cand), gate.GateConfig()))[
        "jax/flash"].verdict == gate.REGRESSION  # the same data with a clean baseline: judged
    cmp = gate.compare(gate.load_run(suspect), gate.load_run(cand), gate.GateConfig())
    flash = _by_label(cmp)["jax/flash"]
    assert flash.verdict == gate.INCONCLUSIVE
    assert flash.reason == f"refused as a baseline: the baseline row is suspect ({why})"
    assert _by_label(cmp)["jax/naive"].verdict == gate.UNCHANGED and len(df) == 2
    out = _cli("compare", str(suspect), str(cand))
    assert "refused as a baseline: the baseline row is suspect (tune_best:" in " ".join(out.output.split())


def test_compare_calls_an_interval_beyond_the_threshold_without_significance_inconclusive(tmp_path):
    """Issue 50, item 15: a case 1.27x slower with its whole interval above the 5% threshold, not significant
    after Holm over 20 cases, read 'unchanged'. It is 'inconclusive' (exit 0: nothing fails), listed under
    'could not judge' for what it is, not as too few samples (it has 8 a side, 6 needed)."""
    from tests.test_gate_stats import _BASE, _SLOW

    rng = np.random.default_rng(3)
    cases = _cases(20)
    quiet = [(draw(rng, 8), draw(rng, 8)) for _ in range(19)]
    base = write_run(tmp_path / "a.csv", [(c, q[0]) for c, q in zip(cases, quiet)] + [(cases[-1], _BASE * 1e-3)])
    cand = write_run(tmp_path / "b.csv", [(c, q[1]) for c, q in zip(cases, quiet)] + [(cases[-1], _SLOW * 1e-3)])
    js = tmp_path / "v.json"
    r = _cli("compare", str(base), str(cand), "--json", str(js))
    assert r.exit_code == 0, r.output
    slow = next(c for c in json.loads(js.read_text())["cases"] if c["ratio"] and c["ratio"] > 1.2)
    assert slow["ci_low"] > 1.05 and slow["p_holm"] > 0.05, slow
    assert slow["verdict"] == "inconclusive", slow
    out = " ".join(r.output.split())
    assert "could not judge 1 case(s): not significant after Holm" in out and "too few samples" not in out, out


@pytest.mark.parametrize("metric", ["tokens_per_s", "mbu"])
def test_a_metric_no_row_has_is_one_line_not_a_table_of_inconclusive_cases(tmp_path, rng, metric):
    """Issue 61 item 8: `compare --metric mbu` of two attention runs printed 24 "inconclusive" rows ("mbu is
    empty in the baseline row") before NOTHING COMPARED; attention rows have no such column."""
    entries = [(case(impl), draw(rng, 20)) for impl in ("naive", "flash", "splash")]
    base, cand = write_run(tmp_path / "b.csv", entries, "r1"), write_run(tmp_path / "c.csv", entries, "r2")
    res = _cli("compare", str(base), str(cand), "--metric", metric)
    assert res.exit_code == 2 and len(res.output.strip().splitlines()) == 1, res.output
    assert f"--metric {metric}: none of the 3 case(s)" in res.output and "median_s" in res.output
    assert _cli("compare", str(base), str(cand), "--metric", "tflops_per_s").exit_code == 0  # a metric they have


def test_the_hosts_calibration_is_said_once_and_names_its_runs(tmp_path, rng):
    """Issue 61 item 12: the host's calibration figure was said twice (a warning, then the suite line again),
    and gate's re-run's figure stood beside the first run's "host calibration 1.00" without saying which run
    each is from. Each is said once, naming the runs it compares."""
    from xlabench.gate import report

    cases = _cases(8)
    base = gate.load_run(write_run(tmp_path / "a.csv", [(c, draw(rng, 20)) for c in cases], host_calib_s=0.010,
                                   peak_tflops=1.0))
    loaded = gate.load_run(write_run(tmp_path / "b.csv", [(c, draw(rng, 20, 1.3)) for c in cases],
                                     host_calib_s=0.013, peak_tflops=1.0))
    cmp = gate.compare(base, loaded, gate.GateConfig(metric="mfu"))
    said = "\n".join(cmp.warnings + report.summary_lines(cmp))
    assert said.count("1.30") == 1, said
    same = gate.load_run(write_run(tmp_path / "c.csv", [(c, draw(rng, 20)) for c in cases], host_calib_s=0.010))
    cmp = gate.compare(base, same, gate.GateConfig())
    assert "host calibration 1.00 (candidate / baseline)" in report.suite_line(cmp), report.suite_line(cmp)

    first = gate.compare(base, gate.load_run(write_run(tmp_path / "d.csv", [(cases[0], draw(rng, 20, 1.5))]
                                                       + [(c, draw(rng, 20)) for c in cases[1:]],
                                                       host_calib_s=0.010)), gate.GateConfig())
    assert first.cases[0].verdict == gate.REGRESSION

    def rerun_loaded(ids):
        return gate.load_run(write_run(tmp_path / "again.csv", [(cases[0], draw(rng, 20, 1.5))], "again",
                                       host_calib_s=0.0125))

    cmp = gate.confirm(first, base, rerun_loaded, gate.GateConfig())
    calib = [w for w in cmp.warnings if "calibration kernel" in w]
    assert len(calib) == 1 and calib[0].startswith(f"the re-run {tmp_path / 'again.csv'}: "), calib
    assert "host calibration 1.00 (candidate / baseline)" in report.suite_line(cmp), report.suite_line(cmp)
