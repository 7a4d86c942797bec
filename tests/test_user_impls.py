"""User impls by import path (issue 22): checked in the parent by syntax only, imported in the worker,
every bad input a row (failed / wrong) naming the path and the problem, never a crash of the run."""

from __future__ import annotations

import csv
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import ROOT, require_libtpu, require_torch_xla
from xlabench import impls as catalog
from xlabench.suite import SuiteError, load

EXAMPLE = ROOT / "examples" / "my_kernel"
GOOD = "my_kernel.attention:blocked_attention"

SUITE = """
name: user
workload: attention
backends: [jax]
impls: {impls}
params: {{batch: 1, num_heads: 2, head_dim: 32, dtype: float32, seq_len: 64}}
measure: {{warmup: 0, iters: 2, timeout_s: {timeout}}}
"""

BAD_MODULES = {
    "raising.py": "raise RuntimeError('no config file found')\n",
    "kernels.py": textwrap.dedent("""
        import os, signal, time
        import jax.numpy as jnp

        def two_args(q, k):
            return q

        def wrong_shape(q, k, v, cfg):
            return q[:, :, :1]

        def wrong_dtype(q, k, v, cfg):
            return q.astype(jnp.bfloat16)

        def segfault(q, k, v, cfg):
            os.kill(os.getpid(), signal.SIGSEGV)

        def hang(q, k, v, cfg):
            time.sleep(3600)
        """),
}


def _suite(tmp_path: Path, impls: list[str], timeout: float = 120, name: str = "suite.yaml") -> Path:
    p = tmp_path / name
    p.write_text(textwrap.dedent(SUITE.format(impls="[" + ", ".join(f'"{i}"' for i in impls) + "]",
                                              timeout=timeout)).lstrip())
    return p


def _cli(*args: str, cwd: Path, pythonpath: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, COLUMNS="200", PYTHONPATH=os.pathsep.join(filter(None, [str(ROOT), pythonpath])))
    return subprocess.run([sys.executable, "-m", "xlabench", *args], capture_output=True, text=True, env=env,
                          cwd=str(cwd), timeout=900)


def _rows(out: Path) -> dict[str, dict[str, str]]:
    (path,) = [p for p in out.rglob("*.csv") if not p.name.endswith(".samples.csv")]
    with open(path) as f:
        return {r["impl"]: r for r in csv.DictReader(f)}


# ------------------------------------------------------------------------------ parent: syntax only

@pytest.mark.parametrize("name,message", [
    ("mod:", "not an import path"), ("a b:c", "not an import path"), ("mod:attr:x", "not an import path"),
    (".rel:fn", "not an import path"), ("no_such_impl", "or an import path package.module:function"),
])
def test_a_name_that_is_no_builtin_and_no_path_is_refused(tmp_path, name, message):
    with pytest.raises(SuiteError, match=message) as e:
        load(_suite(tmp_path, ["naive", name]))
    assert "impls.1" in str(e.value)
    if ":" not in name:  # the valid names are listed
        assert "naive, xla_sdpa, flash" in str(e.value)


def test_the_parent_never_imports_the_path(tmp_path):
    s = load(_suite(tmp_path, ["naive", "surely_absent_pkg.mod:fn"]))
    assert [c.impl for c in s.cases("")] == ["naive", "surely_absent_pkg.mod:fn"]
    assert "surely_absent_pkg" not in sys.modules
    info = catalog.find("jax", "surely_absent_pkg.mod:fn", "attention")
    assert info is not None and info.interpreted("cpu") and "tpu" in info.platforms


def test_a_workload_without_user_impls_is_refused(tmp_path):
    p = tmp_path / "paged.yaml"
    p.write_text(textwrap.dedent("""
        name: paged
        workload: paged_attention
        impls: ["mod:fn"]
        params: {batch: 1, num_heads: 2, head_dim: 64, page_size: 16, context_lens: [64]}
        """))
    with pytest.raises(SuiteError, match="takes built-in impls only"):
        load(p)


# ------------------------------------------------------------------------------ worker: every bad input a row

