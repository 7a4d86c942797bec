"""Splitting a sweep across machines (--shard I/N) and merging the pieces back."""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from xlabench import results
from xlabench.run import shard
from xlabench import suite as suite_lib
from xlabench.cli import main

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture(scope="module")
def attention_cases():
    return suite_lib.load(ROOT / "suites" / "attention.yaml").cases("tpu")


@pytest.mark.parametrize("n", [1, 2, 3, 7])
def test_every_case_exactly_once(attention_cases, n):
    picked = [c.case_id for i in range(n) for c in shard.select(attention_cases, i, n)]
    assert sorted(picked) == sorted(c.case_id for c in attention_cases)


def test_assignment_stable_and_order_independent(attention_cases):
    a = shard.assign(attention_cases, 3)
    assert a == shard.assign(attention_cases, 3)
    by_id = dict(zip((c.case_id for c in attention_cases), a))
    rev = list(reversed(attention_cases))
    assert dict(zip((c.case_id for c in rev), shard.assign(rev, 3))) == by_id


def test_balanced_by_cost_not_count(attention_cases):
    n = 3
    loads = [sum(shard.estimated_cost(c) for c in shard.select(attention_cases, i, n)) for i in range(n)]
    biggest = max(shard.estimated_cost(c) for c in attention_cases)
    assert max(loads) - min(loads) <= biggest  # LPT bound: no shard exceeds another by more than one case


def test_one_heavy_case_gets_its_own_shard(write_suite):
    text = """
    name: skew
    workload: attention
    impls: [naive]
    params: {num_heads: 16, head_dim: 128, batch: 8}
    matrix: {seq_len: [8192, 64, 128, 192, 256, 320]}
    """
    cases = suite_lib.load(write_suite(text)).cases("")
    heavy = [c for c in shard.select(cases, 0, 2) + shard.select(cases, 1, 2) if c.params["seq_len"] == 8192]
    alone = [shard.select(cases, i, 2) for i in range(2)]
    assert sorted(len(a) for a in alone) == [1, 5] and heavy  # cost-balanced, not 3 and 3


@pytest.mark.parametrize("spec", ["3/3", "1", "a/b", "-1/2", "0/0"])
def test_bad_shard_spec(write_suite, spec):
    res = CliRunner().invoke(main, ["run", str(write_suite()), "--shard", spec, "--profile", "base"])
    assert res.exit_code == 2 and "--shard" in res.output


def _row(case_id: str, suite: str = "s", run_id: str = "r"):
    return {"schema_version": results.SCHEMA_VERSION, "run_id": run_id, "suite": suite, "case_id": case_id,
            "status": "ok", "batch": 4, "causal": True}


def _write(path: Path, rows, samples=True):
    with results.RowWriter(results.RunFiles(path)) as w:
        for r in rows:
            w.write(r, [0.1, 0.2] if samples else [])
    return path


def test_merge_combines_rows_and_samples(tmp_path):
    a = _write(tmp_path / "a.csv", [_row("c1", run_id="ra"), _row("c2", run_id="ra")])
    b = _write(tmp_path / "b.csv", [_row("c3", run_id="rb")])
    out = tmp_path / "m" / "merged.csv"
    res = CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(out)])
    assert res.exit_code == 0, res.output
    df = results.read_rows(out)
    assert list(df.case_id) == ["c1", "c2", "c3"] and list(df.batch) == [4, 4, 4]
    assert len(results.read_samples(out)) == 6
    assert (tmp_path / "a.csv").read_text().splitlines()[1] == out.read_text().splitlines()[1]  # text unchanged


@pytest.mark.parametrize("rows_b,message", [
    ([_row("c1")], "appear more than once"),
    ([_row("c9", suite="other")], "mixed suites"),
])
def test_merge_refuses(tmp_path, rows_b, message):
    a = _write(tmp_path / "a.csv", [_row("c1")])
    b = _write(tmp_path / "b.csv", rows_b)
    res = CliRunner().invoke(main, ["merge", str(a), str(b), "-o", str(tmp_path / "m.csv")])
    assert res.exit_code == 2 and message in res.output


def test_merge_refuses_foreign_file_and_overwrite(tmp_path):
    a = _write(tmp_path / "a.csv", [_row("c1")])
    foreign = tmp_path / "f.csv"
    foreign.write_text("x,y\n1,2\n")
    res = CliRunner().invoke(main, ["merge", str(a), str(foreign), "-o", str(tmp_path / "m.csv")])
    assert res.exit_code == 2 and "not an xlabench results CSV" in res.output
    res = CliRunner().invoke(main, ["merge", str(a), "-o", str(a)])
    assert res.exit_code == 2 and "refusing to overwrite" in res.output


@pytest.mark.slow
def test_split_three_ways_equals_unsplit_case_set(write_suite, tmp_path):
    suite = write_suite()  # tiny: 4 cases
    full = suite_lib.load(suite).cases("")
    pieces = []
    for i in range(3):
        out = tmp_path / f"s{i}"
        res = CliRunner().invoke(main, ["run", str(suite), "--shard", f"{i}/3", "--out", str(out)])
        assert res.exit_code == 0, res.output
        pieces += [p for p in out.glob("*/*.csv") if not p.name.endswith(".samples.csv")]
    merged = tmp_path / "merged.csv"
    assert CliRunner().invoke(main, ["merge", *map(str, pieces), "-o", str(merged)]).exit_code == 0
    df = results.read_rows(merged)
    assert sorted(df.case_id) == sorted(c.case_id for c in full)
