"""The torch_tpu backend's case runners on CPU torch (run by tests/test_torch_tpu.py in the torch_xla environment,
whose torch has no TorchTPU): the TorchTPU runtime is stubbed, its device is the CPU and torch.compile runs the
functions as they are. This checks the plumbing (inputs, layouts, the float32 reference, the train step's
losses, the rows' assembly), never a kernel's speed, and no row of a run comes from it: on a CPU host a
run's torch_tpu rows are skipped. Prints one JSON object."""

# ruff: noqa: E402  (the stubs go in before the backend is imported)
import json
import sys
import types

import torch

sys.modules["torch_tpu"] = types.ModuleType("torch_tpu")  # no TorchTPU on this host: its runtime stubbed
real_compile = torch.compile  # torch.compile's tracer (dynamo), for the one-graph check below
torch.compile = lambda fn=None, **kw: fn  # no compiler on the test host: the functions run eagerly
from xlabench.backends.torch_tpu import env
env.device = lambda: torch.device("cpu")
env.sync = lambda: None
env.device_kind = lambda: "cpu"
env.jax_device_kind = lambda: "cpu"
from xlabench.backends.torch_tpu import attention_case, common, paged_case, train_case
from xlabench.protocol.timing_plan import TimingPlan
from xlabench.workloads.paged import PagedParams
from xlabench.workloads.train import TrainParams

plan = TimingPlan(warmup=1, iters=2)
out = {}
base = dict(batch=1, num_heads=4, num_kv_heads=2, seq_len=128, kv_seq_len=128, head_dim=32, causal=True,
            dtype="float32", block_q=None, block_k=None, devices=1)
for impl in ("naive", "sdpa"):
    for mode in ("fwd", "fwd_bwd"):
        r = attention_case.run_attention_case({**base, "mode": mode}, impl, plan, False, "cpu")
        out[f"{impl}/{mode}"] = [r.correct, r.max_abs_err, len(r.samples), r.timer]
        out[f"phases/{impl}/{mode}"] = sorted(r.phase_s)
pp = PagedParams(batch=2, context_lens="uniform:4..256", num_heads=8, num_kv_heads=2, head_dim=128, page_size=16,
                 pages_per_compute_block=4, dtype="float32", q_tokens=1).model_dump()
r = paged_case.run_paged_case(pp, "naive", plan, False, "cpu")
out["paged/naive"] = [r.correct, r.max_abs_err, len(r.samples)]
out["phases/paged"] = sorted(r.phase_s)
tp = TrainParams(model="gpt2-tiny", seq_len=64, global_batch=2, devices=1, sharding="fsdp", dtype="float32",
                 steps_per_sample=2, remat="none").model_dump()
r = train_case.run_train_case(tp, "naive", plan, False, "cpu")
out["train/naive"] = [r.correct, r.max_abs_err, len(r.samples), r.metrics.get("loss_first")]
out["phases/train"] = sorted(r.phase_s)
# a table entry checked by the row's own timing: off its record, the row is timed again (a fake decision: no
# kernel here has a search that runs on CPU torch)
from xlabench.backends.torch_tpu import tune_case
from xlabench.tune.decide import Tuned


class Check:
    def __init__(self):
        self.seen = []

    def settle(self, row_s):
        self.seen.append(sorted(row_s))
        return Tuned({}, {"tuned": "search"}, "off its record: searched"), True


checks, measured = {}, []
real_measure = common.measure
attention_case.measure = lambda call, plan, **kw: measured.append("attention") or real_measure(call, plan, **kw)
paged_case.measure = lambda call, plan, **kw: measured.append("paged") or real_measure(call, plan, **kw)
tune_case.decide = lambda plan, space, impl, key, build, hints=(), row_check=False: (
    checks.setdefault(impl, Check()), Tuned({}, {"tuned": "table"}, "entry", checks[impl] if row_check else None))[1]
