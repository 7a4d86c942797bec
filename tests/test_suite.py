"""Suite loading: matrix expansion, zipped keys, profiles, and a clear error for every kind of bad file."""

from __future__ import annotations

import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import run_cli

from xlabench import suite as suite_lib
from xlabench.cli import main

ROOT = Path(__file__).resolve().parent.parent

BASE = """
name: s
workload: attention
impls: [naive, flash]
params: {num_heads: 4, head_dim: 64, batch: 1}
matrix:
  seq_len: [128, 256]
  causal: [true, false]
profiles:
  cpu:
    params: {seq_len: 64}
    measure: {iters: 3}
  tpu:
    matrix:
      "seq_len,batch": [[512, 8], [1024, 4], [2048, 2]]
"""


def test_matrix_expansion_is_cartesian(write_suite):
    s = suite_lib.load(write_suite(BASE))
    cases = s.cases("")
    assert len(cases) == 2 * 2 * 2  # seq x causal x impls
    combos = {(c.impl, c.params["seq_len"], c.params["causal"]) for c in cases}
    assert len(combos) == 8
    assert all(c.params["kv_seq_len"] == c.params["seq_len"] for c in cases)  # defaults made explicit
    assert len({c.case_id for c in cases}) == 8


def test_profile_params_replace_base_sweep(write_suite):
    s = suite_lib.load(write_suite(BASE))
    cases = s.cases("cpu")
    assert {c.params["seq_len"] for c in cases} == {64}
    assert len(cases) == 2 * 2  # causal x impls
    assert all(c.measure.iters == 3 and c.measure.warmup == 2 for c in cases)  # merged, not replaced


def test_zipped_matrix_keys(write_suite):
    s = suite_lib.load(write_suite(BASE))
    pairs = {(c.params["seq_len"], c.params["batch"]) for c in s.cases("tpu")}
    assert pairs == {(512, 8), (1024, 4), (2048, 2)}


def test_profile_pick(write_suite):
    s = suite_lib.load(write_suite(BASE))
    assert s.pick_profile("cpu") == "cpu"
    assert s.pick_profile("gpu") == ""  # no gpu profile: the base suite
    assert s.pick_profile("cpu", "tpu") == "tpu"  # --profile wins
    assert s.pick_profile("cpu", "base") == ""
    with pytest.raises(suite_lib.SuiteError, match="no profile 'v5e'"):
        s.pick_profile("cpu", "v5e")


def test_case_ids_stable_across_loads(write_suite):
    a = [c.case_id for c in suite_lib.load(write_suite(BASE)).cases("cpu")]
    b = [c.case_id for c in suite_lib.load(write_suite(BASE, "again.yaml")).cases("cpu")]
    assert a == b


