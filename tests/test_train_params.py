"""Train workload without a framework: presets vs published sizes, FLOP formulas, params validation."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from xlabench import flops, results
from xlabench import suite as suite_lib
from xlabench.workloads import PARAMS
from xlabench.workloads import model_presets as mp
from xlabench.workloads.train import TrainParams, default_mesh, parse_mesh

# Published parameter counts (Hugging Face checkpoints: GPT2LMHeadModel with tied embeddings,
# LlamaForCausalLM for Llama-2-7b-hf and Meta-Llama-3-8B).
PUBLISHED = {"gpt2-124m": 124_439_808, "llama2-7b": 6_738_415_616, "llama3-8b": 8_030_261_248}


@pytest.mark.parametrize("name,count", PUBLISHED.items())
def test_param_count_matches_published_checkpoint(name: str, count: int) -> None:
    assert mp.param_count(mp.PRESETS[name]) == count


@pytest.mark.parametrize("name", ["gpt2-2b", "llama2-2b"])
def test_2b_presets_are_2b(name: str) -> None:
    assert 1.9e9 < mp.param_count(mp.PRESETS[name]) < 2.2e9


def test_palm_flops_match_nanogpt_estimate_for_gpt2_124m() -> None:
    # nanoGPT estimate_mfu: N = params without the position table, 6N + 12 L H Q T per token.
    n = 124_439_808 - 1024 * 768
    per_token = 6 * n + 12 * 12 * 12 * 64 * 1024
    assert per_token == 855_166_464
    assert flops.train_step_flops_palm(mp.PRESETS["gpt2-124m"], 8, 1024, mp.matmul_param_count(mp.PRESETS["gpt2-124m"])) == 8 * 1024 * per_token


def test_gpt2_124m_worked_example() -> None:
    """The docs' worked example, term by term (docs/train.md)."""
    cfg, b, s = mp.PRESETS["gpt2-124m"], 8, 1024
    weights = 12 * (768 * 3 * 768 + 768 * 768 + 2 * 768 * 3072) + 768 * 50257
    assert weights == 123_532_032
    attn = 4 * (s + 1) / 2 * 12 * 64 * 12
    assert flops.train_step_flops(cfg, b, s) == 3 * b * s * (2 * weights + attn) == 6_536_155_889_664


@pytest.mark.parametrize("name", list(mp.PRESETS))
def test_maxtext_noncausal_equals_palm_up_to_biases_and_norms(name: str) -> None:
    cfg, b, s = mp.PRESETS[name], 4, 256
    full = flops.train_step_flops(cfg, b, s, causal=False)
    palm = flops.train_step_flops_palm(cfg, b, s, mp.matmul_param_count(cfg))
    weights = flops.train_matmul_flops_per_token(cfg) / 2
    no_matmul = mp.matmul_param_count(cfg) - weights  # biases and norm scales: in PaLM's N only
    assert 0 <= no_matmul < 0.01 * weights
    assert palm - full == pytest.approx(6 * b * s * no_matmul, rel=1e-9)
    if "tiny" not in name:
        assert (palm - full) / palm < 1e-3


def test_causal_saves_exactly_the_masked_scores() -> None:
    cfg, b, s = mp.PRESETS["llama2-7b"], 2, 4096
    saved = flops.train_step_flops(cfg, b, s, causal=False) - flops.train_step_flops(cfg, b, s, causal=True)
    per_layer_fwd = 4 * b * s * (s - (s + 1) / 2) * cfg.num_heads * cfg.head_dim
    assert saved == pytest.approx(3 * cfg.num_layers * per_layer_fwd, rel=1e-12)


def test_gqa_shrinks_kv_projection_flops() -> None:
    mha = mp.PRESETS["llama3-8b"].replace(num_kv_heads=32)
    gqa = mp.PRESETS["llama3-8b"]
    d = 4096 * 2 * (32 - 8) * 128 * 32  # 2 FLOPs x (K and V) x removed heads x layers
    assert flops.train_matmul_flops_per_token(mha) - flops.train_matmul_flops_per_token(gqa) == 2 * d


def _params(**kw) -> TrainParams:
    base = {"model": "gpt2-tiny", "global_batch": 8, "seq_len": 128, "devices": 8}
    return TrainParams(**{**base, **kw})


def test_defaults_resolve_to_explicit_dims_and_mesh() -> None:
    p = _params(sharding="2d").resolved()
    assert p.mesh == "data=1,fsdp=4,tensor=2"
    assert (p.arch, p.d_model, p.num_layers, p.num_heads, p.num_kv_heads, p.head_dim, p.d_ff, p.vocab_size) == \
           ("gpt2", 128, 2, 4, 4, 32, 512, 512)
    again = TrainParams(**p.model_dump())  # what the worker re-validates
    assert again.resolved() == p
    assert default_mesh("fsdp", 4) == {"data": 1, "fsdp": 4, "tensor": 1}
    assert default_mesh("2d", 4) == {"data": 1, "fsdp": 2, "tensor": 2}
    assert default_mesh("tp", 2) == {"data": 1, "fsdp": 1, "tensor": 2}


