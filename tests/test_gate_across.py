"""`compare --backends A,B`: one framework against another on the same cases, in one run or two."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from _gate_data import case, draw, write_run
from xlabench.cli import main
from xlabench.gate import across


def _tt(c: dict) -> dict:
    return {**c, "backend": "torch_tpu"}


@pytest.fixture()
def rng() -> np.random.Generator:
    return np.random.default_rng(7)


def _both(tmp_path, rng, slower: float = 1.3):
    entries = [(case("naive"), draw(rng, 20)), (case("flash"), draw(rng, 20)),
               (_tt(case("naive")), draw(rng, 20, slower)), (_tt(case("flash")), draw(rng, 20)),
               (_tt(case("sdpa")), draw(rng, 20))]
    return write_run(tmp_path / "both.csv", entries)


def test_one_run_sets_its_two_frameworks_against_each_other_case_by_case(tmp_path, rng):
    js = tmp_path / "v.json"
    res = CliRunner().invoke(main, ["compare", str(_both(tmp_path, rng)), "--backends", "jax,torch_tpu",
                                    "--json", str(js)])
    assert res.exit_code == 1, res.output  # torch_tpu's naive is 1.3x JAX's
    got = {c["label"].split(" ")[2]: c["verdict"] for c in json.loads(js.read_text())["cases"]}
    assert got == {"jax/naive": "regression", "jax/flash": "unchanged", "jax/sdpa": "new"}, got
    assert "frameworks compared case by case: baseline jax" in res.output


def test_two_runs_pair_the_baselines_backend_with_the_candidates(tmp_path, rng):
    jax_run = write_run(tmp_path / "jax.csv", [(case("naive"), draw(rng, 20)), (case("flash"), draw(rng, 20))])
    tt_run = write_run(tmp_path / "tt.csv", [(_tt(case("naive")), draw(rng, 20, 0.7)),
                                             (_tt(case("flash")), draw(rng, 20))], "r2")
    res = CliRunner().invoke(main, ["compare", str(jax_run), str(tt_run), "--backends", "jax,torch_tpu"])
    assert res.exit_code == 0, res.output
    assert "improvement" in res.output and "unchanged" in res.output


@pytest.mark.parametrize("pair, said", [("jax", "expected two different backends"),
                                        ("jax,jax", "expected two different backends"),
                                        ("jax,torch_xla", "has no torch_xla rows (its backends: jax, torch_tpu)")])
def test_a_pair_that_cannot_be_compared_is_one_line(tmp_path, rng, pair, said):
    res = CliRunner().invoke(main, ["compare", str(_both(tmp_path, rng)), "--backends", pair])
    assert res.exit_code == 2 and said in res.output and len(res.output.strip().splitlines()) == 1, res.output


def test_compare_without_a_candidate_or_backends_says_what_it_needs(tmp_path, rng):
    res = CliRunner().invoke(main, ["compare", str(_both(tmp_path, rng))])
    assert res.exit_code == 2 and "needs a CANDIDATE" in res.output


def test_the_pairing_key_leaves_out_the_backend_and_nothing_else():
    a, b = case("naive"), _tt(case("naive"))
    row = lambda c: {"workload": c["workload"], "backend": c["backend"], "impl": c["impl"], **c["params"]}  # noqa: E731
    assert across.pair_key(row(a)) == across.pair_key(row(b))
    assert across.pair_key(row(a)) != across.pair_key(row(case("naive", causal=True)))
    assert across.pair_key(row(a)) != across.pair_key(row(case("flash")))