BAD = {
    "syntax": ("name: s\nworkload: attention\nimpls: [naive\nparams: {}\n", r"suite.yaml:\d+:\d+: YAML syntax error"),
    "unknown_top_key": (BASE + "colour: blue\n", r"suite.yaml:\d+: colour: unknown key \(expected one of: name,"),
    "unknown_param": (BASE.replace("head_dim: 64", "head_dims: 64"),
                      r"suite.yaml:\d+: params.head_dims: unknown parameter 'head_dims' for workload 'attention'"),
    "unknown_matrix_param": (BASE.replace("causal: [true, false]", "casual: [true, false]"),
                             r"matrix.casual: unknown parameter 'casual'"),
    "unknown_impl": (BASE.replace("[naive, flash]", "[naive, flsh]"),
                     r"impls.1: unknown impl 'flsh' for workload 'attention' \(expected one of: naive"),
    "heads_not_divisible": (BASE.replace("batch: 1}", "batch: 1, num_kv_heads: 3}"),
                            r"num_heads \(4\) must be divisible by num_kv_heads \(3\)"),
    "wrong_type": (BASE.replace("seq_len: [128, 256]", "seq_len: [128, long]"),
                   r"invalid case in base suite \(seq_len=long.*seq_len: Input should be a valid integer"),
    "empty_list": (BASE.replace("seq_len: [128, 256]", "seq_len: []"), r"matrix.seq_len is an empty list"),
    "both_params_and_matrix": (BASE.replace("batch: 1}", "batch: 1, causal: true}"),
                               r"'causal' is set twice"),
    "bad_profile_key": (BASE.replace("measure: {iters: 3}", "measure: {iterations: 3}"),
                        r"profiles.cpu.measure.iterations: unknown key"),
    "bad_measure_value": (BASE + "measure: {iters: 0}\n", r"measure.iters: Input should be greater than or equal to 1"),
    "bad_timer": (BASE + "measure: {timer: gpu}\n", r"measure.timer: Input should be 'wallclock' or 'trace'"),
    "bad_profile_timer": (BASE.replace("measure: {iters: 3}", "measure: {timer: host}"),
                          r"profiles.cpu.measure.timer: Input should be 'wallclock' or 'trace'"),
    "bad_profile_measure_value": (BASE.replace("measure: {iters: 3}", "measure: {timeout_s: 0}"),
                                  r"profiles.cpu.measure.timeout_s: Input should be greater than 0"),
    "unknown_workload": (BASE.replace("workload: attention", "workload: convolution"),
                         r"workload: unknown workload 'convolution'"),
    "zipped_wrong_arity": (BASE.replace("[[512, 8], [1024, 4], [2048, 2]]", "[[512, 8], [1024]]"),
                           r"each value must be a list of 2 \(seq_len, batch\)"),
    "not_a_mapping": ("- just\n- a list\n", r"expected a mapping of suite keys"),
    "bad_profile_case": (BASE.replace("params: {seq_len: 64}", "params: {seq_len: 64, num_kv_heads: 5}"),
                         r"invalid case in profile 'cpu'.*must be divisible"),
    "missing_impls": (BASE.replace("impls: [naive, flash]\n", ""), r"impls: required key is missing"),
    "duplicate_top_key": (BASE.replace("impls: [naive, flash]\n", "impls: [naive, flash]\nimpls: [naive]\n"),
                          r"suite.yaml:4: impls: set twice \(first at line 3\)"),
    "duplicate_param": (BASE.replace("batch: 1}", "batch: 1, batch: 2}"),
                        r"suite.yaml:4: params.batch: set twice \(first at line 4\)"),
    "duplicate_profile_key": (BASE.replace("    measure: {iters: 3}", "    measure: {iters: 3}\n    measure: {iters: 4}"),
                              r"suite.yaml:12: profiles.cpu.measure: set twice \(first at line 11\)"),
}


@pytest.mark.parametrize("kind", sorted(BAD))
def test_bad_suite_gives_clear_error_and_exit_2(write_suite, kind):
    text, pattern = BAD[kind]
    path = write_suite(text)
    with pytest.raises(suite_lib.SuiteError, match=pattern):
        suite_lib.load(path)
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert str(path) in res.output


def test_error_names_the_line(write_suite):
    text = BASE.replace("head_dim: 64", "head_dims: 64")
    path = write_suite(text)
    with pytest.raises(suite_lib.SuiteError) as e:
        suite_lib.load(path)
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if "head_dims" in ln)
    assert f"suite.yaml:{line}:" in str(e.value)