r = attention_case.run_attention_case({**base, "mode": "fwd"}, "naive", plan, False, "cpu")
out["row_check/attention"] = [list(checks["naive"].seen), r.metrics.get("tuned"), r.notes, r.correct]
r = paged_case.run_paged_case(pp, "naive", plan, False, "cpu")
out["row_check/paged"] = [r.metrics.get("tuned"), r.notes, r.correct]
out["row_check/measured"] = measured
# the pure parts: the trace's executions per call, the splash blocks, the libtpu check, the shared model
out["per_call"] = common.per_call_seconds([(0.0, 0.1), (1.0, 0.2), (2.0, 0.3), (3.0, 0.4)], 2)
out["per_call_odd"] = common.per_call_seconds([(0.0, 0.1)] * 3, 2)
out["per_call_none"] = common.per_call_seconds([], 2)
from xlabench.backends.torch_tpu import attention_impls
from xlabench.workloads.attention import AttnConfig
cfg = AttnConfig(causal=True, sm_scale=0.1, block_q=256, block_k=512,
                 blocks=(("block_k_bwd", 256), ("block_kv_compute", 256), ("block_q_bwd", 128), ("fused_bwd", 1)))
out["splash_blocks"] = attention_impls.splash_blocks(cfg, 1024, 1024)
env.version = {"libtpu": "0.0.42.1", "torch-tpu": "0.2.0"}.get
env.metadata.requires = lambda name: ["numpy>=2", "libtpu>=0.0.50"]
mosaic = RuntimeError("failed to compile MLIR module -- the XLA compiler failed with: mosaic failed to compile TPU "
                      "kernel: failed to legalize operation 'math.log2'")
out["shortfall"] = env.libtpu_shortfall(mosaic)
out["no_shortfall"] = env.libtpu_shortfall(RuntimeError("RESOURCE_EXHAUSTED: out of memory"))
from xlabench.backends.torch_shared.model import Transformer, checkpoint_layers
from xlabench.workloads.train import make_tokens
cfg = TrainParams(**tp).config()
model = Transformer(cfg, torch.float32, 0, attention_impls.naive.bind(AttnConfig(True, 0.125), 64, 64))
tokens = torch.from_numpy(make_tokens(TrainParams(**tp), 1))
out["one_layer_code"] = len({id(model.block(i)) for i in range(cfg.num_layers)}) == 1
plain = model(tokens)
checkpoint_layers(model, torch.utils.checkpoint.checkpoint)
out["remat_same_losses"] = bool(torch.equal(plain, model(tokens)))
# The train step's model as TorchTPU compiles it, by each kernel bound for it: one graph, no break (a break
# inside the layer loop leaves the whole forward to eager). splash_sdpa stubbed by SDPA, with its block keywords.
import torch.nn.functional as F
torch.tpu = types.SimpleNamespace(ops=types.SimpleNamespace(
    splash_sdpa=lambda q, k, v, scale, is_causal, enable_gqa, **blocks: F.scaled_dot_product_attention(
        q, k, v, is_causal=is_causal, scale=scale, enable_gqa=enable_gqa)))
# a case that names no kv_seq_len (the train step's attention, tuned at its shape) runs its kernel at kv_len
from xlabench.workloads.attention import AttentionParams
pk = AttentionParams(batch=1, num_heads=2, seq_len=64, head_dim=32, causal=True, dtype="float32", mode="fwd")
qkv = tuple(torch.randn(1, 2, 64, 32) for _ in range(3))
out["no_kv_seq_len"] = list(attention_case.step(pk, attention_case.record("splash"), AttnConfig(True, 0.125), qkv)()[0].shape)
for impl in ("naive", "sdpa", "splash"):
    torch._dynamo.reset()
    model = Transformer(cfg, torch.float32, 0, train_case.attention_fn(impl, cfg, TrainParams(**tp), None, "cpu", {}))
    try:
        real_compile(lambda t: model.train_loss(t, 16), fullgraph=True, backend="eager")(tokens)  # the step's
        out[f"one_graph/{impl}"] = True
    except Exception as e:  # noqa: BLE001 (the test prints what broke the graph)
        out[f"one_graph/{impl}"] = f"{type(e).__name__}: {str(e)[:400]}"