@pytest.mark.parametrize("name", ["gpt2-2b", "llama2-2b", "llama-1b", "gpt2-124m", "gpt2-tiny"])
def test_a_case_on_its_own_is_unrolled_whatever_its_preset_is_called(name: str) -> None:
    """Scanned or unrolled is decided by compile time and fit (a suite's ladder runs scanned and its best
    point unrolled: suite/slice_fit.py), not by the preset's name: a case on its own is unrolled."""
    p = TrainParams(model=name, global_batch=1, seq_len=128)
    assert p.scan_layers is None and p.scan() is False and p.resolved().scan_layers is False
    assert TrainParams(model=name, global_batch=1, seq_len=128, scan_layers=True).resolved().scan_layers is True


def test_per_device_batch_makes_the_global_batch_and_the_same_case_id() -> None:
    from xlabench import results

    p = TrainParams(model="gpt2-tiny", per_device_batch=2, devices=8, seq_len=64).resolved()
    q = TrainParams(model="gpt2-tiny", global_batch=16, devices=8, seq_len=64).resolved()
    assert p.global_batch == 16 and "per_device_batch" not in p.model_dump()
    assert results.case_id("train", "jax", "naive", p.model_dump()) == results.case_id("train", "jax", "naive",
                                                                                        q.model_dump())
    with pytest.raises(ValueError, match="disagree"):
        TrainParams(model="gpt2-tiny", per_device_batch=2, global_batch=4, devices=8, seq_len=64)
    with pytest.raises(ValueError, match="per_device_batch must be an integer >= 1"):
        TrainParams(model="gpt2-tiny", per_device_batch=0, seq_len=64)
    with pytest.raises(ValueError, match="give global_batch"):
        TrainParams(model="gpt2-tiny", seq_len=64)


def test_suite_cases_carry_scan_layers_resolved(tmp_path) -> None:
    """The CSV shows what ran: the default made explicit (unrolled: no batch ladder here), an explicit value
    kept; a batch ladder with no scan_layers runs scanned, its best point to be run again unrolled."""
    path = tmp_path / "scan.yaml"
    path.write_text("name: scan\nworkload: train\nimpls: [naive]\nparams: {seq_len: 128, global_batch: 8}\n"
                    "matrix:\n  'model,scan_layers': [[gpt2-2b, null], [gpt2-tiny, null], [gpt2-tiny, true]]\n")
    cases = suite_lib.load(path).cases("")
    assert [c.params["scan_layers"] for c in cases] == [False, False, True]
    assert len({c.case_id for c in cases}) == 3 and not any(c.unroll_best for c in cases)
    assert results._cell(cases[2].params["scan_layers"]) == "true"
    path.write_text("name: scan\nworkload: train\nimpls: [naive]\nparams: {seq_len: 128, model: gpt2-tiny}\n"
                    "matrix:\n  global_batch: [8, 16]\n")
    cases = suite_lib.load(path).cases("")
    assert [(c.params["scan_layers"], c.unroll_best) for c in cases] == [(True, True), (True, True)]


def test_mesh_as_mapping_or_string() -> None:
    assert parse_mesh({"data": 4, "fsdp": 2}) == {"data": 4, "fsdp": 2, "tensor": 1}
    assert parse_mesh("data=2, tensor=4") == {"data": 2, "fsdp": 1, "tensor": 4}
    assert _params(sharding="2d", mesh={"data": 2, "fsdp": 2, "tensor": 2}).resolved().mesh == "data=2,fsdp=2,tensor=2"


def test_preset_dims_can_be_overridden() -> None:
    p = _params(model="gpt2-124m", num_layers=2, seq_len=256, devices=1, sharding="dp")
    cfg = p.config()
    assert (cfg.num_layers, cfg.d_model, cfg.num_heads) == (2, 768, 12)
    custom = TrainParams(model="custom", arch="llama", vocab_size=1000, d_model=64, num_layers=1, num_heads=4,
                         num_kv_heads=2, d_ff=128, global_batch=2, seq_len=64)
    assert custom.config().head_dim == 16 and custom.params_count() == mp.param_count(custom.config())


