"""The catalog of implementations: names, where each runs, what it is. Framework-free on purpose.

The parent process validates suites and plans skipped rows from this table without importing a
framework; each backend module maps the same names to code (tests check the two agree).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ImplInfo:
    name: str
    backend: str
    workloads: tuple[str, ...]
    platforms: tuple[str, ...]  # where it runs natively
    interpret_on: tuple[str, ...]  # where it runs in a Pallas interpreter (pipeline check, not speed)
    doc: str

    def runs_on(self, platform: str) -> bool:
        return platform in self.platforms or platform in self.interpret_on

    def interpreted(self, platform: str) -> bool:
        return platform in self.interpret_on and platform not in self.platforms


_ATTN = ("attention", "train")
_ALL = ("cpu", "gpu", "tpu")
_PAGED = ("paged_attention",)

CATALOG: tuple[ImplInfo, ...] = (
    ImplInfo("naive", "jax", _ATTN, _ALL, (),
             "plain jnp einsum + softmax in float32 logits; XLA fuses it"),
    ImplInfo("xla_sdpa", "jax", _ATTN, _ALL, (),
             "jax.nn.dot_product_attention(implementation='xla')"),
    ImplInfo("flash", "jax", _ATTN, ("tpu",), ("cpu",),
             "Pallas TPU flash attention (jax.experimental.pallas.ops.tpu.flash_attention)"),
    ImplInfo("splash", "jax", _ATTN, ("tpu",), ("cpu",),
             "Pallas TPU splash attention (splash_attention_kernel.make_splash_mha/mqa)"),
    ImplInfo("pallas_gpu", "jax", _ATTN, ("gpu",), ("cpu",),
             "Pallas Triton flash attention (jax.experimental.pallas.ops.gpu.attention.mha)"),
    ImplInfo("cudnn", "jax", _ATTN, ("gpu",), (),
             "jax.nn.dot_product_attention(implementation='cudnn')"),
    ImplInfo("naive", "jax", _PAGED, _ALL, (),
             "gather every sequence's pages into dense K/V, mask by length, plain jnp attention"),
    ImplInfo("paged", "jax", _PAGED, ("tpu",), ("cpu",),
             "Pallas TPU paged_attention (jax.experimental.pallas.ops.tpu.paged_attention); K/V cast to bf16"),
    ImplInfo("ragged_paged", "jax", _PAGED, ("tpu",), ("cpu",),
             "Pallas TPU ragged_paged_attention (mixed prefill/decode); on CPU tried in the interpreter, fails: skipped"),
    ImplInfo("paged_gpu", "jax", _PAGED, ("gpu",), ("cpu",),
             "Pallas Triton paged_attention (jax.experimental.pallas.ops.gpu.paged_attention)"),
    # torch_xla: TPU and CPU (PJRT). On CPU the Pallas kernels are the same JAX kernels, interpreted,
    # inside the torch_xla graph through torch_xla.core.xla_builder.call_jax.
    ImplInfo("naive", "torch_xla", _ATTN, ("cpu", "tpu"), (),
             "plain torch matmul + softmax (float32 logits) on the XLA device; XLA fuses it"),
    ImplInfo("sdpa", "torch_xla", _ATTN, ("cpu", "tpu"), (),
             "torch.nn.functional.scaled_dot_product_attention on the XLA device"),
    ImplInfo("flash", "torch_xla", _ATTN, ("tpu",), ("cpu",),
             "torch_xla.experimental.custom_kernel.flash_attention (CPU: the JAX Pallas kernel via call_jax)"),
    ImplInfo("splash", "torch_xla", _ATTN, ("tpu",), ("cpu",),
             "torch_xla.experimental.splash_attention (CPU: the JAX splash kernel via call_jax)"),
    ImplInfo("naive", "torch_xla", _PAGED, ("cpu", "tpu"), (),
             "gather every sequence's pages into dense K/V, mask by length, plain torch attention"),
    ImplInfo("paged", "torch_xla", _PAGED, ("tpu",), ("cpu",),
             "custom_kernel.paged_attention (CPU: the JAX Pallas paged kernel via call_jax); K/V cast to bf16"),
    # Their Pallas kernels do not run in JAX's CPU interpreter: on CPU these rows are torch_xla's
    # use_kernel=False reference paths (plain torch ops), not kernels; the rows' notes say so.
    ImplInfo("multi_queries_paged", "torch_xla", _PAGED, ("cpu", "tpu"), (),
             "custom_kernel.multi_queries_paged_attention (CPU: its use_kernel=False reference, not the kernel)"),
    ImplInfo("ragged_paged", "torch_xla", _PAGED, ("cpu", "tpu"), (),
             "custom_kernel.ragged_paged_attention (CPU: its use_kernel=False reference, not the kernel)"),
)

BACKENDS = ("jax", "torch_xla")


def find(backend: str, name: str, workload: str | None = None) -> ImplInfo | None:
    """The catalog entry of an impl (of ``workload`` when given: one name may serve several workloads)."""
    for info in CATALOG:
        if info.backend == backend and info.name == name and (workload is None or workload in info.workloads):
            return info
    return None


def names_for(workload: str, backend: str | None = None) -> list[str]:
    """Impl names valid for a workload (optionally one backend), in catalog order, without repeats."""
    out: list[str] = []
    for info in CATALOG:
        if workload in info.workloads and (backend is None or info.backend == backend):
            if info.name not in out:
                out.append(info.name)
    return out