@pytest.mark.slow  # starts a process
def test_every_bad_impl_is_one_row_naming_the_problem_and_the_good_one_is_ok(tmp_path):
    """One run: good kernel ok with its error; import error, missing module/attribute, wrong signature
    failed naming the path; wrong shape and dtype wrong rows; a segfault a failed row. A hang, in a run of
    its own with a 2 s limit (in the first run it waited out the 15 s the good kernel's compile may need on
    a loaded host), is a failed row too."""
    for name, text in BAD_MODULES.items():
        (tmp_path / name).write_text(text)
    impls = [GOOD, "raising:fn", "absent_module:fn", "kernels:nothing_here", "kernels:two_args",
             "kernels:wrong_shape", "kernels:wrong_dtype", "kernels:segfault"]
    res = _cli("run", str(_suite(tmp_path, impls, timeout=15)), "--out", str(tmp_path / "out"), cwd=tmp_path,
               pythonpath=str(EXAMPLE / "src"))
    assert "Traceback" not in res.stdout, res.stdout
    hang = _cli("run", str(_suite(tmp_path, ["kernels:hang"], name="hang.yaml")), "--timeout", "2", "--out",
                str(tmp_path / "hang"), cwd=tmp_path)
    assert "Traceback" not in hang.stdout, hang.stdout
    rows = {**_rows(tmp_path / "out"), **_rows(tmp_path / "hang")}
    assert rows[GOOD]["status"] == "ok" and rows[GOOD]["correct"] == "true"
    assert float(rows[GOOD]["max_abs_err"]) < 1e-5 and rows[GOOD]["interpret"] == "true"
    err = {k: r["error"] for k, r in rows.items()}
    assert rows["raising:fn"]["status"] == "failed"
    assert "'raising:fn'" in err["raising:fn"] and "RuntimeError: no config file found" in err["raising:fn"]
    assert "no module named 'absent_module'" in err["absent_module:fn"]
    assert "has no attribute 'nothing_here'" in err["kernels:nothing_here"] and "two_args" in err["kernels:nothing_here"]
    assert "must take (q, k, v, cfg)" in err["kernels:two_args"] and "two_args(q, k)" in err["kernels:two_args"]
    for name, what in (("kernels:wrong_shape", "shape (1, 64, 1, 32)"), ("kernels:wrong_dtype", "dtype bfloat16")):
        r = rows[name]
        assert r["status"] == "ok" and r["correct"] == "false", r
        assert "wrong output" in r["notes"] and what in r["notes"] and "expected shape (1, 64, 2, 32)" in r["notes"]
    assert rows["kernels:segfault"]["status"] == "failed" and "SIGSEGV" in err["kernels:segfault"]
    assert rows["kernels:hang"]["status"] == "failed" and "timeout" in err["kernels:hang"].lower()


@pytest.mark.slow  # starts a process
def test_a_wrong_scale_in_a_copy_of_the_example_is_wrong_and_compare_fails(tmp_path):
    """A pull request's kernel (same import path, run from its checkout) against main's: wrong rows, gate fails."""
    runs = {}
    for side, bug in (("main", False), ("pr", True)):
        repo = tmp_path / side
        shutil.copytree(EXAMPLE / "src" / "my_kernel", repo / "my_kernel")
        if bug:
            src = repo / "my_kernel" / "attention.py"
            text = src.read_text()
            assert "q = q_ref[...].astype(jnp.float32) * sm_scale" in text
            src.write_text(text.replace("* sm_scale\n", "* sm_scale * 1.5\n", 1))
        res = _cli("run", str(_suite(repo, [GOOD])), "--out", str(repo / "out"), cwd=repo)
        assert res.returncode == 0 or bug, res.stdout + res.stderr
        runs[side] = next(p for p in (repo / "out").rglob("*.csv") if not p.name.endswith(".samples.csv"))
        row = _rows(repo / "out")[GOOD]
        assert row["status"] == "ok" and row["correct"] == str(not bug).lower(), row
    res = _cli("compare", str(runs["main"]), str(runs["pr"]), cwd=tmp_path)
    assert res.returncode == 1, res.stdout + res.stderr
    assert "wrong result" in res.stdout


# ------------------------------------------------------------------------------ entry points