# The train step's optimizer: AdamW over one flat buffer takes the steps torch's AdamW takes (float32, three steps,
# decay on), its parameters stay buffers of their own, and its update compiles as one graph that later steps reuse
from xlabench.backends.torch_shared.optim import FlatAdamW
from xlabench.workloads.train import ADAMW
gen = torch.Generator().manual_seed(0)
shapes = [(5, 3), (7,), (2, 4, 3)]
ours = [torch.nn.Parameter(torch.randn(s, generator=gen)) for s in shapes]
theirs = [torch.nn.Parameter(p.detach().clone()) for p in ours]
init = [p.detach().clone() for p in ours]
hyper = dict(lr=0.05, betas=(ADAMW["b1"], ADAMW["b2"]), eps=ADAMW["eps"], weight_decay=ADAMW["weight_decay"])
torch._dynamo.reset()
torch._dynamo.config.error_on_recompile = True
flat = FlatAdamW(ours, **hyper, compile=lambda fn: real_compile(fn, fullgraph=True, backend="eager"))
ref = torch.optim.AdamW(theirs, **hyper)
for _ in range(3):
    grads = [torch.randn(s, generator=gen) for s in shapes]
    for p, q, g in zip(ours, theirs, grads):
        p.grad, q.grad = g.clone(), g.clone()
    flat.step()
    ref.step()
    flat.zero_grad()
torch._dynamo.config.error_on_recompile = False
out["adamw_max_diff"] = max(float((p - q).detach().abs().max()) for p, q in zip(ours, theirs))
out["adamw_moved"] = min(float((p - p0).abs().max()) for p, p0 in zip(ours, init))
out["adamw_apart"] = len({p.untyped_storage().data_ptr() for p in ours}) == len(ours)
out["adamw_steps"] = float(flat.t)
# The train step's loss: chunked, its gradient finished in the forward; the same mean, per-sequence losses and
# gradients as the whole logits' (a padded vocabulary, a chunk that does not divide the sequence), and compiled as
# one graph, forward and backward (aot_eager: AOT autograd traces both, as TorchTPU's backend does)
ccfg = cfg.replace(vocab_size=500)  # padded to 512
toks = torch.randint(0, 500, (2, 65), generator=torch.Generator().manual_seed(3))


def loss_grads(chunk, compiled=False):
    torch._dynamo.reset()
    m = Transformer(ccfg, torch.float32, 0, attention_impls.naive.bind(AttnConfig(True, 0.125), 64, 64))
    if chunk is None:
        per_seq = m(toks)
        mean = per_seq.mean()
    else:
        f = real_compile(lambda t: m.train_loss(t, chunk), fullgraph=True, backend="aot_eager") if compiled \
            else (lambda t: m.train_loss(t, chunk))
        mean, per_seq = f(toks)
    mean.backward()
    return [q.grad for q in m.parameters()], per_seq.detach(), mean.detach()


whole = loss_grads(None)
for name, got in (("0", loss_grads(0)), ("24", loss_grads(24)), ("24/compiled", loss_grads(24, compiled=True))):
    out[f"chunked_loss/{name}"] = [max(float((a - b).abs().max()) for a, b in zip(got[0], whole[0])),
                                   float((got[1] - whole[1]).abs().max()), float((got[2] - whole[2]).abs()),
                                   got[1].requires_grad]
out["chunked_loss/grad_scale"] = max(float(g.abs().max()) for g in whole[0])
# a peak TorchTPU reports that no chip could hold is left out, saying so
torch.accelerator.max_memory_allocated = lambda: 139494737234248
out["peak_impossible"] = list(common.peak_memory(16 * 2**30))
torch.accelerator.max_memory_allocated = lambda: 3 * 2**30
out["peak_plausible"] = list(common.peak_memory(16 * 2**30))
print(json.dumps(out))