BAD = [
    (dict(sharding="fsdp", mesh={"fsdp": 4}), "mesh data=1,fsdp=4,tensor=1 spans 4 devices but devices is 8"),
    (dict(sharding="fsdp", mesh={"fsdp": 8}, global_batch=12), "global_batch 12 must be divisible by data x fsdp = 8"),
    (dict(sharding="tp", mesh={"data": 1, "tensor": 8}), "num_heads (4) must be divisible by mesh tensor=8"),
    (dict(model="llama-tiny", sharding="tp", mesh={"data": 2, "tensor": 4}), "num_kv_heads (2) must be divisible by mesh tensor=4"),
    (dict(sharding="dp", mesh={"data": 4, "fsdp": 2}), "sharding 'dp' uses mesh axes data; axis fsdp=2 must be 1"),
    (dict(sharding="fsdp", mesh={"fsdp": 4, "tensor": 2}), "axis tensor=2 must be 1 (use 2d"),
    (dict(mesh={"pipeline": 8}), "mesh axis 'pipeline' is not one of: data, fsdp, tensor"),
    (dict(mesh="data:8"), "expected axis=size pairs"),
    (dict(mesh={"data": 0}), "mesh axis data: size must be an integer >= 1"),
    (dict(model="gpt3"), "unknown model preset 'gpt3'"),
    (dict(seq_len=512), "seq_len 512 exceeds the 256 learned positions of gpt2-tiny"),
    (dict(model="custom"), "model 'custom' needs arch, vocab_size, d_model, num_layers, num_heads, d_ff"),
    (dict(num_heads=3), "d_model"),  # 128 % 3: the head_dim derived would not tile d_model
    (dict(remat="some"), "remat"),
    (dict(batch=8), "Extra inputs are not permitted"),
]


@pytest.mark.parametrize("kw,message", BAD)
def test_bad_params_say_what_is_wrong(kw: dict, message: str) -> None:
    with pytest.raises(ValidationError) as e:
        _params(**kw)
    assert message in str(e.value)


def test_every_train_param_has_a_csv_column() -> None:
    fields = PARAMS["train"].model_fields
    missing = {n for n, f in fields.items() if not f.exclude} - set(results.CASE_COLUMN_NAMES)
    assert not missing
    # a planning input only: it resolves into global_batch (the row holds the batch it made)
    assert {n for n, f in fields.items() if f.exclude} == {"per_device_batch"}
    for col in ("flops_palm", "params_count", "tokens_per_s_per_device", "loss_first", "loss_last", "losses"):
        assert col in results.COLUMN_NAMES


def test_invalid_mesh_in_suite_names_file_and_case(tmp_path) -> None:
    path = tmp_path / "bad.yaml"
    path.write_text("name: bad\nworkload: train\nimpls: [naive]\n"
                    "params: {model: gpt2-tiny, seq_len: 128, devices: 8}\n"
                    "matrix:\n  global_batch: [8]\n  'sharding,mesh': [[fsdp, {fsdp: 4}]]\n")
    with pytest.raises(suite_lib.SuiteError) as e:
        suite_lib.load(path)
    msg = str(e.value)
    assert str(path) in msg and "spans 4 devices but devices is 8" in msg


# cpu and v4-8 (the seed study): JAX and torch_xla cases (llama: torch_xla without splash); gpu: JAX only.
@pytest.mark.parametrize("name,profiles", [("gpt2", {"cpu": 36, "v4-8": 96, "gpu": 16}),
                                           ("llama", {"cpu": 30, "v4-8": 60, "gpu": 12})])
def test_model_suites_expand(name: str, profiles: dict) -> None:
    s = suite_lib.load(f"suites/{name}.yaml")
    for prof, n in profiles.items():
        cases = s.cases(prof)
        assert len(cases) == n
    cpu = s.cases("cpu")
    assert {c.params["devices"] for c in cpu} == {8} and max(c.params["seq_len"] for c in cpu) <= 256
    assert {c.params["sharding"] for c in cpu} == {"fsdp", "2d", "auto"}


def test_a_train_row_states_its_mfu_under_palms_convention_beside_the_causal_count():
    """Measured on the v5e (gpt2-355m, seq 1024, batch 8, splash): 212.5 ms a step is MFU 44.5% on the causal
    count (flops) and 47.4% on PaLM's non-causal 6N + 12LHQT (flops_palm), the convention published MFU
    figures use: the row gives both."""
    from xlabench.protocol.worker_messages import CaseResult
    from xlabench.run.metrics import derive
    from xlabench.run.rows import measured

    r = CaseResult(samples=(0.2124595,), timer="wallclock",
                   metrics={"flops": 1.861108e13, "flops_palm": 1.986263e13})
    out = derive(measured([r]), {"platform": "tpu", "device_kind": "TPU v5 lite", "device_count": 1}, 1, None)
    assert out["peak_tflops"] == 197
    assert out["mfu"] == pytest.approx(0.4447, abs=1e-4) and out["mfu_palm"] == pytest.approx(0.4746, abs=1e-4)
    attention = CaseResult(samples=(1e-3,), timer="wallclock", metrics={"flops": 1e11})
    assert "mfu_palm" not in derive(measured([attention]), {"platform": "tpu", "device_kind": "TPU v5 lite"}, 1, None)
