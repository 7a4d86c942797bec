"""Best block sizes per shape (report.best, `xlabench best`) and a suite's `tuned:` file applying them."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner

from _gate_data import case, draw, write_run
from conftest import run_cli
from xlabench import results, suite, tune
from xlabench.cli import main
from xlabench.report import best_config as best, chartdata as cd
from xlabench.report import markdown
from xlabench.suite import tuned


def _sweep(tmp_path: Path, wrong_fastest: bool = False) -> Path:
    """flash at S=128 and S=256, block sizes default / 64 / 128; 64 is fastest at 256, default at 128."""
    rng = np.random.default_rng(0)
    entries, speed = [], {(128, None): 1.0, (128, 64): 1.3, (128, 128): 1.1,
                          (256, None): 2.0, (256, 64): 1.5, (256, 128): 1.8}
    for (s, b), scale in speed.items():
        entries.append((case("flash", seq_len=s, block_q=b, block_k=b), draw(rng, 5, scale)))
    entries.append((case("naive", seq_len=256), draw(rng, 5, 3.0)))  # no sweep: not a choice
    path = write_run(tmp_path / "sweep.csv", entries)
    if wrong_fastest:  # a faster row at S=256 that gave a wrong result must never win
        rows = pd.read_csv(path, dtype=str, keep_default_na=False)
        extra = write_run(tmp_path / "wrong.csv", [(case("flash", seq_len=256, block_q=32, block_k=32),
                                                    draw(rng, 5, 0.5))], run_id="wrong")
        w = pd.read_csv(extra, dtype=str, keep_default_na=False)
        w["correct"], w["run_id"] = "false", "run"
        pd.concat([rows, w]).to_csv(path, index=False)
        samples = pd.concat([pd.read_csv(results.RunFiles(path).samples, dtype=str),
                             pd.read_csv(results.RunFiles(extra).samples, dtype=str).assign(run_id="run")])
        samples.to_csv(results.RunFiles(path).samples, index=False)
    return path


def _picks(paths: list[Path]) -> list[best.Pick]:
    return best.best_configs(cd.load(paths), cd.load_samples(paths))


def test_best_picks_the_fastest_correct_config_per_shape_with_its_speedup(tmp_path):
    picks = _picks([_sweep(tmp_path, wrong_fastest=True)])
    assert sorted(p.verdict for p in picks) == [best.DEFAULT_FASTEST, best.WINNER]
    configs = [p.config for p in picks if p.config is not None]
    by_seq = {c.shape["seq_len"]: c for c in configs}
    assert sorted(by_seq) == [128, 256] and all(c.impl == "flash" for c in configs)  # naive swept nothing
    assert by_seq[256].params == {"block_q": 64, "block_k": 64}  # not the wrong 32 x 32 row, though faster
    assert by_seq[256].speedup_vs_default == pytest.approx(2.0 / 1.5, rel=0.1)
    assert by_seq[128].params == {"block_q": None, "block_k": None}  # the default is best here
    assert by_seq[128].speedup_vs_default == pytest.approx(1.0)
    assert by_seq[256].shape["batch"] == 2 and "block_q" not in by_seq[256].shape


def test_best_command_writes_a_tuned_file_that_a_suite_applies(tmp_path):
    out = tmp_path / "tuned.yaml"
    res = CliRunner().invoke(main, ["best", str(_sweep(tmp_path)), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "best configuration per shape" in res.output and re.search(r"\b1\.\d\dx", res.output)
    loaded = tuned.load(out, "attention")
    assert {c.shape["seq_len"]: c.params["block_q"] for c in loaded} == {128: None, 256: 64}
    spec = tmp_path / "s.yaml"
    spec.write_text(textwrap.dedent("""\
        name: tiny
        workload: attention
        impls: [naive, flash]
        tuned: tuned.yaml
        params: {batch: 2, num_heads: 2, num_kv_heads: 2, head_dim: 32, causal: false, dtype: float32, mode: fwd}
        matrix:
          seq_len: [256, 512]
        """))
    cases = {(c.impl, c.params["seq_len"]): c for c in suite.load(spec).cases("")}
    assert (cases[("flash", 256)].params["block_q"], cases[("flash", 256)].params["block_k"]) == (64, 64)
    assert cases[("naive", 256)].params["block_q"] is None  # another impl: untouched
    assert cases[("flash", 512)].params["block_q"] is None  # another shape: untouched
    # the tuned case is another case than the untuned one: its block sizes are in its id
    spec.write_text(spec.read_text().replace("tuned: tuned.yaml\n", ""))
    untuned = {(c.impl, c.params["seq_len"]): c for c in suite.load(spec).cases("")}
    assert untuned[("flash", 256)].case_id != cases[("flash", 256)].case_id
    assert untuned[("naive", 256)].case_id == cases[("naive", 256)].case_id


def test_report_has_a_best_configuration_section(tmp_path):
    df = cd.load([_sweep(tmp_path)])
    md = markdown.build(df, [tmp_path / "sweep.csv"], {}, tmp_path / "report.md")
    assert "## Best configuration per shape" in md and "| flash |" in md and "| winner |" in md


@pytest.mark.slow  # starts a process
def test_bad_tuned_files_and_no_sweep_are_exit_2(tmp_path):
    spec = tmp_path / "s.yaml"
    spec.write_text("name: t\nworkload: attention\nimpls: [flash]\ntuned: missing.yaml\n")
    res = run_cli("validate", str(spec))
    assert res.returncode == 2 and "tuned" in res.stderr and "missing.yaml: no such file" in res.stderr
    (tmp_path / "bad.yaml").write_text("workload: train\ntuned: []\nconfigs: []\n")
    spec.write_text("name: t\nworkload: attention\nimpls: [flash]\ntuned: bad.yaml\n")
    res = run_cli("validate", str(spec))
    assert res.returncode == 2 and "tuned for workload 'train'" in res.stderr and "Traceback" not in res.stderr
    (tmp_path / "bad.yaml").write_text("workload: attention\nconfigs:\n  - {backend: jax, impl: flash, "
                                       "shape: {seq_len: 128}, params: {num_heads: 4}}\n")
    res = run_cli("validate", str(spec))
    assert res.returncode == 2 and "only ['block_k', 'block_q'] are tuned" in res.stderr
    flat = write_run(tmp_path / "flat.csv", [(case("naive"), draw(np.random.default_rng(1), 5))])
    res = CliRunner().invoke(main, ["best", str(flat)])
    assert res.exit_code == 2 and "no sweep of a tuned parameter" in res.output


@pytest.mark.slow  # starts a process
def test_best_on_a_real_block_size_sweep(tmp_path):
    """A real CPU run (flash interpreted) sweeping block_q/block_k, then `best` and a tuned suite."""
    spec = tmp_path / "sweep.yaml"
    spec.write_text(textwrap.dedent("""\
        name: sweep
        workload: attention
        impls: [flash]
        params: {batch: 1, num_heads: 2, num_kv_heads: 2, seq_len: 128, head_dim: 64, causal: false,
                 dtype: float32, mode: fwd}
        matrix:
          "block_q,block_k": [[null, null], [64, 128], [128, 128], [64, 64]]
        measure: {warmup: 1, iters: 3, timeout_s: 300}
        """))
    res = run_cli("run", str(spec), "--profile", "base", "--out", str(tmp_path / "r"))
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    csv = next(p for p in (tmp_path / "r" / "sweep").glob("*.csv") if not p.name.endswith(".samples.csv"))
    rows = results.read_rows(csv)
    assert (rows["status"] == "ok").sum() == 3  # block_k 64: a skipped row naming the kernel's constraint
    skipped = rows[rows["status"] == "skipped"]
    assert len(skipped) == 1 and "block_k to be a multiple of 128 (got 64)" in skipped["error"].iloc[0]
    # flash ran in the CPU interpreter: flagged, and never tuned from
    res = run_cli("best", str(csv))
    assert res.returncode == 0, res.stderr
    assert "interpreted: not tuned" in res.stdout and "CPU interpreter" in res.stdout
    out = tmp_path / "tuned.yaml"
    res = run_cli("best", str(csv), "-o", str(out))
    assert res.returncode == 2 and "nothing to tune from: interpreted" in res.stderr and not out.exists()


# ------------------------------------------------------------- honest winners (issue 20, item 8)


def _two_configs(tmp_path: Path, default_s: list[float], tuned_s: list[float], name: str = "two.csv",
                 **overrides) -> Path:
    return write_run(tmp_path / name, [(case("flash", seq_len=256), np.array(default_s) * 1e-3),
                                            (case("flash", seq_len=256, block_q=64, block_k=64),
                                             np.array(tuned_s) * 1e-3)], **overrides)


def test_a_faster_median_of_noisy_samples_is_no_significant_winner(tmp_path):
    """Before: the smaller median of 5 noisy samples 'won' 2.2x and went into the tuned file."""
    path = _two_configs(tmp_path, [1.0, 2.6, 2.2, 0.9, 2.4], [1.0, 1.1, 0.9, 2.5, 0.95])
    (pick,) = _picks([path])
    assert pick.verdict == best.NO_WINNER and pick.shown.params == {"block_q": 64, "block_k": 64}
    assert pick.test.p_holm > 0.05 and pick.test.ci_low < 0.95  # the interval reaches the default
    kept = pick.config
    assert kept.params == {"block_q": None, "block_k": None} and kept.speedup_vs_default is None
    out = tmp_path / "tuned.yaml"
    res = CliRunner().invoke(main, ["best", str(path), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "no significant winner" in res.output and "default kept" in res.output
    assert tuned.load(out, "attention")[0].params == {"block_q": None, "block_k": None}
    # the same sweep with separated samples: a winner, with its interval
    clear = _two_configs(tmp_path, [2.0, 2.1, 2.05, 1.95, 2.2, 2.0], [1.0, 1.1, 0.9, 1.05, 0.95, 1.0], "clear.csv")
    (pick,) = _picks([clear])
    assert pick.verdict == best.WINNER and pick.config.params == {"block_q": 64, "block_k": 64}
    assert pick.config.speedup_vs_default == pytest.approx(2.0, rel=0.05)
    headers, rows = best.table_rows([pick])
    assert rows[0][headers.index("verdict")] == "winner" and "[" in rows[0][headers.index("speedup [95% CI]")]


def test_interpreted_rows_are_flagged_and_never_tuned_from(tmp_path):
    path = _two_configs(tmp_path, [2.0, 2.1, 2.05, 1.95, 2.2, 2.0], [1.0, 1.1, 0.9, 1.05, 0.95, 1.0], interpret=True)
    (pick,) = _picks([path])
    assert pick.verdict == best.INTERPRETED and pick.config is None
    headers, rows = best.table_rows([pick])  # no configuration or time beside "not tuned": no choice was made
    assert [rows[0][headers.index(h)] for h in ("block_q", "block_k", "median ms")] == ["-", "-", ""]
    res = CliRunner().invoke(main, ["best", str(path)])
    assert res.exit_code == 0 and "interpreted: not tuned" in res.output and "CPU interpreter" in res.output
    res = CliRunner().invoke(main, ["best", str(path), "-o", str(tmp_path / "t.yaml")])
    assert res.exit_code == 2 and "nothing to tune from" in res.output and not (tmp_path / "t.yaml").exists()


def test_best_writes_its_winner_into_the_tuning_cache_where_the_tuner_finds_it_current(tmp_path):
    """One tuning story: a sweep's winner goes under the key and candidate space the JAX worker computes for
    the case (its device kind and the versions the run's meta records), so --tune reads it as a cache hit
    instead of searching again; the tuned file is the export of that entry."""
    import json

    from xlabench.backends.jax import tune_case
    from xlabench.impls.kernels.flash import flash_space
    from xlabench.workloads.attention import AttentionParams, tune_key_fields

    rng = np.random.default_rng(0)
    speed = {None: 2.0, 128: 1.9, 256: 1.2}  # flash at S=256 searches 128 and 256 per block
    path = write_run(tmp_path / "sweep.csv", [(case("flash", seq_len=256, block_q=b, block_k=b), draw(rng, 8, x))
                                              for b, x in speed.items()])
    meta = results.RunFiles(path).meta
    meta.write_text(json.dumps({"run_id": "run", "env": {"tune_versions": tune_case.versions()}}))
    out, folder = tmp_path / "tuned.yaml", tmp_path / "tune"
    res = CliRunner().invoke(main, ["best", str(path), "--tune-dir", str(folder), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert "wrote 1 configuration(s) into the tuning cache" in res.output
    (cfg,) = tuned.load(out, "attention")
    assert cfg.params == {"block_q": 256, "block_k": 256}
    p = AttentionParams(**cfg.shape)
    key = tune.cache_key("cpu", "jax", "flash", tune_key_fields(p), tune_case.versions())

    def build(program, blocks):
        raise AssertionError("a cache hit compiles nothing")

    t = tune_case.tuned_blocks(flash_space(p), key, build, str(folder))
    assert t.fields["tuned"] == "cache" and t.blocks == {"block_q": 256, "block_k": 256}
    assert t.fields["default_s"] > t.fields["tune_best_s"] > 0 and t.fields["tune_clock"] == "wall"


def test_best_says_why_a_pick_is_not_cached(tmp_path):
    """A run whose meta has no tune versions (written before), and blocks the kernel's search never tries
    (64 at S=256): each named in one line; the tuned file still holds them."""
    out = tmp_path / "tuned.yaml"
    res = CliRunner().invoke(main, ["best", str(_sweep(tmp_path)), "--tune-dir", str(tmp_path / "tune"), "-o", str(out)])
    assert res.exit_code == 0, res.output
    assert res.output.count("not cached: jax/flash") == 2 and "no single env.tune_versions" in res.output
    assert not list((tmp_path / "tune").glob("*.json"))
    assert {c.shape["seq_len"]: c.params["block_q"] for c in tuned.load(out, "attention")} == {128: None, 256: 64}