def test_missing_file(tmp_path):
    res = CliRunner().invoke(main, ["validate", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2 and "no such file" in res.output


@pytest.mark.parametrize("path", sorted((ROOT / "suites").glob("*.yaml")), ids=lambda p: p.name)
def test_shipped_suites_validate(path):
    s = suite_lib.load(path)
    for name in [""] + s.profile_names():
        assert s.cases(name), f"{path.name} profile {name or 'base'} expands to no cases"
    assert "cpu" in s.profile_names()


def test_validate_prints_counts_per_profile(write_suite):
    res = CliRunner().invoke(main, ["validate", str(write_suite(BASE))])
    assert res.exit_code == 0, res.output
    assert "base: 8" in res.output and "cpu: 4" in res.output and "tpu: 12" in res.output


# A new user's bad files, through a real `python -m xlabench validate` process: exit 2, the file and key
# in the message, no traceback.


def _validate_process(path: Path, timeout: float = 60):
    env = {"XLABENCH_NO_TORCH_XLA": "1", "JAX_PLATFORMS": "cpu"}
    return run_cli("validate", str(path), env=env, timeout=timeout)


@pytest.mark.slow  # starts a process
def test_non_utf8_file_is_bad_input_naming_line_and_key(tmp_path):
    path = tmp_path / "latin1.yaml"
    path.write_bytes(textwrap.dedent(BASE).lstrip().replace("tpu:\n    matrix:", "tpu:\n    description: caf\xe9\n"
                                                            "    matrix:").encode("latin-1"))
    line = next(i for i, ln in enumerate(path.read_bytes().splitlines(), 1) if b"caf" in ln)
    proc = _validate_process(path)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{path}:{line}:" in proc.stderr and "profiles.tpu.description" in proc.stderr
    assert "not UTF-8" in proc.stderr


def _axis(n: int, start: int = 1) -> str:
    return "[" + ", ".join(str(i) for i in range(start, start + n)) + "]"


@pytest.mark.slow  # starts a process
def test_huge_matrix_is_refused_from_axis_lengths(tmp_path):
    """Four 100-value axes (10^8 cases) are counted, not expanded: refused within seconds."""
    path = tmp_path / "huge.yaml"
    path.write_text(f"name: huge\nworkload: attention\nimpls: [naive]\nparams: {{num_heads: 2}}\nmatrix:\n"
                    f"  seq_len: {_axis(100)}\n  kv_seq_len: {_axis(100)}\n  head_dim: {_axis(100)}\n"
                    f"  batch: {_axis(100)}\n")
    started = time.monotonic()
    proc = _validate_process(path, timeout=60)
    elapsed = time.monotonic() - started
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr
    assert f"{path}:5: matrix:" in proc.stderr and "100,000,000 cases" in proc.stderr
    assert f"limit of {suite_lib.MAX_CASES:,}" in proc.stderr
    assert elapsed < 30, f"validate took {elapsed:.1f}s: was the matrix expanded?"


def test_case_count_zipped_keys_count_once_and_profiles_are_checked(write_suite):
    assert suite_lib.count_cases({"seq_len,batch": [[1, 2]] * 1000, "head_dim": [1] * 1000}, 2) == 2_000_000
    assert suite_lib.count_cases({}, 3) == 3
    text = BASE.replace('"seq_len,batch": [[512, 8], [1024, 4], [2048, 2]]',
                        f'"seq_len,kv_seq_len": {[[i, i] for i in range(1, 1001)]}\n      head_dim: {_axis(100)}')
    with pytest.raises(suite_lib.SuiteError, match=r"suite.yaml:\d+: profiles.tpu.matrix: profile 'tpu' expands "
                                                   r"to 400,000 cases \(2 causal x 1000 seq_len,kv_seq_len x "
                                                   r"100 head_dim x 2 backend/impl pairs\)"):
        suite_lib.load(write_suite(text))


def test_validate_gives_every_file_a_verdict(write_suite):
    """A bad file does not stop the others: each gets ok or its error, then exit 2 naming the count."""
    a = write_suite(BAD["unknown_top_key"][0], name="a.yaml")
    good = write_suite(BASE, name="good.yaml")
    b = write_suite(BAD["unknown_impl"][0], name="b.yaml")
    res = CliRunner().invoke(main, ["validate", str(a), str(good), str(b)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    lines = res.output.splitlines()
    assert any(ln.startswith("error: ") and "a.yaml" in ln and "colour: unknown key" in ln for ln in lines)
    assert any(ln.startswith("ok") and "good.yaml" in ln for ln in lines)
    assert any(ln.startswith("error: ") and "b.yaml" in ln and "unknown impl 'flsh'" in ln for ln in lines)
    assert lines[-1] == "error: 2 of 3 suite file(s) invalid"


@pytest.mark.parametrize("text, key, where", [
    # no matrix at all: the fixed params are at fault, not a "matrix"
    ("name: s\nworkload: attention\nimpls: [naive]\nparams: {seq_len: 128, head_dim: 64, batch: 1,\n"
     "  num_heads: 4,\n  num_kv_heads: 3}\n", "num_kv_heads", "params.num_kv_heads"),
    # a matrix that sweeps something else: still the fixed param's line
    ("name: s\nworkload: attention\nimpls: [naive]\nparams:\n  batch: 1\n  head_dim: 64\n  num_heads: 4\n  num_kv_heads: 3\n"
     "matrix:\n  seq_len: [128, 256]\n", "num_kv_heads", "params.num_kv_heads"),
    # a profile's fixed param
    (BASE.replace("params: {seq_len: 64}", "params: {seq_len: 64, num_kv_heads: 3}"), "num_kv_heads",
     "profiles.cpu.params.num_kv_heads"),
    # a bad value swept by the matrix: the matrix key
    (BASE.replace("seq_len: [128, 256]", "seq_len: [128, long]"), "seq_len: [128", "matrix.seq_len"),
])
def test_bad_case_is_reported_where_the_bad_value_is_set(write_suite, text, key, where):
    path = write_suite(text)
    with pytest.raises(suite_lib.SuiteError) as e:
        suite_lib.load(path)
    line = next(i for i, ln in enumerate(path.read_text().splitlines(), 1) if key in ln)
    assert f"suite.yaml:{line}: {where}:" in str(e.value), str(e.value)


def test_the_quick_start_profile_sweeps_three_global_batches_or_more():
    """#36 item 10: `make run`'s headline chart (MFU vs global batch) needs a line, not a column of dots:
    the gpt2 cpu profile sweeps at least 3 global batches under every sharding mode and impl."""
    s = suite_lib.load(Path(__file__).parent.parent / "suites" / "gpt2.yaml")
    per_series: dict[tuple, set] = {}
    for c in s.cases("cpu"):
        per_series.setdefault((c.backend, c.impl, c.params["sharding"]), set()).add(c.params["global_batch"])
    assert per_series and all(len(b) >= 3 for b in per_series.values()), per_series


def _alias_bomb(levels: int, width: int = 10, under: str = "params:\n  seq_len") -> str:
    """A suite whose `under` key holds an alias bomb: level i is a list of `width` aliases to level i-1."""
    lines = ["name: bomb", "workload: attention", "impls: [naive]",
             "l0: &l0 [" + ", ".join(["1"] * width) + "]"]
    lines += [f"l{i}: &l{i} [" + ", ".join([f"*l{i - 1}"] * width) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\n{under}: *l{levels - 1}\n"


@pytest.mark.timeout(60)  # the unbounded walk spun for minutes: a hang fails here, not at the suite's 900 s
@pytest.mark.parametrize("under", ["params:\n  seq_len", "extra"])
def test_yaml_alias_bomb_is_refused_in_one_line(tmp_path, under):
    """Ten levels of ten aliases (10^10 nodes once expanded) under a known or an unknown key: one line
    naming the file, the size and the limit; exit 2."""
    path = tmp_path / "bomb.yaml"
    path.write_text(_alias_bomb(10, under=under))
    res = CliRunner().invoke(main, ["validate", str(path)])
    assert res.exit_code == 2, res.output
    assert "Traceback" not in res.output
    assert len(res.output.strip().splitlines()) == 1, res.output
    assert f"{path}:" in res.output and f"limit of {suite_lib.MAX_YAML_NODES:,}" in res.output


def test_yaml_just_past_the_node_limit_is_refused_and_below_it_is_not(tmp_path):
    """The limit counts nodes as if every alias were written out: a list of aliases to a list, just past
    it, is refused; the same list once (no aliases) loads."""
    width = 100
    copies = suite_lib.MAX_YAML_NODES // width + 1  # (width + 1) nodes per copy: past the limit
    text = (f"name: s\nworkload: attention\nimpls: [naive]\nparams: {{num_heads: 2}}\n"
            f"seq: &seq [{', '.join(['1'] * width)}]\n")
    past = tmp_path / "past.yaml"
    past.write_text(text + "many: [" + ", ".join(["*seq"] * copies) + "]\n")
    with pytest.raises(suite_lib.SuiteError, match=r"past\.yaml:6: many: expands to more than"):
        suite_lib.load(past)
    once = tmp_path / "once.yaml"
    once.write_text(text)
    with pytest.raises(suite_lib.SuiteError, match="unknown key"):  # refused by the schema, not by size
        suite_lib.load(once)


def test_recursive_yaml_alias_is_refused_naming_its_line(tmp_path):
    path = tmp_path / "loop.yaml"
    path.write_text("name: loop\nworkload: attention\nimpls: [naive]\nparams:\n  seq_len: &a [1, *a]\n")
    with pytest.raises(suite_lib.SuiteError, match=r"loop\.yaml:5: params\.seq_len\.1: refers to itself"):
        suite_lib.load(path)