def _dist(site: Path, entries: dict[str, str], name: str = "two_kernels") -> Path:
    """A throwaway installed distribution (dist-info with entry_points.txt) and its module, in ``site``."""
    info = site / f"{name}-0.3.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.3\n")
    (info / "entry_points.txt").write_text(
        f"[{catalog.ENTRY_POINT_GROUP}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()))
    (site / f"{name}_mod.py").write_text(textwrap.dedent("""
        from xlabench.backends.jax.attention_impls import naive

        def plain(q, k, v, cfg):
            return naive(q, k, v, cfg)

        def transposed(q, k, v, cfg):
            import jax.numpy as jnp
            return jnp.swapaxes(naive(*(jnp.swapaxes(x, 1, 2) for x in (q, k, v)), cfg), 1, 2)
        transposed.layout = "bhsd"
        """))
    return site


TWO = {"two_plain": "two_kernels_mod:plain", "two_transposed": "two_kernels_mod:transposed"}


@pytest.mark.slow  # starts a process
def test_entry_point_impls_are_listed_with_their_source_and_run(tmp_path, monkeypatch):
    site = _dist(tmp_path / "site", TWO)
    res = _cli("info", "--impls", cwd=tmp_path, pythonpath=str(site))
    assert res.returncode == 0, res.stderr
    for name, target in TWO.items():
        line = next(ln for ln in res.stdout.splitlines() if name in ln)
        assert "two_kernels 0.3" in line and target in line
    assert "built-in" in next(ln for ln in res.stdout.splitlines() if "splash" in ln)
    # A suite names them like built-ins; the worker resolves the name to the path and imports it.
    monkeypatch.syspath_prepend(str(site))
    catalog.entry_point_impls.cache_clear()
    try:
        s = load(_suite(tmp_path, ["naive", "two_plain", "two_transposed"]))
        assert [c.impl for c in s.cases("")] == ["naive", "two_plain", "two_transposed"]
        from xlabench.backends.jax.attention_case import run_attention_case
        from xlabench.measure.timing import TimingPlan

        for name in TWO:
            f = run_attention_case(dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32"), name,
                                   TimingPlan(warmup=0, iters=1), True, "cpu").fields
            assert f["correct"] and f["max_abs_err"] < 1e-5, (name, f)
    finally:
        catalog.entry_point_impls.cache_clear()


@pytest.mark.slow  # starts a process
def test_an_entry_point_named_like_a_builtin_is_refused_with_exit_2(tmp_path, write_suite):
    site = _dist(tmp_path / "site", {"flash": "two_kernels_mod:plain"})
    res = _cli("info", "--impls", cwd=tmp_path, pythonpath=str(site))
    assert res.returncode == 2 and "'flash'" in res.stderr and "two_kernels 0.3" in res.stderr
    assert "Traceback" not in res.stderr
    res = _cli("list", str(write_suite()), cwd=tmp_path, pythonpath=str(site))
    assert res.returncode == 2 and "name of a built-in impl" in res.stderr, res.stderr


@pytest.mark.slow  # starts a process
def test_impl_option_adds_an_import_path_beside_the_suites_impls(tmp_path):
    suite = _suite(tmp_path, ["naive", "xla_sdpa"])
    res = _cli("list", str(suite), "--json", "--impl", "naive", "--impl", GOOD, cwd=tmp_path)
    assert res.returncode == 0, res.stderr
    import json

    assert [c["impl"] for c in json.loads(res.stdout)["cases"]] == ["naive", GOOD]
    res = _cli("list", str(suite), "--impl", "pkg.mod:", cwd=tmp_path)
    assert res.returncode == 2 and "--impl pkg.mod:" in res.stderr and "not an import path" in res.stderr


def test_the_example_kernel_is_the_attention_axis_of_a_train_step(monkeypatch):
    """The train workload takes a user impl: llama-tiny (GQA) steps with the example kernel match naive's."""
    import numpy as np

    from xlabench.backends.jax import train_case
    from xlabench.workloads.train import TrainParams

    monkeypatch.syspath_prepend(str(EXAMPLE / "src"))
    p = TrainParams(model="llama-tiny", global_batch=2, seq_len=128, dtype="float32", sharding="dp", devices=1)
    losses = {}
    for impl in ("naive", GOOD):
        setup = train_case.build(p, impl, True, "cpu")
        losses[impl] = np.stack([np.asarray(setup.step()[1]) for _ in range(2)])
    assert np.allclose(losses[GOOD], losses["naive"], rtol=1e-5), losses


# ------------------------------------------------------------------------------ torch_xla

TORCH_MODULE = textwrap.dedent("""
    import torch
    from xlabench.backends.torch_xla.attention_impls import grouped_attention

    def plain(q, k, v, cfg):
        return grouped_attention(q, k, v, cfg.causal, cfg.sm_scale)

    class AsFunction(torch.autograd.Function):
        @staticmethod
        def forward(ctx, q, k, v, cfg):
            return grouped_attention(q, k, v, cfg.causal, cfg.sm_scale)

    def wrong_dtype(q, k, v, cfg):
        return plain(q, k, v, cfg).to(torch.bfloat16)
    """)


@pytest.mark.slow
def test_torch_xla_takes_torch_functions_autograd_functions_and_jax_kernels(tmp_path):
    """On torch_xla: a torch function, a torch.autograd.Function and the example's JAX Pallas kernel
    (framework = "jax": through call_jax) each agree with the reference; a wrong dtype is a wrong row."""
    python_torch_xla = require_torch_xla()
    (tmp_path / "tmod.py").write_text(TORCH_MODULE)
    impls = ["naive", "tmod:plain", "tmod:AsFunction", GOOD, "tmod:wrong_dtype"]
    suite = tmp_path / "suite.yaml"
    suite.write_text(_suite(tmp_path, impls).read_text().replace("backends: [jax]", "backends: [torch_xla]"))
    res = _cli("run", str(suite), "--out", str(tmp_path / "out"), "--python-torch-xla", python_torch_xla,
               cwd=tmp_path, pythonpath=str(EXAMPLE / "src"))
    rows = _rows(tmp_path / "out")
    for name in impls[:-1]:
        assert rows[name]["status"] == "ok" and rows[name]["correct"] == "true", (name, rows[name], res.stdout[-2000:])
    assert "call_jax" in rows[GOOD]["notes"]
    wrong = rows["tmod:wrong_dtype"]
    assert wrong["status"] == "ok" and wrong["correct"] == "false" and "dtype bfloat16" in wrong["notes"]


def test_an_impl_sees_only_the_block_sizes_it_declares(tmp_path, monkeypatch):
    """A block sweep reaches impls that declare block_params; the others run their defaults, noted."""
    from xlabench.backends import user_impl
    from xlabench.backends.jax.attention_case import run_attention_case
    from xlabench.measure.timing import TimingPlan
    from xlabench.workloads import PARAMS, TUNED_PARAMS

    # an impl may declare exactly the block sizes a suite sweeps for attention, each an attention parameter
    swept = TUNED_PARAMS["attention"]
    assert swept and set(swept) <= set(PARAMS["attention"].model_fields)
    assert user_impl.attention_parts("m:f", type("F", (), {"block_params": swept}))["block_params"] == swept
    with pytest.raises(user_impl.ImplLoadError, match="block_params"):
        user_impl.attention_parts("m:f", type("F", (), {"block_params": ("num_heads",)}))
    (tmp_path / "seen.py").write_text(textwrap.dedent("""
        from xlabench.backends.jax.attention_impls import naive
        SEEN = []

        def blocks(q, k, v, cfg):
            SEEN.append((cfg.block_q, cfg.block_k))
            return naive(q, k, v, cfg)
        blocks.block_params = ("block_q",)
        """))
    monkeypatch.syspath_prepend(str(tmp_path))
    params = dict(batch=1, num_heads=2, seq_len=64, head_dim=32, dtype="float32", block_q=32, block_k=64)
    f = run_attention_case(params, "seen:blocks", TimingPlan(warmup=0, iters=1), True, "cpu").fields
    import seen

    assert f["correct"] and set(seen.SEEN) == {(32, None)} and "block_k not taken by seen:blocks" in f["notes"]
    f = run_attention_case(params, "naive", TimingPlan(warmup=0, iters=1), False, "cpu").fields
    assert "block_q and block_k not taken by naive" in f["notes"]


@pytest.mark.slow
def test_the_example_kernel_compiles_for_a_v5e_8(tmp_path):
    """`xlabench compile` of the example suite lowers the user's Pallas kernel through Mosaic for the TPU."""
    require_libtpu()
    res = _cli("compile", str(EXAMPLE / "suite.yaml"), "--target", "v5e-8", "-k", "seq_len=1024", "--impl", GOOD,
               "--out", str(tmp_path / "out"), cwd=tmp_path, pythonpath=str(EXAMPLE / "src"))
    assert res.returncode == 0, res.stdout + res.stderr
    (row,) = _rows(tmp_path / "out").values()
    assert row["status"] == "compiled" and row["device_kind"].startswith("TPU v5") and float(row["peak_memory_bytes"]) > 0


@pytest.mark.slow
def test_the_gate_catches_a_redundant_pass_in_a_pull_requests_copy(tmp_path):
    """The PR's copy visits every key block 16 times (the same softmax, so still correct; measured here
    2.7x slower at 8 visits): gating it against main's run at the suite's settings fails as a regression."""
    suite_text = SUITE.format(impls=f'["{GOOD}"]', timeout=300).replace(
        "measure: {warmup: 0, iters: 2, ", "measure: {warmup: 2, iters: 30, ").replace("seq_len: 64", "seq_len: 128")
    csvs = {}
    for side, slow in (("main", False), ("pr", True)):
        repo = tmp_path / side
        shutil.copytree(EXAMPLE / "src" / "my_kernel", repo / "my_kernel")
        (repo / "suite.yaml").write_text(textwrap.dedent(suite_text).lstrip())
        if slow:
            src = repo / "my_kernel" / "attention.py"
            text = src.read_text()
            for old, new in (("pl.multiple_of(j * block_k, block_k)", "pl.multiple_of((j // 16) * block_k, block_k)"),
                             ("fori_loop(0, n_blocks, body, init)", "fori_loop(0, n_blocks * 16, body, init)")):
                assert old in text
                text = text.replace(old, new)
            src.write_text(text)
            res = _cli("gate", "suite.yaml", "--baseline", str(csvs["main"]), "--out", str(repo / "out"), cwd=repo)
            assert res.returncode == 1, res.stdout + res.stderr
            assert "regression" in res.stdout.lower(), res.stdout
            for path in (repo / "out").rglob("*.csv"):  # the run and the gate's confirming re-run
                if not path.name.endswith(".samples.csv"):
                    row = next(csv.DictReader(open(path)))
                    assert row["status"] == "ok" and row["correct"] == "true"  # slower, not wrong
        else:
            assert _cli("run", "suite.yaml", "--out", str(repo / "out"), cwd=repo).returncode == 0
            csvs[side] = next(p for p in (repo / "out").rglob("*.csv") if not p.name.endswith(".samples.csv"))


@pytest.mark.slow
def test_torch_xla_train_step_takes_a_user_attention(tmp_path):
    """torch_xla's train step with a user torch function (on 1 and 4 devices: SPMD partitions its ops)
    and the example's JAX kernel through call_jax (1 device; on 4 it is skipped, saying why)."""
    python_torch_xla = require_torch_xla()
    (tmp_path / "tmod.py").write_text(TORCH_MODULE)
    (tmp_path / "suite.yaml").write_text(textwrap.dedent(f"""
        name: txla_user_train
        workload: train
        backends: [torch_xla]
        impls: ["tmod:plain", "{GOOD}"]
        params: {{model: custom, arch: llama, vocab_size: 256, d_model: 64, num_layers: 1, num_heads: 4,
                 num_kv_heads: 2, d_ff: 128, seq_len: 32, global_batch: 8, dtype: float32, sharding: dp}}
        matrix:
          devices: [1, 4]
        measure: {{warmup: 0, iters: 2, timeout_s: 600}}
        """).lstrip())
    res = _cli("run", "suite.yaml", "--out", str(tmp_path / "out"), "--python-torch-xla",
               python_torch_xla, cwd=tmp_path, pythonpath=str(EXAMPLE / "src"))
    (path,) = [p for p in (tmp_path / "out").rglob("*.csv") if not p.name.endswith(".samples.csv")]
    rows = {(r["impl"], r["devices"]): r for r in csv.DictReader(open(path))}
    for key in [("tmod:plain", "1"), ("tmod:plain", "4"), (GOOD, "1")]:  # naive's train rows: test_torch_xla
        assert rows[key]["status"] == "ok" and rows[key]["correct"] == "true", (key, rows[key], res.stdout[-2000:])
    assert rows[(GOOD, "4")]["status"] == "skipped" and "call_jax" in rows[(GOOD, "4")]["error"]
